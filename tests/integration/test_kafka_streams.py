"""Kafka Streams (Apache Kafka's, from Maven Central) against pylog: the
word-count program of tests/kafka-streams, at-least-once, on a `pylog broker
start` process and on a three-broker cluster.

Streams creates its own internal topics (a repartition topic, a key-value
store's changelog and a window store's) through the admin client with the
configs it wants, joins a consumer group with its own assignor, commits,
purges the repartition topic with DeleteRecords and, on a fresh state
directory, restores the stores from the changelogs; two instances share the
tasks; a killed group coordinator is replaced; Kafka's StreamsResetter
rewinds the application. Each shows in what a Python client reads back.
"""

from __future__ import annotations

import random
import signal
import struct
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from broker_process import BrokerProcess
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType
from kafka_streams_connect import log4j_option, word_count
from kafka_tools import TOOL_JVM, kafka_libs

from pylog.testing import LocalCluster, ZooKeeperServer

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]
PARTITIONS = 2
# Commit, and so purge the repartition topic, often: the test waits on both.
STREAMS_CONFIGS = {
    "commit.interval.ms": 200,
    "repartition.purge.interval.ms": 200,
    "statestore.cache.max.bytes": 0,
}


@pytest.fixture(scope="module")
def cluster(
    pylog_zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalCluster]:
    """Three broker processes shared by the module's cluster tests (a cluster
    costs seconds to start and stop; each test uses topics of its own)."""
    # The last broker to stop has nowhere to move its leaders: its controlled
    # shutdown retries, as Kafka's does, after a backoff shortened here.
    c = LocalCluster(
        3,
        {"controlled.shutdown.retry.backoff.ms": 200},
        zookeeper=pylog_zookeeper,
        directory=str(tmp_path_factory.mktemp("cluster")),
    )
    try:
        yield c.start()
    finally:
        c.close()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("broker") / "data").start()
    try:
        yield b
    finally:
        if b.proc is not None:
            b.stop(signal.SIGKILL)


def _lines(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    return [
        " ".join(rng.choice(WORDS).upper() if rng.random() < 0.2 else rng.choice(WORDS)
                 for _ in range(rng.randint(1, 6)))
        for _ in range(count)
    ]  # fmt: skip


def _produce(bootstrap: str, topic: str, lines: list[str]) -> None:
    """Keyed lines, so the partitioner spreads them over every partition (a
    null key's sticky partitioner may put a whole batch on one). Idempotent,
    so a batch the client sends again (its request timed out on a loaded
    machine) is written once and the expected counts hold. The flush bound
    leaves room for a leader election after a broker died."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    errors: list[object] = []
    for i, line in enumerate(lines):
        p.produce(topic, line.encode(), f"line-{i}".encode(),
                  on_delivery=lambda err, _msg: errors.append(err) if err else None)  # fmt: skip
    assert p.flush(90) == 0
    assert errors == []
    assert all(hi > 0 for _, hi in _watermarks(bootstrap, topic))


def _counts(lines: list[str]) -> dict[str, int]:
    return dict(Counter(w.lower() for line in lines for w in line.split()))


def _create(bootstrap: str, *topics: str, replication: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(t, PARTITIONS, replication) for t in topics])
    for f in futures.values():
        f.result(30)


def _latest_counts(bootstrap: str, topic: str) -> dict[str, int]:
    """word -> its last count on the output topic (the value is a big-endian long)."""
    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False}
    )
    try:
        parts = [TopicPartition(topic, p, 0) for p in range(PARTITIONS)]
        ends = {p.partition: c.get_watermark_offsets(p, timeout=10)[1] for p in parts}
        c.assign(parts)
        latest: dict[str, int] = {}
        pos = dict.fromkeys(ends, 0)
        deadline = time.monotonic() + 30
        while any(pos[p] < ends[p] for p in ends) and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error() is not None:
                raise KafkaException(m.error())
            latest[m.key().decode()] = struct.unpack(">q", m.value())[0]
            pos[m.partition()] = m.offset() + 1
        return latest
    finally:
        c.close()


def _wait_counts(
    bootstrap: str, topic: str, expected: dict[str, int], timeout: float = 90, exact: bool = True
) -> dict[str, int]:
    """Until the output's latest counts are ``expected`` (with ``exact=False``,
    at least those: at-least-once may count a word twice when a task moves)."""
    deadline = time.monotonic() + timeout
    got: dict[str, int] = {}
    while time.monotonic() < deadline:
        try:
            got = _latest_counts(bootstrap, topic)
        except KafkaException:  # a partition between leaders after a broker died
            time.sleep(0.3)
            continue
        if got.keys() == expected.keys() and all(got[w] >= n for w, n in expected.items()):
            if exact:
                assert got == expected
            return got
        # A count above the expected one can never come down: fail at once.
        assert not exact or all(got.get(w, 0) <= n for w, n in expected.items()), (got, expected)
        time.sleep(0.3)
    pytest.fail(f"counts {got} never reached {expected}", pytrace=False)


def _watermarks(bootstrap: str, topic: str) -> list[tuple[int, int]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    try:
        return [
            c.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in range(PARTITIONS)
        ]
    finally:
        c.close()


def _committed(bootstrap: str, group: str, topic: str) -> list[int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = ConsumerGroupTopicPartitions(
        group, [TopicPartition(topic, p) for p in range(PARTITIONS)]
    )
    (result,) = admin.list_consumer_group_offsets([request]).values()
    return [
        tp.offset for tp in sorted(result.result(30).topic_partitions, key=lambda t: t.partition)
    ]


def _topic_configs(bootstrap: str, topic: str) -> dict[str, tuple[str, bool]]:
    """name -> (value, whether it is the topic's own setting rather than a default)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(ResourceType.TOPIC, topic)
    entries = admin.describe_configs([res])[res].result(30)
    return {k: (e.value, not e.is_default) for k, e in entries.items()}


def _run_word_count(
    bootstrap: str, tmp_path: Path, replication: int, streams_replication: int = -1
) -> None:
    """``streams_replication`` is Streams' replication.factor for its internal
    topics: -1 (its default) asks for the broker's default.replication.factor."""
    suffix = uuid.uuid4().hex[:8]
    app, source, sink = f"wc-{suffix}", f"lines-{suffix}", f"counts-{suffix}"
    _create(bootstrap, source, sink, replication=replication)
    first, second = _lines(1, 300), _lines(2, 200)
    _produce(bootstrap, source, first)

    configs = {**STREAMS_CONFIGS, "replication.factor": streams_replication}
    wc = word_count(tmp_path, bootstrap, app, source, sink, tmp_path / "state-1", **configs)
    try:
        wc.wait_for("state", 120, new="RUNNING")
        _wait_counts(bootstrap, sink, _counts(first))

        # The internal topics, created by Streams with the configs it asked for.
        repartition, changelog = f"{app}-words-repartition", f"{app}-counts-changelog"
        windowed = f"{app}-windowed-counts-changelog"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        topics = admin.list_topics(timeout=10).topics
        for name in (repartition, changelog, windowed):
            assert name in topics, sorted(topics)
            assert len(topics[name].partitions) == PARTITIONS
            assert all(len(p.replicas) == replication for p in topics[name].partitions.values())
        conf = _topic_configs(bootstrap, changelog)
        assert conf["cleanup.policy"] == ("compact", True)
        assert conf["message.timestamp.type"] == ("CreateTime", True)
        # A window store's changelog: compacted and deleted, kept for the
        # store's retention (5 minutes here) plus a day (Streams' default of
        # windowstore.changelog.additional.retention.ms).
        conf = _topic_configs(bootstrap, windowed)
        assert conf["cleanup.policy"] == ("compact,delete", True)
        assert conf["retention.ms"] == (str(5 * 60_000 + 86_400_000), True)
        conf = _topic_configs(bootstrap, repartition)
        assert conf["cleanup.policy"] == ("delete", True)
        assert conf["retention.ms"] == ("-1", True)
        assert conf["segment.bytes"] == ("52428800", True)
        assert conf["message.timestamp.type"] == ("CreateTime", True)

        # Streams deletes what it has consumed and committed from the
        # repartition topic (DeleteRecords): every record was, so each
        # partition's log start reaches its end.
        deadline = time.monotonic() + 60
        marks = _watermarks(bootstrap, repartition)
        while time.monotonic() < deadline and any(lo != hi for lo, hi in marks):
            time.sleep(0.3)
            marks = _watermarks(bootstrap, repartition)
        assert sum(hi for _, hi in marks) == sum(_counts(first).values())
        assert all(lo == hi for lo, hi in marks), marks

        # One member of a consumer group joined with Streams' own assignor,
        # owning every partition of the input and of the repartition topic.
        group = admin.describe_consumer_groups([app])[app].result(30)
        assert group.partition_assignor == "stream"
        assert [str(group.state).rsplit(".", 1)[-1]] == ["STABLE"]
        (member,) = group.members
        owned = {(tp.topic, tp.partition) for tp in member.assignment.topic_partitions}
        assert owned == {(t, p) for t in (source, repartition) for p in range(PARTITIONS)}

        # A clean close commits and leaves; the next instance takes over from there.
        wc.close_stdin()
        assert wc.wait_for("closed", 90) == {"type": "closed", "clean": True}
        assert wc.wait(30) == 0
    finally:
        wc.kill()
    group = admin.describe_consumer_groups([app])[app].result(30)
    assert (str(group.state).rsplit(".", 1)[-1], group.members) == ("EMPTY", [])
    committed = _committed(bootstrap, app, source)
    assert committed == [hi for _, hi in _watermarks(bootstrap, source)]

    # A new instance on an empty state directory restores the store from the
    # changelog and resumes from the committed offsets: every count of both
    # batches exact (nothing reprocessed after a clean close).
    _produce(bootstrap, source, second)
    wc = word_count(tmp_path, bootstrap, app, source, sink, tmp_path / "state-2", **configs)
    try:
        wc.wait_for("state", 120, new="RUNNING")
        _wait_counts(bootstrap, sink, _counts(first + second))
        wc.close_stdin()
        assert wc.wait_for("closed", 90) == {"type": "closed", "clean": True}
    finally:
        wc.kill()


def test_word_count_on_a_broker(broker: BrokerProcess, tmp_path: Path) -> None:
    # The internal topics take the broker's default replication factor, 1.
    _run_word_count(broker.bootstrap, tmp_path, replication=1)


def test_word_count_on_a_three_broker_cluster(cluster: LocalCluster, tmp_path: Path) -> None:
    _run_word_count(cluster.bootstrap_servers, tmp_path, replication=3, streams_replication=3)


def _state(group: object) -> str:
    return str(group.state).rsplit(".", 1)[-1]  # type: ignore[attr-defined]


def test_two_instances_share_the_work(broker: BrokerProcess, tmp_path: Path) -> None:
    """A second instance joins the running one's group: Streams' assignor
    (cooperative rebalances, more than one round) gives each instance tasks,
    and the counts of everything produced before and after stay complete."""
    bootstrap = broker.bootstrap
    suffix = uuid.uuid4().hex[:8]
    app, source, sink = f"wc-{suffix}", f"lines-{suffix}", f"counts-{suffix}"
    _create(bootstrap, source, sink)
    first, second = _lines(3, 300), _lines(4, 300)
    _produce(bootstrap, source, first)
    admin = AdminClient({"bootstrap.servers": bootstrap})

    a = word_count(tmp_path, bootstrap, app, source, sink, tmp_path / "state-a", **STREAMS_CONFIGS)
    b = None
    try:
        a.wait_for("state", 120, new="RUNNING")
        _wait_counts(bootstrap, sink, _counts(first))
        b = word_count(
            tmp_path, bootstrap, app, source, sink, tmp_path / "state-b", **STREAMS_CONFIGS
        )
        b.wait_for("state", 120, new="RUNNING")
        # Both members own partitions of the input or the repartition topic.
        deadline = time.monotonic() + 60
        while True:
            group = admin.describe_consumer_groups([app])[app].result(30)
            owned = [len(m.assignment.topic_partitions) for m in group.members]
            if _state(group) == "STABLE" and len(owned) == 2 and min(owned) > 0:
                break
            assert time.monotonic() < deadline, (_state(group), owned)
            time.sleep(0.3)
        assert sum(owned) == 2 * PARTITIONS

        _produce(bootstrap, source, second)
        _wait_counts(bootstrap, sink, _counts(first + second), exact=False)
        for instance in (a, b):
            instance.close_stdin()
        for instance in (a, b):
            assert instance.wait_for("closed", 90) == {"type": "closed", "clean": True}
    finally:
        a.kill()
        if b is not None:
            b.kill()
    assert _committed(bootstrap, app, source) == [hi for _, hi in _watermarks(bootstrap, source)]


def test_word_count_survives_its_group_coordinator_dying(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    """SIGKILL of the broker coordinating the application's group (and leading
    some of its partitions) mid-run: Streams finds the new coordinator and
    leaders, and at-least-once keeps every count complete."""
    bootstrap = cluster.bootstrap_servers
    suffix = uuid.uuid4().hex[:8]
    app, source, sink = f"wc-{suffix}", f"lines-{suffix}", f"counts-{suffix}"
    _create(bootstrap, source, sink, replication=3)
    first, second = _lines(5, 300), _lines(6, 300)
    _produce(bootstrap, source, first)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    configs = {**STREAMS_CONFIGS, "replication.factor": 3}
    wc = word_count(tmp_path, bootstrap, app, source, sink, tmp_path / "state", **configs)
    try:
        wc.wait_for("state", 120, new="RUNNING")
        _wait_counts(bootstrap, sink, _counts(first))
        coordinator = admin.describe_consumer_groups([app])[app].result(30).coordinator.id
        victim = cluster.broker(coordinator)
        victim.kill()
        _produce(bootstrap, source, second)
        _wait_counts(bootstrap, sink, _counts(first + second), timeout=120, exact=False)
        victim.start()  # whole again for the module's other tests
        wc.close_stdin()
        assert wc.wait_for("closed", 90) == {"type": "closed", "clean": True}
    finally:
        wc.kill()


def test_application_reset_then_a_rerun_counts_from_the_start(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    """Kafka's kafka-streams-application-reset (StreamsResetter, from the jars
    `make kafka` fetches) deletes the internal topics and rewinds the input's
    committed offsets; the next run recreates the topics and counts again from
    the start, exactly."""
    bootstrap = broker.bootstrap
    suffix = uuid.uuid4().hex[:8]
    app, source, sink = f"wc-{suffix}", f"lines-{suffix}", f"counts-{suffix}"
    internal = {f"{app}-words-repartition", f"{app}-counts-changelog",
                f"{app}-windowed-counts-changelog"}  # fmt: skip
    _create(bootstrap, source)
    lines = _lines(7, 200)
    _produce(bootstrap, source, lines)
    admin = AdminClient({"bootstrap.servers": bootstrap})

    for run in (1, 2):
        # Each run writes its own output topic: the second's counts come from
        # reprocessing every line into an empty store, not from the first's.
        out_topic = f"{sink}-{run}"
        _create(bootstrap, out_topic)
        wc = word_count(
            tmp_path,
            bootstrap,
            app,
            source,
            out_topic,
            tmp_path / f"state-{run}",
            **STREAMS_CONFIGS,
        )
        try:
            wc.wait_for("state", 120, new="RUNNING")
            _wait_counts(bootstrap, out_topic, _counts(lines))
            assert internal <= set(admin.list_topics(timeout=10).topics)
            wc.close_stdin()
            assert wc.wait_for("closed", 90) == {"type": "closed", "clean": True}
        finally:
            wc.kill()
        ends = [hi for _, hi in _watermarks(bootstrap, source)]
        assert _committed(bootstrap, app, source) == ends
        if run == 2:
            break
        out = _streams_resetter(tmp_path, bootstrap, app, source)
        assert all(name in out for name in internal), out
        topics = set(admin.list_topics(timeout=10).topics)
        assert not internal & topics, sorted(internal & topics)
        assert _committed(bootstrap, app, source) == [0] * PARTITIONS


def _streams_resetter(workdir: Path, bootstrap: str, app: str, source: str) -> str:
    libs = kafka_libs()
    done = subprocess.run(
        ["java", *TOOL_JVM, log4j_option(workdir),
         "-cp", f"{libs}/*", "org.apache.kafka.tools.StreamsResetter",
         "--bootstrap-server", bootstrap, "--application-id", app,
         "--input-topics", source, "--to-earliest"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, (
        f"StreamsResetter exited {done.returncode}\n{done.stdout}\n{done.stderr}"
    )
    return done.stdout


def test_word_count_exactly_once_v2_through_sigkills(cluster: LocalCluster, tmp_path: Path) -> None:
    """processing.guarantee=exactly_once_v2 (docs/transactions.md): the
    application is SIGKILLed while it works and restarted on its state, then
    the broker coordinating its transactions is SIGKILLed mid-run; every
    count read_committed is exact — never above the input's, as
    at-least-once would leave it after a crash."""
    bootstrap = cluster.bootstrap_servers
    suffix = uuid.uuid4().hex[:8]
    app, source, sink = f"wc-{suffix}", f"lines-{suffix}", f"counts-{suffix}"
    _create(bootstrap, source, sink, replication=3)
    first, second, third = _lines(7, 300), _lines(8, 300), _lines(9, 300)
    _produce(bootstrap, source, first)
    configs = {**STREAMS_CONFIGS, "replication.factor": 3,
               "processing.guarantee": "exactly_once_v2"}  # fmt: skip
    wc = word_count(tmp_path, bootstrap, app, source, sink, tmp_path / "state", **configs)
    try:
        wc.wait_for("state", 120, new="RUNNING")
        _wait_counts(bootstrap, sink, _counts(first), timeout=120)
        _produce(bootstrap, source, second)
        wc.kill()  # SIGKILL, mid-transaction or between two
    finally:
        wc.kill()
    wc = word_count(tmp_path, bootstrap, app, source, sink, tmp_path / "state", **configs)
    try:
        wc.wait_for("state", 120, new="RUNNING")
        _wait_counts(bootstrap, sink, _counts(first + second), timeout=120)
        # The broker leading the transaction coordinator's partition of the
        # application's producer: Streams' transactional id is the
        # application id with its process id and thread, unknown here, so
        # the coordinator of one of the input's leaders is taken instead:
        # any broker's death moves coordinators and leaders alike.
        victim = cluster.broker(cluster.wait_for_leader(source))
        _produce(bootstrap, source, third)
        victim.kill()
        _wait_counts(bootstrap, sink, _counts(first + second + third), timeout=180)
        victim.start()  # whole again for the module's other tests
        wc.close_stdin()
        assert wc.wait_for("closed", 90) == {"type": "closed", "clean": True}
    finally:
        wc.kill()
