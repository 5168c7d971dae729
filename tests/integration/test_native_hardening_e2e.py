"""No batch a consumer cannot read, no request that can sink the broker: a
real broker process against stock clients and raw Produce requests.

* An idempotent, compressing producer whose last batch is superseded on a
  compacted topic: the cleaner keeps its empty header, uncompressed, and a
  consumer from the beginning reads every latest value and closes.
* A compressed batch with a right CRC and a junk payload: CORRUPT_MESSAGE in
  every codec, nothing stored.
* Decompression bombs (snappy claiming 4 GiB, a zstd frame of RLE zeros, a
  gzip of zeros, a gzip of one well-framed record of 1000 MiB): an error
  code, the broker's peak RSS stays small, and it keeps serving.
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import threading
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_compaction_e2e import PRODUCER, Broker, create_topic, latest

from pylog import _native
from pylog.errors import KafkaStorageError

confluent_kafka = pytest.importorskip("confluent_kafka")

CODECS = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, INVALID_RECORD = 2, 10, 87


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    b = Broker(tmp_path_factory.mktemp("hardening") / "data").start()
    try:
        yield b
    finally:
        if b.proc is not None:
            b.stop()


def read_guarded(bootstrap: str, topic: str, timeout: float = 30) -> list[tuple[int, bytes, Any]]:
    """Every record up to the high watermark, in a thread so that a consumer
    stuck on an unreadable batch (or in close()) fails the test instead of
    hanging it."""
    result: list[Any] = []

    def run() -> None:
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
                if time.monotonic() > deadline:
                    result.append(AssertionError(f"read up to {last} of {high}"))
                    return
                m = c.poll(0.2)
                if m is None:
                    continue
                if m.error() is not None:
                    result.append(AssertionError(str(m.error())))
                    return
                last = m.offset()
                out.append((m.offset(), m.key(), m.value()))
            result.append(out)
        finally:
            c.close()
            result.append("closed")

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout + 30)
    assert result and result[-1] == "closed", f"consumer stuck (close() hangs): {result}"
    if isinstance(result[0], Exception):
        raise result[0]
    out: list[tuple[int, bytes, Any]] = result[0]
    return out


@pytest.mark.parametrize("codec", list(CODECS))
def test_superseded_last_batch_of_a_compressing_idempotent_producer_stays_readable(
    broker: Broker, codec: str
) -> None:
    from confluent_kafka import Producer

    topic = create_topic(broker.bootstrap)
    conf = {**PRODUCER, "compression.type": codec}
    idem = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, **conf})
    for k in range(20):
        idem.produce(topic, key=b"key-%d" % k, value=b"idempotent-" + b"x" * 50)
    assert idem.flush(30) == 0
    # another producer supersedes every key, and rolls enough segments for the
    # idempotent producer's batches to be cleaned
    other = Producer({"bootstrap.servers": broker.bootstrap, **conf})
    expected: dict[bytes, bytes] = {}
    for r in range(40):
        for k in range(20):
            v = b"later-%d-%d-" % (r, k) + bytes(range(256)) * 2
            other.produce(topic, key=b"key-%d" % k, value=v)
            expected[b"key-%d" % k] = v
        other.poll(0)
    assert other.flush(30) == 0
    part = broker.data / f"{topic}-0"
    deadline = time.monotonic() + 60
    while True:
        got = read_guarded(broker.bootstrap, topic)
        assert latest(got) == expected
        checkpoint = broker.data / "cleaner-offset-checkpoint"
        # written by the first clean (replaced atomically after that)
        cleaned = checkpoint.read_text() if checkpoint.exists() else ""
        if topic in cleaned and len(got) < 400:
            break
        assert time.monotonic() < deadline, f"not cleaned: {len(got)} records"
        time.sleep(0.5)
    # the producer's superseded last batch survives as an empty, uncompressed header
    empty = [b for b in _batch_infos(part) if b.records_count == 0]
    assert empty, "no empty producer header kept"
    assert all(b.compression == 0 and b.producer_id >= 0 for b in empty), empty
    # the cleaner keeps cleaning its own output (it used to fail on it and
    # mark the partition uncleanable)
    # incompressible values, so that segments roll and get cleaned again
    for _ in range(4):
        for k in range(20):
            v = os.urandom(400)
            other.produce(topic, key=b"key-%d" % k, value=v)
            expected[b"key-%d" % k] = v
        assert other.flush(30) == 0

    def log_bytes() -> int:
        """The partition's .log bytes; a segment the cleaner swaps out between
        the listing and the stat counts as gone."""
        total = 0
        for f in part.glob("*.log"):
            with contextlib.suppress(FileNotFoundError):
                total += f.stat().st_size
        return total

    size_before = log_bytes()
    deadline = time.monotonic() + 60
    while True:
        got = read_guarded(broker.bootstrap, topic)
        assert latest(got) == expected
        size = log_bytes()
        if size < size_before:
            break
        assert time.monotonic() < deadline, "the cleaner stopped cleaning this partition"
        time.sleep(0.5)
    # the idempotent producer carries on over its empty header
    idem.produce(topic, key=b"key-0", value=b"again")
    assert idem.flush(30) == 0
    assert latest(read_guarded(broker.bootstrap, topic))[b"key-0"] == b"again"


def _batch_infos(part: Path) -> list[Any]:
    """Every batch header in the partition's segments. The cleaner may swap a
    segment out between the listing and the read: list again then."""
    for _ in range(50):
        try:
            return [
                b
                for f in sorted(part.glob("*.log"))
                for b in _native.read_batch_infos(str(f), 0, 100_000)[0]
            ]
        except KafkaStorageError as e:
            if "No such file" not in str(e):
                raise
            time.sleep(0.1)
    raise AssertionError(f"segments of {part} kept vanishing under the reader")


# ------------------------------------------------------------- raw Produce


def _produce_v7(port: int, topic: str, records: bytes, timeout: float = 60) -> int:
    """Send one Produce v7 (acks=1; v3's layout, and the first version that
    may carry zstd) of ``records`` to partition 0 and return the partition's
    error code."""
    name = topic.encode()
    body = struct.pack(">hhi", -1, 1, 30000)  # transactional id null, acks, timeout
    body += struct.pack(">ih", 1, len(name)) + name
    body += struct.pack(">ii", 1, 0) + struct.pack(">i", len(records)) + records
    client = b"bomber"
    header = struct.pack(">hhih", 0, 7, 7, len(client)) + client
    frame = header + body
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(struct.pack(">i", len(frame)) + frame)
        buf = b""
        while len(buf) < 4 or len(buf) < 4 + struct.unpack(">i", buf[:4])[0]:
            chunk = s.recv(65536)
            assert chunk, "the broker closed the connection"
            buf += chunk
    resp = buf[4:]
    (corr,) = struct.unpack(">i", resp[:4])
    assert corr == 7
    at = 4 + 4  # topics array count
    (nlen,) = struct.unpack(">h", resp[at : at + 2])
    at += 2 + nlen + 4  # name, partitions count
    _, error = struct.unpack(">ih", resp[at : at + 6])
    return int(error)


def _with_section(codec: int, section: bytes, count: int = 1) -> bytes:
    """A v2 batch of ``count`` records whose records section is ``section``
    as it stands (compressed with ``codec`` or not), with a right CRC32C."""
    b = bytearray(_native.build_batch([(b"k", b"v", [], 1_700_000_000_000)]))
    del b[61:]
    b += section
    struct.pack_into(">i", b, 8, len(b) - 12)
    struct.pack_into(">h", b, 21, codec)
    struct.pack_into(">i", b, 23, count - 1)
    struct.pack_into(">i", b, 57, count)
    struct.pack_into(">I", b, 17, _native.crc32c(bytes(b[21:])))
    return bytes(b)


def _varint(n: int) -> bytes:
    out = b""
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out += bytes([byte | 0x80])
        else:
            return out + bytes([byte])


def snappy_bomb() -> bytes:
    """xerial framing, one raw snappy block whose preamble claims 4 GiB - 1."""
    block = _varint(0xFFFF_FFFF) + b"\x00" * 8
    return b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + struct.pack(">i", len(block)) + block


def zstd_bomb(blocks: int = 8000) -> bytes:
    """A zstd frame of RLE blocks of 128 KiB zeros: 32 KB that claim ~1 GB."""
    frame = struct.pack("<I", 0xFD2FB528) + bytes([0x00, 0x38])  # no FCS, 2 MiB window
    size = 128 * 1024
    for i in range(blocks):
        last = 1 if i == blocks - 1 else 0
        header = last | (1 << 1) | (size << 3)  # RLE block
        frame += header.to_bytes(3, "little") + b"\x00"
    return frame


def gzip_bomb(mb: int = 1000) -> bytes:
    """A gzip of ``mb`` MiB of zeros (about 1 MB)."""
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = bytes(1 << 20)
    out = [c.compress(zeros) for _ in range(mb)]
    out.append(c.flush())
    return b"".join(out)


def framed_gzip_bomb(mb: int = 1000) -> bytes:
    """A gzip of one well-framed record whose value is ``mb`` MiB of zeros:
    it passes every framing check until the decompression limit."""
    value = mb << 20
    zz = lambda v: _varint((v << 1) ^ (v >> 63))  # noqa: E731 (zigzag varint)
    body = b"\x00" + zz(0) + zz(0) + zz(1) + b"k" + zz(value)
    length = len(body) + value + 1  # + the header count after the value
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    out = [c.compress(zz(length) + body)]
    zeros = bytes(1 << 20)
    out += [c.compress(zeros) for _ in range(mb)]
    out += [c.compress(zz(0)), c.flush()]
    return b"".join(out)


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def _ok(port: int, topic: str) -> None:
    good = _native.build_batch([(b"k", b"fine", [], int(time.time() * 1000))], compression=3)
    assert _produce_v7(port, topic, good) == 0


@pytest.mark.parametrize("compact", [False, True])
def test_compressed_junk_with_a_right_crc_is_corrupt_in_every_codec(
    broker: Broker, compact: bool
) -> None:
    topic = create_topic(broker.bootstrap, **({} if compact else {"cleanup.policy": "delete"}))
    _ok(broker.port, topic)
    junk = bytes((i * 37 + 11) % 251 for i in range(300))
    for name, codec in CODECS.items():
        # junk, and a valid stream of junk records
        for section in [junk, _native.compress(codec, junk)]:
            code = _produce_v7(broker.port, topic, _with_section(codec, section, count=3))
            assert code == CORRUPT_MESSAGE, (name, code)
    # a valid compressed stream of valid records, count mismatched with the header
    records = _native.build_batch([(b"k%d" % i, b"v", [], 1_700_000_000_000) for i in range(3)])[
        61:
    ]
    for name, codec in CODECS.items():
        batch = _with_section(codec, _native.compress(codec, records), count=4)
        assert _produce_v7(broker.port, topic, batch) == CORRUPT_MESSAGE, name
        batch = _with_section(codec, _native.compress(codec, records), count=3)
        assert _produce_v7(broker.port, topic, batch) == 0, name
    _ok(broker.port, topic)
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g"})
    try:
        _, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    finally:
        c.close()
    assert high == 2 + 3 * len(CODECS)  # nothing of the junk stored


BOMBS = {
    "snappy": (2, snappy_bomb),
    "zstd": (4, zstd_bomb),
    "gzip": (1, gzip_bomb),
    "gzip-framed": (1, framed_gzip_bomb),
}


@pytest.mark.parametrize("compact", [False, True])
@pytest.mark.parametrize("bomb", list(BOMBS))
def test_decompression_bomb_is_refused_and_the_broker_stays_small(
    tmp_path: Path, bomb: str, compact: bool
) -> None:
    b = Broker(tmp_path / "data").start()  # its own process: VmHWM is this bomb's
    try:
        assert b.proc is not None
        policy = "compact" if compact else "delete"
        topic = create_topic(
            b.bootstrap, **{"cleanup.policy": policy, "internal.segment.bytes": str(8 << 20)}
        )
        _ok(b.port, topic)
        codec, make = BOMBS[bomb]
        section = make()
        started = time.monotonic()
        code = _produce_v7(b.port, topic, _with_section(codec, section))
        took = time.monotonic() - started
        rss = _peak_rss_mb(b.proc.pid)
        print(f"\n{bomb} bomb ({len(section)} bytes, compact={compact}): error {code}, "
              f"{took:.2f} s, peak RSS {rss:.0f} MB")  # fmt: skip
        assert code in (CORRUPT_MESSAGE, MESSAGE_TOO_LARGE), code
        assert rss < 512, f"peak RSS {rss:.0f} MB"
        _ok(b.port, topic)  # and it keeps serving
    finally:
        if b.proc is not None:
            b.stop()
