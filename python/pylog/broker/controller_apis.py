"""The controller's requests to a broker (ZooKeeper mode): LeaderAndIsr,
UpdateMetadata and StopReplica, answered through the ReplicaManager; and the
requests a broker or a client makes of the controller: ControlledShutdown,
ElectLeaders, AlterPartitionReassignments and ListPartitionReassignments,
answered by this broker's KafkaController when it is the active one
(NOT_CONTROLLER otherwise). An election's answer waits (up to the
request's timeout) until this broker's MetadataCache shows the new leaders,
as Kafka's DelayedElectLeader.

Each version's layout is read here (v0-1 LeaderAndIsr and v0-4 UpdateMetadata
list partitions ungrouped; later versions group them by topic, with topic ids
from LeaderAndIsr v5 and UpdateMetadata v7; StopReplica v3 carries a leader
epoch and a delete flag per partition) and handed on as the ReplicaManager's
types. The fencing (controller epoch, broker epoch, leader epochs) is the
ReplicaManager's. After a LeaderAndIsr, the group coordinator takes the
``__consumer_offsets`` partitions this broker now leads and drops the ones it
follows (Kafka's onLeadershipChange).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine

from pylog.common.topic_partition import TopicPartition
from pylog.controller.kafka_controller import (
    ELECTION_PREFERRED,
    ELECTION_UNCLEAN,
    ApiError,
    KafkaController,
)
from pylog.coordinator.group_coordinator import GroupCoordinator
from pylog.coordinator.share_coordinator import SHARE_GROUP_STATE_TOPIC, ShareCoordinator
from pylog.errors import ErrorCode
from pylog.metadata.metadata_cache import BrokerEndpoint, MetadataBroker, PartitionInfo
from pylog.network import Request
from pylog.protocol import ZERO_UUID
from pylog.protocol.messages import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from pylog.protocol.messages.alter_partition_reassignments_response import (
    ReassignablePartitionResponse,
    ReassignableTopicResponse,
)
from pylog.protocol.messages.controlled_shutdown_response import RemainingPartition
from pylog.protocol.messages.elect_leaders_response import (
    PartitionResult,
    ReplicaElectionResult,
)
from pylog.protocol.messages.leader_and_isr_request import LeaderAndIsrPartitionState
from pylog.protocol.messages.leader_and_isr_response import (
    LeaderAndIsrPartitionError,
    LeaderAndIsrTopicError,
)
from pylog.protocol.messages.list_partition_reassignments_response import (
    OngoingPartitionReassignment,
    OngoingTopicReassignment,
)
from pylog.protocol.messages.stop_replica_response import StopReplicaPartitionError
from pylog.protocol.messages.update_metadata_request import UpdateMetadataPartitionState
from pylog.server.partition import PartitionState
from pylog.server.replica_fetcher_blocking_send import BrokerEndPoint
from pylog.server.replica_manager import ReplicaManager, StopReplicaState
from pylog.transaction.transaction_coordinator import TransactionCoordinator
from pylog.transaction.transaction_state_manager import TRANSACTION_STATE_TOPIC

__all__ = ["ControllerApis"]

_log = logging.getLogger("pylog.broker.controller_apis")

_GROUP_METADATA_TOPIC = "__consumer_offsets"
# Kafka's SecurityProtocol ids, for UpdateMetadata v1-2 endpoints without a listener name.
_PROTOCOL_NAMES = {0: "PLAINTEXT", 1: "SSL", 2: "SASL_PLAINTEXT", 3: "SASL_SSL"}


def _message_of(tp: TopicPartition, e: ApiError) -> str | None:
    """A partition's error message: its own, else, as Kafka gives one for an
    unknown partition and an election not needed, a sentence saying so."""
    if e.message is None and e.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        return f"the partition {tp} does not exist"
    if e.message is None and e.error_code == ErrorCode.ELECTION_NOT_NEEDED:
        return f"the partition {tp} is already led by its preferred replica"
    return e.message


class ControllerApis:
    """LeaderAndIsr, UpdateMetadata, StopReplica; ControlledShutdown,
    ElectLeaders, AlterPartitionReassignments, ListPartitionReassignments."""

    def __init__(
        self,
        replica_manager: ReplicaManager,
        group_coordinator: GroupCoordinator | None = None,
        controller: Callable[[], KafkaController | None] | None = None,
        *,
        txn_coordinator: TransactionCoordinator | None = None,
    ) -> None:
        self.replica_manager = replica_manager
        self.group_coordinator = group_coordinator
        self.txn_coordinator = txn_coordinator
        #: the share coordinator (KafkaApis sets it when share groups are served)
        self.share_coordinator: ShareCoordinator | None = None
        #: this broker's KafkaController (None: no cluster, or not started yet)
        self.controller = controller or (lambda: None)
        self._tasks: set[asyncio.Task[None]] = set()

    # ------------------------------------------------------------------ LeaderAndIsr

    async def handle_leader_and_isr_request(
        self, request: Request, body: LeaderAndIsrRequest
    ) -> LeaderAndIsrResponse:
        version = request.header.api_version
        states: dict[TopicPartition, PartitionState] = {}
        topic_ids: dict[str, str] = {}

        def add(topic: str, p: LeaderAndIsrPartitionState) -> None:
            states[TopicPartition(topic, p.partition_index)] = PartitionState(
                controller_epoch=p.controller_epoch,
                leader=p.leader,
                leader_epoch=p.leader_epoch,
                isr=tuple(p.isr),
                partition_epoch=p.partition_epoch,
                replicas=tuple(p.replicas),
                is_new=p.is_new,
            )

        if version <= 1:
            for p in body.ungrouped_partition_states:
                add(p.topic_name, p)
        else:
            for t in body.topic_states:
                if version >= 5 and t.topic_id and t.topic_id != ZERO_UUID:
                    topic_ids[t.topic_name] = t.topic_id
                for p in t.partition_states:
                    add(t.topic_name, p)
        leaders = {
            b.broker_id: BrokerEndPoint(b.broker_id, b.host_name, b.port) for b in body.live_leaders
        }
        result = self.replica_manager.become_leader_or_follower(
            controller_id=body.controller_id,
            controller_epoch=body.controller_epoch,
            broker_epoch=body.broker_epoch,
            partition_states=states,
            topic_ids=topic_ids,
            live_leaders=leaders,
        )
        errors = result.partition_errors or {}
        if result.error_code == ErrorCode.NONE:
            self._on_leadership_change(states, errors)
        if version <= 4:
            return LeaderAndIsrResponse(
                error_code=result.error_code,
                partition_errors=[
                    LeaderAndIsrPartitionError(
                        topic_name=tp.topic, partition_index=tp.partition, error_code=code
                    )
                    for tp, code in errors.items()
                ],
            )
        by_topic: dict[str, list[LeaderAndIsrPartitionError]] = {}
        for tp, code in errors.items():
            by_topic.setdefault(tp.topic, []).append(
                LeaderAndIsrPartitionError(partition_index=tp.partition, error_code=code)
            )
        topics = []
        for name, parts in by_topic.items():
            topic_id = topic_ids.get(name)
            if topic_id is None:
                partition = self.replica_manager.partition(TopicPartition(name, 0))
                topic_id = partition.topic_id if partition is not None else ZERO_UUID
            topics.append(LeaderAndIsrTopicError(topic_id=topic_id, partition_errors=parts))
        return LeaderAndIsrResponse(error_code=result.error_code, topics=topics)

    def _on_leadership_change(
        self, states: dict[TopicPartition, PartitionState], errors: dict[TopicPartition, int]
    ) -> None:
        me = self.replica_manager.broker_id
        txn = self.txn_coordinator
        if txn is not None:
            # Kafka's onLeadershipChange for __transaction_state: the
            # coordinator epoch is the partition's leader epoch.
            for tp, state in states.items():
                if tp.topic != TRANSACTION_STATE_TOPIC or errors.get(tp) != ErrorCode.NONE:
                    continue
                if state.leader == me:
                    txn.on_election(tp.partition, state.leader_epoch)
                else:
                    txn.on_resignation(tp.partition, state.leader_epoch)
        share = self.share_coordinator
        if share is not None:
            for tp, state in states.items():
                if tp.topic != SHARE_GROUP_STATE_TOPIC or errors.get(tp) != ErrorCode.NONE:
                    continue
                if state.leader == me:
                    self._spawn(share.on_election(tp.partition))
                else:
                    share.on_resignation(tp.partition)
        coordinator = self.group_coordinator
        if coordinator is None:
            return
        for tp, state in states.items():
            if tp.topic != _GROUP_METADATA_TOPIC or errors.get(tp) != ErrorCode.NONE:
                continue
            if state.leader == me:
                self._spawn(coordinator.on_election(tp.partition))
            else:
                coordinator.on_resignation(tp.partition)

    def _spawn(self, coro: Coroutine[object, object, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ------------------------------------------------------------------ UpdateMetadata

    async def handle_update_metadata_request(
        self, request: Request, body: UpdateMetadataRequest
    ) -> UpdateMetadataResponse:
        version = request.header.api_version
        brokers: list[MetadataBroker] = []
        for b in body.live_brokers:
            if version == 0:
                endpoints: tuple[BrokerEndpoint, ...] = (
                    BrokerEndpoint("PLAINTEXT", b.v0_host, b.v0_port, 0),
                )
            else:
                endpoints = tuple(
                    BrokerEndpoint(
                        e.listener
                        if version >= 3
                        else _PROTOCOL_NAMES.get(e.security_protocol, "PLAINTEXT"),
                        e.host,
                        e.port,
                        e.security_protocol,
                    )
                    for e in b.endpoints
                )
            brokers.append(MetadataBroker(b.id, endpoints, b.rack if version >= 2 else None))
        partitions: list[PartitionInfo] = []
        topic_ids: dict[str, str] = {}

        def add(topic: str, p: UpdateMetadataPartitionState) -> None:
            partitions.append(
                PartitionInfo(
                    topic=topic,
                    partition=p.partition_index,
                    leader=p.leader,
                    leader_epoch=p.leader_epoch,
                    replicas=tuple(p.replicas),
                    isr=tuple(p.isr),
                    zk_version=p.zk_version,
                    offline_replicas=tuple(p.offline_replicas),
                    controller_epoch=p.controller_epoch,
                )
            )

        if version <= 4:
            for p in body.ungrouped_partition_states:
                add(p.topic_name, p)
        else:
            for t in body.topic_states:
                if version >= 7 and t.topic_id and t.topic_id != ZERO_UUID:
                    topic_ids[t.topic_name] = t.topic_id
                for p in t.partition_states:
                    add(t.topic_name, p)
        result = self.replica_manager.maybe_update_metadata_cache(
            controller_id=body.controller_id,
            controller_epoch=body.controller_epoch,
            broker_epoch=body.broker_epoch,
            brokers=brokers,
            partitions=partitions,
            topic_ids=topic_ids,
        )
        # Every broker learns of a deletion here (leader -2), not only the one
        # DeleteTopics came to: each drops the offsets its groups hold of it.
        coordinator = self.group_coordinator
        if coordinator is not None and result.deleted_partitions:
            coordinator.on_partitions_deleted(result.deleted_partitions)
        return UpdateMetadataResponse(error_code=result.error_code)

    # ------------------------------------------------------------------ StopReplica

    async def handle_stop_replica_request(
        self, request: Request, body: StopReplicaRequest
    ) -> StopReplicaResponse:
        version = request.header.api_version
        parts: dict[TopicPartition, StopReplicaState] = {}
        if version == 0:
            for p in body.ungrouped_partitions:
                parts[TopicPartition(p.topic_name, p.partition_index)] = StopReplicaState(
                    -1, body.delete_partitions
                )
        elif version <= 2:
            for t in body.topics:
                for i in t.partition_indexes:
                    parts[TopicPartition(t.name, i)] = StopReplicaState(-1, body.delete_partitions)
        else:
            for ts in body.topic_states:
                for s in ts.partition_states:
                    parts[TopicPartition(ts.topic_name, s.partition_index)] = StopReplicaState(
                        s.leader_epoch, s.delete_partition
                    )
        result = self.replica_manager.stop_replicas(
            controller_id=body.controller_id,
            controller_epoch=body.controller_epoch,
            broker_epoch=body.broker_epoch,
            partitions=parts,
        )
        errors = result.partition_errors or {}
        txn = self.txn_coordinator
        if txn is not None and result.error_code == ErrorCode.NONE:
            for tp, code in errors.items():
                if tp.topic == TRANSACTION_STATE_TOPIC and code == ErrorCode.NONE:
                    txn.on_resignation(tp.partition)
        share = self.share_coordinator
        if share is not None and result.error_code == ErrorCode.NONE:
            for tp, code in errors.items():
                if tp.topic == SHARE_GROUP_STATE_TOPIC and code == ErrorCode.NONE:
                    share.on_resignation(tp.partition)
        coordinator = self.group_coordinator
        if coordinator is not None and result.error_code == ErrorCode.NONE:
            for tp, code in errors.items():
                if tp.topic == _GROUP_METADATA_TOPIC and code == ErrorCode.NONE:
                    coordinator.on_resignation(tp.partition)
        return StopReplicaResponse(
            error_code=result.error_code,
            partition_errors=[
                StopReplicaPartitionError(
                    topic_name=tp.topic, partition_index=tp.partition, error_code=code
                )
                for tp, code in errors.items()
            ],
        )

    # ------------------------------------------------------------------ ControlledShutdown

    async def handle_controlled_shutdown_request(
        self, request: Request, body: ControlledShutdownRequest
    ) -> ControlledShutdownResponse:
        controller = self.controller()
        if controller is None or not controller.is_active:
            return ControlledShutdownResponse(error_code=ErrorCode.NOT_CONTROLLER)
        # v0-1 carry no broker epoch: -1, which the controller does not check.
        epoch = body.broker_epoch if request.header.api_version >= 2 else -1
        result = await controller.controlled_shutdown(body.broker_id, epoch)
        return ControlledShutdownResponse(
            error_code=result.error_code,
            remaining_partitions=[
                RemainingPartition(topic_name=tp.topic, partition_index=tp.partition)
                for tp in result.remaining
            ],
        )

    # ------------------------------------------------------------------ ElectLeaders

    async def handle_elect_leaders_request(
        self, request: Request, body: ElectLeadersRequest
    ) -> ElectLeadersResponse:
        version = request.header.api_version
        election_type = body.election_type if version >= 1 else ELECTION_PREFERRED
        everything = body.topic_partitions is None
        cache = self.replica_manager.metadata_cache
        if everything:
            wanted = {
                TopicPartition(t, p.partition)
                for t in cache.topics()
                for p in cache.partitions_of(t)
            }
        else:
            wanted = {
                TopicPartition(t.topic, p)
                for t in body.topic_partitions or []
                for p in t.partitions
            }
        results: dict[TopicPartition, ApiError] = {}
        controller = self.controller()
        if election_type not in (ELECTION_PREFERRED, ELECTION_UNCLEAN):
            message = f"Unknown election type {election_type}."
            results = {tp: ApiError(ErrorCode.INVALID_REQUEST, message) for tp in wanted}
        elif not self.replica_manager.controller_managed:
            # A lone broker leads every partition it has, the only replica.
            results = {tp: self._lone_election(tp) for tp in wanted}
        elif controller is None or not controller.is_active:
            results = {tp: ApiError(ErrorCode.NOT_CONTROLLER) for tp in wanted}
        else:
            elected = await controller.elect_leaders(wanted, election_type)
            expected = {tp: r for tp, r in elected.items() if isinstance(r, int)}
            results = {tp: r for tp, r in elected.items() if isinstance(r, ApiError)}
            await self._await_leaders(expected, body.timeout_ms)
            for tp, leader in expected.items():
                shown = cache.partition_info(tp.topic, tp.partition)
                ok = shown is not None and shown.leader == leader
                results[tp] = ApiError(ErrorCode.NONE if ok else ErrorCode.REQUEST_TIMED_OUT)
        if everything:
            # Asked for every partition: only those elected, or failed, are answered.
            results = {
                tp: r for tp, r in results.items() if r.error_code != ErrorCode.ELECTION_NOT_NEEDED
            }
        by_topic: dict[str, list[PartitionResult]] = {}
        for tp, r in sorted(results.items()):
            by_topic.setdefault(tp.topic, []).append(
                PartitionResult(
                    partition_id=tp.partition,
                    error_code=r.error_code,
                    error_message=_message_of(tp, r),
                )
            )
        return ElectLeadersResponse(
            throttle_time_ms=0,
            error_code=ErrorCode.NONE,
            replica_election_results=[
                ReplicaElectionResult(topic=t, partition_result=ps) for t, ps in by_topic.items()
            ],
        )

    def _lone_election(self, tp: TopicPartition) -> ApiError:
        if self.replica_manager.partition(tp) is None:
            return ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return ApiError(ErrorCode.ELECTION_NOT_NEEDED)

    async def _await_leaders(self, expected: dict[TopicPartition, int], timeout_ms: int) -> None:
        """Until this broker's MetadataCache shows every elected leader (the
        controller's UpdateMetadata has arrived), or ``timeout_ms`` passes."""
        cache = self.replica_manager.metadata_cache
        deadline = time.monotonic() + max(timeout_ms, 0) / 1000
        while expected:
            pending = [
                tp
                for tp, leader in expected.items()
                if (shown := cache.partition_info(tp.topic, tp.partition)) is None
                or shown.leader != leader
            ]
            if not pending or time.monotonic() >= deadline:
                return
            await asyncio.sleep(0.01)

    # ------------------------------------------------------------------ reassignments

    async def handle_alter_partition_reassignments_request(
        self, request: Request, body: AlterPartitionReassignmentsRequest
    ) -> AlterPartitionReassignmentsResponse:
        controller = self.controller()
        lone = not self.replica_manager.controller_managed
        # v1 (KIP-860): false refuses a change of replication factor; the
        # answer says which the request asked for
        allow_rf = body.allow_replication_factor_change or request.header.api_version < 1
        if not lone and (controller is None or not controller.is_active):
            return AlterPartitionReassignmentsResponse(
                error_code=ErrorCode.NOT_CONTROLLER, allow_replication_factor_change=allow_rf
            )
        wanted: dict[TopicPartition, list[int] | None] = {}
        for t in body.topics:
            for p in t.partitions:
                replicas = p.replicas
                wanted[TopicPartition(t.name, p.partition_index)] = (
                    None if replicas is None else list(replicas)  # None: cancel
                )
        got: dict[TopicPartition, ApiError] | ApiError
        if lone or controller is None:
            # (a lone broker's only valid target is itself: the replication
            # factor cannot change)
            got = {tp: self._lone_reassignment(tp, r) for tp, r in wanted.items()}
        else:
            got = await controller.alter_partition_reassignments(wanted, allow_rf)
        if isinstance(got, ApiError):
            return AlterPartitionReassignmentsResponse(
                error_code=got.error_code,
                error_message=got.message,
                allow_replication_factor_change=allow_rf,
            )
        by_topic: dict[str, list[ReassignablePartitionResponse]] = {}
        for tp, e in sorted(got.items()):
            by_topic.setdefault(tp.topic, []).append(
                ReassignablePartitionResponse(
                    partition_index=tp.partition,
                    error_code=e.error_code,
                    error_message=_message_of(tp, e),
                )
            )
        return AlterPartitionReassignmentsResponse(
            allow_replication_factor_change=allow_rf,
            error_code=ErrorCode.NONE,
            error_message=None,  # Kafka's ApiError.NONE: null, not ""
            responses=[
                ReassignableTopicResponse(name=t, partitions=ps) for t, ps in by_topic.items()
            ],
        )

    def _lone_reassignment(self, tp: TopicPartition, replicas: list[int] | None) -> ApiError:
        """A lone broker's partitions have one replica, itself: nothing to
        move, nothing in flight to cancel."""
        if self.replica_manager.partition(tp) is None:
            return ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if replicas is None:
            return ApiError(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS)
        me = self.replica_manager.broker_id
        if replicas == [me]:
            return ApiError(ErrorCode.NONE)
        return ApiError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"a lone broker ({me}) cannot place replicas on brokers {replicas}",
        )

    async def handle_list_partition_reassignments_request(
        self, request: Request, body: ListPartitionReassignmentsRequest
    ) -> ListPartitionReassignmentsResponse:
        if not self.replica_manager.controller_managed:
            # Nothing is ever reassigned on a lone broker (kafka-topics
            # --describe asks, and would wait out its timeout on NOT_CONTROLLER).
            return ListPartitionReassignmentsResponse(
                error_code=ErrorCode.NONE, error_message=None, topics=[]
            )
        controller = self.controller()
        if controller is None or not controller.is_active:
            return ListPartitionReassignmentsResponse(error_code=ErrorCode.NOT_CONTROLLER)
        wanted = None
        if body.topics is not None:
            wanted = [TopicPartition(t.name, p) for t in body.topics for p in t.partition_indexes]
        got = await controller.list_partition_reassignments(wanted)
        if isinstance(got, ApiError):
            return ListPartitionReassignmentsResponse(
                error_code=got.error_code, error_message=got.message
            )
        by_topic: dict[str, list[OngoingPartitionReassignment]] = {}
        for tp, a in sorted(got.items()):
            by_topic.setdefault(tp.topic, []).append(
                OngoingPartitionReassignment(
                    partition_index=tp.partition,
                    replicas=list(a.replicas),
                    adding_replicas=list(a.adding),
                    removing_replicas=list(a.removing),
                )
            )
        return ListPartitionReassignmentsResponse(
            error_code=ErrorCode.NONE,
            error_message=None,  # Kafka's ApiError.NONE: null, not ""
            topics=[OngoingTopicReassignment(name=t, partitions=ps) for t, ps in by_topic.items()],
        )
