"""``df.write.format("pylog")`` and ``writeStream.format("pylog")``: Spark's
Kafka sink on a pylog broker (the writer half of :class:`PylogDataSource`),
exactly-once by default.

Exactly-once (docs/spark.md, "Exactly-once writes"): every write task produces
in one Kafka transaction whose ``transactional.id`` is fixed by what the task
is, not by which attempt runs it: ``<prefix>-<sink id>-<partition id>``, the
sink id being a streaming query's id (kept in its checkpoint) or a batch job's
``writeId``. A new attempt's InitProducerId fences every older attempt of the
same task and aborts its open transaction (KIP-98). The same transaction
commits a ledger entry, an offset of the consumer group named like the
transactional id (TxnOffsetCommit, as ``sendOffsetsToTransaction`` does for
consume-transform-produce), saying which batch that task has committed; an
attempt reads it back (OffsetFetch with ``require_stable``, KIP-447) after
fencing and writes nothing when its batch is already there. Spark's
``DataSourceStreamWriter.commit(messages, batchId)`` runs after the tasks'
transactions are committed: it only counts them.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import chain
from typing import Any

from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

from ._options import PylogOptionError

__all__ = ["PylogBatchWriter", "PylogStreamWriter", "TaskIdentity", "write_task"]

log = logging.getLogger(__name__)

#: how long a task waits for its records to be delivered and, exactly-once,
#: for each transaction step (InitProducerId, the ledger, the commit); past it
#: the task fails and Spark retries it. ``kafka.message.timeout.ms`` (or
#: ``kafka.delivery.timeout.ms``), which bounds a delivery, sets it when given
_TIMEOUT_S = 60.0


def _timeout_s(producer: dict[str, str]) -> float:
    given = producer.get("message.timeout.ms") or producer.get("delivery.timeout.ms")
    return int(given) / 1000 if given else _TIMEOUT_S


def _check_write_schema(schema: StructType, options: dict[str, str]) -> tuple[str | None, str]:
    """Spark's KafkaWriter.validateQuery: value required; key, topic, partition,
    headers optional, with their types. Returns (topic option, servers)."""
    opts = {k.lower(): v for k, v in options.items()}
    servers = opts.get("kafka.bootstrap.servers")
    if not servers:
        raise PylogOptionError("option 'kafka.bootstrap.servers' must be given to write")
    topic = opts.get("topic")
    fields = {f.name.lower(): f.dataType for f in schema.fields}

    def typed(name: str, ok: tuple[type, ...], what: str) -> None:
        if name in fields and not isinstance(fields[name], ok):
            raise PylogOptionError(f"{name} attribute type must be a {what}, not {fields[name]}")

    if "value" not in fields:
        raise PylogOptionError("required attribute 'value' not found")
    typed("value", (StringType, BinaryType), "string or binary")
    typed("key", (StringType, BinaryType), "string or binary")
    typed("topic", (StringType,), "string")
    typed("partition", (IntegerType,), "int")
    if "headers" in fields:
        h = fields["headers"]
        ok = (
            isinstance(h, ArrayType)
            and isinstance(h.elementType, StructType)
            and [f.name for f in h.elementType.fields] == ["key", "value"]
        )
        if not ok:
            raise PylogOptionError(
                f"headers attribute type must be array<struct<key:string,value:binary>>, not {h}"
            )
    if topic is None and "topic" not in fields:
        raise PylogOptionError(
            "topic option required when no 'topic' attribute is present; "
            "use the 'topic' option for setting a topic"
        )
    return topic, servers


def _as_bytes(v: Any) -> bytes | None:
    if v is None:
        return None
    if isinstance(v, str):
        return v.encode()
    return bytes(v)


@dataclass(frozen=True)
class WriteOptions:
    """The write options this sink reads (besides ``kafka.*`` and ``topic``)."""

    topic: str | None
    producer: dict[str, str]
    exactly_once: bool
    prefix: str
    write_id: str | None
    # test-only fault: these partitions' first attempts fail after their commit
    fail_after_commit: frozenset[int]


def _truthy(options: dict[str, str], name: str, default: bool) -> bool:
    v = options.get(name.lower())
    if v is None:
        return default
    if v.lower() not in ("true", "false"):
        raise PylogOptionError(f"option '{name}' must be true or false, not {v!r}")
    return v.lower() == "true"


def _write_options(schema: StructType, options: dict[str, str]) -> WriteOptions:
    topic, _ = _check_write_schema(schema, options)
    opts = {k.lower(): v for k, v in options.items()}
    producer = {k[len("kafka.") :]: v for k, v in options.items() if k.lower().startswith("kafka.")}
    eos = _truthy(opts, "exactlyOnce", True)
    if eos and "transactional.id" in producer:
        # one id per task is what fences a task's older attempts
        raise PylogOptionError(
            "option 'kafka.transactional.id' is not supported: exactly-once writes "
            "make one per task from 'transactionalIdPrefix'"
        )
    fail = opts.get("pylog.testing.failaftercommit", "")
    return WriteOptions(
        topic=topic,
        producer=producer,
        exactly_once=eos,
        prefix=opts.get("transactionalidprefix", "pylog-spark"),
        write_id=opts.get("writeid"),
        fail_after_commit=frozenset(int(x) for x in fail.split(",") if x.strip()),
    )


def _row_kwargs(row: Any, topic_opt: str | None, n: int) -> tuple[str, dict[str, Any]]:
    d = row.asDict()
    topic = topic_opt if topic_opt is not None else d.get("topic")
    if topic is None:
        raise PylogOptionError(f"null topic in row {n} and no 'topic' option")
    kwargs: dict[str, Any] = {"value": _as_bytes(d["value"]), "key": _as_bytes(d.get("key"))}
    if d.get("partition") is not None:
        kwargs["partition"] = d["partition"]
    if d.get("headers"):
        kwargs["headers"] = [(h["key"], _as_bytes(h["value"])) for h in d["headers"]]
    return topic, kwargs


def _send_all(
    producer: Any, rows: Iterator[Any], topic_opt: str | None, timeout: float
) -> tuple[int, set[str]]:
    """Produce every row and wait for every delivery; any failed delivery fails
    the task. Returns (records, the topics written)."""
    errors: list[str] = []

    def report(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(f"{msg.topic()}-{msg.partition()}: {err}")

    n, topics = 0, set()
    for row in rows:
        topic, kwargs = _row_kwargs(row, topic_opt, n)
        topics.add(topic)
        while True:
            try:
                producer.produce(topic, on_delivery=report, **kwargs)
                break
            except BufferError:  # the local queue is full: let deliveries drain
                producer.poll(0.1)
        producer.poll(0)
        n += 1
    left = producer.flush(timeout)
    if left:
        raise RuntimeError(f"{left} of {n} records were not delivered within {timeout:.0f} s")
    if errors:
        raise RuntimeError(f"{len(errors)} of {n} records failed delivery: {errors[:5]}")
    return n, topics


def _produce(rows: Iterator[Any], o: WriteOptions) -> int:
    """At-least-once (``exactlyOnce=false``): produce every row; a retried task
    produces its rows again."""
    from confluent_kafka import Producer

    conf = dict(o.producer)
    conf.setdefault("linger.ms", "5")
    return _send_all(Producer(conf), rows, o.topic, _timeout_s(o.producer))[0]


@dataclass(frozen=True)
class TaskIdentity:
    """What makes two task attempts the same task: the sink (a streaming
    query's id or a batch job's writeId), the batch (a micro-batch id; 0 for a
    batch job) and the task's partition id."""

    sink: str
    batch: int
    partition: int
    attempt: int

    def transactional_id(self, prefix: str) -> str:
        return f"{prefix}-{self.sink}-{self.partition}"


@dataclass
class _Written(WriterCommitMessage):
    records: int
    partition: int = -1
    # an earlier attempt of this task had committed the batch: nothing written
    skipped: bool = False


def _retrying(what: str, call: Callable[[], Any], deadline: float) -> Any:
    """Run a transaction call, again while librdkafka calls its error retriable
    (a coordinator moving, a broker gone) and the deadline allows."""
    from confluent_kafka import KafkaException

    while True:
        try:
            return call()
        except KafkaException as e:
            err = e.args[0]
            if not err.retriable() or time.monotonic() > deadline:
                raise RuntimeError(f"{what}: {err}") from e
            log.info("%s: %s; retrying", what, err)
            time.sleep(0.2)


def _ledger(group: Any, topic: str, tid: str, deadline: float) -> int:
    """The batch mark the task's group ``tid`` holds (0 if none): the next
    batch this task has not committed. Asked with require_stable (librdkafka
    sets it under read_committed), so an offset of a transaction still ending
    is waited for, never skipped (KIP-447)."""
    from confluent_kafka import KafkaException, TopicPartition

    while True:
        try:
            got = group.committed([TopicPartition(topic, 0)], timeout=15)
            return max(int(got[0].offset), 0)
        except KafkaException as e:
            # the first group request of a cluster waits for __consumer_offsets
            if time.monotonic() > deadline:
                raise RuntimeError(f"reading the write ledger of {tid}: {e}") from e
            log.info("reading the write ledger of %s: %s; retrying", tid, e)
            time.sleep(0.2)


def write_task(rows: Iterator[Any], o: WriteOptions, task: TaskIdentity) -> _Written:
    """One task attempt of an exactly-once write: fence the task's older
    attempts, skip when the ledger says this batch is committed, else produce
    every row and the ledger entry in one transaction and commit it."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    it = iter(rows)
    head = next(it, None)
    if head is None:
        # nothing to write, nothing to fence: an older attempt with rows would
        # have read the same (empty) input
        return _Written(0, task.partition)
    tid = task.transactional_id(o.prefix)
    timeout = _timeout_s(o.producer)
    deadline = time.monotonic() + timeout
    conf = dict(o.producer)
    conf.setdefault("linger.ms", "5")
    conf["transactional.id"] = tid
    producer = _new_producer(conf)
    # InitProducerId: bumps the epoch, so an older attempt still running can
    # neither produce nor commit (PRODUCER_FENCED), and its open transaction is
    # aborted before this returns; one that already committed is complete
    _retrying(f"{tid}: InitProducerId", lambda: producer.init_transactions(timeout), deadline)
    client = {k: v for k, v in o.producer.items() if k not in _PRODUCER_ONLY}
    group = Consumer(
        {
            **client,
            "group.id": tid,
            "enable.auto.commit": "false",
            "isolation.level": "read_committed",
        }
    )
    try:
        # the ledger entry sits on partition 0 of every topic the task writes;
        # the first row's topic is one of them whichever attempt reads it
        first_topic, _ = _row_kwargs(head, o.topic, 0)
        mark = _ledger(group, first_topic, tid, deadline)
        if mark > task.batch:
            log.info("%s: batch %d already committed (ledger at %d)", tid, task.batch, mark)
            return _Written(0, task.partition, skipped=True)
        producer.begin_transaction()
        try:
            n, topics = _send_all(producer, chain([head], it), o.topic, timeout)
            meta = json.dumps({"batch": task.batch, "attempt": task.attempt, "records": n})
            entry = [TopicPartition(t, 0, task.batch + 1, metadata=meta) for t in sorted(topics)]
            _retrying(
                f"{tid}: TxnOffsetCommit",
                lambda: producer.send_offsets_to_transaction(
                    entry, group.consumer_group_metadata(), timeout
                ),
                deadline,
            )
            _retrying(f"{tid}: EndTxn", lambda: producer.commit_transaction(timeout), deadline)
        except (KafkaException, RuntimeError):
            _abort(producer, tid)
            raise
    finally:
        group.close()
    if task.partition in o.fail_after_commit and task.attempt == 0:
        raise RuntimeError(f"{tid}: failing after the commit (pylog.testing.failAfterCommit)")
    return _Written(n, task.partition)


# librdkafka properties an AdminClient or a consumer refuses or warns about
_PRODUCER_ONLY = frozenset(
    {
        "linger.ms",
        "acks",
        "compression.type",
        "compression.codec",
        "batch.size",
        "batch.num.messages",
        "enable.idempotence",
        "transaction.timeout.ms",
        "queue.buffering.max.messages",
        "queue.buffering.max.kbytes",
        "queue.buffering.max.ms",
        "message.timeout.ms",
        "delivery.timeout.ms",
        "retries",
        "partitioner",
    }
)


def _new_producer(conf: dict[str, str]) -> Any:
    from confluent_kafka import Producer

    return Producer(conf)


def _abort(producer: Any, tid: str) -> None:
    """Abort after a failure; if that fails too the next attempt's
    InitProducerId aborts the transaction (or the coordinator does, after
    transaction.timeout.ms)."""
    from confluent_kafka import KafkaException

    try:
        producer.abort_transaction(_TIMEOUT_S)
    except KafkaException as e:
        log.warning("%s: abort failed (%s); the next attempt aborts it", tid, e)


def _task_context() -> Any:
    from pyspark import TaskContext

    tc = TaskContext.get()
    if tc is None:
        raise RuntimeError("pylog's writer runs in Spark tasks only")
    return tc


class PylogBatchWriter(DataSourceWriter):
    def __init__(self, schema: StructType, options: dict[str, str]) -> None:
        self.o = _write_options(schema, options)
        # the job's identity, made once on the driver and pickled into every
        # task: a retried or speculative attempt carries the same one
        self.write_id = self.o.write_id or uuid.uuid4().hex

    def write(self, iterator: Iterator[Any]) -> _Written:
        if not self.o.exactly_once:
            return _Written(_produce(iterator, self.o))
        tc = _task_context()
        task = TaskIdentity(self.write_id, 0, tc.partitionId(), tc.attemptNumber())
        return write_task(iterator, self.o, task)

    def commit(self, messages: list[Any]) -> None:
        _log_commit(messages, None)

    def abort(self, messages: list[Any]) -> None:
        # a committed task's records stay: a rerun with the same writeId writes
        # only the tasks that did not commit
        log.warning(
            "write %s aborted; rerun with writeId=%s to finish it", self.write_id, self.write_id
        )


def _log_commit(messages: list[Any], batch: int | None) -> None:
    done = [m for m in messages if isinstance(m, _Written)]
    log.info(
        "%s: %d records from %d tasks; %d tasks already committed",
        "write" if batch is None else f"batch {batch}",
        sum(m.records for m in done),
        len(done),
        sum(m.skipped for m in done),
    )


class PylogStreamWriter(DataSourceStreamWriter):
    def __init__(self, schema: StructType, options: dict[str, str]) -> None:
        self.o = _write_options(schema, options)

    def write(self, iterator: Iterator[Any]) -> _Written:
        if not self.o.exactly_once:
            return _Written(_produce(iterator, self.o))
        tc = _task_context()
        # MicroBatchExecution's local properties: the query id is the
        # checkpoint's (a restarted query keeps it); the batch id is the
        # micro-batch's, the same when a restart runs a batch again
        query = tc.getLocalProperty("sql.streaming.queryId")
        batch = tc.getLocalProperty("streaming.sql.batchId")
        if query is None or batch is None:
            raise RuntimeError("exactly-once streaming writes need micro-batch execution")
        task = TaskIdentity(query, int(batch), tc.partitionId(), tc.attemptNumber())
        return write_task(iterator, self.o, task)

    def commit(self, messages: list[Any], batchId: int) -> None:
        # the tasks' transactions are committed already: a task that had
        # failed made the engine run the batch again, not call this
        _log_commit(messages, batchId)

    def abort(self, messages: list[Any], batchId: int) -> None:
        log.warning("batch %d aborted; its committed tasks are skipped when it runs again", batchId)
