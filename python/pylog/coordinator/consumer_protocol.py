"""ConsumerProtocol: the ``consumer`` embedded protocol of classic groups, the
bytes a JoinGroup's protocol metadata and a SyncGroup's assignment carry
(Kafka's ``ConsumerProtocol`` with its ConsumerProtocolSubscription and
ConsumerProtocolAssignment schemas, versions 0-3, not flexible).

The coordinator reads them only when a group changes protocol (KIP-848's
online upgrade and downgrade, and classic members of a consumer group): the
subscription gives a classic member's topics, owned partitions and rack; the
assignment, what it was handed. Kafka reads a version newer than it knows as
its newest; so does this.

Subscription::

    int16 version, [string] topics, nullable bytes user_data,
    v1+: [(string topic, [int32])] owned_partitions, v2+: int32 generation_id,
    v3+: nullable string rack_id

Assignment::

    int16 version, [(string topic, [int32])] assigned_partitions,
    nullable bytes user_data
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from pylog.coordinator.records import RecordFormatError, _Reader

__all__ = [
    "ConsumerProtocolAssignment",
    "ConsumerProtocolSubscription",
    "deserialize_assignment",
    "deserialize_subscription",
    "deserialize_version",
    "serialize_assignment",
]

PROTOCOL_TYPE = "consumer"
_HIGHEST = 3
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")

TopicPartitions = dict[str, list[int]]


@dataclass(frozen=True)
class ConsumerProtocolSubscription:
    version: int
    topics: tuple[str, ...]
    owned_partitions: TopicPartitions = field(default_factory=dict)
    generation_id: int = -1
    rack_id: str | None = None


@dataclass(frozen=True)
class ConsumerProtocolAssignment:
    version: int
    partitions: TopicPartitions = field(default_factory=dict)


_ERRORS = (RecordFormatError, UnicodeDecodeError, struct.error, IndexError)


def deserialize_version(data: bytes) -> int:
    """The version the member speaks (Kafka's deserializeVersion), capped
    at the newest known; 0 for bytes too short to hold one."""
    if len(data) < 2:
        return 0
    version = int(_I16.unpack_from(data)[0])
    return max(0, min(version, _HIGHEST))


def _nbytes(r: _Reader) -> None:
    n = r.i32()
    if n > 0:
        r._take(n)


def _topic_partitions(r: _Reader) -> TopicPartitions:
    out: TopicPartitions = {}
    for _ in range(max(r.i32(), 0)):
        topic = r.str()
        out.setdefault(topic, []).extend(r.i32() for _ in range(max(r.i32(), 0)))
    return out


def deserialize_subscription(data: bytes) -> ConsumerProtocolSubscription:
    """Raises RecordFormatError when the bytes are not a subscription."""
    try:
        r = _Reader(bytes(data))
        version = min(r.i16(), _HIGHEST)
        if version < 0:
            raise RecordFormatError(f"subscription version {version}")
        topics = tuple(r.str() for _ in range(max(r.i32(), 0)))
        _nbytes(r)
        owned: TopicPartitions = {}
        generation, rack = -1, None
        if version >= 1:
            owned = _topic_partitions(r)
        if version >= 2:
            generation = r.i32()
        if version >= 3:
            rack = r.nstr()
        return ConsumerProtocolSubscription(version, topics, owned, generation, rack)
    except _ERRORS as e:
        raise RecordFormatError(f"not a consumer protocol subscription: {e}") from None


def deserialize_assignment(data: bytes) -> ConsumerProtocolAssignment:
    """An empty assignment for no bytes (a member never synced); raises
    RecordFormatError when the bytes are not an assignment."""
    if not data:
        return ConsumerProtocolAssignment(0)
    try:
        r = _Reader(bytes(data))
        version = r.i16()
        if version < 0:
            raise RecordFormatError(f"assignment version {version}")
        return ConsumerProtocolAssignment(min(version, _HIGHEST), _topic_partitions(r))
    except _ERRORS as e:
        raise RecordFormatError(f"not a consumer protocol assignment: {e}") from None


def serialize_assignment(partitions: TopicPartitions, version: int) -> bytes:
    """A ConsumerProtocolAssignment (no user data) in ``version``: topics
    and partitions sorted, as a reader expects nothing of their order."""
    out = bytearray(_I16.pack(max(0, min(version, _HIGHEST))))
    topics = sorted((t, ps) for t, ps in partitions.items() if ps)
    out += _I32.pack(len(topics))
    for topic, ps in topics:
        name = topic.encode()
        out += _I16.pack(len(name)) + name + _I32.pack(len(ps))
        for p in sorted(ps):
            out += _I32.pack(p)
    out += _I32.pack(-1)  # user data: null
    return bytes(out)
