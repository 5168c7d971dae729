"""Spark's own Kafka connector (``format("kafka")``, spark-sql-kafka-0-10, fetched by
`make spark-kafka` for the running PySpark) against a real pylog broker: batch and
streaming reads give the rows ``format("pylog")`` gives for the same topic and
offsets, and batch and streaming writes land records that confluent-kafka and
``format("pylog")`` read back as written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from broker_process import BrokerProcess
from spark_support import (
    T0,
    broker,
    create_topic,
    expected,
    kafka_connector_jars,
    produce,
    rows_of,
    spark,
    topic_name,
    wait_committed,
)

__all__ = ["broker", "spark"]  # fixtures, imported for pytest


@pytest.fixture(scope="module", autouse=True)
def _connector_fetched() -> None:
    if not kafka_connector_jars():
        import pyspark

        pytest.fail(f"no spark-sql-kafka-0-10 for PySpark {pyspark.__version__}: make spark-kafka")


def kafka(spark: Any, b: BrokerProcess, **opts: str) -> Any:
    r = spark.read.format("kafka").option("kafka.bootstrap.servers", b.bootstrap)
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load()


def pylog_wire(spark: Any, b: BrokerProcess, **opts: str) -> Any:
    r = spark.read.format("pylog").option("kafka.bootstrap.servers", b.bootstrap)
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load()


def test_batch_read_equals_format_pylog(spark: Any, broker: BrokerProcess) -> None:
    topic = topic_name("sk-read")
    create_topic(broker.bootstrap, topic, 3)
    records = produce(broker, topic, 300, partitions=3, **{"compression.type": "lz4"})
    want = expected(records, topic)
    opts = {"subscribe": topic, "includeHeaders": "true"}
    assert rows_of(kafka(spark, broker, **opts)) == want
    assert rows_of(pylog_wire(spark, broker, **opts)) == want
    # an offset range: per-partition starts (-2 earliest) and ends (-1 latest), exclusive end
    ranged = {
        **opts,
        "startingOffsets": json.dumps({topic: {"0": 10, "1": -2, "2": 95}}),
        "endingOffsets": json.dumps({topic: {"0": 50, "1": 7, "2": -1}}),
    }
    got = rows_of(kafka(spark, broker, **ranged))
    assert got == rows_of(pylog_wire(spark, broker, **ranged))
    bounds = {0: (10, 50), 1: (0, 7), 2: (95, 100)}
    assert got == [r for r in want if bounds[r[2]][0] <= r[6] < bounds[r[2]][1]]
    assert len(got) == 40 + 7 + 5
    # by timestamp: the first offset whose timestamp is >= it (produce() stamps T0 + i)
    by_ts = {**opts, "startingTimestamp": str(T0 + 150), "endingTimestamp": str(T0 + 240)}
    got = rows_of(kafka(spark, broker, **by_ts))
    assert got == rows_of(pylog_wire(spark, broker, **by_ts))
    assert [r[1] for r in got] == [r[1] for r in want if T0 + 150 <= r[3] < T0 + 240]
    # a pattern subscribes the same topic
    pattern = {"subscribePattern": topic.replace("-", "[-]"), "includeHeaders": "true"}
    assert rows_of(kafka(spark, broker, **pattern)) == want


def test_batch_read_starts_at_the_log_start_offset(spark: Any, broker: BrokerProcess) -> None:
    """After DeleteRecords, "earliest" is the new log start offset (ListOffsets
    EARLIEST), and an offset below it is data loss for both readers."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    topic = topic_name("sk-deleted")
    create_topic(broker.bootstrap, topic, 2)
    want = expected(produce(broker, topic, 100, partitions=2), topic)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    done = admin.delete_records([TopicPartition(topic, 0, 20)])
    assert next(iter(done.values())).result(20).low_watermark == 20
    kept = [r for r in want if r[2] == 1 or r[6] >= 20]
    opts = {"subscribe": topic, "includeHeaders": "true"}
    assert rows_of(kafka(spark, broker, **opts)) == kept
    assert rows_of(pylog_wire(spark, broker, **opts)) == kept
    below = {**opts, "startingOffsets": json.dumps({topic: {"0": 5, "1": -2}})}
    for read in (kafka, pylog_wire):
        with pytest.raises(Exception, match=r"(?i)lost|out of range|earliest") as _e:
            read(spark, broker, **below).count()
        print("DATALOSS", read.__name__, str(_e.value)[:400])
    # failOnDataLoss=false: both start at the log start offset instead
    lenient = {**below, "failOnDataLoss": "false"}
    assert rows_of(kafka(spark, broker, **lenient)) == kept
    assert rows_of(pylog_wire(spark, broker, **lenient)) == kept


def test_streaming_read_available_now_equals_format_pylog(
    spark: Any, broker: BrokerProcess, tmp_path: Path
) -> None:
    topic = topic_name("sk-stream")
    create_topic(broker.bootstrap, topic, 2)
    records = produce(broker, topic, 200, partitions=2)
    out = str(tmp_path / "out")

    def run() -> list[int]:
        """One availableNow run into a Parquet file sink; the sizes of its batches."""
        q = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("includeHeaders", "true")
            .option("maxOffsetsPerTrigger", "70")
            .load()
            .writeStream.format("parquet")
            .option("path", out)
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(availableNow=True)
            .start()
        )
        assert q.awaitTermination(120), "availableNow query did not finish"
        assert q.exception() is None
        return [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]

    # availableNow honours maxOffsetsPerTrigger: several batches, none over the limit
    batches = run()
    assert sum(batches) == 200 and max(batches) <= 70, batches
    want = expected(records, topic)
    assert rows_of(spark.read.parquet(out)) == want
    assert rows_of(pylog_wire(spark, broker, subscribe=topic, includeHeaders="true")) == want
    # a new run resumes from the checkpoint: only what came since
    more = produce(broker, topic, 40, start=200, partitions=2)
    assert sum(run()) == 40
    want = expected(records + more, topic)
    assert rows_of(spark.read.parquet(out)) == want
    assert rows_of(pylog_wire(spark, broker, subscribe=topic, includeHeaders="true")) == want


def _written(n: int, topic: str | None = None) -> list[tuple[Any, ...]]:
    rows = []
    for i in range(n):
        key = None if i % 4 == 0 else b"k%d" % i
        row: tuple[Any, ...] = (key, b"v%d" % i, i % 2, [("h", b"x%d" % i), ("n", None)])
        rows.append(row + ((topic,) if topic else ()))
    return rows


def _consume(bootstrap: str, topic: str, partitions: int, n: int) -> list[tuple[Any, ...]]:
    """(key, value, partition, offset, headers) of ``n`` records, read with confluent-kafka."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": topic, "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    got = []
    try:
        for _ in range(300):
            for m in c.consume(1000, 0.1):
                assert m.error() is None, m.error()
                hs = [(k, v) for k, v in (m.headers() or [])]
                got.append((m.key(), m.value(), m.partition(), m.offset(), hs))
            if len(got) >= n:
                break
    finally:
        c.close()
    assert len(got) == n
    return sorted(got, key=lambda r: (r[2], r[3]))


def _check_landed(spark: Any, b: BrokerProcess, topic: str, rows: list[tuple[Any, ...]]) -> None:
    by_client = _consume(b.bootstrap, topic, 2, len(rows))
    # per partition, in the order written (one task per partition: see the writers)
    want = sorted(rows, key=lambda r: (r[2], int(r[1][1:])))
    assert [(k, v, p, h) for k, v, p, _, h in by_client] == [(k, v, p, h) for k, v, p, h in want]
    wait_committed(b, topic, len(rows))
    via_pylog = rows_of(pylog_wire(spark, b, subscribe=topic, includeHeaders="true"))
    assert [(k, v, p, o, h) for k, v, p, _, h, _, o in via_pylog] == by_client
    via_kafka = rows_of(kafka(spark, b, subscribe=topic, includeHeaders="true"))
    assert via_kafka == via_pylog


def _frame(spark: Any, rows: list[tuple[Any, ...]], with_topic: bool) -> Any:
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        StringType,
        StructField,
        StructType,
    )

    header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("partition", IntegerType()),
        StructField("headers", ArrayType(header)),
    ]
    if with_topic:
        fields.append(StructField("topic", StringType()))
    # one partition per Kafka partition keeps each partition's records in written order
    return spark.createDataFrame(rows, StructType(fields)).repartition(2, "partition")


def test_batch_write_lands_records_both_readers_see(spark: Any, broker: BrokerProcess) -> None:
    topic = topic_name("sk-write")
    create_topic(broker.bootstrap, topic, 2)
    rows = _written(120)
    (
        _frame(spark, rows, with_topic=False)
        .write.format("kafka")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", topic)
        .save()
    )
    _check_landed(spark, broker, topic, rows)


def test_streaming_write_copies_a_topic(spark: Any, broker: BrokerProcess, tmp_path: Path) -> None:
    src, dst = topic_name("sk-src"), topic_name("sk-dst")
    create_topic(broker.bootstrap, src, 2)
    create_topic(broker.bootstrap, dst, 2)
    rows = _written(100)
    (
        _frame(spark, rows, with_topic=False)
        .write.format("kafka")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", src)
        .save()
    )
    wait_committed(broker, src, len(rows))
    q = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", src)
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        .load()
        .selectExpr("key", "value", "partition", "headers")
        .writeStream.format("kafka")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", dst)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    assert q.awaitTermination(120), "availableNow query did not finish"
    assert q.exception() is None
    _check_landed(spark, broker, dst, rows)
