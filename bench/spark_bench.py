"""Spark scan figures for `make bench`: the same rows scanned from pylog segment
files (``format("pylog").option("path", ...)``), from Parquet, in the same Spark
session (local[2]), and consumed through a broker with confluent-kafka.

    PYLOG_BENCH_SPARK_RECORDS=2000000 .venv/bin/python bench/spark_bench.py

Each Spark scan is ``count(*), sum(length(value))`` so every value is
materialised; best of two runs. The log is written directly in Kafka's format
(one 1,000-record batch, its base offset and a batch number in each value
rewritten per copy, CRC recomputed), 88-128-byte random values, codec none.
Nothing here fails on timing.
"""

from __future__ import annotations

import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pylog import _native

N = int(os.environ.get("PYLOG_BENCH_SPARK_RECORDS", "10000000"))
BATCH = 1000
MARK = b"@@BATCH@"
CORES = 2
# the broker leg consumes at most this many records: it is the slow baseline
BROKER_RECORDS = min(N, int(os.environ.get("PYLOG_BENCH_SPARK_BROKER_RECORDS", "1000000")))


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


def spark_session() -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import pylog.spark

    spark = (
        SparkSession.builder.master(f"local[{CORES}]")
        .appName("pylog-spark-bench")
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


def consume_through_broker(log_dir: Path, topic: str, n: int) -> float:
    from confluent_kafka import Consumer, TopicPartition

    from pylog.testing import EmbeddedBroker

    with EmbeddedBroker(log_dir=str(log_dir)) as broker:
        c = Consumer(
            {
                "bootstrap.servers": broker.bootstrap_servers,
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
    try:
        logs = root / "logs"
        t = time.perf_counter()
        size = write_log(logs, "bench", N)
        print(f"wrote {N:,} records ({size / 2**20:,.0f} MiB) in {time.perf_counter() - t:.1f} s")
        spark = spark_session()
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
        spark.stop()
        t_broker = consume_through_broker(logs, "bench", BROKER_RECORDS)
        rate = [N / t_seg, N / t_pq, BROKER_RECORDS / t_broker]
        print(f"{'scan (count + sum(length(value)))':<44}{'seconds':>10}{'rows/s/core':>14}")
        print(f"{'pylog segments (path), local[2]':<44}{t_seg:>10.2f}{rate[0] / CORES:>14,.0f}")
        print(f"{'Parquet, same rows, same session':<44}{t_pq:>10.2f}{rate[1] / CORES:>14,.0f}")
        label = f"confluent-kafka via broker ({BROKER_RECORDS:,})"
        print(f"{label:<44}{t_broker:>10.2f}{rate[2]:>14,.0f}  (1 consumer)")
        print(f"segments / Parquet throughput ratio: {rate[0] / rate[1]:.2f} (goal >= 1.0)")
        print(f"segments (per core) / broker consumer: {rate[0] / CORES / rate[2]:.2f}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
