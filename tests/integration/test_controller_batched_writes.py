"""The controller's batched reaction to a broker's death, on a real ZooKeeper
and three real broker processes (``pylog_cluster_factory``).

The controller writes a dead broker's partitions together, pipelined, and
bases the first write on its own copy of each partition's state. These tests
make that copy stale behind its back (a state znode rewritten without an ISR
change notification) and check that the znode's version still decides: the
new leader comes from the ISR that ZooKeeper holds, and a dead broker that the
copy has out of an ISR but ZooKeeper has in it is still taken out."""

from __future__ import annotations

import json
from collections.abc import Callable

from broker_process import topic_name
from kazoo.client import KazooClient

from pylog.testing import LocalCluster

WAIT = 60.0  # upper bound for waits: only catches hangs

Factory = Callable[..., LocalCluster]


def _state_path(topic: str, p: int) -> str:
    return f"/brokers/topics/{topic}/partitions/{p}/state"


def _rewrite_isr(zk: KazooClient, topic: str, p: int, isr: list[int]) -> None:
    """What a leader's ISR change writes, without telling the controller."""
    data, stat = zk.get(_state_path(topic, p))
    doc = json.loads(data)
    doc["isr"] = isr
    zk.set(_state_path(topic, p), json.dumps(doc).encode(), stat.version)


def test_new_leaders_and_isrs_follow_zookeeper_not_the_controllers_copy(
    pylog_cluster_factory: Factory,
) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    # Leaders never shrink ISRs themselves here: only the controller does.
    cluster = pylog_cluster_factory(
        3, zookeeper_session_timeout_ms=2000, replica_lag_time_max_ms=120_000
    )
    topic, parts = topic_name("stale"), 12
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(topic, parts, 3)])[topic].result(WAIT)
    cluster.wait_for_full_isr(topic, parts, timeout=WAIT)
    zk = cluster.zk
    assert zk is not None
    controller = cluster.controller()
    victim = next(b for b in sorted(cluster.brokers) if b != controller)

    # p_led: led by the victim. ZooKeeper's ISR loses the replica that the
    # controller's copy would pick next (assignment order), so an election
    # from the copy would choose differently from one from ZooKeeper.
    p_led = next(p for p in range(parts) if cluster.leader(topic, p) == victim)
    assignment = cluster.replicas(topic, p_led)
    assert assignment[0] == victim
    skipped, expected = assignment[1], assignment[2]
    _rewrite_isr(zk, topic, p_led, [victim, expected])

    # p_follow: the victim follows. The controller's copy has it out of the
    # ISR (a notified shrink), ZooKeeper has it back in (an unnotified expand).
    p_follow = next(
        p
        for p in range(parts)
        if cluster.leader(topic, p) != victim and victim in cluster.replicas(topic, p)
    )
    others = [r for r in cluster.replicas(topic, p_follow) if r != victim]
    _rewrite_isr(zk, topic, p_follow, others)
    zk.create(
        "/isr_change_notification/isr_change_",
        json.dumps(
            {"version": 1, "partitions": [{"topic": topic, "partition": p_follow}]}
        ).encode(),
        sequence=True,
    )
    cluster.wait_for(
        lambda: not zk.get_children("/isr_change_notification"),
        "the controller to read the ISR change",
        WAIT,
    )
    _rewrite_isr(zk, topic, p_follow, [*others, victim])

    before = {p: cluster.partition_state(topic, p) for p in range(parts)}
    cluster.broker(victim).kill()
    cluster.wait_for(
        lambda: all(victim not in cluster.isr(topic, p) for p in range(parts)),
        f"broker {victim} out of every ISR",
        WAIT,
    )
    for p in range(parts):
        state, old = cluster.partition_state(topic, p), before[p]
        assert state is not None and old is not None
        assert state["leader"] != victim and state["leader"] >= 0, (p, state)
        assert state["leader_epoch"] > old["leader_epoch"], (p, state, old)
        if old["leader"] != victim:
            assert state["leader"] == old["leader"], (p, state, old)
    led = cluster.partition_state(topic, p_led)
    assert led is not None and led["leader"] == expected != skipped, led
    assert cluster.isr(topic, p_follow) == sorted(others)
