"""What a hostile client can make the broker hold in memory, measured on a real
broker process with raw bytes on loopback.

Each probe runs while a canary connection keeps asking ApiVersions and must
keep getting answers; the broker's peak resident memory (VmHWM in
/proc/<pid>/status) must stay under RSS_BOUND_MB, and the broker must still
serve afterwards:

* size prefixes alone: many connections each announcing a 100 MB request and
  sending nothing more (memory must be taken as bytes arrive, not on the
  prefix's word);
* a frame trickled byte by byte: closed once it has taken longer than
  connections.max.idle.ms to arrive;
* 40 connections pipelining 0.9 MB Produce requests as fast as they can
  (bytes read and not yet answered are bounded per connection and, with
  queued.max.request.bytes, in total).

A probe stops early (and fails) once the broker passes the bound, so a
regression cannot eat the machine.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import struct
import threading
import time
import uuid
from collections.abc import Iterator

import pytest
from broker_process import BrokerProcess

from pylog import _native
from pylog.protocol import encode_request
from pylog.protocol.client import KafkaConnection

RSS_BOUND_MB = int(os.environ.get("PYLOG_TEST_RSS_BOUND_MB", "512"))
IDLE_MS = 2000
FRAME_MB = 100


def memory_mb(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of ``pid`` in MB."""
    values: dict[str, float] = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = int(rest.split()[0]) / 1024
    return values["VmRSS"], values["VmHWM"]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(
        tmp_path_factory.mktemp("memory") / "data",
        {
            "socket.request.max.bytes": FRAME_MB * 1024 * 1024,
            "connections.max.idle.ms": IDLE_MS,
            "message.max.bytes": 2 * 1024 * 1024,
        },
    ).start()
    try:
        yield b
    finally:
        if b.proc is not None:
            b.stop(signal.SIGKILL)


class Canary(threading.Thread):
    """ApiVersions in a loop on its own connection; counts the answers."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap = bootstrap
        self.answers = 0
        self.error: BaseException | None = None
        self.stop = threading.Event()

    def run(self) -> None:
        try:
            with KafkaConnection(self.bootstrap, timeout=30) as conn:
                while not self.stop.is_set():
                    conn.request(18, 0, {})
                    self.answers += 1
                    time.sleep(0.02)
        except BaseException as e:  # reported by the test
            self.error = e

    def __enter__(self) -> Canary:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.join(35)


def watch(broker: BrokerProcess, seconds: float, done: threading.Event | None = None) -> float:
    """Sample the broker's memory for ``seconds`` (or until ``done``); its peak
    VmHWM in MB. Returns early once past the bound."""
    assert broker.proc is not None
    deadline = time.monotonic() + seconds
    peak = 0.0
    while time.monotonic() < deadline and not (done is not None and done.is_set()):
        peak = max(peak, memory_mb(broker.proc.pid)[1])
        if peak > RSS_BOUND_MB:
            break
        time.sleep(0.05)
    return max(peak, memory_mb(broker.proc.pid)[1])


def assert_still_serving(broker: BrokerProcess) -> None:
    with KafkaConnection(broker.bootstrap, timeout=20) as conn:
        assert conn.request(18, 0, {}).error_code == 0


def closed(sock: socket.socket, timeout: float) -> bool:
    sock.settimeout(timeout)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_size_prefixes_alone_take_no_memory(broker: BrokerProcess) -> None:
    socks = []
    with Canary(broker.bootstrap) as canary:
        try:
            for _ in range(30):
                s = socket.create_connection(("127.0.0.1", broker.port))
                # A Produce header's first bytes after a 100 MB size prefix.
                s.sendall(struct.pack(">ihhi", FRAME_MB * 1024 * 1024, 0, 7, 1))
                socks.append(s)
            before = canary.answers
            peak = watch(broker, 1.5)
            print(f"peak VmHWM {peak:.0f} MB")
            assert peak < RSS_BOUND_MB, f"broker peaked at {peak:.0f} MB"
            assert canary.answers > before
            # Frames that never arrive are closed (connections.max.idle.ms).
            deadline = time.monotonic() + 5 * IDLE_MS / 1000 + 5
            open_ = [s for s in socks if not closed(s, max(0.01, deadline - time.monotonic()))]
            assert open_ == [], f"{len(open_)} of {len(socks)} stalled frames still open"
        finally:
            for s in socks:
                s.close()
    assert canary.error is None
    assert_still_serving(broker)


def test_a_trickled_frame_is_closed(broker: BrokerProcess) -> None:
    frame = encode_request(18, 0, 1, "trickle", {})
    s = socket.create_connection(("127.0.0.1", broker.port))
    s.settimeout(0.25)
    with Canary(broker.bootstrap) as canary:
        try:
            # Far slower than a frame per connections.max.idle.ms, each byte well
            # inside it; loop over the frame (never completing) until closed.
            deadline = time.monotonic() + 5 * IDLE_MS / 1000 + 5
            payload = struct.pack(">i", len(frame) - 4 + 1000) + frame[4:] + b"\0" * 1000
            i = 0
            was_closed = False
            while time.monotonic() < deadline and i < len(payload):
                try:
                    s.sendall(payload[i : i + 1])
                except OSError:
                    was_closed = True
                    break
                i += 1
                try:
                    if s.recv(1) == b"":
                        was_closed = True
                        break
                except TimeoutError:
                    pass
                except OSError:
                    was_closed = True
                    break
            assert was_closed, f"a frame trickled for {i} bytes was never closed"
        finally:
            s.close()
    assert canary.error is None and canary.answers > 0
    assert_still_serving(broker)


def produce_frame(topic: str, partition: int, correlation_id: int, value: bytes) -> bytes:
    batch = _native.build_batch([(None, value, [], int(time.time() * 1000))])
    body = {
        "transactional_id": None,
        "acks": 1,
        "timeout_ms": 30000,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": batch}]}],
    }
    return encode_request(0, 7, correlation_id, "pipeliner", body)


def test_pipelined_large_produces_are_bounded(broker: BrokerProcess) -> None:
    topic = f"big-{uuid.uuid4().hex[:8]}"
    partitions = 4
    with KafkaConnection(broker.bootstrap) as conn:
        r = conn.request(
            19,
            4,
            {
                "topics": [
                    {
                        "name": topic,
                        "num_partitions": partitions,
                        "replication_factor": 1,
                        "assignments": [],
                        "configs": [],
                    }
                ],
                "timeout_ms": 10000,
                "validate_only": False,
            },
        )
        assert r.topics[0].error_code == 0
    value = os.urandom(900_000)
    frames = [produce_frame(topic, p, p + 1, value) for p in range(partitions)]
    stop = threading.Event()
    answered = [0]
    errors: list[BaseException] = []

    socks: list[socket.socket] = []

    def pipeline(n: int) -> None:
        s = socket.create_connection(("127.0.0.1", broker.port))
        socks.append(s)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)

        def drain() -> None:
            try:
                while True:
                    data = s.recv(1 << 16)
                    if not data:
                        return
                    answered[0] += len(data)
            except OSError:
                return

        reader = threading.Thread(target=drain, daemon=True)
        reader.start()
        try:
            i = n
            while not stop.is_set():
                s.sendall(frames[i % partitions])
                i += 1
        except OSError as e:
            if not stop.is_set():
                errors.append(e)
        finally:
            s.close()
            reader.join(5)

    with Canary(broker.bootstrap) as canary:
        threads = [threading.Thread(target=pipeline, args=(n,), daemon=True) for n in range(40)]
        for t in threads:
            t.start()
        before = canary.answers
        peak = watch(broker, 6.0)
        stop.set()
        for s in socks:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
        for t in threads:
            t.join(30)
        print(f"peak VmHWM {peak:.0f} MB")
        assert peak < RSS_BOUND_MB, f"broker peaked at {peak:.0f} MB"
        assert canary.answers > before
        assert answered[0] > 0
        assert errors == []
    assert canary.error is None
    assert_still_serving(broker)


def test_queued_max_request_bytes_bounds_frames_being_read(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    # 12 connections each really sending 20 MB of a 100 MB frame: without a
    # broker-wide bound that is 240 MB of buffers (plus their growth); with
    # queued.max.request.bytes=32 MB reading stops near 32 MB, and the frames,
    # never completed, are closed after connections.max.idle.ms.
    bound_mb = 200
    b = BrokerProcess(
        tmp_path_factory.mktemp("budget") / "data",
        {
            "socket.request.max.bytes": FRAME_MB * 1024 * 1024,
            "connections.max.idle.ms": IDLE_MS,
            "queued.max.request.bytes": 32 * 1024 * 1024,
        },
    ).start()
    assert b.proc is not None
    chunk = struct.pack(">ihhi", FRAME_MB * 1024 * 1024, 0, 7, 1) + os.urandom(20 * 1024 * 1024)
    socks: list[socket.socket] = []

    def send() -> None:
        s = socket.create_connection(("127.0.0.1", b.port))
        socks.append(s)
        with contextlib.suppress(OSError):
            s.sendall(chunk)

    try:
        threads = [threading.Thread(target=send, daemon=True) for _ in range(12)]
        for t in threads:
            t.start()
        peak = watch(b, 3.0)
        print(f"peak VmHWM {peak:.0f} MB")
        assert peak < bound_mb, f"broker peaked at {peak:.0f} MB"
        for t in threads:
            t.join(5 * IDLE_MS / 1000 + 10)
        assert not any(t.is_alive() for t in threads)  # closed, or all sent
        assert_still_serving(b)
    finally:
        for s in socks:
            s.close()
        b.stop(signal.SIGKILL)
