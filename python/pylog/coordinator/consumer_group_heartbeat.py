"""ConsumerGroupHeartbeat: the KIP-848 consumer-group protocol, the part of
Kafka's GroupMetadataManager behind ``consumerGroupHeartbeat`` and
``consumerGroupLeave`` (``group.protocol=consumer`` clients).

One heartbeat, in Kafka's order: the request is checked (INVALID_REQUEST,
UNSUPPORTED_ASSIGNOR, INVALID_REGULAR_EXPRESSION); the group is found or, for
a joining member (epoch 0), created; the member is found, created or — a
static member coming back — takes its old place (UNKNOWN_MEMBER_ID,
FENCED_INSTANCE_ID, UNRELEASED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED); its
epoch is checked (FENCED_MEMBER_EPOCH); its subscription is updated. Whatever
the target assignment depends on having changed (a new member, another
subscription, the subscribed topics' partitions), the group epoch is bumped
and a new target computed by the group's assignor (TargetAssignmentBuilder);
then the member reconciles towards its target (CurrentAssignmentBuilder).

Every change is written first — one batch of ConsumerGroup* records to the
group's ``__consumer_offsets`` partition — and installed in memory only once
appended, so the cache never holds what a restart would not find. A group's
heartbeats are serialised by its lock (Kafka serialises a shard's writes).
Sessions (``group.consumer.session.timeout.ms``) and revocation deadlines
(the member's rebalance timeout) run on a purgatory of the native timing
wheel; one that passes fences the member.

Regular expressions (``SubscribedTopicRegex``, heartbeat v1): Kafka evaluates
them with RE2/J against the whole topic name; here Python's ``re`` with
``fullmatch``. RE2 has no backreferences or lookaround, and neither is
accepted here (INVALID_REGULAR_EXPRESSION), nor a quantified group that
itself holds a quantifier — Python's backtracking engine could take
exponential time on those, RE2 never does. Internal topics never match.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass

from pylog.common.utils.time import Clock
from pylog.coordinator.consumer_group import ConsumerGroup, preferred_assignor
from pylog.coordinator.consumer_group_member import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    Assignment,
    ConsumerGroupMember,
    MemberState,
    assignment_of,
)
from pylog.coordinator.consumer_group_records import (
    Record,
    current_assignment_record,
    group_epoch_record,
    member_metadata_record,
    member_tombstones,
    target_epoch_record,
    target_member_record,
)
from pylog.coordinator.consumer_group_timeout import ConsumerGroupTimeout, TimeoutKind
from pylog.coordinator.current_assignment_builder import CurrentAssignmentBuilder
from pylog.coordinator.group import GroupMetadata, GroupState
from pylog.coordinator.group_metadata_manager import CoordinatorError, GroupMetadataManager
from pylog.coordinator.partition_assignor import PartitionAssignor, TopicInfo
from pylog.coordinator.range_assignor import RangeAssignor
from pylog.coordinator.records import GroupMetadataKey
from pylog.coordinator.target_assignment_builder import TargetAssignmentBuilder
from pylog.coordinator.uniform_assignor import UniformAssignor
from pylog.errors import ErrorCode
from pylog.logsafe import quoted
from pylog.metadata.store import MetadataStore
from pylog.server.config import KafkaConfig
from pylog.server.purgatory import DelayedOperationPurgatory

__all__ = [
    "ASSIGNOR_CLASS_NAMES",
    "ConsumerGroupHeartbeat",
    "HeartbeatRequest",
    "HeartbeatResult",
    "assignor_names",
]

_log = logging.getLogger("pylog.coordinator")

#: Kafka's class names for its assignors (``group.consumer.assignors``'
#: default names them so); the short names are what members ask for.
ASSIGNOR_CLASS_NAMES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}
_ASSIGNORS: dict[str, type[PartitionAssignor]] = {
    "uniform": UniformAssignor,
    "range": RangeAssignor,
}

# RE2 refuses these; Python's re would take them (and may backtrack without end).
_NOT_RE2 = re.compile(r"\(\?<?[=!]|\\[1-9]|\(\?P=")
_NESTED_QUANTIFIER = re.compile(r"\([^()]*[*+}][^()]*\)\s*[*+{]")


def assignor_names(configured: list[str]) -> list[str]:
    """``group.consumer.assignors`` as the names members use, in order."""
    return [ASSIGNOR_CLASS_NAMES.get(n, n) for n in configured]


@dataclass
class HeartbeatRequest:
    """The fields of a ConsumerGroupHeartbeat the coordinator reads (None:
    unchanged since the member's last heartbeat)."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: list[str] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: dict[str, frozenset[int]] | None = None
    client_id: str = ""
    client_host: str = ""
    api_version: int = 1


@dataclass
class HeartbeatResult:
    error_code: int
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None


class _Refused(Exception):
    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message or ErrorCode(code).name)
        self.code = code
        self.message = message


class ConsumerGroupHeartbeat:
    def __init__(
        self,
        config: KafkaConfig,
        manager: GroupMetadataManager,
        metadata_store: MetadataStore,
        clock: Clock,
        spawn: Callable[[Coroutine[object, object, object]], None],
    ) -> None:
        self.manager = manager
        self.metadata_store = metadata_store
        self.clock = clock
        self._spawn = spawn
        self.heartbeat_interval_ms = int(config.get("group.consumer.heartbeat.interval.ms"))
        self.session_timeout_ms = int(config.get("group.consumer.session.timeout.ms"))
        self.max_size = int(config.get("group.consumer.max.size"))
        names = assignor_names(list(config.get("group.consumer.assignors")))
        self.assignors: dict[str, PartitionAssignor] = {n: _ASSIGNORS[n]() for n in names}
        self.default_assignor = names[0]
        self.purgatory: DelayedOperationPurgatory[ConsumerGroupTimeout] = DelayedOperationPurgatory(
            "ConsumerGroupHeartbeat"
        )
        self.running = True
        # The topics as last read, and subscriptions resolved against them.
        self._view: tuple[tuple[str, str, int], ...] = ()
        self._view_topics: dict[str, TopicInfo] = {}
        self._resolved: dict[tuple[tuple[str, ...], str | None], frozenset[str]] = {}

    def shutdown(self) -> None:
        self.running = False
        self.purgatory.shutdown()

    # ------------------------------------------------------------ validation

    def _validate(self, req: HeartbeatRequest) -> None:
        """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid."""
        bad = ErrorCode.INVALID_REQUEST
        if not req.group_id:
            raise _Refused(bad, "GroupId can't be empty.")
        if req.instance_id is not None and not req.instance_id:
            raise _Refused(bad, "InstanceId can't be empty.")
        if req.rack_id is not None and not req.rack_id:
            raise _Refused(bad, "RackId can't be empty.")
        if req.api_version >= 1 and not req.member_id:
            # KIP-1082: from v1 the client makes its member id.
            raise _Refused(bad, "MemberId can't be empty.")
        if req.member_epoch == 0:
            if req.rebalance_timeout_ms == -1:
                raise _Refused(bad, "RebalanceTimeoutMs must be provided in first request.")
            if req.owned is None or req.owned:
                raise _Refused(bad, "TopicPartitions must be empty when (re-)joining.")
            if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
                raise _Refused(
                    bad,
                    "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.",
                )
        elif req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if req.instance_id is None:
                raise _Refused(bad, "InstanceId can't be null.")
            if not req.member_id:
                raise _Refused(bad, "MemberId can't be empty.")
        elif req.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            raise _Refused(bad, f"MemberEpoch {req.member_epoch} is invalid.")
        elif not req.member_id:
            raise _Refused(bad, "MemberId can't be empty.")
        if req.subscribed_topic_regex:
            # The empty string clears a regex (librdkafka sends it with names).
            self._compile(req.subscribed_topic_regex)
        if req.server_assignor is not None and req.server_assignor not in self.assignors:
            raise _Refused(
                ErrorCode.UNSUPPORTED_ASSIGNOR,
                f"ServerAssignor {req.server_assignor} is not supported. Supported assignors: "
                + ", ".join(self.assignors)
                + ".",
            )

    @staticmethod
    def _compile(regex: str) -> re.Pattern[str]:
        if _NOT_RE2.search(regex) or _NESTED_QUANTIFIER.search(regex):
            raise _Refused(
                ErrorCode.INVALID_REGULAR_EXPRESSION,
                f"SubscribedTopicRegex {regex!r} is not a valid regular expression.",
            )
        try:
            return re.compile(regex)
        except (re.error, RecursionError, OverflowError) as e:
            raise _Refused(
                ErrorCode.INVALID_REGULAR_EXPRESSION,
                f"SubscribedTopicRegex {regex!r} is not a valid regular expression: {e}",
            ) from None

    # ------------------------------------------------------------ entry

    async def heartbeat(self, req: HeartbeatRequest) -> HeartbeatResult:
        try:
            self._validate(req)
            if not self.running:
                raise _Refused(ErrorCode.COORDINATOR_NOT_AVAILABLE)
            try:
                found = self.manager.get_group(req.group_id)
            except CoordinatorError as e:
                raise _Refused(e.code) from None
            if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                if not isinstance(found, ConsumerGroup) or found.is_in(GroupState.DEAD):
                    raise _Refused(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {req.group_id} not found.")
                async with found.lock:
                    return await self._leave(found, req)
            group = self._group_for(found, req)
            async with group.lock:
                if group.is_in(GroupState.DEAD):
                    raise _Refused(ErrorCode.COORDINATOR_NOT_AVAILABLE)
                return await self._heartbeat(group, req)
        except _Refused as e:
            return HeartbeatResult(e.code, e.message)

    def _group_for(self, found: GroupMetadata | None, req: HeartbeatRequest) -> ConsumerGroup:
        if isinstance(found, ConsumerGroup) and not found.is_in(GroupState.DEAD):
            return found
        if (
            found is not None
            and not found.is_in(GroupState.DEAD)
            and (found.members or not found.is_in(GroupState.EMPTY))
        ):
            # Kafka would convert a classic group whose members change
            # protocol (KIP-848's online upgrade): not done here.
            raise _Refused(
                ErrorCode.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a consumer group."
            )
        if req.member_epoch != 0:
            raise _Refused(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {req.group_id} not found.")
        group = ConsumerGroup(req.group_id, self.clock())
        if found is not None:
            # An empty classic group becomes a consumer group; its offsets stay.
            group.offsets = found.offsets
            group.converted_from_classic = True
        try:
            shard = self.manager.shard_for(req.group_id)
        except CoordinatorError as e:
            raise _Refused(e.code) from None
        shard.groups[req.group_id] = group
        return group

    def _assignor(self, members: Mapping[str, ConsumerGroupMember]) -> PartitionAssignor:
        name = preferred_assignor(members, self.default_assignor)
        return self.assignors.get(name, self.assignors[self.default_assignor])

    # ------------------------------------------------------------ topics

    def _topics(self) -> dict[str, TopicInfo]:
        """Every non-internal topic by name, as the metadata has it now. The
        subscriptions resolved against the previous view are kept while it
        is the same (a group's heartbeat resolves every member's)."""
        view = tuple(
            (t.name, t.topic_id, t.partitions)
            for t in self.metadata_store.topics()
            if not t.is_internal
        )
        if view != self._view:
            self._view = view
            self._view_topics = {n: TopicInfo(tid, n, ps) for n, tid, ps in view}
            self._resolved.clear()
        return self._view_topics

    def _subscribed(
        self, member: ConsumerGroupMember, topics: Mapping[str, TopicInfo]
    ) -> frozenset[str]:
        """The topic ids ``member`` subscribes to, of topics that exist."""
        key = (member.subscribed_topic_names, member.subscribed_topic_regex)
        found = self._resolved.get(key)
        if found is not None:
            return found
        ids = {topics[n].topic_id for n in member.subscribed_topic_names if n in topics}
        if member.subscribed_topic_regex:
            try:
                pattern = self._compile(member.subscribed_topic_regex)
            except _Refused:
                pattern = None
            if pattern is not None:
                ids.update(t.topic_id for n, t in topics.items() if pattern.fullmatch(n))
        if len(self._resolved) > 10_000:
            self._resolved.clear()
        found = self._resolved[key] = frozenset(ids)
        return found

    # ------------------------------------------------------------ heartbeat

    async def _heartbeat(self, group: ConsumerGroup, req: HeartbeatRequest) -> HeartbeatResult:
        now = self.clock()
        records: list[Record] = []
        if group.converted_from_classic:
            records.append((GroupMetadataKey(group.group_id).encode(), None))
        replaced: ConsumerGroupMember | None = None
        member = self._member_for(group, req)
        is_new = False
        if member is None:
            if req.instance_id is not None:
                old = group.static_member(req.instance_id)
                if old is not None:
                    # A static member back after a temporary leave (-2): it
                    # takes the old member's place, epoch and assignment.
                    replaced = old
                    member = old.replace(member_id=req.member_id or _new_member_id())
            if member is None:
                if group.num_members >= self.max_size:
                    raise _Refused(
                        ErrorCode.GROUP_MAX_SIZE_REACHED,
                        f"The consumer group has reached its maximum capacity of "
                        f"{self.max_size} members.",
                    )
                member = ConsumerGroupMember(req.member_id or _new_member_id())
                is_new = True
        before = member
        updated = _with_request(member, req)
        if replaced is not None:
            updated = updated.replace(member_epoch=replaced.previous_member_epoch)
            records.extend(member_tombstones(group.group_id, replaced.member_id))
        topics = self._topics()
        steady = (
            not is_new
            and replaced is None
            and not group.snapshot_unknown
            and group.resolved_view is topics
            and updated.subscription_key() == before.subscription_key()
        )
        if steady:
            # Nothing the target depends on changed since the last heartbeat
            # that looked: no O(members) walk for the common heartbeat.
            members = group.consumer_members
            subscriptions = group.subscriptions
            snapshot = group.topic_snapshot
        else:
            # Members as they will be, for the target assignment.
            members = dict(group.consumer_members)
            if replaced is not None:
                members.pop(replaced.member_id, None)
            members[updated.member_id] = updated
            subscriptions = {mid: self._subscribed(m, topics) for mid, m in members.items()}
            wanted = frozenset().union(*subscriptions.values()) if subscriptions else frozenset()
            snapshot = {t.topic_id: t for t in topics.values() if t.topic_id in wanted}
        group_epoch = group.group_epoch
        bump = (
            is_new
            or updated.subscription_key() != before.subscription_key()
            or (snapshot != group.topic_snapshot and not group.snapshot_unknown)
        )
        if not bump and group.snapshot_unknown:
            # After a load: bump only if the metadata now gives another target.
            bump = (
                TargetAssignmentBuilder(
                    self._assignor(members), members, group.targets, snapshot, subscriptions
                )
                .build()
                .changed
                != []
            )
        if bump:
            group_epoch += 1
            records.append(group_epoch_record(group.group_id, group_epoch))
        targets: dict[str, dict[str, frozenset[int]]] = dict(group.targets)
        if replaced is not None:
            # The static member's successor inherits its target as it is.
            targets[updated.member_id] = targets.pop(replaced.member_id, {})
            if not bump:
                records.append(
                    target_member_record(
                        group.group_id, updated.member_id, targets[updated.member_id]
                    )
                )
        assignment_epoch = group.assignment_epoch
        if group_epoch > assignment_epoch:
            assignor = self._assignor(members)
            result = TargetAssignmentBuilder(
                assignor, members, targets, snapshot, subscriptions
            ).build()
            for mid in result.changed:
                records.append(target_member_record(group.group_id, mid, result.targets[mid]))
            targets = {mid: dict(t) for mid, t in result.targets.items()}
            assignment_epoch = group_epoch
            records.append(target_epoch_record(group.group_id, assignment_epoch))
        # Reconcile the member towards its target.
        owned = req.owned
        reconciled = CurrentAssignmentBuilder(
            updated,
            assignment_epoch,
            targets.get(updated.member_id, {}),
            subscriptions.get(updated.member_id, frozenset()),
            lambda t, p: _partition_epoch(group, replaced, t, p),
            owned,
        ).build()
        metadata_changed = reconciled is not before and (
            reconciled.metadata_key() != before.metadata_key()
        )
        if is_new or replaced is not None or metadata_changed:
            records.append(member_metadata_record(group.group_id, reconciled))
        assignment_changed = reconciled is not before and (
            reconciled.assignment_key() != before.assignment_key()
        )
        if is_new or replaced is not None or assignment_changed:
            records.append(current_assignment_record(group.group_id, reconciled))
        if records:
            code = await self.manager._append(group.group_id, records)
            if code:
                if is_new and group.num_members == 0 and not group.offsets:
                    self.manager.remove_group(group)
                raise _Refused(code)
        # Appended: install.
        group.converted_from_classic = False
        if replaced is not None:
            group.drop_member(replaced.member_id, now)
            self._cancel(group, replaced.member_id)
        group.group_epoch = group_epoch
        group.assignment_epoch = assignment_epoch
        group.targets = targets
        group.topic_snapshot = snapshot
        group.snapshot_unknown = False
        group.subscriptions = subscriptions
        group.resolved_view = topics
        group.put_member(reconciled, now)
        self._schedule_session(group, reconciled.member_id)
        self._track_revocation(group, before, reconciled)
        if bump:
            _log.info(
                "consumer group %s at epoch %d (%d members): %s",
                quoted(group.group_id),
                group_epoch,
                group.num_members,
                "member " + quoted(reconciled.member_id) + (" joined" if is_new else " changed"),
            )
        full = (
            req.rebalance_timeout_ms != -1
            and (req.subscribed_topic_names is not None or req.subscribed_topic_regex is not None)
            and req.owned is not None
        )
        show = (
            req.member_epoch == 0
            or full
            or (
                reconciled.assigned is not before.assigned
                and dict(reconciled.assigned) != dict(before.assigned)
            )
        )
        return HeartbeatResult(
            ErrorCode.NONE,
            None,
            reconciled.member_id,
            reconciled.member_epoch,
            self._group_ms(group.group_id, "consumer.heartbeat.interval.ms"),
            reconciled.assigned if show else None,
        )

    def _member_for(
        self, group: ConsumerGroup, req: HeartbeatRequest
    ) -> ConsumerGroupMember | None:
        """The member the heartbeat is from, its epoch checked; None for a
        member joining (epoch 0) that the group does not know yet."""
        if req.instance_id is not None:
            member = group.static_member(req.instance_id)
            if req.member_epoch == 0:
                if member is None:
                    return None
                if member.member_id == req.member_id and member.previous_member_epoch == 0:
                    return self._retried_join(member, req)
                if member.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                    raise _Refused(
                        ErrorCode.UNRELEASED_INSTANCE_ID,
                        f"Static member {member.member_id} with instance id "
                        f"{req.instance_id} is still in the group and its "
                        "partitions are not released yet.",
                    )
                return None  # the caller takes the old member's place
            if member is None:
                raise _Refused(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"Instance id {req.instance_id} is unknown.",
                )
            if member.member_id != req.member_id:
                raise _Refused(
                    ErrorCode.FENCED_INSTANCE_ID,
                    f"Static member {req.member_id} with instance id {req.instance_id} "
                    f"was fenced by member {member.member_id}.",
                )
        else:
            member = group.member(req.member_id)
            if req.member_epoch == 0:
                if member is None:
                    return None
                if member.previous_member_epoch == 0 and member.member_epoch > 0:
                    return self._retried_join(member, req)
                # A known dynamic member rejoining from scratch (it was
                # fenced on its side): it starts over as a new member.
                self._fence_now(group, member, "rejoined with epoch 0")
                return None
            if member is None:
                raise _Refused(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"Member {req.member_id} is not a member of group {group.group_id}.",
                )
        self._check_epoch(member, req)
        return member

    @staticmethod
    def _retried_join(member: ConsumerGroupMember, req: HeartbeatRequest) -> ConsumerGroupMember:
        """The answer to the join was lost: the member asks again with 0."""
        del req
        return member

    @staticmethod
    def _check_epoch(member: ConsumerGroupMember, req: HeartbeatRequest) -> None:
        """Kafka's throwIfMemberEpochIsInvalid."""
        epoch = req.member_epoch
        if epoch > member.member_epoch:
            raise _Refused(
                ErrorCode.FENCED_MEMBER_EPOCH,
                f"The consumer group member has a greater member epoch ({epoch}) than the "
                f"one known by the group coordinator ({member.member_epoch}). The member "
                "must abandon all its partitions and rejoin.",
            )
        if epoch < member.member_epoch:
            owned = req.owned
            subset = owned is not None and all(
                ps <= member.assigned.get(t, frozenset()) for t, ps in owned.items()
            )
            if epoch != member.previous_member_epoch or not subset:
                raise _Refused(
                    ErrorCode.FENCED_MEMBER_EPOCH,
                    f"The consumer group member has a smaller member epoch ({epoch}) than the "
                    f"one known by the group coordinator ({member.member_epoch}). The member "
                    "must abandon all its partitions and rejoin.",
                )

    # ------------------------------------------------------------ leaving

    async def _leave(self, group: ConsumerGroup, req: HeartbeatRequest) -> HeartbeatResult:
        if req.instance_id is None:
            member = group.member(req.member_id)
            if member is None:
                raise _Refused(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"Member {req.member_id} is not a member of group {group.group_id}.",
                )
        else:
            member = group.static_member(req.instance_id)
            if member is None:
                raise _Refused(
                    ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown."
                )
            if member.member_id != req.member_id:
                raise _Refused(
                    ErrorCode.FENCED_INSTANCE_ID,
                    f"Static member {req.member_id} with instance id {req.instance_id} "
                    f"was fenced by member {member.member_id}.",
                )
        if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            # A static member's temporary leave: it keeps its place and
            # assignment until its session expires or it comes back.
            left = member.replace(
                member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                previous_member_epoch=member.member_epoch,
            )
            code = await self.manager._append(
                group.group_id, [current_assignment_record(group.group_id, left)]
            )
            if code:
                raise _Refused(code)
            group.put_member(left, self.clock())
            self._schedule_session(group, left.member_id)
            return HeartbeatResult(ErrorCode.NONE, None, req.member_id, req.member_epoch, 0)
        code = await self._remove(group, member, "left the group")
        if code:
            raise _Refused(code)
        return HeartbeatResult(ErrorCode.NONE, None, req.member_id, req.member_epoch, 0)

    async def _remove(self, group: ConsumerGroup, member: ConsumerGroupMember, why: str) -> int:
        """Fence ``member`` out: tombstones, a new group epoch and a target
        assignment without it (Kafka's consumerGroupFenceMember)."""
        records = member_tombstones(group.group_id, member.member_id)
        members = {mid: m for mid, m in group.consumer_members.items() if mid != member.member_id}
        group_epoch = group.group_epoch + 1
        records.append(group_epoch_record(group.group_id, group_epoch))
        topics = self._topics()
        subscriptions = {mid: self._subscribed(m, topics) for mid, m in members.items()}
        wanted = frozenset().union(*subscriptions.values()) if subscriptions else frozenset()
        snapshot = {t.topic_id: t for t in topics.values() if t.topic_id in wanted}
        old_targets = {mid: t for mid, t in group.targets.items() if mid != member.member_id}
        assignor = self._assignor(members)
        result = TargetAssignmentBuilder(
            assignor, members, old_targets, snapshot, subscriptions
        ).build()
        for mid in result.changed:
            records.append(target_member_record(group.group_id, mid, result.targets[mid]))
        records.append(target_epoch_record(group.group_id, group_epoch))
        code = await self.manager._append(group.group_id, records)
        if code:
            return code
        now = self.clock()
        group.drop_member(member.member_id, now)
        self._cancel(group, member.member_id)
        group.group_epoch = group.assignment_epoch = group_epoch
        group.targets = {mid: dict(t) for mid, t in result.targets.items()}
        group.topic_snapshot = snapshot
        group.snapshot_unknown = False
        group.subscriptions = subscriptions
        group.resolved_view = topics
        _log.info(
            "consumer group %s at epoch %d (%d members): member %s %s",
            quoted(group.group_id),
            group_epoch,
            group.num_members,
            quoted(member.member_id),
            why,
        )
        return ErrorCode.NONE

    def _fence_now(self, group: ConsumerGroup, member: ConsumerGroupMember, why: str) -> None:
        """Drop a member from memory at once (its tombstones follow with the
        rejoin's records: the rejoin writes its member records again)."""
        group.drop_member(member.member_id, self.clock())
        self._cancel(group, member.member_id)
        _log.info(
            "consumer group %s: member %s %s", quoted(group.group_id), quoted(member.member_id),
            why,
        )  # fmt: skip

    # ------------------------------------------------------------ timers

    def _cancel(self, group: ConsumerGroup, member_id: str) -> None:
        for ops in (group.session_ops, group.revocation_ops):
            op = ops.pop(member_id, None)
            if op is not None:
                op.force_complete()

    def _group_ms(self, group_id: str, key: str) -> int:
        """The group's override of ``key`` (Kafka's GroupConfig), else the broker's."""
        default = (
            self.session_timeout_ms
            if key == "consumer.session.timeout.ms"
            else self.heartbeat_interval_ms
        )
        return int(self.metadata_store.group_config(group_id).get(key, default))

    def _schedule_session(self, group: ConsumerGroup, member_id: str) -> None:
        old = group.session_ops.pop(member_id, None)
        if old is not None:
            old.force_complete()
        op = ConsumerGroupTimeout(
            TimeoutKind.SESSION, group.group_id, member_id,
            self._group_ms(group.group_id, "consumer.session.timeout.ms"),
            lambda o: self._expired(group, o),
        )  # fmt: skip
        group.session_ops[member_id] = op
        self.purgatory.try_complete_else_watch(op, ())

    def _track_revocation(
        self, group: ConsumerGroup, before: ConsumerGroupMember, after: ConsumerGroupMember
    ) -> None:
        """A member newly asked to revoke gets its rebalance timeout to do so;
        one that has revoked is off the clock."""
        revoking = after.state is MemberState.UNREVOKED_PARTITIONS
        if not revoking:
            op = group.revocation_ops.pop(after.member_id, None)
            if op is not None:
                op.force_complete()
            return
        if (
            before.state is MemberState.UNREVOKED_PARTITIONS
            and after.member_id in group.revocation_ops
        ):
            return
        timeout = after.rebalance_timeout_ms if after.rebalance_timeout_ms > 0 else 300_000
        op = ConsumerGroupTimeout(
            TimeoutKind.REVOCATION, group.group_id, after.member_id, timeout,
            lambda o: self._expired(group, o),
        )  # fmt: skip
        group.revocation_ops[after.member_id] = op
        self.purgatory.try_complete_else_watch(op, ())

    def _expired(self, group: ConsumerGroup, op: ConsumerGroupTimeout) -> None:
        ops = group.session_ops if op.kind is TimeoutKind.SESSION else group.revocation_ops
        if ops.get(op.member_id) is not op or not self.running:
            return
        del ops[op.member_id]
        self._spawn(self._fence_expired(group, op))

    async def _fence_expired(self, group: ConsumerGroup, op: ConsumerGroupTimeout) -> None:
        async with group.lock:
            if group.is_in(GroupState.DEAD):
                return
            member = group.member(op.member_id)
            if member is None:
                return
            why = (
                "session timed out"
                if op.kind is TimeoutKind.SESSION
                else "did not revoke its partitions within its rebalance timeout"
            )
            code = await self._remove(group, member, why)
            if code:
                # Try again later: the member stays until its removal is written.
                _log.warning(
                    "consumer group %s: fencing member %s failed (%s)",
                    quoted(group.group_id), quoted(member.member_id), ErrorCode(code).name,
                )  # fmt: skip
                self._schedule_session(group, member.member_id)

    def on_loaded(self, group: ConsumerGroup) -> None:
        """Members restored from the log get a session from now."""
        for mid in list(group.consumer_members):
            self._schedule_session(group, mid)

    def on_resigned(self, group: ConsumerGroup) -> None:
        for mid in list(group.session_ops) + list(group.revocation_ops):
            self._cancel(group, mid)


def _with_request(member: ConsumerGroupMember, req: HeartbeatRequest) -> ConsumerGroupMember:
    """The member with what the heartbeat changed (a field left null is
    unchanged; an empty regex or assignor clears it); the same object when
    nothing did, the common heartbeat."""
    changes: dict[str, object] = {}
    if req.instance_id is not None and req.instance_id != member.instance_id:
        changes["instance_id"] = req.instance_id
    if req.rack_id is not None and req.rack_id != member.rack_id:
        changes["rack_id"] = req.rack_id
    if req.rebalance_timeout_ms != -1 and req.rebalance_timeout_ms != member.rebalance_timeout_ms:
        changes["rebalance_timeout_ms"] = req.rebalance_timeout_ms
    if req.client_id != member.client_id:
        changes["client_id"] = req.client_id
    if req.client_host != member.client_host:
        changes["client_host"] = req.client_host
    if req.subscribed_topic_names is not None:
        names = tuple(req.subscribed_topic_names)
        if names != member.subscribed_topic_names:
            changes["subscribed_topic_names"] = names
    if req.subscribed_topic_regex is not None:
        regex = req.subscribed_topic_regex or None
        if regex != member.subscribed_topic_regex:
            changes["subscribed_topic_regex"] = regex
    if req.server_assignor is not None:
        assignor = req.server_assignor or None
        if assignor != member.server_assignor:
            changes["server_assignor"] = assignor
    return member.replace(**changes) if changes else member


def _partition_epoch(
    group: ConsumerGroup, replaced: ConsumerGroupMember | None, topic: str, partition: int
) -> int:
    """The epoch of the member holding a partition; a static member's old
    incarnation does not hold against its successor."""
    if replaced is not None and (topic, partition) in replaced.owned():
        return -1
    return group.partition_epoch(topic, partition)


def _new_member_id() -> str:
    """Version 0 of the heartbeat: the coordinator names the member."""
    return str(uuid.uuid4())


def owned_from_wire(pairs: list[tuple[str, list[int]]] | None) -> dict[str, frozenset[int]] | None:
    """A heartbeat's TopicPartitions as an assignment (None: not sent)."""
    if pairs is None:
        return None
    return assignment_of({t: ps for t, ps in pairs})
