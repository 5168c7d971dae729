"""Spark scan figures for `make bench`: the same rows scanned from pylog segment
files (``format("pylog").option("path", ...)``), from Parquet, and with Spark's
own Kafka source (``format("kafka")``, spark-sql-kafka-0-10) through a pylog
broker and through Apache Kafka, in the same Spark session (local[2]); and
consumed through the pylog broker with confluent-kafka.

    PYLOG_BENCH_SPARK_RECORDS=2000000 .venv/bin/python bench/spark_bench.py

Each Spark scan is ``count(*), sum(length(value))`` so every value is
materialised; best of two runs. The log is written directly in Kafka's format
(one 1,000-record batch, its base offset and a batch number in each value
rewritten per copy, CRC recomputed), 88-128-byte random values, codec none.
Spark's Kafka source reads the first ``PYLOG_BENCH_SPARK_SOURCE_RECORDS`` (4M)
of them, beside the segment scan of the same rows: through a `pylog broker
start` process serving that log directory, and through Apache Kafka (KRaft, the
jars `make kafka` caches; bench/kafka_peer.py starts it) into which as many
records of the same sizes are produced first. The confluent-kafka consumer
reads ``PYLOG_BENCH_SPARK_BROKER_RECORDS`` (1M) through the pylog broker. The Kafka
source needs the connector `make spark-kafka` caches for this PySpark; without
it, or without Kafka's jars, those rows say so. Nothing here fails on timing.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from broker_bench import Broker
from kafka_peer import KafkaPeer, default_libs, kafka_version

from pylog import _native

N = int(os.environ.get("PYLOG_BENCH_SPARK_RECORDS", "10000000"))
BATCH = 1000
MARK = b"@@BATCH@"
CORES = 2
# the broker leg consumes at most this many records: it is the slow baseline
BROKER_RECORDS = min(N, int(os.environ.get("PYLOG_BENCH_SPARK_BROKER_RECORDS", "1000000")))
# Spark's Kafka source reads this many: enough that a scan is not all per-query cost
SOURCE_RECORDS = min(N, int(os.environ.get("PYLOG_BENCH_SPARK_SOURCE_RECORDS", "4000000")))


def write_log(root: Path, topic: str, n: int) -> int:
    """``n`` records in ``root/<topic>-0``; returns the bytes written. Values
    are random bytes with the record's batch number stamped in, so no two are
    equal and neither format gains from dictionary or run-length encoding."""
    d = root / f"{topic}-0"
    d.mkdir(parents=True)
    now = int(time.time() * 1000)
    rng = random.Random(7)
    records = [
        (b"user-%d" % (i % 97), MARK + rng.randbytes(80 + i % 40), [], now + i)
        for i in range(BATCH)
    ]
    template = bytearray(_native.build_batch(records))
    marks = []
    at = template.find(MARK)
    while at >= 0:
        marks.append(at)
        at = template.find(MARK, at + 1)
    assert len(marks) == BATCH
    size = 0
    with open(d / "00000000000000000000.log", "wb") as f:
        for base in range(0, n, BATCH):
            template[0:8] = base.to_bytes(8, "big")
            stamp = b"%08d" % (base // BATCH)
            for at in marks:
                template[at : at + 8] = stamp
            # the CRC32C covers attributes..end (not the base offset)
            template[17:21] = _native.crc32c(memoryview(template)[21:]).to_bytes(4, "big")
            f.write(template)
            size += len(template)
    return size


def connector_jars() -> list[str]:
    """Spark's Kafka connector for this PySpark, as `make spark-kafka` caches it."""
    import pyspark

    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pylog"
    d = cache / "spark-kafka" / f"pyspark-{pyspark.__version__}"
    return sorted(str(j) for j in d.glob("*.jar")) if (d / ".complete").exists() else []


def spark_session(jars: list[str]) -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import pylog.spark

    spark = (
        SparkSession.builder.master(f"local[{CORES}]")
        .appName("pylog-spark-bench")
        .config("spark.jars", ",".join(jars))
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    pylog.spark.register(spark)
    return spark


def scan(df: Any) -> tuple[float, tuple[int, int]]:
    best = float("inf")
    out = (0, 0)
    for _ in range(2):
        t = time.perf_counter()
        r = df.selectExpr("count(*) AS n", "sum(length(value)) AS b").collect()[0]
        best = min(best, time.perf_counter() - t)
        out = (r.n, r.b)
    return best, out


def produce_same_sizes(bootstrap: str, topic: str, n: int) -> None:
    """``n`` records of the sizes ``write_log`` gives record ``i`` (key
    ``user-<i % 97>``, an 88 + i % 40-byte random value), for Apache Kafka."""
    from confluent_kafka import Producer

    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "batch.size": 1 << 20,
            "batch.num.messages": 100000,
            "queue.buffering.max.messages": 2000000,
            "queue.buffering.max.kbytes": 1 << 20,
            "compression.type": "none",
        }
    )
    rng = random.Random(11)
    batch = [
        {"value": rng.randbytes(88 + i % 40), "key": b"user-%d" % (i % 97)} for i in range(BATCH)
    ]
    for base in range(0, n, BATCH):
        while len(p) > 500_000:  # well under the queue's limits: produce_batch never fails
            p.poll(0.01)
        todo = batch[: min(BATCH, n - base)]
        sent = p.produce_batch(topic, todo, partition=0)
        assert sent == len(todo), f"produce_batch queued {sent} of {len(todo)}"
        p.poll(0)
    assert p.flush(120) == 0


def kafka_source(spark: Any, bootstrap: str, topic: str, n: int) -> Any:
    """Spark's own Kafka source over offsets [0, n) of partition 0, split in
    CORES tasks as the segment scan is."""
    return (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", json.dumps({topic: {"0": n}}))
        .option("minPartitions", str(CORES))
        .load()
    )


def consume_through_broker(bootstrap: str, topic: str, n: int) -> float:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench",
            "enable.auto.commit": False,
            "fetch.max.bytes": 52428800,
            "max.partition.fetch.bytes": 10485760,
        }
    )
    c.assign([TopicPartition(topic, 0, 0)])
    got = 0
    t = time.perf_counter()
    try:
        while got < n:
            for m in c.consume(10000, 1.0):
                if m.error() is None:
                    got += 1
    finally:
        c.close()
    return time.perf_counter() - t


def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="pylog-spark-bench-"))
    jars = connector_jars()
    kafka_libs = default_libs()
    why_not = (
        "no spark-sql-kafka-0-10 for this PySpark (make spark-kafka)"
        if not jars
        else f"no Apache Kafka jars in {kafka_libs} (make kafka)"
        if not (kafka_libs / f"kafka_2.13-{kafka_version()}.jar").exists()
        else ""
    )
    broker: Broker | None = None
    kafka: KafkaPeer | None = None
    try:
        (root / "pylog").mkdir()
        logs = root / "pylog" / "broker-logs"  # where Broker(root / "pylog") keeps its log
        t = time.perf_counter()
        size = write_log(logs, "bench", N)
        print(f"wrote {N:,} records ({size / 2**20:,.0f} MiB) in {time.perf_counter() - t:.1f} s")
        spark = spark_session(jars)
        seg = (
            spark.read.format("pylog")
            .option("path", str(logs))
            .option("subscribe", "bench")
            .option("minPartitions", str(CORES))
            .load()
        )
        t_seg, r_seg = scan(seg)
        parquet = str(root / "bench.parquet")
        seg.write.parquet(parquet)
        t_pq, r_pq = scan(spark.read.parquet(parquet))
        assert r_seg == r_pq == (N, r_seg[1]), (r_seg, r_pq)
        broker = Broker(str(root / "pylog"), [], [sys.executable, "-m", "pylog.cli"])
        t_kp = t_kk = t_seg1 = float("nan")
        if not why_not:
            # the segment scan over the rows the broker legs read, for like-for-like ratios
            seg1 = (
                spark.read.format("pylog")
                .option("path", str(logs))
                .option("subscribe", "bench")
                .option("endingOffsets", json.dumps({"bench": {"0": SOURCE_RECORDS}}))
                .option("minPartitions", str(CORES))
                .load()
            )
            t_seg1, r_seg1 = scan(seg1)
            kafka = KafkaPeer(str(root), kafka_libs)
            kafka.create_topic("bench", 1)
            produce_same_sizes(kafka.bootstrap, "bench", SOURCE_RECORDS)
            via_pylog = kafka_source(spark, broker.bootstrap, "bench", SOURCE_RECORDS)
            via_kafka = kafka_source(spark, kafka.bootstrap, "bench", SOURCE_RECORDS)
            # alternating: each scan() is best of two
            t_kp, r_kp = scan(via_pylog)
            t_kk, r_kk = scan(via_kafka)
            t_kp = min(t_kp, scan(via_pylog)[0])
            t_kk = min(t_kk, scan(via_kafka)[0])
            assert r_seg1 == r_kp == r_kk and r_kp[0] == SOURCE_RECORDS, (r_seg1, r_kp, r_kk)
            kafka.stop()
            kafka = None
        spark.stop()
        t_broker = consume_through_broker(broker.bootstrap, "bench", BROKER_RECORDS)
        seg_rate = N / t_seg / CORES
        per_core = {
            "pylog segments (path), local[2]": (t_seg, seg_rate),
            "Parquet, same rows, same session": (t_pq, N / t_pq / CORES),
            f"pylog segments, first {SOURCE_RECORDS:,}": (t_seg1, SOURCE_RECORDS / t_seg1 / CORES),
            f"Kafka source via pylog ({SOURCE_RECORDS:,})": (t_kp, SOURCE_RECORDS / t_kp / CORES),
            f"Kafka source via Kafka {kafka_version()}": (t_kk, SOURCE_RECORDS / t_kk / CORES),
        }
        print(f"{'scan (count + sum(length(value)))':<44}{'seconds':>10}{'rows/s/core':>14}")
        for label, (secs, rate) in per_core.items():
            print(f"{label:<44}{secs:>10.2f}{rate:>14,.0f}")
        label = f"confluent-kafka via broker ({BROKER_RECORDS:,})"
        rate_broker = BROKER_RECORDS / t_broker
        print(f"{label:<44}{t_broker:>10.2f}{rate_broker:>14,.0f}  (1 consumer)")
        if why_not:
            print(f"Spark's Kafka source rows: skipped, {why_not}")
        rates = [r for _, r in per_core.values()]
        print(f"segments / Parquet throughput ratio: {rates[0] / rates[1]:.2f} (goal >= 1.0)")
        if not why_not:
            print(
                f"segments / Spark's Kafka source, same {SOURCE_RECORDS:,} rows, via pylog: "
                f"{rates[2] / rates[3]:.2f}, via Kafka: {rates[2] / rates[4]:.2f} (goal >= 3)"
            )
            print(f"Spark's Kafka source, via pylog / via Kafka: {rates[3] / rates[4]:.2f}")
        print(f"segments (per core) / broker consumer: {seg_rate / rate_broker:.2f}")
    finally:
        if kafka is not None:
            kafka.stop()
        if broker is not None:
            broker.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
