"""The records of ``__share_group_state`` (Kafka's share coordinator,
KIP-932): ShareSnapshot (record type 0) and ShareUpdate (type 1), keyed by
(group id, topic id, partition).

Key: int16 record type, then GroupId (int16-length string), TopicId (16-byte
uuid), Partition (int32) — not flexible. ShareSnapshotValue: int16 version 0,
then SnapshotEpoch, StateEpoch, LeaderEpoch (int32), StartOffset,
CreateTimestamp, WriteTimestamp (int64), StateBatches (a compact array of
FirstOffset, LastOffset int64, DeliveryState int8, DeliveryCount int16, each
with empty tagged fields) and the value's tagged fields (DeliveryCompleteCount,
tag 0, left out: its default -1 says unknown). ShareUpdateValue is the same
without StateEpoch and the timestamps; its batches are merged over the last
snapshot. A null value deletes the key's state.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from pylog.protocol._runtime import uuid_raw, uuid_text
from pylog.server.share.persister import PersistedState, StateBatch

__all__ = [
    "SHARE_SNAPSHOT",
    "SHARE_UPDATE",
    "ShareKey",
    "decode_key",
    "decode_value",
    "snapshot_key",
    "snapshot_value",
]

SHARE_SNAPSHOT = 0
SHARE_UPDATE = 1

_BATCH = struct.Struct(">qqbh")


@dataclass(frozen=True, slots=True)
class ShareKey:
    record_type: int
    group_id: str
    topic_id: str
    partition: int


def snapshot_key(group_id: str, topic_id: str, partition: int) -> bytes:
    g = group_id.encode()
    return (
        struct.pack(">hh", SHARE_SNAPSHOT, len(g))
        + g
        + uuid_raw(topic_id)
        + struct.pack(">i", partition)
    )


def decode_key(data: bytes) -> ShareKey | None:
    """The key, or None when it is no share-state record."""
    if len(data) < 4:
        return None
    rtype, n = struct.unpack_from(">hh", data, 0)
    if rtype not in (SHARE_SNAPSHOT, SHARE_UPDATE) or n < 0 or len(data) != 4 + n + 16 + 4:
        return None
    group_id = data[4 : 4 + n].decode()
    topic_id = uuid_text(data[4 + n : 20 + n])
    (partition,) = struct.unpack_from(">i", data, 20 + n)
    return ShareKey(rtype, group_id, topic_id, partition)


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _read_uvarint(data: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 28:
            raise ValueError("varint too long")


def _skip_tags(data: bytes, pos: int) -> int:
    count, pos = _read_uvarint(data, pos)
    for _ in range(count):
        _, pos = _read_uvarint(data, pos)
        size, pos = _read_uvarint(data, pos)
        pos += size
    return pos


def snapshot_value(state: PersistedState, snapshot_epoch: int, now_ms: int) -> bytes:
    out = bytearray(
        struct.pack(
            ">hiiiqqq",
            0,
            snapshot_epoch,
            state.state_epoch,
            state.leader_epoch,
            state.start_offset,
            now_ms,
            now_ms,
        )
    )
    out += _uvarint(len(state.batches) + 1)
    for b in state.batches:
        out += _BATCH.pack(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
        out += b"\x00"
    out += b"\x00"
    return bytes(out)


def decode_value(record_type: int, data: bytes) -> PersistedState:
    """A ShareSnapshotValue or ShareUpdateValue (version 0)."""
    (version,) = struct.unpack_from(">h", data, 0)
    if version != 0:
        raise ValueError(f"unknown value version {version}")
    if record_type == SHARE_SNAPSHOT:
        _, state_epoch, leader_epoch, start, _, _ = struct.unpack_from(">iiiqqq", data, 2)
        pos = 2 + 36
    else:
        _, leader_epoch, start = struct.unpack_from(">iiq", data, 2)
        state_epoch = -1
        pos = 2 + 16
    n, pos = _read_uvarint(data, pos)
    batches = []
    for _ in range(max(0, n - 1)):
        first, last, st, count = _BATCH.unpack_from(data, pos)
        pos = _skip_tags(data, pos + _BATCH.size)
        batches.append(StateBatch(first, last, st, count))
    _skip_tags(data, pos)
    return PersistedState(start, state_epoch, leader_epoch, batches)
