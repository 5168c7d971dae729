"""Arrow UDFs on pylog's native extension, for record-batch bytes that landed
outside a broker (segment files copied to object storage, read with
``spark.read.format("binaryFile")``, fetch captures...)::

    from pylog.spark.functions import decode_batches, validate_batches
    files = spark.read.format("binaryFile").load("s3://bucket/segments/*.log")
    records = files.select(F.explode(decode_batches("content")).alias("r")).select("r.*")
    checked = files.select("path", validate_batches("content").alias("check"))

Each input value is whole record batches (a ``.log`` file is); the native
decoder runs once per value, never once per record. On PySpark 4.1 and later
these are Arrow UDFs (``arrow_udf``); PySpark 4.0 has none, so there they are
Arrow-optimized Python UDFs: same results, but each decoded record passes
through Python objects on its way back to the JVM.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from pylog import _native

from ._arrow import HEADERS_TYPE, arrow_type, binary_array, headers_array

__all__ = [
    "CHECK_TYPE",
    "RECORDS_TYPE",
    "decode_batches",
    "decode_batches_arrow",
    "validate_batches",
    "validate_batches_arrow",
]

RECORD_TYPE = StructType(
    [
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("headers", HEADERS_TYPE),
    ]
)
RECORDS_TYPE = ArrayType(RECORD_TYPE)
CHECK_TYPE = StructType(
    [
        StructField("valid", BooleanType()),
        StructField("error", StringType()),
        StructField("position", LongType()),
    ]
)
_FIRST, _LAST = -(2**63), 2**63 - 1


def _record_struct(columns: Any, struct_type: Any) -> pa.StructArray:
    rows, offsets, timestamps, ts_types, key, value, headers = columns
    fields = list(struct_type)

    def fixed(t: Any, data: bytes) -> pa.Array:
        return pa.Array.from_buffers(t, rows, [None, pa.py_buffer(data)], null_count=0)

    arrays = [
        fixed(pa.int64(), offsets),
        fixed(fields[1].type, timestamps),
        fixed(pa.int32(), ts_types),
        binary_array(key, rows),
        binary_array(value, rows),
        headers_array(headers, rows, fields[5].type),
    ]
    return pa.StructArray.from_arrays(arrays, fields=fields)


def decode_batches_arrow(blobs: pa.Array) -> pa.Array:
    """list<struct<offset, timestamp, timestampType, key, value, headers>> per blob
    (null for a null blob); CorruptRecordError for bytes that do not decode."""
    list_type = arrow_type(RECORDS_TYPE)
    struct_type = list_type.value_type
    parts = []
    lengths = [0]
    for blob in blobs:
        buf = blob.as_buffer() if blob.is_valid else None
        if buf is None:
            lengths.append(lengths[-1])
            continue
        cols, _, _, _ = _native.decode_columns(buf, _FIRST, _LAST, include_headers=True)
        parts.append(_record_struct(cols, struct_type))
        lengths.append(lengths[-1] + cols[0])
    values = pa.concat_arrays(parts) if parts else pa.array([], struct_type)
    offsets = pa.array(lengths, pa.int32())
    mask = pa.array([not b.is_valid for b in blobs], pa.bool_()) if blobs.null_count else None
    return pa.ListArray.from_arrays(offsets, values, type=list_type, mask=mask)


def validate_batches_arrow(blobs: pa.Array) -> pa.Array:
    """struct<valid, error, position> per blob: whether every batch frames,
    checksums and decodes; the first error and its byte position if not."""
    valid: list[bool | None] = []
    errors: list[str | None] = []
    positions: list[int | None] = []
    for blob in blobs:
        if not blob.is_valid:
            valid.append(None)
            errors.append(None)
            positions.append(None)
            continue
        found = _native.check_batches(blob.as_buffer())
        valid.append(found is None)
        errors.append(None if found is None else found[0])
        positions.append(None if found is None else found[1])
    return pa.StructArray.from_arrays(
        [
            pa.array(valid, pa.bool_()),
            pa.array(errors, pa.string()),
            pa.array(positions, pa.int64()),
        ],
        names=["valid", "error", "position"],
    )


def _decode_value(blob: bytes | None) -> list[dict[str, Any]] | None:
    """decode_batches on one value, as Python objects (PySpark 4.0's row UDFs)."""
    if blob is None:
        return None
    out: list[dict[str, Any]] = decode_batches_arrow(pa.array([blob], pa.binary()))[0].as_py()
    return out


def _validate_value(blob: bytes | None) -> tuple[bool, str | None, int | None] | None:
    """validate_batches on one value (PySpark 4.0's row UDFs)."""
    if blob is None:
        return None
    found = _native.check_batches(blob)
    return (True, None, None) if found is None else (False, found[0], found[1])


def _column_function(vectorized: Any, per_value: Any, return_type: Any) -> Any:
    # ``pyspark.sql.functions.arrow_udf`` is public from PySpark 4.1; 4.0 has
    # only row UDFs, Arrow-optimized ones being the closest
    arrow_udf = getattr(F, "arrow_udf", None)
    if arrow_udf is not None:
        return arrow_udf(vectorized, return_type)
    return F.udf(per_value, return_type, useArrow=True)


# Spark column functions: ``decode_batches(col)`` gives array<struct<offset,
# timestamp, timestampType, key, value, headers>> per value of a binary column
# of record batches; ``validate_batches(col)`` gives struct<valid, error, position>.
decode_batches: Any = _column_function(decode_batches_arrow, _decode_value, RECORDS_TYPE)
validate_batches: Any = _column_function(validate_batches_arrow, _validate_value, CHECK_TYPE)
