"""spark.read.format("pylog") against a real broker process: the rows read from
the segment files (``path``) and over the wire (``kafka.bootstrap.servers``)
equal what confluent-kafka produced, for every codec, offset and timestamp
range, while a producer appends, and bad input fails at planning with a clear
error."""

from __future__ import annotations

import inspect
import json
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from broker_process import BrokerProcess
from spark_support import (
    T0,
    broker,
    create_topic,
    expected,
    log_dir,
    produce,
    rows_of,
    spark,
    topic_name,
    wait_committed,
)

from pylog.spark import arrow_schema, kafka_schema
from pylog.spark._arrow import arrow_type
from pylog.spark.functions import CHECK_TYPE, RECORDS_TYPE

__all__ = ["broker", "spark"]  # fixtures, imported for pytest

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def reader(spark: Any, b: BrokerProcess, via: str, **opts: str) -> Any:
    r = spark.read.format("pylog")
    r = (
        r.option("path", log_dir(b))
        if via == "path"
        else r.option("kafka.bootstrap.servers", b.bootstrap)
    )
    for k, v in opts.items():
        r = r.option(k, v)
    return r


@pytest.mark.parametrize("codec", CODECS)
def test_rows_equal_what_was_produced_for_every_codec(
    spark: Any, broker: BrokerProcess, codec: str
) -> None:
    topic = topic_name(f"codec-{codec}")
    create_topic(broker.bootstrap, topic, 2)
    records = produce(broker, topic, 400, partitions=2, **{"compression.type": codec})
    want = expected(records, topic)
    for via in ("path", "wire"):
        df = reader(spark, broker, via, subscribe=topic, includeHeaders="true").load()
        assert df.schema == kafka_schema(True)
        assert rows_of(df) == want, via
        # without headers: the schema drops the column, the rest is the same
        df = reader(spark, broker, via, subscribe=topic).load()
        assert df.schema == kafka_schema(False)
        assert [r[:4] + r[5:] for r in rows_of(df, headers=False)] == [w[:4] + w[5:] for w in want]


def sparks_arrow(convert: Any, spark_type: Any) -> Any:
    """PySpark's own (internal) conversion, as its workers call it: 4.0-4.2
    take ``timestamp_utc`` (True by default), 4.3 a required ``timezone``."""
    if "timezone" in inspect.signature(convert).parameters:
        return convert(spark_type, timezone="UTC")
    return convert(spark_type)


def test_the_arrow_schema_is_the_one_spark_derives() -> None:
    from pyspark.sql.pandas.types import to_arrow_schema, to_arrow_type

    for h in (False, True):
        # PySpark 4.3 refuses a batch whose schema is not .equals() to it
        assert arrow_schema(h).equals(sparks_arrow(to_arrow_schema, kafka_schema(h)))
    # and the UDFs' result types
    for t in (RECORDS_TYPE, CHECK_TYPE):
        assert arrow_type(t).equals(sparks_arrow(to_arrow_type, t)), t
    names = [f.name for f in kafka_schema(True).fields]
    assert names == [
        "key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers",
    ]  # fmt: skip
    assert all(f.nullable for f in kafka_schema(True).fields)
    assert arrow_schema(True).field("timestamp").type == pa.timestamp("us", tz="UTC")


def test_offset_and_timestamp_ranges_and_splits(spark: Any, broker: BrokerProcess) -> None:
    topic = topic_name("ranges")
    create_topic(broker.bootstrap, topic, 2)
    records = produce(broker, topic, 300, partitions=2, **{"compression.type": "lz4"})
    want = expected(records, topic)
    for via in ("path", "wire"):
        starting = json.dumps({topic: {"0": 10, "1": -2}})
        ending = json.dumps({topic: {"0": 100, "1": -1}})
        df = reader(
            spark, broker, via, subscribe=topic, startingOffsets=starting, endingOffsets=ending,
            includeHeaders="true",
        ).load()  # fmt: skip
        got = rows_of(df)
        assert got == [w for w in want if (w[2] == 0 and 10 <= w[6] < 100) or w[2] == 1], via
        # timestamps: producer timestamps are T0 + i, i = 2 * offset + partition
        df = reader(
            spark, broker, via, assign=json.dumps({topic: [1]}),
            startingTimestamp=str(T0 + 101), endingTimestamp=str(T0 + 201),
            includeHeaders="true",
        ).load()  # fmt: skip
        assert rows_of(df) == [w for w in want if w[2] == 1 and T0 + 101 <= w[3] < T0 + 201]
        # splitting changes the tasks, never the rows
        df = reader(
            spark, broker, via, subscribePattern=f"{topic[:-4]}.*",
            maxRecordsPerPartition="40", includeHeaders="true",
        ).load()  # fmt: skip
        assert df.rdd.getNumPartitions() == 8
        assert rows_of(df) == want
        df = reader(spark, broker, via, subscribe=topic, minPartitions="5").load()
        assert df.rdd.getNumPartitions() >= 5
        assert df.count() == 300


def test_a_schema_of_some_kafka_columns_reads_only_those(
    spark: Any, broker: BrokerProcess, tmp_path: Path
) -> None:
    topic = topic_name("projected")
    create_topic(broker.bootstrap, topic, 2)
    records = produce(broker, topic, 200, partitions=2, **{"compression.type": "lz4"})
    want = expected(records, topic)
    for via in ("path", "wire"):
        # the columns a scan needs, in the order the schema gives them
        df = (
            reader(spark, broker, via, subscribe=topic)
            .schema("offset long, value binary, partition int")
            .load()
        )
        assert df.columns == ["offset", "value", "partition"]
        got = sorted((r.partition, r.offset, bytes(r.value)) for r in df.collect())
        assert got == [(w[2], w[6], w[1]) for w in want], via
        # headers with includeHeaders; names match Kafka's case-insensitively,
        # spelled as the schema spells them
        df = (
            reader(spark, broker, via, subscribe=topic, includeHeaders="true")
            .schema("HEADERS array<struct<key:string,value:binary>>, Key binary, topic string")
            .load()
        )
        assert df.columns == ["HEADERS", "Key", "topic"]
        rows = df.collect()
        assert {r.topic for r in rows} == {topic}
        got_kh = list(
            (
                None if r.Key is None else bytes(r.Key),
                [(h.key, None if h.value is None else bytes(h.value)) for h in r.HEADERS],
            )
            for r in rows
        )
        got_kh.sort(key=repr)
        assert got_kh == sorted(((w[0], w[4]) for w in want), key=repr), via
        # the aggregate the benchmark runs agrees with the full schema's
        q = ["count(*) AS n", "sum(length(value)) AS b"]
        full = reader(spark, broker, via, subscribe=topic).load().selectExpr(*q).collect()
        only = reader(spark, broker, via, subscribe=topic).schema("value binary").load()
        assert only.selectExpr(*q).collect() == full == [(200, sum(len(w[1]) for w in want))]
    # a streaming read takes one too
    seen: list[Any] = []
    stream = (
        spark.readStream.format("pylog").schema("value binary, offset long")
        .option("path", log_dir(broker)).option("assign", json.dumps({topic: [0]}))
        .option("startingOffsets", "earliest").load()
    )  # fmt: skip
    q = (
        stream.writeStream.foreachBatch(lambda b, _: seen.extend(b.collect()))
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        q.awaitTermination(120)
    finally:
        q.stop()
    assert sorted((r.offset, bytes(r.value)) for r in seen) == [
        (w[6], w[1]) for w in want if w[2] == 0
    ]
    # anything but a subset of Kafka's columns with their types is refused
    for schema, why in {
        "value string": "; value string is not one",
        "value binary, nosuch int": "; nosuch int is not one",
        "value binary, VALUE binary": "; VALUE binary is not one",
        "headers array<struct<key:string,value:binary>>": "; headers array<struct<",
        "value binary not null": "; value binary not null is not one",
    }.items():
        msg = _error(
            lambda schema=schema: (
                reader(spark, broker, "path", subscribe=topic).schema(schema).load().count()
            )
        )
        assert "may only name columns of Spark's Kafka schema" in msg and why in msg, schema


def test_reading_while_a_producer_appends(spark: Any, broker: BrokerProcess) -> None:
    topic = topic_name("live")
    produce(broker, topic, 1)
    stop = threading.Event()
    produced = [1]

    def keep_producing() -> None:
        from confluent_kafka import Producer

        p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 1})
        i = 1
        while not stop.is_set():
            p.produce(topic, value=b"value-%d" % i)
            i += 1
            if i % 50 == 0:
                p.flush(10)
                produced[0] = i
                time.sleep(0.01)  # steady appends, leaving the 2 cores to Spark too
        p.flush(10)
        produced[0] = i

    t = threading.Thread(target=keep_producing)
    t.start()
    try:
        counts = []
        for _ in range(3):
            df = reader(spark, broker, "path", subscribe=topic).load()
            r = df.selectExpr(
                "count(*) AS n",
                "count(DISTINCT offset) AS distinct_offsets",
                "min(offset) AS lo",
                "max(offset) AS hi",
                "sum(CASE WHEN offset = 0 OR CAST(value AS STRING) = concat('value-', offset)"
                " THEN 0 ELSE 1 END) AS bad_values",
            ).collect()[0]
            # always a gap-free prefix of the log, every value intact
            assert (r.lo, r.hi, r.distinct_offsets, r.bad_values) == (0, r.n - 1, r.n, 0)
            counts.append(r.n)
            time.sleep(0.3)
    finally:
        stop.set()
        t.join(30)
    assert counts == sorted(counts) and counts[-1] > counts[0]
    wait_committed(broker, topic, produced[0])
    final = reader(spark, broker, "path", subscribe=topic).load().count()
    assert final == produced[0]


def _error(fn: Any) -> str:
    with pytest.raises(Exception) as info:
        fn()
    return str(info.value)


def test_bad_input_fails_at_planning_with_a_clear_error(
    spark: Any, broker: BrokerProcess, tmp_path: Path
) -> None:
    topic = topic_name("bad")
    produce(broker, topic, 20)
    produce(broker, topic, 20, start=20)  # a second batch
    for via in ("path", "wire"):
        msg = _error(
            lambda via=via: reader(spark, broker, via, subscribe="no-such-topic").load().count()
        )
        assert "unknown topic(s) ['no-such-topic']" in msg
        msg = _error(lambda via=via: reader(
            spark, broker, via, subscribe=topic, startingOffsets=json.dumps({topic: {"0": 50}})
        ).load().count())  # fmt: skip
        assert "out of range" in msg and "failOnDataLoss" in msg
        df = reader(
            spark, broker, via, subscribe=topic, failOnDataLoss="false",
            startingOffsets=json.dumps({topic: {"0": 50}}),
        ).load()  # fmt: skip
        assert df.count() == 0
    cases = {
        "only one of the options subscribe, subscribePattern, assign": {
            "subscribe": topic, "assign": json.dumps({topic: [0]}),
        },
        "one of the options subscribe, subscribePattern, assign must be specified": {},
        "ending offset can't be earliest": {"subscribe": topic, "endingOffsets": "earliest"},
        "starting offset can't be latest": {"subscribe": topic, "startingOffsets": "latest"},
        "'groupIdPrefix' need 'kafka.bootstrap.servers'": {
            "subscribe": topic, "kafka.group.id": "g",
        },
        "'kafka.auto.offset.reset' is not supported": {
            "subscribe": topic, "kafka.auto.offset.reset": "earliest",
        },
        "'minpartitions' must be a positive integer": {"subscribe": topic, "minPartitions": "0"},
        "'startingOffsets' is not valid JSON": {"subscribe": topic, "startingOffsets": "{x"},
    }  # fmt: skip
    for want, opts in cases.items():
        msg = _error(lambda opts=opts: reader(spark, broker, "path", **opts).load().count())
        assert want in msg, want
    msg = _error(lambda: spark.read.format("pylog").option("subscribe", topic).load().count())
    assert "one of 'path'" in msg and "'kafka.bootstrap.servers' must be given" in msg
    missing = tmp_path / "nowhere"
    msg = _error(lambda: spark.read.format("pylog").option("path", str(missing))
                 .option("subscribe", topic).load().count())  # fmt: skip
    assert f"log directory {str(missing)!r} does not exist" in msg
    # a corrupt batch in the middle of a segment: the error names file and position
    copy = tmp_path / "copy"
    shutil.copytree(log_dir(broker) + f"/{topic}-0", copy / f"{topic}-0")
    seg = next((copy / f"{topic}-0").glob("*.log"))
    data = bytearray(seg.read_bytes())
    first = 12 + int.from_bytes(data[8:12], "big")
    data[first + 70] ^= 0xFF
    seg.write_bytes(bytes(data))
    df = spark.read.format("pylog").option("path", str(copy)).option("subscribe", topic).load()
    msg = _error(df.count)
    assert f"{seg}: corrupt record at position {first}: CRC32C mismatch" in msg
