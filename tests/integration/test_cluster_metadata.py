"""Three broker processes on a real ZooKeeper, the test acting as Kafka's
controller (as tests/integration/test_replication.py does): it writes the
topic's assignment and partition state znodes with KafkaZkClient, then sends
LeaderAndIsr and UpdateMetadata to every broker with pylog's codec. Checked:
clients bootstrapped at one broker see the whole cluster and produce and
consume through the leader on another; ``pylog topics describe`` and ``pylog
cluster describe`` show the leader, replicas and ISR; a stopped follower's ISR
shrink, and its expansion once it runs again, land in the partition state
znode (written conditionally, its version bumped) with an ISR change
notification each."""

from __future__ import annotations

import base64
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator

import pytest
from broker_process import PYLOG, BrokerProcess, topic_name

from pylog.metadata.kafka_zk_client import KafkaZkClient
from pylog.metadata.zk_data import LeaderAndIsr, TopicReplicaAssignment
from pylog.protocol import ApiKey
from pylog.protocol.client import KafkaConnection
from pylog.protocol.messages import (
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from pylog.protocol.messages.leader_and_isr_request import (
    LeaderAndIsrLiveLeader,
    LeaderAndIsrPartitionState,
    LeaderAndIsrTopicState,
)
from pylog.protocol.messages.update_metadata_request import (
    UpdateMetadataBroker,
    UpdateMetadataEndpoint,
    UpdateMetadataPartitionState,
    UpdateMetadataTopicState,
)
from pylog.testing import ZooKeeperServer

LAG_MS = 1500
DEADLINE_S = 30  # only catches hangs
CONTROLLER_EPOCH = 3
LEADER = 1
REPLICAS = [1, 2, 3]
# Newer than the epoch a broker gives a partition it made from the store
# before the controller's LeaderAndIsr (it is a lone broker until then).
LEADER_EPOCH = 1


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
        self.topic_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")

    def live(self) -> list[UpdateMetadataBroker]:
        return [
            UpdateMetadataBroker(
                id=b,
                endpoints=[
                    UpdateMetadataEndpoint(
                        port=p.port, host="127.0.0.1", listener="PLAINTEXT", security_protocol=0
                    )
                ],
                rack=f"rack-{b}",
            )
            for b, p in self.brokers.items()
        ]

    def place(self) -> None:
        """What the controller does for a new topic: the znodes, then
        LeaderAndIsr to the replicas and UpdateMetadata to every broker."""
        t = self.topic
        self.zk.create_topic(
            t,
            TopicReplicaAssignment(self.topic_id, {0: list(REPLICAS)}),
            {},
            {0: LeaderAndIsr(LEADER, LEADER_EPOCH, list(REPLICAS), CONTROLLER_EPOCH)},
        )
        # Each broker's store learns of the topic through its watch first (a
        # LeaderAndIsr for a topic its store lacks would create it).
        for b in self.brokers.values():
            wait_for(f"broker {b.port} to see {t}", lambda b=b: self._knows(b))
        for b in self.brokers:
            body = LeaderAndIsrRequest(
                controller_id=LEADER,
                controller_epoch=CONTROLLER_EPOCH,
                broker_epoch=-1,
                type=0,
                topic_states=[
                    LeaderAndIsrTopicState(
                        topic_name=t,
                        topic_id=self.topic_id,
                        partition_states=[
                            LeaderAndIsrPartitionState(
                                partition_index=0,
                                controller_epoch=CONTROLLER_EPOCH,
                                leader=LEADER,
                                leader_epoch=LEADER_EPOCH,
                                isr=list(REPLICAS),
                                partition_epoch=0,
                                replicas=list(REPLICAS),
                                is_new=True,
                            )
                        ],
                    )
                ],
                live_leaders=[
                    LeaderAndIsrLiveLeader(
                        broker_id=LEADER, host_name="127.0.0.1", port=self.brokers[LEADER].port
                    )
                ],
            )
            with KafkaConnection(self.brokers[b].bootstrap, timeout=20) as c:
                r = c.request(ApiKey.LEADER_AND_ISR, 6, body, LeaderAndIsrResponse)
            assert r.error_code == 0
            assert [p.error_code for x in r.topics for p in x.partition_errors] == [0]
        for b in self.brokers:
            um = UpdateMetadataRequest(
                controller_id=LEADER,
                controller_epoch=CONTROLLER_EPOCH,
                broker_epoch=-1,
                topic_states=[
                    UpdateMetadataTopicState(
                        topic_name=t,
                        topic_id=self.topic_id,
                        partition_states=[
                            UpdateMetadataPartitionState(
                                partition_index=0,
                                controller_epoch=CONTROLLER_EPOCH,
                                leader=LEADER,
                                leader_epoch=LEADER_EPOCH,
                                isr=list(REPLICAS),
                                zk_version=0,
                                replicas=list(REPLICAS),
                                offline_replicas=[],
                            )
                        ],
                    )
                ],
                live_brokers=self.live(),
            )
            with KafkaConnection(self.brokers[b].bootstrap, timeout=20) as c:
                r2 = c.request(ApiKey.UPDATE_METADATA, 7, um, UpdateMetadataResponse)
            assert r2.error_code == 0

    def _knows(self, b: BrokerProcess) -> bool:
        from pylog.protocol.messages import MetadataRequest, MetadataResponse
        from pylog.protocol.messages.metadata_request import MetadataRequestTopic

        with KafkaConnection(b.bootstrap, timeout=10) as c:
            r = c.request(
                ApiKey.METADATA,
                4,
                MetadataRequest(
                    topics=[MetadataRequestTopic(name=self.topic)], allow_auto_topic_creation=False
                ),
                MetadataResponse,
            )
        return bool(r.topics[0].error_code == 0)

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

    at2 = cluster.brokers[2].bootstrap
    md = AdminClient({"bootstrap.servers": at2}).list_topics(cluster.topic, timeout=10)
    assert sorted(md.brokers) == REPLICAS
    assert md.controller_id == LEADER
    p0 = md.topics[cluster.topic].partitions[0]
    assert p0.leader == LEADER and sorted(p0.replicas) == REPLICAS and sorted(p0.isrs) == REPLICAS

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

    kp = KafkaProducer(bootstrap_servers=cluster.brokers[3].bootstrap, acks="all")
    try:
        for i in range(5):
            kp.send(cluster.topic, b"kp-%d" % i).get(timeout=DEADLINE_S)
        assert {b.node_id for b in kp._metadata.brokers()} == set(REPLICAS)
        assert kp._metadata.leader_for_partition(KTP(cluster.topic, 0)) == LEADER
    finally:
        kp.close()
    kc = KafkaConsumer(
        bootstrap_servers=cluster.brokers[3].bootstrap,
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
    at2 = cluster.brokers[2].bootstrap
    out = pylog_cli("topics", "describe", "--bootstrap-server", at2, "--topic", cluster.topic)
    assert f"Partition: 0\tLeader: {LEADER}\tReplicas: 1,2,3\tIsr: 1,2,3" in out, out
    out = pylog_cli("cluster", "describe", "--bootstrap-server", at2)
    assert f"Controller: {LEADER}" in out, out
    for b, p in cluster.brokers.items():
        assert f"Id: {b}\tEndpoint: 127.0.0.1:{p.port}\tRack: rack-{b}" in out, out
    assert "UnderReplicatedPartitions: 0" in out, out


def test_isr_changes_land_in_zookeeper(cluster: Cluster) -> None:
    before = cluster.state()
    assert sorted(before.isr) == REPLICAS
    notes_before = set(cluster.zk.get_isr_change_notifications())
    follower = cluster.brokers[3]
    assert follower.proc is not None
    follower.proc.send_signal(signal.SIGSTOP)
    try:
        # New data the stopped follower cannot fetch: it falls behind.
        from confluent_kafka import Producer

        prod = Producer({"bootstrap.servers": cluster.brokers[2].bootstrap, "acks": 1})
        prod.produce(cluster.topic, value=b"while-stopped")
        assert prod.flush(DEADLINE_S) == 0
        del prod
        wait_for("the ISR shrink in ZooKeeper", lambda: sorted(cluster.state().isr) == [1, 2])
        shrunk = cluster.state()
        assert shrunk.zk_version == before.zk_version + 1
        assert (shrunk.leader, shrunk.leader_epoch) == (LEADER, LEADER_EPOCH)
        assert shrunk.controller_epoch == CONTROLLER_EPOCH
        notes = set(cluster.zk.get_isr_change_notifications()) - notes_before
        assert notes, "no isr_change notification"
        assert any((cluster.topic, 0) in cluster.zk.get_isr_change_notification(n) for n in notes)
        # The leader's Metadata shows its ISR; cluster describe lists the partition.
        out = pylog_cli("cluster", "describe", "--bootstrap-server", cluster.brokers[1].bootstrap)
        assert "UnderReplicatedPartitions: 1" in out and "Isr: 1,2" in out, out
    finally:
        follower.proc.send_signal(signal.SIGCONT)
    wait_for("the ISR expansion in ZooKeeper", lambda: sorted(cluster.state().isr) == REPLICAS)
    expanded = cluster.state()
    assert expanded.zk_version == before.zk_version + 2
    notes = set(cluster.zk.get_isr_change_notifications()) - notes_before
    assert len(notes) >= 2
