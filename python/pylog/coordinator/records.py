"""The record schemas of ``__consumer_offsets``, byte for byte as Kafka writes them.

Every key and value starts with an int16 schema version, then the struct:

* OffsetCommitKey v1 (v0 the same): group, topic, partition
* OffsetCommitValue v3: offset, leader epoch, metadata, commit timestamp
  (read also v0-v2 and the flexible v4)
* GroupMetadataKey v2: group
* GroupMetadataValue v3: protocol type, generation, protocol, leader, state
  timestamp, members (read also v0-v2 and the flexible v4)

A null value is a tombstone: the offset or group was deleted.

Kafka's own tools (kafka-dump-log --offsets-decoder, the console consumer's
formatters) read what this module writes, which is why the versions written
are ones every Kafka since 2.3 understands.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

__all__ = [
    "GroupMetadataKey",
    "GroupMetadataValue",
    "MemberRecord",
    "OffsetCommitKey",
    "OffsetCommitValue",
    "RecordFormatError",
    "decode_group_value",
    "decode_key",
    "decode_offset_value",
    "java_string_hash",
    "partition_for",
]

OFFSET_COMMIT_KEY_VERSION = 1
OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_KEY_VERSION = 2
GROUP_METADATA_VALUE_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class RecordFormatError(ValueError):
    """Bytes that are not a __consumer_offsets key or value this module knows."""


def java_string_hash(s: str) -> int:
    """Java's String.hashCode: over UTF-16 code units, as a signed int32."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group_id: str, partitions: int) -> int:
    """The ``__consumer_offsets`` partition of a group, as Kafka computes it
    (``Utils.abs(groupId.hashCode()) % partitions``, where abs(MIN_VALUE) is 0)."""
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


# ---------------------------------------------------------------- writing


def _str(s: str) -> bytes:
    b = s.encode()
    return _I16.pack(len(b)) + b


def _nstr(s: str | None) -> bytes:
    return _I16.pack(-1) if s is None else _str(s)


def _bytes(b: bytes) -> bytes:
    return _I32.pack(len(b)) + b


# ---------------------------------------------------------------- reading


class _Reader:
    def __init__(self, data: bytes, flexible: bool = False) -> None:
        self.data = data
        self.pos = 0
        self.flexible = flexible

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise RecordFormatError("record ends inside a field")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def i16(self) -> int:
        return int(_I16.unpack(self._take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self._take(4))[0])

    def i64(self) -> int:
        return int(_I64.unpack(self._take(8))[0])

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            b = self._take(1)[0]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 35:
                raise RecordFormatError("varint too long")

    def nstr(self) -> str | None:
        n = self.uvarint() - 1 if self.flexible else self.i16()
        return None if n < 0 else self._take(n).decode()

    def str(self) -> str:
        s = self.nstr()
        if s is None:
            raise RecordFormatError("null where a string is required")
        return s

    def bytes(self) -> bytes:
        n = self.uvarint() - 1 if self.flexible else self.i32()
        return b"" if n < 0 else self._take(n)

    def array_len(self) -> int:
        return self.uvarint() - 1 if self.flexible else self.i32()

    def skip_tags(self) -> None:
        if self.flexible:
            for _ in range(self.uvarint()):
                self.uvarint()
                self._take(self.uvarint())


# ---------------------------------------------------------------- keys


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int

    def encode(self) -> bytes:
        return (
            _I16.pack(OFFSET_COMMIT_KEY_VERSION)
            + _str(self.group)
            + _str(self.topic)
            + _I32.pack(self.partition)
        )


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str

    def encode(self) -> bytes:
        return _I16.pack(GROUP_METADATA_KEY_VERSION) + _str(self.group)


def decode_key(data: bytes) -> OffsetCommitKey | GroupMetadataKey | None:
    """The key's struct; None for record types this coordinator does not own
    (Kafka's new consumer-group records, versions 3 and up)."""
    r = _Reader(bytes(data))
    version = r.i16()
    if version in (0, 1):
        return OffsetCommitKey(r.str(), r.str(), r.i32())
    if version == 2:
        return GroupMetadataKey(r.str())
    return None


# ---------------------------------------------------------------- values


@dataclass(slots=True)
class OffsetCommitValue:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1

    def encode(self) -> bytes:
        if self.expire_timestamp >= 0:
            # An explicit retention (OffsetCommit v2-v4) needs v1, the one
            # version with an expire timestamp (as Kafka writes it).
            return (
                _I16.pack(1)
                + _I64.pack(self.offset)
                + _str(self.metadata)
                + _I64.pack(self.commit_timestamp)
                + _I64.pack(self.expire_timestamp)
            )
        return (
            _I16.pack(OFFSET_COMMIT_VALUE_VERSION)
            + _I64.pack(self.offset)
            + _I32.pack(self.leader_epoch)
            + _str(self.metadata)
            + _I64.pack(self.commit_timestamp)
        )


def decode_offset_value(data: bytes) -> OffsetCommitValue:
    r = _Reader(bytes(data))
    version = r.i16()
    if not 0 <= version <= 4:
        raise RecordFormatError(f"unknown OffsetCommitValue version {version}")
    r.flexible = version >= 4
    offset = r.i64()
    epoch = r.i32() if version >= 3 else -1
    metadata = r.str()
    ts = r.i64()
    expire = r.i64() if version == 1 else -1
    r.skip_tags()
    return OffsetCommitValue(offset, epoch, metadata, ts, expire)


@dataclass(slots=True)
class MemberRecord:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: list[MemberRecord] = field(default_factory=list)

    def encode(self) -> bytes:
        out = [
            _I16.pack(GROUP_METADATA_VALUE_VERSION),
            _str(self.protocol_type),
            _I32.pack(self.generation),
            _nstr(self.protocol),
            _nstr(self.leader),
            _I64.pack(self.current_state_timestamp),
            _I32.pack(len(self.members)),
        ]
        for m in self.members:
            out += [
                _str(m.member_id),
                _nstr(m.group_instance_id),
                _str(m.client_id),
                _str(m.client_host),
                _I32.pack(m.rebalance_timeout),
                _I32.pack(m.session_timeout),
                _bytes(m.subscription),
                _bytes(m.assignment),
            ]
        return b"".join(out)


def decode_group_value(data: bytes) -> GroupMetadataValue:
    r = _Reader(bytes(data))
    version = r.i16()
    if not 0 <= version <= 4:
        raise RecordFormatError(f"unknown GroupMetadataValue version {version}")
    r.flexible = version >= 4
    protocol_type = r.str()
    generation = r.i32()
    protocol = r.nstr()
    leader = r.nstr()
    ts = r.i64() if version >= 2 else -1
    members = []
    for _ in range(r.array_len()):
        member_id = r.str()
        instance = r.nstr() if version >= 3 else None
        client_id = r.str()
        host = r.str()
        rebalance = r.i32() if version >= 1 else -1
        session = r.i32()
        sub = r.bytes()
        assignment = r.bytes()
        r.skip_tags()
        members.append(
            MemberRecord(member_id, instance, client_id, host, rebalance, session, sub, assignment)
        )
    r.skip_tags()
    return GroupMetadataValue(protocol_type, generation, protocol, leader, ts, members)


# ---------------------------------------------------------------- consumer protocol


def subscribed_topics(subscription: bytes) -> set[str] | None:
    """Topics of a ConsumerProtocolSubscription (any version: the topics come
    first); None when the bytes are not one."""
    try:
        r = _Reader(bytes(subscription))
        r.i16()
        return {r.str() for _ in range(r.i32())}
    except (RecordFormatError, UnicodeDecodeError, struct.error):
        return None


def assigned_partitions(assignment: bytes) -> list[tuple[str, list[int]]] | None:
    """(topic, partitions) of a ConsumerProtocolAssignment; None when not one."""
    if not assignment:
        return []
    try:
        r = _Reader(bytes(assignment))
        r.i16()
        out = []
        for _ in range(r.i32()):
            topic = r.str()
            out.append((topic, [r.i32() for _ in range(r.i32())]))
        return out
    except (RecordFormatError, UnicodeDecodeError, struct.error):
        return None
