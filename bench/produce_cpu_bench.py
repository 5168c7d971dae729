"""Broker CPU per produce request of a fixed size, two pylog trees alternated.

    .venv/bin/python bench/produce_cpu_bench.py --trees /copy/of/main/python,python \\
        [--size-kib 1000] [--requests 1500] [--rounds 3]

librdkafka's request sizes follow the broker's answer times (acks=1 answered
at once: smaller requests), so its rows mix two effects. Here one raw client
pipelines the same ProduceRequest (v9, acks=1, one partition, 1 KiB records,
``--size-kib`` of them), five in flight, to a broker started from each tree in
turn (PYTHONPATH), and reads the broker's CPU time (/proc) and its threads'
voluntary context switches around the run: per request, they depend far less
on the machine's other load than MB/s does.

``--confluent SECONDS`` produces with confluent-kafka instead (1 KiB records
to one partition, librdkafka's own ~1 MiB requests), figures per MiB;
``--producers N`` with it runs N producer processes to six partitions.

``kafka`` in place of a tree runs Apache Kafka (KRaft, as kafka_peer.py starts
it; 1,000 requests of warm-up for its JIT) with the same requests: pylog's CPU
per request beside Kafka's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from kafka_peer import KafkaPeer, Peer, PylogPeer, default_libs, produce_confluent

from pylog import _native
from pylog.protocol.codec import encode_request

IN_FLIGHT = 5
# ProduceResponse v9 for topic "t": size, correlation id, header tags, topics,
# name, partitions, index, then the partition's error code.
_ERROR_AT = 4 + 4 + 1 + 1 + 2 + 1 + 4


def voluntary_switches(pid: int) -> int:
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            for line in Path(f"/proc/{pid}/task/{tid}/status").read_text().splitlines():
                if line.startswith("voluntary_ctxt_switches:"):
                    total += int(line.split()[1])
        except OSError:  # the thread ended meanwhile
            pass
    return total


def start(tree: str, workdir: str, partitions: int = 1) -> tuple[Peer, int]:
    """A broker of ``tree`` (or Kafka) with topic "t", and its warm-up request count."""
    if tree == "kafka":
        # The JVM compiles the produce path's hot methods first.
        peer: Peer = KafkaPeer(workdir, default_libs())
        warm_up = 1000
    else:
        os.environ["PYTHONPATH"] = tree
        peer = PylogPeer(workdir)
        warm_up = 20
    peer.create_topic("t", partitions)
    return peer, warm_up


def confluent_run(
    tree: str, seconds: float, workdir: str, producers: int = 1, acks: str = "1"
) -> tuple[float, float, float]:
    """confluent-kafka producing 1 KiB records to one partition for ``seconds``
    (``producers`` > 1: that many processes, to six partitions, as kafka_peer's
    row): broker CPU µs and voluntary switches per MiB, and MB/s."""
    peer, _ = start(tree, workdir, 1 if producers == 1 else 6)
    try:
        produce_confluent(peer.bootstrap, "t", 1024, "1", 1.0, False)  # warm-up
        switches, cpu = voluntary_switches(peer.pid), peer.cpu_seconds()
        if producers == 1:
            n, wall = produce_confluent(peer.bootstrap, "t", 1024, acks, seconds, False)
        else:
            start_at = time.time() + 1.5  # all connected before any starts
            arg = json.dumps([peer.bootstrap, "t", 1024, seconds, start_at])
            cmd = [sys.executable, str(Path(__file__).with_name("kafka_peer.py"))]
            procs = [
                subprocess.Popen([*cmd, "--produce-worker", arg], stdout=subprocess.PIPE)
                for _ in range(producers)
            ]
            runs = [json.loads(p.communicate(timeout=180)[0]) for p in procs]
            n, wall = sum(r[0] for r in runs), max(r[1] for r in runs)
        cpu = peer.cpu_seconds() - cpu
        switches = voluntary_switches(peer.pid) - switches
    finally:
        peer.stop()
    mib = n / 1024
    return 1e6 * cpu / mib, switches / mib, n * 1024 / wall / 1e6


def one_run(tree: str, size_kib: int, requests: int, workdir: str) -> tuple[float, float, float]:
    """CPU µs and voluntary switches per request, and MB/s, of one broker of ``tree``."""
    now = int(time.time() * 1000)
    batch = _native.build_batch([(None, os.urandom(1024), [], now) for _ in range(size_kib)])
    body = {
        "transactional_id": None,
        "acks": 1,
        "timeout_ms": 30_000,
        "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": batch}]}],
    }
    frame = bytes(encode_request(0, 9, 1, "produce-cpu-bench", body))
    peer, warm_up = start(tree, workdir)
    try:
        host, port = peer.bootstrap.rsplit(":", 1)
        with socket.create_connection((host, int(port))) as s:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            pending = bytearray()

            def read_answers(n: int) -> None:
                while n:
                    while (
                        len(pending) < 4 or len(pending) < 4 + struct.unpack_from(">i", pending)[0]
                    ):
                        got = s.recv(1 << 16)
                        if not got:
                            raise RuntimeError("the broker closed the connection")
                        pending.extend(got)
                    (size,) = struct.unpack_from(">i", pending)
                    error = struct.unpack_from(">h", pending, _ERROR_AT)[0]
                    if error:
                        raise RuntimeError(f"produce failed: error {error}")
                    del pending[: 4 + size]
                    n -= 1

            for _ in range(warm_up):
                s.sendall(frame)
                read_answers(1)
            switches, cpu, t0 = (
                voluntary_switches(peer.pid),
                peer.cpu_seconds(),
                time.perf_counter(),
            )
            outstanding = 0
            for _ in range(requests):
                s.sendall(frame)
                outstanding += 1
                if outstanding == IN_FLIGHT:
                    read_answers(1)
                    outstanding -= 1
            read_answers(outstanding)
            wall = time.perf_counter() - t0
            cpu = peer.cpu_seconds() - cpu
            switches = voluntary_switches(peer.pid) - switches
    finally:
        peer.stop()
    return 1e6 * cpu / requests, switches / requests, requests * len(batch) / wall / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--trees",
        required=True,
        help="two python/ dirs, comma-separated; `kafka` for Apache Kafka (make kafka)",
    )
    parser.add_argument("--size-kib", type=int, default=1000, help="records (1 KiB) a request")
    parser.add_argument("--requests", type=int, default=1500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--confluent",
        type=float,
        metavar="SECONDS",
        help="instead of the raw client: confluent-kafka producing 1 KiB records to one "
        "partition for SECONDS (figures per MiB; librdkafka's requests are ~1 MiB)",
    )
    parser.add_argument("--acks", default="1", help="with --confluent and 1 producer: 1 or all")
    parser.add_argument(
        "--producers",
        type=int,
        default=1,
        help="with --confluent: producer processes (more than 1: to six partitions)",
    )
    args = parser.parse_args()
    trees = [t if t == "kafka" else os.path.abspath(t) for t in args.trees.split(",")]
    workdir = tempfile.mkdtemp(prefix="pylog-produce-cpu-")
    got: dict[str, list[tuple[float, float, float]]] = {t: [] for t in trees}
    unit = "MiB" if args.confluent else "request"
    try:
        for r in range(args.rounds):
            for tree in trees if r % 2 == 0 else trees[::-1]:
                run_dir = tempfile.mkdtemp(dir=workdir)
                if args.confluent:
                    us, sw, mbs = confluent_run(
                        tree, args.confluent, run_dir, args.producers, args.acks
                    )
                else:
                    us, sw, mbs = one_run(tree, args.size_kib, args.requests, run_dir)
                shutil.rmtree(run_dir, ignore_errors=True)  # a full page cache skews the next
                got[tree].append((us, sw, mbs))
                print(f"  {tree}: {us:,.0f} µs CPU/{unit}, {sw:.1f} voluntary switches/{unit}, "
                      f"{mbs:,.0f} MB/s (load {os.getloadavg()[0]:.1f})", flush=True)  # fmt: skip
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    for tree, runs in got.items():
        us = statistics.median(x[0] for x in runs)
        what = (
            "confluent-kafka 1 KiB records" if args.confluent else f"{args.size_kib} KiB requests"
        )
        per_gb = us / 1e6 / ((1024 if args.confluent else args.size_kib) * 1024 / 1e9)
        print(f"{tree}: {what}, median {us:,.0f} µs CPU/{unit} ({per_gb:.2f} s/GB), "
              f"{statistics.median(x[1] for x in runs):.1f} switches/{unit}, "
              f"{statistics.median(x[2] for x in runs):,.0f} MB/s")  # fmt: skip


if __name__ == "__main__":
    main()
