"""format("pylog") over a three-broker pylog cluster (real ZooKeeper): the
readers follow partition leadership as Spark's Kafka source does through its
consumer — each partition fetched from its leader, named with its leader
epoch, and a stale leader, a fenced or unknown epoch, or a broker gone
between planning and reading answered by a metadata refresh and a retry."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest
from spark_support import spark

from pylog.spark._wire import BrokerClient
from pylog.spark.source import PylogBatchReader, PylogPartition
from pylog.testing import LocalCluster, ZooKeeperServer

__all__ = ["spark"]  # fixture, imported for pytest

TOPIC = "replicated"
RECORDS = 300


@pytest.fixture(scope="module")
def cluster3(
    pylog_zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalCluster]:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    c = LocalCluster(
        3,
        {"controlled.shutdown.retry.backoff.ms": 200},
        zookeeper=pylog_zookeeper,
        directory=str(tmp_path_factory.mktemp("spark-cluster")),
    ).start()
    try:
        admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
        admin.create_topics([NewTopic(TOPIC, 3, 3)])[TOPIC].result(30)
        c.wait_for_full_isr(TOPIC, 3)
        p = Producer({"bootstrap.servers": c.bootstrap_servers, "acks": "all", "linger.ms": 0})
        for i in range(RECORDS):
            p.produce(TOPIC, value=b"r%d" % i, partition=i % 3)
        assert p.flush(30) == 0
        yield c
    finally:
        c.close()


def _values(reader: PylogBatchReader, parts: list[Any]) -> list[bytes]:
    out = []
    for part in parts:
        assert isinstance(part, PylogPartition) and not part.from_files
        for batch in reader.read(part):
            out += [
                bytes(v) for v in batch.column(batch.schema.get_field_index("value")).to_pylist()
            ]
    return sorted(out)


WANT = sorted(b"r%d" % i for i in range(RECORDS))


def test_reads_follow_a_leader_that_moves_between_planning_and_reading(
    spark: Any, cluster3: LocalCluster
) -> None:
    opts = {"kafka.bootstrap.servers": cluster3.bootstrap_servers, "subscribe": TOPIC}
    reader = PylogBatchReader(opts)  # planning, as the driver does it
    parts = list(reader.partitions())
    assert len(parts) == 3
    # a client whose metadata was taken before the move
    stale = BrokerClient(cluster3.bootstrap_servers)
    stale.fetch(TOPIC, 1, 0, 1 << 20)
    old = cluster3.leader(TOPIC, 1)
    assert old is not None
    gone = cluster3.broker(old).bootstrap_servers
    cluster3.broker(old).stop()  # controlled shutdown: leadership moves away
    try:
        new = cluster3.wait_for_leader(TOPIC, 1)
        assert new != old
        # the planned tasks read from the new leaders; the stale client
        # meets a broker gone (or no longer leader) and finds the new one
        assert _values(reader, parts) == WANT
        got = stale.fetch(TOPIC, 1, 0, 1 << 20)
        assert got.high_watermark == RECORDS // 3
        stale.close()
        # a Spark job whose bootstrap list names the stopped broker first
        df = (
            spark.read.format("pylog")
            .option("kafka.bootstrap.servers", f"{gone},{cluster3.bootstrap_servers}")
            .option("subscribe", TOPIC)
            .option("kafka.isolation.level", "read_committed")
            .load()
        )
        assert sorted(bytes(r.value) for r in df.collect()) == WANT
    finally:
        cluster3.broker(old).start()
        cluster3.wait_for_full_isr(TOPIC, 3)


def test_a_stale_leader_epoch_is_refreshed_and_retried(cluster3: LocalCluster) -> None:
    """Runs after the leader move above: partition 1's epoch is above 0."""
    with BrokerClient(cluster3.bootstrap_servers) as c:
        first = c.fetch(TOPIC, 1, 0, 1 << 20)
        assert first.records is not None and first.high_watermark == RECORDS // 3
        cached = c.client.cluster
        assert cached is not None
        meta = cached.topics[TOPIC].partitions[1]
        assert meta.leader_epoch >= 1
        for epoch in (meta.leader_epoch - 1, meta.leader_epoch + 5):
            # fenced (older than the leader's) and unknown (newer): the broker
            # refuses, the client asks Metadata again and fetches
            c.client.cluster = dataclasses.replace(cached, topics=dict(cached.topics))
            c.client.cluster.topics[TOPIC] = dataclasses.replace(
                cached.topics[TOPIC],
                partitions={
                    **cached.topics[TOPIC].partitions,
                    1: dataclasses.replace(meta, leader_epoch=epoch),
                },
            )
            again = c.fetch(TOPIC, 1, 0, 1 << 20)
            assert again.records is not None and bytes(again.records) == bytes(first.records)
            assert c.client.cluster.topics[TOPIC].partitions[1].leader_epoch == meta.leader_epoch
