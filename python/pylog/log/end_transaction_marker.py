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

__all__ = ["ABORT", "COMMIT", "EndTransactionMarker", "build_marker_batch"]

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
