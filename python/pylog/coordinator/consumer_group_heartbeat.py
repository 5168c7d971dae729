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
from typing import Protocol

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
from pylog.coordinator.consumer_group_migration import (
    classic_group_from_consumer_group,
    consumer_group_from_classic_group,
    consumer_group_records,
)
from pylog.coordinator.consumer_group_migration_policy import ConsumerGroupMigrationPolicy
from pylog.coordinator.consumer_group_records import (
    Record,
    consumer_group_tombstones,
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
from pylog.coordinator.records import GroupMetadataKey, RecordFormatError
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


class ClassicGroups(Protocol):
    """What the classic side (the GroupCoordinator) does when a group changes
    protocol: a classic group being upgraded stops its timers and answers
    its waiting members REBALANCE_IN_PROGRESS (``detach_classic``); one whose
    upgrade could not be written is served again (``reattach_classic``); a
    group downgraded is installed and rebalances (``install_downgraded``)."""

    def detach_classic(self, group: GroupMetadata) -> None: ...

    def reattach_classic(self, group: GroupMetadata) -> None: ...

    def install_downgraded(self, group: GroupMetadata, rebalance: bool) -> None: ...


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
        self.migration_policy = ConsumerGroupMigrationPolicy.parse(
            str(config.get("group.consumer.migration.policy"))
        )
        self.classic_max_size = int(config.get("group.max.size"))
        #: Set by the GroupCoordinator.
        self.classic: ClassicGroups | None = None
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
                try:
                    return await self._heartbeat(group, req)
                except _Refused:
                    if group.upgraded_from is not None:
                        self._undo_upgrade(group)
                    raise
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
            if req.member_epoch == 0 and type(found) is GroupMetadata:
                return self._upgrade(found, req)
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

    # ------------------------------------------------------------ migration

    def _upgrade(self, classic: GroupMetadata, req: HeartbeatRequest) -> ConsumerGroup:
        """KIP-848's online upgrade (Kafka's validateOnlineUpgrade and
        convertToConsumerGroup): the classic group becomes a consumer group
        with its members; it is written with the joining member's records."""
        gid = classic.group_id
        why = None
        if not self.migration_policy.upgrade_enabled:
            why = "the online upgrade is disabled"
        elif classic.protocol_type != "consumer":
            why = "the group does not use the consumer embedded protocol"
        elif len(classic.members) > self.max_size:
            why = "the group size exceeds the consumer group maximum size"
        if why is not None:
            _log.info("cannot upgrade classic group %s to a consumer group: %s", quoted(gid), why)
            raise _Refused(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} is not a consumer group.")
        try:
            group = consumer_group_from_classic_group(classic, self._topics(), self.clock())
        except RecordFormatError as e:
            _log.warning("cannot upgrade classic group %s: %s", quoted(gid), e)
            raise _Refused(
                ErrorCode.GROUP_ID_NOT_FOUND,
                f"Cannot upgrade the classic group {gid} to consumer group because the "
                "embedded consumer protocol is malformed.",
            ) from None
        try:
            shard = self.manager.shard_for(gid)
        except CoordinatorError as e:
            raise _Refused(e.code) from None
        group.upgraded_from = classic
        if self.classic is not None:
            self.classic.detach_classic(classic)
        shard.groups[gid] = group
        _log.info(
            "upgrading classic group %s (generation %d, %d members) to a consumer group",
            quoted(gid), classic.generation_id, len(classic.members),
        )  # fmt: skip
        return group

    def _undo_upgrade(self, group: ConsumerGroup) -> None:
        """The upgrade was not written: the classic group is served again."""
        classic, group.upgraded_from = group.upgraded_from, None
        if classic is None:
            return
        group.transition_to(GroupState.DEAD, self.clock())
        try:
            shard = self.manager.shard_for(group.group_id)
        except CoordinatorError:
            return  # the partition moved: whoever loads it finds the classic group
        if shard.groups.get(group.group_id) is group:
            shard.groups[group.group_id] = classic
            if self.classic is not None:
                self.classic.reattach_classic(classic)

    def _downgrade_allowed(self, group: ConsumerGroup, leaving: ConsumerGroupMember | None) -> bool:
        """Kafka's validateOnlineDowngradeWithFencedMember (``leaving``: the
        member fenced or leaving) and, with None, its
        validateOnlineDowngradeWithReplacedMemberId once a classic static
        member has taken the place of the last consumer-protocol one."""
        if leaving is None:
            if not group.consumer_members or group.num_classic_members != group.num_members:
                return False
            staying = group.num_members
        else:
            if not group.all_members_use_classic_except(leaving.member_id):
                return False
            if group.num_members <= 1:
                return False  # it is only empty
            staying = group.num_members - 1
        why = None
        if not self.migration_policy.downgrade_enabled:
            why = "the online downgrade is disabled"
        elif staying > self.classic_max_size:
            why = "its group size is greater than the classic group max size"
        if why is not None:
            _log.info(
                "cannot downgrade consumer group %s to a classic group: %s",
                quoted(group.group_id), why,
            )  # fmt: skip
            return False
        return True

    async def _downgrade(self, group: ConsumerGroup, leaving: ConsumerGroupMember | None) -> int:
        """KIP-848's online downgrade (Kafka's convertToClassicGroup): the
        last consumer-protocol member leaves, the classic members stay as a
        classic group, which rebalances; or (``leaving`` None) a classic
        static member took its place, and the classic group goes on Stable."""
        names = {t.topic_id: t.name for t in self._topics().values()}
        leaving_id = "" if leaving is None else leaving.member_id
        try:
            classic = classic_group_from_consumer_group(group, leaving_id, names, self.clock())
        except RecordFormatError as e:
            _log.warning("cannot downgrade consumer group %s: %s", quoted(group.group_id), e)
            return ErrorCode.GROUP_ID_NOT_FOUND
        records = consumer_group_tombstones(group)
        records.append(
            self.manager.group_record(
                classic, {m.member_id: m.assignment for m in classic.members.values()}
            )
        )
        code = await self.manager._append(group.group_id, records)
        if code:
            return code
        for mid in list(group.consumer_members):
            self._cancel(group, mid)
        group.transition_to(GroupState.DEAD, self.clock())
        _log.info(
            "consumer group %s downgraded to a classic group (generation %d, %d members): %s",
            quoted(group.group_id), classic.generation_id, len(classic.members),
            "a classic static member replaced the last consumer-protocol one"
            if leaving is None else f"member {quoted(leaving.member_id)} left",
        )  # fmt: skip
        try:
            shard = self.manager.shard_for(group.group_id)
        except CoordinatorError:
            return ErrorCode.NONE  # written: whoever loads the partition finds it classic
        shard.groups[group.group_id] = classic
        if self.classic is not None:
            self.classic.install_downgraded(classic, rebalance=leaving is not None)
        return ErrorCode.NONE

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
        replaced: ConsumerGroupMember | None = None
        member = self._member_for(group, req)
        is_new = False
        if member is None:
            if req.instance_id is not None:
                old = group.static_member(req.instance_id)
                if old is not None:
                    # A static member back after a temporary leave (-2), or
                    # one that spoke the classic protocol: it takes the old
                    # member's place and assignment.
                    replaced = old
                    member = old.replace(member_id=req.member_id or _new_member_id())
            if member is None:
                self._check_size(group)
                member = ConsumerGroupMember(req.member_id or _new_member_id())
                is_new = True
        before = member
        updated = _with_request(member, req)
        if replaced is not None:
            if replaced.use_classic_protocol:
                # Kafka's replacement of a static member by one of the other
                # protocol: it starts from epoch 0 with the old assignment.
                updated = updated.replace(member_epoch=0, previous_member_epoch=0)
            else:
                updated = updated.replace(member_epoch=replaced.previous_member_epoch)
        reconciled = await self._apply(
            group, before, updated, is_new=is_new, replaced=replaced, owned=req.owned
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

    def _check_size(self, group: ConsumerGroup) -> None:
        if group.num_members >= self.max_size:
            raise _Refused(
                ErrorCode.GROUP_MAX_SIZE_REACHED,
                f"The consumer group has reached its maximum capacity of {self.max_size} members.",
            )

    async def _apply(
        self,
        group: ConsumerGroup,
        before: ConsumerGroupMember,
        updated: ConsumerGroupMember,
        *,
        is_new: bool,
        replaced: ConsumerGroupMember | None,
        owned: Assignment | None,
    ) -> ConsumerGroupMember:
        """A member as the request leaves it (``updated``; ``before`` as it
        was): the group epoch bumped if what the target depends on changed,
        the target recomputed, the member reconciled, all written and then
        installed. Shared by ConsumerGroupHeartbeat and the classic JoinGroup
        of a classic member. Returns the member as installed."""
        now = self.clock()
        records: list[Record] = []
        upgraded = group.upgraded_from is not None
        if upgraded:
            records.extend(consumer_group_records(group))
        elif group.converted_from_classic:
            records.append((GroupMetadataKey(group.group_id).encode(), None))
        if replaced is not None:
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
            or (snapshot != group.topic_snapshot and not group.snapshot_unknown and not upgraded)
        )
        if not bump and (group.snapshot_unknown or upgraded):
            # After a load or an upgrade: bump only if the metadata now gives
            # another target.
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
                if is_new and group.num_members == 0 and not group.offsets and not upgraded:
                    self.manager.remove_group(group)
                raise _Refused(code)
        # Appended: install.
        group.converted_from_classic = False
        if upgraded:
            group.upgraded_from = None
            for mid in list(group.consumer_members):
                self._schedule_session(group, mid)
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
        if reconciled.use_classic_protocol:
            # A classic member has join and sync deadlines, not a revocation one.
            self._cancel_one(group.revocation_ops, reconciled.member_id)
        else:
            self._track_revocation(group, before, reconciled)
        if bump:
            _log.info(
                "consumer group %s at epoch %d (%d members): %s",
                quoted(group.group_id),
                group_epoch,
                group.num_members,
                "member " + quoted(reconciled.member_id) + (" joined" if is_new else " changed"),
            )
        return reconciled

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
                if (
                    member.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH
                    and not member.use_classic_protocol
                ):
                    # A classic instance is replaced at once (Kafka's
                    # getOrMaybeSubscribeStaticConsumerGroupMember).
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
        assignment without it (Kafka's consumerGroupFenceMember) — or, when
        it was the last member on the consumer protocol and the others are
        classic, the group turned back into a classic group."""
        if self._downgrade_allowed(group, member):
            return await self._downgrade(group, member)
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
        for ops in (group.session_ops, group.revocation_ops, group.join_ops, group.sync_ops):
            self._cancel_one(ops, member_id)

    @staticmethod
    def _cancel_one(ops: dict[str, ConsumerGroupTimeout], member_id: str) -> None:
        op = ops.pop(member_id, None)
        if op is not None:
            op.force_complete()

    def _schedule(
        self, group: ConsumerGroup, kind: TimeoutKind, member_id: str, timeout_ms: int
    ) -> None:
        ops = self._ops(group, kind)
        self._cancel_one(ops, member_id)
        op = ConsumerGroupTimeout(
            kind, group.group_id, member_id, timeout_ms, lambda o: self._expired(group, o)
        )
        ops[member_id] = op
        self.purgatory.try_complete_else_watch(op, ())

    @staticmethod
    def _ops(group: ConsumerGroup, kind: TimeoutKind) -> dict[str, ConsumerGroupTimeout]:
        if kind is TimeoutKind.SESSION:
            return group.session_ops
        if kind is TimeoutKind.REVOCATION:
            return group.revocation_ops
        return group.join_ops if kind is TimeoutKind.JOIN else group.sync_ops

    def _group_ms(self, group_id: str, key: str) -> int:
        """The group's override of ``key`` (Kafka's GroupConfig), else the broker's."""
        default = (
            self.session_timeout_ms
            if key == "consumer.session.timeout.ms"
            else self.heartbeat_interval_ms
        )
        return int(self.metadata_store.group_config(group_id).get(key, default))

    def _schedule_session(self, group: ConsumerGroup, member_id: str) -> None:
        member = group.member(member_id)
        if member is not None and member.classic is not None:
            # A classic member keeps the session timeout of its JoinGroup.
            timeout = member.classic.session_timeout_ms
        else:
            timeout = self._group_ms(group.group_id, "consumer.session.timeout.ms")
        self._schedule(group, TimeoutKind.SESSION, member_id, timeout)

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
        ops = self._ops(group, op.kind)
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
            why = {
                TimeoutKind.SESSION: "session timed out",
                TimeoutKind.REVOCATION: "did not revoke its partitions in its rebalance timeout",
                TimeoutKind.JOIN: "(classic) did not rejoin within its rebalance timeout",
                TimeoutKind.SYNC: "(classic) sent no SyncGroup within its rebalance timeout",
            }[op.kind]
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
        ops = (group.session_ops, group.revocation_ops, group.join_ops, group.sync_ops)
        for mid in {mid for o in ops for mid in o}:
            self._cancel(group, mid)


def _with_request(member: ConsumerGroupMember, req: HeartbeatRequest) -> ConsumerGroupMember:
    """The member with what the heartbeat changed (a field left null is
    unchanged; an empty regex or assignor clears it); the same object when
    nothing did, the common heartbeat."""
    changes: dict[str, object] = {}
    if member.classic is not None:
        changes["classic"] = None  # it speaks the consumer protocol now
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
