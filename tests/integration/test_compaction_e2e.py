"""Compacted topics on a real broker process with confluent-kafka (librdkafka):
one record per key after cleaning, read back from the beginning; a reader
during cleaning; tombstones gone after delete.retention.ms; an idempotent
producer across compaction; keyless records refused with INVALID_RECORD; the
broker SIGKILLed inside a clean and restarted with every key's latest value."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from broker_process import BrokerProcess

confluent_kafka = pytest.importorskip("confluent_kafka")

SEG = 16 * 1024

TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    "internal.segment.bytes": str(SEG),
    "min.cleanable.dirty.ratio": "0.01",
    "file.delete.delay.ms": "1000",
}
# batches well under the 16 KiB segments
PRODUCER: dict[str, Any] = {"linger.ms": 5, "batch.size": 4096}


class Broker(BrokerProcess):
    """The e2e broker with a fast cleaner and a metrics port; restartable on the same data."""

    def __init__(self, data: Path) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.metrics_port = s.getsockname()[1]
        overrides = {
            "log.cleaner.backoff.ms": 100,
            "log.cleaner.dedupe.buffer.size": 4194304,
            "metrics.port": self.metrics_port,
        }
        super().__init__(data, overrides)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    b = Broker(tmp_path_factory.mktemp("compaction") / "data").start()
    try:
        yield b
    finally:
        if b.proc is not None:
            b.stop(signal.SIGKILL)


def create_topic(bootstrap: str, **extra: str) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    name = f"compacted-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fut = admin.create_topics([NewTopic(name, 1, 1, config={**TOPIC_CONFIG, **extra})])[name]
    fut.result(20)
    return name


def produce(
    bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes | None]], **conf: Any
) -> list[Any]:
    """Produce and return the delivery errors (None for each success)."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, **PRODUCER, **conf})
    results: list[Any] = []
    for k, v in records:
        p.produce(topic, key=k, value=v, on_delivery=lambda err, msg: results.append(err))
        p.poll(0)
    assert p.flush(30) == 0
    return results


def read_all(bootstrap: str, topic: str, timeout: float = 20) -> list[tuple[int, bytes, Any]]:
    """Every record from the beginning up to the high watermark, read by a consumer."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False}
    )
    try:
        _, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        c.assign([TopicPartition(topic, 0, 0)])
        out: list[tuple[int, bytes, Any]] = []
        deadline = time.monotonic() + timeout
        last = -1
        while last < high - 1:
            assert time.monotonic() < deadline, f"read up to {last} of {high}"
            m = c.poll(0.2)
            if m is None:
                continue
            assert m.error() is None, m.error()
            assert m.offset() > last, "offsets only grow"
            last = m.offset()
            out.append((m.offset(), m.key(), m.value()))
        return out
    finally:
        c.close()


def latest(records: list[tuple[int, bytes, Any]]) -> dict[bytes, Any]:
    return {k: v for _, k, v in records}


def wait_until_compacted(
    bootstrap: str, topic: str, expected: dict[bytes, Any], max_records: int, timeout: float = 40
) -> list[tuple[int, bytes, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        got = read_all(bootstrap, topic)
        assert latest(got) == expected
        if len(got) <= max_records:
            return got
        assert time.monotonic() < deadline, f"still {len(got)} records"
        time.sleep(0.3)


def updates(keys: int, rounds: int, tag: str = "") -> list[tuple[bytes, bytes]]:
    return [
        (b"key-%d" % k, f"{tag}value-{r}-{k}-".encode() + b"x" * 100)
        for r in range(rounds)
        for k in range(keys)
    ]


def test_many_updates_few_keys_one_record_per_key_while_a_reader_reads(broker: Broker) -> None:
    topic = create_topic(broker.bootstrap)
    stop = threading.Event()
    problems: list[str] = []
    passes = [0]

    def reader() -> None:
        # Reads from the beginning over and over while the cleaner works:
        # offsets grow, every value is whole, and the log never loses a key.
        while not stop.is_set():
            try:
                got = read_all(broker.bootstrap, topic)
            except Exception as e:  # reported by the main thread
                problems.append(repr(e))
                return
            for _, k, v in got:
                if not v.startswith(b"value-") or not v.endswith(b"x" * 100):
                    problems.append(f"torn value {v!r} for {k!r}")
            passes[0] += 1

    records = updates(keys=20, rounds=150)
    assert all(e is None for e in produce(broker.bootstrap, topic, records[:1000]))
    t = threading.Thread(target=reader)
    t.start()
    try:
        assert all(e is None for e in produce(broker.bootstrap, topic, records[1000:]))
        expected = dict(records)
        # the active segment is never cleaned: allow what it holds
        got = wait_until_compacted(broker.bootstrap, topic, expected, max_records=200)
    finally:
        stop.set()
        t.join(30)
    assert problems == []
    assert passes[0] >= 1
    assert latest(got) == expected and len(got) < 3000 / 10
    url = f"http://127.0.0.1:{broker.metrics_port}/metrics"
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    gauges = {
        line.split()[0]: float(line.split()[1])
        for line in text.splitlines()
        if line.startswith("kafka_log_cleaner_")
    }
    assert gauges["kafka_log_cleaner_bytes_cleaned"] > 0
    assert 0 < gauges["kafka_log_cleaner_cleaner_recopy_percent"] <= 100
    assert "kafka_log_cleaner_max_dirty_percent" in gauges


def test_tombstones_vanish_after_delete_retention(broker: Broker) -> None:
    topic = create_topic(broker.bootstrap, **{"delete.retention.ms": "100"})
    produce(broker.bootstrap, topic, [(b"doomed-%d" % i, b"v") for i in range(10)])
    produce(broker.bootstrap, topic, [(b"doomed-%d" % i, None) for i in range(10)])
    seen_tombstone = False
    deadline = time.monotonic() + 60
    n = 0
    while True:
        got = read_all(broker.bootstrap, topic)
        view = latest(got)
        if any(k.startswith(b"doomed-") for k in view):
            seen_tombstone = seen_tombstone or view.get(b"doomed-0", b"v") is None
        else:
            break
        assert time.monotonic() < deadline, "tombstones never went"
        # more data moves the clean head past the tombstones' segment
        produce(
            broker.bootstrap, topic, [(b"filler-%d-%d" % (n, i), b"f" * 300) for i in range(60)]
        )
        n += 1
        time.sleep(0.3)
    assert seen_tombstone, "the first cleans keep the tombstones"
    assert all(v is not None for v in view.values())
    assert len(view) == 60 * n


def test_idempotent_producer_keeps_working_across_compaction(broker: Broker) -> None:
    from confluent_kafka import Producer

    topic = create_topic(broker.bootstrap)
    p = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, **PRODUCER})
    errors: list[Any] = []

    def send(records: list[tuple[bytes, bytes]]) -> None:
        for k, v in records:
            p.produce(
                topic, key=k, value=v, on_delivery=lambda e, m: errors.append(e) if e else None
            )
            p.poll(0)
        assert p.flush(30) == 0

    first = updates(keys=5, rounds=300)
    send(first)
    wait_until_compacted(broker.bootstrap, topic, dict(first), max_records=200)
    second = updates(keys=5, rounds=100, tag="2")
    send(second)  # same producer id, sequences continue over the compacted log
    assert errors == []
    expected = dict(first)
    expected.update(second)
    wait_until_compacted(broker.bootstrap, topic, expected, max_records=200)


def test_keyless_record_refused_with_invalid_record(broker: Broker) -> None:
    from confluent_kafka import KafkaError

    topic = create_topic(broker.bootstrap)
    for codec in ("none", "zstd"):
        errs = produce(
            broker.bootstrap,
            topic,
            [(None, b"no key")],
            **{"compression.codec": codec, "retries": 0},
        )
        assert len(errs) == 1 and errs[0] is not None
        assert errs[0].code() == KafkaError.INVALID_RECORD
    assert produce(broker.bootstrap, topic, [(b"k", b"with key")]) == [None]
    assert latest(read_all(broker.bootstrap, topic)) == {b"k": b"with key"}


@pytest.mark.parametrize("phase", ["cleaned", "swap", "deleted"])
def test_broker_killed_inside_a_clean_restarts_with_every_latest_value(
    tmp_path: Path, phase: str
) -> None:
    b = Broker(tmp_path / "data").start(env={"PYLOG_CLEANER_CRASH_AT": phase})
    try:
        # min.compaction.lag.ms holds the clean (and the crash) until every
        # record is acknowledged
        topic = create_topic(b.bootstrap, **{"min.compaction.lag.ms": "3000"})
        records = updates(keys=30, rounds=60)
        expected = dict(records)
        assert all(e is None for e in produce(b.bootstrap, topic, records))
        assert b.proc is not None
        code = b.proc.wait(60)  # the crash hook SIGKILLs the broker inside the clean
        b.proc = None
        assert code == -signal.SIGKILL
        part = tmp_path / "data" / f"{topic}-0"
        names = os.listdir(part)
        suffix = ".cleaned" if phase == "cleaned" else ".swap"
        assert any(n.endswith(suffix) for n in names), names
        # first restart with the cleaner off: what is on disk now is the
        # loader's repair alone (a running clean would write new .cleaned files)
        b.overrides["log.cleaner.enable"] = "false"
        b.start()
        assert latest(read_all(b.bootstrap, topic)) == expected
        assert not [n for n in os.listdir(part) if n.endswith((".cleaned", ".swap"))]
        assert b.stop() == 0
        del b.overrides["log.cleaner.enable"]
        b.start()
        got = wait_until_compacted(b.bootstrap, topic, expected, max_records=400)
        assert latest(got) == expected
    finally:
        if b.proc is not None:
            b.stop(signal.SIGKILL)


def test_consumer_offsets_topic_is_compacted_and_reloads(tmp_path: Path) -> None:
    from confluent_kafka import Consumer, TopicPartition

    b = Broker(tmp_path / "data")
    b.overrides.update({"offsets.topic.num.partitions": 1, "offsets.topic.segment.bytes": 1 << 20})
    b.start()
    try:
        topic = create_topic(b.bootstrap)
        assert produce(b.bootstrap, topic, [(b"k", b"v")]) == [None]
        conf = {"bootstrap.servers": b.bootstrap, "group.id": "g", "enable.auto.commit": False}
        c = Consumer(conf)
        meta = "m" * 4000  # ~4 KB per commit: 1 MiB segments roll after ~250
        for i in range(700):
            c.commit(offsets=[TopicPartition(topic, 0, i, meta)], asynchronous=False)
        c.close()
        part = tmp_path / "data" / "__consumer_offsets-0"
        deadline = time.monotonic() + 30
        while sum(f.stat().st_size for f in part.glob("*.log")) > 1.5 * (1 << 20):
            assert time.monotonic() < deadline, "__consumer_offsets was not compacted"
            time.sleep(0.2)
        b.stop()
        b.start()
        c = Consumer(conf)
        got = c.committed([TopicPartition(topic, 0)], timeout=20)
        c.close()
        assert got[0].offset == 699 and got[0].metadata == meta
    finally:
        if b.proc is not None:
            b.stop(signal.SIGKILL)
