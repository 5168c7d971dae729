"""The options of Spark's Kafka source, parsed and checked at planning time,
with the same names, defaults and refusals (plus ``path`` and
``upToLogEnd``), and the offset ranges they resolve to.
"""

from __future__ import annotations

import bisect
import itertools
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from pylog.errors import OffsetOutOfRangeError, UnknownTopicOrPartitionError

from ._security import SecurityOptionError, security_options

__all__ = [
    "EARLIEST",
    "LATEST",
    "Catalog",
    "OffsetRange",
    "PylogOptionError",
    "ReadOptions",
    "parse_read_options",
    "resolve_offsets",
    "split_ranges",
]

EARLIEST, LATEST = -2, -1
TP = tuple[str, int]


class PylogOptionError(ValueError):
    """An option Spark's Kafka source would refuse, or a bad value; raised at planning."""


# Kafka consumer settings Spark's Kafka source refuses (it manages them itself).
_REFUSED = {
    "kafka.auto.offset.reset": "set the source option 'startingOffsets' to 'earliest' or 'latest'",
    "kafka.key.deserializer": "keys are always read as bytes; use DataFrame operations",
    "kafka.value.deserializer": "values are always read as bytes; use DataFrame operations",
    "kafka.enable.auto.commit": "pylog.spark commits no offsets; Spark tracks them",
    "kafka.interceptor.classes": "consumer interceptors are not supported",
}


@dataclass(frozen=True)
class OffsetRange:
    topic: str
    partition: int
    start: int
    end: int


@dataclass
class ReadOptions:
    paths: list[str] | None
    servers: str | None
    subscribe: list[str] | None = None
    pattern: str | None = None
    assign: dict[str, list[int]] | None = None
    starting: Any = "earliest"
    ending: Any = "latest"
    starting_ts: Any = None
    ending_ts: Any = None
    ts_strategy: str = "error"
    include_headers: bool = False
    fail_on_data_loss: bool = True
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    max_offsets_per_trigger: int | None = None
    #: streaming: wait for this many new offsets, but no longer than
    #: ``max_trigger_delay_ms`` (Spark's minOffsetsPerTrigger / maxTriggerDelay)
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60 * 1000
    up_to_log_end: bool = False
    extra: dict[str, str] = field(default_factory=dict)
    #: 0 read_uncommitted (Spark's default), 1 read_committed
    isolation: int = 0
    #: the ``kafka.*`` security options, as strings (they travel to executors)
    client_conf: dict[str, str] = field(default_factory=dict)
    #: a streaming read's group (``kafka.group.id``, or ``groupIdPrefix`` and
    #: a query-unique suffix): each finished micro-batch's end is committed to it
    group_id: str | None = None
    group_prefix: str | None = None

    @property
    def read_committed(self) -> bool:
        return self.isolation == 1


def _bool(opts: Mapping[str, str], key: str, default: bool) -> bool:
    v = opts.get(key)
    if v is None:
        return default
    s = str(v).strip().lower()
    if s not in ("true", "false"):
        raise PylogOptionError(f"option {key!r} must be 'true' or 'false', not {v!r}")
    return s == "true"


def _positive(opts: Mapping[str, str], key: str) -> int | None:
    v = opts.get(key)
    if v is None:
        return None
    try:
        n = int(v)
    except ValueError:
        raise PylogOptionError(f"option {key!r} must be a positive integer, not {v!r}") from None
    if n <= 0:
        raise PylogOptionError(f"option {key!r} must be a positive integer, not {v!r}")
    return n


def _json(key: str, value: str) -> Any:
    try:
        return json.loads(value)
    except json.JSONDecodeError as e:
        raise PylogOptionError(f"option {key!r} is not valid JSON ({e}): {value!r}") from None


def _offsets_option(key: str, value: str | None, default: str, batch: bool) -> Any:
    """'earliest', 'latest', or {topic: {partition: offset}} with -2/-1."""
    if value is None:
        return default
    s = value.strip()
    if s.lower() in ("earliest", "latest"):
        return s.lower()
    spec = _json(key, s)
    if not isinstance(spec, dict) or not all(isinstance(v, dict) for v in spec.values()):
        raise PylogOptionError(
            f"option {key!r} must be 'earliest', 'latest' or JSON like "
            f'{{"topic":{{"0":23,"1":-2}}}}, not {value!r}'
        )
    out: dict[TP, int] = {}
    for t, parts in spec.items():
        for p, off in parts.items():
            if not isinstance(off, int) or off < -2:
                raise PylogOptionError(f"option {key!r}: bad offset {off!r} for {t}-{p}")
            out[(t, int(p))] = off
    return out


def parse_read_options(raw: Mapping[str, str], streaming: bool) -> ReadOptions:
    """Check and parse the options of a read; PylogOptionError names the fault."""
    opts = {k.lower(): str(v) for k, v in raw.items()}
    for key, why in _REFUSED.items():
        if key in opts:
            raise PylogOptionError(f"option {key!r} is not supported: {why}")
    isolation = opts.get("kafka.isolation.level", "read_uncommitted").strip().lower()
    if isolation not in ("read_uncommitted", "read_committed"):
        raise PylogOptionError(
            "option 'kafka.isolation.level' must be read_uncommitted or read_committed, "
            f"not {opts['kafka.isolation.level']!r}"
        )
    paths = [p.strip() for p in opts.get("path", "").split(",") if p.strip()] or None
    servers = opts.get("kafka.bootstrap.servers") or None
    if paths is None and not servers:
        raise PylogOptionError(
            "one of 'path' (log directories the executors can read) or "
            "'kafka.bootstrap.servers' must be given"
        )
    if isolation == "read_committed" and servers is None:
        raise PylogOptionError(
            "option 'kafka.isolation.level' read_committed needs 'kafka.bootstrap.servers' "
            "beside 'path': the last stable offset (where committed reads end) is the "
            "broker's; the records are still read from the files"
        )
    try:
        client_conf = security_options(opts)
    except SecurityOptionError as e:
        raise PylogOptionError(str(e)) from None
    group_id = opts.get("kafka.group.id") or None
    group_prefix = opts.get("groupidprefix") or None
    if (group_id or group_prefix) and servers is None:
        raise PylogOptionError(
            "options 'kafka.group.id' / 'groupIdPrefix' need 'kafka.bootstrap.servers': "
            "a streaming read commits its offsets to the group there"
        )
    chosen = [k for k in ("subscribe", "subscribepattern", "assign") if k in opts]
    if len(chosen) != 1:
        names = "subscribe, subscribePattern, assign"
        if not chosen:
            raise PylogOptionError(f"one of the options {names} must be specified")
        raise PylogOptionError(f"only one of the options {names} can be specified, got {chosen}")
    o = ReadOptions(
        paths=paths,
        servers=servers,
        isolation=1 if isolation == "read_committed" else 0,
        client_conf=client_conf,
        group_id=group_id,
        group_prefix=group_prefix,
    )
    if "subscribe" in opts:
        topics = [t.strip() for t in opts["subscribe"].split(",") if t.strip()]
        if not topics:
            raise PylogOptionError(f"no topics to subscribe to in {opts['subscribe']!r}")
        o.subscribe = topics
    elif "subscribepattern" in opts:
        if not opts["subscribepattern"].strip():
            raise PylogOptionError("pattern to subscribe is empty")
        try:
            re.compile(opts["subscribepattern"])
        except re.error as e:
            raise PylogOptionError(f"bad subscribePattern: {e}") from None
        o.pattern = opts["subscribepattern"]
    else:
        spec = _json("assign", opts["assign"])
        if not isinstance(spec, dict) or not all(
            isinstance(v, list) and all(isinstance(p, int) for p in v) for v in spec.values()
        ):
            raise PylogOptionError(
                f"option 'assign' must be JSON like {{\"topicA\":[0,1]}}, not {opts['assign']!r}"
            )
        o.assign = spec
    o.starting = _offsets_option(
        "startingOffsets",
        raw_get(opts, "startingoffsets"),
        "latest" if streaming else "earliest",
        not streaming,
    )
    o.ending = _offsets_option("endingOffsets", raw_get(opts, "endingoffsets"), "latest", True)
    if streaming and "endingoffsets" in opts:
        raise PylogOptionError("ending offset not valid in streaming queries")
    if not streaming:
        if o.starting == "latest":
            raise PylogOptionError("starting offset can't be latest for batch queries on Kafka")
        if o.ending == "earliest":
            raise PylogOptionError("ending offset can't be earliest for batch queries on Kafka")
        if isinstance(o.starting, dict) and LATEST in o.starting.values():
            bad = [tp for tp, v in o.starting.items() if v == LATEST]
            raise PylogOptionError(f"startingOffsets for {bad} can't be latest for batch queries")
        if isinstance(o.ending, dict) and EARLIEST in o.ending.values():
            bad = [tp for tp, v in o.ending.items() if v == EARLIEST]
            raise PylogOptionError(f"endingOffsets for {bad} can't be earliest for batch queries")
    for key, attr in (("startingtimestamp", "starting_ts"), ("endingtimestamp", "ending_ts")):
        if key in opts:
            try:
                setattr(o, attr, int(opts[key]))
            except ValueError:
                raise PylogOptionError(
                    f"option {key!r} must be milliseconds, not {opts[key]!r}"
                ) from None
    for key, attr in (
        ("startingoffsetsbytimestamp", "starting_ts"),
        ("endingoffsetsbytimestamp", "ending_ts"),
    ):
        if key in opts and getattr(o, attr) is None:
            spec = _json(key, opts[key])
            if not isinstance(spec, dict):
                raise PylogOptionError(f'option {key!r} must be JSON like {{"t":{{"0":1000}}}}')
            setattr(o, attr, {(t, int(p)): int(v) for t, ps in spec.items() for p, v in ps.items()})
    if streaming and o.ending_ts is not None:
        raise PylogOptionError("ending timestamp not valid in streaming queries")
    o.ts_strategy = opts.get("startingoffsetsbytimestampstrategy", "error").lower()
    if o.ts_strategy not in ("error", "latest"):
        raise PylogOptionError("startingOffsetsByTimestampStrategy must be 'error' or 'latest'")
    o.include_headers = _bool(opts, "includeheaders", False)
    o.fail_on_data_loss = _bool(opts, "failondataloss", True)
    o.up_to_log_end = _bool(opts, "uptologend", False) or _bool(opts, "readuncommitted", False)
    if o.up_to_log_end and (o.read_committed or o.servers is not None):
        raise PylogOptionError(
            "option 'upToLogEnd' reads segment files past the checkpointed high watermark; "
            "with 'kafka.bootstrap.servers' the broker's high watermark (or last stable "
            "offset) is where a read ends"
        )
    o.min_partitions = _positive(opts, "minpartitions")
    o.max_records_per_partition = _positive(opts, "maxrecordsperpartition")
    o.max_offsets_per_trigger = _positive(opts, "maxoffsetspertrigger")
    o.min_offsets_per_trigger = _positive(opts, "minoffsetspertrigger")
    if "maxtriggerdelay" in opts:
        o.max_trigger_delay_ms = _duration_ms("maxTriggerDelay", opts["maxtriggerdelay"])
    return o


_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


def _duration_ms(key: str, value: str) -> int:
    """A duration as Spark's timeStringAsMs reads it: ``500ms``, ``3s``,
    ``15m``, ``1h``, ``1d``; a bare number is milliseconds."""
    m = re.fullmatch(r"\s*(\d+)\s*([a-z]*)\s*", value.lower())
    if m is None or m[2] not in ("", *_UNITS_MS):
        raise PylogOptionError(
            f"option {key!r} must be a duration like 500ms, 30s, 15m or 1h, not {value!r}"
        )
    return int(m[1]) * _UNITS_MS.get(m[2], 1)


def raw_get(opts: Mapping[str, str], key: str) -> str | None:
    return opts.get(key)


class Catalog(Protocol):
    """What planning needs to know of the log, from log dirs or a broker."""

    def topics(self) -> dict[str, list[int]]: ...
    def earliest(self, tps: list[TP]) -> dict[TP, int]: ...
    def latest(self, tps: list[TP]) -> dict[TP, int]: ...
    def offsets_for_times(self, query: dict[TP, int]) -> dict[TP, int | None]: ...


def topic_partitions(o: ReadOptions, catalog: Catalog, missing_ok: bool = False) -> list[TP]:
    """The partitions the options select; UnknownTopicOrPartitionError for a
    missing topic (``missing_ok``: left out, as a running query's consumer
    subscription leaves out a topic deleted under it)."""
    topics = catalog.topics()
    if o.subscribe is not None:
        missing = [t for t in o.subscribe if t not in topics]
        if missing and missing_ok:
            return [(t, p) for t in o.subscribe if t in topics for p in topics[t]]
        if missing:
            where = f"on {o.servers}" if o.servers else f"in {o.paths}"
            raise UnknownTopicOrPartitionError(f"unknown topic(s) {missing} {where}")
        return [(t, p) for t in o.subscribe for p in topics[t]]
    if o.pattern is not None:
        rx = re.compile(o.pattern)
        # internal topics are left out, as a Kafka consumer's pattern leaves them out
        internal = ("__consumer_offsets", "__transaction_state")
        return [
            (t, p)
            for t in sorted(topics)
            if rx.fullmatch(t) and t not in internal
            for p in topics[t]
        ]
    assert o.assign is not None
    out = []
    for t, parts in o.assign.items():
        for p in parts:
            if p not in topics.get(t, []) and missing_ok:
                continue
            if p not in topics.get(t, []):
                raise UnknownTopicOrPartitionError(f"assigned partition {t}-{p} does not exist")
            out.append((t, p))
    return out


def _by_time(
    spec: Any, tps: list[TP], catalog: Catalog, latest: dict[TP, int]
) -> dict[TP, int | None]:
    query = {tp: spec if isinstance(spec, int) else spec.get(tp) for tp in tps}
    asked = {tp: ts for tp, ts in query.items() if ts is not None}
    found = catalog.offsets_for_times(asked) if asked else {}
    return {tp: found.get(tp) if tp in asked else latest[tp] for tp in tps}


def resolve_offsets(o: ReadOptions, catalog: Catalog, tps: list[TP], which: str) -> dict[TP, int]:
    """Concrete offsets for ``which`` = 'start' or 'end' of the read, per partition."""
    earliest = catalog.earliest(tps)
    latest = catalog.latest(tps)
    spec_ts = o.starting_ts if which == "start" else o.ending_ts
    if spec_ts is not None:
        got = _by_time(spec_ts, tps, catalog, latest)
        out = {}
        for tp, off in got.items():
            if off is None:
                if which == "start" and o.ts_strategy == "error":
                    raise OffsetOutOfRangeError(
                        f"no record at or after timestamp {spec_ts} in {tp[0]}-{tp[1]} "
                        "(set startingOffsetsByTimestampStrategy=latest to start at the end)"
                    )
                off = latest[tp]
            out[tp] = off
        return out
    spec = o.starting if which == "start" else o.ending
    out = {}
    for tp in tps:
        if spec == "earliest":
            v = earliest[tp]
        elif spec == "latest":
            v = latest[tp]
        else:
            given = spec.get(tp, EARLIEST if which == "start" else LATEST)
            v = earliest[tp] if given == EARLIEST else latest[tp] if given == LATEST else given
            if which == "start" and given >= 0 and (given < earliest[tp] or given > latest[tp]):
                if o.fail_on_data_loss:
                    raise OffsetOutOfRangeError(
                        f"startingOffsets {given} for {tp[0]}-{tp[1]} is out of range "
                        f"[{earliest[tp]}, {latest[tp]}] (set failOnDataLoss=false to clamp)"
                    )
                v = min(max(given, earliest[tp]), latest[tp])
            if which == "end" and given > latest[tp]:
                if o.fail_on_data_loss:
                    raise OffsetOutOfRangeError(
                        f"endingOffsets {given} for {tp[0]}-{tp[1]} is beyond the latest "
                        f"offset {latest[tp]} (set failOnDataLoss=false to clamp)"
                    )
                v = latest[tp]
        out[tp] = v
    return out


def split_ranges(
    ranges: list[OffsetRange],
    min_partitions: int | None,
    max_records: int | None,
    cuts: Mapping[TP, list[int]] | None = None,
) -> list[OffsetRange]:
    """Split offset ranges so none exceeds ``max_records`` and there are at least
    ``min_partitions`` (Spark's KafkaOffsetRangeCalculator: larger ranges split
    into more parts). ``cuts`` are preferred split points (segment bases)."""
    out: list[OffsetRange] = []
    for r in ranges:
        if r.end <= r.start:
            continue
        points = [r.start]
        for c in (cuts or {}).get((r.topic, r.partition), []):
            if r.start < c < r.end:
                points.append(c)
        points.append(r.end)
        for a, b in itertools.pairwise(points):
            out.append(OffsetRange(r.topic, r.partition, a, b))
    if max_records:
        out = [piece for r in out for piece in _even(r, -(-(r.end - r.start) // max_records))]
    if min_partitions and len(out) < min_partitions:
        total = sum(r.end - r.start for r in out)
        more: list[OffsetRange] = []
        for r in out:
            n = max(1, math.ceil((r.end - r.start) * min_partitions / max(total, 1)))
            more.extend(_even(r, n))
        out = more
    return out


def snap_to(pieces: list[OffsetRange], starts: Mapping[TP, list[int]]) -> list[OffsetRange]:
    """Move each split point between two pieces of a partition back to the
    nearest batch start at or below it, so no batch is decoded by two tasks
    (rows are the same either way: the reader filters by offset)."""
    out: list[OffsetRange] = []
    for r in pieces:
        prev = out[-1] if out else None
        same = prev is not None and (prev.topic, prev.partition) == (r.topic, r.partition)
        if prev is not None and same and prev.end == r.start:
            known = starts.get((r.topic, r.partition), [])
            i = bisect.bisect_right(known, r.start) - 1
            if i >= 0 and prev.start < known[i] < r.start:
                out[-1] = OffsetRange(prev.topic, prev.partition, prev.start, known[i])
                r = OffsetRange(r.topic, r.partition, known[i], r.end)
        out.append(r)
    return out


def _even(r: OffsetRange, parts: int) -> list[OffsetRange]:
    size = r.end - r.start
    parts = max(1, min(parts, size))
    bounds = [r.start + size * i // parts for i in range(parts + 1)]
    return [OffsetRange(r.topic, r.partition, a, b) for a, b in itertools.pairwise(bounds)]
