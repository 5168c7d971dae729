"""pylog beside Apache Kafka on the same machine, in the same run (issue 14).

    .venv/bin/python bench/kafka_peer.py [--reps 3] [--seconds 1] [--only ROW,...]
                                         [--dir DIR] [--kafka-libs DIR] [--skip-if-missing]
    .venv/bin/python bench/kafka_peer.py --profile produce-1024-1-1   # pylog under py-spy
    .venv/bin/python bench/kafka_peer.py --cluster   # three brokers of each kind, RF 3

Starts Apache Kafka (the jars `make kafka` copies into
${XDG_CACHE_HOME:-~/.cache}/pylog/kafka-<version>/libs, nothing of it in the
repository) in KRaft combined mode (one process is broker and controller) on a
free loopback port, and a pylog broker the way bench/broker_bench.py starts one,
both with their data under one scratch directory on the same disk. Then every
row runs against both, alternating which goes first, ``--reps`` times, and the
table gives the medians:

- produce with confluent-kafka (librdkafka), a throughput-tuned producer,
  1 KiB and 100 B records, acks=1 and acks=all, 1 and 6 partitions, for
  ``--seconds`` each, and 1 KiB from 4 producer processes at once;
- produce with kcat from a file of records, and with Kafka's own
  ProducerPerformance (the Java client);
- consume the same 1 KiB data with confluent-kafka (1 and 6 partitions), kcat
  and Kafka's ConsumerPerformance (a group member, as the tool is); and
  ConsumerPerformance over 256 MiB that kcat -P wrote (~1 MB batches), at the
  tool's default 1 MiB per-partition fetch and at 8 MiB (issue 28);
- end-to-end latency (produce -> a consumer sees it) at a fixed 10,000
  records/s, p50 / p99 / p99.9, acks=1 and acks=all, and Kafka's EndToEndLatency
  tool (one record at a time, whole milliseconds);
- broker CPU seconds per GB (user + system from /proc/<pid>/stat) while
  producing and consuming 1 KiB records, and RSS after start and at its peak;
  beside every row, the broker's CPU over its measured part (% of one core),
  which tells whether the broker or the client was the bound.

``--profile ROW`` runs a confluent-kafka produce row against pylog alone with
py-spy attached to the broker and prints its threads' busy / GIL-wait / idle
shares and the functions where the busy samples were.

Below the table, the limits of this machine measured in the same run (raw
loopback TCP into a file; raw sendfile of pylog's segments over loopback; both
from bench/broker_bench.py) and each broker's best figure as a fraction of them.
With ``--cluster`` both sides are three brokers on this machine (pylog's
with their ZooKeeper, Kafka's three KRaft nodes, each broker and controller)
and the rows are replication-factor-3 produce, consume and acks=all latency;
CPU and RSS are summed over each side's processes.
Both brokers stay up for the whole run, so the idle one costs the other a
little. Nothing here fails on timing; with no Kafka jars and
``--skip-if-missing`` it prints why and exits 0.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker_bench import (
    THROUGHPUT_PRODUCER,
    Broker,
    _quiet,
    page_cache_write_cost,
    raw_sendfile,
    raw_tcp_to_file,
)
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)
from confluent_kafka.cimpl import NewTopic

from pylog.metadata.store import new_uuid

KiB = 1 << 10
MiB = 1 << 20
HERE = Path(__file__).resolve().parent
CLK_TCK = os.sysconf("SC_CLK_TCK")

# Both brokers: a consumer group forms at once (ConsumerPerformance joins one),
# and deleted topics leave the disk within a second, so reps do not pile up data.
COMMON_CONFIG = {
    "num.partitions": "1",
    "group.initial.rebalance.delay.ms": "0",
    "log.segment.delete.delay.ms": "1000",
    "offsets.topic.replication.factor": "1",
}

# What bin/kafka-server-start.sh and bin/kafka-run-class.sh give the JVM.
KAFKA_JVM = [
    "-Xmx1G",
    "-Xms1G",
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
]
# What bin/kafka-producer-perf-test.sh and kafka-consumer-perf-test.sh give theirs.
TOOL_JVM = ["-Xmx512M", "-server", "-XX:+UseG1GC", "-Djava.awt.headless=true"]

LOG4J2 = """\
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = err
appender.err.type = Console
appender.err.name = err
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
"""


# ---------------------------------------------------------------- where Kafka is


def kafka_version() -> str:
    """The version bench/kafka/pom.xml fetches: one place names it."""
    pom = (HERE / "kafka" / "pom.xml").read_text()
    m = re.search(r"<kafka\.version>([^<]+)</kafka\.version>", pom)
    assert m, "bench/kafka/pom.xml names no kafka.version"
    return m.group(1)


def default_libs() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "pylog" / f"kafka-{kafka_version()}" / "libs"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ---------------------------------------------------------------- the two brokers


class Peer:
    """What a row needs of a broker: where it listens, its pid, its topics."""

    name: str
    bootstrap: str
    pid: int
    replication_factor = 1

    def cpu_seconds(self) -> float:
        """User + system CPU time of the broker process so far."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK

    def status_kib(self, key: str) -> int:
        """A memory line of /proc/<pid>/status (VmRSS, VmHWM) in KiB."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
        raise KeyError(key)

    _admin: AdminClient | None = None

    def admin(self) -> AdminClient:
        """One client for the run: a future outlives nothing that has been freed."""
        if self._admin is None:
            # Its own log lines would only say, at the end, that the broker went.
            self._admin = AdminClient({"bootstrap.servers": self.bootstrap, "logger": _quiet()})
        return self._admin

    def create_topic(self, name: str, partitions: int) -> None:
        topics = [NewTopic(name, partitions, self.replication_factor)]
        for fut in self.admin().create_topics(topics).values():
            fut.result(timeout=30)
        # Both brokers answer CreateTopics before every partition has a leader
        # everywhere; produce only once metadata shows them all.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            md = self.admin().list_topics(name, timeout=10).topics.get(name)
            ready = md is not None and md.error is None and len(md.partitions) == partitions
            if ready and all(p.leader >= 0 for p in md.partitions.values()):
                return
            time.sleep(0.05)
        raise RuntimeError(f"{self.name}: topic {name} has no leaders after 30 s")

    def delete_topic(self, name: str) -> None:
        for fut in self.admin().delete_topics([name], operation_timeout=30).values():
            fut.result(timeout=30)

    def stop(self) -> None:
        raise NotImplementedError


class PylogPeer(Peer):
    """`python -m pylog.cli broker start`, as bench/broker_bench.py runs it."""

    def __init__(self, workdir: str) -> None:
        self.name = "pylog"
        overrides = [f"{k}={v}" for k, v in COMMON_CONFIG.items()]
        os.mkdir(os.path.join(workdir, "pylog"))
        self.broker = Broker(
            os.path.join(workdir, "pylog"), overrides, [sys.executable, "-m", "pylog.cli"]
        )
        self.bootstrap = self.broker.bootstrap
        self.pid = self.broker.pid

    def stop(self) -> None:
        self._admin = None  # freed before the broker goes, or it logs the disconnect
        self.broker.stop()


class KafkaPeer(Peer):
    """Apache Kafka in KRaft combined mode (broker and controller in one JVM)."""

    def __init__(self, workdir: str, libs: Path, extra: dict[str, str] | None = None) -> None:
        """``extra``: more broker properties, over the ones below (the
        differential tests' configuration, tests/differential)."""
        self.name = "Kafka"
        self.dir = Path(workdir) / "kafka"
        self.dir.mkdir(parents=True)
        self.classpath = f"{libs}/*"
        port, controller = free_port(), free_port()
        self.bootstrap = f"127.0.0.1:{port}"
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{controller}",
            "listeners": f"PLAINTEXT://{self.bootstrap},CONTROLLER://127.0.0.1:{controller}",
            "advertised.listeners": f"PLAINTEXT://{self.bootstrap}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.dir / "logs"),
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            **COMMON_CONFIG,
            **(extra or {}),
        }
        config = self.dir / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        (self.dir / "log4j2.properties").write_text(LOG4J2)
        self.log4j = f"-Dlog4j2.configurationFile={self.dir / 'log4j2.properties'}"
        cluster_id = new_uuid()  # never starts with "-", which kafka-storage takes for an option
        self.java(
            ["kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(config)],
            jvm=["-Xmx256M"],
            timeout=120,
        )
        self.stderr = open(self.dir / "kafka.stderr", "w+b")  # noqa: SIM115
        self.proc = subprocess.Popen(
            ["java", *KAFKA_JVM, self.log4j, "-cp", self.classpath, "kafka.Kafka", str(config)],
            stdout=subprocess.DEVNULL,
            stderr=self.stderr,
        )
        self.pid = self.proc.pid
        self._wait_ready(120)

    def java(
        self, args: list[str], jvm: list[str] | None = None, timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        cmd = ["java", *(jvm or TOOL_JVM), self.log4j, "-cp", self.classpath, *args]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(f"{args[0]} exited {done.returncode}: {done.stderr[-1500:]}")
        return done

    def _wait_ready(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        admin = self.admin()
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.stderr.seek(0)
                raise RuntimeError(f"Kafka exited: {self.stderr.read()[-2000:]!r}")
            try:
                if admin.list_topics(timeout=1).brokers:
                    return
            except Exception:
                time.sleep(0.2)
        raise RuntimeError(f"Kafka did not answer Metadata within {seconds} s")

    def stop(self) -> None:
        self._admin = None  # freed before the broker goes, or it logs the disconnect
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.stderr.close()


class ProcessGroup:
    """CPU and memory of a deployment of several processes: their sums."""

    pids: list[int]

    def cpu_seconds(self) -> float:
        total = 0.0
        for pid in self.pids:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / CLK_TCK
        return total

    def status_kib(self, key: str) -> int:
        total = 0
        for pid in self.pids:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith(key + ":"):
                    total += int(line.split()[1])
        return total


class PylogClusterPeer(ProcessGroup, Peer):
    """Three pylog brokers and their ZooKeeper (pylog.testing.LocalCluster),
    with Kafka's default session timeout; CPU and RSS are the four processes'."""

    replication_factor = 3

    def __init__(self, workdir: str) -> None:
        from pylog.testing import LocalCluster

        self.name = "pylog"
        self.cluster = LocalCluster(
            3,
            {**COMMON_CONFIG, "offsets.topic.replication.factor": "3"},
            directory=os.path.join(workdir, "pylog-cluster"),
            log_level="WARNING",
        ).start()
        self.bootstrap = self.cluster.bootstrap_servers
        procs = [b.proc for b in self.cluster.brokers.values()]
        zk = self.cluster._zk_server
        procs.append(zk.proc if zk is not None else None)
        self.pids = [p.pid for p in procs if p is not None]
        self.pid = self.pids[0]

    def stop(self) -> None:
        self._admin = None
        self.cluster.close()


class KafkaClusterPeer(KafkaPeer):
    """Three Apache Kafka nodes in KRaft combined mode, a controller quorum of
    three; CPU and RSS are the three JVMs'."""

    replication_factor = 3

    def __init__(self, workdir: str, libs: Path) -> None:
        self.name = "Kafka"
        self.dir = Path(workdir) / "kafka-cluster"
        self.dir.mkdir(parents=True)
        self.classpath = f"{libs}/*"
        (self.dir / "log4j2.properties").write_text(LOG4J2)
        self.log4j = f"-Dlog4j2.configurationFile={self.dir / 'log4j2.properties'}"
        ports = {n: (free_port(), free_port()) for n in (1, 2, 3)}
        voters = ",".join(f"{n}@127.0.0.1:{c}" for n, (_, c) in ports.items())
        self.bootstrap = ",".join(f"127.0.0.1:{p}" for p, _ in ports.values())
        cluster_id = new_uuid()  # never starts with "-", which kafka-storage takes for an option
        self.procs: list[subprocess.Popen[bytes]] = []
        self.stderrs = []
        configs = []
        for n, (port, controller) in ports.items():
            props = {
                "process.roles": "broker,controller",
                "node.id": str(n),
                "controller.quorum.voters": voters,
                "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}",
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
                "controller.listener.names": "CONTROLLER",
                "inter.broker.listener.name": "PLAINTEXT",
                "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
                "log.dirs": str(self.dir / f"logs-{n}"),
                **COMMON_CONFIG,
                "offsets.topic.replication.factor": "3",
            }
            config = self.dir / f"server-{n}.properties"
            config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
            configs.append(config)
            self.java(
                ["kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(config)],
                jvm=["-Xmx256M"],
                timeout=120,
            )
        for n, config in enumerate(configs, 1):
            err = open(self.dir / f"kafka-{n}.stderr", "w+b")  # noqa: SIM115
            self.stderrs.append(err)
            self.procs.append(
                subprocess.Popen(
                    [
                        *("java", *KAFKA_JVM, self.log4j, "-cp", self.classpath),
                        *("kafka.Kafka", str(config)),
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=err,
                )
            )
        self.proc = self.procs[0]
        self.stderr = self.stderrs[0]
        self.pids = [p.pid for p in self.procs]
        self.pid = self.pids[0]
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            for proc, err in zip(self.procs, self.stderrs, strict=True):
                if proc.poll() is not None:
                    err.seek(0)
                    raise RuntimeError(f"a Kafka node exited: {err.read()[-2000:]!r}")
            with contextlib.suppress(Exception):
                if len(self.admin().list_topics(timeout=1).brokers) == 3:
                    return
            time.sleep(0.2)
        raise RuntimeError("the Kafka cluster did not show three brokers within 180 s")

    cpu_seconds = ProcessGroup.cpu_seconds
    status_kib = ProcessGroup.status_kib

    def stop(self) -> None:
        self._admin = None
        for proc in self.procs:
            proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for err in self.stderrs:
            err.close()


# ---------------------------------------------------------------- the tools every row shares


def produce_confluent(
    bootstrap: str, topic: str, value_size: int, acks: str, seconds: float, partitioned: bool
) -> tuple[int, float]:
    """Produce ``value_size``-byte records for ``seconds`` (then flush), at
    most 64 MiB queued in the client; keyless records go where librdkafka's
    partitioner puts them when ``partitioned``, else to partition 0."""
    errors: list[KafkaError] = []

    def on_error(err: KafkaError | None, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    config = {**THROUGHPUT_PRODUCER, "acks": acks, "on_delivery": on_error}
    p = Producer({"bootstrap.servers": bootstrap, **config})
    messages = [{"value": os.urandom(value_size)} for _ in range(64)] * max(
        1, 256 * KiB // value_size // 64
    )
    part = -1 if partitioned else 0
    max_queued = max(len(messages), 64 * MiB // value_size)
    p.produce_batch(topic, messages[:1], partition=0)  # connect + metadata outside the clock
    p.flush(30)
    sent = 0
    start = time.perf_counter()
    deadline = start + seconds
    while time.perf_counter() < deadline:
        if len(p) > max_queued:
            p.poll(0.001)
            continue
        n = p.produce_batch(topic, messages, partition=part)
        if n != len(messages):
            raise RuntimeError(f"produce_batch queued {n} of {len(messages)}")
        sent += n
        p.poll(0)
    left = p.flush(120)
    elapsed = time.perf_counter() - start
    if left or errors:
        raise RuntimeError(f"{left} records not delivered, errors: {errors[:3]}")
    return sent, elapsed


def consume_confluent(
    bootstrap: str,
    topic: str,
    partitions: int,
    expected: int,
    isolation: str = "read_committed",
) -> float:
    """Seconds to read all ``expected`` records of ``topic`` from the beginning
    (assign, no group commits), a consumer tuned as bench/broker_bench.py's;
    ``isolation``: librdkafka's isolation.level (its default, read_committed,
    reads a non-transactional topic as read_uncommitted does)."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "isolation.level": isolation,
            "group.id": "kafka-peer-bench",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "fetch.max.bytes": 64 * MiB,
            "max.partition.fetch.bytes": 16 * MiB,
            "queued.max.messages.kbytes": 256 * KiB,
            "queued.min.messages": 1_000_000,
            "check.crcs": False,
        }
    )
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    got = 0
    start = time.perf_counter()
    deadline = start + 120
    try:
        while got < expected and time.perf_counter() < deadline:
            msgs = c.consume(num_messages=100_000, timeout=0.5)
            for m in msgs:
                if m.error() is not None:
                    raise RuntimeError(f"consume error: {m.error()}")
            got += len(msgs)
        elapsed = time.perf_counter() - start
    finally:
        c.close()
    if got != expected:
        raise RuntimeError(f"read {got} of {expected} records")
    return elapsed


def record_file(workdir: str, value_size: int, count: int) -> str:
    """A file of ``count`` newline-separated printable records for kcat -l."""
    path = os.path.join(workdir, f"records-{value_size}-{count}.txt")
    if not os.path.exists(path):
        line = (base64.b64encode(os.urandom(value_size))[:value_size] + b"\n") * 1024
        with open(path, "wb") as f:
            for _ in range(count // 1024):
                f.write(line)
    return path


# ---------------------------------------------------------------- rows


@dataclass
class Row:
    """One line of the table: a workload, what it measures, lower or higher better."""

    name: str
    unit: str
    higher_is_better: bool
    run: Callable[[Peer, Bench], float | tuple[float, ...]]
    values: dict[str, list[Any]] = field(default_factory=dict)
    cpu: dict[str, list[float]] = field(default_factory=dict)  # % of a core, clocked part


class Bench:
    """The state the rows share: scratch dir, the Kafka jars, data already on each broker."""

    def __init__(self, workdir: str, kafka: KafkaPeer, seconds: float) -> None:
        self.workdir = workdir
        self.kafka = kafka
        self.seconds = seconds
        self.n = 0
        self.datasets: dict[tuple[str, int], tuple[str, int]] = {}
        self.txn_datasets: dict[str, tuple[str, int, int]] = {}
        self.cpu: dict[tuple[str, str], list[float]] = {}
        self._started: dict[str, tuple[float, float]] = {}
        self.last: dict[str, tuple[float, float]] = {}

    def topic(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}-{self.n}"

    def clock(self, peer: Peer) -> float:
        """Called before and after the measured part of a row: the second call
        keeps the broker's CPU seconds and the wall time between the two (and
        returns the wall time)."""
        now, cpu = time.perf_counter(), peer.cpu_seconds()
        if peer.name not in self._started:
            self._started[peer.name] = (now, cpu)
            return 0.0
        t0, c0 = self._started.pop(peer.name)
        self.last[peer.name] = (now - t0, cpu - c0)
        return now - t0

    def note_cpu(self, peer: Peer, what: str, nbytes: int) -> None:
        """Broker CPU seconds per GB over the last clocked part."""
        _, cpu_s = self.last[peer.name]
        self.cpu.setdefault((what, peer.name), []).append(cpu_s / (nbytes / 1e9))

    def txn_dataset(self, peer: Peer) -> tuple[str, int, int]:
        """A topic of 1 KiB records written in transactions of 1,000 records,
        one transaction in ten aborted, produced once per broker: its topic
        and the numbers of committed and aborted records."""
        if peer.name not in self.txn_datasets:
            topic = self.topic("consume-txn")
            peer.create_topic(topic, 1)
            p = Producer(
                {
                    "bootstrap.servers": peer.bootstrap,
                    "transactional.id": topic,
                    "linger.ms": 5,
                    "logger": _quiet(),
                }
            )
            p.init_transactions(60)
            value = os.urandom(KiB)
            done = [0, 0]  # committed, aborted
            deadline = time.perf_counter() + 3.0
            i = 0
            while time.perf_counter() < deadline:
                p.begin_transaction()
                for _ in range(1000):
                    p.produce(topic, value, partition=0)
                if i % 10 == 9:
                    # Delivered first, so the partition is in the transaction:
                    # an abort while librdkafka's AddPartitionsToTxn is still
                    # answered CONCURRENT_TRANSACTIONS (the last commit's
                    # markers on their way) reaches the coordinator after that
                    # commit completed, which Kafka's coordinator too refuses
                    # with INVALID_TXN_STATE.
                    p.flush(60)
                    p.abort_transaction(60)
                else:
                    p.commit_transaction(60)
                done[i % 10 == 9] += 1000
                i += 1
            self.txn_datasets[peer.name] = (topic, done[0], done[1])
        return self.txn_datasets[peer.name]

    def dataset(self, peer: Peer, partitions: int) -> tuple[str, int]:
        """A topic of 1 KiB records produced once per broker for the consume rows."""
        key = (peer.name, partitions)
        if key not in self.datasets:
            topic = self.topic(f"consume-{partitions}p")
            peer.create_topic(topic, partitions)
            n, _ = produce_confluent(peer.bootstrap, topic, KiB, "1", 1.5, partitions > 1)
            self.datasets[key] = (topic, n + 1)  # + the record sent before the clock
        return self.datasets[key]


def produce_row(size: int, acks: str, partitions: int) -> Callable[[Peer, Bench], float]:
    def run(peer: Peer, b: Bench) -> float:
        topic = b.topic(f"p{size}-{acks}-{partitions}")
        peer.create_topic(topic, partitions)
        b.clock(peer)
        n, t = produce_confluent(peer.bootstrap, topic, size, acks, b.seconds, partitions > 1)
        b.clock(peer)
        if size == KiB and acks == "1" and partitions == 1:
            b.note_cpu(peer, "produce 1 KiB, acks=1, 1 partition", n * size)
        peer.delete_topic(topic)
        return n * size / t / 1e6 if size >= KiB else n / t / 1e6

    return run


def set_verification(peer: Peer, enabled: bool) -> None:
    """transaction.partition.verification.enable, dynamic, on each broker of
    either side (kafka-configs --entity-type brokers --entity-name ID)."""
    resources = []
    for broker_id in peer.admin().list_topics(timeout=10).brokers:
        res = ConfigResource(ResourceType.BROKER, str(broker_id))
        res.add_incremental_config(
            ConfigEntry(
                "transaction.partition.verification.enable",
                "true" if enabled else "false",
                incremental_operation=AlterConfigOpType.SET,
            )
        )
        resources.append(res)
    for fut in peer.admin().incremental_alter_configs(resources).values():
        fut.result(timeout=30)
    time.sleep(0.5)  # the brokers apply it as they hear of it


def txn_produce(size: int, per_txn: int, verify: bool) -> Callable[[Peer, Bench], float]:
    """Transactions of ``per_txn`` records of ``size`` bytes, each committed
    before the next begins (init, then begin / produce / commit in a loop)
    with one librdkafka producer for ``seconds``: committed records/s.
    ``verify``: transaction.partition.verification.enable (KIP-890 part 1),
    set on the broker for the row and back on after it."""

    def run(peer: Peer, b: Bench) -> float:
        topic = b.topic(f"txn{size}-{per_txn}-{int(verify)}")
        peer.create_topic(topic, 1)
        if not verify:
            set_verification(peer, False)
        try:
            p = Producer(
                {
                    "bootstrap.servers": peer.bootstrap,
                    "transactional.id": topic,
                    "linger.ms": 5,
                    "logger": _quiet(),
                }
            )
            p.init_transactions(60)
            value = os.urandom(size)
            n = 0
            b.clock(peer)
            deadline = time.perf_counter() + b.seconds
            while time.perf_counter() < deadline:
                p.begin_transaction()
                for _ in range(per_txn):
                    p.produce(topic, value, partition=0)
                p.commit_transaction(60)
                n += per_txn
            t = b.clock(peer)
        finally:
            if not verify:
                set_verification(peer, True)
        peer.delete_topic(topic)
        return n / t / 1e3

    return run


def produce_parallel(producers: int, size: int, partitions: int) -> Callable[[Peer, Bench], float]:
    """``producers`` processes (this script in --produce-worker mode) at once."""

    def run(peer: Peer, b: Bench) -> float:
        topic = b.topic(f"par{producers}")
        peer.create_topic(topic, partitions)
        start_at = time.time() + 1.5  # all connected before any starts
        cmd = [
            sys.executable,
            __file__,
            "--produce-worker",
            json.dumps([peer.bootstrap, topic, size, b.seconds, start_at]),
        ]
        procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) for _ in range(producers)]
        results = []
        for proc in procs:
            out, _ = proc.communicate(timeout=180)
            if proc.returncode != 0:
                raise RuntimeError(f"producer worker exited {proc.returncode}")
            results.append(json.loads(out))
        peer.delete_topic(topic)
        records = sum(r[0] for r in results)
        return records * size / max(r[1] for r in results) / 1e6

    return run


def produce_worker(arg: str) -> None:
    bootstrap, topic, size, seconds, start_at = json.loads(arg)
    p = Producer({"bootstrap.servers": bootstrap, **THROUGHPUT_PRODUCER})
    p.list_topics(topic, timeout=30)
    p.flush(0)
    time.sleep(max(0.0, start_at - time.time()))
    n, t = produce_confluent(bootstrap, topic, size, "1", seconds, True)
    print(json.dumps([n, t]))


def kcat_produce(size: int, count: int) -> Callable[[Peer, Bench], float]:
    def run(peer: Peer, b: Bench) -> float:
        path = record_file(b.workdir, size, count)
        topic = b.topic(f"kcat{size}")
        peer.create_topic(topic, 1)
        opts = ["-p", "0", "-l", "-X", "acks=1", "-X", "linger.ms=5", "-X", "batch.size=1000000"]
        cmd = ["kcat", "-P", "-b", peer.bootstrap, "-t", topic, *opts, path]
        b.clock(peer)
        subprocess.run(cmd, check=True, timeout=180)
        t = b.clock(peer)
        peer.delete_topic(topic)
        return count * size / t / 1e6 if size >= KiB else count / t / 1e6

    return run


def perf_produce(
    size: int, acks: str, count: int, props: tuple[str, ...] = ()
) -> Callable[[Peer, Bench], float]:
    """Kafka's ProducerPerformance (the Java client) with its defaults but ``props``."""

    def run(peer: Peer, b: Bench) -> float:
        topic = b.topic(f"pp{size}")
        peer.create_topic(topic, 1)
        args = f"--num-records {count} --record-size {size} --throughput -1".split()
        out = b.kafka.java(
            [
                "org.apache.kafka.tools.ProducerPerformance",
                *("--topic", topic, *args, "--producer-props"),
                *(f"bootstrap.servers={peer.bootstrap}", f"acks={acks}", *props),
            ]
        ).stdout
        peer.delete_topic(topic)
        last = [ln for ln in out.splitlines() if f"{count} records sent" in ln]
        if not last:
            raise RuntimeError(f"ProducerPerformance printed no summary: {out[-500:]!r}")
        return float(re.search(r"\(([\d.]+) MB/sec\)", last[-1]).group(1)) * MiB / 1e6  # type: ignore[union-attr]

    return run


def consume_row(partitions: int) -> Callable[[Peer, Bench], float]:
    def run(peer: Peer, b: Bench) -> float:
        topic, n = b.dataset(peer, partitions)
        b.clock(peer)
        t = consume_confluent(peer.bootstrap, topic, partitions, n)
        b.clock(peer)
        if partitions == 1:
            b.note_cpu(peer, "consume 1 KiB, 1 partition", n * KiB)
        return n * KiB / t / 1e6

    return run


def consume_txn_row(isolation: str) -> Callable[[Peer, Bench], float]:
    """The transactional dataset read whole by one consumer: under
    read_committed the aborted tenth is dropped (the aborted-transaction
    lists of Fetch) and control records skipped; under read_uncommitted
    every record comes back. MB/s of the records returned."""

    def run(peer: Peer, b: Bench) -> float:
        topic, committed, aborted = b.txn_dataset(peer)
        n = committed if isolation == "read_committed" else committed + aborted
        b.clock(peer)
        t = consume_confluent(peer.bootstrap, topic, 1, n, isolation)
        b.clock(peer)
        return n * KiB / t / 1e6

    return run


def _members_hold(members: list[Consumer], partitions: int, deadline: float) -> None:
    """Poll the members in turn until they hold every partition once, each
    member some; TimeoutError past ``deadline``."""
    while time.perf_counter() < deadline:
        owned = [m.assignment() for m in members]
        flat = [(tp.topic, tp.partition) for a in owned for tp in a]
        if all(owned) and len(flat) == partitions == len(set(flat)):
            return
        for m in members:
            m.poll(0.02)
    raise TimeoutError(f"{len(members)} members never held the {partitions} partitions")


def _group_consumers(peer: Peer, group: str, n: int, **extra: Any) -> list[Consumer]:
    conf = {
        "bootstrap.servers": peer.bootstrap,
        "group.id": group,
        "group.protocol": "consumer",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "logger": _quiet(),
        **extra,
    }
    return [Consumer(conf) for _ in range(n)]


def group848_join(peer: Peer, b: Bench) -> float:
    """KIP-848 (group.protocol=consumer, both brokers' default heartbeat
    interval): three confluent-kafka members hold a 64-partition topic; a
    fourth subscribes. Seconds until the four hold every partition once."""
    topic, group = b.topic("g848"), b.topic("g848-group")
    peer.create_topic(topic, 64)
    members = _group_consumers(peer, group, 3)
    try:
        for m in members:
            m.subscribe([topic])
        _members_hold(members, 64, time.perf_counter() + 90)
        new = _group_consumers(peer, group, 1)[0]
        members.append(new)
        b.clock(peer)
        new.subscribe([topic])
        _members_hold(members, 64, time.perf_counter() + 90)
        t = b.clock(peer)
    finally:
        for m in members:
            m.close()
    peer.delete_topic(topic)
    return t


def group848_consume(peer: Peer, b: Bench) -> float:
    """Four KIP-848 members read a 64-partition topic of 1 KiB records from
    its start: MB/s from the first record to the last (one thread polls the
    four in turn)."""
    topic, n = b.dataset(peer, 64)
    members = _group_consumers(
        peer,
        b.topic("g848-read"),
        4,
        **{"fetch.max.bytes": 64 * MiB, "queued.min.messages": 1_000_000},
    )
    got = 0
    first = 0.0
    try:
        for m in members:
            m.subscribe([topic])
        deadline = time.perf_counter() + 120
        while got < n and time.perf_counter() < deadline:
            for m in members:
                msgs = m.consume(num_messages=10_000, timeout=0.02)
                if msgs and not first:
                    first = time.perf_counter()
                    b.clock(peer)
                got += sum(1 for x in msgs if x.error() is None)
        t = b.clock(peer)
    finally:
        for m in members:
            m.close()
    if got < n:
        raise RuntimeError(f"read {got} of {n} records")
    return n * KiB / t / 1e6


def share_ack(peer: Peer, b: Bench) -> float:
    """A share group of four confluent-kafka ShareConsumers (implicit
    acknowledgement) on a 4-partition topic of 1 KiB records, from its start
    (the group's share.auto.offset.reset=earliest): k records/s delivered and
    acknowledged, from the first record to the last."""
    from confluent_kafka import ShareConsumer

    from pylog.protocol.client import KafkaConnection

    topic, n = b.dataset(peer, 4)
    group = b.topic("share-read")
    with KafkaConnection(peer.bootstrap, client_id="bench") as conn:
        r = conn.request(44, 1, {"resources": [{
            "resource_type": 32, "resource_name": group,
            "configs": [{"name": "share.auto.offset.reset", "config_operation": 0,
                         "value": "earliest"}],
        }], "validate_only": False})  # fmt: skip
        if r.responses[0].error_code:  # type: ignore[attr-defined]
            raise RuntimeError(f"group config refused: {r.responses[0]}")  # type: ignore[attr-defined]
    members = [
        ShareConsumer(
            {"bootstrap.servers": peer.bootstrap, "group.id": group, "logger": _quiet(),
             "max.poll.records": 2000}
        )
        for _ in range(4)
    ]  # fmt: skip
    got = 0
    first = 0.0
    try:
        for m in members:
            m.subscribe([topic])
        deadline = time.perf_counter() + 120
        while got < n and time.perf_counter() < deadline:
            for m in members:
                msgs = m.poll(0.02)
                if msgs and not first:
                    first = time.perf_counter()
                    b.clock(peer)
                got += sum(1 for x in msgs if x.error() is None)
        for m in members:
            m.poll(0.05)  # the last records' implicit acknowledgement
        t = b.clock(peer)
    finally:
        for m in members:
            m.close()
    if got < n:
        raise RuntimeError(f"read {got} of {n} records")
    return n / t / 1e3


def kcat_consume(peer: Peer, b: Bench) -> float:
    topic, n = b.dataset(peer, 1)
    opts = ["-o", "beginning", "-e", "-q", "-c", str(n), "-f", "%s"]
    b.clock(peer)
    subprocess.run(
        ["kcat", "-C", "-b", peer.bootstrap, "-t", topic, *opts],
        check=True,
        timeout=180,
        stdout=subprocess.DEVNULL,
    )
    return n * KiB / b.clock(peer) / 1e6


def perf_consume(peer: Peer, b: Bench) -> float:
    """Kafka's ConsumerPerformance (a group member); its fetch MB/s, which
    leaves out the time the group took to form."""
    topic, n = b.dataset(peer, 1)
    out = b.kafka.java(
        [
            "org.apache.kafka.tools.ConsumerPerformance",
            "--bootstrap-server",
            peer.bootstrap,
            "--topic",
            topic,
            "--num-records",
            str(n),
            "--timeout",
            "60000",
            "--group",
            b.topic("perf-group"),
            "--hide-header",
        ]
    ).stdout
    fields = [f.strip() for f in out.strip().splitlines()[-1].split(",")]
    if int(fields[4]) < n:
        raise RuntimeError(f"ConsumerPerformance read {fields[4]} of {n}")
    return float(fields[8]) * MiB / 1e6


def kcat_dataset(peer: Peer, b: Bench) -> tuple[str, int]:
    """256 MiB of 1 KiB records written by kcat -P to one partition, once per
    broker (issue 28's data: ~1 MB batches, as librdkafka makes them)."""
    key = (f"{peer.name} kcat", 1)
    if key not in b.datasets:
        count = 256 * KiB
        topic = b.topic("kcat-data")
        peer.create_topic(topic, 1)
        opts = ["-p", "0", "-l", "-X", "acks=1", "-X", "linger.ms=5", "-X", "batch.size=1000000"]
        path = record_file(b.workdir, KiB, count)
        subprocess.run(["kcat", "-P", "-b", peer.bootstrap, "-t", topic, *opts, path], check=True)
        b.datasets[key] = (topic, count)
    return b.datasets[key]


def perf_consume_kcat(fetch_size: int | None) -> Callable[[Peer, Bench], float]:
    """Kafka's ConsumerPerformance (the Java client, a group member, its
    defaults: 1 MiB max.partition.fetch.bytes unless ``fetch_size``) reading
    kcat's records; its fetch MB/s, which leaves out the group's forming."""

    def run(peer: Peer, b: Bench) -> float:
        topic, n = kcat_dataset(peer, b)
        size = ["--fetch-size", str(fetch_size)] if fetch_size else []
        b.clock(peer)
        out = b.kafka.java(
            [
                "org.apache.kafka.tools.ConsumerPerformance",
                *("--bootstrap-server", peer.bootstrap, "--topic", topic),
                *("--num-records", str(n), "--timeout", "60000", *size),
                *("--group", b.topic("perf-kcat-group"), "--hide-header"),
            ]
        ).stdout
        b.clock(peer)
        fields = [f.strip() for f in out.strip().splitlines()[-1].split(",")]
        if int(fields[4]) < n:
            raise RuntimeError(f"ConsumerPerformance read {fields[4]} of {n}")
        return float(fields[8]) * MiB / 1e6

    return run


def e2e_latency(acks: str, rate: int) -> Callable[[Peer, Bench], tuple[float, ...]]:
    """p50 / p99 / p99.9 (ms) from send to a consumer process seeing the record,
    100-byte records produced one by one at ``rate``/s (linger.ms=0)."""

    def run(peer: Peer, b: Bench) -> tuple[float, ...]:
        topic = b.topic(f"e2e-{acks}")
        peer.create_topic(topic, 1)
        seconds = max(2.0, b.seconds * 2)
        total = int(seconds * rate)
        warm = rate // 2
        consumer = subprocess.Popen(
            [sys.executable, __file__, "--e2e-worker", json.dumps([peer.bootstrap, topic])],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert consumer.stdout is not None and consumer.stdin is not None
        # At most 5 requests in flight, as the Java client: with librdkafka's
        # default (1M) a broker slower than one request per 2-3 records falls
        # behind for good, the backlog in its socket and never in bigger batches.
        p = Producer(
            {
                "bootstrap.servers": peer.bootstrap,
                "acks": acks,
                "linger.ms": 0,
                "socket.nagle.disable": True,
                "enable.idempotence": False,
                "max.in.flight.requests.per.connection": 5,
            }
        )
        pad = os.urandom(91)
        # One record the consumer must see before the clock: it is then fetching
        # at the end of the log, with no backlog from its own start-up.
        p.produce(topic, struct.pack(">bd", 0, 0.0) + pad, partition=0)
        p.flush(30)
        if consumer.stdout.readline().strip() != "ready":
            raise RuntimeError("latency consumer did not start")
        # Every record due by now goes out, each stamped as it is handed to the
        # client; then sleep 0.2 ms. A spin between records 100 us apart would
        # take a whole core from the brokers and the consumer on 2 cores.
        start = time.perf_counter()
        b.clock(peer)
        i = 0
        while i < warm + total:
            due = min(warm + total, int((time.perf_counter() - start) * rate) + 1)
            while i < due:
                p.produce(
                    topic,
                    struct.pack(">bd", 1 + (i >= warm), time.perf_counter()) + pad,
                    partition=0,
                )
                i += 1
            p.poll(0)
            time.sleep(0.0002)
        p.produce(topic, struct.pack(">bd", 3, 0.0) + pad, partition=0)  # the end
        p.flush(30)
        b.clock(peer)
        out, _ = consumer.communicate(timeout=60)
        lat = sorted(json.loads(out))
        peer.delete_topic(topic)
        if len(lat) != total:
            raise RuntimeError(f"latency consumer saw {len(lat)} of {total}")
        return tuple(lat[min(len(lat) - 1, int(q * len(lat)))] for q in (0.5, 0.99, 0.999))

    return run


def e2e_worker(arg: str) -> None:
    """The consumer of e2e_latency: kind 0 = sync, 1 = warm-up, 2 = measured, 3 = end."""
    bootstrap, topic = json.loads(arg)
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "kafka-peer-latency",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
    )
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    lat: list[float] = []
    deadline = time.monotonic() + 120
    end = False
    while not end and time.monotonic() < deadline:
        # Wait for one record, then take whatever else has arrived without
        # waiting: consume(n, timeout) alone would hold records until n came.
        first = c.poll(0.1)
        if first is None:
            continue
        now = time.perf_counter()
        for m in [first, *c.consume(num_messages=10_000, timeout=0)]:
            if m.error() is not None:
                continue
            kind, sent = struct.unpack_from(">bd", m.value() or b"")
            if kind == 0:
                print("ready", flush=True)
            elif kind == 2:
                lat.append((now - sent) * 1000)
            elif kind == 3:
                end = True
    c.close()
    print(json.dumps(lat))


def java_e2e(peer: Peer, b: Bench) -> tuple[float, ...]:
    """Kafka's EndToEndLatency: send one 100-byte record (acks=1), wait until
    its consumer has it, repeat; its percentiles are whole milliseconds."""
    topic = b.topic("java-e2e")
    peer.create_topic(topic, 1)
    out = b.kafka.java(
        ["org.apache.kafka.tools.EndToEndLatency", peer.bootstrap, topic, "1000", "1", "100"]
    ).stdout
    peer.delete_topic(topic)
    avg = re.search(r"Avg latency: ([\d.]+) ms", out)
    pcts = re.search(r"50th = (\d+), 99th = (\d+), 99.9th = (\d+)", out)
    if not avg or not pcts:
        raise RuntimeError(f"EndToEndLatency printed no summary: {out[-500:]!r}")
    return (float(avg.group(1)), *(float(x) for x in pcts.groups()))


def idle_partitions_rss(topics: int, partitions: int) -> Callable[[Peer, Bench], float]:
    """VmRSS (MiB) once ``topics`` times ``partitions`` empty partitions exist and
    the broker has sat idle with them for a few seconds (its index files
    mapped, its per-partition state made): the memory a broker holding many
    quiet partitions costs."""

    def run(peer: Peer, b: Bench) -> float:
        names = [b.topic(f"idle{i}") for i in range(topics)]
        for name in names:
            peer.create_topic(name, partitions)
        time.sleep(5.0)
        rss = peer.status_kib("VmRSS") / 1024
        for name in names:
            peer.delete_topic(name)
        return rss

    return run


ROWS: dict[str, Row] = {}


def row(key: str, name: str, unit: str, higher: bool, run: Callable[[Peer, Bench], Any]) -> None:
    ROWS[key] = Row(name, unit, higher, run)


for _size, _sname in ((KiB, "1 KiB"), (100, "100 B")):
    for _parts in (1, 6):
        for _acks in ("1", "all"):
            row(
                f"produce-{_size}-{_acks}-{_parts}",
                f"produce {_sname}, acks={_acks}, {_parts} partition{'s' * (_parts > 1)}"
                " (confluent-kafka)",
                "MB/s" if _size >= KiB else "M rec/s",
                True,
                produce_row(_size, _acks, _parts),
            )
row(
    "produce-4x",
    "produce 1 KiB, acks=1, 6 partitions, 4 producer processes",
    "MB/s",
    True,
    produce_parallel(4, KiB, 6),
)
row(
    "kcat-1024",
    "produce 1 KiB, acks=1, 1 partition (kcat -P, 128k records)",
    "MB/s",
    True,
    kcat_produce(KiB, 128 * KiB),
)
row(
    "kcat-100",
    "produce 100 B, acks=1, 1 partition (kcat -P, 512k records)",
    "M rec/s",
    True,
    kcat_produce(100, 512 * KiB),
)
# The Java client's default 16 KiB batches make it a request-rate test: 1 MiB,
# as the librdkafka producers above are given.
row(
    "perf-produce",
    "produce 1 KiB, acks=1, 1 partition (ProducerPerformance, 200k)",
    "MB/s",
    True,
    perf_produce(KiB, "1", 200_000, ("batch.size=1048576", "linger.ms=5")),
)
# Transactions (issue 22): librdkafka's transactional producer, committing
# every 100 records; KIP-890 part 1's verification on (the default on both
# brokers) and off.
for _verify in (True, False):
    row(
        f"txn-produce-{'verify' if _verify else 'noverify'}",
        "transactional produce 1 KiB, 100 records a commit, 1 partition, verification "
        f"{'on' if _verify else 'off'} (confluent-kafka)",
        "k rec/s",
        True,
        txn_produce(KiB, 100, _verify),
    )
row(
    "txn-produce-1000",
    "transactional produce 1 KiB, 1,000 records a commit, 1 partition (confluent-kafka)",
    "k rec/s",
    True,
    txn_produce(KiB, 1000, True),
)
row(
    "consume-1",
    "consume 1 KiB, 1 partition (confluent-kafka, assign)",
    "MB/s",
    True,
    consume_row(1),
)
row(
    "consume-6",
    "consume 1 KiB, 6 partitions (confluent-kafka, assign)",
    "MB/s",
    True,
    consume_row(6),
)
# Issue 22: read_committed over transactions of 1,000 records (one in ten
# aborted) against read_uncommitted over the same records; consume-1 above is
# the non-transactional baseline.
for _iso in ("read_committed", "read_uncommitted"):
    row(
        f"consume-txn-{_iso.split('_')[1]}",
        f"consume 1 KiB, 1 partition, transactions of 1,000, {_iso} (confluent-kafka)",
        "MB/s",
        True,
        consume_txn_row(_iso),
    )
# Issue 23: a KIP-848 group of four over 64 partitions, and a share group of four.
row(
    "g848-join",
    "KIP-848 group, a 4th member joins 3 on 64 partitions: s to a full assignment",
    "s",
    False,
    group848_join,
)
row(
    "g848-consume",
    "KIP-848 group of 4 consumes 64 partitions of 1 KiB (confluent-kafka)",
    "MB/s",
    True,
    group848_consume,
)
row(
    "share-4",
    "share group of 4 ShareConsumers, 4 partitions of 1 KiB, acknowledged (confluent-kafka)",
    "k rec/s",
    True,
    share_ack,
)
row("kcat-consume", "consume 1 KiB, 1 partition (kcat -C)", "MB/s", True, kcat_consume)
row(
    "perf-consume",
    "consume 1 KiB, 1 partition (ConsumerPerformance, group)",
    "MB/s",
    True,
    perf_consume,
)
# Issue 28: the Java consumer over kcat's ~1 MB batches, at its default 1 MiB
# per-partition fetch and at 8 MiB.
row(
    "perf-consume-kcat",
    "consume 1 KiB, 1 partition (ConsumerPerformance)",
    "MB/s",
    True,
    perf_consume_kcat(None),
)
row(
    "perf-consume-kcat-8m",
    "consume 1 KiB, 1 partition (ConsumerPerformance, --fetch-size 8 MiB)",
    "MB/s",
    True,
    perf_consume_kcat(8 * MiB),
)
row(
    "e2e-1",
    "end-to-end latency at 10k rec/s, acks=1: p50 / p99 / p99.9",
    "ms",
    False,
    e2e_latency("1", 10_000),
)
row(
    "e2e-all",
    "end-to-end latency at 10k rec/s, acks=all: p50 / p99 / p99.9",
    "ms",
    False,
    e2e_latency("all", 10_000),
)
row(
    "e2e-50k",
    "end-to-end latency at 50k rec/s, acks=1: p50 / p99 / p99.9",
    "ms",
    False,
    e2e_latency("1", 50_000),
)
row(
    "idle-1000",
    "broker RSS with 1,000 idle partitions (10 topics of 100)",
    "MiB",
    False,
    idle_partitions_rss(10, 100),
)
row(
    "java-e2e",
    "EndToEndLatency tool, 1 at a time, acks=1: avg / p50 / p99 / p99.9",
    "ms",
    False,
    java_e2e,
)


# Three brokers of each kind, replication factor 3 (`--cluster`).
CLUSTER_ROWS: dict[str, Row] = {}
for _acks, _parts in (("1", 1), ("all", 1), ("all", 6)):
    CLUSTER_ROWS[f"rf3-produce-{_acks}-{_parts}"] = Row(
        f"RF 3: produce 1 KiB, acks={_acks}, {_parts} partition{'s' * (_parts > 1)}"
        " (confluent-kafka)",
        "MB/s",
        True,
        produce_row(KiB, _acks, _parts),
    )
CLUSTER_ROWS["rf3-consume-1"] = Row(
    "RF 3: consume 1 KiB, 1 partition (confluent-kafka, assign)", "MB/s", True, consume_row(1)
)
CLUSTER_ROWS["rf3-e2e-all"] = Row(
    "RF 3: end-to-end latency at 10k rec/s, acks=all: p50 / p99 / p99.9",
    "ms",
    False,
    e2e_latency("all", 10_000),
)


# ---------------------------------------------------------------- the table


def fmt(v: float) -> str:
    return f"{v:,.0f}" if v >= 100 else f"{v:.2f}" if v < 10 else f"{v:.1f}"


def cell(values: list[Any]) -> tuple[str, tuple[float, ...] | None]:
    """The median of the reps (per element for a tuple), or the first failure."""
    good = [v for v in values if not isinstance(v, str)]
    if not good:
        return (values[0] if values else "not run"), None
    if isinstance(good[0], tuple):
        med = tuple(statistics.median(v[i] for v in good) for i in range(len(good[0])))
    else:
        med = (statistics.median(good),)
    return " / ".join(fmt(v) for v in med), med


def print_table(lines: list[tuple[str, ...]]) -> None:
    headers = ("workload", "pylog", "Kafka", "pylog/Kafka", "goal", "broker CPU % pylog / Kafka")
    rows = [headers, *lines]
    widths = [max(len(r[i]) for r in rows) for i in range(len(headers))]
    print()
    for n, r in enumerate(rows):
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
        if n == 0:
            print("  ".join("-" * w for w in widths))


def table(
    rows: list[Row], b: Bench, peers: list[Peer], rss: dict[str, tuple[int, int]]
) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    for r in rows:
        (pv, pm), (kv, km) = (cell(r.values.get(p.name, [])) for p in peers)
        ratio = "-"
        if pm and km:
            ratio = " / ".join(f"{a / c:.2f}" if c else "-" for a, c in zip(pm, km, strict=True))
        goal = ">= 1.0" if r.higher_is_better else "<= 1.0"
        cpu = " / ".join(
            f"{statistics.median(r.cpu[p.name]):.0f}" if r.cpu.get(p.name) else "-" for p in peers
        )
        out.append((f"{r.name}, {r.unit}", pv, kv, ratio, goal, cpu))
    for what in sorted({what for what, _ in b.cpu}):
        p, k = (statistics.median(b.cpu.get((what, n), [0.0])) for n in ("pylog", "Kafka"))
        out.append(
            (
                f"broker CPU s per GB, {what}",
                f"{p:.2f}",
                f"{k:.2f}",
                f"{p / k:.2f}" if k else "-",
                "<= 1.0",
                "",
            )
        )
    (p0, p1), (k0, k1) = rss["pylog"], rss["Kafka"]
    out.append(
        (
            "broker RSS after start, MiB",
            f"{p0 / 1024:.0f}",
            f"{k0 / 1024:.0f}",
            f"{p0 / k0:.2f}",
            "-",
            "",
        )
    )
    out.append(
        (
            "broker peak RSS (VmHWM) over the run, MiB",
            f"{p1 / 1024:.0f}",
            f"{k1 / 1024:.0f}",
            f"{p1 / k1:.2f}",
            "<= 1.0",
            "",
        )
    )
    return out


def mem_free_mib() -> int:
    """MemFree: with little of it, a broker's segment writes reclaim page cache
    in its own CPU time, which moved produce rows by up to 2x
    (docs/internals/performance.md, "Large appends inline…")."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemFree:"):
            return int(line.split()[1]) // 1024
    return -1


def page_cache_line(workdir: str, when: str) -> str:
    """The kernel's cost of a new MiB of page cache now (see
    page_cache_write_cost). The first call also warms the page allocator:
    pages freed a moment ago cost ~8x less to write than pages the VM has not
    used for a while, and the first produce row would pay that alone."""
    ms, mibs = page_cache_write_cost(2048 * MiB, os.path.join(workdir, "page-cache.bin"))
    return f"writing 2 GiB into new page cache, {when}: {ms:.2f} ms CPU/MiB ({mibs:,.0f} MiB/s)"


def limits(b: Bench, pylog: PylogPeer) -> list[str]:
    """The machine's limits in the same run, and each broker's best against them."""
    lines = []
    size = 512 * MiB
    t = min(raw_tcp_to_file(size, os.path.join(b.workdir, "raw.bin")) for _ in range(2))
    tcp = size / t / 1e6
    produce = ROWS["produce-1024-1-1"].values
    lines.append(f"raw loopback TCP -> file (1 MiB writes): {tcp:,.0f} MB/s")
    for name in ("pylog", "Kafka"):
        v, m = cell(produce.get(name, []))
        if m:
            lines.append(f"  {name} produce 1 KiB acks=1 1 partition: {v} MB/s = {m[0] / tcp:.2f}")
    topic, _ = b.dataset(pylog, 1)
    files = pylog.broker.segment_files(topic)
    nbytes, t = min((raw_sendfile(files) for _ in range(2)), key=lambda r: r[1])
    sf = nbytes / t / 1e6
    lines.append(f"raw sendfile of pylog's segment over loopback: {sf:,.0f} MB/s")
    for name in ("pylog", "Kafka"):
        v, m = cell(ROWS["consume-1"].values.get(name, []))
        if m:
            lines.append(f"  {name} consume 1 KiB (confluent-kafka): {v} MB/s = {m[0] / sf:.2f}")
    return lines


def profile(row_key: str, workdir: str, seconds: float, out: Path) -> None:
    """Produce as row ``produce-<size>-<acks>-<partitions>`` does, to pylog alone,
    with py-spy attached to the broker for the produce only (all threads, idle
    included, native frames), and print where the broker's time went."""
    m = re.fullmatch(r"produce-(\d+)-(1|all)-(\d+)", row_key)
    if not m:
        sys.exit("kafka_peer: --profile takes a confluent-kafka produce row, e.g. produce-1024-1-1")
    size, acks, partitions = int(m.group(1)), m.group(2), int(m.group(3))
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not os.path.exists(spy):
        sys.exit("kafka_peer: --profile needs py-spy (pip install py-spy; in the bench extras)")
    pylog = PylogPeer(workdir)
    try:
        warm = "profile-warm-up"
        pylog.create_topic(warm, partitions)
        produce_confluent(pylog.bootstrap, warm, size, acks, 1.0, partitions > 1)
        topic = "profiled"
        pylog.create_topic(topic, partitions)
        raw = out.with_suffix(".txt")
        # --native (Rust frames) pauses the broker for each sample: 100/s keeps
        # that small.
        rec = subprocess.Popen(
            [
                spy,
                "record",
                "--pid",
                str(pylog.pid),
                "--rate",
                "100",
                "--idle",
                "--native",
                "--threads",
                "--format",
                "raw",
                "--output",
                str(raw),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        time.sleep(1.0)  # py-spy attached
        cpu = pylog.cpu_seconds()
        n, t = produce_confluent(pylog.bootstrap, topic, size, acks, seconds, partitions > 1)
        cpu = pylog.cpu_seconds() - cpu
        rec.send_signal(signal.SIGINT)
        _, err = rec.communicate(timeout=60)
        if not raw.exists():
            raise RuntimeError(f"py-spy wrote nothing: {err.decode()[-1000:]}")
        print(
            f"{ROWS[row_key].name}: {n / t:,.0f} records/s, {n * size / t / 1e6:,.0f} MB/s, "
            f"broker CPU {cpu / t:.0%} of a core (profiled, so slower than unprofiled)"
        )
        summarize(raw)
        print(f"\ncollapsed stacks: {raw} (flamegraph.pl or speedscope read them)")
    finally:
        pylog.stop()


# A sample whose stack holds one of these is a thread waiting, not working.
_WAITING = ("epoll_wait", "lock_PyThread_acquire_lock", "_queue_SimpleQueue_get", "Condition.wait")
# The event loop's own frames, under nearly every sample of its thread.
_EVERYWHERE = (
    "<module>",
    "broker_start",
    "run (",
    "Runner.run",
    "BaseEventLoop.run_",
    "BaseEventLoop._run_once",
    "Handle._run",
)


def summarize(raw: Path, top: int = 20) -> None:
    """Per thread, the share of samples busy, waiting for the GIL and idle;
    then, over the busy samples of all threads, the functions on top of the
    stack (self) and the pylog / pylog_core / asyncio functions anywhere in it
    (inclusive), line numbers folded into their function."""
    per_thread: dict[str, list[int]] = {}
    self_: dict[str, int] = {}
    incl: dict[str, int] = {}
    busy_total = 0
    for line in raw.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            continue
        count = int(n)
        frames = [re.sub(r":\d+\)$", ")", f) for f in stack.split(";")]
        thread = re.sub(r"\(\d+\)", "", frames[0])
        slot = per_thread.setdefault(thread, [0, 0, 0])
        if any(f.startswith(_WAITING) for f in frames):
            slot[2] += count
        elif any(f.startswith(("take_gil", "pthread_cond_timedwait")) for f in frames):
            slot[1] += count  # take_gil is inlined: its condition wait stands for it
        else:
            slot[0] += count
            busy_total += count
            self_[frames[-1]] = self_.get(frames[-1], 0) + count
            for f in set(frames[1:]):
                if ("pylog/" in f or "pylog_core::" in f or "asyncio/" in f) and not f.startswith(
                    _EVERYWHERE
                ):
                    incl[f] = incl.get(f, 0) + count
    print(
        "\nthreads: busy / waiting for the GIL / idle, % of each thread's samples"
        " (busy includes runnable but preempted)"
    )
    for t, (b, g, i) in sorted(per_thread.items(), key=lambda kv: -kv[1][0]):
        n = b + g + i
        print(f"  {100 * b / n:5.1f} / {100 * g / n:5.1f} / {100 * i / n:5.1f}  {t}")
    if not busy_total:
        return
    gil = sum(g for _, g, _ in per_thread.values())
    print(f"  samples waiting for the GIL: {100 * gil / (busy_total + gil):.1f}% of busy + GIL")
    for title, table_ in (("self", self_), ("inclusive", incl)):
        print(f"\n{title}, % of the {busy_total:,} busy samples of all threads:")
        for name, n in sorted(table_.items(), key=lambda kv: -kv[1])[:top]:
            print(f"  {100 * n / busy_total:5.1f}%  {name[:140]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3, help="runs of each row on each broker")
    parser.add_argument("--seconds", type=float, default=1.0, help="length of a produce row")
    parser.add_argument("--only", default=None, help="comma-separated rows")
    parser.add_argument(
        "--cluster",
        action="store_true",
        help="three brokers of each kind (pylog on ZooKeeper, Kafka on KRaft), RF 3 rows",
    )
    parser.add_argument("--dir", default=None, help="scratch directory (default: a temp dir)")
    parser.add_argument("--kafka-libs", type=Path, default=None, help="Kafka's jars")
    parser.add_argument(
        "--skip-if-missing",
        action="store_true",
        help="exit 0 with a note when Kafka's jars are not there",
    )
    parser.add_argument(
        "--profile",
        metavar="ROW",
        help="run ROW on pylog alone under py-spy and print where the time went",
    )
    parser.add_argument("--produce-worker", help=argparse.SUPPRESS)
    parser.add_argument("--e2e-worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.produce_worker:
        return produce_worker(args.produce_worker)
    if args.e2e_worker:
        return e2e_worker(args.e2e_worker)

    if args.profile:  # pylog alone: no Kafka needed
        workdir = tempfile.mkdtemp(prefix="pylog-kafka-peer-", dir=args.dir)
        try:
            profile(
                args.profile,
                workdir,
                max(args.seconds, 5.0),
                Path(tempfile.gettempdir()) / f"pylog-profile-{args.profile}",
            )
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        return
    libs = args.kafka_libs or default_libs()
    if not (libs / f"kafka_2.13-{kafka_version()}.jar").exists():
        msg = f"kafka_peer: skipped, Apache Kafka's jars are not in {libs} (run `make kafka`)"
        print(msg, file=sys.stderr)
        sys.exit(0 if args.skip_if_missing else 2)
    for tool in ("java", "kcat"):
        if shutil.which(tool) is None:
            print(f"kafka_peer: skipped, `{tool}` is not on PATH (`make tools`)", file=sys.stderr)
            sys.exit(0 if args.skip_if_missing else 2)

    workdir = tempfile.mkdtemp(prefix="pylog-kafka-peer-", dir=args.dir)
    table_rows = CLUSTER_ROWS if args.cluster else ROWS
    rows = [table_rows[k] for k in (args.only.split(",") if args.only else table_rows)]
    peers: list[Peer] = []
    began = time.monotonic()
    free_mib = [mem_free_mib()]
    page_cache = [page_cache_line(workdir, "before the rows")]
    try:
        pylog: Peer = PylogClusterPeer(workdir) if args.cluster else PylogPeer(workdir)
        peers.append(pylog)
        kafka = KafkaClusterPeer(workdir, libs) if args.cluster else KafkaPeer(workdir, libs)
        peers.append(kafka)
        time.sleep(1.0)  # let both settle before taking their idle RSS
        rss0 = {p.name: p.status_kib("VmRSS") for p in peers}
        print(
            f"  pylog pid {pylog.pid} on {pylog.bootstrap}, Kafka {kafka_version()} pid "
            f"{kafka.pid} on {kafka.bootstrap}, data in {workdir}",
            file=sys.stderr,
            flush=True,
        )
        b = Bench(workdir, kafka, args.seconds)
        # Warm-up, outside every figure: the consume rows' data is produced and
        # read once on each broker, so Kafka's JIT has compiled its hot paths.
        for peer in peers:
            for partitions in (1, 6):
                topic, n = b.dataset(peer, partitions)
                consume_confluent(peer.bootstrap, topic, partitions, n)
            if any(r.name.startswith(("e2e", "java-e2e", "rf3-e2e")) for r in rows):
                # And small produce requests, one run of the latency row: without
                # it Kafka's second latency row ran on a warmer JIT than its
                # first (acks=all measured after acks=1 had a third of acks=1's
                # p50, and two thirds of it when measured first).
                e2e_latency("all", 10_000)(peer, b)
        for i, r in enumerate(rows):
            for rep in range(args.reps):
                # Who goes first alternates, and which one starts alternates
                # by row: with an odd number of runs neither leads every row.
                for peer in peers if (rep + i) % 2 == 0 else peers[::-1]:
                    free_mib.append(mem_free_mib())
                    b.last.pop(peer.name, None)
                    try:
                        v = r.run(peer, b)
                        if peer.name in b.last:
                            wall, cpu = b.last[peer.name]
                            r.cpu.setdefault(peer.name, []).append(100 * cpu / wall)
                    except Exception as e:  # a failure is a cell, not the end of the run
                        v = f"failed: {str(e).splitlines()[0][:60]}"
                        print(f"  {r.name} on {peer.name}: {e}", file=sys.stderr, flush=True)
                    r.values.setdefault(peer.name, []).append(v)
            print(
                f"  {r.name}: " + "; ".join(f"{p.name} {cell(r.values[p.name])[0]}" for p in peers),
                file=sys.stderr,
                flush=True,
            )
        page_cache.append(page_cache_line(workdir, "after them"))
        rss = {p.name: (rss0[p.name], p.status_kib("VmHWM")) for p in peers}
        extra = limits(b, pylog) if isinstance(pylog, PylogPeer) else []
        lines = table(rows, b, peers, rss)
    finally:
        for p in peers:
            p.stop()
        shutil.rmtree(workdir, ignore_errors=True)

    print_table(lines)
    kind = (
        "three nodes, each broker and controller, -Xmx1G each; pylog: three brokers and "
        "ZooKeeper; CPU and RSS summed over each side's processes"
        if args.cluster
        else "one JVM, -Xmx1G"
    )
    print(
        f"\nmedians of {args.reps} runs per broker, alternating which broker goes first "
        "(and, row by row, which one starts); "
        f"Apache Kafka {kafka_version()} (KRaft, {kind}) and pylog up side by side; "
        f"{time.monotonic() - began:.0f} s in all"
    )
    print(f"free memory (MemFree): {free_mib[0]:,} MiB at start, {min(free_mib):,} MiB lowest")
    for line in page_cache:
        print(line)
    if extra:
        print("limits of this machine, same run:")
    for line in extra:
        print(f"  {line}")


if __name__ == "__main__":
    main()
