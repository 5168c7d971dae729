"""spark.read.format("pylog-jvm") (java/pylog-spark: the JVM DataSource V2 reader of
segment files) against a real broker process's log directory: its rows equal
format("pylog")'s (the PySpark data source on pylog's native reader) and what
confluent-kafka produced, for every codec, several partitions, column subsets,
offset ranges and splits, control and LogAppendTime batches; a corrupt batch, a
legacy message
and the options it does not implement fail with errors that name them. With
``kafka.isolation.level=read_committed`` (the broker's last stable offset, the
files' ``.txnindex``) it reads what confluent-kafka's read_committed consumer
reads of a transactional producer's committed, aborted and open transactions,
also on a SASL_SSL / SASL_PLAINTEXT broker.

Skipped, with the reason, only when the jar is not built (``make spark-jvm``)."""

from __future__ import annotations

import json
import os
import shutil
import zlib
from pathlib import Path
from typing import Any

import pytest
from broker_process import BrokerProcess
from conftest import build_batch
from security_support import PLAIN_MODULE, PLAIN_USERS, SCRAM_MODULE, listener_ports
from spark_support import (
    broker,
    create_topic,
    expected,
    kafka_connector_jars,
    log_dir,
    produce,
    rows_of,
    spark,
    topic_name,
    wait_committed,
)
from test_spark_read_committed import (
    SCRAM_PASSWORD,
    SCRAM_USER,
    _consumer_read,
    _produce_mixed,
    _rows,
    secured,
)

import pylog.spark
from pylog import _native
from pylog.spark import JVM_FORMAT, kafka_schema

__all__ = ["broker", "secured", "spark"]  # fixtures, imported for pytest

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


@pytest.fixture(scope="module")
def jvm(spark: Any) -> Any:
    """The shared session with the reader's jar added (the session may have
    started without it: ADD JAR puts it on the driver's and executors' classpath)."""
    jar = pylog.spark.jvm_jar()
    if jar is None:
        pytest.skip(
            "the format('pylog-jvm') jar is not built: run `make spark-jvm` "
            "(or set PYLOG_SPARK_JAR to its path)"
        )
    spark.sql(f"ADD JAR '{jar}'")
    return spark


def read(spark: Any, fmt: str, b: BrokerProcess | str, **opts: str) -> Any:
    r = spark.read.format(fmt).option("path", b if isinstance(b, str) else log_dir(b))
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load()


def both(spark: Any, b: BrokerProcess, **opts: str) -> tuple[Any, Any]:
    """The same read through format('pylog-jvm') and format('pylog')."""
    return read(spark, JVM_FORMAT, b, **opts), read(spark, "pylog", b, **opts)


def sorted_rows(df: Any, cols: list[str]) -> list[tuple[Any, ...]]:
    """Rows of ``cols`` as plain tuples (bytes for binary, headers as tuples), sorted."""

    def plain(v: Any) -> Any:
        if isinstance(v, bytearray):
            return bytes(v)
        if isinstance(v, list):
            return tuple(plain(h) for h in v)
        if hasattr(v, "asDict"):
            return tuple(plain(x) for x in v)
        return v

    out = [tuple(plain(v) for v in r) for r in df.selectExpr(*cols).collect()]
    return sorted(out, key=repr)


def columnar_scan(df: Any) -> str:
    """The executed plan: the scan must hand Spark column batches, not rows."""
    plan = str(df._jdf.queryExecution().executedPlan().toString())
    assert "ColumnarToRow" in plan and "BatchScan" in plan, plan
    return plan


@pytest.mark.parametrize("codec", CODECS)
def test_rows_equal_format_pylog_for_every_codec(
    jvm: Any, broker: BrokerProcess, codec: str
) -> None:
    topic = topic_name(f"jvm-{codec}")
    create_topic(broker.bootstrap, topic, 3)
    records = produce(broker, topic, 900, partitions=3, **{"compression.type": codec})
    want = expected(records, topic)
    j, p = both(jvm, broker, subscribe=topic, includeHeaders="true")
    assert j.schema == kafka_schema(True) == p.schema
    columnar_scan(j.select("value"))
    got = rows_of(j)
    assert got == want
    assert got == rows_of(p)
    # without headers the schema drops the column; the rest is the same
    j, p = both(jvm, broker, subscribe=topic)
    assert j.schema == kafka_schema(False)
    assert rows_of(j, headers=False) == rows_of(p, headers=False)
    assert j.count() == 900


def test_requested_columns_only(jvm: Any, broker: BrokerProcess) -> None:
    topic = topic_name("jvm-columns")
    create_topic(broker.bootstrap, topic, 2)
    produce(broker, topic, 500, partitions=2, **{"compression.type": "lz4"})
    j, p = both(jvm, broker, subscribe=topic, includeHeaders="true")
    subsets = [
        ["value"],
        ["offset", "partition"],
        ["key", "unix_micros(timestamp) AS ts", "timestampType"],
        ["headers", "topic"],
        ["topic", "partition", "offset"],
        ["value", "key", "headers", "offset"],
    ]
    for cols in subsets:
        plan = columnar_scan(j.selectExpr(*cols))
        assert sorted_rows(j, cols) == sorted_rows(p, cols), cols
        # only the columns asked for are read
        names = {c.split()[0].split("(")[-1].rstrip(")") for c in cols}
        fields = [f for f in kafka_schema(True).fields if f.name in names]
        read_schema = "struct<" + ",".join(f"{f.name}:{f.dataType.simpleString()}" for f in fields)
        assert f" columns {read_schema}> " in plan, (cols, plan)
    assert j.count() == p.count() == 500
    assert (
        j.selectExpr("sum(length(value))").first()[0]
        == (p.selectExpr("sum(length(value))").first()[0])
    )
    # a column used in a filter is read too
    assert sorted_rows(j.where("offset % 7 = 3"), ["value"]) == sorted_rows(
        p.where("offset % 7 = 3"), ["value"]
    )


def test_offset_ranges_selections_and_splits(jvm: Any, broker: BrokerProcess) -> None:
    topic = topic_name("jvm-ranges")
    create_topic(broker.bootstrap, topic, 3)
    # several produce rounds: many batches per partition
    records = []
    for i in range(4):
        records += produce(
            broker, topic, 150, start=150 * i, partitions=3, **{"compression.type": "zstd"}
        )
    want = expected(records, topic)
    starting = json.dumps({topic: {"0": 10, "1": -2, "2": 199}})
    ending = json.dumps({topic: {"0": 100, "1": -1, "2": 200}})
    opts = {"subscribe": topic, "startingOffsets": starting, "endingOffsets": ending}
    j, p = both(jvm, broker, includeHeaders="true", **opts)
    got = rows_of(j)
    assert got == rows_of(p)
    assert got == [
        w
        for w in want
        if (w[2] == 0 and 10 <= w[6] < 100) or w[2] == 1 or (w[2] == 2 and w[6] == 199)
    ]
    # one partition by assign, the offsets of a pattern
    j, p = both(jvm, broker, assign=json.dumps({topic: [1]}), startingOffsets=starting)
    assert rows_of(j, headers=False) == rows_of(p, headers=False)
    assert {r[2] for r in rows_of(j, headers=False)} == {1}
    j, p = both(jvm, broker, subscribePattern=f"{topic[:-4]}.*", includeHeaders="true")
    assert rows_of(j) == rows_of(p) == want
    # splitting changes the tasks, never the rows
    for split in ({"maxRecordsPerPartition": "37"}, {"minPartitions": "7"}):
        j, p = both(jvm, broker, subscribe=topic, includeHeaders="true", **split)
        assert j.rdd.getNumPartitions() == p.rdd.getNumPartitions() > 3, split
        assert rows_of(j) == want, split
        # and ranges that start or end inside a batch
        j, p = both(jvm, broker, **opts, **split)
        assert rows_of(j, headers=False) == rows_of(p, headers=False), split


def _patched(batch: bytes, set_attributes: int) -> bytes:
    """A v2 batch with attribute bits added and its CRC-32C recomputed."""
    b = bytearray(batch)
    attrs = int.from_bytes(b[21:23], "big") | set_attributes
    b[21:23] = attrs.to_bytes(2, "big")
    b[17:21] = _native.crc32c(bytes(b[21:])).to_bytes(4, "big")
    return bytes(b)


def _legacy_v1(offset: int, key: bytes, value: bytes, timestamp: int) -> bytes:
    """One uncompressed magic 1 message (Kafka's LegacyRecord), as old clients wrote them."""
    body = bytes([1, 0]) + timestamp.to_bytes(8, "big")
    body += len(key).to_bytes(4, "big") + key + len(value).to_bytes(4, "big") + value
    msg = zlib.crc32(body).to_bytes(4, "big") + body
    return offset.to_bytes(8, "big") + len(msg).to_bytes(4, "big") + msg


def test_control_log_append_time_and_legacy_batches(jvm: Any, tmp_path: Path) -> None:
    """A segment written by hand: a transactional batch, its commit marker (a
    control batch), a LogAppendTime batch, a gzip batch. Both formats skip the
    marker and stamp LogAppendTime records with the batch's max timestamp;
    format('pylog-jvm') refuses a magic 1 message in its range and names it."""
    part = tmp_path / "logs" / "hand-0"
    part.mkdir(parents=True)
    t0 = 1_700_000_000_000
    batches = [
        build_batch([(b"k0", b"v0"), (b"k1", b"v1"), (None, b"v2")], base_offset=0,
                    timestamp=[t0, t0 + 1, t0 + 2], producer_id=7, producer_epoch=0,
                    base_sequence=0, is_transactional=True),
        # the commit marker: key version 0, type 1; value version 0, coordinator epoch 0
        _patched(build_batch([(b"\0\0\0\1", b"\0\0\0\0\0\0")], base_offset=3,
                             timestamp=t0 + 3, producer_id=7, producer_epoch=0,
                             is_transactional=True), 0x20),
        _patched(build_batch([b"la0", b"la1"], base_offset=4, timestamp=[t0 + 10, t0 + 20]), 0x08),
        build_batch([(b"g%d" % i, b"gz" * i) for i in range(50)], base_offset=6,
                    timestamp=t0 + 30, compression=1),
    ]  # fmt: skip
    (part / "00000000000000000000.log").write_bytes(b"".join(batches))
    logs = str(tmp_path / "logs")
    cols = ["key", "value", "offset", "unix_millis(timestamp) AS ts", "timestampType"]
    j = read(jvm, JVM_FORMAT, logs, subscribe="hand")
    got = sorted_rows(j, cols)
    assert got == sorted_rows(read(jvm, "pylog", logs, subscribe="hand"), cols)
    want = [(b"k0", b"v0", 0, t0, 0), (b"k1", b"v1", 1, t0 + 1, 0), (None, b"v2", 2, t0 + 2, 0)]
    want += [(None, b"la0", 4, t0 + 20, 1), (None, b"la1", 5, t0 + 20, 1)]
    want += [(b"g%d" % i, b"gz" * i, 6 + i, t0 + 30, 0) for i in range(50)]
    assert got == sorted(want, key=repr)
    # a magic 1 message before the range is skipped; in it, refused by name
    legacy = part.parent.parent / "legacy" / "old-0"
    legacy.mkdir(parents=True)
    (legacy / "00000000000000000000.log").write_bytes(
        _legacy_v1(0, b"old", b"message", t0) + build_batch([b"new"], base_offset=1, timestamp=t0)
    )
    logs = str(legacy.parent)
    after = read(jvm, JVM_FORMAT, logs, subscribe="old", startingOffsets='{"old":{"0":1}}')
    assert sorted_rows(after, ["value", "offset"]) == [(b"new", 1)]
    msg = _error(read(jvm, JVM_FORMAT, logs, subscribe="old").count)
    assert "a magic v1 message set at position 0" in msg and "format('pylog')" in msg
    assert read(jvm, "pylog", logs, subscribe="old").count() == 2


def _error(fn: Any) -> str:
    with pytest.raises(Exception) as info:
        fn()
    return str(info.value)


def test_refusals_and_bad_input_are_named(jvm: Any, broker: BrokerProcess, tmp_path: Path) -> None:
    topic = topic_name("jvm-bad")
    produce(broker, topic, 20)
    produce(broker, topic, 20, start=20)  # a second batch
    cases = {
        "'startingTimestamp' is not supported by format('pylog-jvm')": {
            "subscribe": topic, "startingTimestamp": "1000",
        },
        "'minOffsetsPerTrigger' is not supported by format('pylog-jvm')": {
            "subscribe": topic, "minOffsetsPerTrigger": "10",
        },
        "'endingOffsetsByTimestamp' is not supported by format('pylog-jvm')": {
            "subscribe": topic, "endingOffsetsByTimestamp": json.dumps({topic: {"0": 1}}),
        },
        "only one of the options subscribe, subscribePattern, assign": {
            "subscribe": topic, "assign": json.dumps({topic: [0]}),
        },
        "one of the options subscribe, subscribePattern, assign must be specified": {},
        "ending offset can't be earliest": {"subscribe": topic, "endingOffsets": "earliest"},
        "starting offset can't be latest": {"subscribe": topic, "startingOffsets": "latest"},
        "'kafka.group.id' is not supported": {"subscribe": topic, "kafka.group.id": "g"},
        "read_committed needs 'kafka.bootstrap.servers'": {
            "subscribe": topic, "kafka.isolation.level": "read_committed",
        },
        "'kafka.isolation.level' must be read_uncommitted or read_committed": {
            "subscribe": topic, "kafka.isolation.level": "serializable",
        },
        "'upToLogEnd' reads the files past the high watermark": {
            "subscribe": topic, "kafka.bootstrap.servers": broker.bootstrap, "upToLogEnd": "true",
        },
        "'minpartitions' must be a positive integer": {"subscribe": topic, "minPartitions": "0"},
        "'startingOffsets' is not valid JSON": {"subscribe": topic, "startingOffsets": "{x"},
        "unknown topic(s) [no-such-topic]": {"subscribe": "no-such-topic"},
        "assigned partition": {"assign": json.dumps({topic: [5]})},
        "out of range": {"subscribe": topic, "startingOffsets": json.dumps({topic: {"0": 50}})},
    }  # fmt: skip
    for want, opts in cases.items():
        msg = _error(lambda opts=opts: read(jvm, JVM_FORMAT, broker, **opts).count())
        assert want in msg, (want, msg[:2000])
    msg = _error(lambda: jvm.read.format(JVM_FORMAT).option("subscribe", topic).load())
    assert "option 'path'" in msg
    # no user schema (the scan is told the columns): Spark says so
    msg = _error(
        lambda: jvm.read.format(JVM_FORMAT).schema("value binary")
        .option("path", log_dir(broker)).option("subscribe", topic).load()
    )  # fmt: skip
    assert "schema" in msg.lower()
    msg = _error(
        lambda: jvm.readStream.format(JVM_FORMAT)
        .option("path", log_dir(broker)).option("subscribe", topic)
        .option("endingOffsets", "latest").load()
        .writeStream.format("noop").start().processAllAvailable()
    )  # fmt: skip
    assert "ending offset not valid in streaming queries" in msg, msg[:2000]
    clamped = read(
        jvm, JVM_FORMAT, broker, subscribe=topic, failOnDataLoss="false",
        startingOffsets=json.dumps({topic: {"0": 50}}),
    )  # fmt: skip
    assert clamped.count() == 0
    missing = tmp_path / "nowhere"
    msg = _error(lambda: read(jvm, JVM_FORMAT, str(missing), subscribe=topic).count())
    assert f"log directory '{missing}' does not exist" in msg
    # a corrupt batch in the middle of a segment: the error names file and position
    copy = tmp_path / "copy"
    shutil.copytree(log_dir(broker) + f"/{topic}-0", copy / f"{topic}-0")
    seg = next((copy / f"{topic}-0").glob("*.log"))
    data = bytearray(seg.read_bytes())
    first = 12 + int.from_bytes(data[8:12], "big")
    data[first + 70] ^= 0xFF
    seg.write_bytes(bytes(data))
    assert read(jvm, JVM_FORMAT, str(copy), subscribe=topic, endingOffsets=json.dumps(
        {topic: {"0": 20}})).count() == 20  # fmt: skip
    msg = _error(read(jvm, JVM_FORMAT, str(copy), subscribe=topic).count)
    assert f"corrupt record batch at position {first} of {seg}" in msg and "CRC-32C" in msg


# ------------------------------------------------------------ read_committed


def test_read_committed_equals_a_kafka_consumer(jvm: Any, broker: BrokerProcess) -> None:
    """Committed and aborted transactions (another producer's records inside
    them) over several 1 MiB segments of two partitions, one transaction left
    open: format('pylog-jvm') reads what confluent-kafka reads under
    read_committed, stopping at the last stable offset, then past it once the
    transaction commits; read_uncommitted reads everything, as before."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = topic_name("jvm-txn")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    config = {"segment.bytes": str(1 << 20)}
    admin.create_topics([NewTopic(topic, 2, 1, config=config)])[topic].result(20)
    txn, committed, uncommitted = _produce_mixed(broker.bootstrap, topic)
    want = _consumer_read(broker.bootstrap, topic, "read_committed", len(committed))
    assert {v for _, _, v in want} == committed
    every = _consumer_read(
        broker.bootstrap, topic, "read_uncommitted", len(committed | uncommitted)
    )
    assert {v for _, _, v in every} == committed | uncommitted
    part = Path(log_dir(broker)) / f"{topic}-0"
    assert len(list(part.glob("*.log"))) >= 2 and list(part.glob("*.txnindex"))

    wire = {"kafka.bootstrap.servers": broker.bootstrap}
    rc = {**wire, "kafka.isolation.level": "read_committed"}
    got = _rows(read(jvm, JVM_FORMAT, broker, subscribe=topic, **rc))
    assert got == want
    assert not {v for _, _, v in got} & uncommitted  # no aborted, open or later record
    # it stops at each partition's last stable offset: the open transaction's first record
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "lso-probe",
                  "isolation.level": "read_committed"})  # fmt: skip
    for p in (0, 1):
        _, lso = c.get_watermark_offsets(TopicPartition(topic, p), timeout=20)
        first_open = min(o for pp, o, v in every if pp == p and v.startswith(b"open-"))
        assert lso == first_open
        assert max(o for pp, o, _ in got if pp == p) < lso
    c.close()
    # the same rows as format('pylog'), split into many tasks, and one column
    assert got == _rows(read(jvm, "pylog", broker, subscribe=topic, **rc))
    df = read(jvm, JVM_FORMAT, broker, subscribe=topic, minPartitions="9", **rc)
    assert df.rdd.getNumPartitions() >= 9 and _rows(df) == want
    columnar_scan(df.select("value"))
    values = sorted(bytes(r.value) for r in df.select("value").collect())
    assert values == sorted(v for _, _, v in want)
    # a range starting inside an aborted transaction still leaves it out
    first_aborted = min(o for pp, o, v in every if pp == 0 and v.startswith(b"txn-0-"))
    start = json.dumps({topic: {"0": first_aborted + 3, "1": -2}})
    tail = _rows(read(jvm, JVM_FORMAT, broker, subscribe=topic, startingOffsets=start, **rc))
    assert tail == [w for w in want if w[0] == 1 or w[1] >= first_aborted + 3]
    # read_uncommitted, pinned by the broker's high watermark: every record
    assert _rows(read(jvm, JVM_FORMAT, broker, subscribe=topic, **wire)) == every

    txn.commit_transaction(30)
    now = len(every) - sum(1 for v in uncommitted if v.startswith(b"txn-"))
    after = _consumer_read(broker.bootstrap, topic, "read_committed", now)
    assert len(after) == now
    assert _rows(read(jvm, JVM_FORMAT, broker, subscribe=topic, **rc)) == after


def test_read_committed_on_a_secured_broker(jvm: Any, secured: tuple[BrokerProcess, Any]) -> None:
    """The kafka.* security options reach the driver's ListOffsets (Kafka's
    admin client, relocated in the jar); a wrong password fails naming SASL."""
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
        "SSL with a client certificate": {
            "kafka.bootstrap.servers": f"127.0.0.1:{ports['SSL']}",
            "kafka.security.protocol": "SSL",
            "kafka.ssl.truststore.location": str(certs.ca),
            "kafka.ssl.truststore.type": "PEM",
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
        df = read(jvm, JVM_FORMAT, b, subscribe="secured", **opts,
                  **{"kafka.isolation.level": "read_committed"})  # fmt: skip
        assert sorted(bytes(r.value) for r in df.collect()) == want, name
    # Spark's own Kafka connector beside it: its (unrelocated) kafka-clients on the
    # classpath, its SCRAM login module loaded first, so its SASL providers hold the
    # names; the relocated client still logs in
    unrelocated = _connector_kafka_clients(jvm)
    if unrelocated is not None:
        loader = jvm._jvm.org.apache.spark.util.Utils.getContextOrSparkClassLoader()
        module = jvm._jvm.java.lang.Class.forName(SCRAM_MODULE, True, loader)
        assert module.getProtectionDomain().getCodeSource().getLocation().getPath() == unrelocated
        names = [p.getName() for p in jvm._jvm.java.security.Security.getProviders()]
        assert "SASL/SCRAM Client Provider" in names
        opts = {**setups["SASL_SSL/SCRAM-SHA-512"], "kafka.isolation.level": "read_committed"}
        df = read(jvm, JVM_FORMAT, b, subscribe="secured", **opts)
        assert sorted(bytes(r.value) for r in df.collect()) == want
    bad = dict(setups["SASL_SSL/SCRAM-SHA-512"])
    bad["kafka.sasl.jaas.config"] = scram.replace(SCRAM_PASSWORD, "not-it")
    msg = _error(read(jvm, JVM_FORMAT, b, subscribe="secured", **bad).count)
    assert "SaslAuthenticationException" in msg and "not-it" not in msg, msg[:2000]


def _connector_kafka_clients(spark: Any) -> str | None:
    """The path of the kafka-clients jar Spark's Kafka connector brings, on the
    session's classpath: the session's own (``make spark-kafka``'s, for this
    PySpark), else one cached for another PySpark, added; None if none is cached."""
    jars = [j for j in kafka_connector_jars() if "kafka-clients-" in j]
    if not jars:
        cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pylog"
        fetched = (
            d for d in (cache / "spark-kafka").glob("pyspark-*") if (d / ".complete").exists()
        )
        jars = sorted(str(j) for d in fetched for j in d.glob("kafka-clients-*.jar"))
        if not jars:
            return None
        spark.sql(f"ADD JAR '{jars[-1]}'")
    return jars[-1]


# ---------------------------------------------------------------- streaming


def test_streaming_from_files_resumes_and_limits_batches(
    jvm: Any, broker: BrokerProcess, tmp_path: Path
) -> None:
    """readStream.format('pylog-jvm') from the files alone: micro-batches of at
    most maxOffsetsPerTrigger, Trigger.AvailableNow, a restart from the
    checkpoint reading only what came since; the rows are format('pylog')'s."""
    topic = topic_name("jvm-stream")
    create_topic(broker.bootstrap, topic, 2)
    records = produce(broker, topic, 300, partitions=2, **{"compression.type": "lz4"})
    wait_committed(broker, topic, 300)

    def run() -> Any:
        q = (
            jvm.readStream.format(JVM_FORMAT).option("path", log_dir(broker))
            .option("subscribe", topic).option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "70").option("includeHeaders", "true").load()
            .writeStream.format("parquet").option("path", str(tmp_path / "out"))
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(availableNow=True).start()
        )  # fmt: skip
        assert q.awaitTermination(300)
        return q

    q = run()
    sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    assert sum(sizes) == 300 and max(sizes) <= 70 and len(sizes) >= 5, sizes
    records += produce(broker, topic, 100, start=300, partitions=2)
    wait_committed(broker, topic, 400)
    q = run()
    assert sum(p["numInputRows"] for p in q.recentProgress) == 100
    out = jvm.read.parquet(str(tmp_path / "out"))
    assert rows_of(out) == expected(records, topic)
    assert rows_of(out) == rows_of(
        read(jvm, "pylog", broker, subscribe=topic, includeHeaders="true")
    )


def test_streaming_read_committed_waits_at_the_lso(
    jvm: Any, broker: BrokerProcess, tmp_path: Path
) -> None:
    """Each micro-batch ends at the last stable offset: while a transaction is
    open the query reads what confluent-kafka's read_committed consumer reads,
    no aborted record ever; once it commits, the rest."""
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = topic_name("jvm-stream-txn")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    config = {"segment.bytes": str(1 << 20)}
    admin.create_topics([NewTopic(topic, 2, 1, config=config)])[topic].result(20)
    txn, committed, uncommitted = _produce_mixed(broker.bootstrap, topic)
    want = _consumer_read(broker.bootstrap, topic, "read_committed", len(committed))
    q = (
        jvm.readStream.format(JVM_FORMAT).option("path", log_dir(broker))
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("kafka.isolation.level", "read_committed")
        .option("subscribe", topic).option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "60").load()
        .writeStream.format("memory").queryName("jvm_stream_txn")
        .option("checkpointLocation", str(tmp_path / "ckpt")).start()
    )  # fmt: skip
    try:
        q.processAllAvailable()
        got = _rows(jvm.table("jvm_stream_txn"))
        assert got == want
        assert not {v for _, _, v in got} & uncommitted
        sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
        assert max(sizes) <= 60 and len(sizes) >= 2, sizes
        txn.commit_transaction(30)
        now = len(committed | uncommitted) - sum(1 for v in uncommitted if v.startswith(b"txn-"))
        after = _consumer_read(broker.bootstrap, topic, "read_committed", now)
        assert len(after) == now
        q.processAllAvailable()
        assert _rows(jvm.table("jvm_stream_txn")) == after
    finally:
        q.stop()
