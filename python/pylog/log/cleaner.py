"""Log compaction: LogCleaner, LogCleanerManager and Cleaner, as in Kafka.

A log with ``cleanup.policy`` containing ``compact`` keeps at least the latest
record of every key. Its ``cleaner-offset-checkpoint`` entry (one file per log
dir) splits it into a *clean* head, already compacted, and a *dirty* tail.
The manager picks the log with the highest dirty ratio (dirty bytes / all
bytes) at or above ``min.cleanable.dirty.ratio`` — or any dirty log whose
oldest dirty record is older than ``max.compaction.lag.ms`` — and a cleaner
thread compacts it:

1. the native offset map (key hash → latest offset, in fixed memory) is built
   over the dirty range, up to the first uncleanable offset: the active
   segment, the high watermark and ``min.compaction.lag.ms`` bound it;
2. every segment from the log start up to where the map ends is rewritten,
   grouped so a group fits one segment, by the native copy loop into
   ``<base>.log.cleaned``;
3. the swap: ``.cleaned`` → ``.swap``, the log's segment map updated, the old
   segments renamed ``.deleted`` (removed later), ``.swap`` → final name. The
   loader finishes or undoes an interrupted swap (see ``loader.py``).

Transactions (Kafka's CleanedTransactionMetadata): the dirty range ends at
the last stable offset, so no open transaction is cleaned; batches of
aborted transactions are dropped (and never mapped); a COMMIT/ABORT marker
stays while a batch of its transaction remains; the first clean after
that writes its delete horizon (now + ``delete.retention.ms``) into its
batch, and a clean past the horizon drops it (Kafka's KIP-534 rule; the
native copy loop keeps every control batch it is given); the
cleaned segment's ``.txnindex`` holds the aborted transactions whose markers
it keeps. An aborted batch that is still its producer's last one is kept
whole, so the producer's state survives a reload.

Deleting or truncating a partition first aborts and pauses its cleaning
(states in-progress, aborted, paused), so the cleaner never writes into a
log that is going away. Native passes release the GIL.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from pylog import _native
from pylog.common.topic_partition import TopicPartition
from pylog.common.utils.time import Clock, now_ms
from pylog.errors import CorruptRecordError, InvalidRecordError, KafkaError, KafkaStorageError
from pylog.log.checkpoint import CLEANER_OFFSET_CHECKPOINT, OffsetCheckpointFile
from pylog.log.cleaned_transaction_metadata import CleanedTransactionMetadata
from pylog.log.config import BrokerLogConfig
from pylog.log.end_transaction_marker import EndTransactionMarker, with_delete_horizon
from pylog.log.files import (
    CLEANED_FILE_SUFFIX,
    SWAP_FILE_SUFFIX,
    log_file_name,
    offset_index_file_name,
    time_index_file_name,
    txn_index_file_name,
)
from pylog.log.log import Log
from pylog.log.segment import LogSegment

__all__ = [
    "CRASH_ENV",
    "Cleaner",
    "CleanerStats",
    "LogCleaner",
    "LogCleanerManager",
    "LogCleaningAbortedError",
    "LogCleaningState",
    "LogToClean",
    "Throttler",
]

_log = logging.getLogger("pylog.log.cleaner")

# Test hook: SIGKILL this process when the clean reaches the named phase
# ("cleaned", "swap", "deleted", "done"), so crash recovery is tested for real.
CRASH_ENV = "PYLOG_CLEANER_CRASH_AT"
_INT32_MAX = 2**31 - 1
_MAX_MAP_MEMORY = 2**31 - 1  # Kafka caps one thread's map at Int.MaxValue bytes
_HEADER = 12  # offset + length: enough to learn a batch's size


def _crash_point(phase: str) -> None:
    if os.environ.get(CRASH_ENV) == phase:
        _log.warning("crash hook: killing the process at cleaner phase %r", phase)
        os.kill(os.getpid(), signal.SIGKILL)


class LogCleaningAbortedError(KafkaError):
    """The partition's cleaning was aborted (deleted, truncated or moved)."""


class LogCleaningState(enum.Enum):
    IN_PROGRESS = "in-progress"
    ABORTED = "aborted"
    PAUSED = "paused"


@dataclass
class LogToClean:
    """A compacted log and where its dirty, cleanable range lies."""

    tp: TopicPartition
    log: Log
    log_dir: str
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    need_compaction_now: bool = False

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0


@dataclass
class CleanerStats:
    """What one clean did (Kafka's CleanerStats)."""

    map_bytes_read: int = 0
    map_records: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_written: int = 0
    segments: int = 0
    start_s: float = field(default_factory=time.monotonic)
    map_done_s: float = 0.0
    end_s: float = 0.0

    @property
    def elapsed_s(self) -> float:
        return (self.end_s or time.monotonic()) - self.start_s


class Throttler:
    """Keeps the bytes observed per second under a rate by sleeping (Kafka's
    Throttler: rate checked every ``check_interval_s``). Shared by all threads."""

    def __init__(self, rate_per_s: float, check_interval_s: float = 0.1) -> None:
        self.rate = rate_per_s
        self.check_interval_s = check_interval_s
        self._lock = threading.Lock()
        self._period_start = time.monotonic()
        self._observed = 0.0

    def maybe_throttle(self, observed: int) -> None:
        if self.rate >= 1e300:
            return
        with self._lock:
            self._observed += observed
            now = time.monotonic()
            elapsed = now - self._period_start
            if (
                elapsed < self.check_interval_s
                and self._observed < self.rate * self.check_interval_s
            ):
                return
            wanted = self._observed / self.rate
            sleep = wanted - elapsed
            self._period_start = now + max(sleep, 0.0)
            self._observed = 0.0
        if sleep > 0:
            time.sleep(sleep)


LogsFn = Callable[[], Mapping[TopicPartition, tuple[Log, str]]]


class LogCleanerManager:
    """Which logs need cleaning, their checkpoints, and their cleaning states."""

    def __init__(self, log_dirs: Sequence[str], logs: LogsFn, clock: Clock) -> None:
        self.log_dirs = list(log_dirs)
        self._logs = logs
        self._clock = clock
        self._cond = threading.Condition()
        self._states: dict[TopicPartition, tuple[LogCleaningState, int]] = {}
        self._checkpoint_lock = threading.Lock()
        self.uncleanable: set[TopicPartition] = set()
        self.max_dirty_percent = 0.0
        self.time_since_last_run_ms = 0

    # ------------------------------------------------------------ checkpoints

    def _checkpoint_file(self, log_dir: str) -> OffsetCheckpointFile:
        return OffsetCheckpointFile(os.path.join(log_dir, CLEANER_OFFSET_CHECKPOINT))

    def all_cleaner_checkpoints(self) -> dict[TopicPartition, int]:
        out: dict[TopicPartition, int] = {}
        with self._checkpoint_lock:
            for d in self.log_dirs:
                try:
                    out.update(self._checkpoint_file(d).read())
                except (KafkaStorageError, OSError):
                    _log.exception("reading the cleaner checkpoint of %s failed", d)
        return out

    def update_checkpoints(
        self, log_dir: str, update: tuple[TopicPartition, int] | None = None,
        remove: TopicPartition | None = None,
    ) -> None:  # fmt: skip
        """Set (or remove) one partition's entry; entries of logs gone are dropped."""
        with self._checkpoint_lock:
            cp = self._checkpoint_file(log_dir)
            try:
                current = cp.read()
            except (KafkaStorageError, OSError):
                current = {}
            live = {tp for tp, (_, d) in self._logs().items() if d == log_dir}
            entries = {tp: o for tp, o in current.items() if tp in live}
            if update is not None:
                entries[update[0]] = update[1]
            if remove is not None:
                entries.pop(remove, None)
            cp.write(entries)

    def maybe_truncate_checkpoint(self, log_dir: str, tp: TopicPartition, offset: int) -> None:
        """After a truncation: the clean head cannot reach past ``offset``."""
        with self._checkpoint_lock:
            try:
                current = self._checkpoint_file(log_dir).read()
            except (KafkaStorageError, OSError):
                return
        if current.get(tp, -1) > offset:
            self.update_checkpoints(log_dir, update=(tp, offset))

    # ------------------------------------------------------------ choosing

    def cleanable_offsets(
        self, log: Log, checkpoint: int | None, now: int
    ) -> tuple[int, int, bool, int, int]:
        """(first dirty offset, first uncleanable offset, compaction overdue,
        clean bytes, cleanable bytes), segment-aligned above the dirty start."""
        lso = log.log_start_offset
        leo = log.log_end_offset
        if checkpoint is None or checkpoint < lso or checkpoint > leo:
            if checkpoint is not None and checkpoint > leo:
                _log.warning(
                    "cleaner checkpoint %d of %s is past its log end %d; cleaning from the "
                    "log start", checkpoint, log.name, leo,
                )  # fmt: skip
            first_dirty = lso
        else:
            first_dirty = checkpoint
        segments = log.segments
        # Not past the last stable offset: an open transaction's outcome is
        # not known yet (Kafka bounds the dirty range by it too).
        hw = min(log.high_watermark, log.last_stable_offset)
        config = log.config
        min_lag = config.min_compaction_lag_ms
        first_uncleanable = segments[-1].base_offset
        clean_bytes = cleanable_bytes = 0
        first_dirty_segment: LogSegment | None = None
        for i, seg in enumerate(segments):
            nxt = segments[i + 1] if i + 1 < len(segments) else None
            if nxt is not None and nxt.base_offset <= lso:
                continue  # below the log start: retention removes it
            if nxt is not None and nxt.base_offset <= first_dirty:
                clean_bytes += seg.size
                continue
            if (
                nxt is None
                or nxt.base_offset > hw
                or (min_lag > 0 and seg.largest_timestamp > now - min_lag)
            ):
                first_uncleanable = seg.base_offset
                break
            if first_dirty_segment is None:
                first_dirty_segment = seg
            cleanable_bytes += seg.size
        first_uncleanable = max(first_uncleanable, first_dirty)
        overdue = False
        max_lag = config.max_compaction_lag_ms
        if first_dirty_segment is not None and max_lag < 2**63 - 1:
            first_ts = _first_batch_timestamp(first_dirty_segment)
            overdue = first_ts >= 0 and now - first_ts > max_lag
        return first_dirty, first_uncleanable, overdue, clean_bytes, cleanable_bytes

    def grab_filthiest_compacted_log(self) -> LogToClean | None:
        """The dirtiest cleanable log, now marked in progress; None if none is due."""
        now = self._clock()
        checkpoints = self.all_cleaner_checkpoints()
        with self._cond:
            candidates: list[LogToClean] = []
            for tp, (log, log_dir) in self._logs().items():
                if (
                    log.closed
                    or not log.config.compact
                    or tp in self._states
                    or tp in self.uncleanable
                ):
                    continue
                try:
                    first_dirty, uncleanable, overdue, clean, dirty = self.cleanable_offsets(
                        log, checkpoints.get(tp), now
                    )
                except KafkaStorageError:
                    continue
                candidates.append(
                    LogToClean(tp, log, log_dir, first_dirty, uncleanable, clean, dirty, overdue)
                )
            self.max_dirty_percent = (
                100.0 * max(c.cleanable_ratio for c in candidates) if candidates else 0.0
            )
            due = [c for c in candidates if c.cleanable_bytes > 0 and _due(c)]
            if not due:
                return None
            best = max(due, key=lambda c: c.cleanable_ratio)
            self._states[best.tp] = (LogCleaningState.IN_PROGRESS, 0)
            return best

    # ------------------------------------------------------------ states

    def state(self, tp: TopicPartition) -> LogCleaningState | None:
        with self._cond:
            s = self._states.get(tp)
            return s[0] if s is not None else None

    def abort_and_pause_cleaning(self, tp: TopicPartition, timeout_s: float | None = None) -> None:
        """Stop any clean of ``tp`` and keep it from starting until resumed;
        waits for a running clean to notice (it checks every buffer it reads),
        without limit unless ``timeout_s`` is given, as Kafka does."""
        with self._cond:
            s = self._states.get(tp)
            if s is None:
                self._states[tp] = (LogCleaningState.PAUSED, 1)
            elif s[0] is LogCleaningState.IN_PROGRESS:
                self._states[tp] = (LogCleaningState.ABORTED, 0)
            elif s[0] is LogCleaningState.PAUSED:
                self._states[tp] = (LogCleaningState.PAUSED, s[1] + 1)
            deadline = None if timeout_s is None else time.monotonic() + timeout_s
            while (cur := self._states.get(tp)) is None or cur[0] is not LogCleaningState.PAUSED:
                left = 0.1 if deadline is None else deadline - time.monotonic()
                if left <= 0:
                    raise KafkaError(f"cleaning of {tp} did not stop within {timeout_s}s")
                self._cond.wait(min(left, 0.1))

    def resume_cleaning(self, tps: Sequence[TopicPartition]) -> None:
        with self._cond:
            for tp in tps:
                s = self._states.get(tp)
                if s is None or s[0] is not LogCleaningState.PAUSED:
                    continue
                if s[1] <= 1:
                    del self._states[tp]
                else:
                    self._states[tp] = (LogCleaningState.PAUSED, s[1] - 1)
            self._cond.notify_all()

    def abort_cleaning(self, tp: TopicPartition) -> None:
        """Stop any clean of ``tp`` for good (the partition is going away)."""
        self.abort_and_pause_cleaning(tp)
        self.resume_cleaning([tp])
        self.uncleanable.discard(tp)

    def check_cleaning_aborted(self, tp: TopicPartition) -> None:
        with self._cond:
            s = self._states.get(tp)
            if s is not None and s[0] is LogCleaningState.ABORTED:
                raise LogCleaningAbortedError(f"cleaning of {tp} was aborted")

    def done_cleaning(self, tp: TopicPartition, log_dir: str, end_offset: int | None) -> None:
        """A clean finished (``end_offset`` = new checkpoint) or failed (None)."""
        with self._cond:
            s = self._states.get(tp)
            if s is not None and s[0] is LogCleaningState.IN_PROGRESS:
                if end_offset is not None:
                    self.update_checkpoints(log_dir, update=(tp, end_offset))
                del self._states[tp]
            elif s is not None and s[0] is LogCleaningState.ABORTED:
                self._states[tp] = (LogCleaningState.PAUSED, 1)
            self._cond.notify_all()


def _due(c: LogToClean) -> bool:
    return c.need_compaction_now or c.cleanable_ratio >= c.log.config.min_cleanable_dirty_ratio


def _first_batch_timestamp(seg: LogSegment) -> int:
    try:
        infos, _ = _native.read_batch_infos(seg.log_path, 0, 1, seg.size)
    except (KafkaError, OSError):
        return -1
    return infos[0].max_timestamp if infos else -1


def group_segments_by_size(
    segments: Sequence[LogSegment], max_size: int, max_index_size: int, next_bases: Sequence[int]
) -> list[list[LogSegment]]:
    """Consecutive segments merged while the sum of their sizes fits
    ``segment.bytes``, their index entries fit ``segment.index.bytes`` and the
    group's offsets fit 32-bit relative offsets. ``next_bases[i]`` is the
    offset after ``segments[i]`` (the next segment's base)."""
    groups: list[list[LogSegment]] = []
    i = 0
    while i < len(segments):
        group = [segments[i]]
        size = segments[i].size
        index_size = _index_bytes(segments[i])
        j = i + 1
        while j < len(segments):
            s = segments[j]
            if (
                size + s.size > max_size
                or index_size + _index_bytes(s) > max_index_size
                or next_bases[j] - 1 - group[0].base_offset > _INT32_MAX
            ):
                break
            group.append(s)
            size += s.size
            index_size += _index_bytes(s)
            j += 1
        groups.append(group)
        i = j
    return groups


def _index_bytes(seg: LogSegment) -> int:
    try:
        return max(seg.offset_index.size_in_bytes, seg.time_index.size_in_bytes)
    except (KafkaError, OSError):
        return 0


def _filter_transactions(
    data: bytes,
    txn: CleanedTransactionMetadata,
    *,
    now_ms: int,
    delete_retention_ms: int,
    active_producers: Mapping[int, int],
    copy: bool = True,
) -> tuple[bytes | memoryview, int, int]:
    """The whole batches at the start of ``data`` less those compaction drops
    for transactions (see the module's doc), the bytes those whole batches
    cover, and how many were dropped. Batches stay bytes; only their headers
    (``batch_infos``) and a marker's one record are read.

    A marker whose transaction has no data left goes as Kafka's cleaner does
    it (KIP-534): the first clean that finds it so writes the delete horizon
    (now + ``delete.retention.ms``) into its batch and keeps it, so that
    read_committed consumers still reading the transaction's range meet the
    marker; a clean after the horizon drops it. Without ``copy`` (the offset
    map's pass) markers are left as they are."""
    infos, covered = _native.batch_infos(data)
    view = memoryview(data)
    parts: list[memoryview | bytes] = []
    changed = 0
    run_start = 0
    for b in infos:
        if b.magic < 2 or b.producer_id < 0:
            continue
        batch = view[b.position : b.position + b.size]
        replacement: bytes | None = None
        if b.is_control:
            if b.records_count == 0:
                discard = True  # emptied by an older cleaner: its transaction is gone
            else:
                marker = EndTransactionMarker.from_batch(batch)
                is_abort = None if marker is None else not marker.is_commit
                discard = txn.on_control_batch_read(b.producer_id, b.last_offset, is_abort)
                if not copy:
                    discard = False
                elif discard and b.delete_horizon_ms < 0:
                    # Kafka's containsMarkerForEmptyTxn: set the horizon, keep it.
                    discard = False
                    replacement = with_delete_horizon(batch, now_ms + delete_retention_ms)
                elif discard:
                    discard = b.delete_horizon_ms <= now_ms
        else:
            discard = txn.on_batch_read(b.producer_id, b.last_offset, b.is_transactional)
            if discard and active_producers.get(b.producer_id) == b.last_offset:
                discard = False
        if discard or replacement is not None:
            parts.append(view[run_start : b.position])
            if replacement is not None:
                parts.append(replacement)
            run_start = b.position + b.size
            changed += 1
    if not changed:
        return view[:covered], covered, 0
    parts.append(view[run_start:covered])
    return b"".join(parts), covered, changed


class Cleaner:
    """One cleaner thread's worker: its offset map and I/O buffer."""

    def __init__(
        self,
        cleaner_id: int,
        offset_map: _native.OffsetMap,
        io_buffer_size: int,
        max_io_buffer_size: int,
        throttler: Throttler,
        check_done: Callable[[TopicPartition], None],
        clock: Clock = now_ms,
    ) -> None:
        self.id = cleaner_id
        self.offset_map = offset_map
        self.io_buffer_size = max(io_buffer_size, _HEADER)
        self.max_io_buffer_size = max(max_io_buffer_size, self.io_buffer_size)
        self.throttler = throttler
        self.check_done = check_done
        self.clock = clock

    def _chunks(self, seg: LogSegment, fn: Callable[[bytes, int], tuple[int, int, bool]]) -> None:
        """Feed ``fn(data, position)`` whole batches of ``seg`` a buffer at a
        time; ``fn`` returns (bytes consumed, size of a cut batch, stop)."""
        # Our own descriptor: retention may close the segment's while we read.
        fd = os.dup(seg.fileno())
        try:
            size = seg.size
            want = self.io_buffer_size
            pos = 0
            while pos < size:
                n = min(want, size - pos)
                data = os.pread(fd, n, pos)
                if not data:
                    break
                consumed, needed, stop = fn(data, pos)
                self.throttler.maybe_throttle(len(data))
                if stop:
                    return
                if consumed == 0:
                    if needed > len(data) and pos + needed <= size:
                        # A batch larger than the buffer: grow it (Kafka grows up
                        # to the max message size).
                        want = min(max(needed, want * 2), max(self.max_io_buffer_size, needed))
                        continue
                    break  # a torn tail: nothing more to read
                pos += consumed
        finally:
            os.close(fd)

    def build_offset_map(
        self, to_clean: LogToClean, start: int, end: int, stats: CleanerStats
    ) -> int:
        """Map the dirty range's keys; the offset the map reaches (exclusive)."""
        m = self.offset_map
        m.clear()
        segments = to_clean.log.segments
        limit = to_clean.log.config.max_decompressed_bytes
        txn = CleanedTransactionMetadata(to_clean.log.collect_aborted_transactions(start, end))
        full = False
        for i, seg in enumerate(segments):
            nxt = segments[i + 1].base_offset if i + 1 < len(segments) else None
            if seg.base_offset >= end:
                break
            if nxt is not None and nxt <= start:
                continue
            self.check_done(to_clean.tp)
            state = {"full": False}

            def feed(
                data: bytes, pos: int, state: dict[str, bool] = state
            ) -> tuple[int, int, bool]:
                self.check_done(to_clean.tp)
                # Control batches map no key: what becomes of markers is the
                # copy's business.
                kept, covered, _ = _filter_transactions(
                    data, txn, now_ms=0, delete_retention_ms=0, active_producers={}, copy=False
                )
                if covered == 0:  # no whole batch: the native pass says how much is needed
                    kept = data
                consumed, needed, is_full, done, records = _native.build_offset_map(
                    m, kept, start, end, pos, max_decompressed_size=limit
                )
                if covered and not (is_full or done):
                    consumed = covered
                stats.map_bytes_read += consumed
                stats.map_records += records
                state["full"] = is_full
                return consumed, needed, is_full or done

            self._chunks(seg, feed)
            if state["full"]:
                full = True
                break
        if full:
            return m.latest_offset + 1
        return end

    def clean(self, to_clean: LogToClean) -> tuple[int, CleanerStats]:
        """Compact the log; returns the new clean end (the next checkpoint)."""
        stats = CleanerStats()
        log = to_clean.log
        end = self.build_offset_map(
            to_clean, to_clean.first_dirty_offset, to_clean.first_uncleanable_offset, stats
        )
        stats.map_done_s = time.monotonic()
        _crash_point("map")
        segments = log.segments
        # KIP-534: a tombstone stays until the delete horizon its batch
        # carries, written by the first clean that keeps it (now +
        # delete.retention.ms); a segment's age plays no part, so a busy
        # log, whose cleaned segments keep merging with newer ones, still
        # loses its tombstones on time.
        now = self.clock()
        lso = log.log_start_offset
        chosen: list[LogSegment] = []
        next_bases: list[int] = []
        for i, seg in enumerate(segments[:-1]):
            nxt = segments[i + 1].base_offset
            if seg.base_offset >= end:
                break
            if nxt <= lso:
                continue
            chosen.append(seg)
            next_bases.append(nxt)
        config = log.config
        groups = group_segments_by_size(
            chosen, config.segment_bytes, config.segment_index_bytes, next_bases
        )
        active_producers = log.active_producer_last_offsets()
        for group in groups:
            self.clean_segments(to_clean, group, now, active_producers, stats)
        stats.end_s = time.monotonic()
        return end, stats

    def clean_segments(
        self,
        to_clean: LogToClean,
        group: Sequence[LogSegment],
        now: int,
        active_producers: dict[int, int],
        stats: CleanerStats,
    ) -> None:
        log = to_clean.log
        base = group[0].base_offset
        for name in (
            log_file_name,
            offset_index_file_name,
            time_index_file_name,
            txn_index_file_name,
        ):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name(log.dir, base, CLEANED_FILE_SUFFIX))  # an earlier failed clean's
        cleaned = LogSegment.open(log.dir, base, log.config, file_suffix=CLEANED_FILE_SUFFIX)
        m = self.offset_map
        limit = log.config.max_decompressed_bytes
        retention = log.config.delete_retention_ms
        txn = CleanedTransactionMetadata()
        try:
            mtime_ns = 0
            for i, seg in enumerate(group):
                self.check_done(to_clean.tp)
                mtime_ns = max(mtime_ns, seg.last_modified_ms * 1_000_000)
                upper = group[i + 1].base_offset if i + 1 < len(group) else seg.read_next_offset()
                txn.add_aborted_transactions(
                    log.collect_aborted_transactions(seg.base_offset, upper)
                )

                def feed(data: bytes, pos: int) -> tuple[int, int, bool]:
                    self.check_done(to_clean.tp)
                    kept_data, covered, _ = _filter_transactions(
                        data,
                        txn,
                        now_ms=now,
                        delete_retention_ms=retention,
                        active_producers=active_producers,
                    )
                    if covered == 0:  # no whole batch: the native pass says how much is needed
                        kept_data = data
                    consumed, needed, out, batches, read, kept = _native.clean_batches(
                        m, kept_data, now_ms=now, delete_retention_ms=retention,
                        active_producers=active_producers, position=pos,
                        max_decompressed_size=limit,
                    )  # fmt: skip
                    if covered:
                        consumed = covered
                    stats.bytes_read += consumed
                    stats.records_read += read
                    stats.records_written += kept
                    if out:
                        stats.bytes_written += len(out)
                        max_ts, max_ts_offset = -1, batches[-1].last_offset
                        for b in batches:
                            if b.max_timestamp > max_ts:
                                max_ts, max_ts_offset = b.max_timestamp, b.last_offset
                        cleaned.append(batches[-1].last_offset, max_ts, max_ts_offset, out, batches)
                        self.throttler.maybe_throttle(len(out))
                    return consumed, needed, False

                self._chunks(seg, feed)
                stats.segments += 1
            # The aborted transactions whose markers stay index the new segment.
            cleaned.txn_index.append_all(txn.cleaned_index)
            cleaned.on_became_inactive_segment()
            cleaned.flush()
            # The cleaned segment keeps its sources' age (time-based
            # retention goes by it).
            os.utime(cleaned.log_path, ns=(mtime_ns, mtime_ns))
            _crash_point("cleaned")
            self.check_done(to_clean.tp)
            log.replace_segments([cleaned], list(group), after_phase=_crash_point)
        except BaseException:
            with contextlib.suppress(Exception):
                if cleaned.has_suffix(CLEANED_FILE_SUFFIX) or cleaned.has_suffix(SWAP_FILE_SUFFIX):
                    cleaned.delete_if_exists()
            raise


class LogCleaner:
    """The cleaner threads (``log.cleaner.threads``) and their manager."""

    def __init__(
        self,
        config: BrokerLogConfig,
        log_dirs: Sequence[str],
        logs: LogsFn,
        clock: Clock = now_ms,
    ) -> None:
        self.config = config
        self.clock = clock
        self.manager = LogCleanerManager(log_dirs, logs, clock)
        self.throttler = Throttler(config.log_cleaner_io_max_bytes_per_second)
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        self._cleaners: dict[int, Cleaner] = {}
        self._lock = threading.Lock()
        self._last_run_ms = clock()
        self.bytes_cleaned = 0
        self.last_recopy_percent = 0.0
        self.last_clean_ms = 0.0
        self.cleans = 0

    def _cleaner(self, cleaner_id: int) -> Cleaner:
        with self._lock:
            c = self._cleaners.get(cleaner_id)
            if c is None:
                threads = max(1, self.config.log_cleaner_threads)
                memory = min(self.config.log_cleaner_dedupe_buffer_size // threads, _MAX_MAP_MEMORY)
                c = Cleaner(
                    cleaner_id,
                    _native.OffsetMap(memory, self.config.log_cleaner_io_buffer_load_factor),
                    self.config.log_cleaner_io_buffer_size // threads // 2,
                    self.config.default_log_config.max_message_bytes + _HEADER,
                    self.throttler,
                    self._check_done,
                    self.clock,
                )
                self._cleaners[cleaner_id] = c
            return c

    def _check_done(self, tp: TopicPartition) -> None:
        # Between segments: shutdown and aborts stop a clean before its swap.
        if self._stop.is_set():
            raise LogCleaningAbortedError(f"cleaning of {tp} stopped: the cleaner is shutting down")
        self.manager.check_cleaning_aborted(tp)

    # ------------------------------------------------------------ lifecycle

    def startup(self) -> None:
        self._stop.clear()
        for i in range(self.config.log_cleaner_threads):
            t = threading.Thread(
                target=self._run, args=(i,), name=f"kafka-log-cleaner-thread-{i}", daemon=True
            )
            self._threads.append(t)
            t.start()

    def shutdown(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=60)
        self._threads.clear()

    @property
    def running(self) -> bool:
        return any(t.is_alive() for t in self._threads)

    @staticmethod
    def reconfigure_needed(old: BrokerLogConfig, new: BrokerLogConfig) -> bool:
        """Whether a config change touches the cleaner (Kafka's
        LogCleaner.ReconfigurableConfigs, message.max.bytes among them)."""
        return (
            old.log_cleaner_threads != new.log_cleaner_threads
            or old.log_cleaner_dedupe_buffer_size != new.log_cleaner_dedupe_buffer_size
            or old.log_cleaner_io_buffer_size != new.log_cleaner_io_buffer_size
            or old.log_cleaner_io_buffer_load_factor != new.log_cleaner_io_buffer_load_factor
            or old.log_cleaner_io_max_bytes_per_second != new.log_cleaner_io_max_bytes_per_second
            or old.log_cleaner_backoff_ms != new.log_cleaner_backoff_ms
            or old.default_log_config.max_message_bytes != new.default_log_config.max_message_bytes
        )

    def reconfigure(self, config: BrokerLogConfig) -> None:
        """Restart the cleaner threads with ``config`` (as Kafka's LogCleaner
        does on a dynamic change): a clean in progress is aborted between two
        segments and its log taken up again later by the new threads."""
        running = bool(self._threads)
        self.shutdown()
        with self._lock:
            self.config = config
            self._cleaners.clear()
            self.throttler = Throttler(config.log_cleaner_io_max_bytes_per_second)
        if running:
            self.startup()
        _log.info("log cleaner reconfigured: %d threads", config.log_cleaner_threads)

    def _run(self, cleaner_id: int) -> None:
        backoff_s = self.config.log_cleaner_backoff_ms / 1000
        while not self._stop.is_set():
            try:
                cleaned = self.clean_once(cleaner_id)
            except Exception:
                _log.exception("cleaner thread %d failed", cleaner_id)
                cleaned = False
            if not cleaned:
                self._stop.wait(backoff_s)

    def clean_once(self, cleaner_id: int = 0) -> bool:
        """Clean the filthiest log, if one is due. True if one was cleaned."""
        to_clean = self.manager.grab_filthiest_compacted_log()
        now = self.clock()
        self.manager.time_since_last_run_ms = now - self._last_run_ms
        self._last_run_ms = now
        if to_clean is None:
            return False
        end: int | None = None
        try:
            end, stats = self._cleaner(cleaner_id).clean(to_clean)
            self._record(to_clean, stats)
        except LogCleaningAbortedError:
            _log.info("cleaning of %s aborted", to_clean.tp)
        except (CorruptRecordError, InvalidRecordError) as e:
            # Bad bytes in the log: retrying cannot help (Kafka's uncleanable partitions).
            _log.error("cleaning of %s failed; marking it uncleanable: %s", to_clean.tp, e)
            self.manager.uncleanable.add(to_clean.tp)
        except (KafkaError, OSError) as e:
            # Retention, a roll or a close changed the segments under the
            # clean, or the disk failed: nothing was swapped; try again later.
            if to_clean.log.closed:
                _log.info("cleaning of %s stopped: the log closed", to_clean.tp)
            else:
                _log.warning("cleaning of %s failed, will retry: %s", to_clean.tp, e)
        finally:
            self.manager.done_cleaning(to_clean.tp, to_clean.log_dir, end)
        if end is not None:
            _crash_point("checkpointed")
        return end is not None

    def _record(self, to_clean: LogToClean, stats: CleanerStats) -> None:
        self.cleans += 1
        self.bytes_cleaned += stats.bytes_read
        self.last_recopy_percent = (
            100.0 * stats.bytes_written / stats.bytes_read if stats.bytes_read else 0.0
        )
        self.last_clean_ms = stats.elapsed_s * 1000
        mb = stats.bytes_read / 1e6
        _log.info(
            "cleaned %s: %d segment(s), %.1f MB read, %.1f MB written (%.1f%%), "
            "%d of %d records kept, %d keys mapped, %.3fs",
            to_clean.tp, stats.segments, mb, stats.bytes_written / 1e6,
            self.last_recopy_percent, stats.records_written, stats.records_read,
            stats.map_records, stats.elapsed_s,
        )  # fmt: skip

    # ------------------------------------------------------------ partition events

    def abort_cleaning(self, tp: TopicPartition) -> None:
        self.manager.abort_cleaning(tp)

    def abort_and_pause_cleaning(self, tp: TopicPartition) -> None:
        self.manager.abort_and_pause_cleaning(tp)

    def resume_cleaning(self, tps: Sequence[TopicPartition]) -> None:
        self.manager.resume_cleaning(tps)

    def update_checkpoints(
        self, log_dir: str, update: tuple[TopicPartition, int] | None = None,
        remove: TopicPartition | None = None,
    ) -> None:  # fmt: skip
        self.manager.update_checkpoints(log_dir, update, remove)

    def maybe_truncate_checkpoint(self, log_dir: str, tp: TopicPartition, offset: int) -> None:
        self.manager.maybe_truncate_checkpoint(log_dir, tp, offset)

    # ------------------------------------------------------------ metrics

    def metrics(self) -> dict[str, float]:
        """Kafka's cleaner gauges: max-dirty-percent, cleaner-recopy-percent,
        time-since-last-run-ms, max-clean-time-secs, plus bytes cleaned."""
        return {
            "max_dirty_percent": self.manager.max_dirty_percent,
            "cleaner_recopy_percent": self.last_recopy_percent,
            "time_since_last_run_ms": float(self.clock() - self._last_run_ms),
            "max_clean_time_secs": self.last_clean_ms / 1000,
            "bytes_cleaned": float(self.bytes_cleaned),
            "uncleanable_partitions_count": float(len(self.manager.uncleanable)),
        }
