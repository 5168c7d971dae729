"""An end-to-end pipeline on a local pylog broker and a local Spark:

1. events (JSON) are produced through the broker with confluent-kafka;
2. a Spark batch job aggregates them straight from the segment files
   (``format("pylog").option("path", ...)``) and writes Parquet;
3. a streaming query follows the events produced after that, from the offsets
   the batch job stopped at, and
4. writes the large ones back to a topic (``writeStream.format("pylog")``),
   which is read back to show the result.

Run it with ``make pipeline`` or ``.venv/bin/python examples/pipeline/run.py``
(``--events N`` to change the size; ``--master spark://host:7077`` to run it on
a Spark standalone cluster whose workers see this machine's files and run this
Python). Copy and change what you need: the broker here is pylog's embedded
test broker; point ``bootstrap``/``log_dir`` at yours.

Step 4's writes are exactly-once (``format("pylog")``'s default, see
docs/spark.md "Exactly-once writes"): a failed task, a lost executor or a
query restarted from its checkpoint leaves each alert once in the topic as a
``read_committed`` consumer reads it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

KINDS = ["click", "view", "purchase", "refund"]


def produce_events(bootstrap: str, topic: str, first: int, n: int) -> None:
    from confluent_kafka import Producer

    rng = random.Random(first)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 10, "compression.type": "lz4"})
    failed: list[Any] = []
    for i in range(first, first + n):
        event = {"id": i, "user": f"u{rng.randrange(50)}", "kind": KINDS[i % 4]}
        event["amount"] = rng.randrange(1, 1000)
        p.produce(
            topic,
            key=event["user"].encode(),
            value=json.dumps(event).encode(),
            on_delivery=lambda err, _m: failed.append(err) if err else None,
        )
        p.poll(0)
    if p.flush(30) or failed:
        raise RuntimeError(f"events not delivered: {failed[:3]}")


def wait_committed(log_dir: str, topic: str, count: int, timeout: float = 30) -> None:
    """Reading from segments (``path``) sees what the broker has checkpointed as
    committed: its high watermark, saved to ``replication-offset-checkpoint``
    every ``replica.high.watermark.checkpoint.interval.ms`` (5 s by default,
    0.2 s on the broker below). Wait until that covers ``count`` records."""
    from pylog.log.checkpoint import REPLICATION_OFFSET_CHECKPOINT, OffsetCheckpointFile

    checkpoint = OffsetCheckpointFile(os.path.join(log_dir, REPLICATION_OFFSET_CHECKPOINT))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        saved = checkpoint.read() if os.path.exists(checkpoint.path) else {}
        if sum(hw for tp, hw in saved.items() if tp.topic == topic) >= count:
            return
        time.sleep(0.05)
    raise RuntimeError(f"the broker did not checkpoint {count} records of {topic} as committed")


def run(spark: Any, workdir: Path, events: int = 10_000, quiet: bool = False) -> dict[str, Any]:
    """The whole pipeline on an embedded broker under ``workdir``; returns its figures."""
    from pyspark.sql import functions as F

    import pylog.spark
    from pylog.testing import EmbeddedBroker

    def say(*a: object) -> None:
        if not quiet:
            print(*a, flush=True)

    pylog.spark.register(spark)
    schema = "id LONG, user STRING, kind STRING, amount INT"
    hw_every = {"replica.high.watermark.checkpoint.interval.ms": 200}
    with EmbeddedBroker(hw_every, log_dir=str(workdir / "broker")) as broker:
        bootstrap = broker.bootstrap_servers
        say(f"broker on {bootstrap}, log dir {broker.log_dir}")
        produce_events(bootstrap, "events", 0, events)
        wait_committed(broker.log_dir, "events", events)
        say(f"1. produced {events} events")

        # 2. batch: straight from the segments, no broker load
        raw = (
            spark.read.format("pylog")
            .option("path", broker.log_dir)
            .option("subscribe", "events")
            .load()
        )
        ends = raw.groupBy("partition").agg(F.max("offset").alias("last")).collect()
        parsed = raw.select(F.from_json(F.col("value").cast("string"), schema).alias("e"))
        per_kind = parsed.groupBy("e.kind").agg(
            F.count("*").alias("events"), F.sum("e.amount").alias("amount")
        )
        parquet = str(workdir / "per_kind.parquet")
        per_kind.write.mode("overwrite").parquet(parquet)
        table = {r.kind: (r.events, r.amount) for r in spark.read.parquet(parquet).collect()}
        say(f"2. aggregated from the segments into {parquet}: {table}")

        # 3. streaming: follow what comes after the batch job's offsets
        starting = json.dumps({"events": {str(r.partition): r.last + 1 for r in ends}})
        alerts = (
            spark.readStream.format("pylog")
            .option("path", broker.log_dir)
            .option("subscribe", "events")
            .option("startingOffsets", starting)
            .load()
            .select("key", F.from_json(F.col("value").cast("string"), schema).alias("e"))
            .where("e.amount >= 900")
            .select("key", F.to_json("e").alias("value"))
        )
        query = (
            alerts.writeStream.format("pylog")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", "alerts")
            .option("checkpointLocation", str(workdir / "checkpoint"))
            .trigger(processingTime="200 milliseconds")
            .start()
        )
        try:
            more = max(events // 10, 10)
            produce_events(bootstrap, "events", events, more)
            wait_committed(broker.log_dir, "events", events + more)
            say(f"3. produced {more} more events; the streaming query follows them")
            # every event is committed before this: one call sees them all
            query.processAllAvailable()
        finally:
            query.stop()

        # 4. the results, read back over the wire
        back = (
            spark.read.format("pylog")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", "alerts")
            .load()
            .select(F.from_json(F.col("value").cast("string"), schema).alias("e"))
            .select("e.*")
        )
        got = back.collect()
        say(f"4. {len(got)} alerts (amount >= 900) written back to topic 'alerts'")
    return {
        "per_kind": table,
        "events": events,
        "more": more,
        "alerts": sorted(r.id for r in got),
        "parquet": parquet,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=10_000)
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--master", default="local[2]", help="local[N] or spark://host:port")
    args = ap.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(args.master)
        .appName("pylog-pipeline")
        # executors run this interpreter, so they load the same pylog
        .config("spark.pyspark.python", sys.executable)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="pylog-pipeline-"))
    t0 = time.monotonic()
    try:
        run(spark, workdir, args.events)
    finally:
        spark.stop()
    print(f"done in {time.monotonic() - t0:.1f} s; files under {workdir}")


if __name__ == "__main__":
    main()
