"""End-to-end broker figures for `make bench` (issue 3): a real `pylog broker
start` subprocess on a free loopback port and a temp log dir, driven by
librdkafka (confluent-kafka) in this process, each figure beside a baseline
measured in the same run on this machine.

    .venv/bin/python bench/broker_bench.py [--seconds 8] [--only produce,consume,...]
                                          [--override KEY=VALUE ...] [--dir DIR]

1. produce, acks=1, 1 KiB records, a throughput-tuned producer, against the same
   bytes streamed over a raw loopback TCP socket into a file (recv + write);
2. produce, 100-byte records, records/s, against the rate at which this client
   alone can enqueue them (a producer with no reachable broker);
3. consume the data of 1 (assign from the beginning, no group) against raw
   sendfile of the same segment files over loopback; and the same data read
   with back-to-back Fetch requests on pylog's own codec (records not decoded,
   read through one reused buffer as the sendfile baseline's reader does),
   which shows what the broker serves when the client is not the bound;
4. latency p50/p99 at a fixed 10,000 records/s, acks=1 and acks=all, measured
   as delivery-report time minus send time (the report is taken from a
   poll() that waits on the producer, so it includes the client's queueing).

Every load is bounded in time (``--seconds`` each). The codec and timing-wheel
figures are printed by the pytest benches of `make bench`
(bench/test_protocol_bench.py, bench/test_timing_wheel_bench.py) and are only
referenced here. Nothing here fails on timing.
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic
from storage_bench import Figure, print_table

KiB = 1 << 10
MiB = 1 << 20


# ---------------------------------------------------------------- the broker


class Broker:
    """`pylog broker start` as a subprocess on an ephemeral loopback port."""

    def __init__(
        self, workdir: str, overrides: list[str], command: list[str] | None = None
    ) -> None:
        self.log_dir = os.path.join(workdir, "broker-logs")
        # The SO_SNDBUF the broker gives client sockets (socket.send.buffer.bytes).
        self.send_buffer_bytes = 100 * KiB
        for o in overrides:
            if o.startswith("socket.send.buffer.bytes="):
                self.send_buffer_bytes = int(o.split("=", 1)[1])
        pylog = command or [str(Path(sys.executable).with_name("pylog"))]
        cmd = [*pylog, "broker", "start", "--log-level", "WARNING"]
        props = [
            "listeners=PLAINTEXT://127.0.0.1:0",
            f"log.dirs={self.log_dir}",
            "num.partitions=1",
            *overrides,
        ]
        for p in props:
            cmd += ["--override", p]
        self.stderr = open(os.path.join(workdir, "broker.stderr"), "w+b")  # noqa: SIM115
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.stderr)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().decode()
        if "started:" not in line:
            self.proc.kill()
            self.stderr.seek(0)
            raise RuntimeError(f"broker did not start: {line!r} {self.stderr.read()[-2000:]!r}")
        self.port = int(line.split("started:")[1].split()[0].rsplit(":", 1)[1])
        self.bootstrap = f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def cpu_seconds(self) -> float:
        """User + system CPU time of the broker process so far (Linux /proc)."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def create_topic(self, name: str) -> None:
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        for fut in admin.create_topics([NewTopic(name, 1, 1)]).values():
            fut.result(timeout=15)

    def segment_files(self, topic: str) -> list[str]:
        d = os.path.join(self.log_dir, f"{topic}-0")
        return sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".log"))

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.stderr.close()


# ---------------------------------------------------------------- producing


THROUGHPUT_PRODUCER = {
    "acks": "1",
    "linger.ms": 5,
    "batch.size": MiB,
    "batch.num.messages": 1_000_000,
    "message.max.bytes": 2 * MiB,
    "compression.type": "none",
    "queue.buffering.max.messages": 2_000_000,
    "queue.buffering.max.kbytes": 1024 * 1024,
    "max.in.flight.requests.per.connection": 5,
    "enable.idempotence": False,
    "delivery.report.only.error": True,
}


def produce_for(
    bootstrap: str, topic: str, value_size: int, seconds: float, backlog_bytes: int = 64 * MiB
) -> tuple[int, float]:
    """Produce ``value_size``-byte records for ``seconds`` (then flush), keeping
    at most ``backlog_bytes`` queued in the client. Returns (records, elapsed)."""
    errors: list[KafkaError] = []

    def on_error(err: KafkaError | None, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    p = Producer({"bootstrap.servers": bootstrap, **THROUGHPUT_PRODUCER, "on_delivery": on_error})
    chunk = max(1, 256 * KiB // value_size)
    messages = [{"value": os.urandom(value_size)} for _ in range(64)] * (chunk // 64 or 1)
    chunk = len(messages)
    max_queued = max(chunk, backlog_bytes // value_size)
    p.produce_batch(topic, messages[:1], partition=0)  # connect + metadata outside the clock
    p.flush(15)
    sent = 0
    start = time.perf_counter()
    deadline = start + seconds
    while time.perf_counter() < deadline:
        if len(p) > max_queued:
            p.poll(0.001)
            continue
        n = p.produce_batch(topic, messages, partition=0)
        if n != chunk:
            raise RuntimeError(f"produce_batch queued {n} of {chunk}")
        sent += n
        p.poll(0)
    left = p.flush(60)
    elapsed = time.perf_counter() - start
    if left or errors:
        raise RuntimeError(f"{left} records not delivered, errors: {errors[:3]}")
    return sent, elapsed


def enqueue_rate(value_size: int, seconds: float = 2.0) -> float:
    """Records/s this client can enqueue when nothing is sent: the ceiling that
    the Python side of the producer puts on any broker."""
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"
    p = Producer(
        {"bootstrap.servers": dead, **THROUGHPUT_PRODUCER, "log_level": 0, "logger": _quiet()}
    )
    messages = [{"value": os.urandom(value_size)} for _ in range(64)] * (
        256 * KiB // value_size // 64
    )
    sent = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds and sent + len(messages) < 1_900_000:
        sent += p.produce_batch("enqueue-only", messages, partition=0)
        p.poll(0)
    elapsed = time.perf_counter() - start
    p.purge()
    p.flush(0)
    return sent / elapsed


def _quiet() -> Any:
    import logging

    log = logging.getLogger("broker_bench.null")
    log.addHandler(logging.NullHandler())
    log.propagate = False
    return log


# ---------------------------------------------------------------- raw baselines


@contextmanager
def listener() -> Iterator[socket.socket]:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    try:
        yield srv
    finally:
        srv.close()


def raw_tcp_to_file(total: int, path: str) -> float:
    """Seconds to stream ``total`` bytes over loopback TCP (1 MiB sendall) into
    a file (recv_into + os.write on the other side), both ends in threads."""
    with listener() as srv:
        done = threading.Event()

        def server() -> None:
            conn, _ = srv.accept()
            buf = bytearray(MiB)
            view = memoryview(buf)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            got = 0
            try:
                while got < total:
                    n = conn.recv_into(buf)
                    if not n:
                        break
                    os.write(fd, view[:n])
                    got += n
            finally:
                os.close(fd)
                conn.close()
                done.set()

        t = threading.Thread(target=server)
        t.start()
        payload = os.urandom(MiB)
        start = time.perf_counter()
        with socket.create_connection(srv.getsockname()) as c:
            left = total
            while left > 0:
                n = min(left, MiB)
                c.sendall(payload[:n] if n < MiB else payload)
                left -= n
            done.wait()
        elapsed = time.perf_counter() - start
        t.join()
    os.unlink(path)
    return elapsed


def page_cache_write_cost(total: int, path: str) -> tuple[float, float]:
    """(CPU ms per MiB, MiB/s) of writing ``total`` new bytes to a new file
    in 1 MiB writes: what every appended MiB costs the kernel on this machine
    now. On a VM it moves ~10x with where the page cache's pages come from
    (0.2-2 ms per MiB on the 2-core dev VM; docs/internals/performance.md)."""
    payload = os.urandom(MiB)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        cpu0, t0 = time.thread_time(), time.perf_counter()
        for _ in range(total // MiB):
            os.write(fd, payload)
        cpu, wall = time.thread_time() - cpu0, time.perf_counter() - t0
    finally:
        os.close(fd)
        os.unlink(path)
    mib = total / MiB
    return 1e3 * cpu / mib, mib / wall


def raw_sendfile(paths: list[str], sndbuf: int = 0) -> tuple[int, float]:
    """(bytes, seconds) to sendfile() ``paths`` over loopback to a reader that
    recv_into()s a 1 MiB buffer and drops it; the sending socket's SO_SNDBUF
    is ``sndbuf`` when > 0 (the broker's ``socket.send.buffer.bytes``), else
    the OS default (autotuned)."""
    total = sum(os.path.getsize(p) for p in paths)
    with listener() as srv:

        def server() -> None:
            conn, _ = srv.accept()
            if sndbuf > 0:
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
            try:
                for p in paths:
                    with open(p, "rb") as f:
                        size = os.fstat(f.fileno()).st_size
                        off = 0
                        while off < size:
                            off += os.sendfile(conn.fileno(), f.fileno(), off, size - off)
            finally:
                conn.close()

        t = threading.Thread(target=server)
        t.start()
        buf = bytearray(MiB)
        got = 0
        start = time.perf_counter()
        with socket.create_connection(srv.getsockname()) as c:
            while got < total:
                n = c.recv_into(buf)
                if not n:
                    break
                got += n
        elapsed = time.perf_counter() - start
        t.join()
    return got, elapsed


# ---------------------------------------------------------------- consuming


def consume_all(bootstrap: str, topic: str, expected: int, seconds: float) -> tuple[int, float]:
    """Read ``topic``-0 from the beginning with assign() (group.id set, no
    commits). Returns (records, elapsed) when all ``expected`` are read or
    ``seconds`` ran out."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "broker-bench",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "fetch.max.bytes": 64 * MiB,
            "max.partition.fetch.bytes": 16 * MiB,
            "fetch.wait.max.ms": 100,
            "queued.max.messages.kbytes": 256 * KiB,
            "queued.min.messages": 1_000_000,  # the default 100k stops prefetching early
            "check.crcs": False,
        }
    )
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got = 0
    last_offset = -1
    start = time.perf_counter()
    deadline = start + seconds
    try:
        while got < expected and time.perf_counter() < deadline:
            msgs = c.consume(num_messages=100_000, timeout=0.5)
            for m in msgs:
                if m.error() is not None:
                    raise RuntimeError(f"consume error: {m.error()}")
            if msgs:
                got += len(msgs)
                off = msgs[-1].offset()
                last_offset = -1 if off is None else off
        elapsed = time.perf_counter() - start
    finally:
        c.close()
    if got and last_offset != got - 1:
        raise RuntimeError(f"read {got} records but the last offset is {last_offset}")
    return got, elapsed


# ---------------------------------------------------------------- latency


def latency(bootstrap: str, topic: str, acks: str, rate: int, seconds: float) -> list[float]:
    """Delivery-report time minus send time (ms) of 100-byte records produced
    one by one at ``rate``/s with linger.ms=0; the first half second is warm-up."""
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": acks,
            "linger.ms": 0,
            "socket.nagle.disable": True,
            "enable.idempotence": False,
            "max.in.flight.requests.per.connection": 5,
        }
    )
    lat: list[float] = []
    warm = 0.5

    def done(sent: float, err: KafkaError | None, _msg: Any) -> None:
        now = time.perf_counter()
        if err is not None:
            raise RuntimeError(f"delivery failed: {err}")
        if sent - start >= warm:
            lat.append((now - sent) * 1000)

    value = os.urandom(100)
    p.produce(topic, value, partition=0)
    p.flush(15)
    interval = 1.0 / rate
    total = int((seconds + warm) * rate)
    start = time.perf_counter()
    for i in range(total):
        target = start + i * interval
        while True:
            wait = target - time.perf_counter()
            if wait <= 0:
                break
            if wait >= 0.0015:
                p.poll(wait - 0.001)  # librdkafka waits in whole ms; serve reports meanwhile
            else:
                p.poll(0)
                time.sleep(min(wait, 0.0001) if wait > 0.0002 else 0)
        p.produce(
            topic, value, partition=0, on_delivery=functools.partial(done, time.perf_counter())
        )
        p.poll(0)
    p.flush(15)
    return lat


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


# ---------------------------------------------------------------- the figures


def figure_produce_1k(b: Broker, workdir: str, seconds: float, state: dict[str, Any]) -> Figure:
    b.create_topic("bench-1k")
    cpu = b.cpu_seconds()
    n, t = produce_for(b.bootstrap, "bench-1k", KiB, seconds)
    cpu = (b.cpu_seconds() - cpu) / t
    size = n * KiB
    state["1k"] = n
    t_raw = min(raw_tcp_to_file(size, os.path.join(workdir, "raw.bin")) for _ in range(2))
    return Figure(
        f"produce acks=1, 1 KiB records ({size / MiB:.0f} MiB)",
        f"{size / t / 1e6:.0f} MB/s (broker CPU {cpu:.0%})",
        f"raw loopback TCP -> file {size / t_raw / 1e6:.0f} MB/s",
        f"{t_raw / t:.2f}",
        ">= 0.60 of raw",
    )


def figure_produce_100(b: Broker, workdir: str, seconds: float, state: dict[str, Any]) -> Figure:
    b.create_topic("bench-100")
    cpu = b.cpu_seconds()
    n, t = produce_for(b.bootstrap, "bench-100", 100, seconds)
    cpu = (b.cpu_seconds() - cpu) / t
    ceiling = enqueue_rate(100)
    return Figure(
        f"produce acks=1, 100 B records ({n:,})",
        f"{n / t / 1e6:.2f} M rec/s (broker CPU {cpu:.0%})",
        f"client enqueue only, no broker {ceiling / 1e6:.2f} M rec/s",
        f"{n / t / ceiling:.2f}",
        ">= 1 M rec/s",
    )


def figure_consume(b: Broker, workdir: str, seconds: float, state: dict[str, Any]) -> Figure:
    if "1k" not in state:
        b.create_topic("bench-1k")
        state["1k"], _ = produce_for(b.bootstrap, "bench-1k", KiB, seconds)
    expected = state["1k"]
    cpu = b.cpu_seconds()
    n, t = consume_all(b.bootstrap, "bench-1k", expected, seconds)
    cpu = (b.cpu_seconds() - cpu) / t
    if n < expected:
        print(f"  consume: read {n:,} of {expected:,} in {seconds} s", file=sys.stderr)
    files = b.segment_files("bench-1k")
    on_disk = sum(os.path.getsize(f) for f in files)
    fetched = on_disk * n // expected  # the segment bytes the fetches carried
    raw_bytes, t_raw = min((raw_sendfile(files) for _ in range(2)), key=lambda r: r[1])
    return Figure(
        f"consume (assign, no group), {n:,} x 1 KiB",
        f"{fetched / t / 1e6:.0f} MB/s (broker CPU {cpu:.0%})",
        f"raw sendfile over loopback {raw_bytes / t_raw / 1e6:.0f} MB/s",
        f"{(fetched / t) / (raw_bytes / t_raw):.2f}",
        ">= 0.80 of raw",
    )


class _FrameReader:
    """Reads one response frame off a blocking socket through one reused
    receive buffer (as the raw sendfile baseline's reader does): ``need``
    gives where the next ``n`` bytes lie in ``buf``, contiguous; ``skip``
    drops bytes without looking at them. Never reads past the frame's end."""

    def __init__(self, sock: socket.socket, size: int = MiB) -> None:
        self.sock = sock
        self.buf = bytearray(size)
        self.view = memoryview(self.buf)
        self.lo = self.hi = 0
        self.left = 0  # bytes of the current frame not yet received

    def _recv(self, into: memoryview) -> int:
        n = self.sock.recv_into(into, min(len(into), self.left))
        if n == 0:
            raise ConnectionError("broker closed the connection")
        self.left -= n
        return n

    def start(self) -> None:
        """Reads the next frame's size prefix."""
        self.lo = self.hi = 0
        self.left = 4
        while self.hi < 4:
            self.hi += self._recv(self.view[self.hi : 4])
        self.left = int.from_bytes(self.buf[0:4], "big")
        self.lo = self.hi = 0

    def need(self, n: int) -> int:
        """Position in ``buf`` of the next ``n`` (<= the buffer's size) bytes."""
        if self.hi - self.lo < n:
            if self.lo:
                kept = self.hi - self.lo
                self.buf[0:kept] = self.buf[self.lo : self.hi]
                self.lo, self.hi = 0, kept
            while self.hi < n:
                self.hi += self._recv(self.view[self.hi :])
        at = self.lo
        self.lo += n
        return at

    def skip(self, n: int) -> None:
        while self.hi - self.lo < n:
            n -= self.hi - self.lo
            self.lo, self.hi = 0, self._recv(self.view)
        self.lo += n

    def read_int(self, n: int) -> int:
        at = self.need(n)
        return int.from_bytes(self.buf[at : at + n], "big", signed=True)


def fetch_all(bootstrap: str, topic: str, expected: int, seconds: float) -> tuple[int, float]:
    """Fetch v4 requests one after another from offset 0, 16 MiB each. The
    response is read as a client that does not decode records would: through
    one reused 1 MiB receive buffer with recv_into on a blocking socket (as the
    raw sendfile baseline's reader), its header fields parsed, the record
    batches walked by header only (for the next offset) and their bytes
    dropped. Returns (record bytes of whole batches, elapsed)."""
    from pylog.protocol.client import KafkaConnection

    body: dict[str, Any] = {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 16 * MiB,
        "isolation_level": 0,
    }  # fmt: skip
    offset = 0
    fetched = 0
    start = time.perf_counter()
    deadline = start + seconds
    with KafkaConnection(bootstrap) as conn:
        # Blocking, no poll() before each recv; a hang still ends (SO_RCVTIMEO).
        conn.sock.settimeout(None)
        conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("@ll", 30, 0))
        r = _FrameReader(conn.sock)
        while offset < expected and time.perf_counter() < deadline:
            part = {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 16 * MiB}
            body["topics"] = [{"topic": topic, "partitions": [part]}]
            conn.send(1, 4, body)
            r.start()
            r.skip(8)  # correlation id, throttle time
            if r.read_int(4) != 1:
                raise RuntimeError("expected one topic in the Fetch response")
            r.skip(r.read_int(2))  # topic name
            if r.read_int(4) != 1:
                raise RuntimeError("expected one partition in the Fetch response")
            r.skip(4)  # partition index
            error = r.read_int(2)
            if error:
                raise RuntimeError(f"fetch error {error} at offset {offset}")
            r.skip(16)  # high watermark, last stable offset
            aborted = r.read_int(4)
            r.skip(16 * max(aborted, 0))
            left = r.read_int(4)  # records' size (-1: null)
            while left >= 61:  # whole v2 batches only; a partial last one is dropped
                at = r.need(27)
                buf = r.buf
                size = 12 + int.from_bytes(buf[at + 8 : at + 12], "big")
                if size > left:
                    break
                base = int.from_bytes(buf[at : at + 8], "big")
                offset = base + int.from_bytes(buf[at + 23 : at + 27], "big") + 1
                r.skip(size - 27)
                left -= size
                fetched += size
            r.skip(r.left + r.hi - r.lo)  # the rest of the frame
    return fetched, time.perf_counter() - start


def figure_fetch(b: Broker, workdir: str, seconds: float, state: dict[str, Any]) -> Figure:
    if "1k" not in state:
        b.create_topic("bench-1k")
        state["1k"], _ = produce_for(b.bootstrap, "bench-1k", KiB, seconds)
    files = b.segment_files("bench-1k")
    # The fetches and two baselines — the OS default SO_SNDBUF (autotuned) and
    # the broker's socket.send.buffer.bytes (Kafka's 100 KiB) — alternated,
    # the best of two runs each: the same statistic on every side.
    fetches: list[tuple[int, float]] = []
    auto: list[tuple[int, float]] = []
    same: list[tuple[int, float]] = []
    cpu = 0.0
    for _ in range(2):
        before = b.cpu_seconds()
        fetches.append(fetch_all(b.bootstrap, "bench-1k", state["1k"], seconds))
        cpu += b.cpu_seconds() - before
        auto.append(raw_sendfile(files))
        same.append(raw_sendfile(files, b.send_buffer_bytes))
    cpu /= sum(t for _, t in fetches)
    rate, rate_auto, rate_same = (max(n / t for n, t in runs) for runs in (fetches, auto, same))
    return Figure(
        "fetch, pylog codec, 16 MiB requests back to back (records not decoded)",
        f"{rate / 1e6:.0f} MB/s (broker CPU {cpu:.0%})",
        f"raw sendfile over loopback {rate_auto / 1e6:.0f} MB/s (OS default SO_SNDBUF), "
        f"{rate_same / 1e6:.0f} MB/s (SO_SNDBUF {b.send_buffer_bytes // KiB} KiB)",
        f"{rate / rate_auto:.2f} / {rate / rate_same:.2f}",
        ">= 0.80 of raw",
    )


def figure_latency(acks: str) -> Callable[[Broker, str, float, dict[str, Any]], Figure]:
    def run(b: Broker, workdir: str, seconds: float, state: dict[str, Any]) -> Figure:
        topic = f"bench-lat-{acks}"
        b.create_topic(topic)
        cpu = b.cpu_seconds()
        start = time.perf_counter()
        lat = latency(b.bootstrap, topic, acks, 10_000, min(seconds, 5.0))
        cpu = (b.cpu_seconds() - cpu) / (time.perf_counter() - start)
        base = state.get("rtt")
        if base is None:
            base = state["rtt"] = loopback_rtt()
        return Figure(
            f"latency acks={acks} at 10k rec/s, p50 / p99 (delivery report - send)",
            f"{pct(lat, 0.5):.2f} / {pct(lat, 0.99):.2f} ms (broker CPU {cpu:.0%})",
            f"loopback TCP ping-pong p50 / p99 {base[0]:.3f} / {base[1]:.3f} ms",
            f"{len(lat):,} records",
            "p99 <= 2 ms",
        )

    return run


def loopback_rtt(n: int = 20_000) -> tuple[float, float]:
    """p50/p99 (ms) of a 100-byte request / 16-byte reply over loopback TCP
    between two threads: the floor under any request latency here."""
    with listener() as srv:

        def server() -> None:
            conn, _ = srv.accept()
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with conn:
                while conn.recv(4096):
                    conn.sendall(b"x" * 16)

        t = threading.Thread(target=server)
        t.start()
        times = []
        with socket.create_connection(srv.getsockname()) as c:
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            req = b"y" * 100
            for _ in range(n):
                s = time.perf_counter()
                c.sendall(req)
                c.recv(4096)
                times.append((time.perf_counter() - s) * 1000)
        t.join()
    return pct(times, 0.5), pct(times, 0.99)


FIGURES: dict[str, Callable[[Broker, str, float, dict[str, Any]], Figure]] = {
    "produce": figure_produce_1k,
    "produce100": figure_produce_100,
    "consume": figure_consume,
    "fetch": figure_fetch,
    "latency1": figure_latency("1"),
    "latencyall": figure_latency("all"),
}

REFERENCES = (
    "protocol codec (decode Produce, encode Fetch): bench/test_protocol_bench.py",
    "timing wheel (1M add/cancel/advance): bench/test_timing_wheel_bench.py and cargo bench",
    "storage (validate, Log.append, index lookup, recovery, idle RSS): bench/storage_bench.py",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=8.0, help="bound of each load")
    parser.add_argument("--only", default=",".join(FIGURES), help="comma-separated subset")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--dir", default=None, help="scratch directory (default: a temp dir)")
    parser.add_argument(
        "--broker-command",
        default=None,
        help="what runs `pylog`, split on spaces (e.g. 'py-spy record -o p.svg -- pylog')",
    )
    args = parser.parse_args()

    workdir = tempfile.mkdtemp(prefix="pylog-broker-bench-", dir=args.dir)
    figures: list[Figure] = []
    state: dict[str, Any] = {}
    broker = Broker(
        workdir, args.override, args.broker_command.split() if args.broker_command else None
    )
    print(f"  broker pid {broker.pid} on {broker.bootstrap}", file=sys.stderr, flush=True)
    try:
        for name in args.only.split(","):
            fig = FIGURES[name](broker, workdir, args.seconds, state)
            figures.append(fig)
            print(f"  {fig.name}: {fig.value} ({fig.baseline})", file=sys.stderr, flush=True)
    finally:
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)

    print_table(figures)
    print("\nmeasured elsewhere in `make bench`, not repeated here:")
    for ref in REFERENCES:
        print(f"  {ref}")


if __name__ == "__main__":
    main()
