"""Spark scan figures for `make bench`: the same rows scanned from pylog segment
files (``format("pylog").option("path", ...)``, and ``format("pylog-jvm")``, the
JVM columnar reader, when `make spark-jvm` has built it), from Parquet, and with Spark's
own Kafka source (``format("kafka")``, spark-sql-kafka-0-10) through a pylog
broker and through Apache Kafka, in the same Spark session (local[2]); and
consumed through the pylog broker with confluent-kafka.

    PYLOG_BENCH_SPARK_RECORDS=2000000 .venv/bin/python bench/spark_bench.py

Each Spark scan is ``count(*), sum(length(value))`` so every value is
materialised. The segment and Parquet scans alternate over three rounds
(medians; ``PYLOG_BENCH_SPARK_ROUNDS`` sets how many), with the segment scan
given ``schema("value binary")`` (only the column the query needs), the JVM
reader (which is told the columns), and a Python data source yielding one pre-built
value-only batch over and over, no decoding at all: the floor of Spark's Python
data source path, which the segment scan runs on. Each scan's CPU seconds (the
JVM and its Python workers, summed over this process's descendants) are printed
beside its wall time: on a loaded machine they hold steadier. The log is
written directly in Kafka's format (one 1,000-record batch, its base offset
and a batch number in each value rewritten per copy, CRC recomputed),
88-128-byte random values, codec none.
Spark's Kafka source reads the first ``PYLOG_BENCH_SPARK_SOURCE_RECORDS`` (4M)
of them, beside the segment scan of the same rows: through a `pylog broker
start` process serving that log directory, and through Apache Kafka (KRaft, the
jars `make kafka` caches; bench/kafka_peer.py starts it) into which as many
records of the same sizes are produced first. The confluent-kafka consumer
reads ``PYLOG_BENCH_SPARK_BROKER_RECORDS`` (1M) through the pylog broker. Either
set to 0 skips its legs (segments against Parquet alone). The Kafka
source needs the connector `make spark-kafka` caches for this PySpark; without
it, or without Kafka's jars, those rows say so. Nothing here fails on timing.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from broker_bench import Broker
from kafka_peer import KafkaPeer, default_libs, kafka_version

import pylog.spark
from pylog import _native

N = int(os.environ.get("PYLOG_BENCH_SPARK_RECORDS", "10000000"))
BATCH = 1000
MARK = b"@@BATCH@"
CORES = 2
# the broker leg consumes at most this many records: it is the slow baseline
BROKER_RECORDS = min(N, int(os.environ.get("PYLOG_BENCH_SPARK_BROKER_RECORDS", "1000000")))
# Spark's Kafka source reads this many: enough that a scan is not all per-query cost
SOURCE_RECORDS = min(N, int(os.environ.get("PYLOG_BENCH_SPARK_SOURCE_RECORDS", "4000000")))
ROUNDS = int(os.environ.get("PYLOG_BENCH_SPARK_ROUNDS", "3"))


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

    jvm_jar = pylog.spark.jvm_jar()
    if jvm_jar is not None:
        jars = [*jars, jvm_jar]

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


def tree_cpu() -> float:
    """CPU seconds of this process's descendants (the JVM, its Python workers),
    exited ones included as far as their parents reaped them."""
    tick = os.sysconf("SC_CLK_TCK")
    procs: dict[int, tuple[int, float]] = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        # ppid, then utime stime cutime cstime
        procs[int(pid)] = (int(fields[1]), sum(int(x) for x in fields[11:15]) / tick)
    mine = {os.getpid()}
    grew = True
    while grew:
        grew = False
        for pid, (ppid, _) in procs.items():
            if ppid in mine and pid not in mine:
                mine.add(pid)
                grew = True
    return sum(procs[p][1] for p in mine if p != os.getpid())


def rounds(dfs: dict[str, Any], n: int = ROUNDS) -> dict[str, tuple[float, float, tuple[int, int]]]:
    """Each scan ``n`` times, alternating: median wall and CPU seconds, and the result."""
    wall: dict[str, list[float]] = {k: [] for k in dfs}
    cpu: dict[str, list[float]] = {k: [] for k in dfs}
    out: dict[str, tuple[int, int]] = {}
    for _ in range(n):
        for k, df in dfs.items():
            c, t = tree_cpu(), time.perf_counter()
            r = df.selectExpr("count(*) AS n", "sum(length(value)) AS b").collect()[0]
            wall[k].append(time.perf_counter() - t)
            cpu[k].append(tree_cpu() - c)
            out[k] = (r.n, r.b)
    return {k: (statistics.median(wall[k]), statistics.median(cpu[k]), out[k]) for k in dfs}


def prebuilt_source(spark: Any) -> None:
    """Format ``"prebuilt"``: ``n`` rows of a ``value`` column (``size`` bytes each)
    from one Arrow batch yielded again and again over ``CORES`` partitions — the
    Python data source path with nothing to read or decode."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    class Prebuilt(DataSource):
        @classmethod
        def name(cls) -> str:
            return "prebuilt"

        def schema(self) -> str:
            return "value binary"

        def reader(self, schema: Any) -> DataSourceReader:
            return PrebuiltReader(int(self.options["n"]), int(self.options["size"]))

    class PrebuiltReader(DataSourceReader):
        def __init__(self, n: int, size: int) -> None:
            self.n, self.size = n, size

        def partitions(self) -> list[InputPartition]:
            return [InputPartition(i) for i in range(CORES)]

        def read(self, partition: Any) -> Any:
            import pyarrow as pa

            rows = 65536
            batch = pa.RecordBatch.from_arrays(
                [pa.array([b"v" * self.size] * rows, pa.binary())], names=["value"]
            )
            left = self.n // CORES + (partition.value < self.n % CORES)
            while left > 0:
                yield batch if left >= rows else batch.slice(0, left)
                left -= rows

    spark.dataSource.register(Prebuilt)


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
        else "PYLOG_BENCH_SPARK_SOURCE_RECORDS=0"
        if not SOURCE_RECORDS
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

        def segments(**opts: str) -> Any:
            r = spark.read.format("pylog").option("path", str(logs)).option("subscribe", "bench")
            for k, v in {"minPartitions": str(CORES), **opts}.items():
                r = r.option(k, v)
            return r

        seg = segments().load()
        jvm_jar = pylog.spark.jvm_jar()

        def jvm_segments(**opts: str) -> Any:
            r = spark.read.format(pylog.spark.JVM_FORMAT).option("path", str(logs))
            for k, v in {"subscribe": "bench", "minPartitions": str(CORES), **opts}.items():
                r = r.option(k, v)
            return r

        parquet = str(root / "bench.parquet")
        seg.write.parquet(parquet)
        prebuilt_source(spark)

        def prebuilt(size: int) -> Any:
            return spark.read.format("prebuilt").option("n", str(N)).option("size", str(size))

        legs = {
            "seg": seg,
            "value": segments().schema("value binary").load(),
            "parquet": spark.read.parquet(parquet),
            "floor": prebuilt(0).load(),
            # the log's mean value size: the same bytes, moved but not decoded
            "floor108": prebuilt(108).load(),
        }
        if jvm_jar is not None:
            # format("pylog-jvm"): columnar batches of the value column alone
            legs["jvm"] = jvm_segments().load()
        scans = rounds(legs)
        (t_seg, c_seg, r_seg), (t_val, c_val, r_val) = scans["seg"], scans["value"]
        (t_pq, c_pq, r_pq), (t_floor, c_floor, r_floor) = scans["parquet"], scans["floor"]
        assert r_seg == r_val == r_pq == (N, r_seg[1]), (r_seg, r_val, r_pq)
        t_f108, c_f108, r_f108 = scans["floor108"]
        assert r_floor == (N, 0) and r_f108 == (N, 108 * N), (r_floor, r_f108)
        t_jvm, c_jvm, r_jvm = scans.get("jvm", (float("nan"), float("nan"), r_seg))
        assert r_jvm == r_seg, (r_jvm, r_seg)
        if not why_not or BROKER_RECORDS:
            broker = Broker(str(root / "pylog"), [], [sys.executable, "-m", "pylog.cli"])
        t_kp = t_kk = t_seg1 = t_val1 = t_jvm1 = t_broker = float("nan")
        if not why_not:
            assert broker is not None
            # the segment scan over the rows the broker legs read, for like-for-like ratios
            first = json.dumps({"bench": {"0": SOURCE_RECORDS}})
            t_seg1, r_seg1 = scan(segments(endingOffsets=first).load())
            t_val1, r_val1 = scan(segments(endingOffsets=first).schema("value binary").load())
            assert r_val1 == r_seg1, (r_val1, r_seg1)
            if jvm_jar is not None:
                t_jvm1, r_jvm1 = scan(jvm_segments(endingOffsets=first).load())
                assert r_jvm1 == r_seg1, (r_jvm1, r_seg1)
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
            t_seg1 = min(t_seg1, scan(segments(endingOffsets=first).load())[0])
            t_val1 = min(
                t_val1, scan(segments(endingOffsets=first).schema("value binary").load())[0]
            )
            if jvm_jar is not None:
                t_jvm1 = min(t_jvm1, scan(jvm_segments(endingOffsets=first).load())[0])
            assert r_seg1 == r_kp == r_kk and r_kp[0] == SOURCE_RECORDS, (r_seg1, r_kp, r_kk)
            kafka.stop()
            kafka = None
        spark.stop()
        if BROKER_RECORDS:
            t_broker = consume_through_broker(broker.bootstrap, "bench", BROKER_RECORDS)
        seg_rate = N / t_seg / CORES
        print(
            f"{N:,} rows, median of {ROUNDS} alternating rounds, "
            f"load average {os.getloadavg()[0]:.1f}"
        )
        head = f"{'scan (count + sum(length(value)))':<44}{'seconds':>10}{'rows/s/core':>14}"
        print(f"{head}{'CPU s':>8}")
        for label, (secs, c) in {
            "pylog segments (path), local[2]": (t_seg, c_seg),
            "pylog segments, schema('value binary')": (t_val, c_val),
            "Parquet, same rows, same session": (t_pq, c_pq),
            "floor: Python source, pre-built empty values": (t_floor, c_floor),
            "  the same, pre-built 108-byte values": (t_f108, c_f108),
            "pylog-jvm: JVM columnar segment reader": (t_jvm, c_jvm),
        }.items():
            print(f"{label:<44}{secs:>10.2f}{N / secs / CORES:>14,.0f}{c:>8.2f}")
        print(
            f"segments / Parquet: {t_pq / t_seg:.2f}, with schema('value binary'): "
            f"{t_pq / t_val:.2f}, the floors: {t_pq / t_floor:.2f}, {t_pq / t_f108:.2f} "
            f"(goal >= 1.0; in CPU seconds {c_pq / c_seg:.2f}, {c_pq / c_val:.2f}, "
            f"{c_pq / c_floor:.2f}, {c_pq / c_f108:.2f})"
        )
        if jvm_jar is None:
            print("format('pylog-jvm'): skipped, its jar is not built (make spark-jvm)")
        else:
            print(
                f"format('pylog-jvm') / Parquet: {t_pq / t_jvm:.2f} wall, {c_pq / c_jvm:.2f} CPU "
                f"(goal >= 1.0); / format('pylog') with schema('value binary'): "
                f"{t_val / t_jvm:.2f} wall, {c_val / c_jvm:.2f} CPU"
            )
        per_core = {
            "pylog segments (path), local[2]": (t_seg, seg_rate),
            "Parquet, same rows, same session": (t_pq, N / t_pq / CORES),
            f"pylog segments, first {SOURCE_RECORDS:,}": (t_seg1, SOURCE_RECORDS / t_seg1 / CORES),
            "  the same, schema('value binary')": (t_val1, SOURCE_RECORDS / t_val1 / CORES),
            "  the same, format('pylog-jvm')": (t_jvm1, SOURCE_RECORDS / t_jvm1 / CORES),
            f"Kafka source via pylog ({SOURCE_RECORDS:,})": (t_kp, SOURCE_RECORDS / t_kp / CORES),
            f"Kafka source via Kafka {kafka_version()}": (t_kk, SOURCE_RECORDS / t_kk / CORES),
        }
        if why_not:
            print(f"Spark's Kafka source rows: skipped, {why_not}")
        rates = [r for _, r in per_core.values()]
        if not why_not:
            print(f"{'scan (count + sum(length(value)))':<44}{'seconds':>10}{'rows/s/core':>14}")
            for label, (secs, rate) in list(per_core.items())[2:]:
                print(f"{label:<44}{secs:>10.2f}{rate:>14,.0f}")
            seg1, val1, jvm1, kp, kk = rates[2:]
            print(
                f"segments / Spark's Kafka source, same {SOURCE_RECORDS:,} rows, via pylog: "
                f"{seg1 / kp:.2f} ({val1 / kp:.2f} with schema('value binary'), "
                f"{jvm1 / kp:.2f} pylog-jvm), via Kafka: {seg1 / kk:.2f} ({val1 / kk:.2f}, "
                f"{jvm1 / kk:.2f}) (goal >= 3)"
            )
            print(f"Spark's Kafka source, via pylog / via Kafka: {kp / kk:.2f}")
        if BROKER_RECORDS:
            label = f"confluent-kafka via broker ({BROKER_RECORDS:,})"
            rate_broker = BROKER_RECORDS / t_broker
            print(f"{label:<44}{t_broker:>10.2f}{rate_broker:>14,.0f}  (1 consumer)")
            print(f"segments (per core) / broker consumer: {seg_rate / rate_broker:.2f}")
    finally:
        if kafka is not None:
            kafka.stop()
        if broker is not None:
            broker.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
