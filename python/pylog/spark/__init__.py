"""PySpark on pylog: ``spark.read.format("pylog")`` with the schema and options
of Spark's Kafka source, reading segment files in executors with pylog's native
reader (``path``) or fetching from a broker (``kafka.bootstrap.servers``);
``df.write.format("pylog")`` producing through a broker; and Arrow UDFs that
decode or check raw record-batch bytes (:mod:`pylog.spark.functions`).

Needs the ``spark`` extra (any PySpark from 4.0 on, pyarrow)::

    import pylog.spark
    pylog.spark.register(spark)
    df = spark.read.format("pylog").option("path", "/var/lib/pylog").option("subscribe", "t").load()

Segment files can also be read by a JVM DataSource V2 reader, format
``"pylog-jvm"`` (``make spark-jvm`` builds its jar; :func:`jvm_jar` finds it,
for ``spark.jars``): no Python worker, columnar batches straight to Spark, in
batch and streaming, ``read_committed`` with ``kafka.bootstrap.servers`` (the
broker's last stable offset, the files' ``.txnindex``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ._arrow import arrow_schema, kafka_schema
from ._options import PylogOptionError
from .source import PylogDataSource

__all__ = [
    "JVM_FORMAT",
    "PylogDataSource",
    "PylogOptionError",
    "arrow_schema",
    "jvm_jar",
    "kafka_schema",
    "register",
]

JVM_FORMAT = "pylog-jvm"
"""The short name of the JVM segment-file reader (``format(JVM_FORMAT)``)."""


def jvm_jar() -> str | None:
    """The path of the jar of ``format("pylog-jvm")`` if it is there, else None.

    ``PYLOG_SPARK_JAR`` names it when set (None if that file does not exist);
    otherwise the one the wheel carries, next to this module; otherwise
    ``make spark-jvm``'s output, ``$XDG_CACHE_HOME/pylog/spark-jvm/
    pylog-spark.jar`` (``~/.cache`` without XDG_CACHE_HOME). Put it on the
    session's ``spark.jars`` before the session starts."""
    given = os.environ.get("PYLOG_SPARK_JAR")
    if given:
        return given if os.path.isfile(given) else None
    packaged = Path(__file__).with_name("pylog-spark.jar")
    if packaged.is_file():
        return str(packaged)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    jar = Path(cache) / "pylog" / "spark-jvm" / "pylog-spark.jar"
    return str(jar) if jar.is_file() else None


def register(spark: Any) -> None:
    """Register the ``"pylog"`` format with a SparkSession."""
    spark.dataSource.register(PylogDataSource)
