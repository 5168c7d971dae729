"""Spark's Kafka schema, as Spark types and as the Arrow schema Spark expects,
and the assembly of native column buffers into Arrow record batches.

The Arrow types are spelled out here from PySpark's documented type mapping
rather than taken from ``pyspark.sql.pandas.types``, whose converters are
internal and change between releases (4.3 made the timezone a required
keyword); ``tests/spark`` checks them against the running PySpark's own.

The native reader returns whole columns as Arrow-layout buffers; here they are
wrapped (``Array.from_buffers``) without copying: constant Python work per
batch, none per record.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from ._options import PylogOptionError

__all__ = [
    "HEADERS_TYPE",
    "arrow_schema",
    "arrow_type",
    "binary_array",
    "empty_batch",
    "headers_array",
    "kafka_schema",
    "projection",
    "to_record_batch",
]

# Spark's KafkaRecordToRowConverter: every field nullable, in this order.
HEADERS_TYPE = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)
_BASE_FIELDS = [
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", TimestampType()),
    StructField("timestampType", IntegerType()),
]


def kafka_schema(include_headers: bool) -> StructType:
    """The schema of Spark's Kafka source (``headers`` last, with ``includeHeaders``)."""
    fields = list(_BASE_FIELDS)
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    return StructType(fields)


# Spark's Arrow counterparts of the scalar types used here. Timestamps are
# microseconds in UTC: what Python data sources and Arrow UDFs exchange with
# the JVM whatever the session time zone.
_SCALARS: dict[type, pa.DataType] = {
    BinaryType: pa.binary(),
    StringType: pa.string(),
    BooleanType: pa.bool_(),
    IntegerType: pa.int32(),
    LongType: pa.int64(),
    TimestampType: pa.timestamp("us", tz="UTC"),
}


def arrow_type(dt: DataType) -> pa.DataType:
    """The Arrow type Spark exchanges for ``dt`` (the types of pylog's schemas only):
    arrays are lists of a nullable-as-declared ``element``, structs keep their fields."""
    if isinstance(dt, ArrayType):
        return pa.list_(pa.field("element", arrow_type(dt.elementType), dt.containsNull))
    if isinstance(dt, StructType):
        return pa.struct([_arrow_field(f) for f in dt.fields])
    found = _SCALARS.get(type(dt))
    if found is None:
        raise TypeError(f"no Arrow mapping for {dt!r} in pylog.spark")
    return found


def _arrow_field(f: StructField) -> pa.Field:
    return pa.field(f.name, arrow_type(f.dataType), f.nullable)


_ARROW: dict[bool, pa.Schema] = {}


def arrow_schema(include_headers: bool) -> pa.Schema:
    """The Arrow schema Spark derives from :func:`kafka_schema` (PySpark 4.3 refuses
    a data source's batches unless their schema equals it; older ones assume it)."""
    s = _ARROW.get(include_headers)
    if s is None:
        fields = kafka_schema(include_headers).fields
        s = _ARROW[include_headers] = pa.schema([_arrow_field(f) for f in fields])
    return s


def binary_array(col: tuple[bytes, bytes, bytes, int], rows: int, type: Any = None) -> pa.Array:
    """A binary (or utf8) array over a native ``(validity, offsets, data, nulls)`` column."""
    validity, offsets, data, nulls = col
    return pa.Array.from_buffers(
        type if type is not None else pa.binary(),
        rows,
        [pa.py_buffer(validity) if nulls else None, pa.py_buffer(offsets), pa.py_buffer(data)],
        null_count=nulls,
    )


def _fixed(type: Any, rows: int, data: bytes) -> pa.Array:
    return pa.Array.from_buffers(type, rows, [None, pa.py_buffer(data)], null_count=0)


def headers_array(
    headers: tuple[bytes, tuple[bytes, bytes, bytes, int], tuple[bytes, bytes, bytes, int]],
    rows: int,
    list_type: Any,
) -> pa.Array:
    """The ``headers`` list<struct<key, value>> array of a native headers triple."""
    list_offsets, hk, hv = headers
    n = len(list_offsets) // 4 - 1
    entries = len(hk[1]) // 4 - 1
    struct_type = list_type.value_type
    struct = pa.StructArray.from_arrays(
        [binary_array(hk, entries, pa.string()), binary_array(hv, entries)],
        fields=list(struct_type),
    )
    assert n == rows, (n, rows)
    return pa.ListArray.from_arrays(
        _fixed(pa.int32(), rows + 1, list_offsets), struct, type=list_type
    )


def projection(schema: StructType, include_headers: bool) -> tuple[str, ...] | None:
    """The Kafka columns, in order, that a user-given ``schema`` reads (None: all
    of them, as the options give them).

    Spark's Python data sources (4.0 to 4.3) never tell a reader which columns
    a query uses, so every row would carry all of them through the Python
    worker's Arrow stream and the JVM's row conversions; a schema naming some
    of the Kafka source's own columns is how a reader asks for fewer. Spark's
    Kafka source refuses any user schema; here only one that is not such a
    subset is refused."""
    full = kafka_schema(include_headers)
    if schema == full:
        return None
    by_name = {f.name.lower(): f for f in full.fields}
    names: list[str] = []
    for f in schema.fields:
        k = by_name.get(f.name.lower())
        if k is None or f.dataType != k.dataType or not f.nullable or k.name in names:
            raise PylogOptionError(
                f"a schema given to format('pylog') may only name columns of Spark's Kafka "
                f"schema {full.simpleString()} with their types, each once and nullable "
                f"(headers with includeHeaders=true); {_ddl(f)} is not one"
            )
        names.append(k.name)
    return tuple(names)


def _ddl(f: StructField) -> str:
    return f"{f.name} {f.dataType.simpleString()}" + ("" if f.nullable else " not null")


_PROJECTED: dict[tuple[tuple[str, ...], tuple[str, ...]], pa.Schema] = {}


def _projected_schema(names: tuple[str, ...], spelled: tuple[str, ...]) -> pa.Schema:
    key = (names, spelled)
    s = _PROJECTED.get(key)
    if s is None:
        full = arrow_schema("headers" in names)
        s = _PROJECTED[key] = pa.schema(
            [full.field(n).with_name(as_) for n, as_ in zip(names, spelled, strict=True)]
        )
    return s


def to_record_batch(
    columns: Any,
    topic: str,
    partition: int,
    include_headers: bool,
    names: tuple[str, ...] | None = None,
    spelled: tuple[str, ...] | None = None,
) -> pa.RecordBatch:
    """One record batch in Spark's Kafka schema from a native columns tuple, or
    of the columns ``names`` only (called ``spelled``, as the schema spells them)."""
    rows, offsets, timestamps, ts_types, key, value, headers = columns
    if names is None:
        schema = arrow_schema(include_headers)
        names = tuple(schema.names)
    else:
        schema = _projected_schema(names, spelled if spelled is not None else names)
    arrays = []
    for n in names:
        if n == "key":
            arrays.append(binary_array(key, rows))
        elif n == "value":
            arrays.append(binary_array(value, rows))
        elif n == "topic":
            arrays.append(pa.repeat(pa.scalar(topic, pa.string()), rows))
        elif n == "partition":
            arrays.append(pa.repeat(pa.scalar(partition, pa.int32()), rows))
        elif n == "offset":
            arrays.append(_fixed(pa.int64(), rows, offsets))
        elif n == "timestamp":
            arrays.append(_fixed(_SCALARS[TimestampType], rows, timestamps))
        elif n == "timestampType":
            arrays.append(_fixed(pa.int32(), rows, ts_types))
        else:
            arrays.append(headers_array(headers, rows, arrow_type(HEADERS_TYPE)))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def empty_batch(include_headers: bool) -> pa.RecordBatch:
    schema = arrow_schema(include_headers)
    return pa.RecordBatch.from_arrays([pa.array([], f.type) for f in schema], schema=schema)
