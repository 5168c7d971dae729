"""``spark.read.format("pylog")``: Spark's Kafka source on pylog's native reader.

Reads segment files in executors (``path``) or fetches from a broker
(``kafka.bootstrap.servers``), both decoded natively into Arrow batches in
Spark's Kafka schema; writes through a broker like Spark's Kafka sink
(:mod:`pylog.spark.sink`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.types import StructType

from ._arrow import kafka_schema, projection, to_record_batch
from ._logdirs import LogDirs, batch_starts, read_partition, segment_bases
from ._options import (
    TP,
    Catalog,
    OffsetRange,
    PylogOptionError,
    ReadOptions,
    parse_read_options,
    resolve_offsets,
    snap_to,
    split_ranges,
    topic_partitions,
)
from ._wire import BrokerClient, fetch_partition
from .sink import PylogBatchWriter, PylogStreamWriter

__all__ = ["PylogDataSource", "PylogOptionError", "PylogPartition"]


@dataclass(frozen=True)
class PylogPartition(InputPartition):
    """One task's work: an offset range of one topic partition, and where to read it."""

    topic: str
    partition: int
    start: int
    end: int
    # the partition directory (path mode) or the bootstrap servers (wire mode)
    location: str
    from_files: bool


class _DirsCatalog:
    def __init__(self, dirs: LogDirs) -> None:
        self.dirs = dirs

    def topics(self) -> dict[str, list[int]]:
        return self.dirs.topics()

    def earliest(self, tps: list[TP]) -> dict[TP, int]:
        return {tp: self.dirs.earliest(tp) for tp in tps}

    def latest(self, tps: list[TP]) -> dict[TP, int]:
        return {tp: self.dirs.latest(tp) for tp in tps}

    def offsets_for_times(self, query: dict[TP, int]) -> dict[TP, int | None]:
        return {tp: self.dirs.offset_for_time(tp, ts) for tp, ts in query.items()}


class _BrokerCatalog:
    def __init__(self, servers: str) -> None:
        self.servers = servers

    def topics(self) -> dict[str, list[int]]:
        with BrokerClient(self.servers) as c:
            return {t: sorted(ps) for t, ps in c.topics().items()}

    def _list(self, query: dict[TP, int]) -> dict[TP, int]:
        if not query:
            return {}
        with BrokerClient(self.servers) as c:
            return c.list_offsets(query)

    def earliest(self, tps: list[TP]) -> dict[TP, int]:
        return self._list(dict.fromkeys(tps, -2))

    def latest(self, tps: list[TP]) -> dict[TP, int]:
        return self._list(dict.fromkeys(tps, -1))

    def offsets_for_times(self, query: dict[TP, int]) -> dict[TP, int | None]:
        return {tp: (None if off < 0 else off) for tp, off in self._list(query).items()}


def _catalog(o: ReadOptions) -> tuple[Catalog, LogDirs | None]:
    if o.paths is not None:
        dirs = LogDirs(o.paths, up_to_log_end=o.up_to_log_end)
        return _DirsCatalog(dirs), dirs
    assert o.servers is not None
    return _BrokerCatalog(o.servers), None


def _partitions(
    o: ReadOptions, dirs: LogDirs | None, start: dict[TP, int], end: dict[TP, int]
) -> list[PylogPartition]:
    ranges = [OffsetRange(t, p, start[(t, p)], end.get((t, p), start[(t, p)])) for t, p in start]
    cuts = None
    if dirs is not None:
        # a split never straddles a segment when it need not
        cuts = {tp: segment_bases(dirs.partitions[tp].path) for tp in start}
    pieces = split_ranges(ranges, o.min_partitions, o.max_records_per_partition, cuts)
    if dirs is not None and len(pieces) > len(ranges):
        # and starts where the offset index points
        pieces = snap_to(pieces, {tp: batch_starts(dirs.partitions[tp].path) for tp in start})
    out = []
    for r in pieces:
        if dirs is not None:
            loc, files = dirs.partitions[(r.topic, r.partition)].path, True
        else:
            assert o.servers is not None
            loc, files = o.servers, False
        out.append(PylogPartition(r.topic, r.partition, r.start, r.end, loc, files))
    return out


@dataclass(frozen=True)
class _Columns:
    """What a reader's batches hold: all of Kafka's columns (``names`` None) or
    those a user-given schema names, spelled as it spells them."""

    names: tuple[str, ...] | None
    spelled: tuple[str, ...] | None

    @classmethod
    def of(cls, schema: StructType, o: ReadOptions) -> _Columns:
        names = projection(schema, o.include_headers)
        return cls(names, None if names is None else tuple(f.name for f in schema.fields))

    def headers(self, o: ReadOptions) -> bool:
        # only decoded when a column carries them
        return o.include_headers if self.names is None else "headers" in self.names


def _read(p: PylogPartition, o: ReadOptions, c: _Columns) -> Iterator[pa.RecordBatch]:
    source = read_partition if p.from_files else fetch_partition
    headers = c.headers(o)
    for cols in source(
        p.location, p.topic, p.partition, p.start, p.end, headers, o.fail_on_data_loss
    ):
        yield to_record_batch(cols, p.topic, p.partition, headers, c.names, c.spelled)


class PylogBatchReader(DataSourceReader):
    def __init__(self, options: dict[str, str], schema: StructType | None = None) -> None:
        self.o = parse_read_options(options, streaming=False)
        self.columns = _Columns.of(schema or kafka_schema(self.o.include_headers), self.o)
        catalog, self.dirs = _catalog(self.o)
        tps = topic_partitions(self.o, catalog)
        self.start = resolve_offsets(self.o, catalog, tps, "start")
        self.end = resolve_offsets(self.o, catalog, tps, "end")
        for tp in tps:
            if self.end[tp] < self.start[tp]:
                raise PylogOptionError(
                    f"{tp[0]}-{tp[1]}: the ending offset {self.end[tp]} is before the "
                    f"starting offset {self.start[tp]}"
                )

    def partitions(self) -> Sequence[InputPartition]:
        parts = _partitions(self.o, self.dirs, self.start, self.end)
        # Spark needs at least one partition to run a stage
        return parts or [PylogPartition("", 0, 0, 0, "", True)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, PylogPartition)
        if partition.end <= partition.start:
            return iter(())
        return _read(partition, self.o, self.columns)


def _offsets_json(offsets: dict[TP, int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (t, p), off in sorted(offsets.items()):
        out.setdefault(t, {})[str(p)] = off
    return out


def _offsets_from_json(spec: dict[str, dict[str, int]]) -> dict[TP, int]:
    return {(t, int(p)): int(off) for t, ps in spec.items() for p, off in ps.items()}


class PylogStreamReader(DataSourceStreamReader):
    """Micro-batches over per-partition offsets, JSON like Spark's Kafka source:
    ``{"topic": {"0": 12}}``. New partitions start at their earliest offset."""

    def __init__(self, options: dict[str, str], schema: StructType | None = None) -> None:
        self.o = parse_read_options(options, streaming=True)
        self.columns = _Columns.of(schema or kafka_schema(self.o.include_headers), self.o)
        self.catalog, self.dirs = _catalog(self.o)
        # the end of the last planned batch: maxOffsetsPerTrigger counts from it
        self._planned: dict[TP, int] | None = None

    def _refresh(self) -> list[TP]:
        if self.o.paths is not None:
            self.dirs = LogDirs(self.o.paths, up_to_log_end=self.o.up_to_log_end)
            self.catalog = _DirsCatalog(self.dirs)
        return topic_partitions(self.o, self.catalog)

    def initialOffset(self) -> dict[str, dict[str, int]]:
        tps = self._refresh()
        start = resolve_offsets(self.o, self.catalog, tps, "start")
        return _offsets_json(start)

    def latestOffset(
        self, start: dict[str, Any] | None = None, limit: Any = None
    ) -> dict[str, dict[str, int]]:
        tps = self._refresh()
        latest = self.catalog.latest(tps)
        if start is not None:
            # PySpark >= 4.2 (admission control: a signature taking the start
            # and the engine's ReadLimit): the limit counts from the start of
            # this very batch, the first of a run included, as Spark's Kafka
            # source does; ReadAllAvailable (Trigger.Once...) lifts it
            rows = getattr(limit, "max_rows", None)
            if rows is not None:
                base = _offsets_from_json(start)
                for tp in tps:
                    base.setdefault(tp, self.catalog.earliest([tp])[tp])
                latest = _rate_limit({tp: base[tp] for tp in tps}, latest, rows)
            return _offsets_json(latest)
        limit_rows = self.o.max_offsets_per_trigger
        # PySpark 4.0 and 4.1 do not pass the start to latestOffset, and
        # Spark asks for it before initialOffset (new query) or without a
        # commit (restart): the first batch of a run cannot know where it
        # starts, so the limit applies from the end of the previous batch on;
        # capping from a guess could go behind a checkpoint
        if limit_rows is not None and self._planned is not None:
            base = {tp: self._planned.get(tp, self.catalog.earliest([tp])[tp]) for tp in tps}
            latest = _rate_limit(base, latest, limit_rows)
        self._planned = dict(latest)
        return _offsets_json(latest)

    def getDefaultReadLimit(self) -> Any:
        """PySpark >= 4.2: ``maxOffsetsPerTrigger`` as the engine's ReadMaxRows."""
        from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

        limit = self.o.max_offsets_per_trigger
        return ReadAllAvailable() if limit is None else ReadMaxRows(limit)

    def reportLatestOffset(self) -> dict[str, dict[str, int]]:
        """PySpark >= 4.2: the unlimited latest offsets, for the query's progress."""
        return _offsets_json(self.catalog.latest(self._refresh()))

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        s, e = _offsets_from_json(start), _offsets_from_json(end)
        if self.dirs is None and self.o.paths is not None:
            self._refresh()
        for tp in e:
            s.setdefault(tp, self.catalog.earliest([tp])[tp])
        return _partitions(self.o, self.dirs, {tp: s[tp] for tp in e}, e)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, PylogPartition)
        return _read(partition, self.o, self.columns)

    def commit(self, end: dict[str, Any]) -> None:
        done = _offsets_from_json(end)
        if self._planned is None or any(self._planned.get(tp, -1) < o for tp, o in done.items()):
            self._planned = done


def _rate_limit(base: dict[TP, int], latest: dict[TP, int], limit: int) -> dict[TP, int]:
    """Spark's rateLimit: ``limit`` offsets spread over partitions by their backlog."""
    backlog = {tp: max(0, latest[tp] - base[tp]) for tp in latest}
    total = sum(backlog.values())
    if total <= limit:
        return latest
    out = {}
    for tp, lag in backlog.items():
        share = int(limit * lag / total)
        out[tp] = base[tp] + min(lag, share)
    return out


class PylogDataSource(DataSource):
    """Format ``"pylog"``: Spark's Kafka source and sink, options and schema included."""

    @classmethod
    def name(cls) -> str:
        return "pylog"

    def schema(self) -> StructType:
        opts = {k.lower(): v for k, v in self.options.items()}
        return kafka_schema(str(opts.get("includeheaders", "false")).lower() == "true")

    def reader(self, schema: StructType) -> DataSourceReader:
        return PylogBatchReader(dict(self.options), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return PylogStreamReader(dict(self.options), schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return PylogBatchWriter(schema, dict(self.options))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return PylogStreamWriter(schema, dict(self.options))


def offsets_json(offsets: dict[TP, int]) -> str:
    """Per-partition offsets as the JSON ``startingOffsets`` takes."""
    return json.dumps(_offsets_json(offsets))
