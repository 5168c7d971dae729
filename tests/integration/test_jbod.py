"""JBOD: a broker with several ``log.dirs`` loses one to a real failing disk
(an ext4 filesystem shut down under it: EIO, or a tmpfs filled: ENOSPC) and
keeps serving the others, as Kafka's LogDirFailureChannel does.

* a lone broker: the failed directory's partitions answer
  KAFKA_STORAGE_ERROR (56) to Produce and Fetch, DescribeLogDirs reports the
  directory with that error, the other directory's partitions keep serving;
* a full directory: producers get KAFKA_STORAGE_ERROR, not a crash;
* three brokers, RF 3, acks=all idempotent producers: one broker's directory
  fails, the controller hears it (``/log_dir_event_notification``) and moves
  leadership, nothing acknowledged is lost, the broker still leads on its
  other directory; restarted with the disk repaired, its replicas rejoin the
  ISRs;
* AlterReplicaLogDirs (Kafka's ``kafka-reassign-partitions`` with
  ``log_dirs``) moves a replica between a broker's directories under a
  producer;
* ``--replica-alter-log-dirs-throttle`` paces such a move (the broker's
  ``replica.alter.log.dirs.io.max.bytes.per.second``) and raising it lets
  the move finish; a broker stopped (SIGTERM) or killed (SIGKILL) in the
  middle of a move takes it up again from where it was when it restarts.

The disks need root (tests/jbod_disks.py); elsewhere these tests skip.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from jbod_disks import Ext4Disk, ext4_disk, fail_disk, fill, repair_disk, tiny_tmpfs
from kafka_tools import run_tool

from pylog.protocol import ApiKey
from pylog.protocol.client import KafkaConnection
from pylog.protocol.messages import (
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirsResponse,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    FetchRequest,
    FetchResponse,
    ProduceRequest,
    ProduceResponse,
)
from pylog.protocol.messages.alter_replica_log_dirs_request import (
    AlterReplicaLogDir,
    AlterReplicaLogDirTopic,
)
from pylog.protocol.messages.fetch_request import FetchPartition, FetchTopic
from pylog.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from pylog.testing import LocalCluster, ZooKeeperServer
from pylog.testing.cluster import ClusterBroker

STORAGE_ERROR = 56


def _batch(value: bytes) -> bytes:
    from conftest import build_batch

    return build_batch([value])


def produce_raw(conn: KafkaConnection, topic: str, partition: int, value: bytes) -> int:
    body = ProduceRequest(
        transactional_id=None,
        acks=1,
        timeout_ms=5000,
        topic_data=[
            TopicProduceData(
                name=topic,
                partition_data=[
                    PartitionProduceData(index=partition, records=memoryview(_batch(value)))
                ],
            )
        ],
    )
    r = conn.request(ApiKey.PRODUCE, 9, body, ProduceResponse)
    return r.responses[0].partition_responses[0].error_code


def fetch_raw(conn: KafkaConnection, topic: str, partition: int) -> tuple[int, int]:
    """(error code, bytes of records) of a fetch from offset 0."""
    body = FetchRequest(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=0,
        topics=[
            FetchTopic(
                topic=topic,
                partitions=[
                    FetchPartition(partition=partition, fetch_offset=0, partition_max_bytes=1 << 20)
                ],
            )
        ],
    )
    r = conn.request(ApiKey.FETCH, 11, body, FetchResponse)
    p = r.responses[0].partitions[0]
    return p.error_code, len(p.records or b"")


def describe_dirs(bootstrap: str) -> dict[str, tuple[int, dict[tuple[str, int], int]]]:
    """log dir -> (error code, {(topic, partition): size}) of one broker's
    replicas (future logs of moves in flight left out)."""
    with KafkaConnection(bootstrap, timeout=30) as c:
        r = c.request(
            ApiKey.DESCRIBE_LOG_DIRS,
            4,
            DescribeLogDirsRequest(topics=None),
            DescribeLogDirsResponse,
        )
    return {
        d.log_dir: (
            d.error_code,
            {
                (t.name, p.partition_index): p.partition_size
                for t in d.topics
                for p in t.partitions
                if not p.is_future_key  # a move's copy: counted where the replica is
            },
        )
        for d in r.results
    }


def dir_of(bootstrap: str, topic: str) -> dict[int, str]:
    """partition -> the log dir holding it on this broker."""
    out: dict[int, str] = {}
    for d, (_code, parts) in describe_dirs(bootstrap).items():
        for t, p in parts:
            if t == topic:
                out[p] = d
    return out


def wait_for(what: str, check: object, timeout: float = 60) -> None:
    assert callable(check)
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.1)


def lone_broker(base: Path, dirs: list[str]) -> ClusterBroker:
    return ClusterBroker(
        1,
        str(base / "broker"),
        {"log.dirs": ",".join(dirs), "offsets.topic.replication.factor": "1",
         "shutdown.timeout.ms": "10000"},
    ).start()  # fmt: skip


def create_topic(bootstrap: str, topic: str, partitions: int, rf: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, rf)])[topic].result(30)


# ---------------------------------------------------------------- one broker


def test_lone_broker_keeps_serving_the_directory_that_did_not_fail(tmp_path: Path) -> None:
    with ext4_disk(tmp_path) as disk:
        good = str(tmp_path / "good")
        bad = str(disk.mount_point / "logs")
        broker = lone_broker(tmp_path, [good, bad])
        try:
            boot = broker.bootstrap_servers
            topic = f"jbod-{uuid.uuid4().hex[:6]}"
            create_topic(boot, topic, 4)
            placed = dir_of(boot, topic)
            # Kafka's nextLogDirs: the directory with the fewest partitions, in turn.
            assert sorted(placed) == [0, 1, 2, 3]
            on_bad = [p for p, d in placed.items() if d == bad]
            on_good = [p for p, d in placed.items() if d == good]
            assert on_bad and on_good, placed
            with KafkaConnection(boot, timeout=30) as conn:
                for p in range(4):
                    assert produce_raw(conn, topic, p, b"before") == 0

                fail_disk(disk)
                # The first write that meets the dead disk fails and takes
                # the directory offline; from then on its partitions answer 56.
                for p in on_bad:
                    assert produce_raw(conn, topic, p, b"after") == STORAGE_ERROR
                    assert fetch_raw(conn, topic, p) == (STORAGE_ERROR, 0)
                for p in on_good:
                    assert produce_raw(conn, topic, p, b"after") == 0
                    code, size = fetch_raw(conn, topic, p)
                    assert code == 0 and size > 0
            dirs = describe_dirs(boot)
            assert dirs[bad] == (STORAGE_ERROR, {})
            assert dirs[good][0] == 0
            assert {p for t, p in dirs[good][1] if t == topic} == set(on_good)
            assert broker.running
        finally:
            broker.stop()


def test_a_broker_whose_every_directory_failed_stops(tmp_path: Path) -> None:
    """Kafka halts a broker with no live log directory; pylog stops it."""
    with ext4_disk(tmp_path) as disk:
        broker = lone_broker(tmp_path, [str(disk.mount_point / "logs")])
        try:
            boot = broker.bootstrap_servers
            topic = f"last-{uuid.uuid4().hex[:6]}"
            create_topic(boot, topic, 1)
            with KafkaConnection(boot, timeout=30) as conn:
                assert produce_raw(conn, topic, 0, b"before") == 0
                fail_disk(disk)
                assert produce_raw(conn, topic, 0, b"after") == STORAGE_ERROR
            assert broker.proc is not None
            t0 = time.monotonic()
            broker.proc.wait(60)
            stopped_s = time.monotonic() - t0
            print(f"\nthe broker stopped {stopped_s:.1f} s after its last directory failed")
            with open(broker.log_file) as f:
                assert "every log directory is offline" in f.read()
        finally:
            broker.stop()


def test_a_full_directory_gives_producers_storage_errors_not_a_crash(tmp_path: Path) -> None:
    with tiny_tmpfs(tmp_path, "4m") as small:
        good = str(tmp_path / "good")
        full = str(small / "logs")
        broker = lone_broker(tmp_path, [good, full])
        try:
            boot = broker.bootstrap_servers
            topic = f"full-{uuid.uuid4().hex[:6]}"
            create_topic(boot, topic, 2)
            placed = dir_of(boot, topic)
            (on_full,) = [p for p, d in placed.items() if d == full]
            (on_good,) = [p for p, d in placed.items() if d == good]
            fill(small)

            outcome: dict[int, list[object]] = {on_full: [], on_good: []}
            producer = Producer({"bootstrap.servers": boot, "acks": "all", "retries": 0,
                                 "enable.idempotence": False, "linger.ms": 0})  # fmt: skip
            for p in (on_full, on_good):
                producer.produce(
                    topic, b"x" * 64_000, partition=p,
                    on_delivery=lambda err, msg: outcome[msg.partition()].append(err),
                )  # fmt: skip
                producer.flush(30)
            (err,) = outcome[on_full]
            assert isinstance(err, KafkaError) and err.code() == KafkaError.KAFKA_STORAGE_ERROR
            assert outcome[on_good] == [None]
            assert broker.running
            assert describe_dirs(boot)[full][0] == STORAGE_ERROR
            # The good directory still takes writes after the failure.
            producer.produce(topic, b"y", partition=on_good,
                             on_delivery=lambda err, msg: outcome[on_good].append(err))  # fmt: skip
            producer.flush(30)
            assert outcome[on_good] == [None, None]
        finally:
            broker.stop()


# ---------------------------------------------------------------- a cluster


@pytest.fixture(scope="module")
def disk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ext4Disk]:
    with ext4_disk(tmp_path_factory.mktemp("disk")) as d:
        yield d


@pytest.fixture(scope="module")
def cluster(
    pylog_zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory, disk: Ext4Disk
) -> Iterator[LocalCluster]:
    base = tmp_path_factory.mktemp("jbod-cluster")
    # Broker 2: one directory on the disk that will fail; broker 3: two plain
    # ones, for AlterReplicaLogDirs.
    c = LocalCluster(
        3,
        {"auto.leader.rebalance.enable": "false", "replica.lag.time.max.ms": "5000"},
        zookeeper=pylog_zookeeper,
        directory=str(base),
        per_broker={
            2: {"log.dirs": f"{base}/b2-good,{disk.mount_point}/b2-disk"},
            3: {"log.dirs": f"{base}/b3-a,{base}/b3-b"},
        },
    )
    try:
        yield c.start()
    finally:
        c.close()


class AckedProducer:
    """An idempotent acks=all producer writing numbered records to every
    partition of a topic until stopped; remembers what was acknowledged."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, pad: int = 0) -> None:
        self.topic, self.partitions, self.pad = topic, partitions, b"x" * pad
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                  "enable.idempotence": True, "linger.ms": 5,
                                  "message.timeout.ms": 120_000})  # fmt: skip
        self.acked: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
        self.errors: list[str] = []
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, err: KafkaError | None, msg: object) -> None:
        if err is not None:
            self.errors.append(str(err))
        else:
            self.acked[msg.partition()].append(msg.value())  # type: ignore[attr-defined]

    def _run(self) -> None:
        n = 0
        while not self.stop_event.is_set():
            for p in range(self.partitions):
                value = b"v-%d-%08d" % (p, n) + self.pad
                while True:
                    try:
                        self.producer.produce(self.topic, value, partition=p,
                                              on_delivery=self._delivered)  # fmt: skip
                        break
                    except BufferError:  # the local queue is full: let it drain
                        self.producer.poll(0.1)
            n += 1
            self.producer.poll(0.002)
        self.producer.flush(120)

    def start(self) -> AckedProducer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join(150)

    def count(self, partitions: list[int]) -> int:
        return sum(len(self.acked[p]) for p in partitions)


def consume_all(bootstrap: str, topic: str, partitions: int, expect: int) -> dict[int, list[bytes]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False})  # fmt: skip
    c.assign([CkTopicPartition(topic, p, 0) for p in range(partitions)])
    out: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    deadline = time.monotonic() + 90
    got = 0
    try:
        while got < expect and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None or m.error() is not None:
                continue
            out[m.partition()].append(m.value())
            got += 1
    finally:
        c.close()
    return out


def test_a_failed_directory_moves_leadership_and_loses_nothing(
    cluster: LocalCluster, disk: Ext4Disk, tmp_path: Path
) -> None:
    boot = cluster.bootstrap_servers
    b2 = cluster.broker(2)
    topic = f"rf3-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": boot})
    # Broker 2 preferred leader of every partition; its two directories share them.
    admin.create_topics([NewTopic(topic, 4, replica_assignment=[[2, 1, 3]] * 4)])[topic].result(30)
    cluster.wait_for_full_isr(topic, 4)
    placed = dir_of(b2.bootstrap_servers, topic)
    disk_dir = f"{disk.mount_point}/b2-disk"
    on_disk = [p for p, d in placed.items() if d == disk_dir]
    off_disk = [p for p, d in placed.items() if d != disk_dir]
    assert on_disk and off_disk, placed
    assert all(cluster.leader(topic, p) == 2 for p in range(4))

    producer = AckedProducer(boot, topic, 4).start()
    try:
        wait_for("records acknowledged", lambda: producer.count(list(range(4))) > 400)
        t0 = time.monotonic()
        fail_disk(disk)
        wait_for(
            "leaders off the failed directory",
            lambda: all(cluster.leader(topic, p) not in (2, None) for p in on_disk),
        )
        moved_s = time.monotonic() - t0
        print(f"\nleadership moved off the failed directory in {moved_s:.2f} s")
        assert all(2 not in cluster.isr(topic, p) for p in on_disk)
        before = producer.count(on_disk)
        wait_for("records acknowledged by the new leaders",
                 lambda: producer.count(on_disk) > before + 200)  # fmt: skip
        # The broker still leads and serves its other directory.
        assert b2.running
        assert all(cluster.leader(topic, p) == 2 for p in off_disk)
        before = producer.count(off_disk)
        wait_for("records acknowledged by broker 2",
                 lambda: producer.count(off_disk) > before + 200)  # fmt: skip
    finally:
        producer.stop()
    assert producer.errors == []
    total = producer.count(list(range(4)))
    got = consume_all(boot, topic, 4, total)
    for p in range(4):
        missing = set(producer.acked[p]) - set(got[p])
        assert not missing, f"partition {p}: {len(missing)} acknowledged records lost"

    dirs = describe_dirs(b2.bootstrap_servers)
    assert dirs[disk_dir][0] == STORAGE_ERROR
    out = run_tool("kafka-log-dirs", "--bootstrap-server", boot, "--describe",
                   "--broker-list", "2", workdir=tmp_path).stdout  # fmt: skip
    doc = json.loads(out.strip().splitlines()[-1])
    (b2_doc,) = doc["brokers"]
    errors = {d["logDir"]: d["error"] for d in b2_doc["logDirs"]}
    assert errors[disk_dir] is not None and "Storage" in errors[disk_dir]
    assert errors[f"{cluster.dir}/b2-good"] is None

    # Restarted with the disk still dead: the broker starts on its other
    # directory, and the failed one's replicas stay offline there (answered
    # KAFKA_STORAGE_ERROR, not made again empty elsewhere).
    b2.stop()
    b2.start()
    cluster.wait_for(
        lambda: all(2 in cluster.isr(topic, p) for p in off_disk), "broker 2 back in its ISRs"
    )
    assert describe_dirs(b2.bootstrap_servers)[disk_dir][0] == STORAGE_ERROR
    assert all(2 not in cluster.isr(topic, p) for p in on_disk)
    assert not any((Path(cluster.dir) / "b2-good" / f"{topic}-{p}").exists() for p in on_disk)

    # Restarted with the disk repaired: its replicas catch up and rejoin the ISRs.
    b2.stop()
    repair_disk(disk)
    b2.start()
    cluster.wait_for_full_isr(topic, 4)
    assert describe_dirs(b2.bootstrap_servers)[disk_dir][0] == 0


def test_a_move_goes_on_after_its_broker_stops_and_after_it_crashes(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    """Broker 3 moves a replica it leads, throttled so it is still copying
    when it is stopped (SIGTERM: controlled shutdown) and, later, killed
    (SIGKILL); each restart takes up the same future log where it was, and
    once the throttle is off the replica ends up whole in its new directory.
    An acks=all idempotent producer writes all along: nothing acknowledged
    is lost and broker 3's copy holds the leader's bytes. (Before
    test_alter_replica_log_dirs_under_a_producer: broker 3 has moved nothing
    yet, so the throttle paces this move from its first byte.)"""
    boot = cluster.bootstrap_servers
    b3 = cluster.broker(3)
    topic = f"resume-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": boot})
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[[3, 1]])])[topic].result(30)
    cluster.wait_for_full_isr(topic, 1)
    src = dir_of(b3.bootstrap_servers, topic)[0]
    dst = f"{cluster.dir}/b3-b" if src.endswith("b3-a") else f"{cluster.dir}/b3-a"
    with KafkaConnection(b3.bootstrap_servers, timeout=30) as conn:
        for _ in range(150):  # 15 MB: at 1 MB/s, far from copied by the end
            assert produce_raw(conn, topic, 0, os.urandom(100_000)) == 0
    # Written with acks=1: replicated before the leader stops, or the new
    # leader would not have them and broker 3 would rightly drop them.
    b1_dir = Path(cluster.broker(1).log_dir) / f"{topic}-0"
    wait_for("broker 1 to replicate them",
             lambda: log_size(b1_dir) >= log_size(Path(src) / f"{topic}-0"))  # fmt: skip

    producer = AckedProducer(boot, topic, 1).start()
    try:
        set_move_throttle(boot, 3, 1_000_000)
        assert alter_replica_log_dir(b3.bootstrap_servers, topic, 0, dst) == 0
        wait_for("the copy to start", lambda: future_of(dst, topic, 0)[1] > 500_000)
        path = future_of(dst, topic, 0)[0]
        for how in ("SIGTERM", "SIGKILL"):
            if how == "SIGTERM":
                b3.stop()
            else:
                b3.kill()
                # Its ZooKeeper session must end before it may register again.
                cluster.wait_for(lambda: 3 not in cluster.registered(), "broker 3 to leave")
            kept, at_stop = future_of(dst, topic, 0)
            assert kept == path, f"the future log went with the {how}"
            b3.start()
            # The same future log grows again (a new move would be a new
            # directory, starting from nothing).
            wait_for(f"the move to go on after the {how}",
                     lambda n=at_stop: future_of(dst, topic, 0)[1] > n + 500_000)  # fmt: skip
            assert future_of(dst, topic, 0)[0] == path
            print(f"\nafter the {how}: the move went on from {at_stop / 1e6:.1f} MB")
        set_move_throttle(boot, 3, None)
        wait_for("the replica in its new directory",
                 lambda: dir_of(b3.bootstrap_servers, topic).get(0) == dst)  # fmt: skip
        moved = producer.count([0])
        wait_for("records acknowledged after the move", lambda: producer.count([0]) > moved + 200)
    finally:
        producer.stop()
        with contextlib.suppress(Exception):
            set_move_throttle(boot, 3, None)
    assert producer.errors == []
    cluster.wait_for_full_isr(topic, 1)
    assert not list(Path(src).glob("*-future")) and not list(Path(dst).glob("*-future"))
    got = consume_all(boot, topic, 1, 150 + producer.count([0]))  # the 15 MB first
    missing = set(producer.acked[0]) - set(got[0])
    assert not missing, f"{len(missing)} acknowledged records lost"
    b3_dir = Path(dst) / f"{topic}-0"
    wait_for("broker 3 level with the leader", lambda: log_size(b3_dir) == log_size(b1_dir))
    assert partition_bytes(b3_dir) == partition_bytes(b1_dir)


def test_alter_replica_log_dirs_under_a_producer(cluster: LocalCluster, tmp_path: Path) -> None:
    """Kafka's kafka-reassign-partitions with "log_dirs" moves broker 3's
    replicas to its other directory while an acks=all producer writes; the
    moved replicas stay in sync and every acknowledged record is there."""
    boot = cluster.bootstrap_servers
    b3 = cluster.broker(3)
    topic = f"move-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": boot})
    admin.create_topics([NewTopic(topic, 2, replica_assignment=[[3, 1], [1, 3]])])[topic].result(30)
    cluster.wait_for_full_isr(topic, 2)
    dir_a, dir_b = f"{cluster.dir}/b3-a", f"{cluster.dir}/b3-b"
    before = dir_of(b3.bootstrap_servers, topic)
    target = {p: dir_b if d == dir_a else dir_a for p, d in before.items()}

    producer = AckedProducer(boot, topic, 2, pad=1000).start()
    try:
        wait_for("records acknowledged", lambda: producer.count([0, 1]) > 5000)
        plan = {
            "version": 1,
            "partitions": [
                {"topic": topic, "partition": p, "replicas": cluster.replicas(topic, p),
                 "log_dirs": [target[p] if r == 3 else "any" for r in cluster.replicas(topic, p)]}
                for p in range(2)
            ],
        }  # fmt: skip
        plan_file = tmp_path / "plan.json"
        plan_file.write_text(json.dumps(plan))
        out = run_tool("kafka-reassign-partitions", "--bootstrap-server", boot,
                       "--reassignment-json-file", str(plan_file), "--execute",
                       workdir=tmp_path).stdout  # fmt: skip
        assert "Successfully started" in out, out
        t0 = time.monotonic()
        wait_for("the replicas in their new directories",
                 lambda: dir_of(b3.bootstrap_servers, topic) == target)  # fmt: skip
        sizes_mb = sum(describe_dirs(b3.bootstrap_servers)[target[p]][1][(topic, p)]
                       for p in range(2)) / 1e6  # fmt: skip
        print(f"\nmoved {sizes_mb:.1f} MB between directories under load, "
              f"done {time.monotonic() - t0:.2f} s after the tool returned")  # fmt: skip
        done = run_tool("kafka-reassign-partitions", "--bootstrap-server", boot,
                        "--reassignment-json-file", str(plan_file), "--verify",
                        workdir=tmp_path).stdout  # fmt: skip
        for p in range(2):
            assert f"Reassignment of replica {topic}-{p}-3 completed successfully" in done, done
        moved = producer.count([0, 1])
        wait_for(
            "records acknowledged after the move", lambda: producer.count([0, 1]) > moved + 500
        )
    finally:
        producer.stop()
    assert producer.errors == []
    cluster.wait_for_full_isr(topic, 2)
    # No future log left, nothing lost, and broker 3's copies are the leader's.
    assert not list(Path(dir_a).glob("*-future")) and not list(Path(dir_b).glob("*-future"))
    total = producer.count([0, 1])
    got = consume_all(boot, topic, 2, total)
    for p in range(2):
        assert not set(producer.acked[p]) - set(got[p]), f"partition {p} lost records"
    sizes = {(b, p): describe_dirs(cluster.broker(b).bootstrap_servers)
             for b in (1, 3) for p in range(2)}  # fmt: skip
    for p in range(2):
        size_1 = next(s for d in sizes[(1, p)].values() for (t, q), s in d[1].items()
                      if t == topic and q == p)  # fmt: skip
        size_3 = next(s for d in sizes[(3, p)].values() for (t, q), s in d[1].items()
                      if t == topic and q == p)  # fmt: skip
        assert size_1 == size_3


# ---------------------------------------------------------------- throttled and resumed moves

MOVE_THROTTLE = "replica.alter.log.dirs.io.max.bytes.per.second"


def partition_bytes(partition_dir: Path) -> bytes:
    """The records of a partition directory: its segments' bytes in order."""
    return b"".join(f.read_bytes() for f in sorted(partition_dir.glob("*.log")))


def log_size(partition_dir: Path) -> int:
    total = 0
    for f in partition_dir.glob("*.log"):
        with contextlib.suppress(FileNotFoundError):  # rolled or swapped meanwhile
            total += f.stat().st_size
    return total


def future_of(log_dir: str, topic: str, partition: int) -> tuple[Path | None, int]:
    """The move's future log directory in ``log_dir`` and its segments' bytes."""
    found = list(Path(log_dir).glob(f"{topic}-{partition}.*-future"))
    return (found[0], log_size(found[0])) if found else (None, 0)


def set_move_throttle(bootstrap: str, broker: int, rate: int | None) -> None:
    """Kafka's IncrementalAlterConfigs on the broker (what kafka-configs
    --entity-type brokers --entity-name <id> does); None deletes the key."""
    entry = (
        ConfigEntry(MOVE_THROTTLE, None, incremental_operation=AlterConfigOpType.DELETE)
        if rate is None
        else ConfigEntry(MOVE_THROTTLE, str(rate), incremental_operation=AlterConfigOpType.SET)
    )
    res = ConfigResource(ResourceType.BROKER, str(broker), incremental_configs=[entry])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.incremental_alter_configs([res])[res].result(30)


def alter_replica_log_dir(bootstrap: str, topic: str, partition: int, log_dir: str) -> int:
    body = AlterReplicaLogDirsRequest(
        dirs=[AlterReplicaLogDir(path=log_dir, topics=[
            AlterReplicaLogDirTopic(name=topic, partitions=[partition])])]
    )  # fmt: skip
    with KafkaConnection(bootstrap, timeout=30) as c:
        r = c.request(ApiKey.ALTER_REPLICA_LOG_DIRS, 2, body, AlterReplicaLogDirsResponse)
    return r.results[0].partitions[0].error_code


def test_a_throttled_move_takes_at_least_its_size_over_the_rate(tmp_path: Path) -> None:
    """kafka-reassign-partitions --replica-alter-log-dirs-throttle on a lone
    broker: the ~24 MB move keeps within the bound all along (Kafka's
    SimpleRate: one second's worth at first, then the bound); a second move
    under a throttle it cannot finish within this test's patience finishes
    once the throttle is raised with kafka-configs' IncrementalAlterConfigs,
    after the broker was restarted in its middle; --verify takes the
    throttle off."""
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    broker = lone_broker(tmp_path, dirs)
    try:
        boot = broker.bootstrap_servers
        topic = f"thr-{uuid.uuid4().hex[:6]}"
        create_topic(boot, topic, 1)
        src = dir_of(boot, topic)[0]
        (dst,) = [d for d in dirs if d != src]
        batch_bytes = 100_000
        with KafkaConnection(boot, timeout=30) as conn:
            for _ in range(240):
                assert produce_raw(conn, topic, 0, os.urandom(batch_bytes)) == 0
        before = partition_bytes(Path(src) / f"{topic}-0")
        size = len(before)
        assert size > 24_000_000

        rate = 6_000_000
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": topic, "partition": 0, "replicas": [1], "log_dirs": [dst]}]}))  # fmt: skip
        samples: list[tuple[float, int]] = []
        outcome: list[str] = []

        def execute() -> None:
            outcome.append(run_tool("kafka-reassign-partitions", "--bootstrap-server", boot,
                                    "--reassignment-json-file", str(plan), "--execute",
                                    "--replica-alter-log-dirs-throttle", str(rate),
                                    workdir=tmp_path).stdout)  # fmt: skip

        tool = threading.Thread(target=execute)
        tool.start()
        # The copy starts after the last look that found no future log: time
        # from there over-counts the copy's, so the bound below is safe.
        start = time.monotonic()
        deadline = start + 120
        while True:
            now = time.monotonic()
            path, copied = future_of(dst, topic, 0)
            if path is None and not samples:
                start = now
            elif path is not None:
                samples.append((now - start, copied))
            if dir_of(boot, topic).get(0) == dst:
                break
            assert now < deadline, samples[-3:]
            time.sleep(0.05)
        took = time.monotonic() - start
        tool.join(120)
        assert "The replica-alter-dir throttle limit was set to 6000000 B/s" in outcome[0]
        # Each round asks the quota first and copies at most a tenth of the
        # bound or one batch: the copy can be at most that ahead of
        # rate * max(elapsed, 1 s) at any time.
        slack = rate // 10 + batch_bytes + 1000
        for t, copied in samples:
            assert copied <= rate * max(t, 1.0) + slack, (t, copied, samples)
        assert took >= (size - slack) / rate
        print(f"\nthrottled move: {size / 1e6:.1f} MB in {took:.2f} s = {size / took / 1e6:.2f}"
              f" MB/s under a throttle of {rate / 1e6:.1f} MB/s")  # fmt: skip
        assert partition_bytes(Path(dst) / f"{topic}-0") == before

        # Back, under a throttle it could not finish under in 60 s; stopped
        # and started again, the lone broker takes the same copy up (its
        # store keeps the throttle); raised, the move finishes.
        slow = 100_000
        set_move_throttle(boot, 1, slow)
        assert alter_replica_log_dir(boot, topic, 0, src) == 0
        wait_for("the move back to start", lambda: future_of(src, topic, 0)[0] is not None)
        path = future_of(src, topic, 0)[0]
        broker.stop()
        kept, at_stop = future_of(src, topic, 0)
        assert kept == path
        broker.start()
        wait_for("the move back to go on after the restart",
                 lambda: future_of(src, topic, 0)[1] > at_stop)  # fmt: skip
        assert future_of(src, topic, 0)[0] == path
        assert future_of(src, topic, 0)[1] < size // 2
        t0 = time.monotonic()
        set_move_throttle(boot, 1, 1_000_000_000)
        wait_for("the move back to finish once the throttle is raised",
                 lambda: dir_of(boot, topic).get(0) == src, timeout=size / slow / 4)  # fmt: skip
        print(f"raised from {slow / 1e6:.1f} MB/s, the move back finished in "
              f"{time.monotonic() - t0:.2f} s")  # fmt: skip
        assert partition_bytes(Path(src) / f"{topic}-0") == before

        done = run_tool("kafka-reassign-partitions", "--bootstrap-server", boot,
                        "--reassignment-json-file", str(plan), "--verify",
                        workdir=tmp_path).stdout  # fmt: skip
        # The plan said dst; the replica is back in src: Kafka's tool reports
        # that, and still clears the throttles (no reassignment is in flight).
        assert "Clearing broker-level throttles on broker 1" in done, done
        admin = AdminClient({"bootstrap.servers": boot})
        res = ConfigResource(ResourceType.BROKER, "1")
        entry = admin.describe_configs([res])[res].result(30)[MOVE_THROTTLE]
        assert entry.source != 2  # no DYNAMIC_BROKER_CONFIG left
        assert int(entry.value) == (1 << 63) - 1
    finally:
        broker.stop()
