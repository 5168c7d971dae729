"""Consumer-group figures for `make bench` (issue 4), against a real
`pylog broker start` subprocess (group.initial.rebalance.delay.ms=0):

1. rebalance: 9 confluent-kafka consumers (threads) share a 20-partition
   topic under a steady produce load; a 10th joins (then leaves). The figure
   is the time from the join (the leave) until every member has its new
   assignment and has consumed a record from it;
1b. the same with KIP-848 members (``group.protocol=consumer``), at Kafka's
   default heartbeat interval and at 500 ms: the time until the group holds
   all 20 partitions again and the members that gained some consume them;
1c. steady heartbeats/s, pipelined: ConsumerGroupHeartbeat against the
   classic Heartbeat, in the same run;
2. OffsetCommit requests/s: (a) pipelined over one socket with pylog's codec
   (v8, 1 partition per request, 64 in flight); (b) a confluent-kafka
   ``commit(asynchronous=False)`` loop (one round trip at a time);
3. coordinator load: 100,000 committed offsets (1,000 groups x 100
   partitions), then a restart; the broker's own "loaded ... in N ms" line
   and the client-side time until OffsetFetch stops answering
   COORDINATOR_LOAD_IN_PROGRESS.

    .venv/bin/python bench/group_bench.py [--only rebalance,rebalance848,heartbeat,commit,load]

Every stage is bounded (about 2 minutes in all). Nothing fails on timing.
"""

from __future__ import annotations

import argparse
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pylog.protocol import ApiKey
from pylog.protocol.client import KafkaConnection

PYLOG = str(Path(sys.executable).with_name("pylog"))


class Broker:
    def __init__(self, data: Path) -> None:
        self.data = data
        self.port = 0
        self.proc: subprocess.Popen[str] | None = None
        self.stderr_path = data.parent / "broker.err"
        self.overrides: list[str] = []

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> float:
        t0 = time.perf_counter()
        cmd = [
            PYLOG, "broker", "start", "--log-level", "INFO",
            "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
            "--override", f"log.dirs={self.data}",
            "--override", "group.initial.rebalance.delay.ms=0",
        ]  # fmt: skip
        for kv in self.overrides:
            cmd += ["--override", kv]
        err = open(self.stderr_path, "a")  # noqa: SIM115 - the child keeps it
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert "started: PLAINTEXT://127.0.0.1:" in line, line
        self.port = int(line.split("127.0.0.1:")[1].split()[0])
        return time.perf_counter() - t0

    def stop(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(60)
        self.proc = None


def commit_body(group: str, topic: str, parts: range, offset: int) -> dict[str, Any]:
    return {
        "group_id": group,
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "topics": [
            {
                "name": topic,
                "partitions": [
                    {"partition_index": p, "committed_offset": offset, "committed_metadata": ""}
                    for p in parts
                ],
            }
        ],
    }


# ---------------------------------------------------------------- 1. rebalance


def bench_rebalance(broker: Broker) -> None:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic, group = "rebalance", "g-rebalance"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 20, 1)])[topic].result(20)
    stop_all = threading.Event()

    def load() -> None:
        p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
        i = 0
        while not stop_all.is_set():
            for part in range(20):
                p.produce(topic, b"x", partition=part)
            i += 1
            p.poll(0)
            time.sleep(0.01)
        p.flush(10)

    class Member:
        def __init__(self, n: int) -> None:
            self.n = n
            self.assigned_at = 0.0
            self.consumed_after_assign = 0.0
            self.parts = 0
            self.stop = threading.Event()
            self.thread = threading.Thread(target=self.run, daemon=True)
            self.thread.start()

        def run(self) -> None:
            def on_assign(c: Any, parts: list[Any]) -> None:
                self.assigned_at = time.perf_counter()
                self.consumed_after_assign = 0.0
                self.parts = len(parts)

            c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                          "auto.offset.reset": "latest", "enable.auto.commit": False,
                          "session.timeout.ms": 10000, "heartbeat.interval.ms": 500})  # fmt: skip
            c.subscribe([topic], on_assign=on_assign)
            while not self.stop.is_set():
                m = c.poll(0.05)
                if m is not None and m.error() is None and not self.consumed_after_assign:
                    self.consumed_after_assign = time.perf_counter()
            c.close()

    loader = threading.Thread(target=load, daemon=True)
    loader.start()
    members = [Member(i) for i in range(9)]

    def settled(ms: list[Member], since: float) -> bool:
        return (
            all(m.assigned_at > since and m.consumed_after_assign > m.assigned_at for m in ms)
            and sum(m.parts for m in ms) == 20
        )

    deadline = time.monotonic() + 60
    while not settled(members, 0) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1)
    t0 = time.perf_counter()
    tenth = Member(9)
    members.append(tenth)
    deadline = time.monotonic() + 60
    while not settled(members, t0) and time.monotonic() < deadline:
        time.sleep(0.01)
    join_ms = (max(m.consumed_after_assign for m in members) - t0) * 1000
    assigned_ms = (max(m.assigned_at for m in members) - t0) * 1000
    time.sleep(1)
    t1 = time.perf_counter()
    tenth.stop.set()
    rest = members[:9]
    deadline = time.monotonic() + 60
    while not settled(rest, t1) and time.monotonic() < deadline:
        time.sleep(0.01)
    leave_ms = (max(m.consumed_after_assign for m in rest) - t1) * 1000
    stop_all.set()
    for m in members:
        m.stop.set()
    for m in members:
        m.thread.join(15)
    loader.join(15)
    print(
        "rebalance, 10th member joins 9 (20 partitions, eager range): every member "
        f"assigned after {assigned_ms:.0f} ms, consuming again after {join_ms:.0f} ms"
    )
    print(f"rebalance, the 10th member leaves (LeaveGroup): the 9 consuming again after "
          f"{leave_ms:.0f} ms")  # fmt: skip


def bench_rebalance_848(broker: Broker, heartbeat_ms: int) -> None:
    """The same scene with KIP-848 members (group.protocol=consumer): the
    broker assigns; only the partitions that move are revoked, each by its
    owner on its next heartbeat (``group.consumer.heartbeat.interval.ms``)."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic, group = f"rebalance848-{heartbeat_ms}", f"g-rebalance848-{heartbeat_ms}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 20, 1)])[topic].result(20)
    stop_all = threading.Event()

    def load() -> None:
        p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
        while not stop_all.is_set():
            for part in range(20):
                p.produce(topic, b"x", partition=part)
            p.poll(0)
            time.sleep(0.01)
        p.flush(10)

    class Member:
        def __init__(self) -> None:
            self.parts: set[int] = set()
            self.changed_at = 0.0
            self.consumed_after_change = 0.0
            self.stop = threading.Event()
            self.thread = threading.Thread(target=self.run, daemon=True)
            self.thread.start()

        def run(self) -> None:
            c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                          "group.protocol": "consumer", "auto.offset.reset": "latest",
                          "enable.auto.commit": False})  # fmt: skip
            c.subscribe([topic])
            while not self.stop.is_set():
                m = c.poll(0.05)
                now = {tp.partition for tp in c.assignment()}
                if now != self.parts:
                    gained = bool(now - self.parts)
                    self.parts = now
                    if gained:
                        self.changed_at = time.perf_counter()
                        self.consumed_after_change = 0.0
                if m is not None and m.error() is None and not self.consumed_after_change:
                    self.consumed_after_change = time.perf_counter()
            c.close()

    def settled(ms: list[Member], since: float) -> bool:
        if sum(len(m.parts) for m in ms) != 20 or not all(m.parts for m in ms):
            return False
        moved = [m for m in ms if m.changed_at > since]
        return bool(moved) and all(m.consumed_after_change > m.changed_at for m in moved)

    loader = threading.Thread(target=load, daemon=True)
    loader.start()
    members = [Member() for _ in range(9)]
    deadline = time.monotonic() + 120
    while not settled(members, 0) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1)
    before = [set(m.parts) for m in members]
    t0 = time.perf_counter()
    members.append(Member())
    deadline = time.monotonic() + 120
    while not settled(members, t0) and time.monotonic() < deadline:
        time.sleep(0.01)
    join_ms = (time.perf_counter() - t0) * 1000
    untouched = sum(1 for m, was in zip(members[:9], before, strict=True) if m.parts == was)
    time.sleep(1)
    t1 = time.perf_counter()
    members[9].stop.set()
    rest = members[:9]
    deadline = time.monotonic() + 120
    while not settled(rest, t1) and time.monotonic() < deadline:
        time.sleep(0.01)
    leave_ms = (time.perf_counter() - t1) * 1000
    stop_all.set()
    for m in members:
        m.stop.set()
    for m in members:
        m.thread.join(15)
    loader.join(15)
    print(
        f"KIP-848 rebalance (heartbeat interval {heartbeat_ms} ms), 10th member joins 9 "
        f"(20 partitions, uniform): all 20 held and the movers consuming after {join_ms:.0f} ms "
        f"({untouched} of the 9 untouched; the others only gave up partitions and "
        "went on consuming the rest)"
    )
    print(f"KIP-848 rebalance, the 10th member leaves: its partitions consumed by the 9 after "
          f"{leave_ms:.0f} ms")  # fmt: skip


def bench_heartbeat(broker: Broker, seconds: float = 4.0) -> None:
    """Steady heartbeats (nothing changes, nothing written), pipelined on one
    socket (64 in flight): KIP-848's ConsumerGroupHeartbeat of 8 reconciled
    members against the classic Heartbeat of a classic group's member."""
    import uuid

    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("hb", 8, 1)])["hb"].result(20)
    c = KafkaConnection(broker.bootstrap)
    for g in ("hb848", "hbclassic"):
        while c.request(ApiKey.FIND_COORDINATOR, 3, {"key": g, "key_type": 0}).error_code:
            time.sleep(0.2)
    hb = ApiKey.CONSUMER_GROUP_HEARTBEAT
    epoch: dict[str, int] = {}
    owned: dict[str, list[dict[str, Any]]] = {}
    members = [str(uuid.uuid4()) for _ in range(8)]
    for m in members:
        r = c.request(hb, 1, {"group_id": "hb848", "member_id": m, "member_epoch": 0,
                              "rebalance_timeout_ms": 30000, "subscribed_topic_names": ["hb"],
                              "topic_partitions": []})  # fmt: skip
        epoch[m], owned[m] = r.member_epoch, []
    for _ in range(10):  # reconcile: every member at the group's epoch
        for m in members:
            r = c.request(hb, 1, {"group_id": "hb848", "member_id": m, "member_epoch": epoch[m],
                                  "topic_partitions": owned[m]})  # fmt: skip
            epoch[m] = r.member_epoch
            if r.assignment is not None:
                owned[m] = [{"topic_id": t.topic_id, "partitions": t.partitions}
                            for t in r.assignment.topic_partitions]  # fmt: skip

    def rate(key: int, version: int, body: Callable[[int], dict[str, Any]]) -> float:
        n = inflight = 0
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            while inflight < 64:
                c.send(key, version, body(n))
                inflight += 1
                n += 1
            assert c.recv(key, version).error_code == 0
            inflight -= 1
        while inflight:
            c.recv(key, version)
            inflight -= 1
        return n / (time.perf_counter() - t0)

    def kip848(n: int) -> dict[str, Any]:
        m = members[n % 8]
        return {"group_id": "hb848", "member_id": m, "member_epoch": epoch[m]}

    new = rate(hb, 1, kip848)
    join = {"group_id": "hbclassic", "session_timeout_ms": 30000, "rebalance_timeout_ms": 30000,
            "member_id": "", "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}]}  # fmt: skip
    j = c.request(ApiKey.JOIN_GROUP, 5, join)
    j = c.request(ApiKey.JOIN_GROUP, 5, {**join, "member_id": j.member_id})
    c.request(ApiKey.SYNC_GROUP, 3, {"group_id": "hbclassic", "generation_id": j.generation_id,
              "member_id": j.member_id,
              "assignments": [{"member_id": j.member_id, "assignment": b""}]})  # fmt: skip
    beat = {"group_id": "hbclassic", "generation_id": j.generation_id, "member_id": j.member_id}
    classic = rate(ApiKey.HEARTBEAT, 4, lambda n: beat)
    c.close()
    print(f"steady heartbeats, pipelined (64 in flight): ConsumerGroupHeartbeat {new:,.0f}/s, "
          f"classic Heartbeat {classic:,.0f}/s ({new / classic:.2f}x)")  # fmt: skip


# ---------------------------------------------------------------- 2. commit rate


def bench_commit(broker: Broker, seconds: float = 4.0) -> None:
    from confluent_kafka import Consumer, TopicPartition

    c = KafkaConnection(broker.bootstrap, timeout=None, client_id="bench")
    c.request(ApiKey.FIND_COORDINATOR, 3, {"key": "g-commit", "key_type": 0})
    window = 64
    sent = done = 0
    t0 = time.perf_counter()
    end = t0 + seconds
    while time.perf_counter() < end or done < sent:
        while sent - done < window and time.perf_counter() < end:
            c.send(ApiKey.OFFSET_COMMIT, 8, commit_body("g-commit", "t", range(1), sent))
            sent += 1
        r = c.recv(ApiKey.OFFSET_COMMIT, 8)
        assert r.topics[0].partitions[0].error_code == 0
        done += 1
    rate = done / (time.perf_counter() - t0)
    c.close()
    print(f"OffsetCommit, pipelined over one socket (pylog codec, v8, 1 partition, "
          f"{window} in flight): {rate:,.0f} requests/s")  # fmt: skip

    k = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g-commit-ck",
                  "enable.auto.commit": False})  # fmt: skip
    n = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        k.commit(offsets=[TopicPartition("t", 0, n)], asynchronous=False)
        n += 1
    rate = n / (time.perf_counter() - t0)
    k.close()
    print(f"OffsetCommit, confluent-kafka commit(asynchronous=False) loop: {rate:,.0f} "
          f"commits/s")  # fmt: skip


# ---------------------------------------------------------------- 3. load time


def bench_load(broker: Broker, groups: int = 1000, partitions: int = 100) -> None:
    c = KafkaConnection(broker.bootstrap, timeout=None, client_id="bench")
    for g in range(0, groups, 50):
        keys = [f"load-{i}" for i in range(g, min(g + 50, groups))]
        c.send(ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": keys})
    for _ in range(0, groups, 50):
        c.recv(ApiKey.FIND_COORDINATOR, 4)
    t0 = time.perf_counter()
    window = 32
    sent = done = 0
    while done < groups:
        while sent < groups and sent - done < window:
            body = commit_body(f"load-{sent}", "load-topic", range(partitions), 1000 + sent)
            c.send(ApiKey.OFFSET_COMMIT, 8, body)
            sent += 1
        r = c.recv(ApiKey.OFFSET_COMMIT, 8)
        assert all(p.error_code == 0 for p in r.topics[0].partitions)
        done += 1
    write_s = time.perf_counter() - t0
    c.close()
    total = groups * partitions
    print(f"coordinator load: wrote {total:,} committed offsets in {write_s:.1f} s "
          f"({total / write_s:,.0f} offsets/s)")  # fmt: skip
    broker.stop()
    mark = broker.stderr_path.stat().st_size
    t0 = time.perf_counter()
    broker.start()
    c = KafkaConnection(broker.bootstrap, timeout=None, client_id="bench")
    probe = f"load-{groups - 1}"
    while True:
        r = c.request(ApiKey.OFFSET_FETCH, 7, {"group_id": probe, "topics": None})
        if r.error_code != 14:  # COORDINATOR_LOAD_IN_PROGRESS
            break
        time.sleep(0.005)
    ready_s = time.perf_counter() - t0
    got = sum(len(t.partitions) for t in r.topics)
    assert got == partitions, got
    c.close()
    # The broker logs once every partition is loaded (the probe's may be first).
    m = None
    deadline = time.monotonic() + 60
    while m is None and time.monotonic() < deadline:
        with open(broker.stderr_path) as f:
            f.seek(mark)
            text = f.read()
        m = re.search(r"loaded (\d+) groups from (\d+) partitions of __consumer_offsets in "
                      r"(\d+) ms", text)  # fmt: skip
        time.sleep(0.05)
    loaded = f"{m.group(3)} ms for {m.group(1)} groups" if m else "(no log line)"
    print(f"coordinator load of {total:,} offsets: {loaded} (the broker's figure); a client's "
          f"OffsetFetch answered {ready_s * 1000:.0f} ms after the restart began")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default="rebalance,rebalance848,heartbeat,commit,load")
    args = ap.parse_args()
    only = set(args.only.split(","))
    tmp = Path(tempfile.mkdtemp(prefix="pylog-group-bench-"))
    broker = Broker(tmp / "data")
    # KIP-848 at Kafka's default heartbeat interval (5 s), and at 500 ms
    broker.overrides = [
        "group.consumer.min.heartbeat.interval.ms=500",
        "group.consumer.heartbeat.interval.ms=5000",
    ]
    try:
        broker.start()
        if "rebalance" in only:
            bench_rebalance(broker)
        if "rebalance848" in only:
            bench_rebalance_848(broker, 5000)
            broker.stop()
            broker.overrides[-1] = "group.consumer.heartbeat.interval.ms=500"
            broker.start()
            bench_rebalance_848(broker, 500)
        if "heartbeat" in only:
            bench_heartbeat(broker)
        if "commit" in only:
            bench_commit(broker)
        if "load" in only:
            bench_load(broker)
    finally:
        if broker.proc is not None:
            broker.proc.kill()
            broker.proc.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
