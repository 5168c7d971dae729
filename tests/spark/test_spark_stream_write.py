"""Streaming reads (micro-batches pick up new records, maxOffsetsPerTrigger,
restart from a checkpoint), batch and streaming writes through the broker
(round trip, a delivery failure fails the job), and the Arrow UDFs on segment
bytes read with ``binaryFile``."""

from __future__ import annotations

import glob
import shutil
from pathlib import Path
from typing import Any

import pytest
from broker_process import BrokerProcess
from spark_support import broker, log_dir, produce, rows_of, spark, topic_name, wait_committed

__all__ = ["broker", "spark"]  # fixtures, imported for pytest


def admission_control() -> bool:
    """Whether this PySpark passes the start and a ReadLimit to latestOffset (4.2+)."""
    import pyspark

    major, minor = (int(x) for x in pyspark.__version__.split(".")[:2])
    return (major, minor) >= (4, 2)


def _stream(spark: Any, b: BrokerProcess, via: str, topic: str, ckpt: Path, seen: list) -> Any:
    r = spark.readStream.format("pylog")
    r = (
        r.option("path", log_dir(b))
        if via == "path"
        else r.option("kafka.bootstrap.servers", b.bootstrap)
    )
    df = (
        r.option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "40")
        .load()
    )

    def sink(batch: Any, batch_id: int) -> None:
        rows = batch.selectExpr("offset", "cast(value as string) v").collect()
        seen.append((batch_id, sorted((r.offset, r.v) for r in rows)))

    return (
        df.writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(ckpt))
        .trigger(processingTime="100 milliseconds")
        .start()
    )


@pytest.mark.parametrize("via", ["path", "wire"])
def test_streaming_picks_up_new_records_and_resumes_from_a_checkpoint(
    spark: Any, broker: BrokerProcess, tmp_path: Path, via: str
) -> None:
    topic = topic_name(f"stream-{via}")
    recs = produce(broker, topic, 100)
    seen: list = []
    q = _stream(spark, broker, via, topic, tmp_path / "ckpt", seen)
    try:
        q.processAllAvailable()
        assert [o for _, rows in seen for o, _ in rows] == list(range(100))
        if admission_control():
            # PySpark >= 4.2 gives latestOffset the batch's start: the limit
            # holds for the first batch of a run too
            assert [len(rows) for _, rows in seen if rows] == [40, 40, 20]
        # maxOffsetsPerTrigger=40 applies from the end of a run's first batch
        n = len(seen)
        produce(broker, topic, 90, start=100)
        q.processAllAvailable()
        later = [len(rows) for _, rows in seen[n:] if rows]
        assert max(later) <= 40 and sum(later) == 90 and len(later) >= 3
        assert [o for _, rows in seen for o, _ in rows] == list(range(190))
    finally:
        q.stop()
    produce(broker, topic, 20, start=190)
    after: list = []
    q = _stream(spark, broker, via, topic, tmp_path / "ckpt", after)
    try:
        q.processAllAvailable()
    finally:
        q.stop()
    # the restarted query reads only what came after its checkpoint
    assert [o for _, rows in after for o, _ in rows] == list(range(190, 210))
    values = dict(r for _, rows in seen + after for r in rows)
    assert all(values[i] == recs[i][1].decode() if i < 100 else True for i in values)


def test_batch_write_round_trips(spark: Any, broker: BrokerProcess) -> None:
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        StringType,
        StructField,
        StructType,
    )

    topic = topic_name("write")
    from spark_support import create_topic

    create_topic(broker.bootstrap, topic, 2)
    hdr = ArrayType(
        StructType([StructField("key", StringType()), StructField("value", BinaryType())])
    )
    schema = StructType(
        [
            StructField("key", StringType()),
            StructField("value", BinaryType()),
            StructField("partition", IntegerType()),
            StructField("headers", hdr),
        ]
    )
    data = [
        (None if i % 4 == 0 else f"k{i}", b"v%d" % i, i % 2, [("h", b"%d" % i), ("n", None)])
        for i in range(200)
    ]
    df = spark.createDataFrame(data, schema).repartition(2)
    (
        df.write.format("pylog")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", topic)
        .mode("append")
        .save()
    )
    wait_committed(broker, topic, len(data))
    back = (
        spark.read.format("pylog")
        .option("path", log_dir(broker))
        .option("subscribe", topic)
        .option("includeHeaders", "true")
        .load()
    )
    got = sorted(
        (
            (None if k is None else bytes(k).decode(), bytes(v), p, [(h[0], h[1]) for h in hs])
            for k, v, p, hs in (
                (
                    r.key,
                    r.value,
                    r.partition,
                    [(h.key, h.value and bytes(h.value)) for h in r.headers],
                )
                for r in back.collect()
            )
        ),
        key=repr,
    )
    want = sorted(((k, v, p, [(a, b) for a, b in h]) for k, v, p, h in data), key=repr)
    assert got == want


def test_streaming_write_copies_a_topic(spark: Any, broker: BrokerProcess, tmp_path: Path) -> None:
    src, dst = topic_name("copy-src"), topic_name("copy-dst")
    recs = produce(broker, src, 50)
    q = (
        spark.readStream.format("pylog")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", src)
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        .load()
        .selectExpr("key", "value", "headers")
        .writeStream.format("pylog")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", dst)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .start()
    )
    try:
        q.processAllAvailable()
    finally:
        q.stop()
    wait_committed(broker, dst, len(recs))
    df = (
        spark.read.format("pylog")
        .option("path", log_dir(broker))
        .option("subscribe", dst)
        .option("includeHeaders", "true")
        .load()
    )
    got = [(k, v, hs) for k, v, _p, _ts, hs, _t, _o in rows_of(df)]
    assert got == [(k, v, hs) for k, v, _p, _ts, hs in recs]


def test_a_delivery_failure_fails_the_write(spark: Any, tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    df = spark.createDataFrame([("a",), ("b",)], ["value"])
    with pytest.raises(Exception, match=r"records (failed delivery|were not delivered)"):
        (
            df.write.format("pylog")
            .option("kafka.bootstrap.servers", f"127.0.0.1:{port}")
            .option("kafka.message.timeout.ms", "1500")
            .option("topic", "nowhere")
            .option("exactlyOnce", "false")
            .mode("append")
            .save()
        )
    # exactly-once (the default) fails at its first step, within the same bound
    with pytest.raises(Exception, match=r"InitProducerId: .*[Tt]imed out"):
        (
            df.write.format("pylog")
            .option("kafka.bootstrap.servers", f"127.0.0.1:{port}")
            .option("kafka.message.timeout.ms", "1500")
            .option("topic", "nowhere")
            .mode("append")
            .save()
        )
    with pytest.raises(Exception, match="required attribute 'value' not found"):
        spark.range(1).write.format("pylog").option("kafka.bootstrap.servers", "x:1").option(
            "topic", "t"
        ).mode("append").save()
    with pytest.raises(Exception, match="topic option required"):
        df.write.format("pylog").option("kafka.bootstrap.servers", "x:1").mode("append").save()


def test_udfs_decode_and_validate_segment_bytes(
    spark: Any, broker: BrokerProcess, tmp_path: Path
) -> None:
    from pyspark.sql import functions as F

    from pylog.spark.functions import decode_batches, validate_batches

    topic = topic_name("udf")
    recs = produce(broker, topic, 60, **{"compression.type": "snappy"})
    recs += produce(broker, topic, 60, start=60, **{"compression.type": "zstd"})
    seg = glob.glob(f"{log_dir(broker)}/{topic}-0/*.log")[0]
    good = tmp_path / "good.log"
    shutil.copy(seg, good)
    data = bytearray(good.read_bytes())
    first = 12 + int.from_bytes(data[8:12], "big")
    data[first + 80] ^= 0xFF
    (tmp_path / "bad.log").write_bytes(bytes(data))
    files = spark.read.format("binaryFile").load(str(tmp_path / "*.log"))
    checks = {
        Path(r.path).name: (r.c.valid, r.c.error, r.c.position)
        for r in files.select("path", validate_batches("content").alias("c")).collect()
    }
    assert checks["good.log"] == (True, None, None)
    valid, error, position = checks["bad.log"]
    assert not valid and "CRC32C mismatch" in error and position == first
    records = (
        files.where(F.col("path").endswith("good.log"))
        .select(F.explode(decode_batches("content")).alias("r"))
        .select("r.offset", "r.key", "r.value", "r.headers", "r.timestamp")
        .orderBy("offset")
        .collect()
    )
    got = [
        (
            r.key and bytes(r.key),
            bytes(r.value),
            [(h.key, h.value and bytes(h.value)) for h in r.headers],
        )
        for r in records
    ]
    assert got == [(k, v, hs) for k, v, _p, _ts, hs in recs]
    assert [r.offset for r in records] == list(range(120))
