"""The pieces of the ``pylog`` commands' own Kafka client that need no broker:
error naming, the key partitioner, the range assignment and the consumer
protocol's bytes, and decoding fetched batches (read_committed included)."""

from __future__ import annotations

import os
import struct

from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from pylog import _native
from pylog.cli.client import BrokerError, describe, error_for, error_name
from pylog.cli.consumer import (
    decode_fetched,
    encode_assignment,
    encode_subscription,
    range_assign,
)
from pylog.cli.producer import murmur2
from pylog.coordinator.records import assigned_partitions, subscribed_topics
from pylog.errors import InvalidPartitionsError, TopicAlreadyExistsError


def test_error_codes_are_named_like_pylog_errors() -> None:
    assert error_name(36) == "TopicAlreadyExistsError"
    assert error_name(69) == "GroupIdNotFoundError"
    assert error_name(17) == "InvalidTopicError"
    assert isinstance(error_for(37, "only grows"), InvalidPartitionsError)
    e = error_for(68)
    assert isinstance(e, BrokerError) and e.code == 68 and e.error_name == "NON_EMPTY_GROUP"
    assert describe(36, "Topic 'x' already exists.") == (
        "TopicAlreadyExistsError: Topic 'x' already exists."
    )
    assert isinstance(error_for(36), TopicAlreadyExistsError)


def test_murmur2_matches_kafka_python() -> None:
    for n in range(300):
        key = os.urandom(n % 41)
        assert murmur2(key) & 0x7FFFFFFF == kafka_python_murmur2(key) & 0x7FFFFFFF


def test_range_assignment_and_protocol_bytes() -> None:
    plan = range_assign({"b": {"t", "u"}, "a": {"t"}, "c": {"t"}}, {"t": 7, "u": 2})
    assert plan == {"a": {"t": [0, 1, 2]}, "b": {"t": [3, 4], "u": [0, 1]}, "c": {"t": [5, 6]}}
    assert subscribed_topics(encode_subscription(["u", "t"])) == {"t", "u"}
    assert assigned_partitions(encode_assignment(plan["b"])) == [("t", [3, 4]), ("u", [0, 1])]


def _batch(base: int, values: list[bytes], **kw: object) -> bytes:
    return _native.build_batch(
        [(None, v, [], 1000) for v in values],
        base_offset=base,
        **kw,
    )


def test_decode_fetched_batches() -> None:
    txn = {"producer_id": 7, "producer_epoch": 0, "is_transactional": True}
    marker = _native.build_batch(
        [(struct.pack(">hh", 0, 0), struct.pack(">hi", 0, 0), [], 1000)],
        base_offset=4,
        is_control=True,
        **txn,
    )
    data = (
        _batch(0, [b"a", b"b"])
        + _batch(2, [b"t1", b"t2"], **txn)
        + marker
        + _batch(5, [b"c"], compression=1)
        + _batch(6, [b"cut"])[:-3]  # a partial batch at the end
    )
    records, next_offset = decode_fetched("t", 0, data, 1)
    assert [r.value for r in records] == [b"b", b"t1", b"t2", b"c"]
    assert [r.offset for r in records] == [1, 2, 3, 5]
    assert next_offset == 6
    committed, _ = decode_fetched("t", 0, data, 0, aborted=[(7, 2)])
    assert [r.value for r in committed] == [b"a", b"b", b"c"]
