"""GroupCoordinator: the classic consumer-group protocol (JoinGroup, SyncGroup,
Heartbeat, LeaveGroup) and committed offsets (OffsetCommit, OffsetFetch,
OffsetDelete), plus ListGroups, DescribeGroups and DeleteGroups.

The state of each group lives in the GroupMetadataManager's shard of its
``__consumer_offsets`` partition; this class drives the state machine of
:mod:`pylog.coordinator.group`. Rebalances and sessions are timed by two
purgatories on the native timing wheel (DelayedJoin, DelayedHeartbeat). A
JoinGroup or a follower's SyncGroup waits on a future that the rebalance
resolves; the handler marks the request locally complete first so the
connection's next request (a heartbeat, a commit) is not held up.

Everything runs on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Collection, Coroutine, Iterable

from pylog.common.utils.time import Clock, now_ms
from pylog.coordinator.consumer_group import ConsumerGroup
from pylog.coordinator.consumer_group_classic_members import ClassicMembers
from pylog.coordinator.consumer_group_heartbeat import ConsumerGroupHeartbeat
from pylog.coordinator.consumer_group_records import consumer_group_tombstones
from pylog.coordinator.delayed_heartbeat import DelayedHeartbeat
from pylog.coordinator.delayed_join import DelayedJoin, InitialDelayedJoin
from pylog.coordinator.delayed_sync import DelayedSync
from pylog.coordinator.group import (
    NO_GENERATION,
    UNKNOWN_MEMBER_ID,
    GroupMetadata,
    GroupState,
    JoinGroupMember,
    JoinGroupResult,
    MemberMetadata,
    OffsetAndMetadata,
    SyncGroupResult,
)
from pylog.coordinator.group_metadata_manager import CoordinatorError, GroupMetadataManager
from pylog.coordinator.share_group import ShareGroup
from pylog.errors import ErrorCode
from pylog.logsafe import quoted
from pylog.metadata.store import MetadataStore
from pylog.network.metrics import MetricsRegistry
from pylog.server.config import KafkaConfig
from pylog.server.purgatory import DelayedOperationPurgatory
from pylog.server.replica_manager import ReplicaManager

__all__ = ["GroupCoordinator", "JoinGroupResult", "JoinRequest", "SyncGroupResult"]

_log = logging.getLogger("pylog.coordinator")

_MAX_TIMESTAMP = 2**63 - 1  # an OffsetCommitValue's expire timestamp is an int64


class JoinRequest:
    """The fields of a JoinGroup the coordinator reads."""

    __slots__ = (
        "client_host",
        "client_id",
        "group_id",
        "group_instance_id",
        "member_id",
        "protocol_type",
        "protocols",
        "rebalance_timeout_ms",
        "require_known_member_id",
        "session_timeout_ms",
    )

    def __init__(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        require_known_member_id: bool,
    ) -> None:
        self.group_id = group_id
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.protocols = protocols
        self.require_known_member_id = require_known_member_id


def _join_error(code: int, member_id: str = UNKNOWN_MEMBER_ID) -> JoinGroupResult:
    return JoinGroupResult(code, member_id, NO_GENERATION)


def _sync_result(
    code: int, assignment: bytes = b"", group: GroupMetadata | None = None
) -> SyncGroupResult:
    return SyncGroupResult(
        code,
        assignment,
        group.protocol_type if group is not None else None,
        group.protocol_name if group is not None else None,
    )


def _answer_waiting(member: MemberMetadata, code: int) -> None:
    """Answer the JoinGroup and the SyncGroup ``member`` waits on, if any, with
    the error ``code``, and forget them."""
    join, sync = member.await_join, member.await_sync
    member.await_join = member.await_sync = None
    if join is not None and not join.done():
        join.set_result(_join_error(code, member.member_id))
    if sync is not None and not sync.done():
        sync.set_result(_sync_result(code))


class GroupCoordinator:
    def __init__(
        self,
        config: KafkaConfig,
        replica_manager: ReplicaManager,
        metadata_store: MetadataStore,
        *,
        clock: Clock = now_ms,
    ) -> None:
        self.config = config
        self.clock = clock
        self.manager = GroupMetadataManager(config, replica_manager, metadata_store, clock=clock)
        self.manager.on_group_loaded = self._on_group_loaded
        self.join_purgatory: DelayedOperationPurgatory[DelayedJoin] = DelayedOperationPurgatory(
            "Rebalance"
        )
        self.heartbeat_purgatory: DelayedOperationPurgatory[DelayedHeartbeat] = (
            DelayedOperationPurgatory("Heartbeat")
        )
        self.sync_purgatory: DelayedOperationPurgatory[DelayedSync] = DelayedOperationPurgatory(
            "Sync"
        )
        self.initial_rebalance_delay_ms = int(config.get("group.initial.rebalance.delay.ms"))
        self.min_session_timeout_ms = int(config.get("group.min.session.timeout.ms"))
        self.max_session_timeout_ms = int(config.get("group.max.session.timeout.ms"))
        self.max_group_size = int(config.get("group.max.size"))
        self.metadata_max_bytes = int(config.get("offset.metadata.max.bytes"))
        self.retention_check_interval_ms = int(config.get("offsets.retention.check.interval.ms"))
        self._tasks: set[asyncio.Task[object]] = set()
        self._expiry: asyncio.TimerHandle | None = None
        self._running = False
        #: Deletes a share group's state of these (topic id, partition)s
        #: before the group goes (set when share groups are served); an error code.
        self.on_share_group_deleted: (
            Callable[[str, set[tuple[str, int]]], Coroutine[object, object, int]] | None
        ) = None
        #: A share group read from the log (its members get sessions; set
        #: when share groups are served).
        self.on_share_group_loaded: Callable[[ShareGroup], None] = lambda group: None
        #: KIP-848's protocol (ConsumerGroupHeartbeat), when
        #: group.coordinator.rebalance.protocols names it
        self.consumer_protocol = "consumer" in config.get("group.coordinator.rebalance.protocols")
        self.consumer = ConsumerGroupHeartbeat(
            config, self.manager, metadata_store, clock, self._spawn
        )
        # KIP-848's online upgrade/downgrade: the consumer side converts, this
        # side stops or starts the classic group's timers and rebalances.
        self.consumer.classic = self
        self.classic_members = ClassicMembers(self.consumer)

    # ------------------------------------------------------------ lifecycle

    def startup(self) -> None:
        """Elect the ``__consumer_offsets`` partitions (loaded in the background:
        their groups answer COORDINATOR_LOAD_IN_PROGRESS meanwhile) and start
        offset expiration. Runs on the event loop."""
        self._running = True
        self.manager.start_loading()
        self._schedule_expiry()

    async def wait_loaded(self) -> None:
        await asyncio.gather(*self.manager._loads)

    async def shutdown(self) -> None:
        """Answer every waiting JoinGroup/SyncGroup with NOT_COORDINATOR (the
        members look for the coordinator again and find it restarted) and
        stop the timers. The groups' last state is already in the log."""
        if not self._running:
            return
        self._running = False
        if self._expiry is not None:
            self._expiry.cancel()
        await self.manager.shutdown()
        for group in list(self.manager.all_groups()):
            for m in group.members.values():
                _answer_waiting(m, ErrorCode.NOT_COORDINATOR)
        self.join_purgatory.shutdown()
        self.heartbeat_purgatory.shutdown()
        self.sync_purgatory.shutdown()
        self.consumer.shutdown()
        for t in list(self._tasks):
            t.cancel()

    def on_election(self, partition: int) -> Coroutine[object, object, None]:
        """This broker became the leader of ``__consumer_offsets`` partition
        ``partition``: its groups are loaded and served from here. The
        partition is taken at once (its groups answer LOAD_IN_PROGRESS);
        the returned coroutine loads it."""
        return self.manager.on_election(partition)

    def on_resignation(self, partition: int) -> None:
        """This broker no longer leads ``partition``: its groups' waiting
        members are told NOT_COORDINATOR (they look the coordinator up again)
        and their sessions stop here."""
        for group in self.manager.on_resignation(partition):
            if isinstance(group, ConsumerGroup):
                self.consumer.on_resigned(group)
                continue
            self.join_purgatory.cancel_for_key(self._join_key(group))
            group.join_op = None
            for m in group.members.values():
                _answer_waiting(m, ErrorCode.NOT_COORDINATOR)
                op, m.heartbeat_op = m.heartbeat_op, None
                if op is not None:
                    op.force_complete()

    # ------------------------------------------------------------ migration

    def detach_classic(self, group: GroupMetadata) -> None:
        """The classic group is being upgraded to a consumer group: its
        rebalance and sessions stop here, and members waiting on a JoinGroup
        or SyncGroup are told REBALANCE_IN_PROGRESS (they rejoin the consumer
        group), as Kafka's convertToConsumerGroup does. Dead from now on, so
        nothing of it is written again."""
        self.join_purgatory.cancel_for_key(self._join_key(group))
        group.join_op = None
        self._clear_pending_sync(group)
        group.pending_members.clear()
        for m in group.members.values():
            _answer_waiting(m, ErrorCode.REBALANCE_IN_PROGRESS)
            op, m.heartbeat_op = m.heartbeat_op, None
            if op is not None:
                op.force_complete()
        group.transition_to(GroupState.DEAD, self.clock())

    def reattach_classic(self, group: GroupMetadata) -> None:
        """The upgrade was not written: the classic group is served again; its
        members (told to rejoin) get sessions and it rebalances."""
        group.state = GroupState.STABLE if group.members else GroupState.EMPTY
        group.state_timestamp = self.clock()
        for m in group.members.values():
            self._schedule_heartbeat(group, m)
        if group.members:
            self._prepare_rebalance(group, "the upgrade to a consumer group failed")

    def install_downgraded(self, group: GroupMetadata, rebalance: bool) -> None:
        """A consumer group became this classic group (Kafka's
        convertToClassicGroup): its members get sessions, and it rebalances
        unless a static member's replacement made it (its members hold their
        assignments as they are)."""
        for m in group.members.values():
            self._schedule_heartbeat(group, m)
        if rebalance:
            self._prepare_rebalance(group, "downgraded from a consumer group")

    def register_metrics(self, metrics: MetricsRegistry) -> None:
        """Kafka's GroupMetadataManager gauges (NumGroups per state, NumOffsets)
        on the broker's Prometheus registry."""

        def groups() -> list[tuple[dict[str, str], float]]:
            counts = dict.fromkeys((s.value for s in GroupState if s is not GroupState.DEAD), 0)
            for g in self.manager.all_groups():
                if g.state is not GroupState.DEAD:
                    counts[g.state.value] += 1
            return [({"state": k}, float(v)) for k, v in counts.items()]

        metrics.gauge(
            "kafka_coordinator_group_groupmetadatamanager_numgroups",
            "Consumer groups this coordinator holds, by state.",
            groups,
        )
        metrics.gauge(
            "kafka_coordinator_group_groupmetadatamanager_numoffsets",
            "Committed offsets this coordinator holds.",
            lambda: float(sum(len(g.offsets) for g in self.manager.all_groups())),
        )

    def _spawn(self, coro: Coroutine[object, object, object]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _schedule_expiry(self) -> None:
        if not self._running:
            return
        loop = asyncio.get_running_loop()
        self._expiry = loop.call_later(
            self.retention_check_interval_ms / 1000, lambda: self._spawn(self._expire())
        )

    async def _expire(self) -> None:
        try:
            await self.manager.expire_offsets()
        except Exception:
            _log.exception("offset expiration failed")
        finally:
            self._schedule_expiry()

    def _on_group_loaded(self, group: GroupMetadata) -> None:
        if isinstance(group, ConsumerGroup):
            self.consumer.on_loaded(group)
            return
        if isinstance(group, ShareGroup):
            self.on_share_group_loaded(group)
            return
        # Members restored from the log get a session from now: those still
        # alive heartbeat, the others expire and the group rebalances.
        for member in group.members.values():
            self._schedule_heartbeat(group, member)

    # ------------------------------------------------------------ FindCoordinator

    def find_coordinator(self, group_id: str) -> int:
        """NONE when this broker coordinates ``group_id`` (the offsets topic is
        created on first use), else the error to answer."""
        try:
            self.manager.ensure_topic()
        except Exception as e:
            _log.error("cannot create the offsets topic: %s", e)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        shard = self.manager.shards.get(self.manager.partition_for(group_id))
        return ErrorCode.NONE if shard is not None else ErrorCode.COORDINATOR_NOT_AVAILABLE

    # ------------------------------------------------------------ JoinGroup

    async def join_group(self, req: JoinRequest) -> JoinGroupResult:
        # Kafka's order: the group id, then the coordinator's own state.
        if not req.group_id:
            return _join_error(ErrorCode.INVALID_GROUP_ID, req.member_id)
        if not self._running:
            # Shutting down: nothing would ever complete this join.
            return _join_error(ErrorCode.COORDINATOR_NOT_AVAILABLE, req.member_id)
        if not (
            self.min_session_timeout_ms <= req.session_timeout_ms <= self.max_session_timeout_ms
        ):
            return _join_error(ErrorCode.INVALID_SESSION_TIMEOUT, req.member_id)
        try:
            if req.member_id == UNKNOWN_MEMBER_ID:
                group = self.manager.get_or_create_group(req.group_id)
            else:
                found = self.manager.get_group(req.group_id)
                if found is None:
                    return _join_error(ErrorCode.UNKNOWN_MEMBER_ID, req.member_id)
                group = found
        except CoordinatorError as e:
            return _join_error(e.code, req.member_id)
        if isinstance(group, ConsumerGroup):
            found_group = await self._classic_from_consumer(group, req)
            if isinstance(found_group, JoinGroupResult):
                return found_group
            group = found_group
        if not self._accept_joining_member(group, req.member_id):
            # Kafka checks the group's size before anything else about it.
            known = group.members.get(req.member_id)
            if known is not None:
                self._remove_member_and_update_group(group, known, "group is over capacity")
            return _join_error(ErrorCode.GROUP_MAX_SIZE_REACHED)
        if group.is_in(GroupState.DEAD):
            # The group was just deleted or its partition moved: look again.
            return _join_error(ErrorCode.COORDINATOR_NOT_AVAILABLE, req.member_id)
        if not group.supports(req.protocol_type, req.protocols):
            return _join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, req.member_id)
        fut: asyncio.Future[JoinGroupResult]
        if req.member_id == UNKNOWN_MEMBER_ID or req.member_id in group.pending_members:
            result = self._join_new_member(group, req)
        else:
            result = self._join_current_member(group, req)
        if isinstance(result, JoinGroupResult):
            return result
        fut = result
        return await fut

    async def _classic_from_consumer(
        self, group: ConsumerGroup, req: JoinRequest
    ) -> GroupMetadata | JoinGroupResult:
        """A classic JoinGroup for a consumer group: an empty one becomes a
        classic group (its offsets stay, its records are tombstoned, as Kafka
        converts it); one with members takes the member as a classic member
        of the consumer group (Kafka's classicGroupJoinToConsumerGroup)."""
        if group.consumer_members:
            return await self.classic_members.join(group, req)
        async with group.lock:
            if group.is_in(GroupState.DEAD):
                return _join_error(ErrorCode.COORDINATOR_NOT_AVAILABLE, req.member_id)
            if not group.consumer_members:
                code = await self.manager._append(group.group_id, consumer_group_tombstones(group))
                if code:
                    return _join_error(code, req.member_id)
                classic = GroupMetadata(group.group_id, self.clock())
                classic.offsets = group.offsets
                group.transition_to(GroupState.DEAD, self.clock())
                try:
                    shard = self.manager.shard_for(group.group_id)
                except CoordinatorError as e:
                    return _join_error(e.code, req.member_id)
                shard.groups[group.group_id] = classic
                return classic
        # A member joined while this waited for the lock.
        return await self.classic_members.join(group, req)

    def _accept_joining_member(self, group: GroupMetadata, member_id: str) -> bool:
        """Whether ``group.max.size`` lets ``member_id`` join: while members
        are rejoining, those already waiting count; otherwise the members."""
        if group.is_in(GroupState.EMPTY, GroupState.DEAD):
            return True
        member = group.members.get(member_id)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            if member is not None and member.is_awaiting_join:
                return True
            awaiting = sum(1 for m in group.members.values() if m.is_awaiting_join)
            return awaiting < self.max_group_size
        return member is not None or group.size < self.max_group_size

    def _new_member_id(self, req: JoinRequest) -> str:
        prefix = req.group_instance_id if req.group_instance_id is not None else req.client_id
        return f"{prefix}-{uuid.uuid4()}"

    def _join_new_member(
        self, group: GroupMetadata, req: JoinRequest
    ) -> JoinGroupResult | asyncio.Future[JoinGroupResult]:
        instance = req.group_instance_id
        if instance is not None and req.member_id == UNKNOWN_MEMBER_ID:
            old_id = group.static_member_id(instance)
            if old_id is not None:
                return self._rejoin_static_member(group, req, old_id)
        if req.member_id == UNKNOWN_MEMBER_ID:
            member_id = self._new_member_id(req)
            if req.require_known_member_id and instance is None:
                # KIP-394: the client comes back with this id, so a client
                # that never does (it timed out, crashed) leaves no member.
                group.pending_members.add(member_id)
                op = DelayedHeartbeat(self, group, member_id, True, req.session_timeout_ms)
                self.heartbeat_purgatory.try_complete_else_watch(op, ())
                return _join_error(ErrorCode.MEMBER_ID_REQUIRED, member_id)
        else:
            member_id = req.member_id
        return self._add_member_and_rebalance(group, req, member_id)

    def _add_member_and_rebalance(
        self, group: GroupMetadata, req: JoinRequest, member_id: str
    ) -> asyncio.Future[JoinGroupResult]:
        member = MemberMetadata(
            member_id,
            req.group_instance_id,
            req.client_id,
            req.client_host,
            req.rebalance_timeout_ms,
            req.session_timeout_ms,
            req.protocol_type,
            req.protocols,
            is_new=True,
        )
        fut: asyncio.Future[JoinGroupResult] = asyncio.get_running_loop().create_future()
        member.await_join = fut
        group.add(member)
        group.new_member_added = True
        self._schedule_heartbeat(group, member)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            self._check_join(group)
        else:
            self._prepare_rebalance(group, f"{member_id} joined")
        return fut

    def _rejoin_static_member(
        self, group: GroupMetadata, req: JoinRequest, old_id: str
    ) -> JoinGroupResult | asyncio.Future[JoinGroupResult]:
        """A static member restarted (new member id, same group.instance.id):
        it takes its old place; in a Stable group whose protocol would not
        change it gets the current generation and its assignment back without
        a rebalance."""
        new_id = self._new_member_id(req)
        old = group.members[old_id]
        # Whatever the old incarnation was waiting for, it is fenced now.
        _answer_waiting(old, ErrorCode.FENCED_INSTANCE_ID)
        protocols_before = old.protocols
        member = group.replace_static_member(req.group_instance_id or "", old_id, new_id)
        member.protocols = req.protocols
        member.session_timeout_ms = req.session_timeout_ms
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.client_id, member.client_host = req.client_id, req.client_host
        self._schedule_heartbeat(group, member)
        if (
            group.is_in(GroupState.STABLE)
            and group.protocol_name is not None
            and group.select_protocol() == group.protocol_name
        ):
            if protocols_before != req.protocols:
                _log.debug("static member %s rejoined with new metadata", quoted(new_id))
            is_leader = group.leader_id == new_id
            self._spawn(self.manager.store_group(group, self._assignments(group)))
            return self._join_response(group, new_id, with_members=is_leader, skip=is_leader)
        fut: asyncio.Future[JoinGroupResult] = asyncio.get_running_loop().create_future()
        member.await_join = fut
        if group.is_in(GroupState.PREPARING_REBALANCE):
            self._check_join(group)
        else:
            self._prepare_rebalance(group, f"static member {req.group_instance_id} rejoined")
        return fut

    def _join_current_member(
        self, group: GroupMetadata, req: JoinRequest
    ) -> JoinGroupResult | asyncio.Future[JoinGroupResult]:
        member_id = req.member_id
        fenced = self._fenced(group, member_id, req.group_instance_id)
        if fenced:
            return _join_error(fenced, member_id)
        member = group.members.get(member_id)
        if member is None or group.is_in(GroupState.EMPTY):
            return _join_error(ErrorCode.UNKNOWN_MEMBER_ID, member_id)
        loop = asyncio.get_running_loop()
        if group.is_in(GroupState.COMPLETING_REBALANCE) and member.matches(req.protocols):
            # A retried JoinGroup of this generation: answer it again.
            return self._join_response(group, member_id, with_members=group.leader_id == member_id)
        if (
            group.is_in(GroupState.STABLE)
            and member.matches(req.protocols)
            and group.leader_id != member_id
        ):
            # A follower rejoining with nothing new: nothing to rebalance.
            return self._join_response(group, member_id, with_members=False)
        fut: asyncio.Future[JoinGroupResult] = loop.create_future()
        if member.await_join is not None and not member.await_join.done():
            member.await_join.set_result(_join_error(ErrorCode.REBALANCE_IN_PROGRESS, member_id))
        member.await_join = fut
        member.protocols = req.protocols
        member.session_timeout_ms = req.session_timeout_ms
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        self._schedule_heartbeat(group, member)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            self._check_join(group)
        else:
            self._prepare_rebalance(group, f"{member_id} rejoined")
        return fut

    def _fenced(self, group: GroupMetadata, member_id: str, instance_id: str | None) -> int:
        """FENCED_INSTANCE_ID when a static member's id is not the current one
        for its group.instance.id; UNKNOWN_MEMBER_ID when the instance is
        unknown; 0 otherwise."""
        if instance_id is None:
            return ErrorCode.NONE
        current = group.static_member_id(instance_id)
        if current is None:
            return ErrorCode.UNKNOWN_MEMBER_ID if member_id in group.members else ErrorCode.NONE
        if current != member_id:
            return ErrorCode.FENCED_INSTANCE_ID
        return ErrorCode.NONE

    def _join_response(
        self, group: GroupMetadata, member_id: str, *, with_members: bool, skip: bool = False
    ) -> JoinGroupResult:
        members = []
        if with_members and group.protocol_name is not None:
            for m in group.members.values():
                try:
                    meta = m.metadata(group.protocol_name)
                except KeyError:
                    meta = b""
                members.append(JoinGroupMember(m.member_id, m.group_instance_id, meta))
        return JoinGroupResult(
            error_code=ErrorCode.NONE,
            member_id=member_id,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader=group.leader_id or "",
            skip_assignment=skip,
            members=members,
        )

    # ------------------------------------------------------------ rebalance

    def _join_key(self, group: GroupMetadata) -> tuple[str, str]:
        return ("join", group.group_id)

    def _prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if not group.can_rebalance():
            return
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            # Assignments of the aborted generation are void.
            self._reset_and_propagate(group, ErrorCode.REBALANCE_IN_PROGRESS)
        rebalance_ms = max((m.rebalance_timeout_ms for m in group.members.values()), default=0)
        op: DelayedJoin
        if group.is_in(GroupState.EMPTY) and self.initial_rebalance_delay_ms > 0:
            delay = self.initial_rebalance_delay_ms
            op = InitialDelayedJoin(self, group, delay, max(rebalance_ms - delay, 0))
        else:
            op = DelayedJoin(self, group, rebalance_ms)
        self._clear_pending_sync(group)
        group.new_member_added = False
        group.transition_to(GroupState.PREPARING_REBALANCE, self.clock())
        group.join_op = op
        _log.info(
            "preparing to rebalance group %s (generation %d): %s",
            quoted(group.group_id),
            group.generation_id,
            quoted(reason),
        )
        self.join_purgatory.try_complete_else_watch(op, [self._join_key(group)])

    def _check_join(self, group: GroupMetadata) -> None:
        self.join_purgatory.check_and_complete(self._join_key(group))

    def can_complete_join(self, group: GroupMetadata) -> bool:
        return group.all_joined()

    def on_initial_join_delay_done(self, group: GroupMetadata, op: InitialDelayedJoin) -> None:
        if not self._running:
            return
        if group.join_op is not op or not group.is_in(GroupState.PREPARING_REBALANCE):
            return
        if group.new_member_added and op.remaining_ms > 0:
            group.new_member_added = False
            delay = min(op.initial_delay_ms, op.remaining_ms)
            nxt = InitialDelayedJoin(self, group, delay, max(op.remaining_ms - delay, 0))
            group.join_op = nxt
            self.join_purgatory.try_complete_else_watch(nxt, [self._join_key(group)])
            return
        self.on_complete_join(group, op)

    def on_complete_join(self, group: GroupMetadata, op: DelayedJoin) -> None:
        if not self._running:
            return
        if group.join_op is not op or not group.is_in(GroupState.PREPARING_REBALANCE):
            return
        group.join_op = None
        # Dynamic members that did not rejoin in time are gone; static ones
        # keep their place until their session runs out.
        for m in group.not_yet_joined():
            if m.group_instance_id is None:
                self._remove_member(group, m)
        group.pending_members.clear()
        now = self.clock()
        group.generation_id += 1
        if not group.members:
            group.protocol_name = None
            group.leader_id = None
            group.transition_to(GroupState.EMPTY, now)
            _log.info(
                "group %s is empty at generation %d", quoted(group.group_id), group.generation_id
            )
            self._spawn(self.manager.store_group(group, {}))
            return
        group.protocol_name = group.select_protocol()
        leader = group.members.get(group.leader_id or "")
        if leader is None or not leader.is_awaiting_join:
            joined = [m for m in group.members.values() if m.is_awaiting_join]
            if joined:
                group.leader_id = joined[0].member_id
        group.transition_to(GroupState.COMPLETING_REBALANCE, now)
        self._schedule_pending_sync(group)
        _log.info(
            "group %s: generation %d with %d members, protocol %s",
            quoted(group.group_id),
            group.generation_id,
            group.size,
            quoted(group.protocol_name),
        )
        for m in list(group.members.values()):
            fut = m.await_join
            if fut is None:
                continue
            m.await_join = None
            m.is_new = False
            if not fut.done():
                fut.set_result(
                    self._join_response(
                        group, m.member_id, with_members=m.member_id == group.leader_id
                    )
                )
            self._schedule_heartbeat(group, m)

    def _reset_and_propagate(self, group: GroupMetadata, code: int) -> None:
        for m in group.members.values():
            m.assignment = b""
            fut = m.await_sync
            m.await_sync = None
            if fut is not None and not fut.done():
                fut.set_result(_sync_result(code))

    def _assignments(self, group: GroupMetadata) -> dict[str, bytes]:
        return {m.member_id: m.assignment for m in group.members.values()}

    # ------------------------------------------------------------ sessions

    def _schedule_heartbeat(self, group: GroupMetadata, member: MemberMetadata) -> None:
        old = member.heartbeat_op
        if old is not None:
            old.force_complete()
        op = DelayedHeartbeat(self, group, member.member_id, False, member.session_timeout_ms)
        member.heartbeat_op = op
        self.heartbeat_purgatory.try_complete_else_watch(op, ())

    def on_heartbeat_expired(
        self, group: GroupMetadata, member_id: str, is_pending: bool, op: DelayedHeartbeat
    ) -> None:
        if is_pending:
            if member_id in group.pending_members:
                group.pending_members.discard(member_id)
                if group.is_in(GroupState.PREPARING_REBALANCE):
                    self._check_join(group)
            return
        member = group.members.get(member_id)
        if member is None or member.heartbeat_op is not op or not self._running:
            return
        member.heartbeat_op = None
        if member.is_awaiting_join or member.is_awaiting_sync:
            # Waiting on us is a sign of life.
            self._schedule_heartbeat(group, member)
            return
        _log.info(
            "member %s of group %s: session timed out after %d ms",
            quoted(member_id),
            quoted(group.group_id),
            member.session_timeout_ms,
        )
        self._remove_member_and_update_group(group, member, "session timeout")

    def _remove_member(self, group: GroupMetadata, member: MemberMetadata) -> None:
        op = member.heartbeat_op
        member.heartbeat_op = None
        if op is not None:
            op.force_complete()
        _answer_waiting(member, ErrorCode.UNKNOWN_MEMBER_ID)
        group.remove(member.member_id)
        self._synced(group, member.member_id)

    def _remove_member_and_update_group(
        self, group: GroupMetadata, member: MemberMetadata, reason: str
    ) -> None:
        self._remove_member(group, member)
        if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, f"{member.member_id} left ({reason})")
        elif group.is_in(GroupState.PREPARING_REBALANCE):
            self._check_join(group)

    # ------------------------------------------------------------ pending sync

    def _schedule_pending_sync(self, group: GroupMetadata) -> None:
        self._clear_pending_sync(group)
        group.pending_sync = set(group.members)
        timeout = max((m.rebalance_timeout_ms for m in group.members.values()), default=0)
        op = DelayedSync(self, group, timeout)
        group.sync_op = op
        self.sync_purgatory.try_complete_else_watch(op, ())

    def _clear_pending_sync(self, group: GroupMetadata) -> None:
        group.pending_sync.clear()
        op, group.sync_op = group.sync_op, None
        if op is not None:
            op.force_complete()

    def _synced(self, group: GroupMetadata, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync and group.sync_op is not None:
            self._clear_pending_sync(group)

    def on_sync_expired(self, group: GroupMetadata, op: DelayedSync) -> None:
        if not self._running or group.sync_op is not op:
            return
        group.sync_op = None
        if not group.is_in(GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            return
        pending = [group.members[m] for m in group.pending_sync if m in group.members]
        group.pending_sync.clear()
        if not pending:
            return
        _log.info(
            "group %s generation %d: %s sent no SyncGroup within the rebalance timeout",
            quoted(group.group_id),
            group.generation_id,
            ", ".join(quoted(m.member_id) for m in pending),
        )
        for m in pending:
            self._remove_member(group, m)
        self._prepare_rebalance(group, "members did not sync")

    # ------------------------------------------------------------ SyncGroup

    async def sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
    ) -> SyncGroupResult:
        if not group_id:
            return _sync_result(ErrorCode.INVALID_GROUP_ID)
        if not self._running:
            return _sync_result(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        try:
            group = self.manager.get_group(group_id)
        except CoordinatorError as e:
            if e.code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                # The rebalance in flight was lost with the old coordinator:
                # the member rejoins (older clients do not know LOAD_IN_PROGRESS).
                return _sync_result(ErrorCode.REBALANCE_IN_PROGRESS)
            return _sync_result(e.code)
        if group is None:
            return _sync_result(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.is_in(GroupState.DEAD):
            return _sync_result(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if isinstance(group, ConsumerGroup):
            if group.is_in(GroupState.EMPTY):
                return _sync_result(ErrorCode.UNKNOWN_MEMBER_ID)
            return await self.classic_members.sync(
                group, generation_id, member_id, instance_id, protocol_type, protocol_name
            )
        fenced = self._fenced(group, member_id, instance_id)
        if fenced:
            return _sync_result(fenced)
        member = group.members.get(member_id)
        if member is None:
            return _sync_result(ErrorCode.UNKNOWN_MEMBER_ID)
        if generation_id != group.generation_id:
            return _sync_result(ErrorCode.ILLEGAL_GENERATION)
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            return _sync_result(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if group.is_in(GroupState.EMPTY):
            return _sync_result(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return _sync_result(ErrorCode.REBALANCE_IN_PROGRESS)
        self._schedule_heartbeat(group, member)
        self._synced(group, member_id)
        if group.is_in(GroupState.STABLE):
            return _sync_result(ErrorCode.NONE, member.assignment, group)
        # CompletingRebalance: followers wait for the leader's assignment.
        fut: asyncio.Future[SyncGroupResult] = asyncio.get_running_loop().create_future()
        if member.await_sync is not None and not member.await_sync.done():
            member.await_sync.set_result(_sync_result(ErrorCode.REBALANCE_IN_PROGRESS))
        member.await_sync = fut
        if member_id == group.leader_id:
            full = {m: assignments.get(m, b"") for m in group.members}
            generation = group.generation_id
            code = await self.manager.store_group(group, full)
            if group.is_in(GroupState.COMPLETING_REBALANCE) and group.generation_id == generation:
                if code == ErrorCode.NONE:
                    for m in group.members.values():
                        m.assignment = full.get(m.member_id, b"")
                    group.transition_to(GroupState.STABLE, self.clock())
                    for m in group.members.values():
                        f = m.await_sync
                        m.await_sync = None
                        if f is not None and not f.done():
                            f.set_result(_sync_result(ErrorCode.NONE, m.assignment, group))
                        self._schedule_heartbeat(group, m)
                else:
                    self._reset_and_propagate(group, code)
                    self._prepare_rebalance(group, "storing the assignment failed")
        return await fut

    # ------------------------------------------------------------ Heartbeat

    def heartbeat(
        self, group_id: str, member_id: str, instance_id: str | None, generation_id: int
    ) -> int:
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        if not self._running:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        try:
            group = self.manager.get_group(group_id)
        except CoordinatorError as e:
            # A loading group's members are answered as if all were well,
            # as Kafka does: they would only rejoin for nothing.
            return ErrorCode.NONE if e.code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS else e.code
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_in(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if isinstance(group, ConsumerGroup):
            return self.classic_members.heartbeat(group, member_id, instance_id, generation_id)
        fenced = self._fenced(group, member_id, instance_id)
        if fenced:
            return fenced
        member = group.members.get(member_id)
        if member is None or group.is_in(GroupState.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        self._schedule_heartbeat(group, member)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    # ------------------------------------------------------------ LeaveGroup

    async def leave_group(
        self, group_id: str, members: list[tuple[str, str | None]]
    ) -> tuple[int, list[int]]:
        """(top-level error, per-member errors) for (member id, instance id) pairs."""
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID, []
        if not self._running:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        try:
            group = self.manager.get_group(group_id)
        except CoordinatorError as e:
            return e.code, []
        if group is None:
            # As Kafka: the request is fine, each member is unknown.
            return ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID] * len(members)
        if group.is_in(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        if isinstance(group, ConsumerGroup):
            return await self.classic_members.leave(group, members)
        codes: list[int] = []
        for member_id, instance_id in members:
            if member_id == UNKNOWN_MEMBER_ID:
                # An admin removing a static member by its instance id.
                current = group.static_member_id(instance_id)
                if current is None:
                    codes.append(ErrorCode.UNKNOWN_MEMBER_ID)
                    continue
                member_id = current
            elif member_id in group.pending_members:
                group.pending_members.discard(member_id)
                if group.is_in(GroupState.PREPARING_REBALANCE):
                    self._check_join(group)
                codes.append(ErrorCode.NONE)
                continue
            else:
                fenced = self._fenced(group, member_id, instance_id)
                if fenced:
                    codes.append(fenced)
                    continue
            member = group.members.get(member_id)
            if member is None:
                codes.append(ErrorCode.UNKNOWN_MEMBER_ID)
                continue
            self._remove_member_and_update_group(group, member, "LeaveGroup")
            codes.append(ErrorCode.NONE)
        return ErrorCode.NONE, codes

    # ------------------------------------------------------------ offsets

    def _validate_commit(
        self, group: GroupMetadata, member_id: str, instance_id: str | None, generation_id: int
    ) -> int:
        if group.is_in(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and group.is_in(GroupState.EMPTY):
            return ErrorCode.NONE  # a group that manages its own partitions
        # Kafka's order: who is committing (member, instance, generation)
        # first; only a current member of this generation learns that the
        # group is still completing its rebalance.
        if generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID or instance_id is not None:
            fenced = self._fenced(group, member_id, instance_id)
            if fenced:
                return fenced
            if member_id not in group.members:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if generation_id != group.generation_id:
                return ErrorCode.ILLEGAL_GENERATION
        elif not group.is_in(GroupState.EMPTY):
            # No member id and no generation (v0, or an admin): only an
            # empty group takes such a commit.
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    async def commit_offsets(
        self,
        group_id: str,
        member_id: str,
        instance_id: str | None,
        generation_id: int,
        offsets: dict[tuple[str, int], tuple[int, int, str | None]],
        retention_ms: int = -1,
        api_version: int = 9,
    ) -> dict[tuple[str, int], int]:
        """offsets: (topic, partition) -> (offset, leader epoch, metadata); an
        error code per partition. The empty group id is a group like any
        other here (Kafka accepts it for commits, fetches, describe and
        delete, for old clients; only the membership APIs refuse it)."""
        if not self._running:
            return dict.fromkeys(offsets, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        try:
            group = self.manager.get_group(group_id)
            if group is None:
                if generation_id >= 0:
                    return dict.fromkeys(offsets, ErrorCode.ILLEGAL_GENERATION)
                group = self.manager.get_or_create_group(group_id)
        except CoordinatorError as e:
            return dict.fromkeys(offsets, e.code)
        if isinstance(group, ConsumerGroup):
            # KIP-848: the member epoch takes the generation's place.
            code = group.validate_offset_commit(member_id, instance_id, generation_id, api_version)
        else:
            code = self._validate_commit(group, member_id, instance_id, generation_id)
        if code:
            return dict.fromkeys(offsets, code)
        member = group.members.get(member_id)
        if member is not None:
            self._schedule_heartbeat(group, member)
        now = self.clock()
        out: dict[tuple[str, int], int] = {}
        accepted: dict[tuple[str, int], OffsetAndMetadata] = {}
        for tp, (offset, epoch, metadata) in offsets.items():
            meta = metadata or ""
            if len(meta.encode()) > self.metadata_max_bytes:
                out[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                # Any retention is accepted; the expiry saturates at the
                # largest timestamp the record's int64 field holds.
                expire = min(now + retention_ms, _MAX_TIMESTAMP) if retention_ms > 0 else -1
                accepted[tp] = OffsetAndMetadata(offset, epoch, meta, now, expire)
        if accepted:
            code = await self.manager.store_offsets(group, accepted)
            for tp in accepted:
                out[tp] = code
        return {tp: out[tp] for tp in offsets}

    async def commit_txn_offsets(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        member_id: str,
        instance_id: str | None,
        generation_id: int,
        offsets: dict[tuple[str, int], tuple[int, int, str | None]],
        *,
        transactional_id: str | None = None,
        add_to_transaction: bool = False,
    ) -> dict[tuple[str, int], int]:
        """TxnOffsetCommit: offsets written in the producer's transaction,
        committed when its COMMIT marker lands (Kafka's
        handleTxnCommitOffsets). KIP-447: a producer naming the consumer's
        member id and generation (v3+) is fenced like an OffsetCommit of
        that member — unknown member, stale generation, fenced instance id;
        without them any group state takes the commit.

        KIP-890: with ``transactional_id`` the append is verified with the
        transaction coordinator first, as a partition leader verifies a
        Produce (``transaction.partition.verification.enable``): the group's
        ``__consumer_offsets`` partition must be in the transaction, or the
        commit is refused (INVALID_TXN_STATE) and nothing written;
        ``add_to_transaction`` (v5, transactions v2) has the coordinator add
        it instead."""
        if not self._running:
            return dict.fromkeys(offsets, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        try:
            group = self.manager.get_or_create_group(group_id)
        except CoordinatorError as e:
            return dict.fromkeys(offsets, e.code)
        code = self._validate_txn_commit(group, member_id, instance_id, generation_id)
        if code:
            return dict.fromkeys(offsets, code)
        now = self.clock()
        out: dict[tuple[str, int], int] = {}
        accepted: dict[tuple[str, int], OffsetAndMetadata] = {}
        for tp, (offset, epoch, metadata) in offsets.items():
            meta = metadata or ""
            if len(meta.encode()) > self.metadata_max_bytes:
                out[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                accepted[tp] = OffsetAndMetadata(offset, epoch, meta, now, -1)
        if accepted:
            code = await self.manager.store_txn_offsets(
                group,
                producer_id,
                producer_epoch,
                accepted,
                transactional_id=transactional_id,
                add_to_transaction=add_to_transaction,
            )
            for tp in accepted:
                out[tp] = code
        return {tp: out[tp] for tp in offsets}

    def _validate_txn_commit(
        self, group: GroupMetadata, member_id: str, instance_id: str | None, generation_id: int
    ) -> int:
        if group.is_in(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and group.is_in(GroupState.EMPTY):
            return ErrorCode.NONE
        if generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID or instance_id is not None:
            if isinstance(group, ConsumerGroup):
                return group.validate_offset_commit(member_id, instance_id, generation_id, 9)
            fenced = self._fenced(group, member_id, instance_id)
            if fenced:
                return fenced
            if member_id not in group.members:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if generation_id != group.generation_id:
                return ErrorCode.ILLEGAL_GENERATION
        return ErrorCode.NONE

    def pending_txn_partitions(self, group_id: str) -> set[tuple[str, int]]:
        """The group's partitions with a transactional offset commit whose
        transaction has not ended (OffsetFetch's require_stable)."""
        try:
            group = self.manager.get_group(group_id)
        except CoordinatorError:
            return set()
        if group is None:
            return set()
        return {tp for pending in group.pending_txn_offsets.values() for tp in pending}

    def schedule_handle_txn_completion(
        self, producer_id: int, offsets_partitions: Iterable[int], is_commit: bool
    ) -> None:
        """The WriteTxnMarkers handler wrote a marker of ``producer_id`` to
        these ``__consumer_offsets`` partitions (Kafka's
        scheduleHandleTxnCompletion; here at once, on the event loop)."""
        self.manager.handle_txn_completion(producer_id, offsets_partitions, is_commit)

    def fetch_offsets(
        self,
        group_id: str,
        partitions: list[tuple[str, int]] | None,
        member_id: str | None = None,
        member_epoch: int = -1,
    ) -> tuple[int, dict[tuple[str, int], OffsetAndMetadata | None]]:
        """(error, offsets); ``partitions`` None means every committed one.
        A consumer group's member fetching (OffsetFetch v9) names itself and
        its epoch, which must be current."""
        if not self._running:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, {}
        try:
            group = self.manager.get_group(group_id)
        except CoordinatorError as e:
            return e.code, {}
        if group is None or group.is_in(GroupState.DEAD):
            return ErrorCode.NONE, dict.fromkeys(partitions or [])
        if isinstance(group, ConsumerGroup):
            code = group.validate_offset_fetch(member_id, member_epoch)
            if code:
                return code, {}
        if partitions is None:
            return ErrorCode.NONE, dict(sorted(group.offsets.items()))
        return ErrorCode.NONE, {tp: group.offsets.get(tp) for tp in partitions}

    async def delete_offsets(
        self, group_id: str, partitions: list[tuple[str, int]]
    ) -> tuple[int, dict[tuple[str, int], int]]:
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID, {}
        if not self._running:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, {}
        try:
            group = self.manager.get_group(group_id)
        except CoordinatorError as e:
            return e.code, {}
        if group is None or group.is_in(GroupState.DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND, {}
        subscribed: set[str] = set()
        if not group.is_in(GroupState.EMPTY):
            found = group.subscribed_topics()
            if found is None:
                return ErrorCode.NON_EMPTY_GROUP, {}
            subscribed = found
        out: dict[tuple[str, int], int] = {}
        doomed = []
        for tp in partitions:
            if tp[0] in subscribed:
                out[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
            else:
                doomed.append(tp)
        code = await self.manager.delete_offsets(group, doomed)
        for tp in doomed:
            out[tp] = code
        return ErrorCode.NONE, out

    def on_partitions_deleted(self, partitions: Iterable[tuple[str, int]]) -> None:
        """Partitions were deleted (their topic was): their committed offsets
        leave every group this broker coordinates, with tombstones (Kafka's
        onPartitionsDeleted), so a topic created again under the name starts
        with none (a consumer would otherwise resume the new topic at the old
        one's offsets). On a cluster every broker is told, by the
        controller's UpdateMetadata, whichever broker the deletion came to."""
        doomed = {(t, p) for t, p in partitions}
        if doomed:
            self._drop_offsets(lambda tp: tp in doomed)

    def on_topics_deleted(self, topics: Collection[str]) -> None:
        """``topics`` were deleted, whole: as on_partitions_deleted, without
        naming each partition (a topic's count can be anything a store held,
        up to 2^31 - 1; only the offsets groups hold are walked)."""
        names = set(topics)
        if names:
            self._drop_offsets(lambda tp: tp[0] in names)

    def _drop_offsets(self, deleted: Callable[[tuple[str, int]], bool]) -> None:
        for group in list(self.manager.all_groups()):
            gone = [tp for tp in group.offsets if deleted(tp)]
            if gone:
                self._spawn(self.manager.remove_deleted_offsets(group, gone))

    # ------------------------------------------------------------ admin

    def list_groups(
        self, states: set[str] | None, types: set[str] | None
    ) -> tuple[int, list[GroupMetadata]]:
        code = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.manager.loading() else 0
        out = []
        for g in self.manager.all_groups():
            if g.is_in(GroupState.DEAD):
                continue
            if states and self.group_state(g).lower() not in states:
                continue
            if types and self.group_type(g) not in types:
                continue
            out.append(g)
        return code, sorted(out, key=lambda g: g.group_id)

    @staticmethod
    def group_type(group: GroupMetadata) -> str:
        """Kafka's group type, lower case: ``classic``, ``consumer`` or ``share``."""
        return str(getattr(group, "group_type", "classic"))

    @staticmethod
    def group_state(group: GroupMetadata) -> str:
        """The state name Kafka lists the group with."""
        if isinstance(group, ConsumerGroup):
            return group.consumer_state.value
        share_state = getattr(group, "share_state", None)  # a ShareGroup
        if share_state is not None:
            return str(share_state.value)
        return group.state.value

    def describe_group(self, group_id: str) -> tuple[int, GroupMetadata | None]:
        if not self._running:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        try:
            return ErrorCode.NONE, self.manager.get_group(group_id)
        except CoordinatorError as e:
            return e.code, None

    async def delete_groups(self, group_ids: list[str]) -> dict[str, int]:
        out: dict[str, int] = {}
        for gid in group_ids:
            if not self._running:
                out[gid] = ErrorCode.COORDINATOR_NOT_AVAILABLE
                continue
            try:
                group = self.manager.get_group(gid)
            except CoordinatorError as e:
                out[gid] = e.code
                continue
            if group is None or group.is_in(GroupState.DEAD):
                out[gid] = ErrorCode.GROUP_ID_NOT_FOUND
            elif not group.is_in(GroupState.EMPTY):
                out[gid] = ErrorCode.NON_EMPTY_GROUP
            else:
                initialized = getattr(group, "initialized", None)
                if initialized and self.on_share_group_deleted is not None:
                    # A share group's delivery state goes first (Kafka's
                    # DeleteShareGroupState): kept if it cannot go, with the group.
                    code = await self.on_share_group_deleted(gid, set(initialized))
                    if code:
                        out[gid] = code
                        continue
                    initialized.clear()
                out[gid] = await self.manager.delete_group(group)
        return out
