"""Stock Kafka clients against a real broker process (`pylog broker start`).

confluent-kafka (librdkafka), kafka-python, aiokafka and kcat, unchanged:
every compression codec; keys, values, headers and nulls; acks 0, 1 and all;
a clean restart with the data intact; kill -9 with every acknowledged record
present after the restart; garbage, truncated and oversized frames and an
unknown API version while another client keeps working.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import struct
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from broker_process import BrokerProcess, ck_consume, ck_produce, topic_name

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("broker") / "data").start()
    try:
        yield b
    finally:
        if b.proc is not None:
            b.stop(signal.SIGKILL)


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_codecs_keys_values_headers_nulls(kafka: BrokerProcess, codec: str) -> None:
    topic = topic_name(f"ck-{codec}")
    records = [
        (b"key-%d" % i, b"value-%d " % i * 20, [("h1", b"v%d" % i), ("h2", None)])
        for i in range(200)
    ]
    records += [(None, b"no key", None), (b"tombstone", None, None), (None, b"", None)]
    ck_produce(kafka.bootstrap, topic, records, **{"compression.type": codec})
    got = ck_consume(kafka.bootstrap, topic, len(records))
    assert [g[3] for g in got] == list(range(len(records)))
    for (key, value, headers), (gk, gv, gh, _) in zip(records, got, strict=True):
        assert (gk, gv) == (key, value)
        assert (gh or None) == (headers or None)


@pytest.mark.parametrize(("producer_codec", "topic_codec"), [("lz4", "zstd"), ("zstd", "lz4")])
def test_topic_compression_type_recompresses_client_batches(
    kafka: BrokerProcess, producer_codec: str, topic_codec: str
) -> None:
    """A topic's compression.type other than the producer's: the broker stores
    the batches with the topic's codec, producer id and sequences kept, and a
    consumer reads back every key, value and header byte for byte."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from pylog import _native

    topic = topic_name(f"recompress-{producer_codec}-{topic_codec}")
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    new = NewTopic(topic, 1, 1, config={"compression.type": topic_codec})
    admin.create_topics([new])[topic].result(20)
    records = [
        (b"key-%d" % i, os.urandom(i % 7) + b"value-%d " % i * (i % 50),
         [("h1", b"v%d" % i), ("h2", None), ("h1", b"again")])
        for i in range(400)
    ]  # fmt: skip
    records += [(None, b"no key", None), (b"tombstone", None, None), (None, b"", [("e", b"")])]
    ck_produce(kafka.bootstrap, topic, records, **{"compression.type": producer_codec,
               "enable.idempotence": True, "linger.ms": 20})  # fmt: skip
    got = ck_consume(kafka.bootstrap, topic, len(records))
    assert [g[3] for g in got] == list(range(len(records)))
    for (key, value, headers), (gk, gv, gh, _) in zip(records, got, strict=True):
        assert (gk, gv) == (key, value)
        assert (gh or None) == (headers or None)
    log = Path(kafka.data) / f"{topic}-0" / "00000000000000000000.log"
    info = _native.analyze_records(log.read_bytes(), max_batch_size=1 << 30, deep=True)
    codec = {"lz4": _native.COMPRESSION_LZ4, "zstd": _native.COMPRESSION_ZSTD}[topic_codec]
    assert info.num_records == len(records)
    assert {b.compression for b in info.batches} == {codec}
    assert all(b.producer_id >= 0 for b in info.batches)
    # each batch's sequences follow the last: the producer's, kept
    for prev, b in zip(info.batches, info.batches[1:], strict=False):
        assert b.base_sequence == prev.last_sequence + 1


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_confluent_acks(kafka: BrokerProcess, acks: str) -> None:
    topic = topic_name(f"acks{acks}")
    ck_produce(kafka.bootstrap, topic, [(None, b"x", None)])  # creates the topic
    ck_produce(kafka.bootstrap, topic, [(None, b"%d" % i, None) for i in range(100)],
               acks=acks)  # fmt: skip
    got = ck_consume(kafka.bootstrap, topic, 101)
    assert [g[1] for g in got] == [b"x"] + [b"%d" % i for i in range(100)]


# ---------------------------------------------------------------- kafka-python


@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4", "zstd"])
def test_kafka_python(kafka: BrokerProcess, codec: str | None) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = topic_name(f"kp-{codec}")
    p = KafkaProducer(bootstrap_servers=kafka.bootstrap, compression_type=codec, acks="all")
    futures = [
        p.send(topic, key=b"k%d" % i, value=b"v%d" % i, headers=[("h", b"%d" % i)])
        for i in range(50)
    ]
    futures.append(p.send(topic, key=b"gone", value=None))
    offsets = [f.get(timeout=20).offset for f in futures]
    p.close()
    assert offsets == list(range(51))
    c = KafkaConsumer(bootstrap_servers=kafka.bootstrap, enable_auto_commit=False)
    tp = TopicPartition(topic, 0)
    c.assign([tp])
    c.seek_to_beginning(tp)
    got: list = []
    deadline = time.monotonic() + 20
    while len(got) < 51 and time.monotonic() < deadline:
        for m in c.poll(timeout_ms=500).get(tp, []):
            got.append((m.key, m.value, m.headers))
    c.close()
    assert got[:50] == [(b"k%d" % i, b"v%d" % i, [("h", b"%d" % i)]) for i in range(50)]
    assert got[50][:2] == (b"gone", None)


# ---------------------------------------------------------------- aiokafka


def test_aiokafka(kafka: BrokerProcess) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    topic = topic_name("aio")

    async def main() -> list:
        p = AIOKafkaProducer(bootstrap_servers=kafka.bootstrap, compression_type="gzip")
        await p.start()
        try:
            for i in range(30):
                await p.send_and_wait(topic, value=b"v%d" % i, key=b"k%d" % i,
                                      headers=[("a", b"b")])  # fmt: skip
        finally:
            await p.stop()
        c = AIOKafkaConsumer(bootstrap_servers=kafka.bootstrap, enable_auto_commit=False,
                             auto_offset_reset="earliest")  # fmt: skip
        await c.start()
        try:
            tp = TopicPartition(topic, 0)
            c.assign([tp])
            await c.seek_to_beginning(tp)
            out = []
            while len(out) < 30:
                batch = await c.getmany(tp, timeout_ms=5000)
                out += [(m.key, m.value, list(m.headers)) for m in batch.get(tp, [])]
            return out
        finally:
            await c.stop()

    got = asyncio.run(asyncio.wait_for(main(), 60))
    assert got == [(b"k%d" % i, b"v%d" % i, [("a", b"b")]) for i in range(30)]


# ---------------------------------------------------------------- kcat


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed (make tools)")
def test_kcat(kafka: BrokerProcess) -> None:
    topic = topic_name("kcat")
    lines = "".join(f"k{i}:value {i}\n" for i in range(20))
    subprocess.run(
        ["kcat", "-b", kafka.bootstrap, "-P", "-t", topic, "-K:", "-z", "lz4"],
        input=lines, text=True, check=True, timeout=30,
    )  # fmt: skip
    out = subprocess.run(
        ["kcat", "-b", kafka.bootstrap, "-C", "-t", topic, "-o", "beginning", "-e",
         "-f", "%k=%s@%o\n"],
        capture_output=True, text=True, check=True, timeout=30,
    )  # fmt: skip
    assert out.stdout.splitlines() == [f"k{i}=value {i}@{i}" for i in range(20)]
    meta = subprocess.run(["kcat", "-b", kafka.bootstrap, "-L", "-t", topic],
                          capture_output=True, text=True, check=True, timeout=30)  # fmt: skip
    assert f'topic "{topic}" with 1 partitions' in meta.stdout


# ---------------------------------------------------------------- bad clients


def _raw(port: int, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(data)
        chunks = []
        try:
            while chunk := s.recv(65536):
                chunks.append(chunk)
        except (ConnectionResetError, TimeoutError):
            pass
        return b"".join(chunks)


def test_garbage_truncated_oversized_and_unknown_versions(kafka: BrokerProcess) -> None:
    topic = topic_name("survivor")
    ck_produce(kafka.bootstrap, topic, [(None, b"before", None)])
    assert _raw(kafka.port, os.urandom(64) + b"\xff" * 8) == b""  # garbage
    assert _raw(kafka.port, struct.pack(">i", 50_000_000)) == b""  # over 10 MB limit
    assert _raw(kafka.port, struct.pack(">i", -7)) == b""
    with socket.create_connection(("127.0.0.1", kafka.port)) as s:  # truncated, then gone
        s.sendall(struct.pack(">i", 100) + b"\x00\x12\x00")
    # An unknown api key: the connection is closed.
    header = struct.pack(">hhih", 999, 0, 1, -1)
    assert _raw(kafka.port, struct.pack(">i", len(header)) + header) == b""
    # ApiVersions at a version above the broker's: a v0 answer listing what it supports.
    header = struct.pack(">hhihb", 18, 99, 42, -1, 0)  # header v2: empty tagged fields
    reply = _raw_one(kafka.port, struct.pack(">i", len(header)) + header)
    corr, error = struct.unpack(">ih", reply[:6])
    assert (corr, error) == (42, 35)  # UNSUPPORTED_VERSION
    # Produce at an unsupported version: closed.
    header = struct.pack(">hhih", 0, 99, 43, -1)
    assert _raw(kafka.port, struct.pack(">i", len(header)) + header + b"\x00" * 20) == b""
    # Meanwhile a well-behaved client carries on.
    ck_produce(kafka.bootstrap, topic, [(None, b"after", None)])
    assert [g[1] for g in ck_consume(kafka.bootstrap, topic, 2)] == [b"before", b"after"]


def _raw_one(port: int, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(data)
        buf = b""
        while len(buf) < 4 or len(buf) < 4 + struct.unpack(">i", buf[:4])[0]:
            chunk = s.recv(65536)
            if not chunk:
                raise AssertionError(f"connection closed after {len(buf)} bytes")
            buf += chunk
        return buf[4:]


# ---------------------------------------------------------------- restarts


def test_restart_and_kill_9_keep_acknowledged_records(tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path / "data").start()
    topic = topic_name("durable")
    try:
        ck_produce(b.bootstrap, topic, [(b"k%d" % i, b"v%d" % i, None) for i in range(500)],
                   acks="all", **{"compression.type": "lz4"})  # fmt: skip
        assert b.stop(signal.SIGTERM) == 0
        assert (tmp_path / "data" / ".kafka_cleanshutdown").exists()
        b.start()
        got = ck_consume(b.bootstrap, topic, 500)
        assert [g[1] for g in got] == [b"v%d" % i for i in range(500)]
        # Acknowledged with acks=1, then the process is killed: nothing acknowledged is lost.
        ck_produce(b.bootstrap, topic, [(None, b"w%d" % i, None) for i in range(500)], acks="1")
        b.stop(signal.SIGKILL)
        assert not (tmp_path / "data" / ".kafka_cleanshutdown").exists()
        b.start()
        got = ck_consume(b.bootstrap, topic, 1000)
        assert len(got) == 1000
        assert [g[1] for g in got[500:]] == [b"w%d" % i for i in range(500)]
    finally:
        if b.proc is not None:
            b.stop(signal.SIGKILL)
