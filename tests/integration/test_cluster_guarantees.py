"""What a replicated topic guarantees, on a real ZooKeeper and three real
``pylog broker start`` processes (``pylog_cluster_factory``), with stock
clients: nothing acknowledged is lost or doubled while leaders and the
controller are killed in turn; acks=all refuses when too few replicas are in
sync while acks=1 goes on; a stopped follower leaves the ISR and comes back;
a ZooKeeper restart under load changes nothing a client sees; a
replication factor above the live brokers is refused."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
from broker_process import topic_name

from pylog.testing import ClusterBroker, LocalCluster, ZooKeeperServer

WAIT = 60.0  # upper bound for waits: only catches hangs

Factory = Callable[..., LocalCluster]


def create_topic(bootstrap: str, topic: str, partitions: int, rf: int, **configs: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    fut = admin.create_topics([NewTopic(topic, partitions, rf, config=configs)])[topic]
    fut.result(WAIT)


class AckingProducer(threading.Thread):
    """A confluent-kafka idempotent acks=all producer writing ``v<n>`` to the
    topic's partitions in turn, remembering where each acknowledged record
    landed."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, **conf: object) -> None:
        super().__init__(daemon=True)
        from confluent_kafka import Producer

        self.topic, self.partitions = topic, partitions
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "message.timeout.ms": 120_000,
                "topic.metadata.refresh.interval.ms": 1000,
                **conf,
            }
        )
        self.acked: dict[bytes, tuple[int, int]] = {}
        self.errors: list[str] = []
        self.stop_event = threading.Event()
        self._lock = threading.Lock()

    def _delivered(self, err: object, msg: object) -> None:
        with self._lock:
            if err is not None:
                self.errors.append(str(err))
            else:
                self.acked[msg.value()] = (msg.partition(), msg.offset())  # type: ignore[attr-defined]

    def count(self) -> int:
        with self._lock:
            return len(self.acked)

    def run(self) -> None:
        n = 0
        while not self.stop_event.is_set():
            try:
                self.producer.produce(
                    self.topic,
                    value=f"v{n}".encode(),
                    partition=n % self.partitions,
                    on_delivery=self._delivered,
                )
                n += 1
            except BufferError:
                pass
            self.producer.poll(0.002)
        self.producer.flush(WAIT)

    def wait_for_more(self, n: int, what: str) -> None:
        start = self.count()
        deadline = time.monotonic() + WAIT
        while self.count() < start + n:
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            time.sleep(0.05)

    def finish(self) -> dict[bytes, tuple[int, int]]:
        self.stop_event.set()
        self.join(WAIT + 10)
        assert not self.is_alive()
        return dict(self.acked)


_RECORD = re.compile(r"^\| offset: (\d+) .* payload: (.*)$")


def segment_records(broker: ClusterBroker, topic: str, partition: int) -> dict[int, str]:
    """Offset → value of every record in the broker's segment files of the
    partition, read from disk with ``pylog dump-log``."""
    d = Path(broker.log_dir) / f"{topic}-{partition}"
    files = sorted(str(p) for p in d.glob("*.log"))
    if not files:
        return {}
    out = subprocess.run(
        [sys.executable, "-m", "pylog.cli", "dump-log", "--print-data-log", "--files", *files],
        capture_output=True,
        text=True,
        timeout=WAIT,
        check=True,
    ).stdout
    records: dict[int, str] = {}
    for line in out.splitlines():
        m = _RECORD.match(line)
        if m:
            records[int(m.group(1))] = m.group(2)
    return records


def assert_every_replica_holds(
    cluster: LocalCluster, topic: str, partitions: int, acked: dict[bytes, tuple[int, int]]
) -> None:
    """Each broker's segment files hold every acknowledged record at the offset
    it was acknowledged at, and nothing twice."""
    by_partition: dict[int, dict[int, str]] = {p: {} for p in range(partitions)}
    for value, (p, offset) in acked.items():
        by_partition[p][offset] = value.decode()

    def complete(b: ClusterBroker, p: int) -> bool:
        on_disk = segment_records(b, topic, p)
        return all(on_disk.get(o) == v for o, v in by_partition[p].items())

    for b in cluster.brokers.values():
        for p in range(partitions):
            cluster.wait_for(lambda b=b, p=p: complete(b, p), f"broker {b.broker_id} {topic}-{p}")
            values = list(segment_records(b, topic, p).values())
            assert len(values) == len(set(values)), f"a record doubled on broker {b.broker_id}"


def test_nothing_acknowledged_is_lost_as_each_leader_then_the_controller_dies(
    pylog_cluster_factory: Factory,
) -> None:
    cluster = pylog_cluster_factory(3, min_insync_replicas=2)
    topic, partitions = topic_name("survive"), 3
    create_topic(cluster.bootstrap_servers, topic, partitions, 3)
    cluster.wait_for_full_isr(topic, partitions)
    producer = AckingProducer(cluster.bootstrap_servers, topic, partitions)
    producer.start()
    try:
        producer.wait_for_more(100, "the first acknowledgements")
        for p in range(partitions):
            leader = cluster.wait_for_leader(topic, p)
            epoch = cluster.partition_state(topic, p)["leader_epoch"]  # type: ignore[index]
            cluster.broker(leader).kill()
            cluster.wait_for(
                lambda p=p, leader=leader: cluster.leader(topic, p) not in (None, leader),
                f"a new leader of partition {p}",
            )
            assert cluster.partition_state(topic, p)["leader_epoch"] > epoch  # type: ignore[index]
            producer.wait_for_more(100, f"records acknowledged after leader {leader} died")
            cluster.broker(leader).start()
            cluster.wait_for_full_isr(topic, partitions)
        controller = cluster.controller()
        assert controller is not None
        cluster.broker(controller).kill()
        cluster.wait_for(lambda: cluster.controller() not in (None, controller), "a new controller")
        producer.wait_for_more(100, "records acknowledged after the controller died")
        cluster.broker(controller).start()
        cluster.wait_for_full_isr(topic, partitions)
        producer.wait_for_more(100, "records acknowledged at the end")
    finally:
        acked = producer.finish()
    print(f"{len(acked)} records acknowledged; delivery errors: {producer.errors[:5]}")
    assert producer.errors == []
    assert cluster.isr(topic, 0) == [1, 2, 3]
    # Offsets are those acknowledged: no two acknowledged records share one.
    assert len(set(acked.values())) == len(acked)
    assert_every_replica_holds(cluster, topic, partitions, acked)


def test_acks_all_refused_below_min_insync_while_acks_1_goes_on(
    pylog_cluster_factory: Factory,
) -> None:
    from confluent_kafka import KafkaError, Producer
    from kafka import KafkaProducer
    from kafka.errors import NotEnoughReplicasError

    cluster = pylog_cluster_factory(3, min_insync_replicas=2)
    topic = topic_name("minisr")
    create_topic(cluster.bootstrap_servers, topic, 1, 3)
    cluster.wait_for_full_isr(topic)
    leader = cluster.wait_for_leader(topic)
    others = [b for b in (1, 2, 3) if b != leader]

    def producer(acks: int | str) -> KafkaProducer:
        return KafkaProducer(
            bootstrap_servers=cluster.broker(leader).bootstrap_servers, acks=acks, retries=0
        )

    before = producer("all")
    before.send(topic, b"before").get(WAIT)
    before.close()
    for b in others:
        cluster.broker(b).kill()
    cluster.wait_for(lambda: cluster.isr(topic) == [leader], "an ISR of the leader alone")
    assert cluster.leader(topic) == leader

    strict = producer("all")
    with pytest.raises(NotEnoughReplicasError):
        strict.send(topic, b"refused").get(WAIT)
    strict.close()
    # librdkafka reads the same code (19) as its NOT_ENOUGH_REPLICAS.
    errors: list[KafkaError | None] = []
    ck = Producer(
        {"bootstrap.servers": cluster.broker(leader).bootstrap_servers, "acks": "all",
         "retries": 0}
    )  # fmt: skip
    ck.produce(topic, b"refused-too", on_delivery=lambda e, m: errors.append(e))
    assert ck.flush(WAIT) == 0
    [err] = errors
    assert err is not None and err.code() == KafkaError.NOT_ENOUGH_REPLICAS, err
    loose = producer(1)
    loose.send(topic, b"while-alone").get(WAIT)
    loose.close()

    for b in others:
        cluster.broker(b).start()
    cluster.wait_for_full_isr(topic)
    for b in cluster.brokers.values():
        cluster.wait_for(
            lambda b=b: list(segment_records(b, topic, 0).values()) == ["before", "while-alone"],
            f"broker {b.broker_id} to hold both records",
        )


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


def test_stopped_follower_leaves_the_isr_and_rejoins(pylog_cluster_factory: Factory) -> None:
    # The session outlives the lag bound, so it is the leader (not the
    # controller, on a lost session) that drops the silent follower.
    ports = {b: _free_port() for b in (1, 2, 3)}
    cluster = pylog_cluster_factory(
        3,
        per_broker={b: {"metrics.port": port} for b, port in ports.items()},
        **{"zookeeper.session.timeout.ms": 30000, "replica.lag.time.max.ms": 2000},
    )
    topic = topic_name("lag")
    create_topic(cluster.bootstrap_servers, topic, 1, 3)
    cluster.wait_for_full_isr(topic)
    leader = cluster.wait_for_leader(topic)
    # Not the controller: its lost session would move the controller too.
    controller = cluster.controller()
    follower = next(b for b in (1, 2, 3) if b not in (leader, controller))
    under = "kafka_server_replicamanager_underreplicatedpartitions"
    assert _metric(ports[leader], under) == 0
    from confluent_kafka import Producer

    writer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": 1})
    # Metadata and the leader's connection before the pause: a producer that
    # first asks the paused broker for metadata waits for its socket timeout.
    writer.produce(topic, b"warm-up")
    assert writer.flush(30) == 0

    def shrunk() -> bool:
        # A caught-up follower stays in the ISR while the leader has nothing
        # new (Kafka's rule): keep writing, so the silent one falls behind.
        writer.produce(topic, b"x")
        writer.flush(10)
        return follower not in cluster.isr(topic)

    cluster.broker(follower).pause()
    try:
        cluster.wait_for(shrunk, "the ISR to shrink")
        # The leader's own ISR (which the metric reads) changes once its
        # ZooKeeper write has returned: a moment after the znode does.
        cluster.wait_for(lambda: _metric(ports[leader], under) == 1, "one under-replicated")
        assert follower in cluster.registered()  # dropped for lag, not for a lost session
    finally:
        cluster.broker(follower).resume()
    cluster.wait_for_full_isr(topic)
    cluster.wait_for(lambda: _metric(ports[leader], under) == 0, "no under-replicated partition")


@pytest.mark.parametrize("down_for", [1.0, 8.0], ids=["1s", "past-the-session-timeout"])
def test_zookeeper_restart_under_load(
    pylog_zookeeper_factory: Callable[..., ZooKeeperServer], down_for: float
) -> None:
    # ZooKeeper restores its sessions from its snapshot with a fresh timeout,
    # so even down longer than the 6 s session timeout the brokers reconnect
    # to the sessions they had; meanwhile the leaders serve without it.
    zk = pylog_zookeeper_factory()
    with LocalCluster(3, {"min.insync.replicas": 2}, zookeeper=zk) as cluster:
        topic = topic_name("zkrestart")
        create_topic(cluster.bootstrap_servers, topic, 2, 3)
        cluster.wait_for_full_isr(topic, 2)
        producer = AckingProducer(cluster.bootstrap_servers, topic, 2)
        producer.start()
        try:
            producer.wait_for_more(100, "acknowledgements before the restart")
            zk.stop()
            producer.wait_for_more(100, "acknowledgements while ZooKeeper is down")
            time.sleep(down_for)
            zk.start()
            cluster.wait_for(lambda: cluster.registered() == [1, 2, 3], "every broker registered")
            cluster.wait_for(lambda: cluster.controller() is not None, "a controller")
            producer.wait_for_more(100, "acknowledgements after the restart")
        finally:
            acked = producer.finish()
        assert producer.errors == []
        cluster.wait_for_full_isr(topic, 2)
        assert_every_replica_holds(cluster, topic, 2, acked)


def test_replication_factor_above_the_live_brokers_is_refused(
    pylog_cluster_factory: Factory,
) -> None:
    from confluent_kafka import KafkaException

    cluster = pylog_cluster_factory(3)
    cluster.broker(3).kill()
    cluster.wait_for(lambda: cluster.registered() == [1, 2], "broker 3 to leave")
    with pytest.raises(KafkaException) as e:
        create_topic(cluster.bootstrap_servers, topic_name("rf"), 1, 3)
    assert e.value.args[0].name() == "INVALID_REPLICATION_FACTOR"
    topic = topic_name("rf2")
    create_topic(cluster.bootstrap_servers, topic, 1, 2)
    assert sorted(cluster.replicas(topic)) == [1, 2]


def _log_bytes(broker: ClusterBroker, topic: str) -> bytes:
    d = Path(broker.log_dir) / f"{topic}-0"
    return b"".join(p.read_bytes() for p in sorted(d.glob("*.log")))


def test_a_cut_off_leader_truncates_by_leader_epoch_when_it_returns(
    pylog_cluster_factory: Factory,
) -> None:
    """The leader takes acks=1 writes its followers never see, then goes
    silent past its ZooKeeper session; an unclean election makes a follower
    leader, which takes other writes at the same offsets. On its return the
    old leader truncates its divergent tail by leader epoch
    (OffsetForLeaderEpoch) and every replica ends up with the same bytes."""
    from confluent_kafka import Producer

    cluster = pylog_cluster_factory(
        3,
        **{
            "zookeeper.session.timeout.ms": 8000,
            "replica.lag.time.max.ms": 1000,
            "unclean.leader.election.enable": "true",
        },
    )
    topic = topic_name("diverge")
    create_topic(cluster.bootstrap_servers, topic, 1, 3)
    cluster.wait_for_full_isr(topic)
    old = cluster.wait_for_leader(topic)
    followers = [b for b in (1, 2, 3) if b != old]

    def write(to: int, value: bytes) -> None:
        p = Producer({"bootstrap.servers": cluster.broker(to).bootstrap_servers, "acks": 1})
        errors: list[object] = []
        p.produce(topic, value, on_delivery=lambda err, _m: errors.append(err) if err else None)
        assert p.flush(30) == 0 and errors == []

    write(old, b"everyone-has-this")
    cluster.wait_for(
        lambda: all(
            b"everyone-has-this" in _log_bytes(cluster.broker(b), topic) for b in (1, 2, 3)
        ),
        "the first record on every replica",
    )
    for b in followers:
        cluster.broker(b).pause()
    n = 0

    def alone() -> bool:
        nonlocal n
        write(old, f"only-on-the-old-leader-{n}".encode())
        n += 1
        return cluster.isr(topic) == [old]

    try:
        cluster.wait_for(alone, "the old leader alone in the ISR")
        epoch = cluster.partition_state(topic)["leader_epoch"]  # type: ignore[index]
        # Silence the old leader before the followers wake, so they cannot
        # fetch what only it has.
        cluster.broker(old).pause()
    finally:
        for b in followers:
            cluster.broker(b).resume()
    try:
        cluster.wait_for(
            lambda: cluster.leader(topic) in followers, "an unclean election of a follower"
        )
        new = cluster.leader(topic)
        assert new is not None
        assert cluster.partition_state(topic)["leader_epoch"] > epoch  # type: ignore[index]
        for i in range(3):
            write(new, f"the-new-leader-{i}".encode())
    finally:
        cluster.broker(old).resume()
    cluster.wait_for_full_isr(topic)
    cluster.wait_for(
        lambda: len({_log_bytes(b, topic) for b in cluster.brokers.values()}) == 1,
        "the same bytes on every replica",
    )
    data = _log_bytes(cluster.broker(old), topic)
    assert b"the-new-leader-2" in data and b"everyone-has-this" in data
    # The old leader's tail is gone, as an unclean election loses it. (The
    # first of those records may have reached a follower: a fetch sent just
    # before the SIGSTOP is answered into its socket, and read on SIGCONT.)
    assert n >= 2
    assert f"only-on-the-old-leader-{n - 1}".encode() not in data
