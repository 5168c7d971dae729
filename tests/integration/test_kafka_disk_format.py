"""Kafka's on-disk format, both ways: Apache Kafka 4.x (KRaft, from the jars
`make kafka` fetches) writes a topic's partition directories, pylog adopts
them and serves the same record batches byte for byte — and Kafka loads the
segment files pylog wrote and serves pylog's batches unchanged.

Adopting: pylog serves a partition its metadata knows, so the topic is created
in pylog first (same name, same partition count); with pylog stopped, each of
its (empty) partition directories gets Kafka's segment, index, time-index,
producer-snapshot and leader-epoch files. pylog's ``partition.metadata`` stays,
since it names the topic id pylog's metadata gave the topic. The other way is
the same with the roles swapped.
"""

from __future__ import annotations

import re
import shutil
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from broker_process import BrokerProcess
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_tools import dump_log_findings, restart_kafka, run_tool, start_kafka

from pylog.spark._wire import BrokerClient

PARTITIONS = 3
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
# Files of a partition directory that carry data; partition.metadata is the
# owner's (its topic id is the one the owner's metadata holds).
DATA_SUFFIXES = (".log", ".index", ".timeindex", ".snapshot")


def _create(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        fut.result(timeout=60)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        md = admin.list_topics(timeout=10).topics.get(topic)
        ready = md is not None and len(md.partitions) == PARTITIONS
        if ready and all(p.leader >= 0 for p in md.partitions.values()):
            return
        time.sleep(0.1)
    raise AssertionError(f"{topic} has no leaders on {bootstrap}")


def _produce(bootstrap: str, topic: str) -> int:
    """Records in every codec, with keys and headers, some from an idempotent
    producer; returns how many."""
    n = 0
    for i, codec in enumerate(CODECS):
        p = Producer(
            {
                "bootstrap.servers": bootstrap,
                "compression.type": codec,
                "enable.idempotence": i % 2 == 0,
                "linger.ms": 5,
                "batch.num.messages": 40,
            }
        )
        for j in range(120):
            p.produce(
                topic,
                key=None if j % 7 == 0 else b"key-%d" % j,
                value=(b"%s value %d " % (codec.encode(), j)) * (1 + j % 5),
                headers=[("codec", codec.encode()), ("j", str(j).encode())] if j % 3 else None,
                partition=j % PARTITIONS,
                timestamp=1_700_000_000_000 + n,
            )
            n += 1
        assert p.flush(30) == 0
    return n


def _raw_batches(bootstrap: str, topic: str) -> dict[int, bytes]:
    """Every partition's record batches as Fetch returns them, from offset 0
    to the high watermark, concatenated."""
    out: dict[int, bytes] = {}
    with BrokerClient(bootstrap) as client:
        for p in range(PARTITIONS):
            data = bytearray()
            offset, hw = 0, None
            while hw is None or offset < hw:
                fetched = client.fetch(topic, p, offset, 1 << 20)
                records, hw = fetched.records, fetched.high_watermark
                if not records:
                    break
                chunk = bytes(records)
                # Whole batches only: a fetch may end with a partial one.
                pos, last = 0, offset
                while pos + 12 <= len(chunk):
                    size = int.from_bytes(chunk[pos + 8 : pos + 12], "big")
                    if pos + 12 + size > len(chunk):
                        break
                    base = int.from_bytes(chunk[pos : pos + 8], "big")
                    delta = int.from_bytes(chunk[pos + 23 : pos + 27], "big")
                    last = base + delta + 1
                    pos += 12 + size
                data += chunk[:pos]
                offset = last
            out[p] = bytes(data)
    return out


def _consume(bootstrap: str, topic: str, count: int) -> list[tuple[Any, ...]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "disk-format"})
    got: list[tuple[Any, ...]] = []
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        deadline = time.monotonic() + 60
        while len(got) < count and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            assert m.error() is None, m.error()
            got.append((m.partition(), m.offset(), m.key(), m.value(), m.headers(), m.timestamp()))
    finally:
        c.close()
    return sorted(got, key=lambda r: (r[0], r[1]))


def _copy_data(src: Path, dst: Path) -> None:
    """Replace ``dst``'s data files with ``src``'s, keeping ``dst``'s partition.metadata."""
    for f in dst.iterdir():
        if f.name.endswith(DATA_SUFFIXES) or f.name == "leader-epoch-checkpoint":
            f.unlink()
    for f in src.iterdir():
        if f.name.endswith(DATA_SUFFIXES) or f.name == "leader-epoch-checkpoint":
            shutil.copy2(f, dst / f.name)


def _segments(d: Path) -> bytes:
    return b"".join(f.read_bytes() for f in sorted(d.glob("*.log")))


@pytest.fixture
def workdir(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path


def test_pylog_serves_a_kafka_written_log_byte_for_byte(workdir: Path) -> None:
    topic = "written-by-kafka"
    kafka: Any = start_kafka(workdir)
    try:
        _create(kafka.bootstrap, topic)
        n = _produce(kafka.bootstrap, topic)
        from_kafka = _raw_batches(kafka.bootstrap, topic)
        records = _consume(kafka.bootstrap, topic, n)
    finally:
        kafka.stop()
    assert len(records) == n
    assert all(from_kafka.values())
    kafka_dirs = {p: workdir / "kafka" / "logs" / f"{topic}-{p}" for p in range(PARTITIONS)}
    for p, d in kafka_dirs.items():
        assert _segments(d) == from_kafka[p]  # Fetch served the segment bytes as they are
        assert list(d.glob("*.snapshot")), f"{d}: Kafka wrote no producer snapshot"

    pylog = BrokerProcess(workdir / "pylog")
    pylog.start()
    try:
        _create(pylog.bootstrap, topic)
    finally:
        assert pylog.stop() == 0
    for p, d in kafka_dirs.items():
        _copy_data(d, workdir / "pylog" / f"{topic}-{p}")

    pylog.start()
    try:
        from_pylog = _raw_batches(pylog.bootstrap, topic)
        again = _consume(pylog.bootstrap, topic, n)
        # The idempotent producer's state came with the snapshot: a new batch
        # from a fresh producer appends after Kafka's offsets.
        p = Producer({"bootstrap.servers": pylog.bootstrap, "enable.idempotence": True})
        delivered: list[int] = []
        p.produce(
            topic,
            value=b"after",
            partition=0,
            on_delivery=lambda e, m: delivered.append(m.offset()),
        )
        assert p.flush(30) == 0
    finally:
        assert pylog.stop(signal.SIGTERM) == 0
    assert {p: len(b) for p, b in from_pylog.items()} == {p: len(b) for p, b in from_kafka.items()}
    assert from_pylog == from_kafka
    assert again == records
    assert delivered == [1 + max(r[1] for r in records if r[0] == 0)]
    for p in range(PARTITIONS):
        # pylog's files still begin with Kafka's bytes (nothing rewritten on load).
        assert _segments(workdir / "pylog" / f"{topic}-{p}").startswith(from_kafka[p])
    # Kafka's batches and pylog's appended one, its indexes and the producer
    # snapshot pylog wrote at shutdown, all as Kafka's dump tool reads them.
    d0 = workdir / "pylog" / f"{topic}-0"
    files = sorted(f for f in d0.iterdir() if f.name.endswith(DATA_SUFFIXES))
    out = run_tool(
        "kafka-dump-log", "--files", ",".join(map(str, files)), "--deep-iteration",
        workdir=workdir,
    )  # fmt: skip
    assert dump_log_findings(out.stdout + out.stderr) == []
    offsets = [int(o) for o in re.findall(r"^\| offset: (\d+) ", out.stdout, re.M)]
    assert offsets == list(range(delivered[0] + 1))


def test_kafka_serves_a_pylog_written_log_byte_for_byte(workdir: Path) -> None:
    topic = "written-by-pylog"
    pylog = BrokerProcess(workdir / "pylog")
    pylog.start()
    try:
        _create(pylog.bootstrap, topic)
        n = _produce(pylog.bootstrap, topic)
        from_pylog = _raw_batches(pylog.bootstrap, topic)
        records = _consume(pylog.bootstrap, topic, n)
    finally:
        assert pylog.stop() == 0
    assert len(records) == n
    assert all(from_pylog.values())
    pylog_dirs = {p: workdir / "pylog" / f"{topic}-{p}" for p in range(PARTITIONS)}
    for p, d in pylog_dirs.items():
        assert _segments(d) == from_pylog[p]
        assert list(d.glob("*.snapshot")), f"{d}: pylog wrote no producer snapshot"

    kafka: Any = start_kafka(workdir)
    try:
        _create(kafka.bootstrap, topic)
    finally:
        kafka.stop()
    for p, d in pylog_dirs.items():
        _copy_data(d, workdir / "kafka" / "logs" / f"{topic}-{p}")

    restart_kafka(kafka)
    try:
        from_kafka = _raw_batches(kafka.bootstrap, topic)
        again = _consume(kafka.bootstrap, topic, n)
        p = Producer({"bootstrap.servers": kafka.bootstrap, "enable.idempotence": True})
        delivered: list[int] = []
        p.produce(
            topic,
            value=b"after",
            partition=0,
            on_delivery=lambda e, m: delivered.append(m.offset()),
        )
        assert p.flush(30) == 0
    finally:
        kafka.stop()
    # Kafka took pylog's indexes and snapshots as they are: nothing found
    # corrupt, nothing rebuilt or recovered.
    said = (kafka.dir / "kafka.stderr").read_text().lower()
    for word in ("error", "corrupt", "rebuild", "recover"):
        assert word not in said, said[-3000:]
    assert from_kafka == from_pylog
    assert again == records
    assert delivered == [1 + max(r[1] for r in records if r[0] == 0)]
