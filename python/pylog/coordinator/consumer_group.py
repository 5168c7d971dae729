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
classic fields unused: ``members`` (the classic members) stays empty, so a
classic JoinGroup, SyncGroup or Heartbeat naming a member finds none
(UNKNOWN_MEMBER_ID, as Kafka answers), and ``state`` mirrors this group as
Empty or Stable for the classic code paths (DeleteGroups, offset expiry).
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
            return ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE

    def __repr__(self) -> str:
        return (
            f"ConsumerGroup({self.group_id!r}, {self.consumer_state.value}, "
            f"epoch={self.group_epoch}/{self.assignment_epoch}, "
            f"members={len(self.consumer_members)})"
        )
