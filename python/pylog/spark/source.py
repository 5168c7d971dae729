"""``spark.read.format("pylog")``: Spark's Kafka source on pylog's native reader.

Reads segment files in executors (``path``) or fetches from a broker
(``kafka.bootstrap.servers``), both decoded natively into Arrow batches in
Spark's Kafka schema; writes through a broker like Spark's Kafka sink
(:mod:`pylog.spark.sink`).
"""

from __future__ import annotations

import json
import logging
import math
import time
import uuid
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

from pylog.errors import OffsetOutOfRangeError

from ._arrow import kafka_schema, projection, to_record_batch
from ._logdirs import LogDirs, batch_starts, partition_log_end, read_partition, segment_bases
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

log = logging.getLogger(__name__)


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
    # with both `path` and `kafka.bootstrap.servers`: the broker reads what the
    # partition directory does not hold (its tail, on a lagging replica)
    servers: str | None = None


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
    """Planning from the cluster: the partitions' leaders answer; the latest
    offset is the high watermark, or the last stable offset under
    read_committed (ListOffsets with isolation level 1, as Kafka's consumer
    asks for its end offsets)."""

    def __init__(self, o: ReadOptions) -> None:
        assert o.servers is not None
        self.servers = o.servers
        self.conf = o.client_conf
        self.isolation = o.isolation
        # a streaming read's latest offsets leave out a partition deleted
        # between listing the topics and asking its offset (reported as gone
        # when the micro-batch is planned)
        self.skip_unknown = False

    def _client(self) -> BrokerClient:
        return BrokerClient(self.servers, self.conf)

    def topics(self) -> dict[str, list[int]]:
        with self._client() as c:
            return c.topics()

    def _list(self, query: dict[TP, int]) -> dict[TP, int]:
        if not query:
            return {}
        with self._client() as c:
            return c.list_offsets(query, self.isolation, self.skip_unknown)

    def earliest(self, tps: list[TP]) -> dict[TP, int]:
        return self._list(dict.fromkeys(tps, -2))

    def latest(self, tps: list[TP]) -> dict[TP, int]:
        return self._list(dict.fromkeys(tps, -1))

    def offsets_for_times(self, query: dict[TP, int]) -> dict[TP, int | None]:
        return {tp: (None if off < 0 else off) for tp, off in self._list(query).items()}


def _catalog(o: ReadOptions) -> tuple[Catalog, LogDirs | None]:
    """Where planning learns the offsets, and the log dirs executors read.
    With both ``path`` and ``kafka.bootstrap.servers`` the broker pins the
    ends (one high watermark or last stable offset per partition) and the
    files are read up to them, the broker filling in what they lack."""
    dirs = None if o.paths is None else LogDirs(o.paths, up_to_log_end=o.up_to_log_end)
    if o.servers is not None:
        return _BrokerCatalog(o), dirs
    assert dirs is not None
    return _DirsCatalog(dirs), dirs


def _partitions(
    o: ReadOptions, dirs: LogDirs | None, start: dict[TP, int], end: dict[TP, int]
) -> list[PylogPartition]:
    ranges = [OffsetRange(t, p, start[(t, p)], end.get((t, p), start[(t, p)])) for t, p in start]
    local = (
        {}
        if dirs is None
        else {tp: dirs.partitions[tp].path for tp in start if tp in dirs.partitions}
    )
    # a split never straddles a segment when it need not
    cuts = {tp: segment_bases(path) for tp, path in local.items()}
    pieces = split_ranges(ranges, o.min_partitions, o.max_records_per_partition, cuts)
    if local and len(pieces) > len(ranges):
        # and starts where the offset index points
        pieces = snap_to(pieces, {tp: batch_starts(path) for tp, path in local.items()})
    out = []
    for r in pieces:
        path = local.get((r.topic, r.partition))
        if path is not None:
            loc, files = path, True
        else:
            assert o.servers is not None
            loc, files = o.servers, False
        out.append(PylogPartition(r.topic, r.partition, r.start, r.end, loc, files, o.servers))
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


def _fetch(
    servers: str, p: PylogPartition, start: int, end: int, o: ReadOptions, headers: bool
) -> Iterator[tuple[object, ...]]:
    return fetch_partition(
        servers,
        p.topic,
        p.partition,
        start,
        end,
        headers,
        o.fail_on_data_loss,
        o.client_conf,
        o.isolation,
    )


def _column_tuples(
    p: PylogPartition, o: ReadOptions, headers: bool
) -> Iterator[tuple[object, ...]]:
    if not p.from_files:
        yield from _fetch(p.location, p, p.start, p.end, o, headers)
        return
    if p.servers is None:
        yield from read_partition(
            p.location, p.topic, p.partition, p.start, p.end, headers, o.fail_on_data_loss
        )
        return
    # the broker pinned [start, end); the files hold what they hold of it
    # (a follower's directory may lag, its log start may differ)
    bases = segment_bases(p.location)
    lo = max(p.start, bases[0]) if bases else p.end
    hi = min(p.end, partition_log_end(p.location)) if bases else p.end
    if hi <= lo:
        yield from _fetch(p.servers, p, p.start, p.end, o, headers)
        return
    if p.start < lo:
        yield from _fetch(p.servers, p, p.start, lo, o, headers)
    yield from read_partition(
        p.location, p.topic, p.partition, lo, hi, headers, o.fail_on_data_loss, o.read_committed
    )
    if hi < p.end:
        yield from _fetch(p.servers, p, hi, p.end, o, headers)


def _read(p: PylogPartition, o: ReadOptions, c: _Columns) -> Iterator[pa.RecordBatch]:
    headers = c.headers(o)
    for cols in _column_tuples(p, o, headers):
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


def _available_now_mixin() -> tuple[type, ...]:
    """PySpark 4.2's SupportsTriggerAvailableNow, where there is one."""
    try:
        from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow
    except ImportError:
        return ()
    return (SupportsTriggerAvailableNow,)


class PylogStreamReader(DataSourceStreamReader, *_available_now_mixin()):  # type: ignore[misc]
    """Micro-batches over per-partition offsets, JSON like Spark's Kafka source:
    ``{"topic": {"0": 12}}``. New partitions start at their earliest offset."""

    def __init__(self, options: dict[str, str], schema: StructType | None = None) -> None:
        self.o = parse_read_options(options, streaming=True)
        self.columns = _Columns.of(schema or kafka_schema(self.o.include_headers), self.o)
        self.catalog, self.dirs = _catalog(self.o)
        if isinstance(self.catalog, _BrokerCatalog):
            self.catalog.skip_unknown = True
        # the end of the last planned batch: maxOffsetsPerTrigger counts from it
        self._planned: dict[TP, int] | None = None
        # Spark's KafkaSourceProvider: kafka.group.id as given, else the
        # prefix and a suffix unique to this query run
        self.group = self.o.group_id or (
            None if self.o.group_prefix is None else f"{self.o.group_prefix}-{uuid.uuid4()}"
        )
        # Trigger.AvailableNow's end, and when the last batch was let through
        self._target: dict[TP, int] | None = None
        self._last_trigger = -math.inf
        # the end of the micro-batch being run, and the last end committed
        self._running: dict[TP, int] | None = None
        self._committed: dict[TP, int] | None = None

    def _refresh(self, missing_ok: bool = True) -> list[TP]:
        if self.o.paths is not None:
            self.dirs = LogDirs(self.o.paths, up_to_log_end=self.o.up_to_log_end)
            if self.o.servers is None:
                self.catalog = _DirsCatalog(self.dirs)
        # a running query goes on without a topic deleted under it (the loss
        # is reported when the next micro-batch is planned)
        return topic_partitions(self.o, self.catalog, missing_ok)

    def initialOffset(self) -> dict[str, dict[str, int]]:
        tps = self._refresh(missing_ok=False)
        start = resolve_offsets(self.o, self.catalog, tps, "start")
        return _offsets_json(start)

    def latestOffset(
        self, start: dict[str, Any] | None = None, limit: Any = None
    ) -> dict[str, dict[str, int]]:
        self._commit_finished()
        tps = self._refresh()
        latest = self.catalog.latest(tps)
        if start is not None:
            # PySpark >= 4.2 (admission control: a signature taking the start
            # and the engine's ReadLimit): the limit counts from the start of
            # this very batch, the first of a run included, as Spark's Kafka
            # source does; ReadAllAvailable (Trigger.Once...) lifts it
            started = _offsets_from_json(start)
            base = dict(started)
            unknown = [tp for tp in tps if tp not in base]
            base.update(self.catalog.earliest(unknown) if unknown else {})
            latest = self._up_to_target(latest, started)
            rows = getattr(limit, "max_rows", None)
            if rows is not None:
                latest = _rate_limit({tp: base.get(tp, 0) for tp in latest}, latest, rows)
            if self._delay(base, latest):
                return start
            return _offsets_json(latest)
        limit_rows = self.o.max_offsets_per_trigger
        # PySpark 4.0 and 4.1 do not pass the start to latestOffset, and
        # Spark asks for it before initialOffset (new query) or without a
        # commit (restart): the first batch of a run cannot know where it
        # starts, so the limits apply from the end of the previous batch on;
        # capping from a guess could go behind a checkpoint
        if self._planned is not None:
            planned = self._planned
            base = {tp: planned.get(tp, self.catalog.earliest([tp]).get(tp, 0)) for tp in tps}
            if limit_rows is not None:
                latest = _rate_limit(base, latest, limit_rows)
            if self._delay(base, latest):
                return _offsets_json(planned)
        self._planned = dict(latest)
        return _offsets_json(latest)

    def _delay(self, base: dict[TP, int], latest: dict[TP, int]) -> bool:
        """minOffsetsPerTrigger / maxTriggerDelay, as Spark's Kafka source
        delays a batch: fewer new offsets than the minimum wait until the
        delay since the last batch has passed (the first batch never waits).
        Trigger.AvailableNow reads what there is."""
        least = self.o.min_offsets_per_trigger
        if least is None or self._target is not None:
            return False
        new = sum(max(0, off - base.get(tp, off)) for tp, off in latest.items())
        now = time.monotonic()
        if new < least and (now - self._last_trigger) * 1000 < self.o.max_trigger_delay_ms:
            return True
        self._last_trigger = now
        return False

    def prepareForTriggerAvailableNow(self) -> None:
        """PySpark >= 4.2, Trigger.AvailableNow: the latest offsets now are
        where the run ends (in as many micro-batches as maxOffsetsPerTrigger
        makes); what arrives later, and partitions added later, wait for the
        next run."""
        self._target = self.catalog.latest(self._refresh())

    def _up_to_target(self, latest: dict[TP, int], started: dict[TP, int]) -> dict[TP, int]:
        target = self._target
        if target is None:
            return latest
        out = {}
        for tp, off in latest.items():
            if tp in target:
                out[tp] = min(off, max(target[tp], started.get(tp, target[tp])))
            elif tp in started:
                out[tp] = started[tp]
        return out

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
        new = [tp for tp in e if tp not in s]
        s.update(self.catalog.earliest(new) if new else {})
        lost = [
            f"{t}-{p} is gone (its topic deleted?) after offset {off}"
            for (t, p), off in sorted(s.items())
            if (t, p) not in e
        ]
        for t, p in new:
            if (t, p) not in s:  # gone again before its start was known
                lost.append(f"{t}-{p} was added and is gone again")
                del e[(t, p)]
        new = [tp for tp in new if tp in e]
        lost += [
            f"{t}-{p} was added starting at offset {s[(t, p)]}, not 0"
            for t, p in sorted(new)
            if s[(t, p)] != 0
        ]
        for (t, p), until in sorted(e.items()):
            if until < s[(t, p)]:
                # Spark's KafkaOffsetReader: the offsets went back; this
                # batch reads nothing of it, the next starts at the new end
                lost.append(
                    f"{t}-{p}'s offset went back from {s[(t, p)]} to {until} (the topic "
                    "deleted and recreated, or its log truncated): what was at offsets "
                    f"{until} to {s[(t, p)] - 1} is lost, and the records now below {until} "
                    "are not read"
                )
                s[(t, p)] = until
        if lost:
            self._report_data_loss(lost)
        self._running = e
        return _partitions(self.o, self.dirs, {tp: s[tp] for tp in e}, e)

    def _report_data_loss(self, lost: list[str]) -> None:
        """failOnDataLoss (Spark's reportDataLoss): fail naming what was
        lost, or log it and go on."""
        what = "; ".join(lost)
        if self.o.fail_on_data_loss:
            raise OffsetOutOfRangeError(
                f"some data may have been lost: {what}. If this is expected, set the "
                "source option failOnDataLoss to false"
            )
        log.warning("pylog.spark: some data may have been lost: %s", what)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, PylogPartition)
        return _read(partition, self.o, self.columns)

    def commit(self, end: dict[str, Any]) -> None:
        done = _offsets_from_json(end)
        if self._planned is None or any(self._planned.get(tp, -1) < o for tp, o in done.items()):
            self._planned = done
        self._commit_finished(done)

    def _commit_finished(self, done: dict[TP, int] | None = None) -> None:
        """Commit a finished micro-batch's end to the group. Spark tells the
        source (``commit``) only when it plans the batch after next, so the
        end of the batch whose partitions were planned last is committed at
        the next trigger: micro-batches run one at a time, and a failed one
        stops the query, so by then it has completed."""
        finished = done if done is not None else self._running
        self._running = None
        if self.group is None or not finished or finished == self._committed:
            return
        if self._committed is not None and all(
            self._committed.get(tp, -1) >= off for tp, off in finished.items()
        ):
            return  # Spark's late commit of a batch already committed here
        self._commit_to_group(finished)
        self._committed = dict(finished)

    def _commit_to_group(self, done: dict[TP, int]) -> None:
        """The finished micro-batch's end offsets to the consumer group
        (OffsetCommit with generation -1, as a consumer with manual
        assignment commits), so lag tools see the query; the checkpoint stays
        the source of truth, so a failure is logged and the query goes on
        (Spark's Kafka source commits nothing: SPARK-27549)."""
        assert self.o.servers is not None and self.group is not None
        try:
            with BrokerClient(self.o.servers, self.o.client_conf) as c:
                c.commit(self.group, done)
        except Exception as e:
            log.warning("pylog.spark: committing offsets to group %s failed: %s", self.group, e)


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
