"""PartitionReassignmentManager: moving a partition's replicas (KIP-455), the
controller's reassignment room.

Kafka keeps this in KafkaController itself, as the family around
``onPartitionReassignment`` (its events ApiPartitionReassignment,
ZkPartitionReassignment, ListPartitionReassignments and the ISR change that
finishes one); pylog gives the family a file of its own beside the
TopicDeletionManager, named after it. It serves both ways in: the
AlterPartitionReassignments and ListPartitionReassignments APIs and the
ZooKeeper-era ``/admin/reassign_partitions`` znode (acted on when created;
each partition leaves it as it completes, and a later API request for a
partition takes it out).

With RS the full replica set, ORS the original and TRS the target replicas,
AR = TRS - ORS (adding) and RR = ORS - TRS (removing), a reassignment writes
RS = ORS + TRS with AR and RR into the topic's znode, has the leader track
the new replicas until TRS is all in the ISR, then sets RS = TRS, moves the
leader into TRS if it must and stops and deletes RR (steps U, A and B of
:meth:`PartitionReassignmentManager.on_partition_reassignment`).

Every method runs inside an event of the controller's queue.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from pylog.common.topic_partition import TopicPartition
from pylog.controller.api_error import ApiError
from pylog.controller.controller_channel_manager import ControllerBrokerRequestBatch
from pylog.controller.controller_context import ReplicaAssignment, ReplicaState
from pylog.controller.election import LeaderElectionStrategy
from pylog.errors import ErrorCode
from pylog.metadata.kafka_zk_client import (
    ControllerMovedError,
    ZkError,
    ZkNodeExists,
    ZkVersionMismatch,
)
from pylog.metadata.zk_data import (
    LeaderAndIsr,
    ReassignPartitionsZNode,
    TopicReplicaAssignment,
    ZkDataError,
)

if TYPE_CHECKING:
    from pylog.controller.kafka_controller import KafkaController

__all__ = ["PartitionReassignmentManager"]

_log = logging.getLogger("pylog.controller")

_NONE = ApiError(ErrorCode.NONE)


class PartitionReassignmentManager:
    """The reassignments of the controller in office: started, carried on as
    their replicas catch up, completed or cancelled."""

    def __init__(self, controller: KafkaController) -> None:
        # The controller's batches (new_batch), event queue (put_active) and
        # office (is_active) are asked of it; its parts are fixed for its life.
        self._controller = controller
        self._zk = controller.zk
        self._context = controller.context
        self._replica_state_machine = controller.replica_state_machine
        self._partition_state_machine = controller.partition_state_machine
        #: /admin/reassign_partitions existed at the watch's last call
        self._znode_seen = False

    def reset(self) -> None:
        """A new term in office: the znode's next sighting is a request."""
        self._znode_seen = False

    def list_partition_reassignments(
        self, wanted: set[TopicPartition] | None
    ) -> dict[TopicPartition, ReplicaAssignment]:
        """The reassignments in flight among ``wanted`` (None: all of them)."""
        ctx = self._context
        tps = ctx.partitions_being_reassigned() if wanted is None else sorted(wanted)
        found = {tp: ctx.full_assignment(tp) for tp in tps}
        return {tp: a for tp, a in found.items() if a.is_being_reassigned}

    async def process_api_partition_reassignment(
        self,
        reassignments: dict[TopicPartition, list[int] | None],
        allow_replication_factor_change: bool = True,
    ) -> dict[TopicPartition, ApiError] | ApiError:
        if not self._controller.is_active:
            return ApiError(ErrorCode.NOT_CONTROLLER)
        results: dict[TopicPartition, ApiError] = {}
        to_reassign: dict[TopicPartition, ReplicaAssignment] = {}
        for tp, target in sorted(reassignments.items()):
            error = self._validate_replicas(tp, target) if target is not None else None
            if error is None and target is not None and not allow_replication_factor_change:
                error = replication_factor_unchanged(
                    len(self._context.full_assignment(tp).origin_replicas), target
                )
            if error is not None:
                results[tp] = error
                continue
            built = self._maybe_build_reassignment(tp, target)
            if built is None:
                results[tp] = ApiError(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS)
            else:
                to_reassign[tp] = built
        # The latest request wins over /admin/reassign_partitions.
        await self._maybe_remove_from_zk_reassignment(lambda tp, _: tp in to_reassign)
        results.update(await self._maybe_trigger_partition_reassignment(to_reassign))
        return results

    def _validate_replicas(self, tp: TopicPartition, replicas: list[int]) -> ApiError | None:
        """Kafka's checks of a reassignment's target replicas."""
        if not replicas:
            return ApiError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                "Empty replica list specified in partition reassignment.",
            )
        if len(set(replicas)) != len(replicas):
            return ApiError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Duplicate replica ids in partition reassignment replica list: {replicas}",
            )
        if any(r < 0 for r in replicas):
            message = f"Invalid broker id in replica list: {replicas}"
            return ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, message)
        adding = self._context.full_assignment(tp).reassign_to(replicas).adding
        live = self._context.live_broker_ids()
        if not set(adding) <= live:
            return ApiError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                "Replica assignment has brokers that are not alive. Replica list: "
                f"{list(adding)}, live broker list: {sorted(live)}",
            )
        return None

    def _maybe_build_reassignment(
        self, tp: TopicPartition, target: list[int] | None
    ) -> ReplicaAssignment | None:
        """The assignment a request makes of the current one; a cancellation
        (``target`` None) goes back to the original replicas, and is None when
        no reassignment is in flight."""
        current = self._context.full_assignment(tp)
        if current.is_being_reassigned:
            return current.reassign_to(target if target is not None else current.origin_replicas)
        return current.reassign_to(target) if target is not None else None

    async def _maybe_trigger_partition_reassignment(
        self, reassignments: dict[TopicPartition, ReplicaAssignment]
    ) -> dict[TopicPartition, ApiError]:
        ctx = self._context
        results: dict[TopicPartition, ApiError] = {}
        for tp, assignment in reassignments.items():
            if tp.topic in ctx.topics_being_deleted or not ctx.replicas(tp):
                results[tp] = ApiError(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."
                )
                continue
            try:
                await self.on_partition_reassignment(tp, assignment)
            except ControllerMovedError:
                raise
            except Exception:
                _log.exception("reassigning %s failed", tp)
                results[tp] = ApiError(ErrorCode.UNKNOWN_SERVER_ERROR)
                continue
            results[tp] = _NONE
        return results

    async def on_partition_reassignment(
        self, tp: TopicPartition, assignment: ReplicaAssignment
    ) -> None:
        """Kafka's onPartitionReassignment. With RS the full replica set, ORS
        the original and TRS the target ones, AR = TRS - ORS, RR = ORS - TRS:

        U. the assignment (RS = ORS + TRS, AR, RR) is written to the topic's
           znode, then kept in memory; replicas a supplanted reassignment was
           adding, not wanted now, are stopped and deleted.
        A. while TRS is not all in the ISR: leader epoch + 1 and LeaderAndIsr
           to RS (AR as new replicas), so the leader tracks the new replicas
           and they fetch; their joining the ISR (an ISR change notification)
           brings the partition back here.
        B. then: RS = TRS in memory; the leader moves into TRS if it is not in
           it (or not alive), else leader epoch + 1; RR leave the ISR and are
           stopped and deleted (StopReplica); the topic's znode gets RS = TRS,
           the partition leaves /admin/reassign_partitions, and every broker
           gets UpdateMetadata."""
        ctx = self._context
        await self._update_current_reassignment(tp, assignment)
        rsm = self._replica_state_machine
        batch = self._controller.new_batch()
        if not await self.is_reassignment_complete(tp, assignment):
            _log.info("reassigning %s: replicas %s, adding %s, removing %s", tp,
                      list(assignment.replicas), list(assignment.adding),
                      list(assignment.removing))  # fmt: skip
            if await self._update_leader_epoch(tp):
                batch.add_leader_and_isr(assignment.origin_replicas, tp)
                batch.add_leader_and_isr(assignment.adding, tp, is_new=True)
            await rsm.handle_state_changes(
                [(tp, r) for r in assignment.adding], ReplicaState.NewReplica, batch
            )
            batch.send()
            return
        await rsm.handle_state_changes(
            [(tp, r) for r in assignment.adding], ReplicaState.OnlineReplica, batch
        )
        done = ReplicaAssignment(tuple(assignment.target_replicas))
        ctx.set_full_assignment(tp, done)
        await self._move_reassigned_partition_leader_if_required(tp, done, batch)
        await self._stop_removed_replicas(tp, list(assignment.removing), batch)
        batch.send()
        await self._update_replica_assignment_for_partition(tp, done)
        await self._maybe_remove_from_zk_reassignment(
            lambda t, replicas: t == tp and replicas == list(done.replicas)
        )
        batch = self._controller.new_batch()
        batch.add_update_metadata(ctx.live_brokers, [tp])
        batch.send()
        _log.info("reassignment of %s complete: replicas %s", tp, list(done.replicas))

    async def _update_current_reassignment(
        self, tp: TopicPartition, assignment: ReplicaAssignment
    ) -> None:
        ctx = self._context
        current = ctx.full_assignment(tp)
        if current == assignment:
            return
        await self._update_replica_assignment_for_partition(tp, assignment)
        ctx.set_full_assignment(tp, assignment)
        unneeded = [r for r in current.replicas if r not in assignment.replicas]
        if unneeded:
            batch = self._controller.new_batch()
            await self._stop_removed_replicas(tp, unneeded, batch)
            batch.send()

    async def is_reassignment_complete(
        self, tp: TopicPartition, assignment: ReplicaAssignment
    ) -> bool:
        """Every target replica is in the ISR (as ZooKeeper has it now)."""
        if not assignment.is_being_reassigned:
            return True
        state = await self._zk.run(self._zk.get_partition_state, tp.topic, tp.partition)
        return state is not None and set(assignment.target_replicas) <= set(state.isr)

    async def _move_reassigned_partition_leader_if_required(
        self, tp: TopicPartition, done: ReplicaAssignment, batch: ControllerBrokerRequestBatch
    ) -> None:
        state = self._context.leadership.get(tp)
        leader = state.leader if state is not None else -1
        if leader in done.replicas and leader in self._context.live_broker_ids():
            # The leader stays: a new leader epoch carries the smaller replica set.
            if await self._update_leader_epoch(tp):
                batch.add_leader_and_isr(list(done.replicas), tp)
            return
        await self._partition_state_machine.elect_leaders(
            [tp], LeaderElectionStrategy.ReassignPartition, batch
        )

    async def _stop_removed_replicas(
        self, tp: TopicPartition, removed: list[int], batch: ControllerBrokerRequestBatch
    ) -> None:
        """Out of the ISR, stopped, deleted (StopReplica with delete)."""
        replicas = [(tp, r) for r in removed]
        rsm = self._replica_state_machine
        for target in (
            ReplicaState.OfflineReplica,
            ReplicaState.ReplicaDeletionStarted,
            ReplicaState.ReplicaDeletionSuccessful,
            ReplicaState.NonExistentReplica,
        ):
            await rsm.handle_state_changes(replicas, target, batch)

    async def _update_leader_epoch(self, tp: TopicPartition) -> bool:
        """Leader epoch + 1 (leader and ISR as they are), so the replicas take
        a LeaderAndIsr with a new replica set; False when the partition has no
        state."""
        ctx = self._context
        for _ in range(10):
            current = await self._zk.run(self._zk.get_partition_state, tp.topic, tp.partition)
            if current is None:
                return False
            new = LeaderAndIsr(
                current.leader,
                current.leader_epoch + 1,
                list(current.isr),
                ctx.epoch,
                current.leader_recovery_state,
            )
            done = await self._zk.run(
                self._zk.update_leader_and_isr,
                tp.topic,
                tp.partition,
                new,
                current.zk_version,
                controller_epoch_zk_version=ctx.epoch_zk_version,
            )
            if done.succeeded:
                ctx.leadership[tp] = LeaderAndIsr(
                    new.leader,
                    new.leader_epoch,
                    new.isr,
                    new.controller_epoch,
                    new.leader_recovery_state,
                    done.version,
                )
                return True
        _log.error("could not raise the leader epoch of %s: its state kept changing", tp)
        return False

    async def _update_replica_assignment_for_partition(
        self, tp: TopicPartition, assignment: ReplicaAssignment
    ) -> None:
        """Write one partition's replicas (and AR, RR) into the topic's znode,
        conditionally on its version (a broker adding partitions meanwhile is
        read again)."""
        zk = self._zk
        for _ in range(10):
            got = await zk.run(zk.get_topic_assignment, tp.topic)
            if got is None:
                raise ZkError(f"the topic {tp.topic} has no assignment")
            current, version = got
            adding = {p: r for p, r in current.adding_replicas.items() if p != tp.partition}
            removing = {p: r for p, r in current.removing_replicas.items() if p != tp.partition}
            if assignment.adding:
                adding[tp.partition] = list(assignment.adding)
            if assignment.removing:
                removing[tp.partition] = list(assignment.removing)
            new = TopicReplicaAssignment(
                current.topic_id,
                {**current.partitions, tp.partition: list(assignment.replicas)},
                adding,
                removing,
            )
            try:
                await zk.run(zk.set_topic_assignment, tp.topic, new, version)
                return
            except (ZkVersionMismatch, ZkNodeExists):
                continue
        raise ZkError(f"the assignment of {tp.topic} kept changing")

    # ------------------------------------------------------------------ /admin/reassign_partitions

    def on_reassign_partitions_znode(self, data: bytes | None, version: int) -> None:
        # Kafka acts on its creation only: the controller's own rewrites, as
        # partitions complete, are not new requests.
        created = data is not None and not self._znode_seen
        self._znode_seen = data is not None
        if created:
            self._controller.put_active(
                "ZkPartitionReassignment", self.process_zk_partition_reassignment
            )

    async def process_zk_partition_reassignment(self) -> None:
        got = await self._zk.run(self._zk.get_data, ReassignPartitionsZNode.path())
        if got is None:
            return
        try:
            wanted = ReassignPartitionsZNode.decode(got[0])
        except ZkDataError as e:
            _log.error("ignoring %s: %s", ReassignPartitionsZNode.path(), e)
            await self._zk.run(self._zk.delete_recursive, ReassignPartitionsZNode.path())
            return
        results: dict[TopicPartition, ApiError] = {}
        to_reassign: dict[TopicPartition, ReplicaAssignment] = {}
        for (topic, p), target in sorted(wanted.items()):
            tp = TopicPartition(topic, p)
            built = self._maybe_build_reassignment(tp, target)
            if built is None:
                results[tp] = ApiError(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS)
            else:
                to_reassign[tp] = built
        results.update(await self._maybe_trigger_partition_reassignment(to_reassign))
        failed = {tp for tp, e in results.items() if e.error_code != ErrorCode.NONE}
        if failed:
            errors = {f"{tp.topic}-{tp.partition}": results[tp] for tp in sorted(failed)}
            _log.warning(
                "reassignments through %s failed: %s", ReassignPartitionsZNode.path(), errors
            )
            await self._maybe_remove_from_zk_reassignment(lambda tp, _: tp in failed)

    async def _maybe_remove_from_zk_reassignment(
        self, remove: Callable[[TopicPartition, list[int]], bool]
    ) -> None:
        """Take the partitions ``remove`` names out of /admin/reassign_partitions
        (deleting it with the last)."""
        zk, path = self._zk, ReassignPartitionsZNode.path()
        for _ in range(10):
            got = await zk.run(zk.get_data, path)
            if got is None:
                return
            try:
                current = ReassignPartitionsZNode.decode(got[0])
            except ZkDataError:
                current = {}
            kept = {k: r for k, r in current.items() if not remove(TopicPartition(*k), r)}
            if kept == current:
                return
            if not kept:
                await zk.run(zk.delete_recursive, path, got[1].version)
                return
            done = await zk.run(
                zk.conditional_set, path, ReassignPartitionsZNode.encode(kept), got[1].version
            )
            if done.succeeded:
                return


def replication_factor_unchanged(current: int, target: list[int]) -> ApiError | None:
    """AlterPartitionReassignments v1 with allowReplicationFactorChange false
    (KIP-860): a target of another size than the partition's replicas (before
    any reassignment in flight) is INVALID_REPLICATION_FACTOR, as Kafka's
    ReplicationControlManager refuses it."""
    if current == len(target):
        return None
    return ApiError(
        ErrorCode.INVALID_REPLICATION_FACTOR,
        f"The replication factor is changed from {current} to {len(target)}",
    )
