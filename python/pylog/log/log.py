"""Log: one partition's replica on disk — its segments and its offsets.

Kafka 3.x splits this between ``UnifiedLog`` (offsets, producer state, leader
epochs, retention) and ``LocalLog`` (the segment files); pylog keeps one Log
with the same parts around it: the segments in a :class:`LogSegments`
(``log_segments.py``), ordered by base offset (the last one, the *active*
segment, takes appends), the retention rules in ``retention.py``, and the
loading of a directory in ``loader.py``. A Log keeps four offsets:

* the **log end offset** (LEO): the offset the next record will get;
* the **high watermark** (HW): the end of what every in-sync replica has,
  kept apart from the LEO (``log_start_offset <= HW <= LEO``) and advanced by
  the replication layer, never by appends;
* the **log start offset**: the first offset a consumer may read; retention
  and DeleteRecords move it forward;
* the **recovery point**: offsets below it are known to be on disk (fsynced);
  after an unclean shutdown only segments past it are re-validated.

Leaders append through :meth:`Log.append_as_leader` (the native validator
assigns offsets in place, one call per record set), followers through
:meth:`Log.append_as_follower` (offsets kept, checked to continue the log).
Reads return zero-copy slices (``FetchDataInfo``). Retention removes whole
segments (:mod:`pylog.log.retention` decides which): they leave the log at
once and their files, renamed ``.deleted``, are removed after
``file.delete.delay.ms`` by the scheduler.

Every public method takes the Log's lock: the request handlers and the
background tasks (retention, flush, roll flushes) share a Log. A failing disk
surfaces as KafkaStorageError and leaves the log as it was.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import os
import shutil
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast

from pylog import _native
from pylog.common.utils.time import Clock, now_ms
from pylog.errors import (
    InvalidRecordError,
    InvalidTimestampError,
    KafkaError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    RecordListTooLargeError,
    UnexpectedAppendOffsetError,
)
from pylog.log import retention
from pylog.log.checkpoint import fsync_dir
from pylog.log.config import LogConfig
from pylog.log.fetch import FetchDataInfo
from pylog.log.files import (
    CLEANED_FILE_SUFFIX,
    DELETED_FILE_SUFFIX,
    SWAP_FILE_SUFFIX,
    log_file_name,
    offset_index_file_name,
    time_index_file_name,
    txn_index_file_name,
)
from pylog.log.leader_epoch import LeaderEpochFileCache
from pylog.log.loader import LogLoader
from pylog.log.log_segments import LogSegments
from pylog.log.offset_metadata import LogOffsetMetadata
from pylog.log.producer_state import ProducerStateManager
from pylog.log.segment import LogSegment

__all__ = [
    "AppendOrigin",
    "FetchIsolation",
    "Log",
    "LogAppendInfo",
    "UnexpectedAppendOffsetError",
]

_log = logging.getLogger("pylog.log")

_MAGIC_POSITION = 16  # byte 16 is the magic in v0, v1 and v2 headers alike
_LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"


class FetchIsolation(enum.Enum):
    """How far a read may go: the log end (followers) or the high watermark (consumers).

    ``TXN_COMMITTED`` reads up to the high watermark too until transactions keep
    a last stable offset.
    """

    LOG_END = "log_end"
    HIGH_WATERMARK = "high_watermark"
    TXN_COMMITTED = "txn_committed"


class AppendOrigin(enum.Enum):
    """Who is appending: a producer (sequences checked), the broker's own
    coordinators, or replication (everything as the leader wrote it)."""

    CLIENT = "client"
    COORDINATOR = "coordinator"
    REPLICATION = "replication"


@dataclass(frozen=True, slots=True)
class LogAppendInfo:
    """The outcome of an append, as the produce response and the replica need it.

    ``duplicate`` is set when the batch repeated one the producer had already
    appended: nothing was written and the offsets are those of the original.
    ``log_append_time`` is the broker's timestamp under LogAppendTime, else -1.
    """

    first_offset: int
    last_offset: int
    last_leader_epoch: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int
    log_start_offset: int
    num_records: int
    num_batches: int
    valid_bytes: int
    source_compression: int
    duplicate: bool = False

    @property
    def num_messages(self) -> int:
        return self.last_offset - self.first_offset + 1 if self.first_offset >= 0 else 0


class Scheduler(Protocol):
    """Runs ``fn`` on another thread after ``delay_ms`` (pylog.log.scheduler.Scheduler)."""

    def schedule_once(self, name: str, fn: Callable[[], object], delay_ms: float = 0) -> None: ...


class ProducerState(Protocol):
    """The ProducerStateManager methods a Log uses."""

    def check_batch(self, batch: Any, verify_sequence: bool) -> Any: ...
    def update(self, batch: Any, append_time_ms: int = -1) -> None: ...
    @property
    def map_end_offset(self) -> int: ...
    def update_map_end_offset(self, offset: int) -> None: ...
    def take_snapshot(self, offset: int | None = None) -> str | None: ...
    def truncate_and_reload(
        self, log_start_offset: int, log_end_offset: int, now_ms: int
    ) -> None: ...
    def truncate_fully(self, start_offset: int = 0) -> None: ...
    def delete_snapshots_before(self, offset: int) -> None: ...


class LeaderEpochCache(Protocol):
    """The LeaderEpochFileCache methods a Log uses."""

    @property
    def latest_epoch(self) -> int | None: ...
    def assign(self, epoch: int, start_offset: int) -> object: ...
    def truncate_from_end(self, end_offset: int) -> None: ...
    def truncate_from_start(self, start_offset: int) -> None: ...
    def clear(self) -> None: ...


class _ThreadScheduler:
    """Fallback when no scheduler is injected: a daemon timer per task."""

    def schedule_once(self, name: str, fn: Callable[[], object], delay_ms: float = 0) -> None:
        def run() -> None:
            try:
                fn()
            except Exception:
                _log.exception("background task %r failed", name)

        t = threading.Timer(max(delay_ms, 0) / 1000.0, run)
        t.name = f"pylog-{name}"
        t.daemon = True
        t.start()


@contextlib.contextmanager
def _storage(what: str, path: str) -> Iterator[None]:
    """Turn an OSError into KafkaStorageError naming what failed where."""
    try:
        yield
    except OSError as e:
        raise KafkaStorageError(f"{what} {path}: {e.strerror or e}", e.errno) from e


# compression.type → codec; "producer" (absent) keeps the producer's codec.
_TOPIC_CODECS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def _recompress(
    buf: bytearray | memoryview, codec: int, max_batch_size: int, max_decompressed: int
) -> bytearray | memoryview:
    """The batches of ``buf`` rebuilt with ``codec`` when any uses another
    (a topic whose compression.type is not ``producer``), in one native call:
    records stay bytes. Every record is framed first (streaming, bounded) so
    that no junk or bomb is decoded into memory."""
    out = _native.recompress_batches(
        buf, codec, max_batch_size=max_batch_size, max_decompressed_size=max_decompressed
    )
    return buf if out is None else out


def _record_validation_error(
    e: InvalidRecordError | InvalidTimestampError, partition: str
) -> InvalidRecordError | InvalidTimestampError:
    """The native validation's record errors in the words of Kafka's
    LogValidator (clients show them): a keyless record names the partition,
    and the batch's message sums them up."""
    errors = [
        (i, f"{m} in topic partition {partition}" if m.endswith("without key") else m)
        for i, m in e.record_errors
    ]
    if isinstance(e, InvalidTimestampError):
        return InvalidTimestampError(
            "One or more records have been rejected due to invalid timestamp", errors
        )
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors[:3])
    return InvalidRecordError(
        f"One or more records have been rejected due to {len(errors)} record errors in total, "
        f"and only showing the first three errors at most: [{shown}]",
        errors,
    )


class Log:
    """A partition's log. Open one with :meth:`open`."""

    def __init__(
        self,
        dir: str,
        config: LogConfig,
        segments: Sequence[LogSegment],
        *,
        log_start_offset: int,
        recovery_point: int,
        next_offset_metadata: LogOffsetMetadata,
        scheduler: Scheduler | None = None,
        clock: Clock = now_ms,
        producer_state: ProducerState | None = None,
        leader_epoch_cache: LeaderEpochCache | None = None,
    ) -> None:
        if not segments:
            raise ValueError(f"a log needs at least one segment ({dir})")
        self._lock = threading.RLock()
        self._dir = dir
        self._config = config
        self._segments = LogSegments(segments)
        self._log_start_offset = log_start_offset
        self._recovery_point = recovery_point
        self._next_offset_metadata = next_offset_metadata
        self._high_watermark = LogOffsetMetadata(log_start_offset)
        self._scheduler: Scheduler = scheduler if scheduler is not None else _ThreadScheduler()
        self._clock = clock
        self._producer_state = producer_state
        self._leader_epoch_cache = leader_epoch_cache
        self._last_flush_ms = clock()
        self._closed = False

    # ------------------------------------------------------------------ opening

    @classmethod
    def open(
        cls,
        dir: str,
        config: LogConfig | None = None,
        *,
        log_start_offset: int = 0,
        recovery_point: int = 0,
        had_clean_shutdown: bool = True,
        scheduler: Scheduler | None = None,
        clock: Clock = now_ms,
        producer_state: ProducerState | None = None,
        leader_epoch_cache: LeaderEpochCache | None = None,
        producer_id_expiration_ms: int = 86_400_000,
    ) -> Log:
        """Open (creating if needed) the log in ``dir``, loading its segments.

        Loading is ``LogLoader``'s (swap/cleaned/deleted files, index checks,
        recovery of what lies past ``recovery_point`` after an unclean shutdown,
        producer-state rebuild). The producer state manager and leader epoch
        cache are made here unless given.
        """
        config = config if config is not None else LogConfig()
        with _storage("creating log directory", dir):
            os.makedirs(dir, exist_ok=True)
        if leader_epoch_cache is None:
            leader_epoch_cache = LeaderEpochFileCache(os.path.join(dir, _LEADER_EPOCH_CHECKPOINT))
        if producer_state is None:
            producer_state = ProducerStateManager(dir, producer_id_expiration_ms)
        loaded = LogLoader(
            dir,
            config,
            log_start_offset,
            recovery_point,
            had_clean_shutdown,
            cast(Any, producer_state),
            cast(Any, leader_epoch_cache),
            clock=clock,
        ).load()
        log = cls(
            dir,
            config,
            loaded.segments,
            log_start_offset=loaded.log_start_offset,
            recovery_point=loaded.recovery_point,
            next_offset_metadata=loaded.next_offset_metadata,
            scheduler=scheduler,
            clock=clock,
            producer_state=producer_state,
            leader_epoch_cache=leader_epoch_cache,
        )
        with log._lock, _storage("loading", dir):
            log.active_segment.resize_indexes(config.segment_index_bytes)
            if leader_epoch_cache is not None:
                leader_epoch_cache.truncate_from_end(log.log_end_offset)
                leader_epoch_cache.truncate_from_start(log.log_start_offset)
        return log

    # ------------------------------------------------------------------ state

    @property
    def dir(self) -> str:
        return self._dir

    @property
    def name(self) -> str:
        return os.path.basename(self._dir)

    @property
    def config(self) -> LogConfig:
        return self._config

    def update_config(self, config: LogConfig) -> None:
        """Apply a topic's changed settings; they take effect from the next append or roll."""
        with self._lock:
            self._config = config

    @property
    def log_end_offset(self) -> int:
        return self._next_offset_metadata.message_offset

    @property
    def log_end_offset_metadata(self) -> LogOffsetMetadata:
        return self._next_offset_metadata

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def high_watermark(self) -> int:
        return self._high_watermark.message_offset

    @property
    def last_flush_time(self) -> int:
        return self._last_flush_ms

    @property
    def unflushed_messages(self) -> int:
        return self.log_end_offset - self._recovery_point

    @property
    def producer_state_manager(self) -> ProducerState | None:
        return self._producer_state

    @property
    def leader_epoch_cache(self) -> LeaderEpochCache | None:
        return self._leader_epoch_cache

    @property
    def latest_epoch(self) -> int | None:
        cache = self._leader_epoch_cache
        return cache.latest_epoch if cache is not None else None

    @property
    def segments(self) -> list[LogSegment]:
        """The segments, oldest first (a copy)."""
        with self._lock:
            return self._segments.values()

    @property
    def num_segments(self) -> int:
        return len(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments.last_segment

    @property
    def size(self) -> int:
        """Bytes of all segments."""
        with self._lock:
            return self._segments.size_in_bytes()

    def floor_segment(self, offset: int) -> LogSegment | None:
        """The segment whose range holds ``offset`` (greatest base <= offset)."""
        with self._lock:
            return self._segments.floor_segment(offset)

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaStorageError(f"log {self._dir} is closed")

    # ------------------------------------------------------------------ high watermark

    def update_high_watermark(self, hw: int | LogOffsetMetadata) -> int:
        """Set the HW, clamped to ``[log_start_offset, log_end_offset]``; returns it."""
        with self._lock:
            offset = hw.message_offset if isinstance(hw, LogOffsetMetadata) else hw
            if offset <= self._log_start_offset:
                offset = self._log_start_offset
                meta = LogOffsetMetadata(offset)
            elif offset >= self.log_end_offset:
                offset = self.log_end_offset
                meta = self._next_offset_metadata
            elif isinstance(hw, LogOffsetMetadata):
                meta = hw
            else:
                meta = LogOffsetMetadata(offset)
            self._high_watermark = meta
            return offset

    def maybe_increment_high_watermark(self, new_hw: LogOffsetMetadata) -> LogOffsetMetadata | None:
        """Move the HW forward (never back) to ``new_hw``; returns the old one
        when it moved. A HW beyond the LEO is refused."""
        with self._lock:
            if new_hw.message_offset > self.log_end_offset:
                raise ValueError(
                    f"high watermark {new_hw} would pass the log end offset "
                    f"{self.log_end_offset} of {self._dir}"
                )
            old = self._fetch_high_watermark_metadata()
            if old.message_offset < new_hw.message_offset or (
                old.message_offset == new_hw.message_offset
                and not new_hw.message_offset_only
                and old.on_older_segment(new_hw)
            ):
                self._high_watermark = new_hw
                return old
            return None

    @property
    def high_watermark_metadata(self) -> LogOffsetMetadata:
        with self._lock:
            return self._fetch_high_watermark_metadata()

    def _fetch_high_watermark_metadata(self) -> LogOffsetMetadata:
        hw = self._high_watermark
        if hw.message_offset_only:
            hw = self._convert_to_offset_metadata(hw.message_offset)
            self._high_watermark = hw
        return hw

    def _convert_to_offset_metadata(self, offset: int) -> LogOffsetMetadata:
        """Locate ``offset`` (segment and byte position); OffsetOutOfRangeError
        outside the log."""
        if offset == self.log_end_offset:
            return self._next_offset_metadata
        if offset < self._log_start_offset or offset > self.log_end_offset:
            raise self._out_of_range(offset)
        if self._segments.floor_segment(offset) is not None:
            for seg in self._segments.segments_from(offset):
                found = seg.translate_offset(offset)
                if found is not None:
                    return LogOffsetMetadata(offset, seg.base_offset, found[1])
        return self._next_offset_metadata

    def _out_of_range(self, offset: int) -> OffsetOutOfRangeError:
        return OffsetOutOfRangeError(
            f"offset {offset} is out of range for {self.name}: the log holds "
            f"[{self._log_start_offset}, {self.log_end_offset})"
        )

    # ------------------------------------------------------------------ append

    def append_as_leader(
        self,
        records: bytes | bytearray | memoryview,
        leader_epoch: int,
        *,
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> LogAppendInfo:
        """Validate a produce request's records, give them offsets from the LEO,
        and append them.

        ``records`` is rewritten in place when writable (offsets, leader epoch,
        LogAppendTime timestamps, CRC); legacy magic 0/1 sets are converted to
        v2 first. A batch the producer already appended (same producer id,
        epoch and sequences) is answered with its original offsets and not
        written again.
        """
        buf: bytearray | memoryview
        if isinstance(records, bytearray) or (
            isinstance(records, memoryview) and not records.readonly
        ):
            buf = records
        else:
            buf = bytearray(records)
        if len(buf) == 0:
            return self._empty_append_info()
        if len(buf) > _MAGIC_POSITION and buf[_MAGIC_POSITION] < 2:
            buf = _native.convert_legacy_to_v2(
                buf, max_decompressed_size=self._config.max_decompressed_bytes
            )
        target_codec = _TOPIC_CODECS.get(self._config.compression_type)
        if target_codec is not None:
            buf = _recompress(
                buf,
                target_codec,
                self._config.max_message_bytes,
                self._config.max_decompressed_bytes,
            )
        with self._lock:
            self._check_open()
            config = self._config
            now = self._clock()
            try:
                info = _native.validate_and_assign_offsets(
                    buf,
                    base_offset=self.log_end_offset,
                    partition_leader_epoch=leader_epoch,
                    now_ms=now,
                    log_append_time=config.log_append_time,
                    max_batch_size=config.max_message_bytes,
                    timestamp_before_max_ms=config.message_timestamp_before_max_ms,
                    timestamp_after_max_ms=config.message_timestamp_after_max_ms,
                    require_keys=config.compact,
                    max_decompressed_size=config.max_decompressed_bytes,
                )
            except (InvalidRecordError, InvalidTimestampError) as e:
                if e.record_errors:
                    raise _record_validation_error(e, self.name) from None
                raise
            if info.num_batches == 0:
                return self._empty_append_info()
            duplicate = self._check_producer_batches(info, origin)
            if duplicate is not None:
                return self._duplicate_info(info, duplicate, leader_epoch)
            self._append_validated(buf, info, now)
            self._maybe_assign_epoch(leader_epoch, info.first_offset)
            return self._append_info(info, leader_epoch, now if config.log_append_time else -1)

    def append_as_follower(self, records: bytes | bytearray | memoryview) -> LogAppendInfo:
        """Append records fetched from the leader, offsets as they are.

        A trailing partial batch is ignored. The first offset must not be below
        the LEO and offsets must increase (UnexpectedAppendOffsetError); CRCs and
        headers are checked (CorruptRecordError). New leader epochs in the
        batches go to the epoch cache.
        """
        n = _native.complete_batches_size(records)  # a partial last batch waits
        if n == 0:
            return self._empty_append_info()
        view = memoryview(records).cast("B")[:n]
        info = _native.analyze_records(view, max_batch_size=self._config.max_message_bytes)
        if info.num_batches == 0:
            return self._empty_append_info()
        with self._lock:
            self._check_open()
            leo = self.log_end_offset
            if info.first_offset < leo:
                raise UnexpectedAppendOffsetError(
                    f"follower append to {self.name} starts at offset {info.first_offset}, "
                    f"below the log end offset {leo}",
                    info.first_offset,
                    info.last_offset,
                )
            prev = info.first_offset - 1
            for b in info.batches:
                if b.base_offset <= prev or b.last_offset < b.base_offset:
                    raise UnexpectedAppendOffsetError(
                        f"follower append to {self.name}: batch at offset {b.base_offset} "
                        f"does not follow offset {prev}",
                        info.first_offset,
                        info.last_offset,
                    )
                prev = b.last_offset
            now = self._clock()
            self._append_validated(view, info, now)
            last_epoch = -1
            for b in info.batches:
                last_epoch = b.partition_leader_epoch
                self._maybe_assign_epoch(last_epoch, b.base_offset)
            return self._append_info(info, last_epoch, -1)

    def _maybe_assign_epoch(self, epoch: int, start_offset: int) -> None:
        """Record ``epoch`` as starting at ``start_offset`` if it is newer than
        the cache's latest."""
        cache = self._leader_epoch_cache
        if cache is not None and epoch >= 0:
            latest = cache.latest_epoch
            if latest is None or epoch > latest:
                cache.assign(epoch, start_offset)

    def _append_info(
        self, info: _native.AppendInfo, last_epoch: int, log_append_time: int
    ) -> LogAppendInfo:
        return LogAppendInfo(
            first_offset=info.first_offset,
            last_offset=info.last_offset,
            last_leader_epoch=last_epoch,
            max_timestamp=info.max_timestamp,
            offset_of_max_timestamp=info.offset_of_max_timestamp,
            log_append_time=log_append_time,
            log_start_offset=self._log_start_offset,
            num_records=info.num_records,
            num_batches=info.num_batches,
            valid_bytes=info.valid_bytes,
            source_compression=info.source_compression,
        )

    def _empty_append_info(self) -> LogAppendInfo:
        return LogAppendInfo(-1, -1, -1, -1, -1, -1, self._log_start_offset, 0, 0, 0, 0)

    def _check_producer_batches(self, info: _native.AppendInfo, origin: AppendOrigin) -> Any:
        """The original batch's metadata if this set repeats an appended one."""
        ps = self._producer_state
        if ps is None:
            return None
        seen: set[int] = set()
        for b in info.batches:
            # Only each producer's first batch is checked against the state:
            # later ones continue it within this same set.
            if b.producer_id < 0 or b.producer_id in seen:
                continue
            seen.add(b.producer_id)
            duplicate = ps.check_batch(b, verify_sequence=origin is AppendOrigin.CLIENT)
            if duplicate is not None:
                return duplicate
        return None

    def _duplicate_info(self, info: _native.AppendInfo, dup: Any, epoch: int) -> LogAppendInfo:
        return LogAppendInfo(
            first_offset=dup.first_offset,
            last_offset=dup.last_offset,
            last_leader_epoch=epoch,
            max_timestamp=dup.timestamp,
            offset_of_max_timestamp=dup.last_offset,
            # Kafka answers a duplicate with its batch's timestamp as the append
            # time, whatever the topic's timestamp type (UnifiedLog.append)
            log_append_time=dup.timestamp,
            log_start_offset=self._log_start_offset,
            num_records=info.num_records,
            num_batches=info.num_batches,
            valid_bytes=0,
            source_compression=info.source_compression,
            duplicate=True,
        )

    def _append_validated(
        self, buf: bytes | bytearray | memoryview, info: _native.AppendInfo, now: int
    ) -> None:
        """Roll if due, write, then move the LEO and the producer state (lock held)."""
        size = info.valid_bytes
        if size > self._config.segment_bytes:
            raise RecordListTooLargeError(
                f"a record set of {size} bytes cannot fit a segment of "
                f"segment.bytes={self._config.segment_bytes} in {self.name}"
            )
        segment = self._maybe_roll(
            size, info.max_timestamp, info.first_offset, info.last_offset, now
        )
        data = buf if size == len(buf) else memoryview(buf)[:size]
        segment.append(
            info.last_offset, info.max_timestamp, info.offset_of_max_timestamp, data, info.batches
        )
        self._next_offset_metadata = LogOffsetMetadata(
            info.last_offset + 1, segment.base_offset, segment.size
        )
        ps = self._producer_state
        if ps is not None:
            for b in info.batches:
                if b.producer_id >= 0:
                    ps.update(b, now)
            ps.update_map_end_offset(info.last_offset + 1)
        if self.unflushed_messages >= self._config.flush_messages:
            self.flush()

    # ------------------------------------------------------------------ roll

    def _maybe_roll(
        self, messages_size: int, max_timestamp: int, first_offset: int, last_offset: int, now: int
    ) -> LogSegment:
        segment = self.active_segment
        if segment.should_roll(
            max_segment_ms=self._config.segment_ms,
            max_segment_bytes=self._config.segment_bytes,
            max_timestamp_in_messages=max_timestamp,
            max_offset_in_messages=last_offset,
            messages_size=messages_size,
            now_ms=now,
        ):
            return self._roll(first_offset)
        return segment

    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at ``max(expected_next_offset, LEO)``."""
        with self._lock:
            self._check_open()
            return self._roll(expected_next_offset)

    def _roll(self, expected_next_offset: int | None = None) -> LogSegment:
        new_offset = max(expected_next_offset or 0, self.log_end_offset)
        active = self.active_segment
        with _storage("rolling", self._dir):
            if self._segments.contains(new_offset):
                if active.base_offset == new_offset and active.size == 0:
                    # An empty active segment at this offset: replace it.
                    self._remove_and_delete([active])
                else:
                    raise KafkaError(
                        f"cannot roll {self.name} to a new segment at {new_offset}: "
                        "a segment with that base offset already exists"
                    )
            elif new_offset < active.base_offset:
                raise KafkaError(
                    f"cannot roll {self.name} to a new segment at {new_offset}, below the "
                    f"active segment's base offset {active.base_offset}"
                )
            else:
                for stale in (
                    log_file_name(self._dir, new_offset),
                    offset_index_file_name(self._dir, new_offset),
                    time_index_file_name(self._dir, new_offset),
                    txn_index_file_name(self._dir, new_offset),
                ):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(stale)
            if self._segments:
                self.active_segment.on_became_inactive_segment()
            segment = LogSegment.open(
                self._dir,
                new_offset,
                self._config,
                preallocate=self._config.preallocate,
                clock=self._clock,
            )
        self._segments.add(segment)
        self._next_offset_metadata = LogOffsetMetadata(self.log_end_offset, new_offset, 0)
        ps = self._producer_state
        if ps is not None:
            ps.update_map_end_offset(new_offset)
            ps.take_snapshot(new_offset)
        self._scheduler.schedule_once(
            f"flush-log-{self.name}-{new_offset}",
            lambda: self._flush_quietly(new_offset),
            0,
        )
        return segment

    def _flush_quietly(self, offset: int) -> None:
        try:
            self.flush(offset)
        except KafkaStorageError as e:
            if not self._closed:
                _log.error("flush of %s up to %d failed: %s", self._dir, offset, e)

    # ------------------------------------------------------------------ read

    def read(
        self,
        start_offset: int,
        max_length: int,
        isolation: FetchIsolation = FetchIsolation.LOG_END,
        min_one_message: bool = False,
    ) -> FetchDataInfo:
        """Batches from the one holding ``start_offset``, up to ``max_length``
        bytes and not past the LEO or the HW (``isolation``). Reading at the
        bound returns an empty slice; outside ``[log_start_offset, LEO]``
        raises OffsetOutOfRangeError."""
        with self._lock:
            self._check_open()
            leo = self.log_end_offset
            if start_offset < self._log_start_offset or start_offset > leo:
                raise self._out_of_range(start_offset)
            if isolation is FetchIsolation.LOG_END:
                bound = self._next_offset_metadata
            else:
                bound = self._fetch_high_watermark_metadata()
            if start_offset == bound.message_offset:
                return FetchDataInfo(bound)
            if start_offset > bound.message_offset:
                return FetchDataInfo(self._convert_to_offset_metadata(start_offset))
            if start_offset < self._segments.first_segment.base_offset:
                raise self._out_of_range(start_offset)
            for segment in self._segments.segments_from(start_offset):
                if segment.base_offset > bound.segment_base_offset:
                    break
                if segment.base_offset == bound.segment_base_offset:
                    max_position = bound.relative_position_in_segment
                else:
                    max_position = segment.size
                # Not _storage(): every Fetch comes here, and the path (built
                # on each call) is only needed for the error. The native reads
                # raise KafkaStorageError without it.
                try:
                    fetched = segment.read(start_offset, max_length, max_position, min_one_message)
                except OSError as e:
                    where = segment.log_path
                    raise KafkaStorageError(f"reading {where}: {e.strerror or e}", e.errno) from e
                except KafkaStorageError as e:
                    where = segment.log_path
                    if where in str(e):
                        raise
                    raise KafkaStorageError(f"reading {where}: {e}", e.errno) from e
                if fetched is not None:
                    return fetched
            return FetchDataInfo(bound)

    def read_bytes(
        self,
        start_offset: int,
        max_length: int,
        isolation: FetchIsolation = FetchIsolation.LOG_END,
        min_one_message: bool = True,
    ) -> bytes:
        """:meth:`read` copied out (tools, tests, replica fetch responses)."""
        return self.read(start_offset, max_length, isolation, min_one_message).records.read_bytes()

    def fetch_offset_by_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(timestamp, offset) of the first record with a timestamp >= ``timestamp``
        at or after the log start offset (ListOffsets); None when there is none."""
        with self._lock:
            self._check_open()
            lso = self._log_start_offset
            for segment, nxt in self._segments.with_next():
                if nxt is not None and nxt.base_offset <= lso:
                    continue  # wholly below the log start offset
                if 0 <= segment.max_timestamp_so_far < timestamp:
                    continue
                with _storage("searching", segment.log_path):
                    found = segment.find_offset_by_timestamp(timestamp, lso)
                if found is not None:
                    return found
            return None

    # ------------------------------------------------------------------ truncation

    def truncate_to(self, target_offset: int) -> bool:
        """Remove everything from ``target_offset`` on (a follower diverged from
        its leader). True if anything was removed."""
        if target_offset < 0:
            raise ValueError(f"cannot truncate {self.name} to a negative offset {target_offset}")
        with self._lock:
            self._check_open()
            if target_offset >= self.log_end_offset:
                return False
            if self._segments.first_segment.base_offset > target_offset:
                self._truncate_fully_and_start_at(target_offset)
                return True
            with _storage("truncating", self._dir):
                self._remove_and_delete(self._segments.higher_segments(target_offset))
                active = self.active_segment
                active.truncate_to(target_offset)
                active.resize_indexes(self._config.segment_index_bytes)
            self._next_offset_metadata = LogOffsetMetadata(
                target_offset, active.base_offset, active.size
            )
            if self._recovery_point > target_offset:
                self._recovery_point = target_offset
            cache = self._leader_epoch_cache
            if cache is not None:
                cache.truncate_from_end(target_offset)
            self._log_start_offset = min(self._log_start_offset, target_offset)
            self._rebuild_producer_state(target_offset)
            if self.high_watermark >= target_offset:
                self._high_watermark = self._next_offset_metadata
            return True

    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        """Drop every segment and start empty at ``new_offset`` (a follower too
        far behind the leader's log start)."""
        if new_offset < 0:
            raise ValueError(f"cannot restart {self.name} at a negative offset {new_offset}")
        with self._lock:
            self._check_open()
            self._truncate_fully_and_start_at(new_offset)

    def _truncate_fully_and_start_at(self, new_offset: int) -> None:
        with _storage("truncating", self._dir):
            # Renamed .deleted first, so the new segment's names are free; the
            # lock keeps anyone from seeing the log without a segment.
            self._remove_and_delete(self._segments.values())
            segment = LogSegment.open(
                self._dir,
                new_offset,
                self._config,
                preallocate=self._config.preallocate,
                clock=self._clock,
            )
            self._segments.add(segment)
        self._next_offset_metadata = LogOffsetMetadata(new_offset, new_offset, 0)
        self._log_start_offset = new_offset
        self._recovery_point = new_offset
        self._high_watermark = self._next_offset_metadata
        cache = self._leader_epoch_cache
        if cache is not None:
            cache.clear()
        ps = self._producer_state
        if ps is not None:
            ps.truncate_fully(new_offset)
            ps.update_map_end_offset(new_offset)

    def _rebuild_producer_state(self, last_offset: int) -> None:
        """Producer state as of ``last_offset``: the newest snapshot at or below
        it, then the producer batches after the snapshot replayed from the log."""
        ps = self._producer_state
        if ps is None:
            return
        ps.truncate_and_reload(self._log_start_offset, last_offset, self._clock())
        start = ps.map_end_offset
        if start < last_offset:
            for segment in self._segments.segments_from(start):
                found = segment.translate_offset(start) if segment.base_offset <= start else None
                position = found[1] if found is not None else 0
                for b in segment.batch_infos(position):
                    if b.last_offset >= last_offset:
                        break
                    if b.last_offset >= start and b.producer_id >= 0:
                        ps.update(b, b.max_timestamp)
        ps.update_map_end_offset(last_offset)

    # ------------------------------------------------------------------ flush

    def flush(self, offset: int | None = None) -> None:
        """Make every offset below ``offset`` (default: the LEO) durable and move
        the recovery point there."""
        with self._lock:
            self._check_open()
            target = self.log_end_offset if offset is None else min(offset, self.log_end_offset)
            if target <= self._recovery_point:
                return
            to_flush = self._segments.segments_from(self._recovery_point, target)
        for segment in to_flush:
            if segment.closed:
                continue
            try:
                segment.flush()
            except KafkaStorageError:
                if not segment.closed:
                    raise
        with self._lock:
            if target > self._recovery_point:
                self._recovery_point = target
                self._last_flush_ms = self._clock()

    # ------------------------------------------------------------------ retention

    def delete_old_segments(self) -> int:
        """Apply retention: segments wholly below the log start offset, then, under
        the delete policy, by ``retention.bytes`` and ``retention.ms``. Only
        segments below the HW go. Returns how many segments were removed."""
        with self._lock:
            self._check_open()
            deleted = self._delete_breached(
                retention.log_start_offset_breached(self._log_start_offset), "log start offset"
            )
            if self._config.delete:
                deleted += self._delete_breached(
                    retention.retention_size_breached(self._segments, self._config.retention_bytes),
                    "retention.bytes",
                )
                deleted += self._delete_breached(
                    retention.retention_ms_breached(self._config.retention_ms, self._clock),
                    "retention.ms",
                )
            return deleted

    def _delete_breached(self, breached: retention.Breach | None, reason: str) -> int:
        if breached is None:
            return 0
        deletable = retention.deletable_segments(
            self._segments, breached, self.high_watermark, self.log_end_offset
        )
        return self._delete_segments(deletable, reason)

    def _delete_segments(self, deletable: list[LogSegment], reason: str) -> int:
        if not deletable:
            return 0
        with _storage("deleting segments of", self._dir):
            doomed = deletable
            if len(deletable) == len(self._segments):
                # The log always keeps a segment: roll an empty one first.
                new = self._roll()
                if deletable[-1].base_offset == new.base_offset:
                    doomed = deletable[:-1]
            _log.info(
                "deleting %d segment(s) of %s (%s): base offsets %s",
                len(doomed),
                self.name,
                reason,
                [s.base_offset for s in doomed],
            )
            self._remove_and_delete(doomed)
        first_base = self._segments.first_segment.base_offset
        self._increment_log_start_offset(first_base)
        ps = self._producer_state
        if ps is not None:
            ps.delete_snapshots_before(first_base)
        return len(deletable)

    def maybe_increment_log_start_offset(self, new_log_start_offset: int) -> bool:
        """Move the log start offset forward (DeleteRecords); segments wholly
        below it go at the next retention run. It may not pass the HW."""
        with self._lock:
            self._check_open()
            if new_log_start_offset > self.high_watermark:
                raise OffsetOutOfRangeError(
                    f"cannot move the log start offset of {self.name} to "
                    f"{new_log_start_offset}, beyond the high watermark {self.high_watermark}"
                )
            return self._increment_log_start_offset(new_log_start_offset)

    def _increment_log_start_offset(self, new_log_start_offset: int) -> bool:
        if new_log_start_offset <= self._log_start_offset:
            return False
        self._log_start_offset = new_log_start_offset
        cache = self._leader_epoch_cache
        if cache is not None:
            cache.truncate_from_start(new_log_start_offset)
        if self._recovery_point < new_log_start_offset:
            self._recovery_point = new_log_start_offset
        if self._high_watermark.message_offset < new_log_start_offset:
            self._high_watermark = LogOffsetMetadata(new_log_start_offset)
        return True

    def _remove_and_delete(self, segments: Sequence[LogSegment]) -> None:
        """Take ``segments`` out of the log now; rename their files ``.deleted``
        and remove them after ``file.delete.delay.ms``."""
        for segment in segments:
            self._segments.remove(segment)
        for segment in segments:
            segment.change_file_suffixes(segment.file_suffix, DELETED_FILE_SUFFIX)
        if not segments:
            return
        batch = list(segments)

        def delete() -> None:
            for s in batch:
                try:
                    s.delete_if_exists()
                except KafkaStorageError as e:
                    _log.error("deleting %s failed: %s", s.log_path, e)

        self._scheduler.schedule_once(
            f"delete-file-{self.name}-{batch[0].base_offset}",
            delete,
            self._config.file_delete_delay_ms,
        )

    # ------------------------------------------------------------------ compaction

    def active_producer_last_offsets(self) -> dict[int, int]:
        """Producer id -> last data offset of every producer the log remembers:
        compaction keeps (at least the header of) each one's last batch."""
        with self._lock:
            ps = self._producer_state
            if not isinstance(ps, ProducerStateManager):
                return {}
            active = ps.active_producers()
            return {pid: e.last_data_offset for pid, e in active.items() if e.last_data_offset >= 0}

    def replace_segments(
        self,
        new_segments: Sequence[LogSegment],
        old_segments: Sequence[LogSegment],
        *,
        after_phase: Callable[[str], None] | None = None,
    ) -> None:
        """Swap compaction output in for the segments it was made from.

        The order makes every crash recoverable by the loader: each new
        segment's files go ``.cleaned`` → ``.swap`` ("swap"); the log's map
        switches; the old segments are renamed ``.deleted`` ("deleted", their
        files removed after ``file.delete.delay.ms``); then ``.swap`` → final
        name ("done"). ``after_phase(name)`` runs after each step (a test hook).
        KafkaError if an old segment already left the log (retention or
        truncation got there first): nothing is replaced then.
        """
        hook = after_phase if after_phase is not None else (lambda _: None)
        with self._lock:
            self._check_open()
            for s in old_segments:
                if self._segments.get(s.base_offset) is not s:
                    raise KafkaError(
                        f"cannot replace segment {s.base_offset} of {self.name}: it left the log"
                    )
                if s is self.active_segment:
                    raise KafkaError(f"cannot replace the active segment of {self.name}")
            with _storage("replacing segments of", self._dir):
                for s in new_segments:
                    if s.has_suffix(CLEANED_FILE_SUFFIX):
                        s.change_file_suffixes(CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX)
                # The .swap names must be durable before any old segment goes.
                fsync_dir(self._dir)
                hook("swap")
                for s in old_segments:
                    self._segments.remove(s)
                for s in new_segments:
                    self._segments.add(s)
                self._remove_and_delete(old_segments)
                hook("deleted")
                for s in new_segments:
                    s.change_file_suffixes(SWAP_FILE_SUFFIX, "")
                fsync_dir(self._dir)
                hook("done")

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Snapshot the producer state at the LEO and close every segment
        (indexes and a preallocated file trimmed). Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            ps = self._producer_state
            try:
                if ps is not None:
                    ps.take_snapshot(self.log_end_offset)
            finally:
                for segment in self._segments:
                    with _storage("closing", segment.log_path):
                        segment.close()

    def close_handlers(self) -> None:
        """Release every file without trimming (after a disk failure)."""
        with self._lock:
            self._closed = True
            for segment in self._segments:
                segment.close_handlers()

    def delete(self) -> None:
        """Remove every segment file and the directory (the partition is gone)."""
        with self._lock:
            self._closed = True
            for segment in self._segments:
                with _storage("deleting", segment.log_path):
                    segment.delete_if_exists()
            self._segments.clear()
            cache = self._leader_epoch_cache
            if cache is not None:
                cache.clear()
            with _storage("deleting", self._dir):
                shutil.rmtree(self._dir, ignore_errors=False)

    @property
    def closed(self) -> bool:
        return self._closed

    def __repr__(self) -> str:
        return (
            f"Log(dir={self._dir!r}, log_start_offset={self._log_start_offset}, "
            f"log_end_offset={self.log_end_offset}, high_watermark={self.high_watermark}, "
            f"segments={len(self._segments)})"
        )
