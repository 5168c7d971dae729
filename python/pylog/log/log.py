"""Log: one partition's replica — its offsets, producer state and leader
epochs over the segment files of a :class:`~pylog.log.local_log.LocalLog`.

This is Kafka's ``UnifiedLog`` (pylog keeps Kafka 2.x's name, ``Log``, which
every caller uses) and it sits on Kafka's seam: the LocalLog owns what is on
disk (segments, directory, log end offset, recovery point; roll, append of
numbered batches, read of a range, truncation, segment deletion, flush), and
this class decides what goes there. It validates and numbers a producer's
batches (the native core, one call per record set), checks and keeps the
producer state (``ProducerStateManager``) and the leader-epoch cache
(``LeaderEpochFileCache``), decides when to roll, and keeps the offsets a
consumer sees:

* the **log end offset** (LEO): the offset the next record will get (the
  LocalLog's);
* the **high watermark** (HW): the end of what every in-sync replica has,
  kept apart from the LEO (``log_start_offset <= HW <= LEO``) and advanced by
  the replication layer, never by appends;
* the **log start offset**: the first offset a consumer may read; retention
  and DeleteRecords move it forward;
* the **recovery point** (the LocalLog's): offsets below it are known to be
  on disk (fsynced); after an unclean shutdown only segments past it are
  re-validated.

Leaders append through :meth:`Log.append_as_leader` (the native validator
assigns offsets in place), followers through :meth:`Log.append_as_follower`
(offsets kept, checked to continue the log). Reads return zero-copy slices
(``FetchDataInfo``). Retention (:mod:`pylog.log.retention` decides which
segments) removes whole segments through the LocalLog. Loading a directory
is ``loader.py``'s.

Every public method takes the Log's lock, which also guards its LocalLog:
the request handlers and the background tasks (retention, flush, roll
flushes, on the one :class:`~pylog.log.scheduler.Scheduler`) share a Log. A
failing disk surfaces as KafkaStorageError and leaves the log as it was.
"""

from __future__ import annotations

import enum
import logging
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pylog import _native
from pylog.common.utils.time import Clock, now_ms
from pylog.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    InvalidTxnStateError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    RecordListTooLargeError,
    UnexpectedAppendOffsetError,
)
from pylog.log import retention
from pylog.log.config import LogConfig
from pylog.log.end_transaction_marker import EndTransactionMarker, build_marker_batch
from pylog.log.fetch import FetchDataInfo
from pylog.log.leader_epoch import LeaderEpochFileCache
from pylog.log.loader import LogLoader
from pylog.log.local_log import LocalLog, storage_errors
from pylog.log.offset_metadata import LogOffsetMetadata
from pylog.log.producer_state import BatchMetadata, CompletedTxn, ProducerStateManager
from pylog.log.scheduler import Scheduler, default_scheduler
from pylog.log.segment import LogSegment
from pylog.log.transaction_index import AbortedTxn
from pylog.log.verification_guard import SENTINEL, VerificationGuard

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
    """How far a read may go: the log end (followers), the high watermark
    (read_uncommitted consumers) or the last stable offset (read_committed
    consumers, who also get the aborted transactions of the range read)."""

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


def _marker_in(segment: LogSegment, batch: _native.BatchInfo) -> EndTransactionMarker | None:
    """The end marker of a control batch of ``segment`` (a tiny positioned read)."""
    with storage_errors("reading", segment.log_path):
        raw = os.pread(segment.fileno(), batch.size, batch.position)
    return EndTransactionMarker.from_batch(raw)


class Log:
    """A partition's log (Kafka's UnifiedLog). Open one with :meth:`open`."""

    def __init__(
        self,
        local_log: LocalLog,
        *,
        log_start_offset: int,
        producer_state: ProducerStateManager,
        leader_epoch_cache: LeaderEpochFileCache,
        scheduler: Scheduler,
        clock: Clock = now_ms,
    ) -> None:
        self._lock = threading.RLock()
        self._local = local_log
        self._log_start_offset = log_start_offset
        self._high_watermark = LogOffsetMetadata(log_start_offset)
        self._producer_state = producer_state
        self._leader_epoch_cache = leader_epoch_cache
        self._scheduler = scheduler
        self._clock = clock

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
        producer_state: ProducerStateManager | None = None,
        leader_epoch_cache: LeaderEpochFileCache | None = None,
        producer_id_expiration_ms: int = 86_400_000,
    ) -> Log:
        """Open (creating if needed) the log in ``dir``, loading its segments.

        Loading is ``LogLoader``'s (swap/cleaned/deleted files, index checks,
        recovery of what lies past ``recovery_point`` after an unclean shutdown,
        producer-state rebuild). The producer state manager and leader epoch
        cache are made here unless given; without a ``scheduler`` (a Log
        opened outside a LogManager) the process's shared one runs the
        background work.
        """
        config = config if config is not None else LogConfig()
        scheduler = scheduler if scheduler is not None else default_scheduler()
        with storage_errors("creating log directory", dir):
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
            producer_state,
            leader_epoch_cache,
            clock=clock,
        ).load()
        local_log = LocalLog(
            dir,
            config,
            loaded.segments,
            recovery_point=loaded.recovery_point,
            next_offset_metadata=loaded.next_offset_metadata,
            scheduler=scheduler,
            clock=clock,
        )
        log = cls(
            local_log,
            log_start_offset=loaded.log_start_offset,
            producer_state=producer_state,
            leader_epoch_cache=leader_epoch_cache,
            scheduler=scheduler,
            clock=clock,
        )
        with log._lock, storage_errors("loading", dir):
            local_log.active_segment.resize_indexes(config.segment_index_bytes)
            leader_epoch_cache.truncate_from_end(log.log_end_offset)
            leader_epoch_cache.truncate_from_start(log.log_start_offset)
        return log

    # ------------------------------------------------------------------ state

    @property
    def local_log(self) -> LocalLog:
        """The segment files under this log (use with the log's lock held)."""
        return self._local

    @property
    def dir(self) -> str:
        return self._local.dir

    @property
    def name(self) -> str:
        return self._local.name

    @property
    def config(self) -> LogConfig:
        return self._local.config

    def update_config(self, config: LogConfig) -> None:
        """Apply a topic's changed settings; they take effect from the next append or roll."""
        with self._lock:
            self._local.config = config

    @property
    def log_end_offset(self) -> int:
        return self._local.log_end_offset

    @property
    def log_end_offset_metadata(self) -> LogOffsetMetadata:
        return self._local.log_end_offset_metadata

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def recovery_point(self) -> int:
        return self._local.recovery_point

    @property
    def high_watermark(self) -> int:
        return self._high_watermark.message_offset

    @property
    def last_flush_time(self) -> int:
        return self._local.last_flush_time

    @property
    def unflushed_messages(self) -> int:
        return self._local.unflushed_messages

    @property
    def producer_state_manager(self) -> ProducerStateManager:
        return self._producer_state

    @property
    def leader_epoch_cache(self) -> LeaderEpochFileCache:
        return self._leader_epoch_cache

    @property
    def latest_epoch(self) -> int | None:
        return self._leader_epoch_cache.latest_epoch

    @property
    def segments(self) -> list[LogSegment]:
        """The segments, oldest first (a copy)."""
        with self._lock:
            return self._local.segments.values()

    @property
    def num_segments(self) -> int:
        return len(self._local.segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._local.active_segment

    @property
    def size(self) -> int:
        """Bytes of all segments."""
        with self._lock:
            return self._local.segments.size_in_bytes()

    def floor_segment(self, offset: int) -> LogSegment | None:
        """The segment whose range holds ``offset`` (greatest base <= offset)."""
        with self._lock:
            return self._local.segments.floor_segment(offset)

    # ------------------------------------------------------------------ high watermark

    def update_high_watermark(self, hw: int | LogOffsetMetadata) -> int:
        """Set the HW, clamped to ``[log_start_offset, log_end_offset]``; returns it."""
        with self._lock:
            offset = hw.message_offset if isinstance(hw, LogOffsetMetadata) else hw
            leo = self._local.log_end_offset
            if offset <= self._log_start_offset:
                offset = self._log_start_offset
                meta = LogOffsetMetadata(offset)
            elif offset >= leo:
                offset = leo
                meta = self._local.log_end_offset_metadata
            elif isinstance(hw, LogOffsetMetadata):
                meta = hw
            else:
                meta = LogOffsetMetadata(offset)
            self._high_watermark = meta
            self._producer_state.on_high_watermark_updated(offset)
            return offset

    def maybe_increment_high_watermark(self, new_hw: LogOffsetMetadata) -> LogOffsetMetadata | None:
        """Move the HW forward (never back) to ``new_hw``; returns the old one
        when it moved. A HW beyond the LEO is refused."""
        with self._lock:
            if new_hw.message_offset > self._local.log_end_offset:
                raise ValueError(
                    f"high watermark {new_hw} would pass the log end offset "
                    f"{self._local.log_end_offset} of {self.dir}"
                )
            old = self._fetch_high_watermark_metadata()
            if old.message_offset < new_hw.message_offset or (
                old.message_offset == new_hw.message_offset
                and not new_hw.message_offset_only
                and old.on_older_segment(new_hw)
            ):
                self._high_watermark = new_hw
                self._producer_state.on_high_watermark_updated(new_hw.message_offset)
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

    # ------------------------------------------------------------------ last stable offset

    @property
    def last_stable_offset(self) -> int:
        """The LSO: the first offset of the earliest transaction still open (or
        completed with its marker not yet below the HW), bounded by the HW
        (Kafka's UnifiedLog.lastStableOffset). Every offset below it belongs
        to a decided transaction or none."""
        with self._lock:
            return self._last_stable_offset()

    def _last_stable_offset(self) -> int:
        hw = self._high_watermark.message_offset
        first = self._producer_state.first_unstable_offset
        if first is None:
            return hw
        return min(max(first, self._log_start_offset), hw)

    def _last_stable_offset_metadata(self) -> LogOffsetMetadata:
        hw = self._fetch_high_watermark_metadata()
        lso = self._last_stable_offset()
        if lso >= hw.message_offset:
            return hw
        return self._convert_to_offset_metadata(lso)

    @property
    def last_stable_offset_metadata(self) -> LogOffsetMetadata:
        """The LSO with its segment and position (a bound for reads)."""
        with self._lock:
            return self._last_stable_offset_metadata()

    def collect_aborted_transactions(
        self, start_offset: int, upper_bound_offset: int
    ) -> list[AbortedTxn]:
        """The aborted transactions overlapping ``[start_offset,
        upper_bound_offset)`` from the ``.txnindex`` of the segment holding
        ``start_offset`` and those after it, until one entry's LSO shows no
        later one can matter (Kafka's collectAbortedTransactions)."""
        with self._lock:
            return self._collect_aborted(start_offset, upper_bound_offset)

    def _collect_aborted(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        out: list[AbortedTxn] = []
        for segment in self._local.segments.segments_from(start_offset):
            # (the index names its file in a KafkaStorageError itself)
            found, complete = segment.txn_index.collect_aborted_txns(
                start_offset, upper_bound_offset
            )
            out.extend(found)
            if complete:
                break
        return out

    def _fetch_upper_bound(self, fetched: FetchDataInfo, bound: int) -> int:
        """An offset past the records of a read (Kafka's addAbortedTransactions):
        the first index entry after the slice, else the next segment's base,
        else the bound of the read (the LSO). A loose bound only lists
        transactions the consumer never meets; a tight one keeps the list to
        what the slice holds."""
        segment = fetched.records.source
        if not isinstance(segment, LogSegment):
            return bound
        records = fetched.records
        upper = None
        if records.position + records.size < segment.size:  # else: read to the segment's end
            upper = segment.fetch_upper_bound_offset(records.position, records.size)
        if upper is None:
            later = self._local.segments.higher_segments(segment.base_offset)
            upper = later[0].base_offset if later else bound
        return min(upper, bound)

    def _convert_to_offset_metadata(self, offset: int) -> LogOffsetMetadata:
        """Locate ``offset`` (segment and byte position); OffsetOutOfRangeError
        outside the log."""
        local = self._local
        if offset == local.log_end_offset:
            return local.log_end_offset_metadata
        if offset < self._log_start_offset or offset > local.log_end_offset:
            raise self._out_of_range(offset)
        return local.convert_to_offset_metadata(offset)

    def _out_of_range(self, offset: int) -> OffsetOutOfRangeError:
        return self._local.out_of_range(offset, self._log_start_offset)

    # ------------------------------------------------------------------ append

    def append_as_leader(
        self,
        records: bytes | bytearray | memoryview,
        leader_epoch: int,
        *,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        verification_guard: VerificationGuard | None = None,
        transaction_version: int = 0,
    ) -> LogAppendInfo:
        """Validate a produce request's records, give them offsets from the LEO,
        and append them (``transaction_version``: a coordinator's marker's).

        ``verification_guard`` (KIP-890, set when the broker verifies
        transactions): a transactional batch of a producer with no open
        transaction here passes only with the guard that
        :meth:`maybe_start_transaction_verification` made and that no
        transactional append has cleared since (InvalidTxnStateError).

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
        if origin is AppendOrigin.COORDINATOR:
            marker = self._end_txn_marker_of(buf)
            if marker is not None:
                return self._append_end_txn_marker(
                    marker[0], marker[1], leader_epoch, transaction_version
                )
        config = self._local.config
        if len(buf) > _MAGIC_POSITION and buf[_MAGIC_POSITION] < 2:
            buf = _native.convert_legacy_to_v2(
                buf, max_decompressed_size=config.max_decompressed_bytes
            )
        target_codec = _TOPIC_CODECS.get(config.compression_type)
        if target_codec is not None:
            buf = _recompress(
                buf,
                target_codec,
                config.max_message_bytes,
                config.max_decompressed_bytes,
            )
        with self._lock:
            local = self._local
            if local.closed:  # a test first: Produce and Fetch come here, and most logs are open
                local.check_open()
            config = local.config
            now = self._clock()
            try:
                info = _native.validate_and_assign_offsets(
                    buf,
                    base_offset=local.log_end_offset,
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
            if verification_guard is not None:
                self._check_verified(info, verification_guard)
            self._append_validated(buf, info, now)
            self._maybe_assign_epoch(leader_epoch, info.first_offset)
            return self._append_info(info, leader_epoch, now if config.log_append_time else -1)

    @staticmethod
    def _end_txn_marker_of(
        buf: bytearray | memoryview,
    ) -> tuple[_native.BatchInfo, EndTransactionMarker] | None:
        """The transaction coordinator's control batch in ``buf`` and its
        marker; None when ``buf`` holds data (a group coordinator's append).
        CorruptRecordError for a control batch that is not exactly one end
        marker of a producer (Kafka's EndTransactionMarker.deserialize)."""
        infos, covered = _native.batch_infos(buf, 2)
        if not infos or not infos[0].is_control:
            return None
        b = infos[0]
        if len(infos) != 1 or covered != len(buf) or b.magic < 2:
            raise CorruptRecordError("a transaction marker must be one control batch alone")
        if b.producer_id < 0 or b.records_count != 1:
            raise CorruptRecordError(
                f"a transaction marker needs a producer id and one record, not "
                f"producer id {b.producer_id} and {b.records_count} record(s)"
            )
        try:
            records = _native.decode_records(buf)
        except Exception as e:
            raise CorruptRecordError(f"transaction marker does not decode: {e}") from e
        if len(records) != 1:
            raise CorruptRecordError("a transaction marker holds one record")
        return b, EndTransactionMarker.from_record(records[0].key, records[0].value)

    def _append_end_txn_marker(
        self,
        batch: _native.BatchInfo,
        marker: EndTransactionMarker,
        leader_epoch: int,
        transaction_version: int = 0,
    ) -> LogAppendInfo:
        """Write a COMMIT/ABORT for the transaction coordinator (Kafka's
        AppendOrigin.COORDINATOR): no sequence check; a producer epoch or a
        coordinator epoch older than the partition knows is refused. The
        batch is built anew at the LEO (offset, leader epoch, the broker's
        time), so nothing the caller framed is trusted."""
        with self._lock:
            local = self._local
            local.check_open()
            ps = self._producer_state
            ps.check_end_txn_marker(
                batch.producer_id,
                batch.producer_epoch,
                marker.coordinator_epoch,
                transaction_version=transaction_version,
            )
            now = self._clock()
            data = build_marker_batch(
                batch.producer_id,
                batch.producer_epoch,
                marker,
                timestamp_ms=now,
                base_offset=local.log_end_offset,
                partition_leader_epoch=leader_epoch,
            )
            info = _native.analyze_records(data, max_batch_size=local.config.max_message_bytes)
            self._append_validated(data, info, now)
            self._maybe_assign_epoch(leader_epoch, info.first_offset)
            return self._append_info(info, leader_epoch, -1)

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
        info = _native.analyze_records(view, max_batch_size=self._local.config.max_message_bytes)
        if info.num_batches == 0:
            return self._empty_append_info()
        with self._lock:
            local = self._local
            if local.closed:
                local.check_open()
            leo = local.log_end_offset
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
        if epoch >= 0:
            cache = self._leader_epoch_cache
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

    def _check_producer_batches(
        self, info: _native.AppendInfo, origin: AppendOrigin
    ) -> BatchMetadata | None:
        """The original batch's metadata if this set repeats an appended one."""
        ps = self._producer_state
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

    def _check_verified(self, info: _native.AppendInfo, guard: VerificationGuard) -> None:
        """Kafka's UnifiedLog check before a verified append: a transactional
        batch that would open a transaction needs the guard its
        verification made, still in place."""
        ps = self._producer_state
        for b in info.batches:
            if not b.is_transactional or b.is_control or b.producer_id < 0:
                continue
            if ps.has_ongoing_transaction(b.producer_id, b.producer_epoch):
                continue
            if not ps.verification_guard(b.producer_id).verify(guard):
                raise InvalidTxnStateError(
                    f"producer {b.producer_id}'s transactional batch for {self.name} is not "
                    f"part of an ongoing transaction (not verified with the coordinator)"
                )

    def maybe_start_transaction_verification(
        self, producer_id: int, sequence: int, epoch: int
    ) -> VerificationGuard:
        """KIP-890 part 1 (Kafka's maybeStartTransactionVerification): SENTINEL
        when the producer's transaction is already open here (nothing to ask);
        else the guard of a verification to ask the coordinator for."""
        ps = self._producer_state
        if ps.has_ongoing_transaction(producer_id, epoch):
            return SENTINEL
        return ps.maybe_create_verification_state_entry(
            producer_id, sequence, epoch, self._clock()
        ).guard

    def _duplicate_info(
        self, info: _native.AppendInfo, dup: BatchMetadata, epoch: int
    ) -> LogAppendInfo:
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
        """Roll if due, write through the LocalLog, then move the producer
        state (lock held)."""
        size = info.valid_bytes
        local = self._local
        config = local.config
        if size > config.segment_bytes:
            raise RecordListTooLargeError(
                f"a record set of {size} bytes cannot fit a segment of "
                f"segment.bytes={config.segment_bytes} in {self.name}"
            )
        # Kafka's maybeRoll, inline: every append passes here.
        if local.active_segment.should_roll(
            max_segment_ms=config.segment_ms,
            max_segment_bytes=config.segment_bytes,
            max_timestamp_in_messages=info.max_timestamp,
            max_offset_in_messages=info.last_offset,
            messages_size=size,
            now_ms=now,
        ):
            self._roll(info.first_offset)
        data = buf if size == len(buf) else memoryview(buf)[:size]
        local.append(
            info.last_offset, info.max_timestamp, info.offset_of_max_timestamp, data, info.batches
        )
        ps = self._producer_state
        for b in info.batches:
            if b.producer_id < 0:
                continue
            if not b.is_control:
                ps.update(b, now)
                continue
            marker = EndTransactionMarker.from_batch(
                memoryview(data)[b.position : b.position + b.size]
            )
            completed = ps.update(
                b,
                now,
                coordinator_epoch=None if marker is None else marker.coordinator_epoch,
                is_abort=marker is not None and not marker.is_commit,
            )
            if completed is not None and completed.is_aborted:
                self._index_aborted(completed)
        ps.update_map_end_offset(info.last_offset + 1)
        if local.unflushed_messages >= config.flush_messages:
            self.flush()

    def _index_aborted(self, txn: CompletedTxn) -> None:
        """An ABORT just written: its entry goes to the active segment's
        ``.txnindex`` (where the marker lies), as Kafka's updateTxnIndex."""
        segment = self._local.active_segment
        with storage_errors("appending to the transaction index of", segment.log_path):
            segment.txn_index.append(
                AbortedTxn(
                    txn.producer_id, txn.first_offset, txn.last_offset, txn.last_stable_offset
                )
            )

    # ------------------------------------------------------------------ roll

    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at ``max(expected_next_offset, LEO)``."""
        with self._lock:
            self._local.check_open()
            return self._roll(expected_next_offset)

    def _roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """The LocalLog rolls; the producer state is snapshotted at the new
        base offset and the segments before it flushed in the background (as
        UnifiedLog.roll does)."""
        segment = self._local.roll(expected_next_offset)
        new_offset = segment.base_offset
        ps = self._producer_state
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
            if not self._local.closed:
                _log.error("flush of %s up to %d failed: %s", self.dir, offset, e)

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
            local = self._local
            if local.closed:
                local.check_open()
            end = local.log_end_offset_metadata
            if start_offset < self._log_start_offset or start_offset > end.message_offset:
                raise self._out_of_range(start_offset)
            if isolation is FetchIsolation.LOG_END:
                bound = end
            elif isolation is FetchIsolation.TXN_COMMITTED:
                bound = self._last_stable_offset_metadata()
            else:
                bound = self._fetch_high_watermark_metadata()
            if start_offset == bound.message_offset:
                return FetchDataInfo(bound)
            if start_offset > bound.message_offset:
                return FetchDataInfo(self._convert_to_offset_metadata(start_offset))
            fetched = local.read(start_offset, max_length, bound, min_one_message)
            if isolation is not FetchIsolation.TXN_COMMITTED or fetched.is_empty:
                return fetched
            aborted = self._collect_aborted(
                start_offset, self._fetch_upper_bound(fetched, bound.message_offset)
            )
            return FetchDataInfo(
                fetched.fetch_offset_metadata,
                fetched.records,
                fetched.first_entry_incomplete,
                aborted,
            )

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
            self._local.check_open()
            lso = self._log_start_offset
            for segment, nxt in self._local.segments.with_next():
                if nxt is not None and nxt.base_offset <= lso:
                    continue  # wholly below the log start offset
                if 0 <= segment.max_timestamp_so_far < timestamp:
                    continue
                with storage_errors("searching", segment.log_path):
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
            local = self._local
            local.check_open()
            if target_offset >= local.log_end_offset:
                # Nothing to remove, but the epoch cache may end with an epoch
                # that starts at the LEO and holds no record: this broker led
                # briefly, appended nothing, and another leader was elected
                # (Kafka's UnifiedLog.truncateTo trims it the same way). Left
                # there, every fetch names that epoch, the leader answers that
                # it diverges, and the follower never catches up.
                self._leader_epoch_cache.truncate_from_end(local.log_end_offset)
                return False
            if local.segments.first_segment.base_offset > target_offset:
                self._truncate_fully_and_start_at(target_offset)
                return True
            local.truncate_to(target_offset)
            self._leader_epoch_cache.truncate_from_end(target_offset)
            self._log_start_offset = min(self._log_start_offset, target_offset)
            self._rebuild_producer_state(target_offset)
            if self.high_watermark >= target_offset:
                self._high_watermark = local.log_end_offset_metadata
                self._producer_state.on_high_watermark_updated(target_offset)
            return True

    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        """Drop every segment and start empty at ``new_offset`` (a follower too
        far behind the leader's log start)."""
        if new_offset < 0:
            raise ValueError(f"cannot restart {self.name} at a negative offset {new_offset}")
        with self._lock:
            self._local.check_open()
            self._truncate_fully_and_start_at(new_offset)

    def _truncate_fully_and_start_at(self, new_offset: int) -> None:
        self._local.truncate_fully_and_start_at(new_offset)
        self._log_start_offset = new_offset
        self._high_watermark = self._local.log_end_offset_metadata
        self._leader_epoch_cache.clear()
        ps = self._producer_state
        ps.truncate_fully(new_offset)
        ps.update_map_end_offset(new_offset)

    def _rebuild_producer_state(self, last_offset: int) -> None:
        """Producer state as of ``last_offset``: the newest snapshot at or below
        it, then the producer batches after the snapshot replayed from the log."""
        ps = self._producer_state
        ps.truncate_and_reload(self._log_start_offset, last_offset, self._clock())
        start = ps.map_end_offset
        if start < last_offset:
            for segment in self._local.segments.segments_from(start):
                found = segment.translate_offset(start) if segment.base_offset <= start else None
                position = found[1] if found is not None else 0
                for b in segment.batch_infos(position):
                    if b.last_offset >= last_offset:
                        break
                    if b.last_offset >= start and b.producer_id >= 0:
                        # The .txnindex below last_offset is kept as it is:
                        # only the producer state is replayed.
                        marker = _marker_in(segment, b) if b.is_control else None
                        ps.update(
                            b,
                            b.max_timestamp,
                            coordinator_epoch=None if marker is None else marker.coordinator_epoch,
                            is_abort=marker is not None and not marker.is_commit,
                        )
        ps.update_map_end_offset(last_offset)

    # ------------------------------------------------------------------ flush

    def flush(self, offset: int | None = None) -> None:
        """Make every offset below ``offset`` (default: the LEO) durable and move
        the recovery point there. The fsyncs run outside the lock, so appends
        go on meanwhile."""
        with self._lock:
            local = self._local
            local.check_open()
            leo = local.log_end_offset
            target = leo if offset is None else min(offset, leo)
            if target <= local.recovery_point:
                return
            to_flush = local.segments_to_flush(target)
        LocalLog.flush_segments(to_flush)
        with self._lock:
            local.mark_flushed(target)

    # ------------------------------------------------------------------ retention

    def delete_old_segments(self) -> int:
        """Apply retention: segments wholly below the log start offset, then, under
        the delete policy, by ``retention.bytes`` and ``retention.ms``. Only
        segments below the HW go. Returns how many segments were removed."""
        with self._lock:
            self._local.check_open()
            config = self._local.config
            deleted = self._delete_breached(
                retention.log_start_offset_breached(self._log_start_offset), "log start offset"
            )
            if config.delete:
                deleted += self._delete_breached(
                    retention.retention_size_breached(self._local.segments, config.retention_bytes),
                    "retention.bytes",
                )
                deleted += self._delete_breached(
                    retention.retention_ms_breached(config.retention_ms, self._clock),
                    "retention.ms",
                )
            return deleted

    def _delete_breached(self, breached: retention.Breach | None, reason: str) -> int:
        if breached is None:
            return 0
        deletable = retention.deletable_segments(
            self._local.segments, breached, self.high_watermark, self._local.log_end_offset
        )
        return self._delete_segments(deletable, reason)

    def _delete_segments(self, deletable: list[LogSegment], reason: str) -> int:
        if not deletable:
            return 0
        local = self._local
        doomed = deletable
        if len(deletable) == len(local.segments):
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
        with storage_errors("deleting segments of", local.dir):
            local.remove_and_delete_segments(doomed)
        first_base = local.segments.first_segment.base_offset
        self._increment_log_start_offset(first_base)
        self._producer_state.delete_snapshots_before(first_base)
        return len(deletable)

    def maybe_increment_log_start_offset(self, new_log_start_offset: int) -> bool:
        """Move the log start offset forward (DeleteRecords); segments wholly
        below it go at the next retention run. It may not pass the HW."""
        with self._lock:
            self._local.check_open()
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
        self._leader_epoch_cache.truncate_from_start(new_log_start_offset)
        if self._local.recovery_point < new_log_start_offset:
            self._local.update_recovery_point(new_log_start_offset)
        if self._high_watermark.message_offset < new_log_start_offset:
            self._high_watermark = LogOffsetMetadata(new_log_start_offset)
            self._producer_state.on_high_watermark_updated(new_log_start_offset)
        return True

    # ------------------------------------------------------------------ compaction

    def active_producer_last_offsets(self) -> dict[int, int]:
        """Producer id -> last data offset of every producer the log remembers:
        compaction keeps (at least the header of) each one's last batch."""
        with self._lock:
            active = self._producer_state.active_producers()
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
            self._local.check_open()
            self._local.replace_segments(new_segments, old_segments, hook)

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Snapshot the producer state at the LEO and close every segment
        (indexes and a preallocated file trimmed). Idempotent."""
        with self._lock:
            local = self._local
            if local.closed:
                return
            local.closed = True
            try:
                self._producer_state.take_snapshot(local.log_end_offset)
            finally:
                local.close()

    def close_handlers(self) -> None:
        """Release every file without trimming (after a disk failure)."""
        with self._lock:
            self._local.close_handlers()

    def delete(self) -> None:
        """Remove every segment file and the directory (the partition is gone)."""
        with self._lock:
            self._local.delete_all_segments()
            self._leader_epoch_cache.clear()
            self._local.delete_dir()

    @property
    def closed(self) -> bool:
        return self._local.closed

    def __repr__(self) -> str:
        return (
            f"Log(dir={self.dir!r}, log_start_offset={self._log_start_offset}, "
            f"log_end_offset={self.log_end_offset}, high_watermark={self.high_watermark}, "
            f"segments={len(self._local.segments)})"
        )
