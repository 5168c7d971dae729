"""What one oversized request costs a broker process: its peak RSS and how long
other clients wait meanwhile (what the protocol's element budget and the paced
handlers bound).

A real `pylog broker start` subprocess (Kafka's default socket.request.max.bytes,
100 MiB); a canary connection sends ApiVersions every 5 ms and times each
answer while one big request goes in on another connection:

- ``metadata-5m``: a 10 MB Metadata v1 request naming 5,000,000 topics (empty
  names, two bytes each) — refused by the codec now (MAX_REQUEST_ELEMENTS);
- ``metadata-99k``: 99,000 distinct invalid names of 100 bytes (a 10 MB frame,
  within the element budget: one error entry each in a 10 MB answer);
- ``<api>-99k``: 99,000 partitions (or resources, or groups) in one ListOffsets,
  Produce, Fetch, OffsetCommit, OffsetFetch, OffsetForLeaderEpoch,
  DescribeConfigs, DescribeGroups or DeleteRecords request.

    .venv/bin/python bench/hostile_request_bench.py [--only metadata-5m,produce-99k]

Prints, per request: the frame, the answer (or that the connection was
closed), the canary's worst latency while it was handled, and the broker's RSS
peak (VmHWM, since the broker started: the cases run in order on one broker).
Nothing here fails on timing.
"""

from __future__ import annotations

import argparse
import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pylog.protocol import ApiKey, encode_request
from pylog.protocol.client import KafkaConnection

N = 99_000


def _metadata_frame(count: int, name_len: int) -> bytes:
    head = encode_request(ApiKey.METADATA, 1, 7, "big", {"topics": []})[4:-4]
    if name_len == 0:
        names = b"\x00\x00" * count
    else:
        names = b"".join(
            struct.pack(">h", name_len) + (b"!%06d" % i).ljust(name_len, b"x") for i in range(count)
        )
    frame = head + struct.pack(">i", count) + names
    return struct.pack(">i", len(frame)) + frame


def _req(api: int, version: int, body: dict[str, Any]) -> Callable[[], bytes]:
    return lambda: encode_request(api, version, 7, "big", body)


def _cases() -> dict[str, Callable[[], bytes]]:
    parts = range(N)
    return {
        "metadata-5m": lambda: _metadata_frame(5_000_000, 0),
        "metadata-99k": lambda: _metadata_frame(N, 100),
        "listoffsets-99k": _req(ApiKey.LIST_OFFSETS, 7, {"topics": [{"name": "t", "partitions": [
            {"partition_index": p, "timestamp": -1} for p in parts]}]}),
        "produce-99k": _req(ApiKey.PRODUCE, 9, {"acks": 1, "timeout_ms": 1000, "topic_data": [
            {"name": "t", "partition_data": [{"index": p, "records": None} for p in parts]}]}),
        "fetch-99k": _req(ApiKey.FETCH, 12, {"max_wait_ms": 0, "min_bytes": 0, "topics": [
            {"topic": "t", "partitions": [
                {"partition": p, "fetch_offset": 0, "partition_max_bytes": 1024}
                for p in parts]}]}),
        "offsetcommit-99k": _req(ApiKey.OFFSET_COMMIT, 8, {
            "group_id": "g", "generation_id_or_member_epoch": -1, "topics": [
                {"name": "t", "partitions": [
                    {"partition_index": p, "committed_offset": 0} for p in parts]}]}),
        "offsetfetch-99k": _req(ApiKey.OFFSET_FETCH, 7, {"group_id": "g", "topics": [
            {"name": "t", "partition_indexes": list(parts)}]}),
        "offsetforleaderepoch-99k": _req(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, {"topics": [
            {"topic": "t", "partitions": [{"partition": p, "leader_epoch": 0} for p in parts]}]}),
        "describeconfigs-99k": _req(ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [
            {"resource_type": 2, "resource_name": f"x{i}"} for i in parts]}),
        "describegroups-99k": _req(ApiKey.DESCRIBE_GROUPS, 5, {
            "groups": [f"g{i}" for i in parts]}),
        "deleterecords-99k": _req(ApiKey.DELETE_RECORDS, 2, {"timeout_ms": 1000, "topics": [
            {"name": "t", "partitions": [{"partition_index": p, "offset": 0} for p in parts]}]}),
    }  # fmt: skip


class Broker:
    def __init__(self, data: str) -> None:
        cmd = [
            str(Path(sys.executable).with_name("pylog")), "broker", "start",
            "--log-level", "WARNING",
            "--override", "listeners=PLAINTEXT://127.0.0.1:0",
            "--override", f"log.dirs={data}",
            "--override", "offsets.topic.num.partitions=1",
        ]  # fmt: skip
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        self.port = int(line.split("127.0.0.1:")[1].split()[0])

    def status_mb(self, key: str) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) // 1024
        return -1

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


def _send(port: int, frame: bytes) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=300) as s:
        s.sendall(frame)
        head = b""
        while len(head) < 4:
            got = s.recv(4 - len(head))
            if not got:
                return "connection closed"
            head += got
        size = struct.unpack(">i", head)[0]
        left = size
        while left:
            got = s.recv(min(1 << 20, left))
            if not got:
                return "connection closed mid-answer"
            left -= len(got)
        return f"{size / 1e6:.2f} MB answer"


def run_case(broker: Broker, name: str, frame: bytes) -> None:
    latencies: list[tuple[float, float]] = []
    stop = threading.Event()

    def canary() -> None:
        with KafkaConnection(f"127.0.0.1:{broker.port}", timeout=300) as c:
            while not stop.is_set():
                t = time.perf_counter()
                c.request(ApiKey.API_VERSIONS, 0, {})
                latencies.append((t, time.perf_counter() - t))
                time.sleep(0.005)

    thread = threading.Thread(target=canary, daemon=True)
    thread.start()
    time.sleep(0.3)
    start = time.perf_counter()
    answer = _send(broker.port, frame)
    took = time.perf_counter() - start
    time.sleep(0.3)
    stop.set()
    thread.join(60)
    during = [d for t, d in latencies if t >= start - 0.05] or [0.0]
    peak = broker.status_mb("VmHWM")
    print(
        f"{name:26s} {len(frame) / 1e6:6.2f} MB frame -> {answer:28s} in {took:6.2f} s; "
        f"canary worst {max(during) * 1000:7.0f} ms; broker RSS peak {peak} MB",
        flush=True,
    )


def main() -> None:
    cases = _cases()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(cases), help="comma-separated subset")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pylog-hostile-") as data:
        broker = Broker(os.path.join(data, "logs"))
        try:
            print(f"broker RSS at start {broker.status_mb('VmRSS')} MB")
            with KafkaConnection(f"127.0.0.1:{broker.port}") as c:
                topic = {"name": "t", "num_partitions": 1, "replication_factor": 1}
                c.request(ApiKey.CREATE_TOPICS, 5, {"topics": [topic], "timeout_ms": 5000})
                c.request(ApiKey.FIND_COORDINATOR, 3, {"key": "g", "key_type": 0})
            for name in args.only.split(","):
                run_case(broker, name, cases[name]())
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
