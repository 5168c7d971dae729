"""ConsumerGroupMember: one member of a KIP-848 consumer group (Kafka's
``ConsumerGroupMember``), and the assignment type both builders pass around.

A member is immutable here: the heartbeat builds the member it would become,
writes the records that say so, and installs it only once they are appended
(so the cache never holds what a restart would not find). The epochs:

* ``member_epoch`` — the epoch of the assignment the member holds; it catches
  up with the group's assignment epoch as it reconciles;
* ``previous_member_epoch`` — the one before, accepted once more from a member
  whose answer with the new epoch was lost (Kafka does the same).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = [
    "CLASSIC_MEMBER",
    "CONSUMER_MEMBER",
    "LEAVE_GROUP_MEMBER_EPOCH",
    "LEAVE_GROUP_STATIC_MEMBER_EPOCH",
    "Assignment",
    "ClassicMemberMetadata",
    "ConsumerGroupMember",
    "MemberState",
    "assignment_of",
    "partitions_count",
]

#: The member epochs a ConsumerGroupHeartbeat uses to leave (KIP-848).
LEAVE_GROUP_MEMBER_EPOCH = -1
#: A static member's temporary leave: it keeps its place and assignment.
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2

#: ConsumerGroupDescribe v1's MemberType (KIP-1099).
CLASSIC_MEMBER = 0
CONSUMER_MEMBER = 1

#: Partitions by topic id (Kafka's base64url text): ``{topic_id: {0, 1}}``.
Assignment = Mapping[str, frozenset[int]]


def assignment_of(pairs: Mapping[str, object]) -> dict[str, frozenset[int]]:
    """A normalised assignment: frozensets, no topic without partitions."""
    out: dict[str, frozenset[int]] = {}
    for topic, parts in pairs.items():
        fs = frozenset(int(p) for p in parts)  # type: ignore[attr-defined]
        if fs:
            out[topic] = fs
    return out


def partitions_count(a: Assignment) -> int:
    return sum(len(p) for p in a.values())


class MemberState(enum.IntEnum):
    """Where a member is in its reconciliation (the int8 of Kafka's
    ConsumerGroupCurrentMemberAssignmentValue)."""

    #: Holds its target assignment at the group's assignment epoch.
    STABLE = 0
    #: Must revoke partitions first; its epoch waits until it has.
    UNREVOKED_PARTITIONS = 1
    #: Waits for partitions another member still has to give up.
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127

    @property
    def label(self) -> str:
        return self.name


@dataclass(frozen=True)
class ClassicMemberMetadata:
    """What a member that still speaks the classic protocol (JoinGroup,
    SyncGroup, Heartbeat) keeps in a consumer group (the ClassicMemberMetadata
    of Kafka's ConsumerGroupMemberMetadataValue, tagged field 0): its session
    timeout and the protocols of its last JoinGroup, first preferred."""

    session_timeout_ms: int
    supported_protocols: tuple[tuple[str, bytes], ...]

    @property
    def protocol_name(self) -> str:
        """The protocol the member is told it uses (its first)."""
        return self.supported_protocols[0][0] if self.supported_protocols else ""


@dataclass(frozen=True)
class ConsumerGroupMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    #: Set while the member speaks the classic protocol (KIP-848's online
    #: upgrade keeps classic members in a consumer group).
    classic: ClassicMemberMetadata | None = None

    @property
    def use_classic_protocol(self) -> bool:
        return self.classic is not None

    def replace(self, **changes: object) -> ConsumerGroupMember:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    def metadata_key(self) -> tuple[object, ...]:
        """What ConsumerGroupMemberMetadataValue carries: a change is written."""
        return (
            self.instance_id,
            self.rack_id,
            self.client_id,
            self.client_host,
            self.rebalance_timeout_ms,
            self.subscribed_topic_names,
            self.subscribed_topic_regex,
            self.server_assignor,
            self.classic,
        )

    def assignment_key(self) -> tuple[object, ...]:
        """What ConsumerGroupCurrentMemberAssignmentValue carries."""
        return (
            self.member_epoch,
            self.previous_member_epoch,
            self.state,
            dict(self.assigned),
            dict(self.pending_revocation),
        )

    def subscription_key(self) -> tuple[object, ...]:
        """What the target assignment depends on: a change bumps the group epoch."""
        return (
            tuple(sorted(self.subscribed_topic_names)),
            self.subscribed_topic_regex,
            self.server_assignor,
            self.rack_id,
        )

    @property
    def is_static(self) -> bool:
        return self.instance_id is not None

    @property
    def has_left_temporarily(self) -> bool:
        return self.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH

    def owned(self) -> set[tuple[str, int]]:
        """Partitions the member holds: assigned and still to revoke."""
        out = {(t, p) for t, ps in self.assigned.items() for p in ps}
        out.update((t, p) for t, ps in self.pending_revocation.items() for p in ps)
        return out
