"""GroupMetadata and MemberMetadata: one classic consumer group's state.

The state machine (Kafka's classic group)::

    Empty ──join──▶ PreparingRebalance ──all joined / timeout──▶ CompletingRebalance
      ▲                  ▲        │ (no member left)                  │ leader's SyncGroup
      │                  │        ▼                                   ▼
      └──────────────────┴── Empty        Stable ◀──────────────────────┘
                         └──── join / leave / session timeout ── Stable
    any state ──group deleted, partition resigned──▶ Dead

Everything here runs on the broker's event loop: no locks.
"""

from __future__ import annotations

import asyncio
import enum
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pylog.coordinator.records import subscribed_topics

if TYPE_CHECKING:  # the delayed operations import this module
    from pylog.coordinator.delayed_heartbeat import DelayedHeartbeat
    from pylog.coordinator.delayed_join import DelayedJoin
    from pylog.coordinator.delayed_sync import DelayedSync

__all__ = [
    "GroupMetadata",
    "GroupState",
    "JoinGroupMember",
    "JoinGroupResult",
    "MemberMetadata",
    "OffsetAndMetadata",
    "SyncGroupResult",
]

UNKNOWN_MEMBER_ID = ""
NO_GENERATION = -1


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(
        {
            GroupState.STABLE,
            GroupState.PREPARING_REBALANCE,
            GroupState.COMPLETING_REBALANCE,
            GroupState.EMPTY,
            GroupState.DEAD,
        }
    ),
}


@dataclass(slots=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1


@dataclass(slots=True)
class JoinGroupMember:
    """A member as the leader's JoinGroup answer lists it."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(slots=True)
class JoinGroupResult:
    """What a JoinGroup gets (Kafka's JoinGroupResult); the handler answers it
    in the request's version. An error leaves the other fields as they are here."""

    error_code: int
    member_id: str = UNKNOWN_MEMBER_ID
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    members: list[JoinGroupMember] = field(default_factory=list)


@dataclass(slots=True)
class SyncGroupResult:
    """What a SyncGroup gets (Kafka's SyncGroupResult): the member's assignment."""

    error_code: int
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(eq=False)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    # The JoinGroup / SyncGroup responses this member waits for.
    await_join: asyncio.Future[JoinGroupResult] | None = None
    await_sync: asyncio.Future[SyncGroupResult] | None = None
    is_new: bool = False
    heartbeat_satisfied: bool = False
    heartbeat_op: DelayedHeartbeat | None = field(default=None, repr=False)

    @property
    def is_awaiting_join(self) -> bool:
        return self.await_join is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.await_sync is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        raise KeyError(protocol)

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError("member supports none of the candidate protocols")


class GroupMetadata:
    """A group: its members, generation, chosen protocol and committed offsets."""

    def __init__(self, group_id: str, now_ms: int, state: GroupState = GroupState.EMPTY) -> None:
        self.group_id = group_id
        self.state = state
        self.state_timestamp = now_ms
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.generation_id = 0
        self.leader_id: str | None = None
        self.members: dict[str, MemberMetadata] = {}
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        self.pending_members: set[str] = set()  # ids handed out by MEMBER_ID_REQUIRED
        self.offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
        #: Offsets committed in a transaction (TxnOffsetCommit), by producer
        #: id: written to the log, visible only once the transaction's COMMIT
        #: marker lands there (Kafka's pendingTransactionalOffsetCommits).
        self.pending_txn_offsets: dict[int, dict[tuple[str, int], OffsetAndMetadata]] = {}
        self.new_member_added = False
        self.join_op: DelayedJoin | None = None  # the DelayedJoin of the current rebalance
        # Members of this generation that have not sent SyncGroup yet, and the
        # DelayedSync that removes them if they never do.
        self.pending_sync: set[str] = set()
        self.sync_op: DelayedSync | None = None

    # ------------------------------------------------------------ transactional offsets

    def prepare_txn_offset_commit(
        self, producer_id: int, offsets: dict[tuple[str, int], OffsetAndMetadata]
    ) -> None:
        """The producer's offsets were appended in its transaction."""
        self.pending_txn_offsets.setdefault(producer_id, {}).update(offsets)

    def complete_pending_txn_offset_commit(self, producer_id: int, is_commit: bool) -> int:
        """The producer's transaction ended: on COMMIT its offsets become the
        committed ones, on ABORT they are dropped. Returns how many moved."""
        pending = self.pending_txn_offsets.pop(producer_id, None)
        if not pending or not is_commit:
            return 0
        self.offsets.update(pending)
        return len(pending)

    def has_pending_offset_commits_for(self, tp: tuple[str, int]) -> bool:
        return any(tp in p for p in self.pending_txn_offsets.values())

    # ------------------------------------------------------------ state

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    def transition_to(self, state: GroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[state]:
            raise RuntimeError(
                f"group {self.group_id}: illegal transition {self.state.value} -> {state.value}"
            )
        self.state = state
        self.state_timestamp = now_ms

    # ------------------------------------------------------------ members

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def add(self, member: MemberMetadata) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> MemberMetadata | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        iid = member.group_instance_id
        if iid is not None and self.static_members.get(iid) == member_id:
            del self.static_members[iid]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> MemberMetadata:
        """A static member came back with a new member id: it takes the old
        member's place (assignment, leadership); the old id is fenced."""
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        self.static_members[instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        return member

    @property
    def size(self) -> int:
        return len(self.members)

    def all_joined(self) -> bool:
        """Every known member has sent its JoinGroup of this rebalance."""
        return all(m.is_awaiting_join for m in self.members.values()) and not self.pending_members

    def not_yet_joined(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    # ------------------------------------------------------------ protocols

    def candidate_protocols(self) -> set[str]:
        sets = [set(m.protocol_names()) for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def supports(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        """A joining member fits when the group is empty, or it speaks the
        group's protocol type and one protocol every member supports."""
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        names = {name for name, _ in protocols}
        return protocol_type == self.protocol_type and bool(names & self.candidate_protocols())

    def select_protocol(self) -> str:
        """Every member votes for its first preference among the protocols all
        members support; most votes wins (ties go to the first seen)."""
        candidates = self.candidate_protocols()
        votes = Counter(m.vote(candidates) for m in self.members.values())
        return votes.most_common(1)[0][0]

    def subscribed_topics(self) -> set[str] | None:
        """Topics the consumer members subscribe to; None when not knowable."""
        if self.protocol_type != "consumer" or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            try:
                found = subscribed_topics(m.metadata(self.protocol_name))
            except KeyError:
                return None
            if found is None:
                return None
            topics |= found
        return topics

    def __repr__(self) -> str:
        return (
            f"GroupMetadata({self.group_id!r}, {self.state.value}, gen={self.generation_id}, "
            f"members={len(self.members)})"
        )
