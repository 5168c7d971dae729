"""The KafkaController on a real ZooKeeper with three real broker processes:
one controller (``/controller``, ``/controller_epoch`` in Kafka's format), an
RF-3 topic placed by it on every broker, a new leader from the ISR when the
leader's broker is killed (an idempotent acks=all producer loses nothing), a
new controller when the controller's broker is killed, and the killed
brokers taken back as replicas when they return."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from broker_process import BrokerProcess, topic_name
from kazoo.client import KazooClient

from pylog.testing import ZooKeeperServer

WAIT = 30.0  # upper bound for waits: only catches hangs
SESSION_MS = 3000


def _wait_for(pred: Callable[[], object], what: str, timeout: float = WAIT) -> None:
    pause = threading.Event()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        pause.wait(0.05)
    raise AssertionError(f"timed out waiting for {what}")


class Cluster:
    def __init__(self, zk: KazooClient, connect: str, tmp: Path) -> None:
        self.zk = zk
        self.connect = connect
        self.tmp = tmp
        self.brokers: dict[int, BrokerProcess] = {}

    def start(self, broker_id: int) -> BrokerProcess:
        b = self.brokers.get(broker_id)
        if b is None:
            b = BrokerProcess(
                self.tmp / f"b{broker_id}",
                {
                    "broker.id": broker_id,
                    "zookeeper.connect": self.connect,
                    "zookeeper.session.timeout.ms": SESSION_MS,
                    "replica.lag.time.max.ms": 3000,
                    "replica.fetch.wait.max.ms": 100,
                },
            )
            self.brokers[broker_id] = b
        return b.start()

    def kill(self, broker_id: int) -> None:
        b = self.brokers[broker_id]
        assert b.proc is not None
        b.proc.send_signal(signal.SIGKILL)
        b.proc.wait(10)
        b.proc = None

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values() if b.proc is not None)

    def json(self, path: str) -> dict[str, object] | None:
        if self.zk.exists(path) is None:
            return None
        doc = json.loads(self.zk.get(path)[0])
        assert isinstance(doc, dict)
        return doc

    def controller(self) -> int | None:
        doc = self.json("/controller")
        return int(doc["brokerid"]) if doc else None  # type: ignore[call-overload]

    def epoch(self) -> int:
        return int(self.zk.get("/controller_epoch")[0])

    def state(self, topic: str, p: int = 0) -> dict[str, object] | None:
        return self.json(f"/brokers/topics/{topic}/partitions/{p}/state")


@pytest.fixture
def cluster(pylog_zookeeper: ZooKeeperServer, tmp_path: Path) -> Iterator[Cluster]:
    chroot = f"ctrl-{uuid.uuid4().hex[:8]}"
    zk = KazooClient(hosts=f"{pylog_zookeeper.connect}/{chroot}")
    boot = KazooClient(hosts=pylog_zookeeper.connect)
    boot.start(timeout=WAIT)
    boot.ensure_path(f"/{chroot}")
    boot.stop()
    boot.close()
    zk.start(timeout=WAIT)
    c = Cluster(zk, f"{pylog_zookeeper.connect}/{chroot}", tmp_path)
    try:
        yield c
    finally:
        for b in c.brokers.values():
            if b.proc is not None:
                if b.proc.poll() is None:
                    os.kill(b.proc.pid, signal.SIGCONT)
                b.stop()
        zk.stop()
        zk.close()


def _create_topic(bootstrap: str, topic: str, partitions: int, rf: int, **configs: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(topic, partitions, rf, config=configs)], operation_timeout=20
    )
    futures[topic].result(30)


def test_one_controller_and_an_rf3_topic_on_every_broker(cluster: Cluster) -> None:
    for b in (1, 2, 3):
        cluster.start(b)
    _wait_for(lambda: cluster.controller() is not None, "a controller")
    doc = cluster.json("/controller")
    assert doc is not None and doc["version"] == 1 and isinstance(doc["timestamp"], str)
    first = cluster.controller()
    assert first in (1, 2, 3)
    assert cluster.epoch() >= 1

    topic = topic_name("rf3")
    _create_topic(cluster.bootstrap, topic, 3, 3, **{"min.insync.replicas": "2"})
    assignment = cluster.json(f"/brokers/topics/{topic}")
    assert assignment is not None
    parts = assignment["partitions"]
    assert isinstance(parts, dict) and sorted(parts) == ["0", "1", "2"]
    assert all(sorted(r) == [1, 2, 3] for r in parts.values())
    # Round-robin: each broker is the preferred leader of one partition.
    assert sorted(r[0] for r in parts.values()) == [1, 2, 3]
    for p in range(3):
        _wait_for(lambda p=p: cluster.state(topic, p) is not None, f"state of {topic}-{p}")
        state = cluster.state(topic, p)
        assert state is not None
        assert state["leader"] == parts[str(p)][0]
        assert sorted(state["isr"]) == [1, 2, 3]  # type: ignore[arg-type]
        assert state["leader_epoch"] == 0
    assert cluster.controller() == first  # still one controller, the same
