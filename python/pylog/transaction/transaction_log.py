"""TransactionLog: the records of ``__transaction_state``, byte for byte as
Kafka writes them (its TransactionLogKey / TransactionLogValue schemas), so
``kafka-dump-log --transaction-log-decoder`` reads pylog's segments.

Every key and value starts with an int16 schema version:

* key v0: the transactional id (int16-length string);
* value v0 (written while ``transaction.version`` is 0, as Kafka does):
  producer id int64, producer epoch int16, transaction timeout int32, state
  int8 (:class:`TransactionState`'s ids), the partitions as a nullable array
  of (topic, [partition int32]) — null when Empty — then the last-update and
  start timestamps, int64 each;
* value v1 (written once ``transaction.version`` >= 1): the same fields in
  the flexible encoding (compact strings and arrays, a tagged-field section
  after each struct), with the tagged fields previous producer id (0), next
  producer id (1) and the client's transaction version (2), each written only
  when it is not its default (-1, -1, 0), as Kafka's generated code does.

A null value is a tombstone: the transactional id expired (Dead).
Kafka writes these records uncompressed with acks=-1 (TransactionLog's
enforced compression and required acks); so does the state manager.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from pylog.common.topic_partition import TopicPartition
from pylog.common.transaction_version import TransactionVersion
from pylog.transaction.transaction_metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
)

__all__ = [
    "TXN_KEY_VERSION",
    "TXN_VALUE_VERSION",
    "TransactionLogFormatError",
    "TxnLogValue",
    "format_record",
    "key_to_bytes",
    "read_key",
    "read_value",
    "value_to_bytes",
]

TXN_KEY_VERSION = 0
TXN_VALUE_VERSION = 0

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_VALUE_HEAD = struct.Struct(">qhib")  # producer id, epoch, timeout, state
_TIMES = struct.Struct(">qq")


class TransactionLogFormatError(ValueError):
    """Bytes that are not a ``__transaction_state`` key or value."""


def key_to_bytes(transactional_id: str) -> bytes:
    b = transactional_id.encode()
    return _I16.pack(TXN_KEY_VERSION) + _I16.pack(len(b)) + b


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def value_to_bytes(transit: TxnTransitMetadata, version: int = TXN_VALUE_VERSION) -> bytes | None:
    """The value of a transition at ``version`` (0 or 1: the transaction
    version's, :attr:`TransactionVersion.transaction_log_value_version`);
    None (a tombstone) for Dead."""
    if transit.state == TransactionState.DEAD:
        return None
    if version >= 1:
        return _value_v1(transit)
    out = bytearray(_I16.pack(TXN_VALUE_VERSION))
    out += _VALUE_HEAD.pack(
        transit.producer_id, transit.producer_epoch, transit.txn_timeout_ms, transit.state
    )
    if transit.state == TransactionState.EMPTY:
        if transit.partitions:
            raise ValueError("an Empty transaction has no partitions")
        out += _I32.pack(-1)
    else:
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(transit.partitions, key=lambda t: (t.topic, t.partition)):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        out += _I32.pack(len(by_topic))
        for topic, parts in by_topic.items():
            name = topic.encode()
            out += _I16.pack(len(name)) + name + _I32.pack(len(parts))
            out += struct.pack(f">{len(parts)}i", *parts)
    out += _TIMES.pack(transit.txn_last_update_ms, transit.txn_start_ms)
    return bytes(out)


def _value_v1(transit: TxnTransitMetadata) -> bytes:
    out = bytearray(_I16.pack(1))
    out += _VALUE_HEAD.pack(
        transit.producer_id, transit.producer_epoch, transit.txn_timeout_ms, transit.state
    )
    if transit.state == TransactionState.EMPTY:
        if transit.partitions:
            raise ValueError("an Empty transaction has no partitions")
        out += _uvarint(0)  # a null compact array
    else:
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(transit.partitions, key=lambda t: (t.topic, t.partition)):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        out += _uvarint(len(by_topic) + 1)
        for topic, parts in by_topic.items():
            name = topic.encode()
            out += _uvarint(len(name) + 1) + name + _uvarint(len(parts) + 1)
            out += struct.pack(f">{len(parts)}i", *parts)
            out += _uvarint(0)  # the partition entry's tagged fields: none
    out += _TIMES.pack(transit.txn_last_update_ms, transit.txn_start_ms)
    tags: list[tuple[int, bytes]] = []
    if transit.previous_producer_id != NO_PRODUCER_ID:
        tags.append((0, struct.pack(">q", transit.previous_producer_id)))
    if transit.next_producer_id != NO_PRODUCER_ID:
        tags.append((1, struct.pack(">q", transit.next_producer_id)))
    if transit.client_transaction_version != 0:
        tags.append((2, _I16.pack(transit.client_transaction_version)))
    out += _uvarint(len(tags))
    for tag, data in tags:
        out += _uvarint(tag) + _uvarint(len(data)) + data
    return bytes(out)


# ---------------------------------------------------------------- reading


@dataclass(frozen=True)
class TxnLogValue:
    producer_id: int
    producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    partitions: frozenset[TopicPartition]
    txn_last_update_ms: int
    txn_start_ms: int
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    client_transaction_version: int = 0

    def to_metadata(self, transactional_id: str) -> TransactionMetadata:
        """The metadata this record leaves (Kafka's readTxnRecordValue)."""
        return TransactionMetadata(
            transactional_id,
            self.producer_id,
            self.producer_epoch,
            self.txn_timeout_ms,
            self.state,
            previous_producer_id=self.previous_producer_id,
            next_producer_id=self.next_producer_id,
            last_producer_epoch=NO_PRODUCER_EPOCH,
            partitions=set(self.partitions) if self.state != TransactionState.EMPTY else set(),
            txn_start_ms=self.txn_start_ms,
            txn_last_update_ms=self.txn_last_update_ms,
            client_transaction_version=TransactionVersion.of(self.client_transaction_version),
        )


class _Reader:
    __slots__ = ("buf", "flexible", "pos")

    def __init__(self, buf: bytes, flexible: bool) -> None:
        self.buf = buf
        self.pos = 2
        self.flexible = flexible

    def unpack(self, s: struct.Struct) -> tuple[int, ...]:
        if self.pos + s.size > len(self.buf):
            raise TransactionLogFormatError("truncated record")
        v = s.unpack_from(self.buf, self.pos)
        self.pos += s.size
        return v

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            if self.pos >= len(self.buf) or shift > 28:
                raise TransactionLogFormatError("bad varint")
            b = self.buf[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7

    def length(self, wide: bool) -> int:
        """A string's or array's length; -1 for null."""
        if self.flexible:
            return self.uvarint() - 1
        return (self.unpack(_I32) if wide else self.unpack(_I16))[0]

    def string(self) -> str:
        n = self.length(False)
        if n < 0 or self.pos + n > len(self.buf):
            raise TransactionLogFormatError("bad string")
        s = self.buf[self.pos : self.pos + n].decode()
        self.pos += n
        return s

    def tagged(self) -> dict[int, bytes]:
        out: dict[int, bytes] = {}
        if not self.flexible:
            return out
        for _ in range(self.uvarint()):
            tag, size = self.uvarint(), self.uvarint()
            out[tag] = self.buf[self.pos : self.pos + size]
            self.pos += size
        return out


def read_key(key: bytes) -> str:
    """The transactional id of a key; TransactionLogFormatError for a key of
    another version (Kafka's UnknownKey: skipped by the loader)."""
    if len(key) < 2:
        raise TransactionLogFormatError("key too short")
    (version,) = _I16.unpack_from(key)
    if version != TXN_KEY_VERSION:
        raise TransactionLogFormatError(f"unknown key version {version}")
    return _Reader(key, False).string()


def read_value(value: bytes) -> TxnLogValue:
    if len(value) < 2:
        raise TransactionLogFormatError("value too short")
    (version,) = _I16.unpack_from(value)
    if version not in (0, 1):
        raise TransactionLogFormatError(f"unknown value version {version}")
    r = _Reader(value, version >= 1)
    pid, epoch, timeout, state_id = r.unpack(_VALUE_HEAD)
    try:
        state = TransactionState(state_id)
    except ValueError as e:
        raise TransactionLogFormatError(f"unknown state {state_id}") from e
    partitions: set[TopicPartition] = set()
    n = r.length(True)
    for _ in range(max(n, 0)):
        topic = r.string()
        count = r.length(True)
        if count < 0:
            raise TransactionLogFormatError("null partition list")
        for p in r.unpack(struct.Struct(f">{count}i")):
            partitions.add(TopicPartition(topic, p))
        r.tagged()
    last_update, start = r.unpack(_TIMES)
    tags = r.tagged()

    def tag_int(tag: int, fmt: str, default: int) -> int:
        raw = tags.get(tag)
        if raw is None or len(raw) != struct.calcsize(fmt):
            return default
        return int(struct.unpack(fmt, raw)[0])

    return TxnLogValue(
        pid,
        epoch,
        timeout,
        state,
        frozenset(partitions),
        last_update,
        start,
        previous_producer_id=tag_int(0, ">q", NO_PRODUCER_ID),
        next_producer_id=tag_int(1, ">q", NO_PRODUCER_ID),
        client_transaction_version=tag_int(2, ">h", 0),
    )


def format_record(key: bytes, value: bytes | None) -> tuple[str, str]:
    """A record as text, the way Kafka's dump tool prints it."""
    try:
        txn_id = read_key(key)
    except TransactionLogFormatError:
        return (f"unknown::version={_I16.unpack_from(key)[0] if len(key) >= 2 else -1}", "")
    if value is None:
        return (f"transaction_metadata::transactionalId={txn_id}", "<DELETE>")
    v = read_value(value)
    parts = ",".join(f"{tp.topic}-{tp.partition}" for tp in sorted(v.partitions))
    return (
        f"transaction_metadata::transactionalId={txn_id}",
        f"producerId:{v.producer_id},producerEpoch:{v.producer_epoch},"
        f"state={v.state.kafka_name},partitions=[{parts}],"
        f"txnLastUpdateTimestamp={v.txn_last_update_ms},txnTimeoutMs={v.txn_timeout_ms}",
    )
