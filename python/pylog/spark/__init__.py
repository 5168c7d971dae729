"""PySpark on pylog: ``spark.read.format("pylog")`` with the schema and options
of Spark's Kafka source, reading segment files in executors with pylog's native
reader (``path``) or fetching from a broker (``kafka.bootstrap.servers``);
``df.write.format("pylog")`` producing through a broker; and Arrow UDFs that
decode or check raw record-batch bytes (:mod:`pylog.spark.functions`).

Needs the ``spark`` extra (any PySpark from 4.0 on, pyarrow)::

    import pylog.spark
    pylog.spark.register(spark)
    df = spark.read.format("pylog").option("path", "/var/lib/pylog").option("subscribe", "t").load()
"""

from __future__ import annotations

from typing import Any

from ._arrow import arrow_schema, kafka_schema
from ._options import PylogOptionError
from .source import PylogDataSource

__all__ = ["PylogDataSource", "PylogOptionError", "arrow_schema", "kafka_schema", "register"]


def register(spark: Any) -> None:
    """Register the ``"pylog"`` format with a SparkSession."""
    spark.dataSource.register(PylogDataSource)
