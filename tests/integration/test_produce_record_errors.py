"""A batch refused for some of its records names them (KIP-467), as Kafka's
LogValidator does: each refused record's ``batch_index`` and message in the
Produce response's ``record_errors``, and an ``error_message``. A client then
fails those records with the broker's error and the others of the batch with
its own "an invalid record in the same batch" (librdkafka's
_INVALID_DIFFERENT_RECORD) — nothing of the batch is stored.

Per record in Kafka: a record without a key on a compacted topic
(INVALID_RECORD) and a CreateTime timestamp out of the
``message.timestamp.{before,after}.max.ms`` range (INVALID_TIMESTAMP)."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest
from broker_process import BrokerProcess, topic_name
from conftest import build_batch

from pylog.protocol.client import KafkaConnection

INVALID_TIMESTAMP, INVALID_RECORD = 32, 87


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("record-errors") / "data").start()
    try:
        yield b
    finally:
        if b.proc is not None:
            b.stop(signal.SIGKILL)


def create_topic(bootstrap: str, topic: str, **configs: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(20)


def produce_batch(
    bootstrap: str, topic: str, records: list[tuple[bytes | None, int | None]]
) -> list[tuple[Any, str]]:
    """confluent-kafka producing ``records`` (key, timestamp) in one batch;
    each one's delivery error (None when delivered) and its text, in order."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2000, "retries": 0, "acks": "all"})
    reports: dict[int, tuple[Any, str]] = {}

    def delivered(i: int) -> Any:
        def cb(err: Any, msg: Any) -> None:
            reports[i] = (err.code() if err else None, err.str() if err else "")

        return cb

    for i, (key, ts) in enumerate(records):
        kw: dict[str, Any] = {"timestamp": ts} if ts is not None else {}
        p.produce(topic, value=b"v%d" % i, key=key, partition=0, on_delivery=delivered(i), **kw)
    assert p.flush(20) == 0
    return [reports[i] for i in range(len(records))]


def consume_all(bootstrap: str, topic: str) -> list[bytes]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                  "enable.auto.commit": False, "enable.partition.eof": True})  # fmt: skip
    c.assign([TopicPartition(topic, 0, 0)])
    out: list[bytes] = []
    deadline = time.monotonic() + 20
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                break  # end of the partition
            out.append(m.value())
    finally:
        c.close()
    return out


def test_librdkafka_fails_the_keyless_records_and_the_rest_as_different_record(
    broker: BrokerProcess,
) -> None:
    from confluent_kafka import KafkaError

    topic = topic_name("rec-err-key")
    create_topic(broker.bootstrap, topic, **{"cleanup.policy": "compact"})
    reports = produce_batch(
        broker.bootstrap, topic, [(b"a", None), (None, None), (b"c", None), (None, None)]
    )
    codes = [code for code, _ in reports]
    different = KafkaError._INVALID_DIFFERENT_RECORD
    assert codes == [different, INVALID_RECORD, different, INVALID_RECORD], reports
    # Records with keys in their own batch are stored; the refused batch is not.
    assert produce_batch(broker.bootstrap, topic, [(b"a", None), (b"b", None)]) == [
        (None, ""),
        (None, ""),
    ]
    assert consume_all(broker.bootstrap, topic) == [b"v0", b"v1"]


def test_librdkafka_fails_records_with_out_of_range_timestamps(broker: BrokerProcess) -> None:
    topic = topic_name("rec-err-ts")
    create_topic(broker.bootstrap, topic, **{"message.timestamp.after.max.ms": "60000"})
    now = int(time.time() * 1000)
    day = 86_400_000
    reports = produce_batch(broker.bootstrap, topic, [(b"a", now), (b"b", now + day), (b"c", now)])
    # librdkafka reads record_errors for INVALID_RECORD only: under
    # INVALID_TIMESTAMP it fails the whole batch, as it does against Kafka.
    assert [code for code, _ in reports] == [INVALID_TIMESTAMP] * 3, reports
    assert consume_all(broker.bootstrap, topic) == []


def test_raw_produce_response_names_each_refused_record(broker: BrokerProcess) -> None:
    topic = topic_name("rec-err-raw")
    create_topic(broker.bootstrap, topic, **{"cleanup.policy": "compact"})
    records: list[tuple[bytes | None, bytes | None]] = [
        (b"k0", b"v"), (None, b"v"), (b"k2", b"v"), (None, b"v"), (None, b"v"), (None, b"v"),
    ]  # fmt: skip
    for compression in (0, 1):  # none, gzip
        batch = build_batch(records, compression=compression)
        with KafkaConnection(broker.bootstrap) as c:
            r = c.request(0, 9, {
                "transactional_id": None, "acks": -1, "timeout_ms": 10_000,
                "topic_data": [{"name": topic, "partition_data": [
                    {"index": 0, "records": batch}]}],
            })  # fmt: skip
            p = r.responses[0].partition_responses[0]
            assert p.error_code == INVALID_RECORD
            assert p.base_offset == -1
            part = f"{topic}-0"
            why = f"Compacted topic cannot accept message without key in topic partition {part}"
            assert [(e.batch_index, e.batch_index_error_message) for e in p.record_errors] == [
                (1, why), (3, why), (4, why), (5, why),
            ]  # fmt: skip
            # Kafka's summary names how many, and shows the first three.
            assert p.error_message is not None
            assert p.error_message.startswith(
                "One or more records have been rejected due to 4 record errors in total, "
                "and only showing the first three errors at most: "
                f"[RecordError(batchIndex=1, message='{why}'), "
            ), p.error_message
            assert p.error_message.count("RecordError(") == 3
            # Before v8 the response has no place for them: the error alone.
            r = c.request(0, 7, {
                "transactional_id": None, "acks": -1, "timeout_ms": 10_000,
                "topic_data": [{"name": topic, "partition_data": [
                    {"index": 0, "records": batch}]}],
            })  # fmt: skip
            assert r.responses[0].partition_responses[0].error_code == INVALID_RECORD
    assert consume_all(broker.bootstrap, topic) == []


def test_raw_produce_timestamp_errors_name_the_records(broker: BrokerProcess) -> None:
    topic = topic_name("rec-err-raw-ts")
    create_topic(broker.bootstrap, topic, **{"message.timestamp.before.max.ms": "60000"})
    now = int(time.time() * 1000)
    old = now - 3_600_000
    batch = build_batch([(b"k", b"v")] * 3, timestamp=[now, old, now])
    with KafkaConnection(broker.bootstrap) as c:
        r = c.request(0, 9, {
            "transactional_id": None, "acks": 1, "timeout_ms": 10_000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
        })  # fmt: skip
    p = r.responses[0].partition_responses[0]
    assert p.error_code == INVALID_TIMESTAMP
    assert p.error_message == "One or more records have been rejected due to invalid timestamp"
    assert [e.batch_index for e in p.record_errors] == [1]
    msg = p.record_errors[0].batch_index_error_message
    assert msg.startswith(f"Timestamp {old} of message with offset 1 is out of range. "), msg
