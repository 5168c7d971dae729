"""LogSegment: one ``.log`` file of record batches and its two indexes.

A segment holds the batches with offsets from its base offset up to the next
segment's base. Bytes are appended with one ``pwrite`` per append; the offset
index (``.index``) and time index (``.timeindex``) get an entry only after
``index.interval.bytes`` have been written since the last one, so they stay
sparse and small. Reads never copy: they return a (descriptor, position, size)
slice of the file. Everything that parses batches is native (``pylog._native``).

The segment is not thread-safe on its own; ``Log`` serialises access to it.
"""

from __future__ import annotations

import contextlib
import errno as errno_mod
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pylog import _native
from pylog.common.utils.time import Clock, now_ms
from pylog.errors import KafkaStorageError, LogSegmentOffsetOverflowError
from pylog.log.fetch import FetchDataInfo
from pylog.log.files import (
    DELETED_FILE_SUFFIX,
    log_file_name,
    offset_index_file_name,
    time_index_file_name,
    txn_index_file_name,
)
from pylog.log.offset_metadata import LogOffsetMetadata
from pylog.log.transaction_index import TransactionIndex
from pylog.records import EMPTY_RECORDS, FileRecords

if TYPE_CHECKING:
    from pylog.log.config import LogConfig
    from pylog.log.leader_epoch import LeaderEpochFileCache
    from pylog.log.producer_state import ProducerStateManager

__all__ = [
    "DELETED_FILE_SUFFIX",
    "LogSegment",
    "log_file_name",
    "offset_index_file_name",
    "time_index_file_name",
]

_INT32_MAX = 2**31 - 1
_NO_TIMESTAMP = -1
_Buffer = bytes | bytearray | memoryview


def _storage_error(what: str, path: str, e: OSError) -> KafkaStorageError:
    return KafkaStorageError(f"{what} {path}: {e.strerror or e}", e.errno)


class LogSegment:
    """A segment's files and its in-memory facts (size, max timestamp, roll clock).

    Build one with :meth:`open`. The indexes are opened (mapped) on first use, so
    loading a partition with thousands of segments maps nothing until they are read.
    """

    def __init__(
        self,
        dir: str,
        base_offset: int,
        fd: int,
        size: int,
        *,
        index_interval_bytes: int,
        max_index_size: int,
        roll_jitter_ms: int = 0,
        file_suffix: str = "",
        created_ms: int | None = None,
        preallocated: bool = False,
        clock: Clock = now_ms,
    ) -> None:
        self.dir = dir
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.max_index_size = max_index_size
        self.roll_jitter_ms = roll_jitter_ms
        self._suffix = file_suffix
        self._fd = fd
        self._size = size
        self._preallocated = preallocated
        self._clock = clock
        self.created_ms = clock() if created_ms is None else created_ms
        self._offset_index: _native.OffsetIndex | None = None
        self._time_index: _native.TimeIndex | None = None
        self._txn_index: TransactionIndex | None = None
        self._bytes_since_last_index_entry = 0
        # (timestamp, offset) of the largest timestamp; None until loaded from the time index.
        self._max_ts: tuple[int, int] | None = None
        # Max timestamp of the first batch: segment.ms counts from it when it is valid.
        self._rolling_based_timestamp: int | None = None
        self._closed = False
        # why recover() last stopped short of the file end (None: it did not)
        self.recovery_error: str | None = None

    # ------------------------------------------------------------------ opening

    @classmethod
    def open(
        cls,
        dir: str,
        base_offset: int,
        config: LogConfig,
        *,
        file_suffix: str = "",
        create: bool = True,
        preallocate: bool = False,
        clock: Clock = now_ms,
    ) -> LogSegment:
        """Open the segment based at ``base_offset`` in ``dir``.

        ``create=True`` makes the ``.log`` file if it is missing (a new segment;
        with ``preallocate`` its blocks are reserved up to ``segment.bytes``);
        ``create=False`` requires it to exist (loading), else FileNotFoundError.
        ``file_suffix`` (``.swap``, ``.cleaned``) applies to all three files.
        """
        path = log_file_name(dir, base_offset, file_suffix)
        flags = os.O_RDWR | (os.O_CREAT if create else 0)
        try:
            fd = os.open(path, flags, 0o644)
        except FileNotFoundError:
            raise
        except OSError as e:
            raise _storage_error("opening", path, e) from e
        try:
            size = os.fstat(fd).st_size
            is_new = (
                create
                and size == 0
                and not os.path.exists(offset_index_file_name(dir, base_offset, file_suffix))
            )
            preallocated = False
            if preallocate and size == 0:
                with contextlib.suppress(OSError):
                    os.posix_fallocate(fd, 0, config.segment_bytes)
                    preallocated = True
        except OSError as e:
            os.close(fd)
            raise _storage_error("opening", path, e) from e
        segment = cls(
            dir,
            base_offset,
            fd,
            size,
            index_interval_bytes=config.index_interval_bytes,
            max_index_size=config.segment_index_bytes,
            roll_jitter_ms=config.random_segment_jitter_ms(),
            file_suffix=file_suffix,
            preallocated=preallocated,
            clock=clock,
        )
        if is_new:
            # A new segment has its three files from the start, as Kafka's do;
            # segments being loaded map their indexes only when used.
            try:
                _ = segment.offset_index, segment.time_index
            except BaseException:
                segment.close_handlers()
                raise
        return segment

    # ------------------------------------------------------------------ files

    @property
    def log_path(self) -> str:
        return log_file_name(self.dir, self.base_offset, self._suffix)

    @property
    def offset_index_path(self) -> str:
        return offset_index_file_name(self.dir, self.base_offset, self._suffix)

    @property
    def time_index_path(self) -> str:
        return time_index_file_name(self.dir, self.base_offset, self._suffix)

    @property
    def txn_index_path(self) -> str:
        return txn_index_file_name(self.dir, self.base_offset, self._suffix)

    @property
    def txn_index(self) -> TransactionIndex:
        """The ``.txnindex`` (aborted transactions ending here); its file is
        made by the first entry."""
        idx = self._txn_index
        if idx is None:
            idx = TransactionIndex(self.base_offset, self.txn_index_path)
            self._txn_index = idx
        return idx

    @property
    def file_suffix(self) -> str:
        return self._suffix

    def fileno(self) -> int:
        if self._closed:
            raise KafkaStorageError(f"segment {self.log_path} is closed")
        return self._fd

    @property
    def offset_index(self) -> _native.OffsetIndex:
        """The ``.index``, mapped on first use (created empty if missing)."""
        idx = self._offset_index
        if idx is None:
            self._check_open()
            idx = _native.OffsetIndex(self.offset_index_path, self.base_offset, self.max_index_size)
            self._offset_index = idx
        return idx

    @property
    def time_index(self) -> _native.TimeIndex:
        """The ``.timeindex``, mapped on first use (created empty if missing)."""
        idx = self._time_index
        if idx is None:
            self._check_open()
            idx = _native.TimeIndex(self.time_index_path, self.base_offset, self.max_index_size)
            self._time_index = idx
        return idx

    @property
    def size(self) -> int:
        """Bytes of batches in the ``.log`` file."""
        return self._size

    def has_suffix(self, suffix: str) -> bool:
        return self._suffix == suffix or (bool(suffix) and self._suffix.endswith(suffix))

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaStorageError(f"segment {self.log_path} is closed")

    # ------------------------------------------------------------------ append

    def can_convert_to_relative_offset(self, offset: int) -> bool:
        """Whether ``offset`` fits the indexes' 32-bit offset relative to the base."""
        return 0 <= offset - self.base_offset <= _INT32_MAX

    def _ensure_offset_in_range(self, offset: int) -> None:
        if not self.can_convert_to_relative_offset(offset):
            raise LogSegmentOffsetOverflowError(
                f"offset {offset} cannot be stored in the segment based at {self.base_offset} "
                f"of {self.log_path}: relative offsets are 32-bit"
            )

    def append(
        self,
        largest_offset: int,
        largest_timestamp: int,
        offset_of_max_timestamp: int,
        records: _Buffer,
        batches: Sequence[_native.BatchInfo] | None = None,
    ) -> None:
        """Write ``records`` at the end of the file and index them if due.

        With ``batches`` (their positions relative to ``records``, as
        ``AppendInfo.batches`` gives them) an index entry can fall on any batch
        boundary; without, the whole append is indexed as one unit.

        On an OSError the file is cut back to its previous size and
        KafkaStorageError raised, so a failed append leaves nothing behind.
        """
        n = len(records)
        if n == 0:
            return
        self._check_open()
        self._ensure_offset_in_range(largest_offset)
        position = self._size
        if position == 0:
            self._rolling_based_timestamp = largest_timestamp
        self._write_at(records, position)
        self._size = position + n
        saved = (self._max_ts, self._bytes_since_last_index_entry, self.offset_index.last_offset)
        try:
            self._index_append(
                position, largest_offset, largest_timestamp, offset_of_max_timestamp, n, batches
            )
        except BaseException as e:
            # Undo the whole append: the bytes, and any index entry it added
            # (they all have offsets above the index's last entry before it).
            self._rollback(position)
            self._max_ts, self._bytes_since_last_index_entry, last_indexed = saved
            with contextlib.suppress(Exception):
                self.offset_index.truncate_to(last_indexed + 1)
                self.time_index.truncate_to(last_indexed + 1)
            if isinstance(e, OSError):
                raise _storage_error("indexing", self.log_path, e) from e
            raise

    def _write_at(self, records: _Buffer, position: int) -> None:
        view = memoryview(records).cast("B")
        n = len(view)
        written = 0
        try:
            while written < n:
                written += os.pwrite(self._fd, view[written:], position + written)
        except OSError as e:
            self._rollback(position)
            raise _storage_error("appending to", self.log_path, e) from e

    def _rollback(self, position: int) -> None:
        self._size = position
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, position)

    def _index_append(
        self,
        position: int,
        largest_offset: int,
        largest_timestamp: int,
        offset_of_max_timestamp: int,
        n: int,
        batches: Sequence[_native.BatchInfo] | None,
    ) -> None:
        interval = self.index_interval_bytes
        if batches is None or len(batches) <= 1:
            # Like Kafka's, the time index holds the last offset of the batch
            # with the largest timestamp, never an offset inside a batch:
            # kafka-dump-log checks each entry against a batch's last offset.
            shallow = batches[0].last_offset if batches else offset_of_max_timestamp
            self._note_max_timestamp(largest_timestamp, shallow)
            if self._bytes_since_last_index_entry > interval:
                self.offset_index.append(largest_offset, position)
                ts, off = self._max_timestamp_and_offset()
                self.time_index.maybe_append(ts, off)
                self._bytes_since_last_index_entry = 0
            self._bytes_since_last_index_entry += n
            return
        for b in batches:
            self._note_max_timestamp(b.max_timestamp, b.last_offset)
            if self._bytes_since_last_index_entry > interval:
                self.offset_index.append(b.last_offset, position + b.position)
                ts, off = self._max_timestamp_and_offset()
                self.time_index.maybe_append(ts, off)
                self._bytes_since_last_index_entry = 0
            self._bytes_since_last_index_entry += b.size

    def _note_max_timestamp(self, timestamp: int, offset: int) -> None:
        current = self._max_timestamp_and_offset()
        if timestamp > current[0]:
            self._max_ts = (timestamp, offset)

    def _max_timestamp_and_offset(self) -> tuple[int, int]:
        if self._max_ts is None:
            self._max_ts = self.time_index.last_entry()
        return self._max_ts

    @property
    def max_timestamp_so_far(self) -> int:
        """Largest record timestamp seen (-1 if none)."""
        return self._max_timestamp_and_offset()[0]

    @property
    def offset_of_max_timestamp_so_far(self) -> int:
        return self._max_timestamp_and_offset()[1]

    @property
    def largest_timestamp(self) -> int:
        """The max record timestamp, or the file's mtime when no record has one:
        what ``retention.ms`` compares with."""
        ts = self.max_timestamp_so_far
        if ts >= 0:
            return ts
        return self.last_modified_ms

    @property
    def last_modified_ms(self) -> int:
        try:
            return os.stat(self.log_path).st_mtime_ns // 1_000_000
        except OSError:
            return 0

    # ------------------------------------------------------------------ read

    def translate_offset(self, offset: int, start_position: int = 0) -> tuple[int, int, int] | None:
        """(last offset, position, size) of the first batch whose last offset is
        >= ``offset``, searching from the index entry at or below it."""
        self._check_open()
        _, index_pos = self.offset_index.lookup(offset)
        start = max(index_pos, start_position)
        if start >= self._size:
            return None
        return _native.translate_offset_fd(self._fd, offset, start, self._size)

    def read(
        self,
        start_offset: int,
        max_size: int,
        max_position: int | None = None,
        min_one_message: bool = False,
    ) -> FetchDataInfo | None:
        """Up to ``max_size`` bytes of whole batches from the batch holding
        ``start_offset``, not past ``max_position``; None when that offset lies
        beyond this segment. With ``min_one_message`` the first batch is returned
        whole even if larger than ``max_size``."""
        if max_size < 0:
            raise ValueError(f"invalid max size {max_size} for a read from {self.log_path}")
        limit = self._size if max_position is None else min(max_position, self._size)
        found = self.translate_offset(start_offset)
        if found is None:
            return None
        _, position, batch_size = found
        metadata = LogOffsetMetadata(start_offset, self.base_offset, position)
        adjusted = max(max_size, batch_size) if min_one_message else max_size
        if adjusted == 0 or position >= limit:
            return FetchDataInfo(metadata, EMPTY_RECORDS)
        fetch_size = min(limit - position, adjusted)
        return FetchDataInfo(
            metadata,
            FileRecords(self, position, fetch_size),
            first_entry_incomplete=adjusted < batch_size,
        )

    def batch_infos(
        self, start_position: int = 0, end_position: int | None = None
    ) -> list[_native.BatchInfo]:
        """Headers of every batch in ``[start_position, end_position)`` (no CRC check)."""
        self._check_open()
        end = self._size if end_position is None else min(end_position, self._size)
        out: list[_native.BatchInfo] = []
        pos = start_position
        while pos < end:
            infos, nxt = _native.read_batch_infos(self.log_path, pos, 1000, end)
            out.extend(infos)
            if nxt <= pos or not infos:
                break
            pos = nxt
        return out

    def read_next_offset(self) -> int:
        """The offset after the segment's last batch (the base offset when empty)."""
        if self._size == 0:
            return self.base_offset
        _, pos = self.offset_index.lookup(self.offset_index.last_offset)
        infos = self.batch_infos(pos)
        if not infos:
            return self.base_offset
        return infos[-1].last_offset + 1

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int = 0
    ) -> tuple[int, int] | None:
        """(timestamp, offset) of the first record at or after ``starting_offset``
        whose timestamp is >= ``timestamp``; None when there is none here."""
        self._check_open()
        _, ts_offset = self.time_index.lookup(timestamp)
        _, position = self.offset_index.lookup(max(ts_offset, starting_offset))
        found = _native.find_offset_by_timestamp(self.log_path, timestamp, position, self._size)
        if found is None or found[1] >= starting_offset:
            return found
        # The match precedes starting_offset inside the batch that holds it: look
        # at that batch's records, then continue after it.
        located = self.translate_offset(starting_offset, position)
        if located is None:
            return None
        _, bpos, bsize = located
        batch = os.pread(self._fd, bsize, bpos)
        for r in _native.decode_records(batch):
            if r.offset >= starting_offset and r.timestamp >= timestamp:
                return (r.timestamp, r.offset)
        if bpos + bsize >= self._size:
            return None
        return _native.find_offset_by_timestamp(self.log_path, timestamp, bpos + bsize, self._size)

    # ------------------------------------------------------------------ roll

    def time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        """How long this segment has been filling, for ``segment.ms``: measured
        on record timestamps once the first batch has a valid one, else on the
        wall clock since the segment was created."""
        self._load_first_batch_timestamp()
        first = self._rolling_based_timestamp
        if first is not None and first >= 0:
            return message_timestamp - first
        return now_ms - self.created_ms

    def _load_first_batch_timestamp(self) -> None:
        if self._rolling_based_timestamp is None and self._size > 0:
            infos, _ = _native.read_batch_infos(self.log_path, 0, 1, self._size)
            if infos:
                self._rolling_based_timestamp = infos[0].max_timestamp

    def should_roll(
        self,
        *,
        max_segment_ms: int,
        max_segment_bytes: int,
        max_timestamp_in_messages: int,
        max_offset_in_messages: int,
        messages_size: int,
        now_ms: int,
    ) -> bool:
        """Whether an append of ``messages_size`` bytes must go to a new segment:
        this one would pass ``segment.bytes``, has aged past ``segment.ms`` minus
        its jitter, has a full index, or cannot index ``max_offset_in_messages``."""
        reached_roll_ms = (
            self.time_waited_for_roll(now_ms, max_timestamp_in_messages)
            > max_segment_ms - self.roll_jitter_ms
        )
        return (
            self._size > max_segment_bytes - messages_size
            or (self._size > 0 and reached_roll_ms)
            or self.offset_index.is_full()
            or self.time_index.is_full()
            or not self.can_convert_to_relative_offset(max_offset_in_messages)
        )

    def on_became_inactive_segment(self) -> None:
        """A newer segment took over appends: record the final max timestamp and
        shrink the indexes (and a preallocated file) to what they hold."""
        ts, off = self._max_timestamp_and_offset()
        self.time_index.maybe_append(ts, off, skip_full_check=True)
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        self._trim_log()

    def resize_indexes(self, size: int) -> None:
        """Give the indexes room again (the active segment after a load or truncation)."""
        self.offset_index.resize(size)
        self.time_index.resize(size)

    def _trim_log(self) -> None:
        if self._preallocated:
            try:
                os.ftruncate(self._fd, self._size)
            except OSError as e:
                raise _storage_error("trimming", self.log_path, e) from e
            self._preallocated = False

    # ------------------------------------------------------------------ recovery

    def recover(
        self,
        producer_state: ProducerStateManager | None = None,
        leader_epoch_cache: LeaderEpochFileCache | None = None,
        *,
        max_batch_size: int = _INT32_MAX,
    ) -> int:
        """Rebuild both indexes from the batches, cut the file after the last
        valid batch and return how many bytes were cut. Producer batches go to
        ``producer_state`` and new leader epochs to ``leader_epoch_cache``.
        Why the first invalid batch was refused is kept in ``recovery_error``."""
        self._check_open()
        result = _native.recover_segment(
            self.log_path,
            self.offset_index,
            self.time_index,
            index_interval_bytes=self.index_interval_bytes,
            max_batch_size=max_batch_size,
        )
        if leader_epoch_cache is not None:
            for epoch, start_offset in result.epochs:
                latest = leader_epoch_cache.latest_epoch
                if epoch >= 0 and (latest is None or epoch > latest):
                    leader_epoch_cache.assign(epoch, start_offset)
        if producer_state is not None:
            for batch in result.producer_batches:
                producer_state.update(batch, batch.max_timestamp)
        self.recovery_error = result.error
        file_size = os.fstat(self._fd).st_size
        truncated = file_size - result.valid_bytes
        if file_size != result.valid_bytes:
            try:
                os.ftruncate(self._fd, result.valid_bytes)
            except OSError as e:
                raise _storage_error("truncating", self.log_path, e) from e
        self._size = result.valid_bytes
        self._preallocated = False
        self._bytes_since_last_index_entry = 0
        self._rolling_based_timestamp = None
        self._max_ts = (result.max_timestamp, result.offset_of_max_timestamp)
        if result.max_timestamp < 0:
            self._max_ts = (_NO_TIMESTAMP, self.base_offset)
        self.offset_index.trim_to_valid_size()
        ts, off = self._max_ts
        self.time_index.maybe_append(ts, off, skip_full_check=True)
        self.time_index.trim_to_valid_size()
        return truncated

    def sanity_check(self, time_index_exists: bool) -> None:
        """Check the indexes before trusting them at load.

        FileNotFoundError when the ``.index`` is missing; CorruptIndexError when
        either index fails its checks. A ``.timeindex`` that did not exist before
        this open starts empty (``time_index_exists=False``). The loader answers
        both errors by recovering the segment.
        """
        if not os.path.exists(self.offset_index_path):
            raise FileNotFoundError(
                errno_mod.ENOENT, "offset index file missing", self.offset_index_path
            )
        if not time_index_exists:
            self.time_index.truncate()
        self.offset_index.sanity_check()
        self.time_index.sanity_check()

    def fetch_upper_bound_offset(self, start_position: int, fetch_size: int) -> int | None:
        """An offset past every record of the slice ``[start_position,
        start_position + fetch_size)``: that of the first offset-index entry
        at or after its end (Kafka's OffsetIndex.fetchUpperBoundOffset); None
        when no entry lies there."""
        idx = self.offset_index
        end = start_position + fetch_size
        lo, hi = 0, idx.entries
        while lo < hi:  # the first entry whose position is at or past the end
            mid = (lo + hi) // 2
            if idx.entry(mid)[1] < end:
                lo = mid + 1
            else:
                hi = mid
        return idx.entry(lo)[0] if lo < idx.entries else None

    # ------------------------------------------------------------------ truncation

    def truncate_to(self, offset: int) -> int:
        """Drop every batch whose offsets reach ``offset`` or beyond (a batch
        holding ``offset`` goes whole) and their index entries; return the
        number of bytes removed."""
        self._check_open()
        found = self.translate_offset(offset)
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.offset_index.resize(self.max_index_size)
        self.time_index.resize(self.max_index_size)
        self.txn_index.truncate_to(offset)
        removed = 0
        if found is not None:
            position = found[1]
            removed = self._size - position
            try:
                os.ftruncate(self._fd, position)
            except OSError as e:
                raise _storage_error("truncating", self.log_path, e) from e
            self._size = position
            self._preallocated = False
        if self._size == 0:
            self.created_ms = self._clock()
            self._rolling_based_timestamp = None
        self._bytes_since_last_index_entry = 0
        self._load_largest_timestamp()
        return removed

    def _load_largest_timestamp(self) -> None:
        """Max timestamp = last time index entry, raised by any batch after it."""
        ts, off = self.time_index.last_entry()
        if self._size > 0:
            _, pos = self.offset_index.lookup(off)
            for b in self.batch_infos(pos):
                if b.max_timestamp > ts:
                    ts, off = b.max_timestamp, b.last_offset
        self._max_ts = (ts, off)

    # ------------------------------------------------------------------ durability, lifecycle

    def flush(self) -> None:
        """fsync the log file and flush both indexes."""
        self._check_open()
        try:
            os.fsync(self._fd)
        except OSError as e:
            raise _storage_error("flushing", self.log_path, e) from e
        if self._offset_index is not None:
            self._offset_index.flush()
        if self._time_index is not None:
            self._time_index.flush()
        if self._txn_index is not None:
            self._txn_index.flush()

    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        """Rename the three files from ``<name><old>`` to ``<name><new>`` (e.g.
        ``""`` → ``.deleted``, ``.swap`` → ``""``); open handles stay valid."""
        if self._suffix != old_suffix:
            raise ValueError(
                f"segment {self.log_path} has suffix {self._suffix!r}, not {old_suffix!r}"
            )
        old_log = self.log_path
        old_off = self.offset_index_path
        old_time = self.time_index_path
        old_txn = txn_index_file_name(self.dir, self.base_offset, old_suffix)
        self._suffix = new_suffix
        try:
            os.rename(old_log, self.log_path)
            if self._offset_index is not None:
                self._offset_index.rename_to(self.offset_index_path)
            elif os.path.exists(old_off):
                os.rename(old_off, self.offset_index_path)
            if self._time_index is not None:
                self._time_index.rename_to(self.time_index_path)
            elif os.path.exists(old_time):
                os.rename(old_time, self.time_index_path)
            if os.path.exists(old_txn):
                os.rename(old_txn, self.txn_index_path)
            if self._txn_index is not None:
                self._txn_index.rename_to(self.txn_index_path)
        except OSError as e:
            raise _storage_error("renaming", old_log, e) from e

    def close(self) -> None:
        """Record the final max timestamp, trim the indexes and a preallocated
        file to their contents, and release everything. Idempotent."""
        if self._closed:
            return
        try:
            if self._max_ts is not None and self._max_ts[0] >= 0:
                ts, off = self._max_ts
                self.time_index.maybe_append(ts, off, skip_full_check=True)
            self._trim_log()
        finally:
            self.close_handlers()

    def close_handlers(self) -> None:
        """Release the descriptor and the index maps without trimming anything
        more than the index close does (used after a disk error)."""
        if self._closed:
            return
        self._closed = True
        for idx in (self._offset_index, self._time_index):
            if idx is not None:
                with contextlib.suppress(Exception):
                    idx.close()
        self._offset_index = None
        self._time_index = None
        with contextlib.suppress(OSError):
            os.close(self._fd)

    @property
    def closed(self) -> bool:
        return self._closed

    def delete_if_exists(self) -> None:
        """Close the segment and remove its files (whatever their suffix)."""
        self.close_handlers()
        paths = [
            self.log_path,
            self.offset_index_path,
            self.time_index_path,
            txn_index_file_name(self.dir, self.base_offset, self._suffix),
        ]
        first_error: OSError | None = None
        for path in paths:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
            except OSError as e:
                first_error = first_error or e
        if first_error is not None:
            raise _storage_error("deleting", self.log_path, first_error) from first_error

    def __repr__(self) -> str:
        return (
            f"LogSegment(base_offset={self.base_offset}, size={self._size}, path={self.log_path!r})"
        )
