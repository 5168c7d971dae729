"""__transaction_state's records, byte for byte as Kafka's TransactionLogKey /
TransactionLogValue schemas lay them out (the bytes here are written out by
hand from the schemas, not by the code under test)."""

from __future__ import annotations

import struct

import pytest

from pylog.common.topic_partition import TopicPartition
from pylog.common.transaction_version import TransactionVersion
from pylog.transaction.transaction_log import (
    TransactionLogFormatError,
    format_record,
    key_to_bytes,
    read_key,
    read_value,
    value_to_bytes,
)
from pylog.transaction.transaction_metadata import TransactionState, TxnTransitMetadata


def _transit(
    state: TransactionState, partitions: frozenset[TopicPartition] = frozenset()
) -> TxnTransitMetadata:
    return TxnTransitMetadata(
        producer_id=4242,
        previous_producer_id=-1,
        next_producer_id=-1,
        producer_epoch=3,
        last_producer_epoch=-1,
        txn_timeout_ms=60000,
        state=state,
        partitions=partitions,
        txn_start_ms=1_700_000_000_000,
        txn_last_update_ms=1_700_000_000_500,
    )


def test_key_is_version_0_and_the_id() -> None:
    assert key_to_bytes("tx-1") == b"\x00\x00" + b"\x00\x04" + b"tx-1"
    assert read_key(key_to_bytes("tx-é")) == "tx-é"


def test_empty_value_has_a_null_partition_array() -> None:
    expected = (
        struct.pack(">h", 0)  # value version 0
        + struct.pack(">q", 4242)  # producer id
        + struct.pack(">h", 3)  # epoch
        + struct.pack(">i", 60000)  # timeout
        + struct.pack(">b", 0)  # Empty
        + struct.pack(">i", -1)  # null partitions
        + struct.pack(">q", 1_700_000_000_500)  # last update
        + struct.pack(">q", 1_700_000_000_000)  # start
    )
    assert value_to_bytes(_transit(TransactionState.EMPTY)) == expected


def test_ongoing_value_groups_partitions_by_topic() -> None:
    parts = frozenset({TopicPartition("b", 1), TopicPartition("a", 2), TopicPartition("a", 0)})
    raw = value_to_bytes(_transit(TransactionState.ONGOING, parts))
    assert raw is not None
    expected_partitions = (
        struct.pack(">i", 2)
        + b"\x00\x01a" + struct.pack(">i", 2) + struct.pack(">ii", 0, 2)
        + b"\x00\x01b" + struct.pack(">i", 1) + struct.pack(">i", 1)
    )  # fmt: skip
    assert raw[2 + 8 + 2 + 4 : 2 + 8 + 2 + 4 + 1] == b"\x01"  # Ongoing
    assert raw[17 : 17 + len(expected_partitions)] == expected_partitions
    v = read_value(raw)
    assert (v.producer_id, v.producer_epoch, v.state, v.partitions) == (
        4242, 3, TransactionState.ONGOING, parts
    )  # fmt: skip
    assert (v.txn_start_ms, v.txn_last_update_ms) == (1_700_000_000_000, 1_700_000_000_500)


def test_dead_is_a_tombstone() -> None:
    assert value_to_bytes(_transit(TransactionState.DEAD)) is None
    assert format_record(key_to_bytes("x"), None)[1] == "<DELETE>"


def test_reads_the_flexible_version_1_with_its_tagged_fields() -> None:
    # v1: compact strings and arrays (length + 1), tagged fields at the end.
    raw = (
        struct.pack(">h", 1)
        + struct.pack(">qhib", 77, 5, 30000, 4)  # CompleteCommit
        + bytes([2])  # one topic (compact array: n + 1)
        + bytes([2]) + b"t"  # compact string "t"
        + bytes([2]) + struct.pack(">i", 9)  # one partition
        + bytes([0])  # the topic entry's tagged fields
        + struct.pack(">qq", 20, 10)
        + bytes([3])  # three tagged fields
        + bytes([0, 8]) + struct.pack(">q", 76)  # previous producer id
        + bytes([1, 8]) + struct.pack(">q", 78)  # next producer id
        + bytes([2, 2]) + struct.pack(">h", 2)  # client transaction version
    )  # fmt: skip
    v = read_value(raw)
    assert (v.producer_id, v.producer_epoch, v.state) == (77, 5, TransactionState.COMPLETE_COMMIT)
    assert v.partitions == frozenset({TopicPartition("t", 9)})
    assert (v.previous_producer_id, v.next_producer_id, v.client_transaction_version) == (76, 78, 2)
    assert (v.txn_last_update_ms, v.txn_start_ms) == (20, 10)


def test_writes_version_1_with_the_tagged_fields_that_are_not_defaults() -> None:
    # What Kafka writes once transaction.version >= 1 (the same bytes as above).
    transit = TxnTransitMetadata(
        producer_id=77,
        previous_producer_id=76,
        next_producer_id=78,
        producer_epoch=5,
        last_producer_epoch=4,
        txn_timeout_ms=30000,
        state=TransactionState.COMPLETE_COMMIT,
        partitions=frozenset({TopicPartition("t", 9)}),
        txn_start_ms=10,
        txn_last_update_ms=20,
        client_transaction_version=TransactionVersion.TV_2,
    )
    assert value_to_bytes(transit, 1) == (
        struct.pack(">h", 1)
        + struct.pack(">qhib", 77, 5, 30000, 4)
        + bytes([2, 2]) + b"t" + bytes([2]) + struct.pack(">i", 9) + bytes([0])
        + struct.pack(">qq", 20, 10)
        + bytes([3])
        + bytes([0, 8]) + struct.pack(">q", 76)
        + bytes([1, 8]) + struct.pack(">q", 78)
        + bytes([2, 2]) + struct.pack(">h", 2)
    )  # fmt: skip
    # Empty: a null compact array; defaults leave the tagged section empty.
    empty = _transit(TransactionState.EMPTY)
    assert value_to_bytes(empty, 1) == (
        struct.pack(">h", 1) + struct.pack(">qhib", 4242, 3, 60000, 0) + bytes([0])
        + struct.pack(">qq", 1_700_000_000_500, 1_700_000_000_000) + bytes([0])
    )  # fmt: skip
    back = read_value(value_to_bytes(empty, 1) or b"")
    assert (back.state, back.partitions, back.client_transaction_version) == (
        TransactionState.EMPTY, frozenset(), 0,
    )  # fmt: skip


@pytest.mark.parametrize(
    "raw",
    [b"", b"\x00", b"\x00\x09" + b"\x00" * 40, b"\x00\x00" + b"\x00" * 5,
     b"\x00\x00" + struct.pack(">qhib", 1, 0, 1, 99) + struct.pack(">i", -1) + b"\x00" * 16],
)  # fmt: skip
def test_bad_values_are_refused(raw: bytes) -> None:
    with pytest.raises(TransactionLogFormatError):
        read_value(raw)


def test_unknown_key_version_is_refused() -> None:
    with pytest.raises(TransactionLogFormatError):
        read_key(b"\x00\x01\x00\x01x")
