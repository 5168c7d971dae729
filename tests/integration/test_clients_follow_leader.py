"""Every stock client follows a leadership change on a cluster.

Three `pylog broker start` processes on a real ZooKeeper (a chroot per test),
a topic of one partition with replication factor 3 and
min.insync.replicas=2. Each client (confluent-kafka, kafka-python, aiokafka,
kcat, the Java client) produces with acks=all and idempotence while the
partition leader's broker is killed with SIGKILL and later restarted; then
the same client reads the partition back. Every record it was told was
written is there, at the offset it was told, exactly once; and it went on
being acknowledged for records it was handed after the kill, which only the
new leader can have acknowledged.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from broker_process import BrokerProcess, topic_name
from java_client import command as java_command
from java_client import jar_path, run_java
from kazoo.client import KazooClient

from pylog.testing import ZooKeeperServer

WAIT = 60.0  # upper bound for waits: only catches hangs
SESSION_MS = 3000
SEND_EVERY = 0.02  # seconds between records handed to the client
BEFORE, AFTER = (
    30,
    30,
)  # records acknowledged before the kill, and handed over and acknowledged after it


def _wait_for(pred: Callable[[], object], what: str, timeout: float = WAIT) -> None:
    pause = threading.Event()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        pause.wait(0.05)
    raise AssertionError(f"timed out waiting for {what}")


class Cluster:
    """Three brokers sharing one ZooKeeper chroot; kill -9 and restart by id."""

    def __init__(self, zk: KazooClient, connect: str, tmp: Path) -> None:
        self.zk = zk
        self.connect = connect
        self.tmp = tmp
        self.brokers: dict[int, BrokerProcess] = {}

    def start(self, broker_id: int) -> BrokerProcess:
        b = self.brokers.get(broker_id)
        if b is None:
            b = BrokerProcess(
                self.tmp / f"b{broker_id}",
                {
                    "broker.id": broker_id,
                    "zookeeper.connect": self.connect,
                    "zookeeper.session.timeout.ms": SESSION_MS,
                    "replica.lag.time.max.ms": 3000,
                    "replica.fetch.wait.max.ms": 100,
                    "offsets.topic.num.partitions": 1,
                },
            )
            self.brokers[broker_id] = b
        return b.start()

    def kill(self, broker_id: int) -> None:
        b = self.brokers[broker_id]
        assert b.proc is not None
        b.proc.send_signal(signal.SIGKILL)
        b.proc.wait(10)
        b.proc = None

    @property
    def bootstrap(self) -> str:
        """Every broker, the stopped ones too: a client keeps the list it started with."""
        return ",".join(b.bootstrap for b in self.brokers.values())

    def all_in_sync(self, topic: str) -> bool:
        s = self.state(topic)
        return s is not None and sorted(s["isr"]) == [1, 2, 3]

    def state(self, topic: str) -> dict[str, Any] | None:
        path = f"/brokers/topics/{topic}/partitions/0/state"
        if self.zk.exists(path) is None:
            return None
        doc = json.loads(self.zk.get(path)[0])
        assert isinstance(doc, dict)
        return doc


@pytest.fixture
def cluster(pylog_zookeeper: ZooKeeperServer, tmp_path: Path) -> Iterator[Cluster]:
    chroot = f"follow-{uuid.uuid4().hex[:8]}"
    boot = KazooClient(hosts=pylog_zookeeper.connect)
    boot.start(timeout=WAIT)
    boot.ensure_path(f"/{chroot}")
    boot.stop()
    boot.close()
    zk = KazooClient(hosts=f"{pylog_zookeeper.connect}/{chroot}")
    zk.start(timeout=WAIT)
    c = Cluster(zk, f"{pylog_zookeeper.connect}/{chroot}", tmp_path)
    try:
        yield c
    finally:
        for b in c.brokers.values():
            if b.proc is not None:
                b.stop()
        zk.stop()
        zk.close()


# ---------------------------------------------------------------- one driver per client


class Client:
    """Hands records to a client's producer, collects what it acknowledges
    (value → offset), then reads the partition back with the same client."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap, self.topic = bootstrap, topic
        self.acked: dict[str, int] = {}
        self.failed: list[str] = []

    def send(self, value: str) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Waits for every record handed over to be acknowledged or failed."""
        raise NotImplementedError

    def read_back(self) -> list[tuple[int, str]]:
        """(offset, value) of every record of the partition, from the beginning."""
        raise NotImplementedError

    def abandon(self) -> None:
        """After a failure: ends a subprocess the test started."""


class ConfluentClient(Client):
    def __init__(self, bootstrap: str, topic: str) -> None:
        from confluent_kafka import Producer

        super().__init__(bootstrap, topic)
        self.producer = Producer(
            {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
             "linger.ms": 5}
        )  # fmt: skip

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is None:
            self.acked[msg.value().decode()] = msg.offset()
        else:
            self.failed.append(str(err))

    def send(self, value: str) -> None:
        self.producer.produce(self.topic, value.encode(), partition=0, on_delivery=self._delivered)
        self.producer.poll(0)

    def close(self) -> None:
        assert self.producer.flush(WAIT) == 0

    def read_back(self) -> list[tuple[int, str]]:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        c = Consumer(
            {"bootstrap.servers": self.bootstrap, "group.id": "unused",
             "enable.auto.commit": False}
        )  # fmt: skip
        try:
            _, end = c.get_watermark_offsets(TopicPartition(self.topic, 0), timeout=WAIT)
            c.assign([TopicPartition(self.topic, 0, OFFSET_BEGINNING)])
            out: list[tuple[int, str]] = []
            deadline = time.monotonic() + WAIT
            while (not out or out[-1][0] < end - 1) and time.monotonic() < deadline:
                m = c.poll(0.2)
                if m is not None:
                    assert m.error() is None, m.error()
                    offset, value = m.offset(), m.value()
                    assert offset is not None and value is not None
                    out.append((offset, value.decode()))
            return out
        finally:
            c.close()


class KafkaPythonClient(Client):
    def __init__(self, bootstrap: str, topic: str) -> None:
        from kafka import KafkaProducer

        super().__init__(bootstrap, topic)
        self.producer = KafkaProducer(
            bootstrap_servers=self.bootstrap.split(","),
            acks="all",
            enable_idempotence=True,
            linger_ms=5,
        )

    def send(self, value: str) -> None:
        f = self.producer.send(self.topic, value.encode(), partition=0)
        f.add_callback(lambda md, v=value: self.acked.__setitem__(v, md.offset))
        f.add_errback(lambda e: self.failed.append(repr(e)))

    def close(self) -> None:
        self.producer.flush(timeout=WAIT)
        self.producer.close(timeout=10)

    def read_back(self) -> list[tuple[int, str]]:
        from kafka import KafkaConsumer, TopicPartition

        tp = TopicPartition(self.topic, 0)
        c = KafkaConsumer(bootstrap_servers=self.bootstrap.split(","), enable_auto_commit=False)
        try:
            c.assign([tp])
            c.seek_to_beginning(tp)
            end = c.end_offsets([tp])[tp]
            out: list[tuple[int, str]] = []
            deadline = time.monotonic() + WAIT
            while c.position(tp) < end and time.monotonic() < deadline:
                for m in c.poll(timeout_ms=500).get(tp, []):
                    out.append((m.offset, m.value.decode()))
            return out
        finally:
            c.close()


class AiokafkaClient(Client):
    """aiokafka on an event loop of its own thread; the test hands it records."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        from aiokafka import AIOKafkaProducer

        super().__init__(bootstrap, topic)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

        async def start() -> AIOKafkaProducer:
            p = AIOKafkaProducer(
                bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, linger_ms=5
            )
            await p.start()
            return p

        self.producer = self._run(start())
        self.pending: list[Future[None]] = []

    def _run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(WAIT)

    async def _send(self, value: str) -> None:
        try:
            md = await (await self.producer.send(self.topic, value.encode(), partition=0))
        except Exception as e:  # a failed record is reported, not raised
            self.failed.append(repr(e))
        else:
            self.acked[value] = md.offset

    def send(self, value: str) -> None:
        self.pending.append(asyncio.run_coroutine_threadsafe(self._send(value), self.loop))

    def close(self) -> None:
        for f in self.pending:
            f.result(WAIT)
        self._run(self.producer.stop())

    def read_back(self) -> list[tuple[int, str]]:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        async def read() -> list[tuple[int, str]]:
            tp = TopicPartition(self.topic, 0)
            c = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False)
            await c.start()
            try:
                c.assign([tp])
                await c.seek_to_beginning(tp)
                end = (await c.end_offsets([tp]))[tp]
                out: list[tuple[int, str]] = []
                while await c.position(tp) < end:
                    batch = await c.getmany(tp, timeout_ms=500)
                    out += [(m.offset, m.value.decode()) for m in batch.get(tp, [])]
                return out
            finally:
                await c.stop()

        try:
            return list(self._run(read()))
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)


class _LineReader(threading.Thread):
    """Collects a subprocess's output lines as they come."""

    def __init__(self, stream: Any, on_line: Callable[[str], None]) -> None:
        super().__init__(daemon=True)
        self.stream, self.on_line = stream, on_line

    def run(self) -> None:
        for line in self.stream:
            self.on_line(line.rstrip("\n"))


class KcatClient(Client):
    """kcat -P reading records from its stdin. With idempotence librdkafka reports
    deliveries in the order of the records (one partition), so the n-th report
    (at -vvv, on stderr) is the n-th line written."""

    DELIVERED = re.compile(r"Message delivered to partition 0 \(offset (\d+)\) on broker (-?\d+)")

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(bootstrap, topic)
        self.brokers: list[int] = []  # the broker that acknowledged each record
        self.sent: list[str] = []
        self.log: list[str] = []
        self.proc = subprocess.Popen(
            ["kcat", "-b", bootstrap, "-P", "-t", topic, "-p", "0", "-vvv",
             "-X", "acks=all", "-X", "enable.idempotence=true", "-X", "linger.ms=5"],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True, bufsize=1,
        )  # fmt: skip
        self.reader = _LineReader(self.proc.stderr, self._line)
        self.reader.start()

    def _line(self, line: str) -> None:
        self.log.append(line)
        if m := self.DELIVERED.search(line):
            n = len(self.acked) + len(self.failed)
            self.acked[self.sent[n]] = int(m.group(1))
            self.brokers.append(int(m.group(2)))
        elif "Delivery failed" in line:
            self.failed.append(line)

    def send(self, value: str) -> None:
        assert self.proc.stdin is not None
        self.sent.append(value)
        self.proc.stdin.write(value + "\n")

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        assert self.proc.wait(WAIT) == 0, self.log[-20:]
        self.reader.join(10)

    def abandon(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def read_back(self) -> list[tuple[int, str]]:
        out = subprocess.run(
            ["kcat", "-b", self.bootstrap, "-C", "-t", self.topic, "-p", "0", "-o", "beginning",
             "-e", "-q", "-f", "%o %s\n"],
            capture_output=True, text=True, timeout=WAIT, check=True,
        )  # fmt: skip
        return [(int(o), v) for o, v in (line.split(" ", 1) for line in out.stdout.splitlines())]


class JavaClient(Client):
    """The Java client's `produce --stdin`: one record per line written to it,
    one JSON line printed per acknowledgement."""

    def __init__(self, bootstrap: str, topic: str, tmp: Path) -> None:
        super().__init__(bootstrap, topic)
        self.stderr = tmp / "java-producer.err"
        with self.stderr.open("w") as err:
            self.proc = subprocess.Popen(
                java_command("produce", "--bootstrap", bootstrap, "--topic", topic,
                             "--partition", "0", "--stdin", "--acks", "all",
                             "--idempotence", "true"),
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True, bufsize=1,
            )  # fmt: skip
        self.reader = _LineReader(self.proc.stdout, self._line)
        self.reader.start()

    def _line(self, line: str) -> None:
        doc = json.loads(line)
        if doc["type"] == "ack":
            self.acked[doc["value"]] = doc["offset"]
        elif doc["type"] in ("failed", "error"):
            self.failed.append(line)

    def send(self, value: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(value + "\n")

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        assert self.proc.wait(WAIT) == 0, self.stderr.read_text()[-4000:]
        self.reader.join(10)

    def abandon(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def read_back(self) -> list[tuple[int, str]]:
        out = subprocess.run(
            java_command("consume", "--bootstrap", self.bootstrap, "--topic", self.topic,
                         "--assign", "0", "--to-end"),
            capture_output=True, text=True, timeout=WAIT,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr[-4000:]
        records = [json.loads(line) for line in out.stdout.splitlines()]
        return [(r["offset"], r["value"]) for r in records if r["type"] == "record"]


def _client(name: str, bootstrap: str, topic: str, tmp: Path) -> Client:
    if name == "confluent-kafka":
        return ConfluentClient(bootstrap, topic)
    if name == "kafka-python":
        return KafkaPythonClient(bootstrap, topic)
    if name == "aiokafka":
        return AiokafkaClient(bootstrap, topic)
    if name == "kcat":
        if shutil.which("kcat") is None:
            pytest.fail("kcat is not installed: run `make tools`")
        return KcatClient(bootstrap, topic)
    jar_path()  # fails naming `make java-client` when it is not built
    return JavaClient(bootstrap, topic, tmp)


# ---------------------------------------------------------------- the test

CLIENTS = ["confluent-kafka", "kafka-python", "aiokafka", "kcat", "java"]


@pytest.mark.parametrize("name", CLIENTS)
def test_client_follows_the_new_leader(cluster: Cluster, name: str, tmp_path: Path) -> None:
    t0 = time.monotonic()
    for b in (1, 2, 3):
        cluster.start(b)
    _wait_for(lambda: len(cluster.zk.get_children("/brokers/ids")) == 3, "three registrations")
    topic = topic_name(f"follow-{name}")
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    new = NewTopic(topic, 1, 3, config={"min.insync.replicas": "2"})
    admin.create_topics([new], operation_timeout=20)[topic].result(WAIT)
    _wait_for(lambda: cluster.all_in_sync(topic), "the partition with all three replicas in sync")

    client = _client(name, cluster.bootstrap, topic, tmp_path)
    try:
        _produce_through_failover(cluster, client, topic, name, t0)
    except BaseException:
        client.abandon()
        raise


def _produce_through_failover(
    cluster: Cluster, client: Client, topic: str, name: str, t0: float
) -> None:
    first = cluster.state(topic)
    assert first is not None
    old_leader = int(first["leader"])
    sent: list[str] = []
    stop = threading.Event()
    pause = threading.Event()

    def feed() -> None:  # hands the client a record every SEND_EVERY seconds
        while not stop.is_set():
            value = f"{name}-{len(sent):06d}"
            sent.append(value)
            client.send(value)
            pause.wait(SEND_EVERY)

    def acked_after_kill() -> list[str]:
        return [v for v in sent[handed_before_kill:] if v in client.acked]

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    try:
        _wait_for(lambda: len(client.acked) >= BEFORE, "records acknowledged by the first leader")

        cluster.kill(old_leader)
        t_kill = time.monotonic()
        handed_before_kill = len(sent)
        _wait_for(acked_after_kill, "a record acknowledged by the new leader")
        t_followed = time.monotonic()
        _wait_for(
            lambda: len(acked_after_kill()) >= AFTER, "records acknowledged by the new leader"
        )
        state = cluster.state(topic)
        assert state is not None
        new_leader = int(state["leader"])
        assert new_leader not in (old_leader, -1) and state["leader_epoch"] > first["leader_epoch"]

        if isinstance(client, JavaClient):
            _java_admin_sees_the_new_leader(cluster, topic, old_leader, new_leader)

        # The killed broker returns and catches up, back in the ISR, while the client goes on.
        handed_before_restart = len(sent)
        cluster.start(old_leader)
        _wait_for(lambda: cluster.all_in_sync(topic), "the restarted broker back in the ISR")
        n = len(client.acked)
        _wait_for(lambda: len(client.acked) >= n + 10, "records acknowledged after the restart")
    finally:
        stop.set()
        feeder.join(10)
    client.close()
    t_closed = time.monotonic()

    # Every record handed over was acknowledged (nothing failed for good) ...
    assert client.failed == []
    assert sorted(client.acked) == sorted(sent)
    # ... and every acknowledged record is read back at its offset, exactly once.
    got = client.read_back()
    assert [o for o, _ in got] == list(range(len(got))), "offsets read back are not 0, 1, 2, ..."
    values = [v for _, v in got]
    assert len(set(values)) == len(values), "a record was written twice"
    assert {v: o for o, v in got} == client.acked
    if isinstance(client, KcatClient):
        # librdkafka names the broker of each acknowledgement: the new leader's after the kill.
        assert client.brokers[0] == old_leader
        assert set(client.brokers[handed_before_kill:handed_before_restart]) == {new_leader}
    print(
        f"{name}: {len(sent)} records, {len(acked_after_kill())} acknowledged after the kill "
        f"(by {new_leader} from {old_leader}); the first {t_followed - t_kill:.1f}s after it, "
        f"the test {t_closed - t0:.1f}s"
    )


def _java_admin_sees_the_new_leader(
    cluster: Cluster, topic: str, old_leader: int, new_leader: int
) -> None:
    """The Java Admin client describes the cluster as ZooKeeper has it after the kill."""
    live = sorted({1, 2, 3} - {old_leader})
    (described,) = (
        run_java("admin", "--bootstrap", cluster.bootstrap, "describe-topic", "--topic", topic)
        .check()
        .of("topic")
    )
    (partition,) = described["partitions"]
    assert partition["leader"] == new_leader
    assert sorted(partition["replicas"]) == [1, 2, 3]
    assert sorted(partition["isr"]) == live
    (described_cluster,) = (
        run_java("admin", "--bootstrap", cluster.bootstrap, "describe-cluster")
        .check()
        .of("cluster")
    )
    assert sorted(n["id"] for n in described_cluster["nodes"]) == live
    assert described_cluster["controller"] in live
