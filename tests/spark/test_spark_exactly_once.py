"""Exactly-once writes of ``format("pylog")`` (python/pylog/spark/sink.py), on
a three-broker pylog cluster (real ZooKeeper) and a Spark standalone cluster
(tests/spark_cluster.py): every input record once in the output topic read
with read_committed, after

- a second attempt of a task whose first attempt committed (in sequence, and
  two attempts at once, as speculation runs them) - the task function itself;
- an executor SIGKILLed in the middle of a task's transaction, and a task
  failing after its transaction committed (Spark retries both) - a batch job;
- the driver SIGKILLed in the middle of a micro-batch and restarted from its
  checkpoint, then the transaction coordinator's broker SIGKILLed in the middle
  of a later micro-batch's transaction - a streaming query.

Each scenario also reads the topic with read_uncommitted, to show that the
failure did hit an open transaction (its aborted records are there) or a
committed one (its records are there once).
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from spark_cluster import SparkStandalone, kill_driver, spark_cluster

from pylog.testing.cluster import LocalCluster

__all__ = ["spark_cluster"]  # a fixture, imported for pytest

DRIVER = Path(__file__).with_name("eos_driver.py")
WAIT = 600.0  # an upper bound only, to catch a hang: Spark on a loaded 2-core machine is slow
# rows reach the writer a few at a time while a held task waits: Arrow batches
# of 5 rows, and Python workers' and the JVM's streams (spark.buffer.size,
# SPARK_BUFFER_SIZE in the workers) flushed every few hundred bytes
SMALL_BATCHES = {"spark.sql.execution.arrow.maxRecordsPerBatch": "5", "spark.buffer.size": "256"}


# The two tests on the Spark standalone cluster cost about ten minutes of JVM
# start-ups (a cluster, three drivers, executors) on two cores: more than the
# whole suite's budget allows (CONTRIBUTING: 45 minutes). `make
# test-spark-cluster` runs them, and so does CI's spark-cluster job; the
# exactly-once protocol itself (fencing, the ledger, retries) is tested in
# `make test` by the two task-level tests below.
ON_SPARK_CLUSTER = pytest.mark.skipif(
    not os.environ.get("PYLOG_SPARK_CLUSTER_TESTS"),
    reason="make test-spark-cluster sets PYLOG_SPARK_CLUSTER_TESTS",
)


@pytest.fixture(scope="module")
def pylog_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    d = tmp_path_factory.mktemp("eos-cluster")
    with LocalCluster(3, directory=str(d), log_level="INFO") as c:
        yield c


def create_topic(c: LocalCluster, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
    new = NewTopic(topic, partitions, 3, config={"min.insync.replicas": "2"})
    admin.create_topics([new])[topic].result(60)
    for p in range(partitions):
        c.wait_for_full_isr(topic, p)


def read_topic(
    bootstrap: str, topic: str, committed: bool = True, partition: int | None = None
) -> list[str]:
    """Every value of ``topic`` (or of one partition) from the start to its end
    (the last stable offset under read_committed), each partition to its EOF."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"eos-check-{uuid.uuid4().hex[:8]}",
            "isolation.level": "read_committed" if committed else "read_uncommitted",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    try:
        parts = c.list_topics(topic, timeout=30).topics[topic].partitions
        if partition is not None:
            parts = {partition: parts[partition]}
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
        out: list[str] = []
        eof: set[int] = set()
        deadline = time.monotonic() + 60
        while len(eof) < len(parts):
            assert time.monotonic() < deadline, f"{topic}: no EOF on {set(parts) - eof}"
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error() is not None:
                if m.error().code() == KafkaError._PARTITION_EOF:
                    eof.add(m.partition())
                    continue
                raise AssertionError(m.error())
            eof.discard(m.partition())
            out.append(m.value().decode())
        return out
    finally:
        c.close()


def once_each(values: list[str], want: list[str]) -> None:
    counts = Counter(values)
    doubled = {v: n for v, n in counts.items() if n > 1}
    assert not doubled, f"written more than once: {sorted(doubled.items())[:10]}"
    missing, extra = sorted(set(want) - set(counts)), sorted(set(counts) - set(want))
    assert not missing and not extra, f"missing {missing[:10]}, extra {extra[:10]}"


def wait_for(what: str, ok: Any, timeout: float = WAIT, proc: Any = None) -> None:
    deadline = time.monotonic() + timeout
    while not ok():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the driver exited ({proc.returncode}) before {what}")
        assert time.monotonic() < deadline, f"no {what} in {timeout:.0f} s"
        time.sleep(0.3)


def java_hash(s: str) -> int:
    h = 0
    for ch in s.encode("utf-16-be").decode("utf-16-be"):
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def _of_file(f: int, values: list[str]) -> list[str]:
    return [v for v in values if v.startswith(f"s-{f}-")]


# ------------------------------------------------- the task, without Spark


def _options(bootstrap: str, topic: str, **more: str) -> Any:
    from pyspark.sql.types import StringType, StructField, StructType

    from pylog.spark.sink import _write_options

    schema = StructType([StructField("value", StringType())])
    return _write_options(schema, {"kafka.bootstrap.servers": bootstrap, "topic": topic, **more})


def _rows(values: list[str], pause: float = 0.0) -> Iterator[Any]:
    from pyspark.sql import Row

    for v in values:
        if pause:
            time.sleep(pause)
        yield Row(value=v)


def test_an_attempt_after_a_committed_one_writes_nothing(pylog_cluster: LocalCluster) -> None:
    from pylog.spark.sink import TaskIdentity, write_task

    topic = f"eos-task-{uuid.uuid4().hex[:8]}"
    create_topic(pylog_cluster, topic, 2)
    boot = pylog_cluster.bootstrap_servers
    o = _options(boot, topic)
    sink = uuid.uuid4().hex
    first = [f"a-{i}" for i in range(30)]
    m = write_task(_rows(first), o, TaskIdentity(sink, 0, 3, 0))
    assert (m.records, m.skipped) == (30, False)
    # attempt 1 of the same task (a retry after a failure Spark saw after the
    # commit, or the driver rerunning the batch): the ledger says done
    m = write_task(_rows(first), o, TaskIdentity(sink, 0, 3, 1))
    assert (m.records, m.skipped) == (0, True)
    # the next micro-batch of the same task writes; another task is not skipped
    later = [f"b-{i}" for i in range(10)]
    assert write_task(_rows(later), o, TaskIdentity(sink, 1, 3, 0)).records == 10
    other = [f"c-{i}" for i in range(5)]
    assert write_task(_rows(other), o, TaskIdentity(sink, 0, 4, 0)).records == 5
    once_each(read_topic(boot, topic), first + later + other)
    once_each(read_topic(boot, topic, committed=False), first + later + other)

    # exactlyOnce=false is at-least-once: the same retry writes the rows again
    alo = _options(boot, topic, exactlyOnce="false")
    from pylog.spark.sink import _produce

    assert _produce(_rows(["d-0"]), alo) == 1 and _produce(_rows(["d-0"]), alo) == 1
    assert Counter(read_topic(boot, topic))["d-0"] == 2


def test_two_attempts_at_once_commit_once(pylog_cluster: LocalCluster) -> None:
    """Speculation: a second attempt of a task starts while the first is in
    the middle of its transaction. Its InitProducerId fences the first (whose
    open transaction is aborted, and whose next produce fails) and it writes
    every row; never both."""
    from pylog.spark.sink import TaskIdentity, write_task

    topic = f"eos-spec-{uuid.uuid4().hex[:8]}"
    create_topic(pylog_cluster, topic, 2)
    boot = pylog_cluster.bootstrap_servers
    o = _options(boot, topic)
    sink = uuid.uuid4().hex
    values = [f"s-{i}" for i in range(60)]
    results: dict[int, Any] = {}
    resume = threading.Event()

    def slow_rows() -> Iterator[Any]:
        rows = _rows(values)
        for i, row in enumerate(rows):
            if i == 10:  # ten records in the first attempt's transaction
                resume.wait(120)
            yield row

    def attempt(n: int, rows: Iterator[Any]) -> None:
        try:
            results[n] = write_task(rows, o, TaskIdentity(sink, 0, 0, n))
        except Exception as e:  # the fenced attempt fails, as a speculative loser may
            results[n] = e

    first = threading.Thread(target=attempt, args=(0, slow_rows()))
    first.start()
    try:
        wait_for(
            "the first attempt's records",
            lambda: len(read_topic(boot, topic, committed=False)) >= 10,
            timeout=60,
        )
        attempt(1, _rows(values))
    finally:
        resume.set()
        first.join(120)
    assert not isinstance(results[1], Exception), results[1]
    assert results[1].records == 60
    assert isinstance(results[0], Exception), results[0]
    once_each(read_topic(boot, topic), values)
    # the first attempt's ten records are there, aborted
    assert len(read_topic(boot, topic, committed=False)) == 70


# ------------------------------------------------- on the Spark cluster


@ON_SPARK_CLUSTER
def test_batch_write_survives_an_executor_kill_and_a_retry_after_commit(
    spark_cluster: SparkStandalone, pylog_cluster: LocalCluster, tmp_path: Path
) -> None:
    topic = f"eos-batch-{uuid.uuid4().hex[:8]}"
    create_topic(pylog_cluster, topic, 4)
    boot = pylog_cluster.bootstrap_servers
    hold = tmp_path / "hold"
    hold.mkdir()
    # spark.range(0, 200, 1, 4): task 2 writes r-100..r-149; it holds after 20
    # of them, its transaction open; task 1's first attempt fails after commit
    proc = spark_cluster.driver(
        DRIVER,
        *("batch", "--bootstrap", boot, "--topic", topic, "--records", "200"),
        *("--hold", f"2,-1,20={hold}", "--option", "pylog.testing.failAfterCommit=1"),
        log=tmp_path / "driver.log",
        conf=SMALL_BATCHES,
    )
    try:
        wait_for("a held write task", (hold / "holding").exists, proc=proc)
        held: set[str] = set()

        def some_written() -> bool:
            held.update(
                v for v in read_topic(boot, topic, committed=False) if 100 <= int(v[2:]) < 120
            )
            return len(held) >= 5

        wait_for("its records in an open transaction", some_written, proc=proc)
        assert not set(read_topic(boot, topic)) & {f"r-{i}" for i in range(100, 150)}
        pid = int((hold / "holding").read_text())
        executor = spark_cluster.executor_of(pid)
        assert executor is not None, f"python worker {pid} is under no executor of ours"
        spark_cluster.kill_executor(executor)
        (hold / "go").touch()
        assert proc.wait(WAIT) == 0, (tmp_path / "driver.log").read_text()[-3000:]
    finally:
        if proc.poll() is None:
            kill_driver(proc)
    want = [f"r-{i}" for i in range(200)]
    once_each(read_topic(boot, topic), want)
    uncommitted = Counter(read_topic(boot, topic, committed=False))
    # the killed attempt's records are there, aborted; task 1's retry wrote none
    assert all(uncommitted[v] == 2 for v in held), uncommitted
    assert all(uncommitted[f"r-{i}"] == 1 for i in range(50, 100))


@ON_SPARK_CLUSTER
def test_streaming_write_survives_the_driver_and_a_broker_killed(
    spark_cluster: SparkStandalone, pylog_cluster: LocalCluster, tmp_path: Path
) -> None:
    topic = f"eos-stream-{uuid.uuid4().hex[:8]}"
    create_topic(pylog_cluster, topic, 3)
    boot = pylog_cluster.bootstrap_servers
    inputs = tmp_path / "in"
    inputs.mkdir()
    want = []
    for f in range(3):
        lines = [f"s-{f}-{i}" for i in range(60)]
        path = inputs / f"{f}.txt"
        path.write_text("\n".join(lines) + "\n")
        # the file source takes files oldest first: file f is micro-batch f
        os.utime(path, (time.time() - 100 + 10 * f,) * 2)
        want += lines
    ckpt = tmp_path / "ckpt"
    first, second = tmp_path / "hold-0", tmp_path / "hold-2"
    first.mkdir()
    second.mkdir()
    args = (
        *("stream", "--bootstrap", boot, "--topic", topic, "--input", str(inputs)),
        *("--checkpoint", str(ckpt)),
        # task 1 of micro-batch 0 (18 rows) and task 0 of micro-batch 2 (20 rows)
        # hold after 15 rows; task P writes partition P
        *("--hold", f"1,0,15={first}", "--hold", f"0,2,15={second}"),
    )
    conf = SMALL_BATCHES
    proc = spark_cluster.driver(DRIVER, *args, log=tmp_path / "driver-1.log", conf=conf)
    try:
        wait_for("a held write task", (first / "holding").exists, proc=proc)
        # tasks 0 and 2 of batch 0 commit; task 1 has records in an open transaction
        wait_for(
            "committed and open transactions of batch 0",
            lambda: read_topic(boot, topic) and read_topic(boot, topic, False, partition=1),
            proc=proc,
        )
        assert not read_topic(boot, topic, partition=1)
        assert not (ckpt / "commits" / "0").exists()  # the batch is not over
        kill_driver(proc)
    finally:
        if proc.poll() is None:
            kill_driver(proc)
    partial = read_topic(boot, topic)
    assert 0 < len(partial) < 60
    (first / "go").touch()

    # the restarted query runs batch 0 again: its committed tasks write nothing
    proc = spark_cluster.driver(DRIVER, *args, log=tmp_path / "driver-2.log", conf=conf)
    try:
        wait_for("batch 2 held", (second / "holding").exists, proc=proc)
        wait_for(
            "an open transaction in batch 2",
            lambda: _of_file(2, read_topic(boot, topic, False, partition=0)),
            proc=proc,
        )
        assert not _of_file(2, read_topic(boot, topic, partition=0))
        # tasks 1 and 2 of batch 2 may have committed; task 0 has not
        assert len(_of_file(2, read_topic(boot, topic))) < 60
        # the transaction coordinator of the held task dies
        query = json.loads((ckpt / "metadata").read_text())["id"]
        tid = f"pylog-spark-{query}-0"
        coordinator = pylog_cluster.leader("__transaction_state", abs(java_hash(tid)) % 50)
        assert coordinator is not None
        pylog_cluster.broker(coordinator).kill()
        (second / "go").touch()
        assert proc.wait(WAIT) == 0, (tmp_path / "driver-2.log").read_text()[-3000:]
    finally:
        if proc.poll() is None:
            kill_driver(proc)
    pylog_cluster.broker(coordinator).restart()
    boot = pylog_cluster.bootstrap_servers
    once_each(read_topic(boot, topic), want)
    assert len(read_topic(boot, topic, committed=False)) > len(want)
    assert (ckpt / "commits" / "2").exists()
