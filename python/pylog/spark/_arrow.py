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

__all__ = [
    "HEADERS_TYPE",
    "arrow_schema",
    "arrow_type",
    "binary_array",
    "empty_batch",
    "headers_array",
    "kafka_schema",
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


def to_record_batch(
    columns: Any, topic: str, partition: int, include_headers: bool
) -> pa.RecordBatch:
    """One record batch in Spark's Kafka schema from a native columns tuple."""
    rows, offsets, timestamps, ts_types, key, value, headers = columns
    schema = arrow_schema(include_headers)
    arrays = [
        binary_array(key, rows),
        binary_array(value, rows),
        pa.repeat(pa.scalar(topic, pa.string()), rows),
        pa.repeat(pa.scalar(partition, pa.int32()), rows),
        _fixed(pa.int64(), rows, offsets),
        _fixed(schema.field("timestamp").type, rows, timestamps),
        _fixed(pa.int32(), rows, ts_types),
    ]
    if include_headers:
        arrays.append(headers_array(headers, rows, schema.field("headers").type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def empty_batch(include_headers: bool) -> pa.RecordBatch:
    schema = arrow_schema(include_headers)
    return pa.RecordBatch.from_arrays([pa.array([], f.type) for f in schema], schema=schema)
