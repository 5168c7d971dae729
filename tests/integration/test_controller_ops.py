"""The controller's operations on a real ZooKeeper with real broker processes
and real clients: controlled shutdown (a SIGTERM'd broker's leaderships move
to other in-sync replicas while it is still registered; a confluent-kafka
acks=all producer loses nothing) and ControlledShutdown's errors; preferred
and unclean leader elections (ElectLeaders from confluent-kafka's
AdminClient and ``pylog topics elect-leaders``, ``/admin/preferred_replica_election``,
the automatic leader balance check)."""

from __future__ import annotations

import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from broker_process import BrokerProcess, ck_consume, ck_produce, topic_name
from kazoo.client import KazooClient
from kazoo.recipe.watchers import DataWatch

from pylog.errors import ErrorCode
from pylog.protocol import ApiKey
from pylog.protocol.client import KafkaConnection
from pylog.protocol.messages import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from pylog.testing import ZooKeeperServer

WAIT = 60.0  # upper bound for waits: only catches hangs
SESSION_MS = 6000
LAG_S = 30.0  # replica.lag.time.max.ms of the controlled shutdown test (Kafka's default)


def _wait_for(pred: Callable[[], object], what: str, timeout: float = WAIT) -> None:
    pause = threading.Event()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        pause.wait(0.05)
    raise AssertionError(f"timed out waiting for {what}")


class Cluster:
    """Broker processes sharing one ZooKeeper chroot (the pattern of
    test_controller.py)."""

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
                    "replica.lag.time.max.ms": 5000,
                    "replica.fetch.wait.max.ms": 100,
                    # The last broker of a cluster has no one to hand its
                    # leaderships to: its attempts end sooner.
                    "controlled.shutdown.retry.backoff.ms": 300,
                    **extra,
                },
            )
            self.brokers[broker_id] = b
        return b.start()

    def stop(self, broker_id: int) -> int:
        """SIGTERM: a graceful (controlled) shutdown; the exit code."""
        return self.brokers[broker_id].stop(signal.SIGTERM)

    def kill(self, broker_id: int) -> None:
        b = self.brokers[broker_id]
        assert b.proc is not None
        b.proc.send_signal(signal.SIGKILL)
        b.proc.wait(10)
        b.proc = None

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values() if b.proc is not None)

    def json(self, path: str) -> dict[str, Any] | None:
        if self.zk.exists(path) is None:
            return None
        doc = json.loads(self.zk.get(path)[0])
        assert isinstance(doc, dict)
        return doc

    def controller(self) -> int | None:
        doc = self.json("/controller")
        return int(doc["brokerid"]) if doc else None

    def state_path(self, topic: str, p: int = 0) -> str:
        return f"/brokers/topics/{topic}/partitions/{p}/state"

    def state(self, topic: str, p: int = 0) -> dict[str, Any] | None:
        return self.json(self.state_path(topic, p))

    def broker_epoch(self, broker_id: int) -> int:
        return int(self.zk.exists(f"/brokers/ids/{broker_id}").czxid)

    def registered(self) -> list[int]:
        return sorted(int(b) for b in self.zk.get_children("/brokers/ids"))

    def replicas(self, topic: str, p: int = 0) -> list[int]:
        doc = self.json(f"/brokers/topics/{topic}")
        assert doc is not None
        return [int(r) for r in doc["partitions"][str(p)]]

    def leader(self, topic: str, p: int = 0) -> int:
        state = self.state(topic, p)
        return int(state["leader"]) if state else -2

    def in_isr(self, topic: str, p: int, broker: int) -> bool:
        state = self.state(topic, p)
        return state is not None and broker in state["isr"]


@pytest.fixture
def cluster(pylog_zookeeper: ZooKeeperServer, tmp_path: Path) -> Iterator[Cluster]:
    chroot = f"ops-{uuid.uuid4().hex[:8]}"
    boot = KazooClient(hosts=pylog_zookeeper.connect)
    boot.start(timeout=WAIT)
    boot.ensure_path(f"/{chroot}")
    boot.stop()
    boot.close()
    zk = KazooClient(hosts=f"{pylog_zookeeper.connect}/{chroot}")
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


def _admin(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def _create_topic(bootstrap: str, topic: str, partitions: int, rf: int, **configs: str) -> None:
    from confluent_kafka.admin import NewTopic

    admin = _admin(bootstrap)  # kept: the futures die with their client
    futures = admin.create_topics(
        [NewTopic(topic, partitions, rf, config=configs)], operation_timeout=20
    )
    futures[topic].result(30)


def _every_broker_knows(cluster: Cluster, count: int) -> bool:
    """Each running broker's Metadata lists ``count`` brokers (UpdateMetadata arrived)."""
    for b in cluster.brokers.values():
        if b.proc is None:
            continue
        md = _admin(b.bootstrap).list_topics(timeout=10)
        if len(md.brokers) != count:
            return False
    return True


class Producer(threading.Thread):
    """A confluent-kafka idempotent acks=all producer writing numbered values
    round-robin to the given partitions until stopped; records what was
    acknowledged (and when) and any delivery error."""

    def __init__(self, bootstrap: str, topic: str, partitions: list[int]) -> None:
        super().__init__(daemon=True)
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.acked: dict[int, list[tuple[float, bytes]]] = {p: [] for p in partitions}
        self.errors: list[str] = []
        self.unflushed = -1
        self.sent = 0
        self.stop_event = threading.Event()
        self.lock = threading.Lock()

    def count(self, p: int) -> int:
        with self.lock:
            return len(self.acked[p])

    def run(self) -> None:
        from confluent_kafka import Producer as CkProducer

        p = CkProducer(
            {
                "bootstrap.servers": self.bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 2,
                "topic.metadata.refresh.interval.ms": 1000,
            }
        )

        def delivered(err: Any, msg: Any) -> None:
            with self.lock:
                if err is not None:
                    self.errors.append(str(err))
                else:
                    self.acked[msg.partition()].append((time.monotonic(), msg.value()))

        n = 0
        while not self.stop_event.is_set():
            part = self.partitions[n % len(self.partitions)]
            try:
                p.produce(self.topic, value=b"v-%08d" % n, partition=part, on_delivery=delivered)
                n += 1
            except BufferError:
                pass
            p.poll(0.003)
        self.unflushed = p.flush(WAIT)
        self.sent = n

    def longest_pause(self, p: int, since: float) -> float:
        """The longest gap between acknowledgements of partition ``p`` after ``since``."""
        with self.lock:
            times = [t for t, _ in self.acked[p] if t >= since]
        return max((b - a for a, b in itertools.pairwise(times)), default=0.0)


class StateRecorder:
    """Every version of a partition's state znode this client sees, with its
    mzxid (kazoo's DataWatch re-reads the znode after each change)."""

    def __init__(self, zk: KazooClient, path: str) -> None:
        self.seen: list[tuple[int, int]] = []  # (leader, mzxid)
        self.lock = threading.Lock()

        def record(data: bytes | None, stat: Any) -> None:
            if data is not None:
                with self.lock:
                    self.seen.append((int(json.loads(data)["leader"]), int(stat.mzxid)))

        DataWatch(zk, path, record)

    def leaders_before(self, zxid: int) -> set[int]:
        with self.lock:
            return {leader for leader, mzxid in self.seen if mzxid < zxid}


def _consume_all(bootstrap: str, topic: str, partitions: list[int]) -> dict[int, list[bytes]]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex[:6]}",
         "enable.auto.commit": False}
    )  # fmt: skip
    out: dict[int, list[bytes]] = {p: [] for p in partitions}
    try:
        ends = {
            p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=20)[1] for p in partitions
        }
        c.assign([TopicPartition(topic, p, 0) for p in partitions])
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            if all(len(out[p]) >= ends[p] for p in partitions):
                break
            m = c.poll(0.2)
            if m is None:
                continue
            assert m.error() is None, m.error()
            out[m.partition()].append(m.value())
    finally:
        c.close()
    return out


def test_controlled_shutdown_moves_leadership_before_the_broker_goes(cluster: Cluster) -> None:
    t0 = time.monotonic()
    for b in (1, 2, 3):
        cluster.start(b, **{"replica.lag.time.max.ms": int(LAG_S * 1000)})
    _wait_for(lambda: cluster.controller() is not None, "a controller")
    topic = topic_name("cs")
    # Three partitions, each broker the preferred leader of one.
    _create_topic(cluster.bootstrap, topic, 3, 3, **{"min.insync.replicas": "2"})
    for p in range(3):
        _wait_for(lambda p=p: cluster.state(topic, p) is not None, f"state of partition {p}")
    _wait_for(lambda: _every_broker_knows(cluster, 3), "every broker's metadata")
    controller = cluster.controller()
    leaders = {p: int(cluster.state(topic, p)["leader"]) for p in range(3)}  # type: ignore[index]
    assert sorted(leaders.values()) == [1, 2, 3]
    # One partition led by a broker that is not the controller (its
    # ControlledShutdown goes over the network), one by the controller
    # (handled in-process).
    plain_p = next(p for p, b in leaders.items() if b != controller)
    ctrl_p = next(p for p, b in leaders.items() if b == controller)
    plain = leaders[plain_p]
    assert controller is not None

    producer = Producer(cluster.bootstrap, topic, [plain_p, ctrl_p])
    producer.start()
    try:
        _wait_for(lambda: producer.count(plain_p) >= 100, "acknowledged records")

        for broker, p in ((plain, plain_p), (controller, ctrl_p)):
            recorder = StateRecorder(cluster.zk, cluster.state_path(topic, p))
            epoch_before = int(cluster.state(topic, p)["leader_epoch"])  # type: ignore[index]
            n, since = producer.count(p), time.monotonic()
            assert cluster.stop(broker) == 0
            # Its registration went last: /brokers/ids' pzxid is its deletion.
            gone_zxid = int(cluster.zk.exists("/brokers/ids").pzxid)
            assert broker not in cluster.registered()
            # A state naming another leader was written while it was registered.
            moved_to = recorder.leaders_before(gone_zxid) - {broker}
            assert moved_to, (broker, recorder.seen, gone_zxid)
            _wait_for(
                lambda b=broker, p=p: b not in cluster.state(topic, p)["isr"],  # type: ignore[index]
                "the stopped broker out of the ISR",
            )
            after = cluster.state(topic, p)
            assert after is not None and after["leader"] != broker
            assert after["leader_epoch"] > epoch_before
            if broker == controller:
                _wait_for(
                    lambda b=broker: cluster.controller() not in (None, b), "a new controller"
                )
            _wait_for(lambda p=p, n=n: producer.count(p) >= n + 100, "records acknowledged after")
            pause = producer.longest_pause(p, since)
            print(
                f"broker {broker} (partition {p}, leader now {after['leader']}): longest pause "
                f"between acknowledgements {pause * 1000:.0f} ms"
            )
            # Generous, but below replica.lag.time.max.ms: the stopped broker
            # left the ISRs through the controller, not by lagging out.
            assert pause < LAG_S * 2 / 3, pause
            if broker == plain:
                # Back, and in every ISR again, before the next broker stops
                # (min.insync.replicas=2 needs two of the three).
                cluster.start(broker)
                _wait_for(
                    lambda: all(
                        sorted(cluster.state(topic, q)["isr"]) == [1, 2, 3]  # type: ignore[index]
                        for q in range(3)
                    ),
                    "the restarted broker in every ISR",
                )
    finally:
        producer.stop_event.set()
        producer.join(WAIT)
    assert producer.errors == [] and producer.unflushed == 0
    got = _consume_all(cluster.bootstrap, topic, [plain_p, ctrl_p])
    for p in (plain_p, ctrl_p):
        acked = [v for _, v in producer.acked[p]]
        stored = got[p]
        missing = [v for v in acked if stored.count(v) != 1]
        assert missing == [], f"partition {p}: {len(missing)} acknowledged records lost or doubled"
        print(f"partition {p}: {len(acked)} acknowledged, {len(stored)} stored")
    print(f"controlled shutdown test took {time.monotonic() - t0:.1f}s")


def _controlled_shutdown(bootstrap: str, broker_id: int, epoch: int, version: int = 3) -> Any:
    with KafkaConnection(bootstrap, timeout=30) as conn:
        return conn.request(
            ApiKey.CONTROLLED_SHUTDOWN,
            version,
            ControlledShutdownRequest(broker_id=broker_id, broker_epoch=epoch),
            ControlledShutdownResponse,
        )


def test_controlled_shutdown_errors(cluster: Cluster) -> None:
    for b in (1, 2):
        cluster.start(b)
    _wait_for(lambda: cluster.controller() is not None, "a controller")
    controller = cluster.controller()
    assert controller is not None
    other = 3 - controller
    _wait_for(lambda: cluster.registered() == [1, 2], "both registered")
    at_controller = cluster.brokers[controller].bootstrap
    epoch = cluster.broker_epoch(other)

    # Not the controller: NOT_CONTROLLER.
    r = _controlled_shutdown(cluster.brokers[other].bootstrap, other, epoch)
    assert r.error_code == ErrorCode.NOT_CONTROLLER
    # An older registration of the broker: STALE_BROKER_EPOCH.
    r = _controlled_shutdown(at_controller, other, epoch - 1)
    assert r.error_code == ErrorCode.STALE_BROKER_EPOCH
    # No such broker: BROKER_NOT_AVAILABLE.
    r = _controlled_shutdown(at_controller, 99, -1)
    assert r.error_code == ErrorCode.BROKER_NOT_AVAILABLE
    # Nothing was moved by the refused requests, and both still serve.
    assert cluster.registered() == [1, 2]

    # The right epoch (v1: none, which passes): nothing to move, none remaining.
    r = _controlled_shutdown(at_controller, other, -1, version=1)
    assert (r.error_code, r.remaining_partitions) == (0, [])
    assert cluster.stop(other) == 0


# ---------------------------------------------------------------- leader elections


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


def _elect(
    bootstrap: str, election: Any, partitions: list[tuple[str, int]] | None
) -> dict[tuple[str, int], int | None]:
    """confluent-kafka's AdminClient.elect_leaders: per partition, None or the error code."""
    from confluent_kafka import TopicPartition

    admin = _admin(bootstrap)
    tps = None if partitions is None else [TopicPartition(t, p) for t, p in partitions]
    # (operation_timeout trips a bug of confluent-kafka 2.16: its default it is.)
    got = admin.elect_leaders(election, tps).result(60)
    out: dict[tuple[str, int], int | None] = {}
    for tp, err in got.items():
        if err is not None and not hasattr(err, "code"):
            err = err.args[0]  # a KafkaException around the KafkaError
        out[(tp.topic, tp.partition)] = None if err is None else int(err.code())
    return out


def _pylog_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pylog.cli", *args], capture_output=True, text=True, timeout=60
    )


def test_preferred_leader_election(cluster: Cluster) -> None:
    from confluent_kafka import ElectionType

    ports = {b: _free_port() for b in (1, 2, 3)}
    for b in (1, 2, 3):
        cluster.start(b, **{"auto.leader.rebalance.enable": "false", "metrics.port": ports[b]})
    _wait_for(lambda: cluster.controller() is not None, "a controller")
    topic = topic_name("pref")
    _create_topic(cluster.bootstrap, topic, 3, 3)
    for p in range(3):
        _wait_for(lambda p=p: cluster.state(topic, p) is not None, f"state of partition {p}")
    _wait_for(lambda: _every_broker_knows(cluster, 3), "every broker's metadata")
    preferred = cluster.replicas(topic, 0)[0]
    assert cluster.leader(topic, 0) == preferred

    def imbalance() -> float:
        controller = cluster.controller()
        assert controller is not None
        return _metric(
            ports[controller], "kafka_controller_kafkacontroller_preferredreplicaimbalancecount"
        )

    def bounce() -> None:
        """Stop the preferred replica's broker and start it again: another
        broker leads, the preferred one is back in the ISR."""
        assert cluster.stop(preferred) == 0
        assert cluster.leader(topic, 0) not in (preferred, -1)
        cluster.start(preferred)
        _wait_for(lambda: cluster.in_isr(topic, 0, preferred), "the preferred replica in sync")
        _wait_for(lambda: _every_broker_knows(cluster, 3), "every broker's metadata")
        assert cluster.leader(topic, 0) != preferred

    # ElectLeaders (PREFERRED) from confluent-kafka's AdminClient.
    bounce()
    _wait_for(lambda: imbalance() == 1, "PreferredReplicaImbalanceCount 1")
    epoch = int(cluster.state(topic, 0)["leader_epoch"])  # type: ignore[index]
    assert _elect(cluster.bootstrap, ElectionType.PREFERRED, [(topic, 0)]) == {(topic, 0): None}
    assert cluster.leader(topic, 0) == preferred
    assert int(cluster.state(topic, 0)["leader_epoch"]) == epoch + 1  # type: ignore[index]
    assert imbalance() == 0
    # Once more: nothing to do. For every partition: only those elected are answered.
    got = _elect(cluster.bootstrap, ElectionType.PREFERRED, [(topic, 0), (topic, 9)])
    assert got == {(topic, 0): ErrorCode.ELECTION_NOT_NEEDED,
                   (topic, 9): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}  # fmt: skip
    assert _elect(cluster.bootstrap, ElectionType.PREFERRED, None) == {}
    # UNCLEAN on a partition with a live leader: not needed either.
    got = _elect(cluster.bootstrap, ElectionType.UNCLEAN, [(topic, 0)])
    assert got == {(topic, 0): ErrorCode.ELECTION_NOT_NEEDED}

    # The ZooKeeper-era request: /admin/preferred_replica_election.
    bounce()
    cluster.zk.create(
        "/admin/preferred_replica_election",
        json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0}]}).encode(),
        makepath=True,
    )
    _wait_for(lambda: cluster.leader(topic, 0) == preferred, "the preferred leader back")
    _wait_for(
        lambda: cluster.zk.exists("/admin/preferred_replica_election") is None,
        "the request consumed",
    )

    # pylog's tool (kafka-leader-election.sh's options).
    bounce()
    done = _pylog_cli("topics", "elect-leaders", "--bootstrap-server", cluster.bootstrap,
                      "--election-type", "preferred", "--all-topic-partitions")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        f"Successfully completed leader election (PREFERRED) for partitions {topic}-0"
    )
    assert cluster.leader(topic, 0) == preferred
    again = _pylog_cli("topics", "elect-leaders", "--bootstrap-server", cluster.bootstrap,
                       "--election-type", "preferred", "--topic", topic)  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == (
        f"Valid replica already elected for partitions {topic}-0, {topic}-1, {topic}-2"
    )

    # The preferred replica gone: PREFERRED_LEADER_NOT_AVAILABLE.
    cluster.kill(preferred)
    _wait_for(lambda: cluster.leader(topic, 0) not in (preferred, -1), "another leader")
    _wait_for(lambda: _every_broker_knows(cluster, 2), "every broker's metadata")
    got = _elect(cluster.bootstrap, ElectionType.PREFERRED, [(topic, 0)])
    assert got == {(topic, 0): ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE}


def test_unclean_leader_election(cluster: Cluster) -> None:
    """An offline partition whose only live replica is out of sync: UNCLEAN
    elects it (ELIGIBLE_LEADERS_NOT_AVAILABLE while no replica lives)."""
    from confluent_kafka import ElectionType
    from confluent_kafka.admin import NewTopic

    for b in (1, 2):
        cluster.start(b)
    _wait_for(lambda: cluster.controller() is not None, "a controller")
    _wait_for(lambda: _every_broker_knows(cluster, 2), "every broker's metadata")
    topic = topic_name("unclean")
    admin = _admin(cluster.bootstrap)
    admin.create_topics([NewTopic(topic, 1, 2)], operation_timeout=20)[topic].result(30)
    _wait_for(lambda: cluster.state(topic) is not None, "the partition state")
    first, second = cluster.replicas(topic)
    # The second replica goes: the ISR is the first alone; then the first goes
    # (no one left to lead: it stays the leader in ZooKeeper), and the second
    # comes back, out of sync: its controller finds no clean leader.
    assert cluster.stop(second) == 0
    _wait_for(lambda: cluster.state(topic)["isr"] == [first], "the ISR without it")  # type: ignore[index]
    assert cluster.stop(first) == 0
    cluster.start(second)
    _wait_for(lambda: cluster.controller() == second, "the out-of-sync replica in office")
    _wait_for(lambda: cluster.leader(topic) == -1, "the partition offline")
    assert cluster.state(topic)["isr"] == [first]  # type: ignore[index]
    bootstrap = cluster.brokers[second].bootstrap
    got = _elect(bootstrap, ElectionType.PREFERRED, [(topic, 0)])
    assert got == {(topic, 0): ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE}
    got = _elect(bootstrap, ElectionType.UNCLEAN, [(topic, 0)])
    assert got == {(topic, 0): None}
    state = cluster.state(topic)
    assert state is not None
    assert (state["leader"], state["isr"], state.get("leader_recovery_state")) == (
        second,
        [second],
        1,
    )
    # Now nothing lives of a second topic's only replica: no eligible leader.
    lone = topic_name("lone")
    admin = _admin(bootstrap)
    admin.create_topics([NewTopic(lone, 1, 1)], operation_timeout=20)[lone].result(30)
    _wait_for(lambda: cluster.state(lone) is not None, "the lone partition")
    cluster.start(first)
    _wait_for(lambda: cluster.registered() == [1, 2], "both registered")
    _wait_for(lambda: _every_broker_knows(cluster, 2), "every broker's metadata")
    assert cluster.stop(second) == 0
    _wait_for(lambda: cluster.registered() == [first], "one broker left")
    _wait_for(lambda: cluster.leader(lone) == -1, "the lone partition offline")
    got = _elect(cluster.brokers[first].bootstrap, ElectionType.UNCLEAN, [(lone, 0)])
    assert got == {(lone, 0): ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE}


def test_automatic_leader_rebalance(cluster: Cluster) -> None:
    for b in (1, 2, 3):
        cluster.start(b, **{"leader.imbalance.check.interval.seconds": 1})
    _wait_for(lambda: cluster.controller() is not None, "a controller")
    topic = topic_name("auto")
    _create_topic(cluster.bootstrap, topic, 3, 3)
    for p in range(3):
        _wait_for(lambda p=p: cluster.state(topic, p) is not None, f"state of partition {p}")
    preferred = cluster.replicas(topic, 0)[0]
    epoch = int(cluster.state(topic, 0)["leader_epoch"])  # type: ignore[index]
    assert cluster.stop(preferred) == 0
    assert cluster.leader(topic, 0) != preferred
    cluster.start(preferred)
    # One of its three partitions led by another broker: 33% > 10%. The
    # controller's check (every second here; the first 5 s after taking
    # office) gives the partition back once the broker is in sync.
    _wait_for(lambda: cluster.leader(topic, 0) == preferred, "the preferred leader back")
    state = cluster.state(topic, 0)
    assert state is not None and state["leader_epoch"] >= epoch + 2
    assert all(cluster.leader(topic, p) == cluster.replicas(topic, p)[0] for p in range(3))


# ---------------------------------------------------------------- explicit assignments


def _refusal(future: Any) -> tuple[int, str]:
    """The (error code, message) a confluent-kafka admin future failed with."""
    from confluent_kafka import KafkaException

    with pytest.raises(KafkaException) as e:
        future.result(30)
    err = e.value.args[0]
    return int(err.code()), str(err.str())


def test_explicit_replica_assignments(cluster: Cluster) -> None:
    from confluent_kafka.admin import NewPartitions, NewTopic

    for b in (1, 2, 3):
        cluster.start(b)
    _wait_for(lambda: cluster.registered() == [1, 2, 3], "three brokers")
    _wait_for(lambda: cluster.controller() is not None, "a controller")
    _wait_for(lambda: _every_broker_knows(cluster, 3), "every broker's metadata")
    admin = _admin(cluster.bootstrap)
    topic = topic_name("placed")
    placed = [[3, 1], [2, 3], [1, 2]]
    # (confluent-kafka wants the count too; the request carries -1 and the assignment)
    admin.create_topics([NewTopic(topic, 3, replica_assignment=placed)])[topic].result(30)
    doc = cluster.json(f"/brokers/topics/{topic}")
    assert doc is not None and doc["partitions"] == {"0": [3, 1], "1": [2, 3], "2": [1, 2]}
    for p, replicas in enumerate(placed):
        _wait_for(lambda p=p: cluster.state(topic, p) is not None, f"partition {p}")
        assert cluster.leader(topic, p) == replicas[0]
        for r in replicas:
            d = cluster.brokers[r].data / f"{topic}-{p}"
            _wait_for(d.exists, f"the log of {topic}-{p} on broker {r}")
        others = {1, 2, 3} - set(replicas)
        assert not any((cluster.brokers[o].data / f"{topic}-{p}").exists() for o in others)

    # Refused as Kafka refuses them; nothing is made.
    bad = {
        "unknown": ([[1, 4]], "Unknown broker(s) in replica assignment: 4."),
        "twice": (
            [[1, 1]],
            "Duplicate brokers not allowed in replica assignment: 1, 1 for partition id 0.",
        ),
        "uneven": ([[1, 2], [3]], "All partitions should have the same number of replicas"),
    }
    for name, (assignment, message) in bad.items():
        t = topic_name(name)
        new = NewTopic(t, len(assignment), replica_assignment=assignment)
        got = _refusal(admin.create_topics([new])[t])
        assert got == (ErrorCode.INVALID_REPLICA_ASSIGNMENT, message), name
        assert cluster.zk.exists(f"/brokers/topics/{t}") is None
    t = topic_name("dry")
    futures = admin.create_topics([NewTopic(t, 1, replica_assignment=[[2, 3]])], validate_only=True)
    futures[t].result(30)
    assert cluster.zk.exists(f"/brokers/topics/{t}") is None

    # CreatePartitions with the new partitions' replicas.
    admin.create_partitions([NewPartitions(topic, 5, replica_assignment=[[1, 3], [2, 1]])])[
        topic
    ].result(30)
    doc = cluster.json(f"/brokers/topics/{topic}")
    assert doc is not None and doc["partitions"]["3"] == [1, 3] and doc["partitions"]["4"] == [2, 1]
    for p, leader in ((3, 1), (4, 2)):
        _wait_for(lambda p=p: cluster.state(topic, p) is not None, f"partition {p}")
        assert cluster.leader(topic, p) == leader
    bad_partitions = {
        "unknown": ([[1, 7]], 6, "Unknown broker(s) in replica assignment: 7."),
        "count": (
            [[1, 2]],
            7,
            "Increasing the number of partitions by 2 but 1 assignments provided.",
        ),
        "factor": (
            [[1, 2, 3]],
            6,
            "Inconsistent replication factor between partitions, partition 0 has 2 while "
            "partitions [5] have replication factors [3], respectively.",
        ),
        "twice": (
            [[2, 2]],
            6,
            "Duplicate brokers not allowed in replica assignment: 2, 2 for partition id 5.",
        ),
    }
    for name, (assignment, count, message) in bad_partitions.items():
        future = admin.create_partitions(
            [NewPartitions(topic, count, replica_assignment=assignment)]
        )[topic]
        assert _refusal(future) == (ErrorCode.INVALID_REPLICA_ASSIGNMENT, message), name
    doc = cluster.json(f"/brokers/topics/{topic}")
    assert doc is not None and len(doc["partitions"]) == 5


# ---------------------------------------------------------------- partition reassignment


def _kafka_python_admin(bootstrap: str) -> Any:
    from kafka.admin import KafkaAdminClient

    return KafkaAdminClient(bootstrap_servers=bootstrap.split(","), request_timeout_ms=30000)


def _codes(results: dict[Any, Any]) -> dict[tuple[str, int], int]:
    """kafka-python's per-partition results (None or an error class) as codes."""
    return {(tp.topic, tp.partition): 0 if e is None else e.errno for tp, e in results.items()}


def _settled(cluster: Cluster, topic: str, replicas: list[int]) -> bool:
    doc = cluster.json(f"/brokers/topics/{topic}")
    return (
        doc is not None
        and doc["partitions"]["0"] == replicas
        and not doc.get("adding_replicas")
        and not doc.get("removing_replicas")
    )


def _live_log(b: BrokerProcess, topic: str) -> bool:
    return (b.data / f"{topic}-0").exists()


def test_partition_reassignment(cluster: Cluster) -> None:
    from kafka import TopicPartition as KTP

    for b in (1, 2, 3):
        cluster.start(b)
    _wait_for(lambda: cluster.registered() == [1, 2, 3], "three brokers")
    _wait_for(lambda: cluster.controller() is not None, "a controller")
    _wait_for(lambda: _every_broker_knows(cluster, 3), "every broker's metadata")
    admin = _admin(cluster.bootstrap)
    from confluent_kafka.admin import NewTopic

    # Move a replica with data: [x, y] -> [z, y]; z copies the log, joins the
    # ISR, leads (the leader x is not a target), x's copy is deleted.
    x, y, z = 1, 2, 3
    topic = topic_name("move")
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[[x, y]])])[topic].result(30)
    _wait_for(lambda: cluster.state(topic) is not None, "the partition state")
    records = [(None, b"r-%04d" % i, None) for i in range(300)]
    ck_produce(cluster.bootstrap, topic, records, acks="all")
    kp = _kafka_python_admin(cluster.bootstrap)
    try:
        got = kp.alter_partition_reassignments({KTP(topic, 0): [z, y]})
        assert _codes(got) == {(topic, 0): 0}
        _wait_for(lambda: _settled(cluster, topic, [z, y]), "the reassignment complete")
        state = cluster.state(topic)
        assert state is not None and state["leader"] == z and sorted(state["isr"]) == [y, z]
        _wait_for(lambda: not _live_log(cluster.brokers[x], topic), "the old replica deleted")
        assert kp.list_partition_reassignments() == {}
        got_values = [v for _, v, _, _ in ck_consume(cluster.bootstrap, topic, 300)]
        assert got_values == [v for _, v, _ in records]
        # The copy on z is the whole log: its bytes match y's.
        _wait_for(
            lambda: _log_bytes(cluster.brokers[z], topic) == _log_bytes(cluster.brokers[y], topic),
            "identical logs",
        )

        # Refusals (Kafka's codes).
        got = kp.alter_partition_reassignments({KTP(topic, 0): [y, y], KTP(topic, 7): [x, y]})
        assert _codes(got) == {
            (topic, 0): ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            (topic, 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        }
        got = kp.alter_partition_reassignments({KTP(topic, 0): [9, y]})
        assert _codes(got) == {(topic, 0): ErrorCode.INVALID_REPLICA_ASSIGNMENT}
        got = kp.alter_partition_reassignments({KTP(topic, 0): None})
        assert _codes(got) == {(topic, 0): ErrorCode.NO_REASSIGNMENT_IN_PROGRESS}
        # v1 (KIP-860) without replication factor changes: [z, y] -> [z] refused
        controller = cluster.controller()
        assert controller is not None
        with KafkaConnection(cluster.brokers[controller].bootstrap, timeout=30) as conn:
            body = {"timeout_ms": 30000, "allow_replication_factor_change": False,
                    "topics": [{"name": topic, "partitions": [
                        {"partition_index": 0, "replicas": [z]}]}]}  # fmt: skip
            r = conn.request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 1, body)
        refused = r.responses[0].partitions[0]
        assert (r.error_code, r.allow_replication_factor_change) == (0, False)
        assert (refused.error_code, refused.error_message) == (
            ErrorCode.INVALID_REPLICATION_FACTOR,
            "The replication factor is changed from 2 to 1",
        )
        assert _settled(cluster, topic, [z, y])  # nothing moved
    finally:
        kp.close()


def _at_controller(cluster: Cluster, api_key: int, body: Any, expect: type) -> Any:
    """One request, on pylog's client, to the broker /controller names (no
    client metadata that could lead to a paused broker)."""
    controller = cluster.controller()
    assert controller is not None
    with KafkaConnection(cluster.brokers[controller].bootstrap, timeout=30) as conn:
        return conn.request(api_key, 0, body, expect)


def _reassign(cluster: Cluster, topic: str, replicas: list[int] | None) -> tuple[int, int]:
    """AlterPartitionReassignments of partition 0: (top-level, partition) error codes."""
    from pylog.protocol.messages.alter_partition_reassignments_request import (
        ReassignablePartition,
        ReassignableTopic,
    )

    body = AlterPartitionReassignmentsRequest(
        timeout_ms=30000,
        topics=[
            ReassignableTopic(
                name=topic, partitions=[ReassignablePartition(partition_index=0, replicas=replicas)]
            )
        ],
    )
    r = _at_controller(
        cluster, ApiKey.ALTER_PARTITION_REASSIGNMENTS, body, AlterPartitionReassignmentsResponse
    )
    return r.error_code, r.responses[0].partitions[0].error_code


def _ongoing(cluster: Cluster) -> dict[tuple[str, int], tuple[list[int], list[int], list[int]]]:
    """ListPartitionReassignments: (replicas, adding, removing) per partition."""
    r = _at_controller(
        cluster,
        ApiKey.LIST_PARTITION_REASSIGNMENTS,
        ListPartitionReassignmentsRequest(timeout_ms=30000, topics=None),
        ListPartitionReassignmentsResponse,
    )
    assert r.error_code == 0
    return {
        (t.name, p.partition_index): (p.replicas, p.adding_replicas, p.removing_replicas)
        for t in r.topics
        for p in t.partitions
    }


def test_reassignment_in_flight_cancelled_and_through_zookeeper(cluster: Cluster) -> None:
    from confluent_kafka.admin import NewTopic

    from pylog.protocol.messages import CreatePartitionsRequest, CreatePartitionsResponse
    from pylog.protocol.messages.create_partitions_request import CreatePartitionsTopic

    for b in (1, 2, 3):
        # A long session: a broker paused below is not taken for dead.
        cluster.start(b, **{"zookeeper.session.timeout.ms": 60000})
    _wait_for(lambda: cluster.registered() == [1, 2, 3], "three brokers")
    _wait_for(lambda: cluster.controller() is not None, "a controller")
    _wait_for(lambda: _every_broker_knows(cluster, 3), "every broker's metadata")
    controller = cluster.controller()
    paused = max(b for b in (1, 2, 3) if b != controller)
    x, y = sorted({1, 2, 3} - {paused})
    topic = topic_name("cancel")
    admin = _admin(cluster.bootstrap)
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[[x, y]])])[topic].result(30)
    _wait_for(lambda: cluster.state(topic) is not None, "the partition state")
    proc = cluster.brokers[paused].proc
    assert proc is not None
    proc.send_signal(signal.SIGSTOP)  # registered, but it cannot catch up
    try:
        assert _reassign(cluster, topic, [paused, y]) == (0, 0)
        in_flight = {(topic, 0): ([paused, y, x], [paused], [x])}
        assert _ongoing(cluster) == in_flight
        doc = cluster.json(f"/brokers/topics/{topic}")
        assert doc is not None and doc["partitions"]["0"] == [paused, y, x]
        assert doc["adding_replicas"] == {"0": [paused]}
        assert doc["removing_replicas"] == {"0": [x]}
        # A new controller (the office taken from the old one) carries it on.
        epoch = int(cluster.zk.get("/controller_epoch")[0])
        cluster.zk.delete("/controller")
        _wait_for(
            lambda: (
                cluster.controller() is not None
                and int(cluster.zk.get("/controller_epoch")[0]) > epoch
            ),
            "a new controller",
        )
        _wait_for(lambda: _ongoing(cluster) == in_flight, "it listed by the new controller")
        # No partitions are added while it is in flight.
        grow = CreatePartitionsRequest(
            topics=[CreatePartitionsTopic(name=topic, count=2, assignments=None)],
            timeout_ms=30000,
            validate_only=False,
        )
        r = _at_controller(cluster, ApiKey.CREATE_PARTITIONS, grow, CreatePartitionsResponse)
        assert r.results[0].error_code == ErrorCode.REASSIGNMENT_IN_PROGRESS
        # Cancelled: back to the original replicas (in the order they had in
        # the full set, as Kafka: the original order is not kept).
        assert _reassign(cluster, topic, None) == (0, 0)
        assert _ongoing(cluster) == {}
        assert _settled(cluster, topic, [y, x])
        assert _reassign(cluster, topic, None) == (0, ErrorCode.NO_REASSIGNMENT_IN_PROGRESS)
    finally:
        proc.send_signal(signal.SIGCONT)
    state = cluster.state(topic)
    assert state is not None and state["leader"] == x and sorted(state["isr"]) == [x, y]
    # The replica it had begun is stopped and deleted once the broker runs again.
    _wait_for(lambda: not _live_log(cluster.brokers[paused], topic), "the cancelled replica gone")

    # The ZooKeeper-era request: /admin/reassign_partitions.
    cluster.zk.create(
        "/admin/reassign_partitions",
        json.dumps(
            {
                "version": 1,
                "partitions": [{"topic": topic, "partition": 0, "replicas": [y, paused]}],
            }
        ).encode(),
        makepath=True,
    )
    _wait_for(lambda: _settled(cluster, topic, [y, paused]), "the reassignment complete")
    _wait_for(
        lambda: cluster.zk.exists("/admin/reassign_partitions") is None, "the request consumed"
    )
    _wait_for(lambda: not _live_log(cluster.brokers[x], topic), "the old replica deleted")


def _log_bytes(b: BrokerProcess, topic: str) -> bytes:
    d = b.data / f"{topic}-0"
    return b"".join(p.read_bytes() for p in sorted(d.glob("*.log")))
