"""Replication throttles (Kafka's ReplicationQuotaManager) driven by Kafka's own
``kafka-reassign-partitions --throttle``: a partition's new replica on a
fourth broker copies its log at the throttled rate once the quota's
measurement window has filled, joins the ISR when caught up, and ``--verify``
removes the throttle configs the tool set on the brokers and the topic."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType
from kafka_tools import run_tool

from pylog.testing import LocalCluster, ZooKeeperServer

THROTTLE = 1_000_000  # bytes per second
WINDOWS = 11  # replication.quota.window.num (Kafka's default), of 1 s each


@pytest.fixture(scope="module")
def cluster(
    pylog_zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalCluster]:
    c = LocalCluster(
        4,
        {"controlled.shutdown.retry.backoff.ms": 200},
        zookeeper=pylog_zookeeper,
        directory=str(tmp_path_factory.mktemp("cluster")),
    )
    try:
        yield c.start()
    finally:
        c.close()


def _log_bytes(log_dir: str, topic: str) -> int:
    d = Path(log_dir) / f"{topic}-0"
    return sum(f.stat().st_size for f in d.glob("*.log")) if d.is_dir() else 0


def _broker_configs(bootstrap: str, broker: int) -> dict[str, str]:
    """The broker's dynamic keys (what kafka-reassign-partitions sets)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(ResourceType.BROKER, str(broker))
    entries = admin.describe_configs([res])[res].result(30)
    return {k: e.value for k, e in entries.items() if e.source == 2}  # DYNAMIC_BROKER_CONFIG


def test_reassignment_with_a_throttle(cluster: LocalCluster, tmp_path: Path) -> None:
    b = cluster.bootstrap_servers
    source, target = 1, 4
    topic = f"thr-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": b})
    new = NewTopic(topic, 1, replica_assignment=[[source]])
    admin.create_topics([new])[topic].result(30)
    cluster.wait_for_leader(topic)

    # More than the quota's window lets through unpaced (WINDOWS - 1 windows
    # at the bound), so the copy has a paced stretch to measure.
    p = Producer({"bootstrap.servers": b, "linger.ms": 20, "batch.size": 1 << 20,
                  "compression.type": "none"})  # fmt: skip
    value = bytes(range(256)) * 40  # 10 KiB, incompressible enough to matter not
    for i in range(2_600):
        p.produce(topic, value, key=b"%d" % i, partition=0)
        if i % 500 == 0:
            p.poll(0)
    assert p.flush(60) == 0
    total = _log_bytes(cluster.broker(source).log_dir, topic)
    assert total > 25_000_000

    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [source, target]}]}))  # fmt: skip
    out = run_tool("kafka-reassign-partitions", "--bootstrap-server", b,
                   "--reassignment-json-file", str(plan), "--execute",
                   "--throttle", str(THROTTLE), workdir=tmp_path).stdout  # fmt: skip
    assert "Warning: You must run --verify periodically" in out
    assert "The inter-broker throttle limit was set to 1000000 B/s" in out
    started = time.monotonic()
    for broker in (source, target):
        assert _broker_configs(b, broker) == {
            "leader.replication.throttled.rate": str(THROTTLE),
            "follower.replication.throttled.rate": str(THROTTLE),
        }

    # The target's log size over time, until it holds the whole log.
    samples: list[tuple[float, int]] = []
    deadline = started + 180
    while True:
        size = _log_bytes(cluster.broker(target).log_dir, topic)
        samples.append((time.monotonic() - started, size))
        if size >= total:
            break
        assert time.monotonic() < deadline, samples[-5:]
        time.sleep(0.5)
    cluster.wait_for_full_isr(topic, timeout=60)

    # The quota measures its rate over WINDOWS one-second samples, so a copy
    # that starts idle may move up to WINDOWS * THROTTLE at once (as Kafka's
    # does); past that it is paced: the whole copy takes at least what the
    # rest needs at the throttle (an upper bound on the rate: a slow machine
    # only copies slower). Unthrottled, 25 MB move in well under a second.
    took = samples[-1][0]
    paced_rate = (total - WINDOWS * THROTTLE) / took
    assert paced_rate <= 1.2 * THROTTLE, (paced_rate, samples)

    out = run_tool("kafka-reassign-partitions", "--bootstrap-server", b,
                   "--reassignment-json-file", str(plan), "--verify",
                   workdir=tmp_path).stdout  # fmt: skip
    assert f"Reassignment of partition {topic}-0 is completed." in out
    assert "Clearing broker-level throttles" in out
    assert "Clearing topic-level throttles on topic" in out
    for broker in (source, target):
        assert _broker_configs(b, broker) == {}
    res = ConfigResource(ResourceType.TOPIC, topic)
    configs = admin.describe_configs([res])[res].result(30)
    assert configs["leader.replication.throttled.replicas"].value == ""
    assert configs["follower.replication.throttled.replicas"].value == ""
