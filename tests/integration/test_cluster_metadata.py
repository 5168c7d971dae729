"""Three broker processes on a real ZooKeeper with their KafkaController. A
topic created with AdminClient (replication factor 3, assigned with Kafka's
algorithm) is placed by the controller. Checked: clients bootstrapped at one
broker see the whole cluster and produce and consume through the leader on another; ``pylog topics
describe`` and ``pylog cluster describe`` show the leader, replicas, ISR and
controller; a stopped follower's ISR shrink, and its expansion once it runs
again, land in the partition state znode (written conditionally by the leader,
its version bumped) and, through the controller's UpdateMetadata, in every
broker's Metadata."""

from __future__ import annotations

import signal
import subprocess
import time
import uuid
from collections.abc import Iterator

import pytest
from broker_process import PYLOG, BrokerProcess, topic_name

from pylog import _native
from pylog.errors import ErrorCode
from pylog.metadata.kafka_zk_client import KafkaZkClient
from pylog.metadata.zk_data import LeaderAndIsr
from pylog.protocol import ApiKey
from pylog.protocol.client import KafkaConnection
from pylog.protocol.messages import MetadataRequest, MetadataResponse
from pylog.protocol.messages.metadata_request import MetadataRequestTopic
from pylog.testing import ZooKeeperServer

LAG_MS = 1500
DEADLINE_S = 30  # only catches hangs
REPLICAS = [1, 2, 3]


def wait_for(what: str, check: object) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


class Cluster:
    def __init__(self, zk: KafkaZkClient, brokers: dict[int, BrokerProcess]) -> None:
        self.zk = zk
        self.brokers = brokers
        self.topic = topic_name("cm")
        # Set by place(), from the controller's choices: the leader, the
        # assignment's order, a follower the ISR test stops and the third broker.
        self.leader = -1
        self.replicas: list[int] = []
        self.stopped = -1
        self.observer = -1

    def place(self) -> None:
        """CreateTopics with replication factor 3 (the broker assigns it with
        Kafka's algorithm), then wait until every broker's Metadata shows the
        first replica leading with the whole ISR (the controller's LeaderAndIsr
        and UpdateMetadata have landed)."""
        from confluent_kafka.admin import AdminClient, NewTopic

        wait_for(
            "every broker registered",
            lambda: sorted(self.zk.get_sorted_broker_list()) == REPLICAS,
        )
        admin = AdminClient({"bootstrap.servers": self.brokers[2].bootstrap})
        futures = admin.create_topics([NewTopic(self.topic, 1, 3)])
        futures[self.topic].result(DEADLINE_S)
        wait_for("the partition's state", lambda: self.zk.get_partition_state(self.topic, 0))
        got = self.zk.get_topic_assignment(self.topic)
        assert got is not None
        self.replicas = list(got[0].partitions[0])
        assert sorted(self.replicas) == REPLICAS
        self.leader = self.replicas[0]
        # The stopped follower is not the controller: a paused controller
        # would hold back the ISR notification until its session expired.
        controller = self.controller()
        followers = self.replicas[1:]
        self.stopped = next(f for f in reversed(followers) if f != controller)
        self.observer = next(f for f in followers if f != self.stopped)
        assert self.state().leader == self.leader  # the first live replica leads
        for b in self.brokers.values():
            wait_for(
                f"broker {b.port} to see the leader and ISR",
                lambda b=b: self.leader_and_isr(b) == (self.leader, REPLICAS),
            )

    def leader_and_isr(self, b: BrokerProcess) -> tuple[int, list[int]]:
        with KafkaConnection(b.bootstrap, timeout=10) as c:
            r = c.request(
                ApiKey.METADATA,
                4,
                MetadataRequest(
                    topics=[MetadataRequestTopic(name=self.topic)], allow_auto_topic_creation=False
                ),
                MetadataResponse,
            )
        t = r.topics[0]
        if t.error_code != 0 or not t.partitions:
            return -1, []
        p = t.partitions[0]
        return p.leader_id, sorted(p.isr_nodes)

    def controller(self) -> int:
        c = self.zk.get_controller_id()
        assert c is not None
        return c

    def state(self) -> LeaderAndIsr:
        s = self.zk.get_partition_state(self.topic, 0)
        assert s is not None
        return s


@pytest.fixture(scope="module")
def cluster(
    pylog_zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    connect = f"{pylog_zookeeper.connect}/cm-{uuid.uuid4().hex[:8]}"
    zk = KafkaZkClient(connect, session_timeout_ms=6000)
    zk.start()
    brokers: dict[int, BrokerProcess] = {}
    try:
        for b in REPLICAS:
            brokers[b] = BrokerProcess(
                tmp_path_factory.mktemp(f"cm{b}"),
                {
                    "broker.id": b,
                    "broker.rack": f"rack-{b}",
                    "zookeeper.connect": connect,
                    "replica.lag.time.max.ms": LAG_MS,
                    "replica.fetch.wait.max.ms": 100,
                    "replica.fetch.backoff.ms": 100,
                    "auto.create.topics.enable": "false",
                },
            ).start()
        c = Cluster(zk, brokers)
        c.place()
        yield c
    finally:
        for p in brokers.values():
            if p.proc is not None:
                p.proc.send_signal(signal.SIGCONT)
                p.stop()
        zk.close()


def test_clients_bootstrapped_elsewhere_reach_the_leader(cluster: Cluster) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient

    at2 = cluster.brokers[cluster.observer].bootstrap  # not the leader
    md = AdminClient({"bootstrap.servers": at2}).list_topics(cluster.topic, timeout=10)
    assert sorted(md.brokers) == REPLICAS
    assert md.controller_id == cluster.controller()
    p0 = md.topics[cluster.topic].partitions[0]
    assert (
        p0.leader == cluster.leader
        and sorted(p0.replicas) == REPLICAS
        and sorted(p0.isrs) == REPLICAS
    )

    prod = Producer({"bootstrap.servers": at2, "acks": "all", "linger.ms": 5})
    errors: list[object] = []
    for i in range(20):
        prod.produce(cluster.topic, value=b"ck-%d" % i,
                     on_delivery=lambda err, _m: errors.append(err) if err else None)  # fmt: skip
    assert prod.flush(DEADLINE_S) == 0 and errors == []
    del prod

    cons = Consumer(
        {"bootstrap.servers": at2, "group.id": "cm-unused", "enable.auto.commit": False}
    )
    cons.assign([TopicPartition(cluster.topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        while len(got) < 20 and time.monotonic() < deadline:
            m = cons.poll(0.2)
            if m is not None:
                assert m.error() is None, m.error()
                got.append(m.value())
    finally:
        cons.close()
    assert got == [b"ck-%d" % i for i in range(20)]

    # kafka-python, bootstrapped at broker 3
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTP

    kp = KafkaProducer(bootstrap_servers=cluster.brokers[cluster.stopped].bootstrap, acks="all")
    try:
        for i in range(5):
            kp.send(cluster.topic, b"kp-%d" % i).get(timeout=DEADLINE_S)
        assert {b.node_id for b in kp._metadata.brokers()} == set(REPLICAS)
        assert kp._metadata.leader_for_partition(KTP(cluster.topic, 0)) == cluster.leader
    finally:
        kp.close()
    kc = KafkaConsumer(
        bootstrap_servers=cluster.brokers[cluster.stopped].bootstrap,
        enable_auto_commit=False,
        consumer_timeout_ms=DEADLINE_S * 1000,
    )
    try:
        tp = KTP(cluster.topic, 0)
        kc.assign([tp])
        kc.seek(tp, 20)
        values = [next(kc).value for _ in range(5)]
    finally:
        kc.close()
    assert values == [b"kp-%d" % i for i in range(5)]


def pylog_cli(*args: str) -> str:
    done = subprocess.run(
        [PYLOG, *args], capture_output=True, text=True, timeout=DEADLINE_S, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_tools_describe_the_cluster(cluster: Cluster) -> None:
    at2 = cluster.brokers[cluster.observer].bootstrap
    out = pylog_cli("topics", "describe", "--bootstrap-server", at2, "--topic", cluster.topic)
    replicas = ",".join(map(str, cluster.replicas))
    assert f"Partition: 0\tLeader: {cluster.leader}\tReplicas: {replicas}\tIsr: " in out, out
    isr = out.split("\tIsr: ")[1].split()[0]
    assert sorted(int(b) for b in isr.split(",")) == REPLICAS, out
    out = pylog_cli("cluster", "describe", "--bootstrap-server", at2)
    assert f"Controller: {cluster.controller()}" in out, out
    for b, p in cluster.brokers.items():
        assert f"Id: {b}\tEndpoint: 127.0.0.1:{p.port}\tRack: rack-{b}" in out, out
    assert "UnderReplicatedPartitions: 0" in out, out


def test_a_broker_not_leading_names_the_leader(cluster: Cluster) -> None:
    """KIP-951: Produce v10+ and Fetch v16+ sent to a broker that does not
    lead the partition answer NOT_LEADER_OR_FOLLOWER with the current leader
    and its epoch, and the leader's endpoint on the request's listener, so a
    client goes there without a Metadata round."""
    from confluent_kafka.admin import AdminClient, NewTopic

    leader = cluster.leader
    other = next(b for b in REPLICAS if b != leader)
    topic = topic_name("kip951")
    admin = AdminClient({"bootstrap.servers": cluster.brokers[leader].bootstrap})
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[[leader]])])[topic].result(
        DEADLINE_S
    )
    led = cluster.brokers[leader]
    with KafkaConnection(cluster.brokers[other].bootstrap, client_id="kip951") as conn:

        def known() -> bool:
            md = conn.request(
                ApiKey.METADATA, 12, MetadataRequest(topics=[MetadataRequestTopic(name=topic)]),
                MetadataResponse,
            )  # fmt: skip
            t = md.topics[0]
            return t.error_code == 0 and t.partitions[0].leader_id == leader

        wait_for("the other broker's metadata to name the leader", known)
        md = conn.request(
            ApiKey.METADATA, 12, MetadataRequest(topics=[MetadataRequestTopic(name=topic)]),
            MetadataResponse,
        )  # fmt: skip
        topic_id = md.topics[0].topic_id
        epoch = md.topics[0].partitions[0].leader_epoch
        batch = _native.build_batch([(None, b"v", [], int(time.time() * 1000))])
        produced = conn.request(
            ApiKey.PRODUCE, 11,
            {"acks": -1, "timeout_ms": 5000, "topic_data": [
                {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]},
        )  # fmt: skip
        part = produced.responses[0].partition_responses[0]
        assert part.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (leader, epoch)
        assert [(n.node_id, n.host, n.port, n.rack) for n in produced.node_endpoints] == [
            (leader, "127.0.0.1", led.port, f"rack-{leader}")
        ]
        fetched = conn.request(
            ApiKey.FETCH, 16,
            {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
             "topics": [{"topic_id": topic_id, "partitions": [
                 {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]},
        )  # fmt: skip
        fp = fetched.responses[0].partitions[0]
        assert fp.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert (fp.current_leader.leader_id, fp.current_leader.leader_epoch) == (leader, epoch)
        assert [(n.node_id, n.port) for n in fetched.node_endpoints] == [(leader, led.port)]
        # Fetch v15 has no NodeEndpoints and Kafka leaves its CurrentLeader unset.
        old = conn.request(
            ApiKey.FETCH, 15,
            {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
             "topics": [{"topic_id": topic_id, "partitions": [
                 {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]},
        )  # fmt: skip
        op = old.responses[0].partitions[0]
        assert op.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        # (a tagged field left at its default is not sent at all)
        assert op.current_leader is None or op.current_leader.leader_id == -1


def test_isr_changes_land_in_zookeeper(cluster: Cluster) -> None:
    before = cluster.state()
    assert sorted(before.isr) == REPLICAS
    follower = cluster.brokers[cluster.stopped]
    remaining = sorted([cluster.leader, cluster.observer])
    assert follower.proc is not None
    follower.proc.send_signal(signal.SIGSTOP)
    try:
        # New data the stopped follower cannot fetch: it falls behind.
        from confluent_kafka import Producer

        prod = Producer(
            {"bootstrap.servers": cluster.brokers[cluster.observer].bootstrap, "acks": 1}
        )
        prod.produce(cluster.topic, value=b"while-stopped")
        assert prod.flush(DEADLINE_S) == 0
        del prod
        wait_for("the ISR shrink in ZooKeeper", lambda: sorted(cluster.state().isr) == remaining)
        shrunk = cluster.state()
        assert shrunk.zk_version == before.zk_version + 1
        assert (shrunk.leader, shrunk.leader_epoch) == (cluster.leader, before.leader_epoch)
        assert shrunk.controller_epoch == before.controller_epoch
        # The leader's notification reached the controller, whose UpdateMetadata
        # reached the other brokers (it deletes the notification once read).
        wait_for(
            "the third broker's Metadata to show the shrunk ISR",
            lambda: (
                cluster.leader_and_isr(cluster.brokers[cluster.observer])
                == (cluster.leader, remaining)
            ),
        )
        # The leader's Metadata shows its ISR; cluster describe lists the partition.
        out = pylog_cli(
            "cluster", "describe", "--bootstrap-server", cluster.brokers[cluster.leader].bootstrap
        )
        assert "UnderReplicatedPartitions: 1" in out, out
        assert "Isr: " + ",".join(map(str, shrunk.isr)) in out, out
    finally:
        follower.proc.send_signal(signal.SIGCONT)
    wait_for("the ISR expansion in ZooKeeper", lambda: sorted(cluster.state().isr) == REPLICAS)
    expanded = cluster.state()
    assert expanded.zk_version == before.zk_version + 2
    wait_for(
        "the third broker's Metadata to show the whole ISR again",
        lambda: (
            cluster.leader_and_isr(cluster.brokers[cluster.observer]) == (cluster.leader, REPLICAS)
        ),
    )
