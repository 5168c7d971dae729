"""Kafka's operator tools against a pylog cluster, as an operator runs them
(from the jars `make kafka` fetches): ``kafka-leader-election`` moves
leadership back to the preferred replicas after a broker's restart left it
elsewhere, and ``kafka-log-dirs`` reports every broker's directories and the
size of each replica in them."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from broker_process import ck_produce
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_tools import run_tool

from pylog.testing import LocalCluster, ZooKeeperServer


@pytest.fixture(scope="module")
def cluster(
    pylog_zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalCluster]:
    c = LocalCluster(
        3,
        {"controlled.shutdown.retry.backoff.ms": 200, "auto.leader.rebalance.enable": "false"},
        zookeeper=pylog_zookeeper,
        directory=str(tmp_path_factory.mktemp("cluster")),
    )
    try:
        yield c.start()
    finally:
        c.close()


def test_preferred_leader_election_with_kafkas_tool(cluster: LocalCluster, tmp_path: Path) -> None:
    b = cluster.bootstrap_servers
    topic = f"ple-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": b})
    admin.create_topics([NewTopic(topic, 3, 3)])[topic].result(30)
    cluster.wait_for_full_isr(topic, 3)
    preferred = {p: cluster.replicas(topic, p)[0] for p in range(3)}
    assert all(cluster.leader(topic, p) == preferred[p] for p in range(3))

    # A restart moves the broker's leaderships away; they stay away (no
    # auto.leader.rebalance here) until an election is asked for.
    victim = cluster.broker(preferred[0])
    victim.stop()
    cluster.wait_for(lambda: cluster.leader(topic, 0) not in (None, preferred[0]), "a new leader")
    victim.start()
    cluster.wait_for_full_isr(topic, 3)
    assert cluster.leader(topic, 0) != preferred[0]

    out = run_tool("kafka-leader-election", "--bootstrap-server", b, "--election-type",
                   "preferred", "--topic", topic, "--partition", "0",
                   workdir=tmp_path).stdout  # fmt: skip
    assert f"Successfully completed leader election (PREFERRED) for partitions {topic}-0" in out
    cluster.wait_for(lambda: cluster.leader(topic, 0) == preferred[0], "the preferred leader")

    # Asked again for a partition: nothing to do, and the tool says so. Asked
    # for every partition, only elected or failed ones are answered (as
    # Kafka's controller does): nothing to print, exit 0.
    out = run_tool("kafka-leader-election", "--bootstrap-server", b, "--election-type",
                   "preferred", "--topic", topic, "--partition", "0",
                   workdir=tmp_path).stdout  # fmt: skip
    assert f"Valid replica already elected for partitions {topic}-0" in out
    out = run_tool("kafka-leader-election", "--bootstrap-server", b, "--election-type",
                   "preferred", "--all-topic-partitions", workdir=tmp_path).stdout  # fmt: skip
    assert out.strip() == ""


def test_log_dirs_with_kafkas_tool(cluster: LocalCluster, tmp_path: Path) -> None:
    b = cluster.bootstrap_servers
    topic = f"dirs-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": b})
    admin.create_topics([NewTopic(topic, 2, 2)])[topic].result(30)
    cluster.wait_for_full_isr(topic, 2)
    ck_produce(b, topic, [(b"%d" % i, b"x" * 1000, None) for i in range(200)], acks="all")
    cluster.wait_for_full_isr(topic, 2)

    out = run_tool("kafka-log-dirs", "--bootstrap-server", b, "--describe",
                   "--broker-list", "1,2,3", "--topic-list", topic,
                   workdir=tmp_path).stdout  # fmt: skip
    doc = json.loads(out.strip().splitlines()[-1])
    assert doc["version"] == 1
    assert sorted(x["broker"] for x in doc["brokers"]) == [1, 2, 3]
    replicas: dict[tuple[str, int], list[int]] = {}
    for broker in doc["brokers"]:
        (log_dir,) = broker["logDirs"]
        assert log_dir["error"] is None
        assert log_dir["logDir"] == cluster.broker(broker["broker"]).log_dir
        for part in log_dir["partitions"]:
            name, _, index = part["partition"].rpartition("-")
            assert name == topic
            assert part["offsetLag"] == 0 and part["isFuture"] is False
            replicas.setdefault((name, int(index)), []).append(part["size"])
    # Two replicas of each partition, the same bytes on both, all 200 records.
    assert sorted(replicas) == [(topic, 0), (topic, 1)]
    sizes = [s for v in replicas.values() for s in v]
    assert all(len(v) == 2 and v[0] == v[1] for v in replicas.values()), replicas
    assert sum(sizes) > 2 * 200 * 1000
