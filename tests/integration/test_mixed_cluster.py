"""pylog brokers beside an Apache Kafka 3.9 broker in ZooKeeper mode on one
ZooKeeper (issue 25, docs/migration.md): two pylog brokers (ids 1, 2) and one
Kafka broker (id 3), with the controller on each kind in turn.

Each test: an RF-3 topic with one partition led by each broker reaches a full
ISR; an idempotent acks=all producer (librdkafka) and a consumer group run
through every broker; pylog broker 2, then the Kafka broker, is SIGKILLed,
production goes on, and once started again each rejoins every ISR (the times
are printed); then nothing acknowledged is lost or written twice, the group
read every acknowledged record, and the replicas hold the same records below
the high watermark on both kinds of broker (tests/partition_workload.py's
checker, which reads Kafka's segment files as it reads pylog's).

The rolling migration of a whole Kafka cluster, with the mixed clusters of one
pylog and two Kafka brokers and Kafka's tools in its middle states, is
test_mixed_cluster_rolling.py.

Under the pylog controller, the Kafka leader's ISR shrink and expansion around
broker 2's kill go through AlterPartition, its producer ids through
AllocateProducerIds. Under the Kafka controller, pylog broker 2 restarts under
it and the pylog leader's ISR changes reach it through ZooKeeper
(``/isr_change_notification``); the Kafka broker's SIGKILL then moves the
controller to a pylog broker, and the restarted Kafka broker lives under it.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka39 import Kafka39Broker, add_kafka39_broker, run_kafka39_tool
from partition_workload import (
    WAIT,
    History,
    WorkloadConsumer,
    WorkloadProducer,
    check,
    segment_records,
)

from pylog.testing import ClusterBroker, LocalCluster, ZooKeeperServer

PARTITIONS = 3
KAFKA_ID = 3
#: replica.lag.time.max.ms of the test brokers (CLUSTER_TEST_DEFAULTS), seconds
LAG_S = 10.0


def _mixed(
    zk: ZooKeeperServer,
    tmp: pytest.TempPathFactory,
    *,
    kafka_first: bool,
    kafka: dict[str, object] | None = None,
) -> tuple[LocalCluster, Kafka39Broker]:
    c = LocalCluster(
        2,
        {"offsets.topic.replication.factor": 3, "transaction.state.log.replication.factor": 3},
        zookeeper=zk,
        directory=str(tmp.mktemp("mixed")),
    )
    k = add_kafka39_broker(c, KAFKA_ID, kafka, first=kafka_first)
    try:
        c.start()
    except BaseException:
        print(k.log_tail(40))
        raise
    return c, k


def _wait_acked(history: History, after: float, what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not history.acked_since("idempotent", after, PARTITIONS):
        if time.monotonic() > deadline:
            with history.lock:
                errors = [e for _, e, _ in history.failed][-3:]
            raise TimeoutError(f"no acknowledgement on every partition {what}: {errors}")
        time.sleep(0.1)


def _kill_and_restart(c: LocalCluster, b: ClusterBroker, topic: str, history: History) -> None:
    """SIGKILL ``b``; production goes on; start it again and wait until it
    is back in every ISR (the times printed) and the producer is acknowledged."""
    kind = "Kafka" if isinstance(b, Kafka39Broker) else "pylog"
    controller = c.controller()
    b.kill()
    killed = time.monotonic()
    # The other leaders drop it from their ISRs and go on (min.insync.replicas
    # 2): acks=all still completes on every partition.
    _wait_acked(history, killed + 1.0, f"with {kind} broker {b.broker_id} dead")
    b.start()
    restarted = time.monotonic()
    c.wait_for_full_isr(topic, PARTITIONS, timeout=LAG_S + WAIT)
    healed = time.monotonic()
    print(
        f"\n{kind} broker {b.broker_id} SIGKILLed (controller {controller}), restarted "
        f"{restarted - killed:.1f} s later; ISR full again {healed - restarted:.1f} s after "
        f"its restart ({healed - killed:.1f} s after the kill); controller now {c.controller()}"
    )
    _wait_acked(history, healed, f"after {kind} broker {b.broker_id} rejoined")


def _check_committed(c: LocalCluster, topic: str, history: History) -> None:
    """The group's offsets, committed through coordinators of both kinds as
    they moved, are what its last commits wrote: each coordinator loaded the
    other kind's ``__consumer_offsets`` records."""
    last: dict[int, int] = {}
    for p, offset, _ in history.commits:
        last[p] = offset
    assert last, "the group committed nothing"
    probe = Consumer({"bootstrap.servers": c.bootstrap_servers, "group.id": f"g-{topic}"})
    try:
        got = probe.committed([TopicPartition(topic, p) for p in sorted(last)], timeout=WAIT)
    finally:
        probe.close()
    assert {tp.partition: tp.offset for tp in got} == last


def _move_a_replica_off_the_kafka_leader(c: LocalCluster) -> None:
    """kafka-reassign-partitions (Kafka 3.9's) moves the replica of a
    partition the Kafka broker leads to pylog broker 2: the new replica joins
    the ISR through the Kafka leader's AlterPartition to the pylog
    controller, which must then see the reassignment complete (Kafka's
    controller learns it from its watch on the partition's state znode, which
    its own AlterPartition write fires), elect a leader among the target
    replicas and drop the Kafka replica."""
    t = f"move-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
    admin.create_topics([NewTopic(t, 1, replica_assignment=[[KAFKA_ID, 1]])])[t].result(WAIT)
    c.wait_for_full_isr(t, 1, timeout=WAIT)
    assert c.leader(t, 0) == KAFKA_ID
    prod = Producer({"bootstrap.servers": c.bootstrap_servers, "acks": "all"})
    for n in range(50):
        prod.produce(t, f"move-{n}".encode(), partition=0)
    assert prod.flush(WAIT) == 0
    work = Path(c.dir)
    plan = work / f"{t}.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": 0, "replicas": [2, 1]}]}))  # fmt: skip
    run_kafka39_tool("kafka-reassign-partitions", "--bootstrap-server", c.bootstrap_servers,
                     "--execute", "--reassignment-json-file", str(plan), workdir=work)  # fmt: skip
    c.wait_for(
        lambda: c.replicas(t, 0) == [2, 1] and c.isr(t, 0) == [1, 2],
        f"the reassignment of {t}-0 to complete",
        WAIT,
    )
    assert c.leader(t, 0) in (1, 2)
    assert sorted(segment_records(c.brokers[2].log_dir, t, 0).values()) == sorted(
        f"move-{n}" for n in range(50)
    )


def _run(
    c: LocalCluster,
    k: Kafka39Broker,
    victims: tuple[int, ...] = (2, KAFKA_ID),
    *,
    reassign: bool = False,
) -> None:
    if reassign:
        _move_a_replica_off_the_kafka_leader(c)
    topic = f"mixed-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
    # One partition led by each broker, every broker a replica of each.
    assignment = [[1, 2, 3], [2, 3, 1], [3, 1, 2]]
    new = NewTopic(
        topic, PARTITIONS, replica_assignment=assignment, config={"min.insync.replicas": "2"}
    )
    admin.create_topics([new])[topic].result(WAIT)
    c.wait_for_full_isr(topic, PARTITIONS, timeout=WAIT)
    assert [c.leader(topic, p) for p in range(PARTITIONS)] == [1, 2, 3]

    history = History()
    producer = WorkloadProducer(
        "idempotent", c.bootstrap_servers, topic, PARTITIONS, history,
        **{"enable.idempotence": True},
    )  # fmt: skip
    consumer = WorkloadConsumer(c.bootstrap_servers, topic, f"g-{topic}", history)
    producer.start()
    consumer.start()
    try:
        started = time.monotonic()
        _wait_acked(history, started, "through the three brokers")

        for victim in victims:
            _kill_and_restart(c, c.brokers[victim], topic, history)
    finally:
        producer.stop()
    with history.lock:
        acked = {a.value for a in history.acks}
    deadline = time.monotonic() + WAIT
    while True:
        with history.lock:
            missing = acked - {p.value for p in history.polls}
        if not missing or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    consumer.stop()
    assert not missing, f"the group never read {len(missing)} acknowledged records"
    assert history.acks, "nothing was acknowledged"
    assert not any(e.startswith("fatal") for _, e, _ in history.failed), history.failed[:3]
    _check_committed(c, topic, history)
    problems = check(c, topic, PARTITIONS, history, {"idempotent"}, [], 2)
    assert not problems, problems[:10]
    # The restarted broker's replicas were checked above against each
    # leader's copy; they hold records, not only an empty log.
    assert all(c.isr(topic, p) == [1, 2, 3] for p in range(PARTITIONS))
    bad = k.log_lines(r"unsupported version|cannot become follower since the new leader")
    assert not bad, bad[:3]
    # A clean stop: the Kafka broker's ControlledShutdown (v3) to the pylog
    # controller moves its leadership away before it exits.
    assert c.controller() != KAFKA_ID
    assert k.stop() in (0, 143)  # the JVM's status after SIGTERM's shutdown hooks
    assert k.log_lines(r"Controlled shutdown request returned successfully")
    assert all(c.leader(topic, p) in (1, 2) for p in range(PARTITIONS))


def test_kafka39_broker_under_the_pylog_controller(
    pylog_zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> None:
    c, k = _mixed(pylog_zookeeper, tmp_path_factory, kafka_first=False)
    try:
        assert c.controller() in (1, 2)
        _run(c, k, reassign=True)
    finally:
        c.close()


def test_kafka39_broker_at_ibp_2_6_under_the_pylog_controller(
    pylog_zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Below inter.broker.protocol.version 2.7 a Kafka broker writes its ISR
    changes to ZooKeeper itself and raises /isr_change_notification, as
    pylog's brokers do, and below 3.0 takes producer-id blocks from
    /latest_producer_id_block itself (which must then hold null, not an empty
    string, before the first block: Kafka's parser refuses ""). The pylog
    controller handles both; a kill and restart of the Kafka broker heals."""
    c, k = _mixed(
        pylog_zookeeper,
        tmp_path_factory,
        kafka_first=False,
        kafka={"inter.broker.protocol.version": "2.6"},
    )
    try:
        assert c.controller() in (1, 2)
        _run(c, k, victims=(KAFKA_ID,))
    finally:
        c.close()


def test_pylog_brokers_under_a_kafka39_controller(
    pylog_zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> None:
    c, k = _mixed(pylog_zookeeper, tmp_path_factory, kafka_first=True)
    try:
        assert c.controller() == KAFKA_ID
        _run(c, k)
    finally:
        c.close()
