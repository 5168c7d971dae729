"""The rolling migration of a whole Apache Kafka 3.9 cluster (ZooKeeper mode)
to pylog and back, under clients that never stop (issue 25, docs/migration.md).

One test, one cluster start: three Kafka 3.9.1 brokers (ids 1-3) on the
session's ZooKeeper, an RF-3 topic, ``__consumer_offsets`` and
``__transaction_state``; an idempotent acks=all producer, a transactional
producer (one transaction in four aborted on purpose) and a read_committed
consumer group from librdkafka, and the Java client (tests/java) beside them:
an idempotent producer fed one record a line, and a group consumer run back
to back (each run commits what it read, the next starts where the group's
committed offsets say).

Each Kafka broker in turn stops cleanly (SIGTERM: Kafka's controlled shutdown)
and a pylog broker with its ``broker.id`` starts on its port and its log
directory as Kafka left it; every ISR is full again before the next (the
times are printed). The controller's broker goes last, so the middle states
keep a Kafka controller. Then back to Kafka one at a time, the pylog
controller last.

The middle states are the mixed clusters of the issue:

* 1 pylog + 2 Kafka, on the way there under a Kafka controller and on the way
  back under a pylog one: each broker SIGKILLed and restarted in turn (the
  controller last) under the acks=all load; every ISR heals.
* 2 pylog + 1 Kafka on the way there: Kafka 3.9's own tools against the mix
  (kafka-topics --create/--describe/--alter, kafka-reassign-partitions
  moving replicas between a Kafka and a pylog broker, kafka-leader-election
  --election-type preferred, kafka-configs on a topic and on a broker of
  each kind).

At the end: no delivery error at all (no error a client does not retry), no
failed transaction, no aborted record read, no record lost or duplicated
(tests/partition_workload.py's checker, which reads Kafka's and pylog's
segment files alike), the replicas identical below the
high watermark, each group read every record and its committed offsets were
kept through every coordinator move.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from java_client import run_java, start_java
from kafka39 import Kafka39Broker, run_kafka39_tool
from partition_workload import (
    WAIT,
    Ack,
    History,
    TransactionalProducer,
    WorkloadConsumer,
    WorkloadProducer,
    check,
    high_watermarks,
    segment_records,
)

from pylog.testing import ClusterBroker, LocalCluster, ZooKeeperServer

PARTITIONS = 3
IDS = (1, 2, 3)
#: replica.lag.time.max.ms of the test brokers (CLUSTER_TEST_DEFAULTS), seconds
LAG_S = 10.0
OFFSETS = "__consumer_offsets"
TXN_STATE = "__transaction_state"
#: Fewer than Kafka's 50 (both kinds read the same key): each step moves
#: every partition's leadership, and the test runs on two shared cores.
OFFSETS_PARTITIONS = 10
BROKER_CONFIG = {
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.num.partitions": str(OFFSETS_PARTITIONS),
    "min.insync.replicas": "2",
}


def kind(b: ClusterBroker) -> str:
    return "Kafka" if isinstance(b, Kafka39Broker) else "pylog"


# ---------------------------------------------------------------- the Java client


class JavaProducer:
    """The Java client's idempotent acks=all producer (``produce --stdin``):
    ``java-<n>`` fed one a line at a steady pace, each acknowledgement or
    delivery error read from its stdout into the history."""

    def __init__(self, bootstrap: str, topic: str, history: History, stderr: Path) -> None:
        self.history = history
        self.proc = start_java(
            "produce", "--bootstrap", bootstrap, "--topic", topic, "--stdin",
            "--acks", "all", "--idempotence", "true",
            "--property", "metadata.max.age.ms=5000",
            "--property", "retry.backoff.max.ms=500",
            stderr=stderr,
        )  # fmt: skip
        self.stop_event = threading.Event()
        self.done: dict[str, Any] | None = None
        self.feeder = threading.Thread(target=self._feed, name="java-feed", daemon=True)
        self.reader = threading.Thread(target=self._read, name="java-read", daemon=True)
        self.feeder.start()
        self.reader.start()

    def _feed(self) -> None:
        assert self.proc.stdin is not None
        n = 0
        try:
            while not self.stop_event.is_set():
                value = f"java-{n}"
                with self.history.lock:
                    self.history.attempted.add(value)
                self.proc.stdin.write(value + "\n")
                self.proc.stdin.flush()
                n += 1
                time.sleep(0.02)
        except (BrokenPipeError, OSError) as e:
            with self.history.lock:
                self.history.failed.append(("java", f"the producer died: {e}", time.monotonic()))
        finally:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        h = self.history
        for line in self.proc.stdout:
            if not line.startswith("{"):
                continue
            got = json.loads(line)
            now = time.monotonic()
            with h.lock:
                if got["type"] == "ack":
                    h.last_ack[("java", got["partition"])] = now
                    h.acks.append(Ack("java", got["value"], got["partition"], got["offset"], now))
                elif got["type"] in ("failed", "error"):
                    h.failed.append(("java", f"{got['error']}: {got['message']}", now))
                elif got["type"] == "done":
                    self.done = got

    def acked_since(self, after: float) -> bool:
        with self.history.lock:
            return any(t > after for (who, _), t in self.history.last_ack.items() if who == "java")

    def stop(self) -> None:
        self.stop_event.set()
        self.feeder.join(10)
        self.proc.wait(WAIT + 30)
        self.reader.join(10)
        assert self.done is not None, "the Java producer did not finish"


class JavaGroupReader(threading.Thread):
    """The Java client's ``consume --group`` run back to back: each run reads
    ``count`` records from where the group's committed offsets say, commits
    its positions (commitSync) and exits; the next run starts from them."""

    def __init__(self, bootstrap: str, topic: str, group: str, count: int = 2000) -> None:
        super().__init__(name="java-group", daemon=True)
        self.args = ("--bootstrap", bootstrap, "--topic", topic, "--group", group)
        self.count = count
        self.runs: list[list[dict[str, Any]]] = []
        self.errors: list[str] = []
        self.stop_event = threading.Event()

    def run_once(self, count: int) -> None:
        res = run_java("consume", *self.args, "--count", str(count), "--timeout-ms", "90000",
                       timeout=180)  # fmt: skip
        self.runs.append(res.lines)
        if res.returncode != 0:
            self.errors.append(f"exit {res.returncode}: {res.lines[-2:]} {res.stderr[-500:]}")

    def run(self) -> None:
        while not self.stop_event.is_set():
            self.run_once(self.count)
            # A JVM start each run: a pause keeps them from crowding two cores.
            self.stop_event.wait(2)

    def stop(self) -> None:
        self.stop_event.set()
        self.join(200)


def _check_java_group(reader: JavaGroupReader, logs: dict[int, dict[int, str]]) -> list[str]:
    """Each partition's records (the transactions' markers are not records)
    read exactly once across the runs, in order, each run starting at the
    first record from the previous run's committed offset."""
    problems = list(reader.errors)
    read: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
    committed: dict[int, int] = {}
    for i, lines in enumerate(reader.runs):
        first: dict[int, int] = {}
        for line in lines:
            if line["type"] == "record":
                p, o = line["partition"], line["offset"]
                first.setdefault(p, o)
                read[p].append(o)
                if logs[p].get(o) != line["value"]:
                    problems.append(f"java group read {line['value']} at {p}@{o}: not the log's")
        for p, o in first.items():
            expected = min((x for x in logs[p] if x >= committed.get(p, 0)), default=None)
            if o != expected:
                problems.append(
                    f"java group run {i} started {p} at {o}, committed {committed.get(p)}"
                )
        committed.update(
            {ln["partition"]: ln["offset"] for ln in lines if ln["type"] == "committed"}
        )
    for p, offsets in read.items():
        if offsets != sorted(logs[p]):
            problems.append(
                f"java group read {len(offsets)} of {len(logs[p])} records of partition {p}, "
                f"not each once in order"
            )
    return problems


# ---------------------------------------------------------------- waits


def _partitions(c: LocalCluster, topic: str) -> int:
    assert c.zk is not None
    return len(c.zk.get_children(f"/brokers/topics/{topic}/partitions"))


def _full_isr(c: LocalCluster, topics: list[str]) -> bool:
    for t in topics:
        for p in range(_partitions(c, t)):
            r = c.replicas(t, p)
            if not r or c.isr(t, p) != sorted(r):
                return False
    return True


def _wait_full_isr(c: LocalCluster, topics: list[str], what: str) -> None:
    c.wait_for(lambda: _full_isr(c, topics), f"every ISR full {what}", LAG_S + 2 * WAIT)


def _wait_acked(history: History, java: JavaProducer, after: float, what: str) -> None:
    """Both producers acknowledged, and a transaction committed, since ``after``."""
    deadline = time.monotonic() + WAIT
    while not (
        history.acked_since("idempotent", after, PARTITIONS)
        and java.acked_since(after)
        and history.last_txn_commit > after
    ):
        if time.monotonic() > deadline:
            with history.lock:
                errors = [e for _, e, _ in history.failed][-3:]
            raise TimeoutError(f"no acknowledgement on every partition {what}: {errors}")
        time.sleep(0.1)


def _knows_three(b: ClusterBroker) -> bool:
    admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
    try:
        return len(admin.list_topics(timeout=5).brokers) == 3
    except Exception:
        return False


# ---------------------------------------------------------------- the steps


def _controlled_shutdowns(b: ClusterBroker) -> int:
    """How many of ``b``'s clean stops got the controller's answer (both
    kinds log Kafka's sentence, KafkaServer's and pylog's broker)."""
    try:
        text = Path(b.log_file).read_text(errors="replace")
    except FileNotFoundError:
        return 0
    return len(re.findall(r"controlled shutdown request returned successfully", text, re.I))


class Migration:
    def __init__(self, c: LocalCluster, kafka: dict[int, Kafka39Broker],
                 pylog: dict[int, ClusterBroker], topic: str, history: History,
                 java: JavaProducer) -> None:  # fmt: skip
        self.c, self.kafka, self.pylog = c, kafka, pylog
        self.topic, self.history, self.java = topic, history, java
        self.topics = [topic, OFFSETS, TXN_STATE]
        self.steps: list[str] = []
        self.kills: list[str] = []
        self.kill_controllers: set[str] = set()

    def controller(self) -> int:
        self.c.wait_for(lambda: self.c.controller() in self.c.registered(), "a controller", WAIT)
        got = self.c.controller()
        assert got is not None
        return got

    def replace(self, i: int, new: ClusterBroker) -> None:
        """``broker i`` stops cleanly; ``new`` starts with its id, port and
        log directory; every ISR full again."""
        c = self.c
        old = c.brokers[i]
        controller = self.controller()
        before = _controlled_shutdowns(old)
        status = old.stop()
        stopped = time.monotonic()
        assert status in (0, 143), f"{kind(old)} broker {i} exited {status} on SIGTERM"
        # Its ControlledShutdown to the controller (either kind) was answered
        # before it exited: its leaderships had moved.
        assert _controlled_shutdowns(old) == before + 1, f"{kind(old)} broker {i}: {old.log_file}"
        c.brokers[i] = new
        new.start()
        started = time.monotonic()
        _wait_full_isr(c, self.topics, f"with broker {i} {kind(new)}")
        full = time.monotonic()
        line = (
            f"broker {i} {kind(old)} -> {kind(new)} (controller {controller} before): every ISR "
            f"full {full - stopped:.1f} s after the stop ({full - started:.1f} s after the start)"
        )
        print("\n" + line)
        self.steps.append(line)
        _wait_acked(self.history, self.java, full, f"with broker {i} {kind(new)}")

    def next_to_replace(self, left: list[int]) -> int:
        """A broker not yet replaced, the controller's last."""
        ctrl = self.controller()
        others = [i for i in left if i != ctrl]
        return others[0] if others else left[0]

    def kill_each(self) -> None:
        """Each broker SIGKILLed and restarted in turn, the controller last."""
        ctrl = self.controller()
        for i in sorted(IDS, key=lambda i: i == ctrl):
            self.kill_and_restart(self.c.brokers[i])

    def kill_and_restart(self, b: ClusterBroker) -> None:
        c = self.c
        ctrl = self.controller()
        state = "".join(sorted(kind(x)[0] for x in c.brokers.values()))
        self.kill_controllers.add(kind(c.brokers[ctrl]))
        b.kill()
        killed = time.monotonic()
        # The other leaders drop it from their ISRs (min.insync.replicas 2):
        # acks=all goes on.
        _wait_acked(self.history, self.java, killed + 1.0, f"with broker {b.broker_id} dead")
        # Its registration must expire before it may register again.
        c.wait_for(lambda: b.broker_id not in c.registered(), "the registration to expire", WAIT)
        b.start()
        restarted = time.monotonic()
        _wait_full_isr(c, self.topics, f"after broker {b.broker_id}'s restart")
        healed = time.monotonic()
        line = (
            f"[{state}] {kind(b)} broker {b.broker_id} SIGKILLed (controller {ctrl}, "
            f"{kind(c.brokers[ctrl])}), restarted {restarted - killed:.1f} s later; ISR full "
            f"{healed - restarted:.1f} s after the restart ({healed - killed:.1f} s after the kill)"
        )
        print("\n" + line)
        self.kills.append(line)
        _wait_acked(self.history, self.java, healed, f"after broker {b.broker_id} rejoined")


# ---------------------------------------------------------------- Kafka 3.9's tools


def _describe(c: LocalCluster, topic: str, workdir: Path) -> dict[int, tuple[int, list[int]]]:
    """kafka-topics --describe: partition -> (leader, replicas)."""
    out = run_kafka39_tool(
        "kafka-topics", "--bootstrap-server", c.bootstrap_servers, "--describe", "--topic",
        topic, workdir=workdir,
    ).stdout  # fmt: skip
    got: dict[int, tuple[int, list[int]]] = {}
    for m in re.finditer(r"Partition: (\d+)\s+Leader: (-?\d+)\s+Replicas: ([\d,]+)", out):
        got[int(m[1])] = (int(m[2]), [int(x) for x in m[3].split(",")])
    return got


def kafka_tools_against_the_mix(c: LocalCluster, main_topic: str, workdir: Path) -> None:
    kafka_ids = [i for i, b in c.brokers.items() if isinstance(b, Kafka39Broker)]
    pylog_ids = [i for i, b in c.brokers.items() if not isinstance(b, Kafka39Broker)]
    assert len(kafka_ids) == 1 and len(pylog_ids) == 2, c.brokers
    k, (p1, p2) = kafka_ids[0], pylog_ids
    began = time.monotonic()
    boot = c.bootstrap_servers
    t = f"tools-{uuid.uuid4().hex[:6]}"

    # kafka-topics: create (replicas placed by hand, across the kinds),
    # describe, add a partition.
    run_kafka39_tool(
        "kafka-topics", "--bootstrap-server", boot, "--create", "--topic", t,
        "--replica-assignment", f"{k}:{p1},{p1}:{p2},{p2}:{k}", workdir=workdir,
    )  # fmt: skip
    c.wait_for_full_isr(t, 3, timeout=WAIT)
    described = _describe(c, t, workdir)
    assert {p: r for p, (_, r) in described.items()} == {0: [k, p1], 1: [p1, p2], 2: [p2, k]}
    assert all(leader == r[0] for leader, r in described.values()), described
    run_kafka39_tool("kafka-topics", "--bootstrap-server", boot, "--alter", "--topic", t,
                     "--partitions", "4", workdir=workdir)  # fmt: skip
    c.wait_for(lambda: _partitions(c, t) == 4, "the fourth partition", WAIT)
    c.wait_for_full_isr(t, 4, timeout=WAIT)

    # Records in it, then kafka-reassign-partitions moves partition 0's
    # replica from the Kafka broker to a pylog broker and partition 1's from
    # a pylog broker to the Kafka broker (each new replica fetches the log).
    prod = Producer({"bootstrap.servers": boot, "acks": "all", "linger.ms": 5})
    for n in range(400):
        prod.produce(t, f"tools-{n}".encode(), partition=n % 4)
    assert prod.flush(WAIT) == 0
    plan = {"version": 1, "partitions": [
        {"topic": t, "partition": 0, "replicas": [p2, p1]},
        {"topic": t, "partition": 1, "replicas": [k, p2]},
    ]}  # fmt: skip
    (workdir / "plan.json").write_text(json.dumps(plan))
    out = run_kafka39_tool(
        "kafka-reassign-partitions", "--bootstrap-server", boot, "--execute",
        "--reassignment-json-file", str(workdir / "plan.json"), workdir=workdir,
    ).stdout  # fmt: skip
    assert "Successfully started partition reassignment" in out, out
    deadline = time.monotonic() + WAIT
    while True:
        out = run_kafka39_tool(
            "kafka-reassign-partitions", "--bootstrap-server", boot, "--verify",
            "--reassignment-json-file", str(workdir / "plan.json"), workdir=workdir, check=False,
        ).stdout  # fmt: skip
        if "is still in progress" not in out:
            break
        assert time.monotonic() < deadline, out
        time.sleep(1)
    assert f"Reassignment of partition {t}-0 is completed" in out, out
    assert f"Reassignment of partition {t}-1 is completed" in out, out
    assert c.replicas(t, 0) == [p2, p1] and c.replicas(t, 1) == [k, p2]
    c.wait_for_full_isr(t, 4, timeout=WAIT)
    hws = high_watermarks(boot, t, 4)
    for p, new_replica in ((0, p2), (1, k)):
        leader = c.leader(t, p)
        assert leader is not None
        mine = segment_records(c.brokers[new_replica].log_dir, t, p)
        theirs = segment_records(c.brokers[leader].log_dir, t, p)
        assert hws[p] == 100 and len(theirs) == 100
        assert {o: v for o, v in mine.items() if o < hws[p]} == theirs

    # kafka-leader-election: the preferred replica leads every partition
    # again (the kills before left leaders elsewhere).
    out = run_kafka39_tool(
        "kafka-leader-election", "--bootstrap-server", boot, "--election-type", "preferred",
        "--all-topic-partitions", workdir=workdir,
    ).stdout  # fmt: skip
    for topic in (main_topic, t):
        c.wait_for(
            lambda topic=topic: all(
                c.leader(topic, p) == c.replicas(topic, p)[0] for p in range(_partitions(c, topic))
            ),
            f"the preferred leaders of {topic} ({out.strip()[-300:]})",
            WAIT,
        )

    # kafka-configs: a topic's config set through one kind of broker and
    # read through the other; a broker's dynamic config on each kind.
    run_kafka39_tool(
        "kafka-configs", "--bootstrap-server", c.brokers[p1].bootstrap_servers, "--alter",
        "--entity-type", "topics", "--entity-name", t, "--add-config", "retention.ms=86400000",
        workdir=workdir,
    )  # fmt: skip

    def topic_config() -> str:
        return run_kafka39_tool(
            "kafka-configs", "--bootstrap-server", c.brokers[k].bootstrap_servers, "--describe",
            "--entity-type", "topics", "--entity-name", t, workdir=workdir,
        ).stdout  # fmt: skip

    c.wait_for(lambda: "retention.ms=86400000" in topic_config(), "the topic's config", WAIT)
    for b in (k, p1):
        out = run_kafka39_tool(
            "kafka-configs", "--bootstrap-server", boot, "--alter", "--entity-type", "brokers",
            "--entity-name", str(b), "--add-config", "message.max.bytes=2000000",
            workdir=workdir,
        ).stdout  # fmt: skip
        assert f"Completed updating config for broker {b}." in out, out
    # Every broker described, each by itself (DescribeConfigs of a broker
    # goes to that broker): the two it was set on say so.
    out = run_kafka39_tool(
        "kafka-configs", "--bootstrap-server", boot, "--describe", "--entity-type", "brokers",
        workdir=workdir,
    ).stdout  # fmt: skip
    sections = re.split(r"(?m)^Dynamic configs for broker (\d+) are:$", out)
    dynamic = {int(sections[i]): sections[i + 1] for i in range(1, len(sections) - 1, 2)}
    assert set(dynamic) == set(IDS), out
    for b in IDS:
        said = "message.max.bytes=2000000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:"
        assert (said in dynamic[b]) == (b in (k, p1)), out
    print(
        f"\nKafka 3.9's tools against brokers {k} (Kafka), {p1} and {p2} (pylog): all passed "
        f"in {time.monotonic() - began:.0f} s"
    )


# ---------------------------------------------------------------- the test


def _check_committed(c: LocalCluster, topic: str, history: History) -> None:
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


def test_rolling_migration_of_a_kafka39_cluster_to_pylog_and_back(
    pylog_zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> None:
    began = time.monotonic()
    work = tmp_path_factory.mktemp("rolling")
    c = LocalCluster(1, BROKER_CONFIG, zookeeper=pylog_zookeeper, directory=str(work))
    kafka = {i: Kafka39Broker(i, str(work / f"kafka-{i}"), BROKER_CONFIG) for i in IDS}
    # Broker 1 alone first (it wins the first controller election), then 2
    # and 3 together: their JVMs start side by side.
    pylog: dict[int, ClusterBroker] = {}
    c.brokers = {1: kafka[1]}
    c.start()
    try:
        for i in (2, 3):
            kafka[i].overrides["zookeeper.connect"] = c.zookeeper_connect
        starters = [threading.Thread(target=kafka[i].start) for i in (2, 3)]
        for s in starters:
            s.start()
        for s in starters:
            s.join(300)
        c.brokers = dict(kafka)
        c.wait_for(lambda: c.registered() == list(IDS), "three Kafka brokers", WAIT)
        for b in kafka.values():
            c.wait_for(lambda b=b: _knows_three(b), f"broker {b.broker_id} to know all", WAIT)
        assert c.controller() == 1
        for i in IDS:
            p = ClusterBroker(
                i,
                kafka[i].dir + "-pylog",
                {**c.overrides, **BROKER_CONFIG, "zookeeper.connect": c.zookeeper_connect},
                port=kafka[i].port,
            )
            p.log_dir = kafka[i].log_dir  # Kafka's files, as Kafka left them
            pylog[i] = p

        topic = f"rolling-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
        new = NewTopic(topic, PARTITIONS, replica_assignment=[[1, 2, 3], [2, 3, 1], [3, 1, 2]])
        admin.create_topics([new])[topic].result(WAIT)
        c.wait_for_full_isr(topic, PARTITIONS, timeout=WAIT)

        history = History()
        producer = WorkloadProducer(
            "idempotent", c.bootstrap_servers, topic, PARTITIONS, history,
            **{"enable.idempotence": True},
        )  # fmt: skip
        consumer = WorkloadConsumer(c.bootstrap_servers, topic, f"g-{topic}", history)
        txn = TransactionalProducer(c.bootstrap_servers, topic, PARTITIONS, history)
        java = JavaProducer(c.bootstrap_servers, topic, history, work / "java-producer.log")
        reader = JavaGroupReader(c.bootstrap_servers, topic, f"gj-{topic}")
        producer.start()
        txn.start()
        consumer.start()
        reader.start()
        m = Migration(c, kafka, pylog, topic, history, java)
        try:
            _wait_acked(history, java, time.monotonic(), "through the three Kafka brokers")
            for internal in (OFFSETS, TXN_STATE):
                c.wait_for(lambda t=internal: c.zk is not None
                           and c.zk.exists(f"/brokers/topics/{t}"), internal, WAIT)  # fmt: skip
            _wait_full_isr(c, m.topics, "before the migration")
            assert c.replicas(OFFSETS, 0) and len(c.replicas(OFFSETS, 0)) == 3

            # There: Kafka -> pylog, the controller's broker last.
            left = list(IDS)
            for n in range(3):
                i = m.next_to_replace(left)
                left.remove(i)
                m.replace(i, pylog[i])
                if n == 0:  # 1 pylog + 2 Kafka, a Kafka controller
                    assert kind(c.brokers[m.controller()]) == "Kafka"
                    m.kill_each()
                elif n == 1:  # 2 pylog + 1 Kafka
                    tools = work / "tools"
                    tools.mkdir()
                    kafka_tools_against_the_mix(c, topic, tools)
            assert kind(c.brokers[m.controller()]) == "pylog"

            # And back: pylog -> Kafka, the controller's broker last.
            left = list(IDS)
            for n in range(3):
                i = m.next_to_replace(left)
                left.remove(i)
                m.replace(i, kafka[i])
                if n == 1:  # 1 pylog + 2 Kafka, a pylog controller
                    assert kind(c.brokers[m.controller()]) == "pylog"
                    m.kill_each()
            assert all(isinstance(b, Kafka39Broker) for b in c.brokers.values())
            assert m.kill_controllers == {"Kafka", "pylog"}
            reader.stop()
        finally:
            reader.stop_event.set()
            producer.stop()
            txn.stop()
            java.stop()

        with history.lock:
            # The group reads committed (librdkafka's default): not the
            # records of a transaction that did not commit.
            acked = {
                a.value
                for a in history.acks
                if a.producer != "txn" or history.outcome.get(a.value) == "committed"
            }
        c.wait_for(
            lambda: acked <= {p.value for p in list(history.polls)},
            "the group to read every acknowledged record",
            WAIT,
        )
        consumer.stop()
        assert not history.failed, history.failed[:5]
        outcomes = set(history.outcome.values())
        assert outcomes == {"committed", "aborted"}, outcomes
        assert java.done is not None and java.done["failed"] == 0, java.done
        _check_committed(c, topic, history)
        no_offset = sum(1 for a in history.acks if a.offset is None or a.offset < 0)
        problems = check(c, topic, PARTITIONS, history, {"idempotent", "java", "txn"}, [], 2)
        assert not problems, problems[:10]

        # The Java group reads the rest, from its committed offsets.
        logs = {p: segment_records(c.brokers[c.leader(topic, p) or 1].log_dir, topic, p)
                for p in range(PARTITIONS)}  # fmt: skip
        probe = Consumer({"bootstrap.servers": c.bootstrap_servers, "group.id": f"gj-{topic}"})
        try:
            done = probe.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], WAIT)
        finally:
            probe.close()
        rest = sum(1 for tp in done for o in logs[tp.partition] if o >= max(tp.offset, 0))
        if rest:
            reader.run_once(rest)
        problems = _check_java_group(reader, logs)
        assert not problems, problems[:10]

        java_acks = sum(1 for a in history.acks if a.producer == "java")
        ended = {o: sum(1 for x in history.outcome.values() if x == o) for o in outcomes}
        print("\n" + "\n".join(["the migration:", *m.steps, "the kills:", *m.kills]))
        print(
            f"{len(history.acks)} records acknowledged ({java_acks} from the Java client), "
            f"transactional records {ended}, none lost or doubled; "
            f"{len(reader.runs)} Java group runs; no delivery error; {no_offset} delivered "
            "without an offset; "
            f"the test took {time.monotonic() - began:.0f} s"
        )
    finally:
        for b in [*kafka.values(), *pylog.values()]:
            if b.running:
                b.stop()
        c.close()
