"""``df.write.format("pylog")`` and ``writeStream.format("pylog")``: Spark's
Kafka sink on a pylog broker (the writer half of :class:`PylogDataSource`)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

from ._options import PylogOptionError

__all__ = ["PylogBatchWriter", "PylogStreamWriter"]


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


def _produce(rows: Iterator[Any], topic_opt: str | None, options: dict[str, str]) -> int:
    """Produce every row; any delivery failure fails the task."""
    from confluent_kafka import Producer

    conf = {k[len("kafka.") :]: v for k, v in options.items() if k.lower().startswith("kafka.")}
    conf.setdefault("linger.ms", "5")
    producer = Producer(conf)
    errors: list[str] = []

    def report(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(f"{msg.topic()}-{msg.partition()}: {err}")

    n = 0
    for row in rows:
        d = row.asDict()
        topic = topic_opt if topic_opt is not None else d.get("topic")
        if topic is None:
            raise PylogOptionError(f"null topic in row {n} and no 'topic' option")
        kwargs: dict[str, Any] = {"value": _as_bytes(d["value"]), "key": _as_bytes(d.get("key"))}
        if d.get("partition") is not None:
            kwargs["partition"] = d["partition"]
        if d.get("headers"):
            kwargs["headers"] = [(h["key"], _as_bytes(h["value"])) for h in d["headers"]]
        while True:
            try:
                producer.produce(topic, on_delivery=report, **kwargs)
                break
            except BufferError:  # the local queue is full: let deliveries drain
                producer.poll(0.1)
        producer.poll(0)
        n += 1
    left = producer.flush(60)
    if left:
        raise RuntimeError(f"{left} of {n} records were not delivered within 60 s")
    if errors:
        raise RuntimeError(f"{len(errors)} of {n} records failed delivery: {errors[:5]}")
    return n


@dataclass
class _Written(WriterCommitMessage):
    records: int


class PylogBatchWriter(DataSourceWriter):
    def __init__(self, schema: StructType, options: dict[str, str]) -> None:
        self.topic, _ = _check_write_schema(schema, options)
        self.options = dict(options)

    def write(self, iterator: Iterator[Any]) -> _Written:
        return _Written(_produce(iterator, self.topic, self.options))


class PylogStreamWriter(DataSourceStreamWriter):
    def __init__(self, schema: StructType, options: dict[str, str]) -> None:
        self.topic, _ = _check_write_schema(schema, options)
        self.options = dict(options)

    def write(self, iterator: Iterator[Any]) -> _Written:
        return _Written(_produce(iterator, self.topic, self.options))

    def commit(self, messages: list[Any], batchId: int) -> None:
        pass

    def abort(self, messages: list[Any], batchId: int) -> None:
        pass
