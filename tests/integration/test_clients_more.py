"""More stock clients against a real broker process (`pylog broker start`).

Records at a topic's ``max.message.bytes`` accepted and one byte over refused
with MESSAGE_TOO_LARGE; idempotent producers (confluent-kafka, kafka-python)
across a kill -9 and restart with no duplicates and no gaps; ListOffsets by
timestamp from each Python client; kcat's metadata listing, headers and
partitions; acks=all on a one-replica topic with min.insync.replicas=2
answered (the setting is capped at the replica count, as Kafka's is). The
broker process and the produce/consume helpers are those of test_clients_e2e.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from broker_process import BrokerProcess, ck_consume, ck_produce, topic_name
from conftest import build_batch


@pytest.fixture(scope="module")
def broker_proc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("broker") / "data").start()
    try:
        yield b
    finally:
        if b.proc is not None:
            b.stop(signal.SIGKILL)


def create_topic(bootstrap: str, topic: str, partitions: int = 1, **config: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, partitions, 1, config=config)])
    futures[topic].result(20)


# ---------------------------------------------------------------- max.message.bytes

LIMIT = 10_000  # the topic's max.message.bytes


def value_for_batch_size(size: int) -> bytes:
    """A value whose one-record, uncompressed, keyless v2 batch is ``size`` bytes
    long (the whole batch: 61 bytes of header, then the record with its varint
    lengths, which is why this searches rather than subtracts)."""
    n = size - 61 - 7
    while len(build_batch([(None, b"x" * n)])) > size:
        n -= 1
    while len(build_batch([(None, b"x" * n)])) < size:
        n += 1
    assert len(build_batch([(None, b"x" * n)])) == size, "no value gives that batch size"
    return b"x" * n


def test_value_for_batch_size_is_exact() -> None:
    for size in (LIMIT, LIMIT + 1, 200, 1_000_000):
        assert len(build_batch([(None, value_for_batch_size(size))])) == size


def test_confluent_max_message_bytes(broker_proc: BrokerProcess) -> None:
    from confluent_kafka import KafkaError, Producer

    topic = topic_name("ck-max")
    create_topic(broker_proc.bootstrap, topic, **{"max.message.bytes": str(LIMIT)})
    at_limit, over = value_for_batch_size(LIMIT), value_for_batch_size(LIMIT + 1)
    assert len(over) == len(at_limit) + 1
    p = Producer(
        {
            "bootstrap.servers": broker_proc.bootstrap,
            "linger.ms": 0,
            "retries": 0,
            "compression.type": "none",
        }
    )
    results: list[tuple[int, object]] = []

    def send(value: bytes) -> tuple[int, object]:
        results.clear()
        p.produce(topic, value=value, on_delivery=lambda e, m: results.append((len(m), e)))
        assert p.flush(20) == 0  # one batch per record: flushed before the next
        return results[0]

    assert send(at_limit) == (len(at_limit), None)
    size, err = send(over)
    assert size == len(over)
    assert err is not None and err.code() == KafkaError.MSG_SIZE_TOO_LARGE, err
    assert not err.retriable()
    # The broker still serves: another record at the limit, and both read back.
    assert send(at_limit) == (len(at_limit), None)
    got = ck_consume(broker_proc.bootstrap, topic, 2)
    assert [(g[1], g[3]) for g in got] == [(at_limit, 0), (at_limit, 1)]


def test_kafka_python_max_message_bytes(broker_proc: BrokerProcess) -> None:
    from kafka import KafkaProducer
    from kafka.errors import MessageSizeTooLargeError

    topic = topic_name("kp-max")
    create_topic(broker_proc.bootstrap, topic, **{"max.message.bytes": str(LIMIT)})
    at_limit, over = value_for_batch_size(LIMIT), value_for_batch_size(LIMIT + 1)
    p = KafkaProducer(bootstrap_servers=broker_proc.bootstrap, linger_ms=0, retries=0)
    try:
        assert p.send(topic, value=at_limit).get(timeout=20).offset == 0
        with pytest.raises(MessageSizeTooLargeError):
            p.send(topic, value=over).get(timeout=20)
        assert p.send(topic, value=at_limit).get(timeout=20).offset == 1
    finally:
        p.close(5)
    got = ck_consume(broker_proc.bootstrap, topic, 2)
    assert [(g[1], g[3]) for g in got] == [(at_limit, 0), (at_limit, 1)]


# ---------------------------------------------------------------- idempotence

IDEMPOTENT_RECORDS = 3000


def _restart_midway(b: BrokerProcess, acked: list[int], killed_at: list[int]) -> None:
    """Once a third of the records are acknowledged, kill -9 the broker and start
    it again; ``killed_at`` gets how many were acknowledged then."""
    deadline = time.monotonic() + 30
    while len(acked) < IDEMPOTENT_RECORDS // 3 and time.monotonic() < deadline:
        time.sleep(0.002)
    b.stop(signal.SIGKILL)
    killed_at.append(len(acked))
    time.sleep(0.3)  # the producer sees the connection go and starts retrying
    b.start()


def _start_restarter(b: BrokerProcess, acked: list[int], killed_at: list[int]) -> threading.Thread:
    t = threading.Thread(target=_restart_midway, args=(b, acked, killed_at), daemon=True)
    t.start()
    return t


def _assert_exactly_once(
    bootstrap: str, topic: str, acked: list[int], killed_at: list[int]
) -> None:
    assert sorted(acked) == list(range(IDEMPOTENT_RECORDS))
    assert IDEMPOTENT_RECORDS // 3 <= killed_at[0] < IDEMPOTENT_RECORDS, "not killed midway"
    got = ck_consume(bootstrap, topic, IDEMPOTENT_RECORDS, timeout=30)
    values = [int(g[1]) for g in got]
    assert values == list(range(IDEMPOTENT_RECORDS)), "duplicates, gaps or reordering"
    time.sleep(0.2)  # nothing after the last one either
    assert len(ck_consume(bootstrap, topic, IDEMPOTENT_RECORDS + 1, timeout=1)) == len(got)


def test_confluent_idempotent_producer_across_kill_9(tmp_path: Path) -> None:
    from confluent_kafka import Producer

    b = BrokerProcess(tmp_path / "data").start()
    topic = topic_name("ck-idem")
    try:
        p = Producer(
            {
                "bootstrap.servers": b.bootstrap,
                "enable.idempotence": True,
                "linger.ms": 2,
                "batch.num.messages": 50,
                "message.timeout.ms": 60_000,
                "retry.backoff.ms": 50,
            }
        )
        acked: list[int] = []
        errors: list[object] = []

        def on_delivery(err: object, msg: object) -> None:
            if err is not None:
                errors.append(err)
            else:
                acked.append(int(msg.value()))  # type: ignore[attr-defined]

        killed_at: list[int] = []
        restarter = _start_restarter(b, acked, killed_at)
        for i in range(IDEMPOTENT_RECORDS):
            p.produce(topic, value=b"%d" % i, on_delivery=on_delivery)
            if i % 10 == 0:
                p.poll(0.002)  # delivery callbacks; spreads the records over the restart
        while restarter.is_alive():
            p.poll(0.01)
        assert p.flush(60) == 0
        assert errors == []
        _assert_exactly_once(b.bootstrap, topic, acked, killed_at)
    finally:
        if b.proc is not None:
            b.stop(signal.SIGKILL)


def test_kafka_python_idempotent_producer_across_kill_9(tmp_path: Path) -> None:
    from kafka import KafkaProducer

    b = BrokerProcess(tmp_path / "data").start()
    topic = topic_name("kp-idem")
    try:
        p = KafkaProducer(
            bootstrap_servers=b.bootstrap,  # idempotence, acks=all and retries by default
            linger_ms=2,
            batch_size=2000,
            retry_backoff_ms=50,
            request_timeout_ms=10_000,
            delivery_timeout_ms=60_000,
        )
        assert p.config["enable_idempotence"]
        acked: list[int] = []
        killed_at: list[int] = []
        restarter = _start_restarter(b, acked, killed_at)
        futures = []
        for i in range(IDEMPOTENT_RECORDS):
            f = p.send(topic, value=b"%d" % i)
            f.add_callback(lambda md, i=i: acked.append(i))
            futures.append(f)
            if i % 10 == 0:
                time.sleep(0.002)  # spreads the records over the restart
        restarter.join(40)
        p.flush(60)
        for f in futures:
            f.get(timeout=1)  # raises if any record failed
        p.close(5)
        _assert_exactly_once(b.bootstrap, topic, acked, killed_at)
    finally:
        if b.proc is not None:
            b.stop(signal.SIGKILL)


# ---------------------------------------------------------------- ListOffsets by time

# Recent: records older than retention.ms (7 days) would be deleted under the test.
BASE_TS = (int(time.time() * 1000) // 1000 - 3600) * 1000


@pytest.fixture(scope="module")
def timed_topic(broker_proc: BrokerProcess) -> str:
    """Ten records at BASE_TS, BASE_TS + 1000, ..., in batches of two."""
    from confluent_kafka import Producer

    topic = topic_name("times")
    p = Producer({"bootstrap.servers": broker_proc.bootstrap, "linger.ms": 0})
    for i in range(10):
        p.produce(topic, value=b"%d" % i, timestamp=BASE_TS + 1000 * i)
        if i % 2:
            assert p.flush(20) == 0
    return topic


# timestamp asked -> (offset, its timestamp) expected; None: no record that late
TIME_CASES = {
    BASE_TS - 1: (0, BASE_TS),
    BASE_TS: (0, BASE_TS),
    BASE_TS + 1: (1, BASE_TS + 1000),
    BASE_TS + 2500: (3, BASE_TS + 3000),
    BASE_TS + 9000: (9, BASE_TS + 9000),
    BASE_TS + 9001: None,
}


def test_confluent_offsets_for_times(broker_proc: BrokerProcess, timed_topic: str) -> None:
    from confluent_kafka import OFFSET_END, Consumer, TopicPartition

    # No auto-commit: consumer groups are not served yet, and close() would try to commit.
    c = Consumer(
        {"bootstrap.servers": broker_proc.bootstrap, "group.id": "unused",
         "enable.auto.commit": False}
    )  # fmt: skip
    try:
        for ts, expected in TIME_CASES.items():
            [tp] = c.offsets_for_times([TopicPartition(timed_topic, 0, ts)], timeout=10)
            assert tp.error is None
            assert tp.offset == (expected[0] if expected else OFFSET_END), ts
        # A consumer positioned by time reads from there.
        [tp] = c.offsets_for_times([TopicPartition(timed_topic, 0, BASE_TS + 7000)], timeout=10)
        c.assign([tp])
        m = c.poll(10)
        assert m is not None and m.error() is None
        assert (m.offset(), m.value(), m.timestamp()[1]) == (7, b"7", BASE_TS + 7000)
    finally:
        c.close()


def test_kafka_python_offsets_for_times(broker_proc: BrokerProcess, timed_topic: str) -> None:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=broker_proc.bootstrap, enable_auto_commit=False)
    try:
        tp = TopicPartition(timed_topic, 0)
        for ts, expected in TIME_CASES.items():
            found = c.offsets_for_times({tp: ts})[tp]
            assert (found and (found.offset, found.timestamp)) == expected, ts
        assert c.beginning_offsets([tp]) == {tp: 0}
        assert c.end_offsets([tp]) == {tp: 10}
    finally:
        c.close()


def test_aiokafka_offsets_for_times(broker_proc: BrokerProcess, timed_topic: str) -> None:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def main() -> None:
        c = AIOKafkaConsumer(bootstrap_servers=broker_proc.bootstrap, enable_auto_commit=False)
        await c.start()
        try:
            tp = TopicPartition(timed_topic, 0)
            for ts, expected in TIME_CASES.items():
                found = (await c.offsets_for_times({tp: ts}))[tp]
                assert (found and (found.offset, found.timestamp)) == expected, ts
            assert await c.beginning_offsets([tp]) == {tp: 0}
            assert await c.end_offsets([tp]) == {tp: 10}
        finally:
            await c.stop()

    asyncio.run(asyncio.wait_for(main(), 30))


# ---------------------------------------------------------------- kcat

needs_kcat = pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed")


def kcat(*args: str, stdin: str | None = None) -> str:
    out = subprocess.run(
        ["kcat", *args], input=stdin, capture_output=True, text=True, check=True, timeout=30
    )
    return out.stdout


@needs_kcat
def test_kcat_metadata_listing(broker_proc: BrokerProcess) -> None:
    topic = topic_name("kcat-meta")
    create_topic(broker_proc.bootstrap, topic, partitions=3)
    listing = kcat("-b", broker_proc.bootstrap, "-L")
    assert "1 brokers:" in listing
    assert f"broker 0 at 127.0.0.1:{broker_proc.port}" in listing
    assert f'topic "{topic}" with 3 partitions:' in listing
    for p in range(3):
        assert f"partition {p}, leader 0, replicas: 0, isrs: 0" in listing
    meta = json.loads(kcat("-b", broker_proc.bootstrap, "-L", "-J", "-t", topic))
    assert [b["id"] for b in meta["brokers"]] == [0]
    [t] = meta["topics"]
    assert t["topic"] == topic
    assert [(p["partition"], p["leader"]) for p in t["partitions"]] == [(0, 0), (1, 0), (2, 0)]


@needs_kcat
def test_kcat_partitions_headers_and_offsets(broker_proc: BrokerProcess) -> None:
    topic = topic_name("kcat-parts")
    create_topic(broker_proc.bootstrap, topic, partitions=2)
    for p in (0, 1):
        lines = "".join(f"k{p}{i}|v{p}{i}\n" for i in range(5))
        kcat("-b", broker_proc.bootstrap, "-P", "-t", topic, "-p", str(p), "-K|",
             "-H", f"part={p}", stdin=lines)  # fmt: skip
    out = kcat("-b", broker_proc.bootstrap, "-C", "-t", topic, "-p", "1", "-o", "2", "-e",
               "-f", "%p %o %k %s %h\n")  # fmt: skip
    assert out.splitlines() == [f"1 {i} k1{i} v1{i} part=1" for i in range(2, 5)]
    # Both partitions to the end, then the last two of partition 0 by a negative offset.
    both = kcat("-b", broker_proc.bootstrap, "-C", "-t", topic, "-o", "beginning", "-e",
                "-f", "%p:%s\n")  # fmt: skip
    assert sorted(both.splitlines()) == sorted(f"{p}:v{p}{i}" for p in (0, 1) for i in range(5))
    tail = kcat("-b", broker_proc.bootstrap, "-C", "-t", topic, "-p", "0", "-o", "-2", "-e",
                "-f", "%s\n")  # fmt: skip
    assert tail.splitlines() == ["v03", "v04"]


# ---------------------------------------------------------------- min.insync.replicas


def test_acks_all_with_min_insync_above_the_replication_factor(broker_proc: BrokerProcess) -> None:
    """min.insync.replicas is capped at the replica count (Kafka's
    Partition.effectiveMinIsr): on a topic of one replica with
    min.insync.replicas=2, acks=all is answered once that replica has the
    record, from both clients. The refusal below min.insync.replicas is
    tested on a cluster (test_cluster_guarantees)."""
    from kafka import KafkaProducer

    topic = topic_name("minisr-capped")
    create_topic(broker_proc.bootstrap, topic, **{"min.insync.replicas": "2"})
    ck_produce(broker_proc.bootstrap, topic, [(None, b"confluent", None)], acks="all")
    p = KafkaProducer(
        bootstrap_servers=broker_proc.bootstrap, acks="all", retries=0, enable_idempotence=False
    )
    try:
        assert p.send(topic, value=b"kafka-python").get(timeout=20).offset == 1
    finally:
        p.close(5)
    got = ck_consume(broker_proc.bootstrap, topic, 2)
    assert [(g[1], g[3]) for g in got] == [(b"confluent", 0), (b"kafka-python", 1)]
