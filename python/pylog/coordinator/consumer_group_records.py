"""The KIP-848 consumer-group records of ``__consumer_offsets``, byte for byte
as Kafka 4.x writes them (its group coordinator's ``ConsumerGroup*`` record
schemas): the key's int16 version is the record type, the key a plain
(non-flexible) struct; the value has version 0 and is flexible (compact
strings and arrays, tagged fields, which are skipped when read).

=====  ========================================  ====================================
type   key (group id, member id)                 value
=====  ========================================  ====================================
3      ConsumerGroupMetadataKey (group)          Epoch
5      ConsumerGroupMemberMetadataKey            instance, rack, client id/host,
                                                 topic names, regex, rebalance
                                                 timeout, server assignor
6      ConsumerGroupTargetAssignmentMetadataKey  AssignmentEpoch
7      ConsumerGroupTargetAssignmentMemberKey    TopicPartitions
8      ConsumerGroupCurrentMemberAssignmentKey   MemberEpoch, PreviousMemberEpoch,
                                                 State, AssignedPartitions,
                                                 PartitionsPendingRevocation
=====  ========================================  ====================================

A null value is a tombstone. A member leaves with tombstones of its current
assignment, target and metadata (in that order); a deleted group then with
those of its target metadata and group metadata. Kafka 4.0 also writes
ConsumerGroupPartitionMetadata (type 4, the subscribed topics' metadata);
Kafka 4.1 stopped (a hash in the group record replaced it) and pylog does not
write it: the subscribed topics are read from the metadata again after a
load, and a difference bumps the group epoch. Type 4 and the regex record
(16) are read past. :class:`ConsumerGroupRecords` gathers what a partition's
log holds, for the GroupMetadataManager's load.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from pylog.coordinator.consumer_group import ConsumerGroup
from pylog.coordinator.consumer_group_member import (
    Assignment,
    ClassicMemberMetadata,
    ConsumerGroupMember,
    MemberState,
)
from pylog.coordinator.records import RecordFormatError, _Reader
from pylog.log.partition_metadata import format_topic_id, parse_topic_id

__all__ = [
    "ConsumerGroupKey",
    "ConsumerGroupRecords",
    "consumer_group_tombstones",
    "current_assignment_record",
    "decode_consumer_key",
    "group_epoch_record",
    "group_tombstones",
    "member_metadata_record",
    "member_tombstones",
    "target_epoch_record",
    "target_member_record",
]

GROUP_METADATA = 3
PARTITION_METADATA = 4
MEMBER_METADATA = 5
TARGET_METADATA = 6
TARGET_MEMBER = 7
CURRENT_ASSIGNMENT = 8
REGULAR_EXPRESSION = 16
_OWN = (GROUP_METADATA, MEMBER_METADATA, TARGET_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT)
_KNOWN = (*_OWN, PARTITION_METADATA, REGULAR_EXPRESSION)

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_VALUE_VERSION = _I16.pack(0)

Record = tuple[bytes, bytes | None]


# ---------------------------------------------------------------- writing


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _cstr(s: str | None) -> bytes:
    if s is None:
        return b"\x00"
    b = s.encode()
    return _uvarint(len(b) + 1) + b


def _carray(items: list[bytes]) -> bytes:
    return _uvarint(len(items) + 1) + b"".join(items)


_NO_TAGS = b"\x00"


def _topic_partitions(a: Assignment) -> bytes:
    return _carray(
        [
            parse_topic_id(t) + _carray([_I32.pack(p) for p in sorted(ps)]) + _NO_TAGS
            for t, ps in sorted(a.items())
        ]
    )


def _key(kind: int, group_id: str, member_id: str | None = None) -> bytes:
    out = _I16.pack(kind) + _I16.pack(len(group_id.encode())) + group_id.encode()
    if member_id is not None:
        out += _I16.pack(len(member_id.encode())) + member_id.encode()
    return out


def group_epoch_record(group_id: str, epoch: int) -> Record:
    return _key(GROUP_METADATA, group_id), _VALUE_VERSION + _I32.pack(epoch) + _NO_TAGS


def target_epoch_record(group_id: str, epoch: int) -> Record:
    return _key(TARGET_METADATA, group_id), _VALUE_VERSION + _I32.pack(epoch) + _NO_TAGS


def _classic_member_metadata(c: ClassicMemberMetadata) -> bytes:
    """Tagged field 0 of the member's value: tag, size, then the nullable
    struct's presence byte and the struct (Kafka's generated writer)."""
    struct_bytes = (
        _I32.pack(c.session_timeout_ms)
        + _carray(
            [
                _cstr(name) + _uvarint(len(meta) + 1) + meta + _NO_TAGS
                for name, meta in c.supported_protocols
            ]
        )
        + _NO_TAGS
    )
    body = b"\x01" + struct_bytes
    return b"\x01" + _uvarint(0) + _uvarint(len(body)) + body


def member_metadata_record(group_id: str, m: ConsumerGroupMember) -> Record:
    tags = _NO_TAGS if m.classic is None else _classic_member_metadata(m.classic)
    value = (
        _VALUE_VERSION
        + _cstr(m.instance_id)
        + _cstr(m.rack_id)
        + _cstr(m.client_id)
        + _cstr(m.client_host)
        + _carray([_cstr(n) for n in m.subscribed_topic_names])
        + _cstr(m.subscribed_topic_regex)
        + _I32.pack(m.rebalance_timeout_ms)
        + _cstr(m.server_assignor)
        + tags
    )
    return _key(MEMBER_METADATA, group_id, m.member_id), value


def target_member_record(group_id: str, member_id: str, target: Assignment) -> Record:
    value = _VALUE_VERSION + _topic_partitions(target) + _NO_TAGS
    return _key(TARGET_MEMBER, group_id, member_id), value


def current_assignment_record(group_id: str, m: ConsumerGroupMember) -> Record:
    value = (
        _VALUE_VERSION
        + _I32.pack(m.member_epoch)
        + _I32.pack(m.previous_member_epoch)
        + bytes([int(m.state) & 0xFF])
        + _topic_partitions(m.assigned)
        + _topic_partitions(m.pending_revocation)
        + _NO_TAGS
    )
    return _key(CURRENT_ASSIGNMENT, group_id, m.member_id), value


def member_tombstones(group_id: str, member_id: str) -> list[Record]:
    """A member leaves: its current assignment, target and metadata go."""
    return [
        (_key(CURRENT_ASSIGNMENT, group_id, member_id), None),
        (_key(TARGET_MEMBER, group_id, member_id), None),
        (_key(MEMBER_METADATA, group_id, member_id), None),
    ]


def group_tombstones(group_id: str) -> list[Record]:
    """The group itself goes (after its members' tombstones)."""
    return [
        (_key(TARGET_METADATA, group_id), None),
        (_key(PARTITION_METADATA, group_id), None),
        (_key(GROUP_METADATA, group_id), None),
    ]


def consumer_group_tombstones(group: ConsumerGroup) -> list[Record]:
    """Records that delete a consumer group: its members', then its own."""
    records: list[Record] = []
    for mid in group.consumer_members:
        records.extend(member_tombstones(group.group_id, mid))
    records.extend(group_tombstones(group.group_id))
    return records


# ---------------------------------------------------------------- reading


@dataclass(frozen=True, slots=True)
class ConsumerGroupKey:
    kind: int
    group_id: str
    member_id: str | None


def decode_consumer_key(data: bytes) -> ConsumerGroupKey | None:
    """The key of a consumer-group record; None for any other record type."""
    if len(data) < 2:
        return None
    (kind,) = _I16.unpack_from(data, 0)
    if kind not in _KNOWN:
        return None
    r = _Reader(bytes(data))
    r.i16()
    group_id = r.str()
    member_id = r.str() if kind in (MEMBER_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT) else None
    return ConsumerGroupKey(kind, group_id, member_id)


def _read_value(data: bytes) -> _Reader:
    r = _Reader(bytes(data), flexible=True)
    if r.i16() != 0:
        raise RecordFormatError("unknown consumer-group record value version")
    return r


def _read_partitions(r: _Reader) -> dict[str, frozenset[int]]:
    out: dict[str, frozenset[int]] = {}
    for _ in range(max(r.array_len(), 0)):
        tid = format_topic_id(r._take(16))
        ps = frozenset(r.i32() for _ in range(max(r.array_len(), 0)))
        r.skip_tags()  # AssignmentEpochs (KIP-1251) and later additions
        if ps:
            out[tid] = ps
    return out


def _read_member_tags(r: _Reader) -> ClassicMemberMetadata | None:
    """The member value's tagged fields: 0 is ClassicMemberMetadata (a
    member on the classic protocol); others are skipped."""
    classic = None
    for _ in range(r.uvarint()):
        tag, size = r.uvarint(), r.uvarint()
        if tag != 0:
            r._take(size)
            continue
        sub = _Reader(r._take(size), flexible=True)
        if sub.uvarint() == 0:  # the nullable struct's presence: null
            continue
        session = sub.i32()
        protocols = []
        for _ in range(max(sub.array_len(), 0)):
            name = sub.str()
            meta = sub.bytes()
            sub.skip_tags()
            protocols.append((name, meta))
        classic = ClassicMemberMetadata(session, tuple(protocols))
    return classic


@dataclass
class _Group:
    epoch: int | None = None
    assignment_epoch: int = 0
    members: dict[str, ConsumerGroupMember] = field(default_factory=dict)
    current: dict[str, ConsumerGroupMember] = field(default_factory=dict)
    targets: dict[str, dict[str, frozenset[int]]] = field(default_factory=dict)


class ConsumerGroupRecords:
    """What a ``__consumer_offsets`` partition's log says of its consumer
    groups, record by record in log order (the last word wins; a tombstone
    forgets)."""

    def __init__(self) -> None:
        self.groups: dict[str, _Group] = {}

    def apply(self, key: ConsumerGroupKey, value: bytes | None) -> None:
        g = self.groups.setdefault(key.group_id, _Group())
        mid = key.member_id or ""
        if key.kind == GROUP_METADATA:
            if value is None:
                self.groups.pop(key.group_id, None)
            else:
                r = _read_value(value)
                g.epoch = r.i32()
        elif key.kind == TARGET_METADATA:
            g.assignment_epoch = 0 if value is None else _read_value(value).i32()
        elif key.kind == MEMBER_METADATA:
            if value is None:
                g.members.pop(mid, None)
            else:
                r = _read_value(value)
                instance, rack = r.nstr(), r.nstr()
                client_id, client_host = r.str(), r.str()
                names = tuple(r.str() for _ in range(max(r.array_len(), 0)))
                regex = r.nstr()
                rebalance = r.i32()
                assignor = r.nstr()
                classic = _read_member_tags(r)
                g.members[mid] = ConsumerGroupMember(
                    mid,
                    instance_id=instance,
                    rack_id=rack,
                    client_id=client_id,
                    client_host=client_host,
                    subscribed_topic_names=names,
                    subscribed_topic_regex=regex,
                    rebalance_timeout_ms=rebalance,
                    server_assignor=assignor,
                    classic=classic,
                )
        elif key.kind == TARGET_MEMBER:
            if value is None:
                g.targets.pop(mid, None)
            else:
                g.targets[mid] = _read_partitions(_read_value(value))
        elif key.kind == CURRENT_ASSIGNMENT:
            if value is None:
                g.current.pop(mid, None)
            else:
                r = _read_value(value)
                epoch, previous = r.i32(), r.i32()
                raw = r._take(1)[0]
                try:
                    state = MemberState(raw)
                except ValueError:
                    state = MemberState.UNKNOWN
                assigned = _read_partitions(r)
                pending = _read_partitions(r)
                g.current[mid] = ConsumerGroupMember(
                    mid,
                    member_epoch=epoch,
                    previous_member_epoch=previous,
                    state=state,
                    assigned=assigned,
                    pending_revocation=pending,
                )

    def build(self, now_ms: int) -> list[ConsumerGroup]:
        """The consumer groups, each with its members as last written (the
        caller gives each its committed offsets)."""
        out = []
        for gid, g in self.groups.items():
            if g.epoch is None:
                continue
            group = ConsumerGroup(gid, now_ms)
            group.group_epoch = g.epoch
            group.snapshot_unknown = True
            group.assignment_epoch = g.assignment_epoch
            for mid, meta in g.members.items():
                cur = g.current.get(mid)
                member = meta
                if cur is not None:
                    member = meta.replace(
                        member_epoch=cur.member_epoch,
                        previous_member_epoch=cur.previous_member_epoch,
                        state=cur.state,
                        assigned=cur.assigned,
                        pending_revocation=cur.pending_revocation,
                    )
                group.put_member(member, now_ms)
                group.targets[mid] = dict(g.targets.get(mid, {}))
            out.append(group)
        return out
