"""Shared by the tests/spark/test_spark_*.py modules: one local[2] SparkSession for the
whole run (started once, reused through getOrCreate), a real broker process,
and records produced through confluent-kafka with known timestamps.

Spark must start: a missing Java or pyspark fails these tests, it never skips them.
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from broker_process import BrokerProcess

# recent, so that retention (7 days by default) keeps the records
T0 = (int(time.time()) // 3600 - 1) * 3600 * 1000


def kafka_connector_jars() -> list[str]:
    """Spark's own Kafka connector for the running PySpark, as `make spark-kafka`
    (tests/spark/kafka/fetch.py) cached it; empty when it has not been fetched."""
    import pyspark

    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pylog"
    d = cache / "spark-kafka" / f"pyspark-{pyspark.__version__}"
    if not (d / ".complete").exists():
        return []
    return sorted(str(j) for j in d.glob("*.jar"))


def spark_session() -> Any:
    # executors' Python workers must load the same pylog._native as this interpreter
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import pylog.spark

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("pylog-tests")
        # format("kafka") beside format("pylog"): test_spark_kafka_connector.py
        .config("spark.jars", ",".join(kafka_connector_jars()))
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    pylog.spark.register(spark)
    return spark


@pytest.fixture(scope="session")
def spark() -> Any:
    return spark_session()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    # `path` reads stop at the checkpointed high watermark: checkpoint often
    data = tmp_path_factory.mktemp("spark-broker") / "data"
    b = BrokerProcess(data, {"replica.high.watermark.checkpoint.interval.ms": 50}).start()
    try:
        yield b
    finally:
        if b.proc is not None:
            b.stop()


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    fut = admin.create_topics([NewTopic(topic, partitions, 1)])[topic]
    fut.result(20)


def wait_committed(b: BrokerProcess, topic: str, count: int, timeout: float = 20) -> None:
    """Wait until the broker's ``replication-offset-checkpoint`` (the committed
    end that `path` reads stop at) covers ``count`` records of ``topic``."""
    from pylog.log.checkpoint import REPLICATION_OFFSET_CHECKPOINT, OffsetCheckpointFile

    checkpoint = OffsetCheckpointFile(str(Path(b.data) / REPLICATION_OFFSET_CHECKPOINT))
    deadline = time.monotonic() + timeout
    covered = 0
    while time.monotonic() < deadline:
        if os.path.exists(checkpoint.path):
            covered = sum(hw for tp, hw in checkpoint.read().items() if tp.topic == topic)
            if covered >= count:
                return
        time.sleep(0.02)
    raise AssertionError(f"high watermark checkpoint covers {covered} of {count} in {topic}")


def produce(
    b: BrokerProcess, topic: str, n: int, *, start: int = 0, partitions: int = 1, **conf: Any
) -> list[tuple[Any, ...]]:
    """Produce records ``start..start+n`` (keys every 3rd null, headers with a null
    value, timestamp T0 + i) and return the rows Spark must read back, per
    partition in offset order: (key, value, partition, timestamp ms, headers).
    Returns once the broker has checkpointed them as committed."""
    from confluent_kafka import Producer

    bootstrap = b.bootstrap

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf})
    errors: list[Any] = []
    out = []
    for i in range(start, start + n):
        key = None if i % 3 == 0 else b"key-%d" % i
        value = b"value-%d-" % i + b"x" * (i % 50)
        headers = [("h1", b"v%d" % i), ("h2", None)]
        part = i % partitions
        p.produce(
            topic,
            value=value,
            key=key,
            headers=headers,
            partition=part,
            timestamp=T0 + i,
            on_delivery=lambda err, msg: errors.append(err) if err else None,
        )
        out.append((key, value, part, T0 + i, headers))
    assert p.flush(30) == 0
    assert errors == []
    wait_committed(b, topic, start + n)
    return out


def rows_of(df: Any, headers: bool = True) -> list[tuple[Any, ...]]:
    """The rows of a pylog DataFrame as (key, value, partition, timestamp ms,
    headers), ordered by (partition, offset), with topic/offset/type checked too."""
    cols = ["key", "value", "topic", "partition", "offset", "unix_millis(timestamp) AS ts"]
    cols.append("timestampType")
    if headers:
        cols.append("headers")
    got = df.selectExpr(*cols).collect()
    got.sort(key=lambda r: (r.partition, r.offset))
    out = []
    for r in got:
        assert r.timestampType == 0
        hs = (
            [(h.key, None if h.value is None else bytes(h.value)) for h in r.headers]
            if headers
            else None
        )
        key = None if r.key is None else bytes(r.key)
        out.append((key, bytes(r.value), r.partition, r.ts, hs, r.topic, r.offset))
    return out


def expected(records: list[tuple[Any, ...]], topic: str) -> list[tuple[Any, ...]]:
    """``produce``'s records in (partition, offset) order with their offsets."""
    by_part: dict[int, list[tuple[Any, ...]]] = {}
    for r in records:
        by_part.setdefault(r[2], []).append(r)
    out = []
    for part in sorted(by_part):
        for off, (k, v, p, ts, hs) in enumerate(by_part[part]):
            out.append((k, v, p, ts, hs, topic, off))
    return out


def log_dir(b: BrokerProcess) -> str:
    return str(Path(b.data))
