"""The KIP-932 share-group records of ``__consumer_offsets``, byte for byte as
Kafka 4.x writes them (its group coordinator's ``ShareGroup*`` record schemas,
version 0; keys plain structs led by the record type, values flexible):

=====  ===========================================  ==================================
type   key (group id, member id)                    value
=====  ===========================================  ==================================
10     ShareGroupMemberMetadataKey                  rack, client id/host, topic names
11     ShareGroupMetadataKey (group)                Epoch, MetadataHash
12     ShareGroupTargetAssignmentMetadataKey        AssignmentEpoch
13     ShareGroupTargetAssignmentMemberKey          TopicPartitions
14     ShareGroupCurrentMemberAssignmentKey         MemberEpoch, PreviousMemberEpoch,
                                                    State, AssignedPartitions
15     ShareGroupStatePartitionMetadataKey (group)  Initializing, Initialized and
                                                    Deleting topics
=====  ===========================================  ==================================

With them a share group outlives its coordinator: the broker that takes the
group's partition loads its members, epochs and assignments, and a member's
next heartbeat goes on at its epoch (as with Kafka; librdkafka's
ShareConsumer takes GROUP_ID_NOT_FOUND there as fatal). Record 15 names the
share partitions whose state was initialized, so a new coordinator does not
initialize them again. pylog writes MetadataHash 0: it compares the
subscribed topics with the metadata after a load instead (a difference bumps
the group epoch), as for consumer groups.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from pylog.coordinator.consumer_group_member import MemberState
from pylog.coordinator.consumer_group_records import (
    _NO_TAGS,
    _VALUE_VERSION,
    Record,
    _carray,
    _cstr,
    _key,
    _read_partitions,
    _read_value,
    _topic_partitions,
)
from pylog.coordinator.records import _Reader
from pylog.coordinator.share_group import ShareAssignment, ShareGroup, ShareGroupMember
from pylog.log.partition_metadata import format_topic_id, parse_topic_id

__all__ = [
    "Record",
    "ShareGroupKey",
    "ShareGroupRecords",
    "current_assignment_record",
    "decode_share_key",
    "group_epoch_record",
    "member_metadata_record",
    "member_tombstones",
    "share_group_tombstones",
    "state_partition_record",
    "target_epoch_record",
    "target_member_record",
]

MEMBER_METADATA = 10
GROUP_METADATA = 11
TARGET_METADATA = 12
TARGET_MEMBER = 13
CURRENT_ASSIGNMENT = 14
STATE_PARTITION_METADATA = 15
_KNOWN = (
    MEMBER_METADATA,
    GROUP_METADATA,
    TARGET_METADATA,
    TARGET_MEMBER,
    CURRENT_ASSIGNMENT,
    STATE_PARTITION_METADATA,
)
_WITH_MEMBER = (MEMBER_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT)

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_T = TypeVar("_T")


# ---------------------------------------------------------------- writing


def group_epoch_record(group_id: str, epoch: int) -> Record:
    value = _VALUE_VERSION + _I32.pack(epoch) + _I64.pack(0) + _NO_TAGS
    return _key(GROUP_METADATA, group_id), value


def target_epoch_record(group_id: str, epoch: int) -> Record:
    return _key(TARGET_METADATA, group_id), _VALUE_VERSION + _I32.pack(epoch) + _NO_TAGS


def member_metadata_record(group_id: str, m: ShareGroupMember) -> Record:
    value = (
        _VALUE_VERSION
        + _cstr(m.rack_id)
        + _cstr(m.client_id)
        + _cstr(m.client_host)
        + _carray([_cstr(n) for n in m.subscribed_topic_names])
        + _NO_TAGS
    )
    return _key(MEMBER_METADATA, group_id, m.member_id), value


def target_member_record(group_id: str, member_id: str, target: ShareAssignment) -> Record:
    value = _VALUE_VERSION + _topic_partitions(target) + _NO_TAGS
    return _key(TARGET_MEMBER, group_id, member_id), value


def current_assignment_record(group_id: str, m: ShareGroupMember) -> Record:
    value = (
        _VALUE_VERSION
        + _I32.pack(m.member_epoch)
        + _I32.pack(m.previous_epoch)
        + bytes([int(MemberState.STABLE)])  # no revocation in a share group
        + _topic_partitions(m.assignment)
        + _NO_TAGS
    )
    return _key(CURRENT_ASSIGNMENT, group_id, m.member_id), value


def state_partition_record(group_id: str, initialized: dict[str, tuple[str, set[int]]]) -> Record:
    """``initialized``: topic id -> (name, partitions) whose share-partition
    state exists; none are left initializing or deleting here (pylog
    initializes as it assigns)."""
    topics = [
        parse_topic_id(tid) + _cstr(name) + _carray([_I32.pack(p) for p in sorted(ps)]) + _NO_TAGS
        for tid, (name, ps) in sorted(initialized.items())
    ]
    value = _VALUE_VERSION + _carray([]) + _carray(topics) + _carray([]) + _NO_TAGS
    return _key(STATE_PARTITION_METADATA, group_id), value


def member_tombstones(group_id: str, member_id: str) -> list[Record]:
    """A member leaves: its current assignment, target and metadata go."""
    return [
        (_key(CURRENT_ASSIGNMENT, group_id, member_id), None),
        (_key(TARGET_MEMBER, group_id, member_id), None),
        (_key(MEMBER_METADATA, group_id, member_id), None),
    ]


def share_group_tombstones(group: ShareGroup) -> list[Record]:
    """Records that delete a share group: its members', then its own."""
    records: list[Record] = []
    for mid in group.share_members:
        records.extend(member_tombstones(group.group_id, mid))
    records += [
        (_key(TARGET_METADATA, group.group_id), None),
        (_key(STATE_PARTITION_METADATA, group.group_id), None),
        (_key(GROUP_METADATA, group.group_id), None),
    ]
    return records


# ---------------------------------------------------------------- reading


@dataclass(frozen=True, slots=True)
class ShareGroupKey:
    kind: int
    group_id: str
    member_id: str | None


def decode_share_key(data: bytes) -> ShareGroupKey | None:
    """The key of a share-group record; None for any other record type."""
    if len(data) < 2:
        return None
    kind = int.from_bytes(data[:2], "big", signed=True)
    if kind not in _KNOWN:
        return None
    r = _Reader(bytes(data))
    r.i16()
    group_id = r.str()
    member_id = r.str() if kind in _WITH_MEMBER else None
    return ShareGroupKey(kind, group_id, member_id)


def _read_topics(r: _Reader, with_partitions: bool) -> dict[str, tuple[str, set[int]]]:
    out: dict[str, tuple[str, set[int]]] = {}
    for _ in range(max(r.array_len(), 0)):
        tid = format_topic_id(r._take(16))
        name = r.str()
        ps = {r.i32() for _ in range(max(r.array_len(), 0))} if with_partitions else set()
        r.skip_tags()
        out[tid] = (name, ps)
    return out


def _keep(
    table: dict[str, _T], member_id: str, value: bytes | None, parse: Callable[[str, bytes], _T]
) -> None:
    """A member's record: its value parsed into ``table``, or (a tombstone) gone."""
    if value is None:
        table.pop(member_id, None)
    else:
        table[member_id] = parse(member_id, value)


def _member(member_id: str, value: bytes) -> ShareGroupMember:
    r = _read_value(value)
    rack, client_id, client_host = r.nstr(), r.str(), r.str()
    names = tuple(r.str() for _ in range(max(r.array_len(), 0)))
    return ShareGroupMember(
        member_id,
        rack_id=rack,
        client_id=client_id,
        client_host=client_host,
        subscribed_topic_names=names,
    )


def _target(member_id: str, value: bytes) -> ShareAssignment:
    return dict(_read_partitions(_read_value(value)))


def _current(member_id: str, value: bytes) -> tuple[int, int, ShareAssignment]:
    r = _read_value(value)
    epoch, previous = r.i32(), r.i32()
    r._take(1)  # State: always stable in a share group
    return epoch, previous, dict(_read_partitions(r))


def _initialized_topics(value: bytes) -> dict[str, tuple[str, set[int]]]:
    r = _read_value(value)
    _read_topics(r, True)  # InitializingTopics
    return _read_topics(r, True)


@dataclass
class _Group:
    epoch: int | None = None
    assignment_epoch: int = 0
    members: dict[str, ShareGroupMember] = field(default_factory=dict)
    current: dict[str, tuple[int, int, ShareAssignment]] = field(default_factory=dict)
    targets: dict[str, ShareAssignment] = field(default_factory=dict)
    initialized: dict[str, tuple[str, set[int]]] = field(default_factory=dict)


class ShareGroupRecords:
    """What a ``__consumer_offsets`` partition's log says of its share
    groups, record by record in log order (the last word wins; a tombstone
    forgets)."""

    def __init__(self) -> None:
        self.groups: dict[str, _Group] = {}

    def apply(self, key: ShareGroupKey, value: bytes | None) -> None:
        g = self.groups.setdefault(key.group_id, _Group())
        mid = key.member_id or ""
        if key.kind == GROUP_METADATA:
            if value is None:
                self.groups.pop(key.group_id, None)
            else:
                g.epoch = _read_value(value).i32()
        elif key.kind == TARGET_METADATA:
            g.assignment_epoch = 0 if value is None else _read_value(value).i32()
        elif key.kind == STATE_PARTITION_METADATA:
            # Partitions still initializing when the coordinator moved are
            # initialized again: harmless, their state is read first.
            g.initialized = {} if value is None else _initialized_topics(value)
        elif key.kind == MEMBER_METADATA:
            _keep(g.members, mid, value, _member)
        elif key.kind == TARGET_MEMBER:
            _keep(g.targets, mid, value, _target)
        elif key.kind == CURRENT_ASSIGNMENT:
            _keep(g.current, mid, value, _current)

    def build(self, now_ms: int) -> list[ShareGroup]:
        """The share groups, each with its members as last written; their
        subscribed topics are compared with the metadata again at the next
        heartbeat."""
        out = []
        for gid, g in self.groups.items():
            if g.epoch is None:
                continue
            group = ShareGroup(gid, now_ms)
            group.group_epoch = g.epoch
            group.assignment_epoch = g.assignment_epoch
            group.targets = {mid: dict(t) for mid, t in g.targets.items()}
            group.initialized = {(tid, p) for tid, (_, ps) in g.initialized.items() for p in ps}
            group.initialized_names = {tid: name for tid, (name, _) in g.initialized.items()}
            for mid, member in g.members.items():
                cur = g.current.get(mid)
                if cur is not None:
                    member.member_epoch, member.previous_epoch, member.assignment = cur
                group.share_members[mid] = member
            group.mirror_state(now_ms)
            out.append(group)
        return out
