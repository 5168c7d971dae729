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
import socket
import threading
import time
import urllib.request
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

    def start(self, broker_id: int, **extra: object) -> BrokerProcess:
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
                    **extra,
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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _metric(port: int, name: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    raise AssertionError(f"no metric {name}")


def test_one_controller_and_an_rf3_topic_on_every_broker(cluster: Cluster) -> None:
    metrics_ports = {b: _free_port() for b in (1, 2, 3)}
    for b in (1, 2, 3):
        cluster.start(b, **{"metrics.port": metrics_ports[b]})
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
    for b, port in metrics_ports.items():
        active = 1.0 if b == first else 0.0
        state = 4.0 if b == first else 3.0  # RunningAsController, RunningAsBroker
        assert _metric(port, "kafka_controller_kafkacontroller_activecontrollercount") == active
        assert _metric(port, "kafka_server_kafkaserver_brokerstate") == state
    assert (
        _metric(metrics_ports[first], "kafka_controller_kafkacontroller_offlinepartitionscount")
        == 0
    )


class IdempotentProducer(threading.Thread):
    """An idempotent acks=all producer on pylog's codec: one batch of one
    record at a time to the leader the state znode names, the same batch
    (same sequence) again until acknowledged. (confluent-kafka needs Metadata
    to name other brokers' leaders: the MetadataCache work.)"""

    def __init__(self, cluster: Cluster, topic: str) -> None:
        super().__init__(daemon=True)
        self.cluster = cluster
        self.topic = topic
        self.acked: list[bytes] = []
        self.stop_event = threading.Event()
        self.errors: dict[str, int] = {}

    def _leader_conn(self) -> tuple[int, object] | None:
        from pylog.protocol.client import KafkaConnection

        state = self.cluster.state(self.topic)
        if state is None:
            return None
        leader = int(state["leader"])  # type: ignore[call-overload]
        b = self.cluster.brokers.get(leader)
        if b is None or b.proc is None:
            return None
        return leader, KafkaConnection(b.bootstrap, timeout=10)

    def run(self) -> None:
        from conftest import build_batch

        from pylog.protocol import ApiKey
        from pylog.protocol.client import KafkaConnection
        from pylog.protocol.messages import (
            InitProducerIdRequest,
            InitProducerIdResponse,
            ProduceRequest,
            ProduceResponse,
        )
        from pylog.protocol.messages.produce_request import (
            PartitionProduceData,
            TopicProduceData,
        )

        with KafkaConnection(self.cluster.bootstrap.split(",")[0]) as c:
            init = c.request(
                ApiKey.INIT_PRODUCER_ID,
                1,
                InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60_000),
                InitProducerIdResponse,
            )
        assert init.error_code == 0
        pid, epoch = init.producer_id, init.producer_epoch
        seq = 0
        conn: KafkaConnection | None = None
        while not self.stop_event.is_set():
            value = b"rec-%06d" % seq
            batch = build_batch([value], producer_id=pid, producer_epoch=epoch, base_sequence=seq)
            body = ProduceRequest(
                transactional_id=None,
                acks=-1,
                timeout_ms=5000,
                topic_data=[
                    TopicProduceData(
                        name=self.topic,
                        partition_data=[PartitionProduceData(index=0, records=memoryview(batch))],
                    )
                ],
            )
            try:
                if conn is None:
                    got = self._leader_conn()
                    if got is None:
                        time.sleep(0.05)
                        continue
                    conn = got[1]  # type: ignore[assignment]
                assert conn is not None
                r = conn.request(ApiKey.PRODUCE, 8, body, ProduceResponse)
                code = r.responses[0].partition_responses[0].error_code
            except Exception as e:
                self.errors[type(e).__name__] = self.errors.get(type(e).__name__, 0) + 1
                if conn is not None:
                    conn.close()
                conn = None
                time.sleep(0.05)
                continue
            if code in (0, 46):  # NONE, DUPLICATE_SEQUENCE_NUMBER: written before
                self.acked.append(value)
                seq += 1
                continue
            self.errors[str(code)] = self.errors.get(str(code), 0) + 1
            conn.close()
            conn = None
            time.sleep(0.05)
        if conn is not None:
            conn.close()


def _log_bytes(b: BrokerProcess, topic: str) -> bytes:
    d = b.data / f"{topic}-0"
    return b"".join(p.read_bytes() for p in sorted(d.glob("*.log")))


def test_leader_and_controller_failover(cluster: Cluster) -> None:
    t0 = time.monotonic()
    for b in (1, 2, 3):
        cluster.start(b)
    _wait_for(lambda: cluster.controller() is not None, "a controller")
    topic = topic_name("failover")
    _create_topic(cluster.bootstrap, topic, 1, 3, **{"min.insync.replicas": "2"})
    _wait_for(lambda: cluster.state(topic) is not None, "the partition state")
    first = cluster.state(topic)
    assert first is not None and sorted(first["isr"]) == [1, 2, 3]  # type: ignore[arg-type]

    producer = IdempotentProducer(cluster, topic)
    producer.start()
    try:
        _wait_for(lambda: len(producer.acked) >= 50, "acknowledged records")

        # kill -9 the leader's broker: a new leader from the ISR, a new leader epoch.
        old_leader = int(first["leader"])  # type: ignore[call-overload]
        cluster.kill(old_leader)
        t_kill = time.monotonic()

        def moved() -> bool:
            s = cluster.state(topic)
            return s is not None and s["leader"] not in (old_leader, -1)

        _wait_for(moved, "a new leader")
        after = cluster.state(topic)
        assert after is not None
        print(f"new leader {after['leader']} {time.monotonic() - t_kill:.1f}s after kill -9")
        assert after["leader_epoch"] == 1
        assert old_leader not in after["isr"]  # type: ignore[operator]
        assert after["leader"] in first["isr"]  # type: ignore[operator]
        n = len(producer.acked)
        _wait_for(lambda: len(producer.acked) >= n + 50, "records acknowledged by the new leader")

        # The killed broker returns: it follows the new leader.
        cluster.start(old_leader)

        # Kill the controller's broker: another broker takes over, epoch + 1.
        controller = cluster.controller()
        assert controller is not None
        epoch = cluster.epoch()
        cluster.kill(controller)
        _wait_for(
            lambda: cluster.controller() not in (None, controller),
            "a new controller",
        )
        assert cluster.epoch() == epoch + 1
        n = len(producer.acked)
        _wait_for(lambda: len(producer.acked) >= n + 50, "records acknowledged after it")
        cluster.start(controller)
        n = len(producer.acked)
        _wait_for(lambda: len(producer.acked) >= n + 50, "records acknowledged at the end")
    finally:
        producer.stop_event.set()
        producer.join(30)
    acked = producer.acked
    print(f"{len(acked)} records acknowledged; retried: {producer.errors}")

    # Nothing acknowledged is lost, nothing is written twice, and every
    # replica (the restarted ones too) holds the same log.
    def identical() -> bool:
        logs = [_log_bytes(b, topic) for b in cluster.brokers.values()]
        return all(x == logs[0] for x in logs)

    _wait_for(identical, "identical logs on the three brokers")
    data = _log_bytes(cluster.brokers[1], topic)
    missing = [v for v in acked if data.count(v) != 1]
    assert missing == [], f"{len(missing)} acknowledged records lost or doubled: {missing[:5]}"
    print(f"failover test took {time.monotonic() - t0:.1f}s")


def test_partitions_added_deleted_topic_and_isr_notifications(cluster: Cluster) -> None:
    for b in (1, 2, 3):
        cluster.start(b)
    _wait_for(lambda: cluster.controller() is not None, "a controller")
    topic = topic_name("grow")
    _create_topic(cluster.bootstrap, topic, 1, 2)
    _wait_for(lambda: cluster.state(topic, 0) is not None, "partition 0")

    from confluent_kafka.admin import AdminClient, NewPartitions

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_partitions([NewPartitions(topic, 4)], operation_timeout=20)[topic].result(30)
    for p in (1, 2, 3):
        _wait_for(lambda p=p: cluster.state(topic, p) is not None, f"partition {p}")
    assignment = cluster.json(f"/brokers/topics/{topic}")
    assert assignment is not None
    parts = assignment["partitions"]
    assert isinstance(parts, dict) and len(parts) == 4
    assert all(len(set(r)) == 2 for r in parts.values())
    for p in range(4):
        state = cluster.state(topic, p)
        assert state is not None and state["leader"] == parts[str(p)][0]
        # every replica made the partition's log
        for r in parts[str(p)]:
            d = cluster.brokers[r].data / f"{topic}-{p}"
            _wait_for(d.exists, f"the log of {topic}-{p} on broker {r}")

    # An ISR change notification is consumed by the controller.
    cluster.zk.create(
        "/isr_change_notification/isr_change_",
        json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0}]}).encode(),
        sequence=True,
        makepath=True,
    )
    _wait_for(
        lambda: cluster.zk.get_children("/isr_change_notification") == [],
        "the ISR change notification consumed",
    )

    # Deletion: the broker leaves a marker, the controller stops and deletes
    # the replicas, removes the znodes, then the marker.
    admin.delete_topics([topic], operation_timeout=20)[topic].result(30)
    _wait_for(lambda: cluster.zk.exists(f"/brokers/topics/{topic}") is None, "topic znode gone")
    _wait_for(lambda: cluster.zk.exists(f"/admin/delete_topics/{topic}") is None, "marker gone")
    for b in cluster.brokers.values():
        # deleted logs are renamed "<dir>.<uuid>-delete" first, as Kafka's
        _wait_for(
            lambda b=b: (
                not [d for d in b.data.glob(f"{topic}-*") if not d.name.endswith("-delete")]
            ),
            f"logs deleted on broker {b.overrides['broker.id']}",
        )
