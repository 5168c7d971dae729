"""EndTransactionMarker: the one record of a COMMIT or ABORT control batch.

Kafka's ``EndTransactionMarker`` and ``ControlRecordType``. The batch has
the control and transactional attribute bits set, the producer's id and
epoch, base sequence -1, and one record::

    key:   version i16 = 0, type i16 (0 ABORT, 1 COMMIT)
    value: version i16 = 0, coordinator_epoch i32

The transaction coordinator asks each partition leader to write one
(WriteTxnMarkers, Kafka's ``MemoryRecords.withEndTransactionMarker``); the
batch itself is built by the native builder, once per marker.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from pylog import _native
from pylog.errors import CorruptRecordError, KafkaError

__all__ = [
    "ABORT",
    "COMMIT",
    "DELETE_HORIZON_FLAG",
    "EndTransactionMarker",
    "build_marker_batch",
    "with_delete_horizon",
]

#: Batch attribute bit 6 (KIP-534): the base timestamp is the batch's delete
#: horizon, and its records' timestamps are deltas from it.
DELETE_HORIZON_FLAG = 0x40
_HEADER = struct.Struct(">qiibIhiqqqhii")  # a v2 batch header, 61 bytes
_CRC_FROM = 21  # CRC32C covers the attributes to the end

ABORT = 0
COMMIT = 1
_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")
_CURRENT_VERSION = 0


@dataclass(frozen=True, slots=True)
class EndTransactionMarker:
    """A COMMIT or ABORT and the coordinator epoch that wrote it."""

    control_type: int  # ABORT or COMMIT
    coordinator_epoch: int

    @property
    def is_commit(self) -> bool:
        return self.control_type == COMMIT

    @property
    def type_name(self) -> str:
        return "COMMIT" if self.control_type == COMMIT else "ABORT"

    def key(self) -> bytes:
        return _KEY.pack(_CURRENT_VERSION, self.control_type)

    def value(self) -> bytes:
        return _VALUE.pack(_CURRENT_VERSION, self.coordinator_epoch)

    @classmethod
    def from_record(cls, key: bytes | None, value: bytes | None) -> EndTransactionMarker:
        """The marker a control record holds; CorruptRecordError when it holds
        none (Kafka reads key version 0 and a value of at least 6 bytes; a
        newer version may add fields after these)."""
        if key is None or len(key) < _KEY.size:
            raise CorruptRecordError("control record without a valid key")
        _, control_type = _KEY.unpack_from(key, 0)
        if control_type not in (ABORT, COMMIT):
            raise CorruptRecordError(f"control record of type {control_type} is no end marker")
        if value is None or len(value) < _VALUE.size:
            raise CorruptRecordError("end transaction marker without a valid value")
        _, epoch = _VALUE.unpack_from(value, 0)
        return cls(int(control_type), int(epoch))

    @classmethod
    def from_batch(cls, batch: bytes | bytearray | memoryview) -> EndTransactionMarker | None:
        """The marker of the control batch at the start of ``batch``; None for
        a control batch whose record compaction removed (or one that does not
        decode: replication and recovery take what the leader wrote)."""
        try:
            records = _native.decode_records(batch)
        except KafkaError:
            return None
        if not records:
            return None
        try:
            return cls.from_record(records[0].key, records[0].value)
        except CorruptRecordError:
            return None


def build_marker_batch(
    producer_id: int,
    producer_epoch: int,
    marker: EndTransactionMarker,
    *,
    timestamp_ms: int,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
) -> bytes:
    """One control batch holding ``marker`` (native builder: CRC and framing)."""
    return _native.build_batch(
        [(marker.key(), marker.value(), [], timestamp_ms)],
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=-1,
        is_transactional=True,
        is_control=True,
    )


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _varlong(n: int) -> bytes:
    return _uvarint(((n << 1) ^ (n >> 63)) & 0xFFFFFFFFFFFFFFFF)


def with_delete_horizon(batch: bytes | bytearray | memoryview, horizon_ms: int) -> bytes:
    """The marker control batch ``batch`` with KIP-534's delete horizon set
    (as Kafka's cleaner writes it when it first finds a marker whose
    transaction has no data left): attribute bit 6, the horizon as base
    timestamp, the record's timestamp kept as a delta from it; offsets,
    epochs and the producer as they were. CorruptRecordError for a batch
    that is not one uncompressed control record."""
    infos, covered = _native.batch_infos(batch, 1)
    if not infos or covered != len(batch) or not infos[0].is_control:
        raise CorruptRecordError("a delete horizon is set on one control batch")
    b = infos[0]
    try:
        (record,) = _native.decode_records(batch)
    except (ValueError, KafkaError) as e:
        raise CorruptRecordError(f"marker batch does not decode: {e}") from e
    key, value = record.key or b"", record.value or b""
    body = (
        b"\x00"  # record attributes
        + _varlong(record.timestamp - horizon_ms)
        + _uvarint(0)  # offset delta
        + _varlong(len(key))
        + key
        + _varlong(len(value))
        + value
        + _uvarint(0)  # headers
    )
    records = _varlong(len(body)) + body
    attributes = 0x10 | 0x20 | DELETE_HORIZON_FLAG | (b.timestamp_type << 3)
    header = bytearray(
        _HEADER.pack(
            b.base_offset,
            _HEADER.size - 12 + len(records),
            b.partition_leader_epoch,
            2,
            0,
            attributes,
            0,  # last offset delta
            horizon_ms,
            b.max_timestamp,
            b.producer_id,
            b.producer_epoch,
            b.base_sequence,
            1,
        )
    )
    out = header + records
    struct.pack_into(">I", out, 17, _native.crc32c(bytes(out[_CRC_FROM:])))
    return bytes(out)
