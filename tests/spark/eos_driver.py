"""A driver of the exactly-once tests (test_spark_exactly_once.py), run as its
own process on the Spark standalone cluster of tests/spark_cluster.py, so a
test can SIGKILL it and run it again.

``batch``: ``spark.range(n)`` in 4 partitions, values ``r-<id>``, written with
``df.write.format("pylog")``. ``stream``: the lines of the text files in
``--input`` (one file per micro-batch), hashed into 3 write tasks, written with
``writeStream.format("pylog")`` until every file is processed. Write task P
writes to partition P of the topic, so one task's open transaction holds back
the last stable offset of its own partition only.

``--hold P,B,K=DIR``: the write task of partition P of micro-batch B (-1: a
batch job), once K rows have gone on to the writer (in Arrow batches of
``spark.sql.execution.arrow.maxRecordsPerBatch``), writes its Python worker's
pid to DIR/holding and waits until DIR/go exists before it passes on more -
the user's transform being slow, as far as Spark knows. The writer has then
produced K records in a transaction still open; the test kills something.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Iterator
from typing import Any

from spark_cluster import session_from_env  # the driver's PYTHONPATH holds tests/


def holder(holds: list[str]) -> Any:
    """The hold of ``--hold P,B,K=DIR`` (B -1 for a batch job)."""
    parsed = []
    for h in holds:
        spec, d = h.split("=", 1)
        p, b, k = (int(x) for x in spec.split(","))
        parsed.append((p, b, k, d))

    def hold(batches: Iterator[Any]) -> Iterator[Any]:
        from pyspark import TaskContext

        tc = TaskContext.get()
        batch = int(tc.getLocalProperty("streaming.sql.batchId") or -1)
        mine = [(k, d) for p, b, k, d in parsed if p == tc.partitionId() and b == batch]
        passed = 0
        for b in batches:
            for k, d in mine:
                go = os.path.join(d, "go")
                if passed >= k and not os.path.exists(go):
                    with open(os.path.join(d, "holding.tmp"), "w") as f:
                        f.write(str(os.getpid()))
                    os.replace(os.path.join(d, "holding.tmp"), os.path.join(d, "holding"))
                    while not os.path.exists(go):
                        time.sleep(0.1)
            passed += b.num_rows
            yield b

    return hold


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["batch", "stream"])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--records", type=int, default=200)
    ap.add_argument("--input")
    ap.add_argument("--checkpoint")
    ap.add_argument("--hold", action="append", default=[])
    ap.add_argument("--option", action="append", default=[], help="k=v, a write option")
    args = ap.parse_args()
    spark: Any = session_from_env()
    options = dict(o.split("=", 1) for o in args.option)
    if args.mode == "batch":
        df = spark.range(0, args.records, 1, 4).selectExpr(
            "concat('r-', id) AS value", "spark_partition_id() AS partition"
        )
        df = df.mapInArrow(holder(args.hold), df.schema)
        w = df.write.format("pylog").option("kafka.bootstrap.servers", args.bootstrap)
        w.option("topic", args.topic).options(**options).mode("append").save()
        print("batch write done", flush=True)
        return
    lines = spark.readStream.option("maxFilesPerTrigger", 1).text(args.input)
    df = lines.repartition(3, "value").selectExpr("value", "spark_partition_id() AS partition")
    df = df.mapInArrow(holder(args.hold), df.schema)
    q = (
        df.writeStream.format("pylog")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("topic", args.topic)
        .options(**options)
        .option("checkpointLocation", args.checkpoint)
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        q.processAllAvailable()
    finally:
        q.stop()
    print("stream done", flush=True)


if __name__ == "__main__":
    main()
