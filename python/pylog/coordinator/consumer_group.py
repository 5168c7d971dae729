"""ConsumerGroup: a KIP-848 consumer group (Kafka's ``ConsumerGroup``).

Its state is the group epoch (bumped whenever what the target assignment
depends on changes: members, their subscriptions, the subscribed topics'
partitions), the target assignment and its epoch, and each member's current
assignment. Kafka's states follow from those::

    Empty        no member
    Assigning    group epoch > assignment epoch (the target is being computed)
    Reconciling  some member has not reached the target at its epoch
    Stable       every member holds its target at the assignment epoch
    Dead         deleted, or its offsets partition moved away

It extends GroupMetadata for what every group type shares here — the id, the
committed offsets, the Dead state and the shard it lives in — and leaves the
classic fields unused: ``members`` (the classic group's members) stays empty,
and ``state`` mirrors this group as Empty or Stable for the classic code
paths (DeleteGroups, offset expiry).

Members that still speak the classic protocol (KIP-848's online upgrade keeps
a classic group's members when it becomes a consumer group) are consumer
members like the others, with ``classic`` metadata: their JoinGroup,
SyncGroup, Heartbeat and LeaveGroup are served against this group
(``consumer_group_classic_members``), and their commits carry their member
epoch as the generation.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Mapping
from typing import TYPE_CHECKING

from pylog.coordinator.consumer_group_member import ConsumerGroupMember, MemberState
from pylog.coordinator.group import GroupMetadata, GroupState
from pylog.coordinator.partition_assignor import TopicInfo
from pylog.errors import ErrorCode

if TYPE_CHECKING:
    from pylog.coordinator.consumer_group_timeout import ConsumerGroupTimeout

__all__ = ["ConsumerGroup", "ConsumerGroupState", "preferred_assignor"]


def preferred_assignor(members: Mapping[str, ConsumerGroupMember], default: str) -> str:
    """The assignor most members ask for (ties: by name); ``default`` when
    none asks (Kafka's computePreferredServerAssignor)."""
    votes: dict[str, int] = {}
    for m in members.values():
        if m.server_assignor:
            votes[m.server_assignor] = votes.get(m.server_assignor, 0) + 1
    if not votes:
        return default
    return min(votes, key=lambda a: (-votes[a], a))


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class ConsumerGroup(GroupMetadata):
    group_type = "consumer"

    def __init__(self, group_id: str, now_ms: int) -> None:
        super().__init__(group_id, now_ms)
        self.protocol_type = "consumer"
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.consumer_members: dict[str, ConsumerGroupMember] = {}
        self.static_consumers: dict[str, str] = {}  # instance id -> member id
        self.targets: dict[str, dict[str, frozenset[int]]] = {}
        # (topic id, partition) -> epoch of the member holding it
        self.partition_epochs: dict[tuple[str, int], int] = {}
        # The subscribed topics as the last target assignment saw them.
        self.topic_snapshot: dict[str, TopicInfo] = {}
        # Loaded from the log, which does not keep the snapshot: the first
        # heartbeat takes the metadata as it finds it unless the target it
        # would compute differs (then the epoch is bumped, as for a change).
        self.snapshot_unknown = False
        # Each member's subscribed topic ids, resolved against the topics
        # view ``resolved_view`` (the heartbeat's, by identity).
        self.subscriptions: dict[str, frozenset[str]] = {}
        self.resolved_view: Mapping[str, TopicInfo] | None = None
        self.lock = asyncio.Lock()
        self.session_ops: dict[str, ConsumerGroupTimeout] = {}
        self.revocation_ops: dict[str, ConsumerGroupTimeout] = {}
        # Made from an empty classic group: the first write tombstones that one.
        self.converted_from_classic = False
        # Made from a classic group with members (the online upgrade): the
        # first write tombstones it and writes this group's records; until
        # then a failure puts that group back.
        self.upgraded_from: GroupMetadata | None = None
        # Classic members' deadlines to rejoin after REBALANCE_IN_PROGRESS
        # and to SyncGroup after their JoinGroup (Kafka's join/sync timers).
        self.join_ops: dict[str, ConsumerGroupTimeout] = {}
        self.sync_ops: dict[str, ConsumerGroupTimeout] = {}

    # ------------------------------------------------------------ state

    @property
    def consumer_state(self) -> ConsumerGroupState:
        if self.state is GroupState.DEAD:
            return ConsumerGroupState.DEAD
        if not self.consumer_members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        for m in self.consumer_members.values():
            if m.member_epoch != self.assignment_epoch or m.state is not MemberState.STABLE:
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def _mirror_state(self, now_ms: int) -> None:
        if self.state is GroupState.DEAD:
            return
        want = GroupState.STABLE if self.consumer_members else GroupState.EMPTY
        if self.state is not want:
            self.state = want
            self.state_timestamp = now_ms

    # ------------------------------------------------------------ members

    def member(self, member_id: str) -> ConsumerGroupMember | None:
        return self.consumer_members.get(member_id)

    def static_member(self, instance_id: str) -> ConsumerGroupMember | None:
        mid = self.static_consumers.get(instance_id)
        return None if mid is None else self.consumer_members.get(mid)

    def put_member(self, member: ConsumerGroupMember, now_ms: int) -> None:
        """Install ``member`` (new or updated), keeping the partition epochs."""
        old = self.consumer_members.get(member.member_id)
        if old is member:
            return  # a heartbeat that changed nothing
        if old is not None:
            self._release(old)
        self.consumer_members[member.member_id] = member
        if member.instance_id is not None:
            self.static_consumers[member.instance_id] = member.member_id
        for tp in member.owned():
            self.partition_epochs[tp] = member.member_epoch
        self._mirror_state(now_ms)

    def drop_member(self, member_id: str, now_ms: int) -> ConsumerGroupMember | None:
        old = self.consumer_members.pop(member_id, None)
        if old is None:
            return None
        self._release(old)
        iid = old.instance_id
        if iid is not None and self.static_consumers.get(iid) == member_id:
            del self.static_consumers[iid]
        self.targets.pop(member_id, None)
        self._mirror_state(now_ms)
        return old

    def _release(self, member: ConsumerGroupMember) -> None:
        for tp in member.owned():
            self.partition_epochs.pop(tp, None)

    def partition_epoch(self, topic_id: str, partition: int) -> int:
        return self.partition_epochs.get((topic_id, partition), -1)

    @property
    def num_members(self) -> int:
        return len(self.consumer_members)

    def preferred_assignor(self, default: str) -> str:
        return preferred_assignor(self.consumer_members, default)

    # ------------------------------------------------------------ classic members

    @property
    def num_classic_members(self) -> int:
        return sum(1 for m in self.consumer_members.values() if m.use_classic_protocol)

    def supports_classic_protocols(self, protocol_type: str, names: set[str]) -> bool:
        """Whether a classic member may join (Kafka's supportsClassicProtocols):
        protocol type ``consumer``, and one protocol that every classic
        member here supports (any, when none is classic)."""
        if protocol_type != "consumer" or not names:
            return False
        for m in self.consumer_members.values():
            if m.classic is not None:
                names = names & {n for n, _ in m.classic.supported_protocols}
        return bool(names)

    def all_members_use_classic_except(self, member_id: str) -> bool:
        """Every member but ``member_id`` is classic and that one is not:
        its leaving can turn the group back into a classic group."""
        member = self.consumer_members.get(member_id)
        if member is None or member.use_classic_protocol:
            return False
        return self.num_classic_members == len(self.consumer_members) - 1

    def waiting_on_unreleased_partition(self, member: ConsumerGroupMember) -> bool:
        """A member in UNRELEASED_PARTITIONS still waits for a partition of
        its target that another member holds (Kafka's method of the name)."""
        if member.state is not MemberState.UNRELEASED_PARTITIONS:
            return False
        for topic, ps in self.targets.get(member.member_id, {}).items():
            mine = member.assigned.get(topic, frozenset())
            for p in ps:
                if p not in mine and self.partition_epoch(topic, p) != -1:
                    return True
        return False

    # ------------------------------------------------------------ offsets

    def subscribed_topics(self) -> set[str] | None:
        """Topic names some member subscribes to (regexes as last resolved):
        their offsets do not expire while the group is active."""
        names = {n for m in self.consumer_members.values() for n in m.subscribed_topic_names}
        names.update(t.name for t in self.topic_snapshot.values())
        return names

    def validate_offset_commit(
        self, member_id: str, instance_id: str | None, member_epoch: int, api_version: int
    ) -> int:
        """Kafka's ConsumerGroup.validateOffsetCommit: the member epoch takes
        the place of the classic generation."""
        if self.state is GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if member_epoch < 0 and not self.consumer_members:
            return ErrorCode.NONE  # an admin, or a consumer without group management
        member = self.consumer_members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member.use_classic_protocol:
            # A classic member commits with its generation: the member epoch.
            if member_epoch != member.member_epoch:
                return ErrorCode.ILLEGAL_GENERATION
            return ErrorCode.NONE
        if api_version < 9:
            # A KIP-848 member commits with v9+ (it must send its epoch).
            return ErrorCode.UNSUPPORTED_VERSION
        if member_epoch > member.member_epoch:
            return ErrorCode.FENCED_MEMBER_EPOCH
        if member_epoch < member.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> int:
        """Kafka's validateOffsetFetch: a fetch naming a member and an epoch
        (OffsetFetch v9) must be that member's current epoch."""
        if member_epoch < 0 and not member_id:
            return ErrorCode.NONE
        member = self.consumer_members.get(member_id or "")
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:
            if member.use_classic_protocol:
                return ErrorCode.ILLEGAL_GENERATION
            return ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE

    def __repr__(self) -> str:
        return (
            f"ConsumerGroup({self.group_id!r}, {self.consumer_state.value}, "
            f"epoch={self.group_epoch}/{self.assignment_epoch}, "
            f"members={len(self.consumer_members)})"
        )
