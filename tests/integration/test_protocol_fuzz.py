"""Keep it that way: mutated request frames against a real broker process.

Valid requests of every API and version the broker serves, built with pylog's
codec, are mutated (bit flips, truncations, hostile length and count fields,
random api keys and versions, garbage spliced in) and sent over several
connections while a canary connection keeps asking for metadata. At the end the
broker must be alive, its log free of tracebacks, its peak RSS under
``RSS_BOUND_MB``, every canary request answered, and a produce/fetch round trip
must still work.

The mutations come from one seeded RNG, printed with ``-s`` and in a failure's
message; ``PYLOG_FUZZ_SEED=<seed>`` repeats a run, ``PYLOG_FUZZ_FRAMES`` changes
the count (20,000 by default).
"""

from __future__ import annotations

import os
import random
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pylog import _native
from pylog.errors import KafkaError
from pylog.protocol import (
    GROUP_API_VERSIONS,
    SUPPORTED_VERSIONS,
    ApiKey,
    decode_request,
    encode_request,
    message_spec,
    parse_request_header,
)
from pylog.protocol._spec import FieldSpec
from pylog.protocol.client import KafkaConnection
from pylog.protocol.messages import FetchResponse, MetadataResponse, ProduceResponse

PYLOG = str(Path(sys.executable).with_name("pylog"))
FRAMES = int(os.environ.get("PYLOG_FUZZ_FRAMES", "20000"))
SENDERS = 4
RSS_BOUND_MB = 512
#: how long a sender waits for an answer before it drops the connection (a valid
#: JoinGroup or acks=-1 Produce may wait much longer; the fuzz does not)
ANSWER_WAIT_S = 0.05

TOPICS = ["fuzz-a", "fuzz-b", "__consumer_offsets", "", "fuzz.c_9"]
#: The controller's requests (LeaderAndIsr, UpdateMetadata, StopReplica) are left
#: out, as are mutated frames that still decode as one: a decodable one changes
#: which partitions the broker leads, by design, and telling the controller from a
#: client is CLUSTER_ACTION authorization's job (the security work), not a codec's.
CONTROLLER_APIS = {ApiKey.LEADER_AND_ISR, ApiKey.UPDATE_METADATA, ApiKey.STOP_REPLICA}
SERVED = {
    k: v
    for k, v in {**SUPPORTED_VERSIONS, **GROUP_API_VERSIONS}.items()
    if k not in CONTROLLER_APIS
}
#: These create partitions from a count in the request. Their frames are sent with
#: validate_only and never bit-flipped, and a mutated frame that would still create
#: more than a few partitions (a count made hostile, validate_only cleared, another
#: API's frame relabelled) is truncated instead: bounding how many partitions a
#: request may create is the admin APIs' business, not this test's.
CREATING = {ApiKey.CREATE_TOPICS, ApiKey.CREATE_PARTITIONS}


class Values:
    """Small, plausible values for every field of a request: names of a few topics,
    partitions 0..2, a real record batch, so the mutations start from requests the
    broker acts on rather than refuses at the first field."""

    def __init__(self, rng: random.Random, version: int) -> None:
        self.rng = rng
        self.version = version

    def struct(self, fields: list[FieldSpec]) -> dict[str, Any]:
        return {f.name: self.value(f) for f in fields if self.version in f.versions}

    def value(self, f: FieldSpec) -> Any:
        if f.is_array:
            n = self.rng.choice((0, 1, 1, 2))
            if f.fields is not None:
                return [self.struct(f.fields) for _ in range(n)]
            return [self.scalar(f) for _ in range(n)]
        if f.fields is not None:
            return self.struct(f.fields)
        if self.version in f.nullable and self.rng.random() < 0.1:
            return None
        return self.scalar(f)

    def scalar(self, f: FieldSpec) -> Any:
        rng, t, name = self.rng, f.type, f.name
        if name == "validate_only":
            return True
        if t == "bool":
            return rng.random() < 0.5
        if t in ("int8", "int16", "uint16", "int32", "uint32", "int64"):
            if "timeout" in name or name.endswith("_ms"):
                return rng.choice((0, 10, 100))
            if name in ("num_partitions", "count", "replication_factor"):
                return rng.choice((-1, 1, 2))
            if name == "acks":
                return rng.choice((0, 1, -1))
            return rng.choice((-1, 0, 0, 1, 2))
        if t == "float64":
            return 0.5
        if t == "string":
            if "topic" in name or name == "name":
                return rng.choice(TOPICS)
            return rng.choice(("g1", "member-1", "", "consumer", "range", "x" * 40))
        if t == "uuid":
            return rng.choice(("AAAAAAAAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAAAAAAQ"))
        if t == "bytes":
            return bytes(rng.randrange(256) for _ in range(rng.randrange(6)))
        if t == "records":
            return _native.build_batch([(b"k", b"fuzz", [], int(time.time() * 1000))])
        raise AssertionError(t)


def valid_frames(rng: random.Random) -> list[tuple[int, bytes]]:
    """(api key, frame) for every API and version the broker serves, three of each."""
    out: list[tuple[int, bytes]] = []
    for api, (lo, hi) in sorted(SERVED.items()):
        spec = message_spec(api, "request")
        for version in range(lo, hi + 1):
            for _ in range(3):
                body = Values(rng, version).struct(spec.fields)
                out.append((api, encode_request(api, version, 1, "fuzz", body)))
    return out


_HOSTILE = [
    b"\x7f\xff\xff\xff", b"\xff\xff\xff\xff", b"\x80\x00\x00\x00", b"\x00\x10\x00\x00",
    b"\x7f\xff", b"\xff\xff", b"\x80\x00", b"\xff\xff\xff\xff\x0f", b"\xff\xff\xff\xff\xff\xff",
    b"\x80\x80\x80\x80\x08", b"\x00", b"\x01", b"\xfe",
]  # fmt: skip


def mutate(rng: random.Random, api: int, frame: bytes) -> tuple[str, bytes]:
    """One mutation of a whole frame (size prefix included); returns its kind too.
    The size prefix always matches the bytes sent, so every frame reaches the codec."""
    body = bytearray(frame[4:])
    kinds = ["flip", "truncate", "hostile", "api", "splice"]
    if api in CREATING:
        kinds = ["truncate", "hostile", "api"]
    kind = rng.choice(kinds)
    if kind == "flip":
        for _ in range(rng.choice((1, 1, 2, 4, 8))):
            i = rng.randrange(len(body))
            body[i] ^= 1 << rng.randrange(8)
    elif kind == "truncate":
        del body[rng.randrange(len(body)) :]
    elif kind == "hostile":
        # a length or count field, somewhere after the api key and version
        for _ in range(rng.choice((1, 1, 2))):
            value = rng.choice(_HOSTILE)
            i = rng.randrange(4, max(5, len(body)))
            body[i : i + len(value)] = value
    elif kind == "api":
        if rng.random() < 0.5:
            key = rng.choice((rng.randrange(-3, 90), rng.randrange(-(2**15), 2**15)))
            struct.pack_into(">h", body, 0, key)
        if rng.random() < 0.7:
            struct.pack_into(">h", body, 2, rng.choice((rng.randrange(-2, 30), 0x7FFF, -1)))
    else:
        i = rng.randrange(len(body) + 1)
        body[i:i] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64)))
    return kind, struct.pack(">i", len(body)) + bytes(body)


def creates_many_partitions(frame: bytes) -> bool:
    """Whether ``frame`` would create many partitions, or is a controller's request
    a handler would act on (see CONTROLLER_APIS): such frames are cut shorter."""
    view = memoryview(frame)[4:]
    try:
        header = parse_request_header(view)
        if header.api_key not in CREATING and header.api_key not in CONTROLLER_APIS:
            return False
        body = decode_request(header, view)
    except (KafkaError, ValueError, TypeError):
        return False  # refused before any handler runs
    if header.api_key in CONTROLLER_APIS:
        return True
    if body.get("validate_only"):
        return False
    total = 0
    for t in body.topics or ():
        total += max(t.get("num_partitions", 0), t.get("count", 0), len(t.assignments or ()))
    return total > 8


# --- the broker ----------------------------------------------------------------------


class Broker:
    def __init__(self, data: Path) -> None:
        self.log_path = data.parent / "broker.log"
        self.log = open(self.log_path, "w")  # noqa: SIM115 - closed in stop()
        cmd = [
            PYLOG, "broker", "start", "--log-level", "WARNING",
            "--override", "listeners=PLAINTEXT://127.0.0.1:0",
            "--override", f"log.dirs={data}",
            "--override", "socket.request.max.bytes=10000000",
            "--override", "group.initial.rebalance.delay.ms=0",
            "--override", "offsets.topic.num.partitions=1",
        ]  # fmt: skip
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.log, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert "started: PLAINTEXT://127.0.0.1:" in line, f"broker did not start: {line!r}"
        self.port = int(line.split("127.0.0.1:")[1].split()[0])

    def status_mb(self, key: str) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) // 1024
        raise AssertionError(f"{key} not in /proc/{self.proc.pid}/status")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.log.close()


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = Broker(tmp_path / "data")
    try:
        yield b
    finally:
        b.stop()


# --- senders and the canary ------------------------------------------------------------


class Sender(threading.Thread):
    """Writes its share of the frames; reads an answer or the close after each, and
    connects again when the broker closed the connection (as it does for a
    malformed frame) or took longer than ANSWER_WAIT_S."""

    def __init__(self, port: int, frames: list[bytes]) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.frames = frames
        self.sock: socket.socket | None = None
        self.answered = self.closed = self.connects = 0
        self.error: BaseException | None = None

    def _connect(self) -> socket.socket:
        if self.sock is None:
            self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=10)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.connects += 1
        return self.sock

    def _drop(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def run(self) -> None:
        try:
            for frame in self.frames:
                sock = self._connect()
                try:
                    sock.sendall(frame)
                    sock.settimeout(ANSWER_WAIT_S)
                    got = sock.recv(1 << 16)
                except TimeoutError:
                    self._drop()
                    continue
                except OSError:  # reset: the broker closed while we wrote
                    self.closed += 1
                    self._drop()
                    continue
                if not got:
                    self.closed += 1
                    self._drop()
                    continue
                self.answered += 1
                # the rest of this answer (if any) is not worth reading: start afresh
                self._drop()
        except BaseException as e:  # reported by the test
            self.error = e
        finally:
            self._drop()


class Canary(threading.Thread):
    """Asks for metadata every 20 ms on its own connection; every request must be answered."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.stop = threading.Event()
        self.latencies: list[float] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with KafkaConnection(f"127.0.0.1:{self.port}", timeout=60, client_id="canary") as c:
                while not self.stop.is_set():
                    t = time.perf_counter()
                    resp = c.request(ApiKey.METADATA, 9, {"topics": None}, MetadataResponse)
                    self.latencies.append(time.perf_counter() - t)
                    assert resp.brokers and resp.brokers[0].port == self.port
                    self.stop.wait(0.02)
        except BaseException as e:  # reported by the test
            self.error = e


def round_trip(port: int) -> None:
    """Create a topic, produce a batch, fetch it back."""
    with KafkaConnection(f"127.0.0.1:{port}", timeout=30, client_id="after-fuzz") as c:
        topic = {"name": "after-fuzz", "num_partitions": 1, "replication_factor": 1}
        c.request(ApiKey.CREATE_TOPICS, 5, {"topics": [topic], "timeout_ms": 5000})
        batch = _native.build_batch([(b"key", b"still-alive", [], int(time.time() * 1000))])
        produce = {
            "acks": -1,
            "timeout_ms": 5000,
            "topic_data": [
                {"name": "after-fuzz", "partition_data": [{"index": 0, "records": batch}]}
            ],
        }
        presp = c.request(ApiKey.PRODUCE, 9, produce, ProduceResponse)
        part = presp.responses[0].partition_responses[0]
        assert part.error_code == 0, part
        fetch = {
            "replica_id": -1,
            "max_wait_ms": 100,
            "min_bytes": 1,
            "max_bytes": 1 << 20,
            "topics": [
                {
                    "topic": "after-fuzz",
                    "partitions": [
                        {"partition": 0, "fetch_offset": part.base_offset,
                         "partition_max_bytes": 1 << 20}
                    ],
                }
            ],
        }  # fmt: skip
        fresp = c.request(ApiKey.FETCH, 11, fetch, FetchResponse)
        fpart = fresp.responses[0].partitions[0]
        assert fpart.error_code == 0, fpart
        assert fpart.records is not None and b"still-alive" in bytes(fpart.records)


def test_mutated_frames_do_not_sink_the_broker(broker: Broker) -> None:
    seed = int(os.environ.get("PYLOG_FUZZ_SEED", str(random.SystemRandom().randrange(2**32))))
    print(f"\nprotocol fuzz: seed {seed} (PYLOG_FUZZ_SEED={seed} repeats it), {FRAMES} frames")
    rng = random.Random(seed)
    bases = valid_frames(rng)
    kinds: dict[str, int] = {}
    frames: list[bytes] = []
    for _ in range(FRAMES):
        api, frame = rng.choice(bases)
        kind, mutated = mutate(rng, api, frame)
        while creates_many_partitions(mutated):  # shorter each time: ends as a bare header
            kind, mutated = "truncate", mutated[: rng.randrange(4, len(mutated))]
            mutated = struct.pack(">i", len(mutated) - 4) + mutated[4:]
        kinds[kind] = kinds.get(kind, 0) + 1
        frames.append(mutated)
    where = f"seed {seed}, broker log {broker.log_path}"

    canary = Canary(broker.port)
    canary.start()
    senders = [Sender(broker.port, frames[i::SENDERS]) for i in range(SENDERS)]
    started = time.monotonic()
    for s in senders:
        s.start()
    peak_seen = 0
    while any(s.is_alive() for s in senders):
        assert broker.proc.poll() is None, f"the broker exited ({where})"
        peak_seen = max(peak_seen, broker.status_mb("VmRSS"))
        time.sleep(0.2)
    elapsed = time.monotonic() - started
    canary.stop.set()
    canary.join(60)

    for s in senders:
        assert s.error is None, f"a sender failed: {s.error!r} ({where})"
    assert canary.error is None, f"the canary got no answer: {canary.error!r} ({where})"
    assert not canary.is_alive()
    assert canary.latencies, f"the canary was never answered ({where})"
    assert broker.proc.poll() is None, f"the broker exited ({where})"
    peak = broker.status_mb("VmHWM")
    round_trip(broker.port)
    log = broker.log_path.read_text(errors="replace")
    assert "Traceback" not in log, f"the broker logged a traceback ({where}):\n{log[-4000:]}"
    assert peak < RSS_BOUND_MB, f"broker peak RSS {peak} MB >= {RSS_BOUND_MB} MB ({where})"
    lat = sorted(canary.latencies)
    print(
        f"protocol fuzz: {FRAMES} frames {kinds} in {elapsed:.1f}s; "
        f"answered {sum(s.answered for s in senders)}, "
        f"closed {sum(s.closed for s in senders)}, "
        f"{sum(s.connects for s in senders)} connections; "
        f"broker peak RSS {peak} MB; canary {len(lat)} requests, "
        f"median {lat[len(lat) // 2] * 1000:.1f} ms, max {lat[-1] * 1000:.0f} ms"
    )
