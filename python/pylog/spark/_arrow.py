"""Spark's Kafka schema, as Spark types and as the Arrow schema Spark expects,
and the assembly of native column buffers into Arrow record batches.

The native reader returns whole columns as Arrow-layout buffers; here they are
wrapped (``Array.from_buffers``) without copying: constant Python work per
batch, none per record.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
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


_ARROW: dict[bool, pa.Schema] = {}


def arrow_schema(include_headers: bool) -> pa.Schema:
    """The Arrow schema Spark derives from :func:`kafka_schema` (what it checks batches against)."""
    s = _ARROW.get(include_headers)
    if s is None:
        s = _ARROW[include_headers] = to_arrow_schema(kafka_schema(include_headers))
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
