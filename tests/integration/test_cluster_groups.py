"""Consumer groups on a three-broker cluster over a real ZooKeeper, as on
Kafka: ``__consumer_offsets`` waits for ``offsets.topic.replication.factor``
live brokers and is then placed by the controller like any topic;
FindCoordinator names the leader of the group's offsets partition; when the
coordinator's broker is killed, the partition's new leader loads the group
and its committed offsets from its replica and the group carries on there
without losing an acknowledged commit."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from broker_process import PYLOG, BrokerProcess, topic_name
from kazoo.client import KazooClient

from pylog.coordinator.records import partition_for
from pylog.testing import ZooKeeperServer

WAIT = 60.0  # upper bound for waits: only catches hangs
SESSION_MS = 3000
OFFSETS_PARTITIONS = 3
OFFSETS = "__consumer_offsets"
COORDINATOR_NOT_AVAILABLE = 15


def _wait_for(pred: Callable[[], object], what: str, timeout: float = WAIT) -> None:
    pause = threading.Event()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        pause.wait(0.1)
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
                    "offsets.topic.num.partitions": OFFSETS_PARTITIONS,
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

    def alive(self) -> list[BrokerProcess]:
        return [b for b in self.brokers.values() if b.proc is not None]

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.alive())

    def json(self, path: str) -> dict[str, Any] | None:
        if self.zk.exists(path) is None:
            return None
        doc = json.loads(self.zk.get(path)[0])
        assert isinstance(doc, dict)
        return doc

    def registered(self) -> list[int]:
        return sorted(int(c) for c in self.zk.get_children("/brokers/ids"))

    def offsets_leader(self, group: str) -> int | None:
        p = partition_for(group, OFFSETS_PARTITIONS)
        state = self.json(f"/brokers/topics/{OFFSETS}/partitions/{p}/state")
        return int(state["leader"]) if state is not None and state["leader"] >= 0 else None


@pytest.fixture
def cluster(pylog_zookeeper: ZooKeeperServer, tmp_path: Path) -> Iterator[Cluster]:
    chroot = f"groups-{uuid.uuid4().hex[:8]}"
    boot = KazooClient(hosts=pylog_zookeeper.connect)
    boot.start(timeout=30)
    boot.ensure_path(f"/{chroot}")
    boot.stop()
    boot.close()
    zk = KazooClient(hosts=f"{pylog_zookeeper.connect}/{chroot}")
    zk.start(timeout=30)
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


def find_coordinator(b: BrokerProcess, group: str) -> tuple[int, int, int]:
    """(error code, node id, port) of one FindCoordinator v3 at broker ``b``."""
    from pylog.protocol import ApiKey
    from pylog.protocol.client import KafkaConnection
    from pylog.protocol.messages import FindCoordinatorResponse

    with KafkaConnection(b.bootstrap, timeout=10) as c:
        r = c.request(
            ApiKey.FIND_COORDINATOR, 3, {"key": group, "key_type": 0}, FindCoordinatorResponse
        )
    return r.error_code, r.node_id, r.port


def list_groups(b: BrokerProcess) -> list[str]:
    """The groups broker ``b`` coordinates (ListGroups v4)."""
    from pylog.protocol import ApiKey
    from pylog.protocol.client import KafkaConnection
    from pylog.protocol.messages import ListGroupsResponse

    with KafkaConnection(b.bootstrap, timeout=10) as c:
        r = c.request(ApiKey.LIST_GROUPS, 4, {"states_filter": []}, ListGroupsResponse)
    assert r.error_code == 0
    return [g.group_id for g in r.groups]


def _create_topic(bootstrap: str, topic: str, partitions: int, rf: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, partitions, rf)], operation_timeout=20)
    futures[topic].result(30)


def _committed(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    from pylog.cli.client import ClusterClient

    with ClusterClient(bootstrap, timeout_ms=int(WAIT * 1000)) as admin:
        return admin.committed(group)


def _end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    from pylog.cli.client import LATEST_TIMESTAMP, ClusterClient

    with ClusterClient(bootstrap, timeout_ms=int(WAIT * 1000)) as admin:
        got = admin.list_offsets({(topic, p): LATEST_TIMESTAMP for p in range(partitions)})
    return {p: o for (_, p), o in got.items()}


def test_offsets_topic_waits_for_its_replication_factor(cluster: Cluster) -> None:
    # offsets.topic.replication.factor is left at Kafka's default, 3.
    b1 = cluster.start(1)
    cluster.start(2)
    _wait_for(lambda: cluster.registered() == [1, 2], "two registered brokers")
    # Two brokers cannot hold three replicas: no coordinator, no topic (Kafka's answer).
    for b in cluster.alive():
        for _ in range(3):
            code, node, _ = find_coordinator(b, "early")
            assert (code, node) == (COORDINATOR_NOT_AVAILABLE, -1)
    assert cluster.zk.exists(f"/brokers/topics/{OFFSETS}") is None

    cluster.start(3)  # a third broker: the topic can be placed
    _wait_for(lambda: find_coordinator(b1, "early")[0] == 0, "a coordinator once 3 are up")
    assignment = cluster.json(f"/brokers/topics/{OFFSETS}")
    assert assignment is not None
    parts = assignment["partitions"]
    assert sorted(parts) == [str(p) for p in range(OFFSETS_PARTITIONS)]
    assert all(sorted(r) == [1, 2, 3] for r in parts.values())
    # Placed like any topic: the preferred leaders go round the brokers.
    assert sorted(r[0] for r in parts.values()) == [1, 2, 3]
    config = cluster.json(f"/config/topics/{OFFSETS}")
    assert config is not None and config["config"]["cleanup.policy"] == "compact"
    # Every broker names the same coordinator: the partition's leader.
    groups = ["early", "g-a", "g-b", "g-c", "g-d"]
    for g in groups:
        leader = cluster.offsets_leader(g)
        assert leader in (1, 2, 3)
        for b in cluster.alive():
            _wait_for(lambda b=b, g=g: find_coordinator(b, g)[0] == 0, f"{g}'s coordinator")
            code, node, port = find_coordinator(b, g)
            assert (code, node, port) == (0, leader, cluster.brokers[leader].port)


class Member(threading.Thread):
    """A confluent-kafka group member: consumes and commits each record
    synchronously, noting every delivery and every acknowledged commit."""

    def __init__(
        self, name: str, bootstrap: str, group: str, topic: str, log: Ledger, kip848: bool = False
    ) -> None:
        super().__init__(daemon=True, name=name)
        from confluent_kafka import Consumer

        conf: dict[str, object] = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": name,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            # Longer than any failover: the member keeps its session
            # through the coordinator's move (no rebalance is needed).
            "session.timeout.ms": 45000,
            "heartbeat.interval.ms": 500,
            "topic.metadata.refresh.interval.ms": 1000,
        }
        if kip848:
            # KIP-848: the broker sets the session and the heartbeat interval.
            del conf["session.timeout.ms"], conf["heartbeat.interval.ms"]
            conf["group.protocol"] = "consumer"
        self.consumer = Consumer(conf)
        self.consumer.subscribe([topic], on_assign=self._on_assign)
        self.assignments = 0  # rebalances that handed this member partitions
        self.ledger = log
        self.stop_event = threading.Event()
        self.assigned: list[int] = []
        self.failed_commits = 0

    def _on_assign(self, _consumer: object, _partitions: object) -> None:
        self.assignments += 1

    def run(self) -> None:
        from confluent_kafka import KafkaException

        try:
            while not self.stop_event.is_set():
                m = self.consumer.poll(0.2)
                self.assigned = [tp.partition for tp in self.consumer.assignment()]
                if m is None or m.error() is not None:
                    continue
                self.ledger.delivered(self.name, m.partition(), m.offset())
                try:
                    done = self.consumer.commit(message=m, asynchronous=False)
                except KafkaException:
                    self.failed_commits += 1
                    continue
                if done is not None and all(tp.error is None for tp in done):
                    self.ledger.committed(m.partition(), m.offset() + 1)
                else:
                    self.failed_commits += 1
        finally:
            self.consumer.close()


class Ledger:
    """What the group was given and what it was told was committed."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.deliveries: list[tuple[str, int, int]] = []
        self.acked: dict[int, int] = {}
        # Deliveries below a commit already acknowledged: must stay empty.
        self.below_commit: list[tuple[str, int, int, int]] = []

    def delivered(self, who: str, partition: int, offset: int) -> None:
        with self.lock:
            self.deliveries.append((who, partition, offset))
            acked = self.acked.get(partition, 0)
            if offset < acked:
                self.below_commit.append((who, partition, offset, acked))

    def committed(self, partition: int, offset: int) -> None:
        with self.lock:
            self.acked[partition] = max(self.acked.get(partition, 0), offset)

    def snapshot(self) -> dict[int, int]:
        with self.lock:
            return dict(self.acked)

    def count(self) -> int:
        with self.lock:
            return len(self.deliveries)

    def offsets(self, partition: int) -> set[int]:
        with self.lock:
            return {o for _, p, o in self.deliveries if p == partition}


class Producer(threading.Thread):
    """acks=all, idempotent, a steady trickle over every partition."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        super().__init__(daemon=True)
        from confluent_kafka import Producer as CkProducer

        self.producer = CkProducer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
            }
        )
        self.topic = topic
        self.partitions = partitions
        self.stop_event = threading.Event()
        self.errors: list[object] = []
        self.sent = 0

    def run(self) -> None:
        while not self.stop_event.is_set():
            for p in range(self.partitions):
                self.producer.produce(self.topic, value=b"v%d" % self.sent, partition=p,
                                      on_delivery=self._done)  # fmt: skip
                self.sent += 1
            self.producer.poll(0)
            self.stop_event.wait(0.05)
        assert self.producer.flush(WAIT) == 0

    def _done(self, err: object, _msg: object) -> None:
        if err is not None:
            self.errors.append(err)


def test_group_follows_its_coordinator_when_its_broker_is_killed(cluster: Cluster) -> None:
    # No preferred-leader election: a controller that took over when the
    # coordinator was killed runs its first imbalance check a few seconds
    # later (as Kafka's does), and if the killed broker is back in the ISR by
    # then the offsets partition (and the group) moves back to it — which is
    # right, but not what the end of this test looks at.
    for b in (1, 2, 3):
        cluster.start(
            b, **{"offsets.topic.replication.factor": 3, "auto.leader.rebalance.enable": False}
        )
    _wait_for(lambda: cluster.registered() == [1, 2, 3], "three registered brokers")
    bootstrap = cluster.bootstrap
    topic = topic_name("cg")
    partitions = 4
    _create_topic(bootstrap, topic, partitions, 3)
    group = f"cg-{uuid.uuid4().hex[:6]}"

    ledger = Ledger()
    producer = Producer(bootstrap, topic, partitions)
    producer.start()
    members = [Member(f"m{i}", bootstrap, group, topic, ledger) for i in (1, 2)]
    for m in members:
        m.start()
    try:
        # Both members own partitions and the group has committed a good part.
        _wait_for(
            lambda: (
                sorted(members[0].assigned + members[1].assigned) == list(range(partitions))
                and all(m.assigned for m in members)
            ),
            "the partitions shared by both members",
        )
        _wait_for(lambda: len(ledger.snapshot()) == partitions and ledger.count() >= 200,
                  "commits on every partition")  # fmt: skip

        coordinator = cluster.offsets_leader(group)
        assert coordinator is not None
        any_other = next(b for i, b in cluster.brokers.items() if i != coordinator)
        assert find_coordinator(any_other, group)[:2] == (0, coordinator)
        acked_before = ledger.snapshot()
        consumed_before = ledger.count()
        generations = [m.assignments for m in members]
        cluster.kill(coordinator)
        killed_at = time.monotonic()

        # The partition's new leader coordinates the group, and says so
        # from every live broker.
        def moved() -> bool:
            leader = cluster.offsets_leader(group)
            return leader not in (None, coordinator) and all(
                find_coordinator(b, group)[:2] == (0, leader) for b in cluster.alive()
            )

        _wait_for(moved, "the coordinator to move")
        found_s = time.monotonic() - killed_at
        new_coordinator = cluster.offsets_leader(group)
        # Consumption and commits go on through it.
        _wait_for(lambda: ledger.count() >= consumed_before + 200, "consumption to go on")
        moved_s = time.monotonic() - killed_at
        # The new coordinator loaded the group Stable with its members: they
        # carried on in their generation, no rebalance.
        assert [m.assignments for m in members] == generations
        committed_mid = _committed(cluster.bootstrap, group)
        for p, offset in acked_before.items():
            assert committed_mid[(topic, p)] >= offset, (p, committed_mid, acked_before)
    finally:
        producer.stop_event.set()
        producer.join(WAIT)
    # Drain: the members consume everything produced and commit it.
    ends = _end_offsets(cluster.bootstrap, topic, partitions)
    try:
        _wait_for(
            lambda: all(ledger.snapshot().get(p, 0) >= ends[p] for p in range(partitions)),
            "the members to commit every record",
        )
    finally:
        for m in members:
            m.stop_event.set()
        for m in members:
            m.join(WAIT)
    assert producer.errors == []
    assert ledger.below_commit == [], "records re-delivered below an acknowledged commit"
    for p in range(partitions):
        assert ledger.offsets(p) == set(range(ends[p])), f"partition {p} lost records"

    # A new member resumes exactly where the group's commits say.
    from confluent_kafka import Producer as CkProducer

    extra = CkProducer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for p in range(partitions):
        for i in range(5):
            extra.produce(topic, value=b"late-%d" % i, partition=p)
    assert extra.flush(WAIT) == 0
    committed = _committed(cluster.bootstrap, group)
    assert {p: committed[(topic, p)] for p in range(partitions)} == ends
    late = Ledger()
    newcomer = Member("m3", cluster.bootstrap, group, topic, late)
    newcomer.start()
    try:
        _wait_for(lambda: all(late.snapshot().get(p, 0) >= ends[p] + 5 for p in range(partitions)),
                  "the new member to catch up")  # fmt: skip
    finally:
        newcomer.stop_event.set()
        newcomer.join(WAIT)
    for p in range(partitions):
        assert late.offsets(p) == set(range(ends[p], ends[p] + 5)), p

    # The CLI describes the group through the new coordinator.
    out = subprocess.run(
        [PYLOG, "groups", "describe", "--bootstrap-server", cluster.bootstrap, "--group", group],
        capture_output=True, text=True, timeout=WAIT, check=True,
    ).stdout  # fmt: skip
    rows = [line.split() for line in out.splitlines()[1:]]
    assert {(r[1], int(r[2]), int(r[3]), int(r[4]), int(r[5])) for r in rows} == {
        (topic, p, ends[p] + 5, ends[p] + 5, 0) for p in range(partitions)
    }
    state = subprocess.run(
        [PYLOG, "groups", "describe", "--bootstrap-server", cluster.bootstrap, "--group", group,
         "--state"], capture_output=True, text=True, timeout=WAIT, check=True,
    ).stdout.splitlines()  # fmt: skip
    assert state[1].split()[:2] == [group, "Empty"]

    # The killed broker returns as a follower of the offsets partitions: it
    # holds no group (Kafka's ListGroups lists the groups a broker
    # coordinates), the new coordinator still does.
    cluster.start(coordinator)
    _wait_for(lambda: cluster.registered() == [1, 2, 3], "the killed broker back")
    _wait_for(
        lambda: coordinator in (cluster.json(f"/brokers/topics/{OFFSETS}/partitions/"
                                             f"{partition_for(group, OFFSETS_PARTITIONS)}/state")
                                or {}).get("isr", []),
        "the returned broker in the offsets partition's ISR",
    )  # fmt: skip
    assert cluster.offsets_leader(group) == new_coordinator
    for i, b in cluster.brokers.items():
        assert (group in list_groups(b)) == (i == new_coordinator), i
    print(f"coordinator {coordinator} killed; FindCoordinator names {new_coordinator} after "
          f"{found_s:.1f} s (session timeout {SESSION_MS / 1000:.0f} s); +200 records "
          f"consumed after {moved_s:.1f} s")  # fmt: skip


def test_consumer_protocol_group_survives_the_sigkill_of_its_coordinator(
    cluster: Cluster,
) -> None:
    """A KIP-848 group (group.protocol=consumer): its coordinator's broker is
    killed; the new leader of the offsets partition loads the group — members,
    epochs, target and current assignments — from its replica, the members
    heartbeat on at their epochs and nothing acknowledged is lost."""
    for b in (1, 2, 3):
        cluster.start(b, **{
            "offsets.topic.replication.factor": 3, "auto.leader.rebalance.enable": False,
            "group.consumer.min.heartbeat.interval.ms": 500,
            "group.consumer.heartbeat.interval.ms": 500,
        })  # fmt: skip
    _wait_for(lambda: cluster.registered() == [1, 2, 3], "three registered brokers")
    bootstrap = cluster.bootstrap
    topic = topic_name("cg848")
    partitions = 4
    _create_topic(bootstrap, topic, partitions, 3)
    group = f"cg848-{uuid.uuid4().hex[:6]}"
    ledger = Ledger()
    producer = Producer(bootstrap, topic, partitions)
    producer.start()
    members = [Member(f"m{i}", bootstrap, group, topic, ledger, kip848=True) for i in (1, 2)]
    for m in members:
        m.start()
    try:
        _wait_for(
            lambda: (
                sorted(members[0].assigned + members[1].assigned) == list(range(partitions))
                and all(m.assigned for m in members)
            ),
            "the partitions shared by both members",
        )
        _wait_for(lambda: len(ledger.snapshot()) == partitions and ledger.count() >= 200,
                  "commits on every partition")  # fmt: skip
        coordinator = cluster.offsets_leader(group)
        assert coordinator is not None
        acked_before = ledger.snapshot()
        consumed_before = ledger.count()
        cluster.kill(coordinator)
        _wait_for(
            lambda: cluster.offsets_leader(group) not in (None, coordinator),
            "the coordinator to move",
        )
        _wait_for(lambda: ledger.count() >= consumed_before + 200, "consumption to go on")
        committed_mid = _committed(cluster.bootstrap, group)
        for p, offset in acked_before.items():
            assert committed_mid[(topic, p)] >= offset, (p, committed_mid, acked_before)
        # Still split between the two: the group was loaded, not rebuilt.
        assert sorted(members[0].assigned + members[1].assigned) == list(range(partitions))
    finally:
        producer.stop_event.set()
        producer.join(WAIT)
    ends = _end_offsets(cluster.bootstrap, topic, partitions)
    try:
        _wait_for(
            lambda: all(ledger.snapshot().get(p, 0) >= ends[p] for p in range(partitions)),
            "the members to commit every record",
        )
    finally:
        for m in members:
            m.stop_event.set()
        for m in members:
            m.join(WAIT)
    assert producer.errors == []
    assert ledger.below_commit == [], "records re-delivered below an acknowledged commit"
    for p in range(partitions):
        assert ledger.offsets(p) == set(range(ends[p])), f"partition {p} lost records"
    committed = _committed(cluster.bootstrap, group)
    assert {p: committed[(topic, p)] for p in range(partitions)} == ends


def test_kafka_python_member_follows_the_coordinator(cluster: Cluster) -> None:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP
    from kafka.structs import OffsetAndMetadata

    for b in (1, 2, 3):
        cluster.start(b, **{"offsets.topic.replication.factor": 3})
    _wait_for(lambda: cluster.registered() == [1, 2, 3], "three registered brokers")
    topic = topic_name("kp")
    _create_topic(cluster.bootstrap, topic, 2, 3)
    group = f"kp-{uuid.uuid4().hex[:6]}"

    from confluent_kafka import Producer as CkProducer

    def produce(n: int) -> None:
        p = CkProducer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
        for i in range(n):
            p.produce(topic, value=b"kp-%d" % i, partition=i % 2)
        assert p.flush(WAIT) == 0

    produce(100)
    consumer = KafkaConsumer(
        bootstrap_servers=cluster.bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=45000,
        heartbeat_interval_ms=500,
        request_timeout_ms=50000,
        retry_backoff_ms=100,
    )
    consumer.subscribe([topic])
    ledger = Ledger()

    def consume_until(total: int) -> None:
        def step() -> bool:
            for tp, records in consumer.poll(timeout_ms=200).items():
                for r in records:
                    ledger.delivered("kp", tp.partition, r.offset)
                last = records[-1].offset + 1
                try:
                    consumer.commit({tp: OffsetAndMetadata(last, None, -1)}, timeout_ms=10_000)
                except Exception:  # a commit that fails is retried with the next batch
                    continue
                ledger.committed(tp.partition, last)
            acked = ledger.snapshot()
            return all(acked.get(p, 0) >= total // 2 for p in (0, 1))

        _wait_for(step, f"{total} records consumed and committed")

    try:
        consume_until(100)
        coordinator = cluster.offsets_leader(group)
        assert coordinator is not None
        cluster.kill(coordinator)
        produce(100)
        consume_until(200)
        # Every record, none again below an acknowledged commit.
        assert ledger.below_commit == []
        for p in (0, 1):
            assert ledger.offsets(p) == set(range(100)), p
        new = cluster.offsets_leader(group)
        assert new not in (None, coordinator)
        got = consumer.committed(KTP(topic, 0)), consumer.committed(KTP(topic, 1))
        assert got == (100, 100)
    finally:
        consumer.close(autocommit=False)


def _group_type(bootstrap: str, group: str) -> str | None:
    """The group's type as ListGroups v5 at its coordinator reports it."""
    from pylog.protocol.client import KafkaConnection

    for b in bootstrap.split(","):
        try:
            with KafkaConnection(b, timeout=10) as c:
                r = c.request(16, 5, {"states_filter": [], "types_filter": []})
        except OSError:
            continue
        for g in r.groups:
            if g.group_id == group:
                return str(g.group_type)
    return None


def test_upgraded_group_survives_the_sigkill_of_its_coordinator(cluster: Cluster) -> None:
    """KIP-848's online upgrade on a cluster: two classic members consume;
    one restarts with group.protocol=consumer and the group becomes a
    consumer group with the other as its classic member; the coordinator's
    broker is then killed and the new one loads the converted group (the
    classic member's ClassicMemberMetadata with it) — both members consume
    on; the consumer-protocol member leaves and the group is classic again.
    Nothing acknowledged is delivered again, nothing is lost."""
    for b in (1, 2, 3):
        cluster.start(b, **{
            "offsets.topic.replication.factor": 3, "auto.leader.rebalance.enable": False,
            "group.consumer.min.heartbeat.interval.ms": 500,
            "group.consumer.heartbeat.interval.ms": 500,
        })  # fmt: skip
    _wait_for(lambda: cluster.registered() == [1, 2, 3], "three registered brokers")
    bootstrap = cluster.bootstrap
    topic = topic_name("cgmig")
    partitions = 4
    _create_topic(bootstrap, topic, partitions, 3)
    group = f"cgmig-{uuid.uuid4().hex[:6]}"
    ledger = Ledger()
    producer = Producer(bootstrap, topic, partitions)
    producer.start()
    classic = Member("classic", bootstrap, group, topic, ledger)
    leaving = Member("leaving", bootstrap, group, topic, ledger)
    classic.start()
    leaving.start()
    modern: Member | None = None

    def split(a: Member, b: Member) -> bool:
        return sorted(a.assigned + b.assigned) == list(range(partitions)) and bool(
            a.assigned and b.assigned
        )

    try:
        _wait_for(lambda: split(classic, leaving), "two classic members sharing the partitions")
        _wait_for(lambda: ledger.count() >= 100, "consumption")
        assert _group_type(cluster.bootstrap, group) == "classic"
        leaving.stop_event.set()
        leaving.join(WAIT)
        modern = Member("modern", bootstrap, group, topic, ledger, kip848=True)
        modern.start()
        _wait_for(lambda: _group_type(cluster.bootstrap, group) == "consumer", "the upgrade")
        _wait_for(lambda: split(classic, modern), "the classic and the consumer member sharing")
        coordinator = cluster.offsets_leader(group)
        assert coordinator is not None
        acked_before = ledger.snapshot()
        consumed_before = ledger.count()
        cluster.kill(coordinator)
        _wait_for(
            lambda: cluster.offsets_leader(group) not in (None, coordinator),
            "the coordinator to move",
        )
        _wait_for(lambda: ledger.count() >= consumed_before + 200, "consumption to go on")
        assert _group_type(cluster.bootstrap, group) == "consumer"
        committed_mid = _committed(cluster.bootstrap, group)
        for p, offset in acked_before.items():
            assert committed_mid[(topic, p)] >= offset, (p, committed_mid, acked_before)
        _wait_for(lambda: split(classic, modern), "both members consuming after the move")
        # the consumer-protocol member leaves: the group is classic again
        modern.stop_event.set()
        modern.join(WAIT)
        _wait_for(lambda: _group_type(cluster.bootstrap, group) == "classic", "the downgrade")
        _wait_for(lambda: sorted(classic.assigned) == list(range(partitions)),
                  "the classic member holding every partition")  # fmt: skip
    finally:
        producer.stop_event.set()
        producer.join(WAIT)
    ends = _end_offsets(cluster.bootstrap, topic, partitions)
    try:
        _wait_for(
            lambda: all(ledger.snapshot().get(p, 0) >= ends[p] for p in range(partitions)),
            "every record committed",
        )
    finally:
        for m in (classic, leaving, modern):
            if m is not None:
                m.stop_event.set()
                m.join(WAIT)
    assert producer.errors == []
    assert ledger.below_commit == [], "records re-delivered below an acknowledged commit"
    for p in range(partitions):
        assert ledger.offsets(p) == set(range(ends[p])), f"partition {p} lost records"
