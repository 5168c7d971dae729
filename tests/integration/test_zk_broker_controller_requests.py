"""The pylog controller's answers to what a Kafka 3.x ZooKeeper-mode broker
asks of it (controller/zk_broker_requests.py): AlterPartition (KIP-497) and
AllocateProducerIds (KIP-730), sent here as that broker would send them, on a
real pylog cluster and ZooKeeper, one case each of Kafka's
KafkaController.processAlterPartition / processAllocateProducerIds checks.
test_mixed_cluster.py runs them from a real Kafka 3.9 broker."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from pylog.errors import ErrorCode
from pylog.protocol import ApiKey
from pylog.protocol.client import KafkaConnection
from pylog.protocol.messages import (
    AllocateProducerIdsRequest,
    AllocateProducerIdsResponse,
    AlterPartitionRequest,
    AlterPartitionResponse,
)
from pylog.protocol.messages.alter_partition_request import BrokerState, PartitionData, TopicData
from pylog.testing import LocalCluster, ZooKeeperServer


@pytest.fixture(scope="module")
def cluster(
    pylog_zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalCluster]:
    c = LocalCluster(2, zookeeper=pylog_zookeeper, directory=str(tmp_path_factory.mktemp("zkb")))
    try:
        yield c.start()
    finally:
        c.close()


def _epoch(c: LocalCluster, broker: int) -> int:
    """A broker's epoch: its registration znode's czxid (Kafka's)."""
    assert c.zk is not None
    return int(c.zk.get(f"/brokers/ids/{broker}")[1].czxid)


def _controller(c: LocalCluster) -> KafkaConnection:
    cid = c.controller()
    assert cid is not None
    return KafkaConnection(c.brokers[cid].bootstrap_servers, timeout=30)


def _other(c: LocalCluster) -> KafkaConnection:
    cid = c.controller()
    other = next(b for b in c.brokers.values() if b.broker_id != cid)
    return KafkaConnection(other.bootstrap_servers, timeout=30)


def test_allocate_producer_ids(cluster: LocalCluster) -> None:
    key = ApiKey.ALLOCATE_PRODUCER_IDS

    def ask(conn: KafkaConnection, broker: int, epoch: int) -> AllocateProducerIdsResponse:
        body = AllocateProducerIdsRequest(broker_id=broker, broker_epoch=epoch)
        return conn.request(key, 0, body, AllocateProducerIdsResponse)

    with _controller(cluster) as conn:
        first = ask(conn, 2, _epoch(cluster, 2))
        second = ask(conn, 2, _epoch(cluster, 2))
        assert first.error_code == second.error_code == ErrorCode.NONE
        assert first.producer_id_len == second.producer_id_len == 1000
        # The blocks follow each other out of /latest_producer_id_block, the
        # znode pylog's own brokers take theirs from.
        assert second.producer_id_start == first.producer_id_start + 1000
        assert cluster.zk is not None
        block = json.loads(cluster.zk.get("/latest_producer_id_block")[0])
        assert (int(block["broker"]), int(block["block_start"]), int(block["block_end"])) == (
            2,
            second.producer_id_start,
            second.producer_id_start + 999,
        )
        assert ask(conn, 2, _epoch(cluster, 2) - 1).error_code == ErrorCode.STALE_BROKER_EPOCH
        assert ask(conn, 9, 1).error_code == ErrorCode.BROKER_ID_NOT_REGISTERED
    with _other(cluster) as conn:
        assert ask(conn, 2, _epoch(cluster, 2)).error_code == ErrorCode.NOT_CONTROLLER


def test_alter_partition(cluster: LocalCluster) -> None:
    topic = f"ap-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[[2, 1]])])[topic].result(30)
    cluster.wait_for_full_isr(topic)
    assert cluster.zk is not None
    topic_id = json.loads(cluster.zk.get(f"/brokers/topics/{topic}")[0])["topic_id"]
    state_path = f"/brokers/topics/{topic}/partitions/0/state"
    epoch = _epoch(cluster, 2)

    def znode() -> tuple[dict[str, object], int]:
        assert cluster.zk is not None
        data, stat = cluster.zk.get(state_path)
        return json.loads(data), int(stat.version)

    state, version = znode()
    leader_epoch = int(state["leader_epoch"])  # type: ignore[call-overload]

    def propose(
        isr: list[int],
        *,
        v: int = 3,
        partition_epoch: int,
        leader_epoch: int = leader_epoch,
        broker_epoch: int = epoch,
        tid: str = topic_id,
        conn: KafkaConnection | None = None,
    ) -> AlterPartitionResponse:
        part = PartitionData(
            partition_index=0,
            leader_epoch=leader_epoch,
            partition_epoch=partition_epoch,
        )
        if v >= 3:  # each member with its broker epoch (KIP-903)
            part.new_isr_with_epochs = [BrokerState(broker_id=b, broker_epoch=-1) for b in isr]
        else:
            part.new_isr = isr
        t = (
            TopicData(topic_id=tid, partitions=[part])
            if v >= 2
            else TopicData(topic_name=topic, partitions=[part])
        )
        body = AlterPartitionRequest(broker_id=2, broker_epoch=broker_epoch, topics=[t])
        if conn is not None:
            return conn.request(ApiKey.ALTER_PARTITION, v, body, AlterPartitionResponse)
        with _controller(cluster) as c:
            return c.request(ApiKey.ALTER_PARTITION, v, body, AlterPartitionResponse)

    def code(r: AlterPartitionResponse) -> int:
        assert r.error_code == ErrorCode.NONE, r
        return int(r.topics[0].partitions[0].error_code)

    stale = propose([2], partition_epoch=version, broker_epoch=epoch - 1)
    assert stale.error_code == ErrorCode.STALE_BROKER_EPOCH
    with _other(cluster) as other:
        moved = propose([2], partition_epoch=version, conn=other)
        assert moved.error_code == ErrorCode.NOT_CONTROLLER
    fenced = propose([2], partition_epoch=version, leader_epoch=leader_epoch - 1)
    assert code(fenced) == ErrorCode.FENCED_LEADER_EPOCH
    ahead = propose([2], partition_epoch=version + 5)
    assert code(ahead) == ErrorCode.NOT_CONTROLLER
    # KIP-841: a broker that is not alive may not join the ISR.
    assert code(propose([2, 1, 9], partition_epoch=version)) == ErrorCode.INELIGIBLE_REPLICA
    assert code(propose([2, 1, 9], v=1, partition_epoch=version)) == (
        ErrorCode.OPERATION_NOT_ATTEMPTED
    )
    unknown = propose([2], partition_epoch=version, tid="AAAAAAAAAAAAAAAAAAAAAQ")
    assert code(unknown) == ErrorCode.UNKNOWN_TOPIC_ID
    assert znode() == (state, version)  # nothing refused was written

    # A shrink: written, fenced on the controller epoch, answered with the
    # new partition epoch (the znode's version).
    shrunk = propose([2], partition_epoch=version)
    assert code(shrunk) == ErrorCode.NONE
    p = shrunk.topics[0].partitions[0]
    assert (p.leader_id, p.leader_epoch, p.isr, p.partition_epoch) == (
        2,
        leader_epoch,
        [2],
        version + 1,
    )
    assert shrunk.topics[0].topic_id == topic_id
    written, new_version = znode()
    assert (written["isr"], new_version) == ([2], version + 1)
    # The same proposal again (its answer lost): the state already there.
    again = propose([2], partition_epoch=version)
    assert code(again) == ErrorCode.NONE
    assert again.topics[0].partitions[0].partition_epoch == version + 1
    # Another ISR on the old partition epoch: refused.
    assert code(propose([2, 1], partition_epoch=version)) == ErrorCode.INVALID_UPDATE_VERSION
    # v1 names the topic; the expansion back is written.
    back = propose([2, 1], v=1, partition_epoch=version + 1)
    assert code(back) == ErrorCode.NONE
    assert back.topics[0].topic_name == topic
    assert back.topics[0].partitions[0].isr == [2, 1]
    assert znode()[0]["isr"] == [2, 1]
    # Every broker is told (UpdateMetadata): Metadata shows the full ISR again.
    cluster.wait_for(
        lambda: sorted(
            admin.list_topics(topic, timeout=10).topics[topic].partitions[0].isrs
        ) == [1, 2],
        "Metadata to show the ISR",
        30,
    )  # fmt: skip
