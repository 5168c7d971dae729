"""The broker-facing read paths of format("pylog") against a real broker
process: ``kafka.isolation.level=read_committed`` (over the wire, and from the
segment files with the broker's last stable offset) against a transactional
confluent-kafka producer that commits, aborts and leaves one transaction open;
a read of files that lag the broker (their tail fetched); the end offsets of
a streaming read's micro-batches committed to its consumer group; and every
``kafka.*`` security setting (SASL_SSL with SCRAM, SSL with a client
certificate, SASL_PLAINTEXT with PLAIN) on a secured broker."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from broker_process import BrokerProcess
from security_support import (
    PLAIN_MODULE,
    PLAIN_USERS,
    SCRAM_MODULE,
    listener_ports,
    make_certs,
    secure_listeners,
)
from spark_support import broker, create_topic, log_dir, spark, topic_name

from pylog.spark._logdirs import aborted_batches, read_partition
from pylog.spark._wire import READ_COMMITTED, BrokerClient, fetch_partition

__all__ = ["broker", "spark"]  # fixtures, imported for pytest


def _txn_producer(bootstrap: str) -> Any:
    from confluent_kafka import Producer

    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"spark-{uuid.uuid4()}",
            # the open transaction outlives several Spark jobs on a loaded
            # machine: the coordinator must not abort it at the default 60 s
            "transaction.timeout.ms": 900_000,
        }
    )
    p.init_transactions(30)
    return p


def _produce_mixed(bootstrap: str, topic: str) -> tuple[Any, set[bytes], set[bytes]]:
    """Plain records, committed and aborted transactions interleaved with
    them on two partitions, and finally a transaction left open (its producer
    is returned, to end it). Returns the producer, the values a committed
    read sees and the values only an uncommitted read sees."""
    from confluent_kafka import Producer

    plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    committed: set[bytes] = set()
    aborted: set[bytes] = set()

    def put(p: Any, value: bytes, into: set[bytes]) -> None:
        p.produce(topic, value=value, partition=len(into) % 2)
        into.add(value)

    txn = _txn_producer(bootstrap)
    for round_ in range(4):
        for i in range(5):
            put(plain, b"plain-%d-%d" % (round_, i), committed)
        plain.flush(30)
        txn.begin_transaction()
        for i in range(20):
            # 40 kB each: the transactions fill more than one 1 MiB segment
            value = b"txn-%d-%d|" % (round_, i) + b"x" * 40_000
            put(txn, value, committed if round_ % 2 else aborted)
            if i == 10:
                # another producer's records land inside the transaction
                txn.flush(30)
                for j in range(3):
                    put(plain, b"inside-%d-%d" % (round_, j), committed)
                plain.flush(30)
        # librdkafka drops what it has not sent when a transaction aborts
        txn.flush(30)
        if round_ % 2:
            txn.commit_transaction(30)
        else:
            txn.abort_transaction(30)
    # a transaction left open: the last stable offset stays at its first record
    txn.begin_transaction()
    for i in range(6):
        put(txn, b"open-%d" % i, aborted)
    txn.flush(30)
    for i in range(4):
        put(plain, b"after-open-%d" % i, aborted)  # above the LSO: not read committed yet
    plain.flush(30)
    return txn, committed, aborted


def _consumer_read(
    bootstrap: str, topic: str, isolation: str, n: int
) -> list[tuple[int, int, bytes]]:
    """What confluent-kafka reads with ``isolation.level``: (partition, offset, value)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"check-{uuid.uuid4()}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
        }
    )
    c.assign([TopicPartition(topic, p, 0) for p in (0, 1)])
    out: list[tuple[int, int, bytes]] = []
    deadline = time.monotonic() + 30
    idle = 0
    while time.monotonic() < deadline and (len(out) < n or idle < 3):
        m = c.poll(0.5)
        if m is None:
            idle += 1
            continue
        idle = 0
        assert m.error() is None, m.error()
        out.append((m.partition(), m.offset(), m.value()))
    c.close()
    return sorted(out)


def _rows(df: Any) -> list[tuple[int, int, bytes]]:
    return sorted((r.partition, r.offset, bytes(r.value)) for r in df.collect())


def test_read_committed_leaves_out_aborted_and_open_transactions(
    spark: Any, broker: BrokerProcess
) -> None:
    topic = topic_name("txn")
    from confluent_kafka.admin import AdminClient, NewTopic

    # the smallest segments: transactions span segments, their .txnindex entries too
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    config = {"segment.bytes": str(1 << 20)}
    admin.create_topics([NewTopic(topic, 2, 1, config=config)])[topic].result(20)
    txn, committed, uncommitted = _produce_mixed(broker.bootstrap, topic)
    want = _consumer_read(broker.bootstrap, topic, "read_committed", len(committed))
    assert {v for _, _, v in want} == committed  # what a Kafka consumer reads
    every = _consumer_read(
        broker.bootstrap, topic, "read_uncommitted", len(committed | uncommitted)
    )
    assert {v for _, _, v in every} == committed | uncommitted
    # the files do hold aborted transactions' indexes, in more than one segment
    part = Path(log_dir(broker)) / f"{topic}-0"
    assert len(list(part.glob("*.log"))) >= 2 and list(part.glob("*.txnindex"))

    def read(**opts: str) -> Any:
        r = spark.read.format("pylog").option("subscribe", topic)
        for k, v in opts.items():
            r = r.option(k, v)
        return r.load()

    wire = {"kafka.bootstrap.servers": broker.bootstrap}
    files = {"path": log_dir(broker), **wire}
    rc = {"kafka.isolation.level": "read_committed"}
    assert _rows(read(**wire, **rc)) == want
    assert _rows(read(**files, **rc)) == want
    # the default stays read_uncommitted, as Spark's
    assert _rows(read(**wire)) == every
    assert _rows(read(**files)) == every
    # split into many tasks, and values only: the same rows
    df = read(**files, **rc, minPartitions="9")
    assert df.rdd.getNumPartitions() >= 9 and _rows(df) == want
    small = spark.read.format("pylog").schema("value binary").option("subscribe", topic)
    for k, v in {**files, **rc}.items():
        small = small.option(k, v)
    got = sorted(bytes(r.value) for r in small.load().collect())
    assert got == sorted(v for _, _, v in want)

    # the open transaction commits: its records and those after it appear
    txn.commit_transaction(30)
    now = len(every) - sum(1 for v in uncommitted if v.startswith(b"txn-"))  # all but aborted
    after = _consumer_read(broker.bootstrap, topic, "read_committed", now)
    assert len(after) == now
    assert _rows(read(**wire, **rc)) == after
    assert _rows(read(**files, **rc)) == after


def test_aborted_batches_from_txnindex_match_the_wire(broker: BrokerProcess) -> None:
    """The executor paths without Spark: the batches the .txnindex files name
    as aborted are the ones a read_committed Fetch's aborted list drops."""
    topic = topic_name("txn-direct")
    create_topic(broker.bootstrap, topic, 1)
    p = _txn_producer(broker.bootstrap)
    for n in range(6):
        p.begin_transaction()
        for i in range(7):
            p.produce(topic, value=b"%d-%d" % (n, i), partition=0)
        p.flush(30)  # librdkafka drops what it has not sent when a transaction aborts
        (p.commit_transaction if n % 3 == 0 else p.abort_transaction)(30)
    path = f"{log_dir(broker)}/{topic}-0"
    with BrokerClient(broker.bootstrap) as c:
        lso = c.list_offsets({(topic, 0): -1}, READ_COMMITTED)[(topic, 0)]
    holes = aborted_batches(path, 0, lso)
    assert len(holes) == 4  # one batch for each aborted transaction
    from_files = [
        v
        for cols in read_partition(path, topic, 0, 0, lso, False, True, True)
        for v in _values(cols)
    ]
    over_wire = [
        v
        for cols in fetch_partition(broker.bootstrap, topic, 0, 0, lso, False, True, None, 1)
        for v in _values(cols)
    ]
    want = [b"%d-%d" % (n, i) for n in (0, 3) for i in range(7)]
    assert from_files == over_wire == want
    # a range starting inside an aborted transaction still drops its records
    start = holes[1][0] + 2
    tail = [
        v
        for cols in read_partition(path, topic, 0, start, lso, False, True, True)
        for v in _values(cols)
    ]
    assert tail == [b"3-%d" % i for i in range(7)]


def _values(cols: tuple[Any, ...]) -> list[bytes]:

    from pylog.spark._arrow import to_record_batch

    batch = to_record_batch(cols, "t", 0, False)
    return [bytes(v) for v in batch.column(batch.schema.get_field_index("value")).to_pylist()]


def test_files_that_lag_are_completed_from_the_broker(
    spark: Any, broker: BrokerProcess, tmp_path: Path
) -> None:
    """One snapshot per read: the broker pins the end offsets; a copy of the
    log dir taken earlier is read for what it holds, the rest fetched."""
    from confluent_kafka import Producer

    topic = topic_name("lag")
    create_topic(broker.bootstrap, topic, 2)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(300):
        p.produce(topic, value=b"v%d" % i, partition=i % 2)
    p.flush(30)
    copy = tmp_path / "copy"
    for part in (0, 1):
        shutil.copytree(f"{log_dir(broker)}/{topic}-{part}", copy / f"{topic}-{part}")
    for i in range(300, 500):
        p.produce(topic, value=b"v%d" % i, partition=i % 2)
    p.flush(30)
    df = (
        spark.read.format("pylog")
        .option("path", str(copy))
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", topic)
        .load()
    )
    rows = _rows(df)
    for part in (0, 1):
        assert [o for pp, o, _ in rows if pp == part] == list(range(250))
    assert sorted(v for _, _, v in rows) == sorted(b"v%d" % i for i in range(500))


def test_a_batch_read_during_production_equals_itself_on_rerun(
    spark: Any, broker: BrokerProcess
) -> None:
    import threading

    from confluent_kafka import Producer

    topic = topic_name("snapshot")
    create_topic(broker.bootstrap, topic, 2)
    stop = threading.Event()

    def keep_producing() -> None:
        p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 2})
        i = 0
        while not stop.is_set():
            p.produce(topic, value=b"live-%d" % i, partition=i % 2)
            i += 1
            if i % 50 == 0:
                p.flush(10)
        p.flush(10)

    t = threading.Thread(target=keep_producing, daemon=True)
    t.start()
    try:
        time.sleep(0.5)
        opts = {
            "path": log_dir(broker),
            "kafka.bootstrap.servers": broker.bootstrap,
            "subscribe": topic,
        }
        df = spark.read.format("pylog").options(**opts).load()
        first = _rows(df)
        ends = {str(p): 1 + max(o for pp, o, _ in first if pp == p) for p in (0, 1)}
        # each partition a gapless prefix, files and broker stitched
        for p in (0, 1):
            assert [o for pp, o, _ in first if pp == p] == list(range(ends[str(p)]))
        pinned = json.dumps({topic: ends})
        again = spark.read.format("pylog").options(**opts, endingOffsets=pinned).load()
        assert _rows(again) == first
        assert _rows(again) == first  # and once more, still producing
    finally:
        stop.set()
        t.join(30)


def test_streaming_read_commits_each_micro_batch_to_its_group(
    spark: Any, broker: BrokerProcess, tmp_path: Path
) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient

    topic = topic_name("group")
    group = f"spark-{topic}"
    create_topic(broker.bootstrap, topic, 2)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(100):
        p.produce(topic, value=b"%d" % i, partition=i % 2)
    p.flush(30)
    q = (
        spark.readStream.format("pylog")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("kafka.group.id", group)
        .option("maxOffsetsPerTrigger", "40")
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .start()
    )
    try:
        q.processAllAvailable()
        # a finished micro-batch's end is committed at the next trigger
        want = {(topic, 0): 50, (topic, 1): 50}
        assert _committed(broker, group, want) == want
        # more records, another micro-batch, and its end committed in turn
        for i in range(100, 130):
            p.produce(topic, value=b"%d" % i, partition=0)
        p.flush(30)
        q.processAllAvailable()
        want = {(topic, 0): 80, (topic, 1): 50}
        assert _committed(broker, group, want) == want
    finally:
        q.stop()
    # what Kafka's own admin API (kafka-consumer-groups) reads: lag 0
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    req = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0), TopicPartition(topic, 1)])
    got = admin.list_consumer_group_offsets([req])[group].result(20)
    assert {tp.partition: tp.offset for tp in got.topic_partitions} == {0: 80, 1: 50}
    # and pylog's own command shows the group's lag
    out = subprocess.run(
        [str(Path(sys.executable).with_name("pylog")), "groups", "describe", "--group", group,
         "--bootstrap-server", broker.bootstrap],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert topic in out.stdout and "80" in out.stdout


def _committed(
    b: BrokerProcess, group: str, want: dict[tuple[str, int], int]
) -> dict[tuple[str, int], int]:
    """The group's offsets once they are ``want``, or as they are after a
    minute (an upper bound against a hang only)."""
    deadline = time.monotonic() + 60
    while True:
        with BrokerClient(b.bootstrap) as c:
            now = c.client.committed(group)
        if now == want or time.monotonic() > deadline:
            return now
        time.sleep(0.2)


def _recreate(bootstrap: str, topic: str, records: int) -> None:
    """Delete the topic and make it again with ``records`` records."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic])[topic].result(30)
    deadline = time.monotonic() + 60
    while True:  # the deletion completes in the background
        try:
            admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(records):
        p.produce(topic, value=b"new-%d" % i, partition=0)
    assert p.flush(30) == 0


@pytest.mark.parametrize("fail", [True, False])
def test_a_topic_recreated_under_a_running_query(
    spark: Any, broker: BrokerProcess, tmp_path: Path, fail: bool
) -> None:
    """failOnDataLoss, as Spark's Kafka source: the offsets went back, so the
    query stops naming the partition and the offsets, or logs it and goes on
    from the new log's end."""
    from confluent_kafka import Producer

    topic = topic_name("recreated")
    create_topic(broker.bootstrap, topic, 1)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(30):
        p.produce(topic, value=b"old-%d" % i, partition=0)
    p.flush(30)
    name = f"recreated_{'fail' if fail else 'go_on'}"
    q = (
        spark.readStream.format("pylog")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("failOnDataLoss", str(fail).lower())
        .load()
        .writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .start()
    )
    try:
        q.processAllAvailable()
        assert spark.table(name).count() == 30
        _recreate(broker.bootstrap, topic, 5)
        if fail:
            with pytest.raises(Exception) as info:
                q.processAllAvailable()
            msg = str(info.value)
            # found at a trigger while the topic is gone, or once it is back
            gone = f"{topic}-0 is gone (its topic deleted?) after offset 30"
            back = f"{topic}-0's offset went back from 30 to 5"
            assert gone in msg or back in msg, msg[:3000]
            assert "failOnDataLoss" in msg
            return
        q.processAllAvailable()
        p2 = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
        for i in range(5, 12):
            p2.produce(topic, value=b"new-%d" % i, partition=0)
        p2.flush(30)
        q.processAllAvailable()
        got = sorted(bytes(r.value) for r in spark.table(name).collect())
        # the old log whole, then the new one: from its start when a trigger
        # saw the topic gone (a new partition), from the end the query found
        # when the offsets had gone back; never a record twice
        old = [b"old-%d" % i for i in range(30)]
        assert got in (
            sorted(old + [b"new-%d" % i for i in range(12)]),
            sorted(old + [b"new-%d" % i for i in range(5, 12)]),
        ), got
    finally:
        q.stop()


def _produce_values(bootstrap: str, topic: str, values: range, partitions: int = 2) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in values:
        p.produce(topic, value=b"%d" % i, partition=i % partitions)
    assert p.flush(30) == 0


def _stream(spark: Any, broker: BrokerProcess, topic: str, name: str, **opts: str) -> Any:
    r = (
        spark.readStream.format("pylog")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load().writeStream.format("memory").queryName(name)


def test_trigger_available_now_reads_to_the_end_in_limited_batches(
    spark: Any, broker: BrokerProcess, tmp_path: Path
) -> None:
    from pylog.spark.source import PylogStreamReader

    api = pytest.importorskip("pyspark.sql.streaming.datasource")  # PySpark 4.2+

    if not hasattr(api, "SupportsTriggerAvailableNow"):
        pytest.skip("PySpark before 4.2 runs Trigger.AvailableNow as one batch")
    assert issubclass(PylogStreamReader, api.SupportsTriggerAvailableNow)
    topic = topic_name("available-now")
    create_topic(broker.bootstrap, topic, 2)
    _produce_values(broker.bootstrap, topic, range(100))

    def run() -> Any:
        q = (
            _stream(spark, broker, topic, "available_now", maxOffsetsPerTrigger="30")
            .format("parquet")  # a memory sink does not resume from a checkpoint
            .option("path", str(tmp_path / "out"))
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(availableNow=True)
            .start()
        )
        assert q.awaitTermination(300)  # it stops by itself at the end it found
        return q

    q = run()
    sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    assert sum(sizes) == 100 and max(sizes) <= 30 and len(sizes) >= 4
    # a second run reads what came since, from the checkpoint
    _produce_values(broker.bootstrap, topic, range(100, 140))
    q = run()
    assert sum(p["numInputRows"] for p in q.recentProgress) == 40
    got = sorted(int(bytes(r.value)) for r in spark.read.parquet(str(tmp_path / "out")).collect())
    assert got == list(range(140))


def test_min_offsets_per_trigger_waits_up_to_max_trigger_delay(
    spark: Any, broker: BrokerProcess, tmp_path: Path
) -> None:
    topic = topic_name("min-offsets")
    create_topic(broker.bootstrap, topic, 2)
    _produce_values(broker.bootstrap, topic, range(10))
    q = (
        _stream(
            spark, broker, topic, "min_offsets", minOffsetsPerTrigger="50", maxTriggerDelay="4s"
        )
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        q.processAllAvailable()  # the first batch never waits
        assert spark.table("min_offsets").count() == 10
        _produce_values(broker.bootstrap, topic, range(10, 30))  # 20 < 50: they wait
        deadline = time.monotonic() + 120
        while spark.table("min_offsets").count() < 30 and time.monotonic() < deadline:
            time.sleep(0.5)
        assert spark.table("min_offsets").count() == 30
        batches = [p for p in q.recentProgress if p["numInputRows"]]
        assert [p["numInputRows"] for p in batches] == [10, 20]
        # the 20 were let through only once the delay since the first batch passed
        t0, t1 = (_progress_time(p["timestamp"]) for p in batches)
        assert t1 - t0 >= 4.0
        _produce_values(broker.bootstrap, topic, range(30, 90))  # 60 >= 50: at once
        q.processAllAvailable()
        assert spark.table("min_offsets").count() == 90
    finally:
        q.stop()


def _progress_time(stamp: str) -> float:
    import datetime as dt

    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


# ---------------------------------------------------------------- security

SCRAM_USER, SCRAM_PASSWORD = "alice", "alice-scram-secret"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, Any]]:
    from confluent_kafka import Producer
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    base = tmp_path_factory.mktemp("spark-secured")
    certs = make_certs(base / "certs")
    b = BrokerProcess(base / "data", secure_listeners(certs)).start()
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        for mech in (ScramMechanism.SCRAM_SHA_512, ScramMechanism.SCRAM_SHA_256):
            upsert = UserScramCredentialUpsertion(
                SCRAM_USER, ScramCredentialInfo(mech, 4096), SCRAM_PASSWORD.encode()
            )
            for f in admin.alter_user_scram_credentials([upsert]).values():
                f.result(timeout=20)
        create_topic(b.bootstrap, "secured", 2)
        p = Producer({"bootstrap.servers": b.bootstrap})
        for i in range(60):
            p.produce("secured", value=b"s%d" % i, partition=i % 2)
        p.flush(30)
        yield b, certs
    finally:
        b.stop()


def test_every_security_protocol_reads(spark: Any, secured: tuple[BrokerProcess, Any]) -> None:
    b, certs = secured
    ports = listener_ports(b.start_line)
    scram = f'{SCRAM_MODULE} required username="{SCRAM_USER}" password="{SCRAM_PASSWORD}";'
    plain = f'{PLAIN_MODULE} required username="alice" password="{PLAIN_USERS["alice"]}";'
    setups = {
        "SASL_SSL/SCRAM-SHA-512": {
            "kafka.bootstrap.servers": f"127.0.0.1:{ports['SASL_SSL']}",
            "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": "SCRAM-SHA-512",
            "kafka.sasl.jaas.config": scram,
            "kafka.ssl.truststore.location": str(certs.ca),
            "kafka.ssl.truststore.type": "PEM",
        },
        "SASL_SSL/SCRAM-SHA-256 (librdkafka names)": {
            "kafka.bootstrap.servers": f"127.0.0.1:{ports['SASL_SSL']}",
            "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": "SCRAM-SHA-256",
            "kafka.sasl.username": SCRAM_USER,
            "kafka.sasl.password": SCRAM_PASSWORD,
            "kafka.ssl.ca.location": str(certs.ca),
        },
        "SSL with a client certificate": {
            "kafka.bootstrap.servers": f"127.0.0.1:{ports['SSL']}",
            "kafka.security.protocol": "SSL",
            "kafka.ssl.truststore.location": str(certs.ca),
            "kafka.ssl.keystore.location": str(certs.client_keystore),
            "kafka.ssl.keystore.type": "PEM",
        },
        "SASL_PLAINTEXT/PLAIN": {
            "kafka.bootstrap.servers": f"127.0.0.1:{ports['SASL_PLAINTEXT']}",
            "kafka.security.protocol": "SASL_PLAINTEXT",
            "kafka.sasl.mechanism": "PLAIN",
            "kafka.sasl.jaas.config": plain,
        },
    }
    want = sorted(b"s%d" % i for i in range(60))
    for name, opts in setups.items():
        df = spark.read.format("pylog").options(**opts, subscribe="secured").load()
        assert sorted(bytes(r.value) for r in df.collect()) == want, name
        if not name.startswith("SASL_SSL/SCRAM-SHA-512"):
            continue
        # the same settings reach the executors' fetches in a stream
        q = (
            spark.readStream.format("pylog").options(**opts, subscribe="secured")
            .option("startingOffsets", "earliest").load()
            .writeStream.format("memory").queryName(f"sec_{abs(hash(name))}").start()
        )  # fmt: skip
        try:
            q.processAllAvailable()
        finally:
            q.stop()
        assert spark.table(f"sec_{abs(hash(name))}").count() == 60, name
    # a wrong password fails at planning, naming the failure, never the password
    bad = dict(setups["SASL_SSL/SCRAM-SHA-512"])
    bad["kafka.sasl.jaas.config"] = scram.replace(SCRAM_PASSWORD, "not-it")
    with pytest.raises(Exception) as info:
        spark.read.format("pylog").options(**bad, subscribe="secured").load().count()
    assert "SASL authentication failed" in str(info.value)
    assert "not-it" not in str(info.value)
    # no truststore: the broker's certificate is not trusted
    untrusted = {k: v for k, v in bad.items() if "truststore" not in k}
    untrusted["kafka.sasl.jaas.config"] = scram
    with pytest.raises(Exception) as info:
        spark.read.format("pylog").options(**untrusted, subscribe="secured").load().count()
    assert "CERTIFICATE_VERIFY_FAILED" in str(info.value)
