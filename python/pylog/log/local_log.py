"""LocalLog: a partition's segment files in its directory (Kafka's ``LocalLog``).

What lies on this broker's disk and nothing more: the directory, the ordered
segments (a :class:`LogSegments`), the log end offset and the recovery point.
It rolls a new active segment, appends records that are already validated and
numbered to the active one, reads a range of offsets as zero-copy slices,
truncates, flushes, and removes segments (renamed ``.deleted``, their files
gone after ``file.delete.delay.ms`` on the scheduler). Offsets a consumer
sees (the high watermark, the log start offset), producer state, leader
epochs and retention are the :class:`~pylog.log.log.Log`'s (Kafka's
``UnifiedLog``), which owns one LocalLog and calls it.

Like Kafka's, a LocalLog is not thread-safe on its own: every call is made
with the owning Log's lock held (``flush_segments`` excepted, which is given
its segments under the lock and fsyncs them outside it). A failing disk
surfaces as KafkaStorageError naming the file or directory.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from collections.abc import Callable, Iterator, Sequence

from pylog import _native
from pylog.common.utils.time import Clock
from pylog.errors import KafkaError, KafkaStorageError, OffsetOutOfRangeError
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
from pylog.log.log_segments import LogSegments
from pylog.log.offset_metadata import LogOffsetMetadata
from pylog.log.scheduler import Scheduler
from pylog.log.segment import LogSegment

__all__ = ["LocalLog", "storage_errors"]

_log = logging.getLogger("pylog.log")


@contextlib.contextmanager
def storage_errors(what: str, path: str) -> Iterator[None]:
    """Turn an OSError into KafkaStorageError naming what failed where."""
    try:
        yield
    except OSError as e:
        raise KafkaStorageError(f"{what} {path}: {e.strerror or e}", e.errno) from e


class LocalLog:
    """The segments of one partition's directory, with its LEO and recovery point."""

    # Slots: every Produce and Fetch reads these through the Log.
    __slots__ = (
        "_clock",
        "_dir",
        "_last_flush_ms",
        "_name",
        "_next_offset_metadata",
        "_recovery_point",
        "_scheduler",
        "closed",
        "config",
        "segments",
    )

    def __init__(
        self,
        dir: str,
        config: LogConfig,
        segments: Sequence[LogSegment],
        *,
        recovery_point: int,
        next_offset_metadata: LogOffsetMetadata,
        scheduler: Scheduler,
        clock: Clock,
    ) -> None:
        if not segments:
            raise ValueError(f"a log needs at least one segment ({dir})")
        self._dir = dir
        self._name = os.path.basename(dir)
        self.config = config
        self.segments = LogSegments(segments)
        self._recovery_point = recovery_point
        self._next_offset_metadata = next_offset_metadata
        self._scheduler = scheduler
        self._clock = clock
        self._last_flush_ms = clock()
        self.closed = False

    # ------------------------------------------------------------------ state

    @property
    def dir(self) -> str:
        return self._dir

    @property
    def name(self) -> str:
        return self._name

    @property
    def log_end_offset(self) -> int:
        return self._next_offset_metadata.message_offset

    @property
    def log_end_offset_metadata(self) -> LogOffsetMetadata:
        return self._next_offset_metadata

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    def update_recovery_point(self, offset: int) -> None:
        self._recovery_point = offset

    def mark_flushed(self, offset: int) -> None:
        """Everything below ``offset`` is on disk: the recovery point moves
        there (never back) and the flush clock restarts."""
        if offset > self._recovery_point:
            self._recovery_point = offset
            self._last_flush_ms = self._clock()

    @property
    def last_flush_time(self) -> int:
        return self._last_flush_ms

    @property
    def unflushed_messages(self) -> int:
        return self._next_offset_metadata.message_offset - self._recovery_point

    @property
    def active_segment(self) -> LogSegment:
        return self.segments.last_segment

    def check_open(self) -> None:
        if self.closed:
            raise KafkaStorageError(f"log {self._dir} is closed")

    def _update_log_end_offset(self, metadata: LogOffsetMetadata) -> None:
        # Nothing past the log end can be flushed (Kafka's updateLogEndOffset).
        self._next_offset_metadata = metadata
        if self._recovery_point > metadata.message_offset:
            self._recovery_point = metadata.message_offset

    # ------------------------------------------------------------------ append

    def append(
        self,
        last_offset: int,
        max_timestamp: int,
        offset_of_max_timestamp: int,
        records: bytes | bytearray | memoryview,
        batches: Sequence[_native.BatchInfo],
    ) -> None:
        """Write validated, numbered batches to the active segment and move the LEO."""
        segment = self.segments.last_segment
        segment.append(last_offset, max_timestamp, offset_of_max_timestamp, records, batches)
        self._next_offset_metadata = LogOffsetMetadata(
            last_offset + 1, segment.base_offset, segment.size
        )

    # ------------------------------------------------------------------ roll

    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at ``max(expected_next_offset, LEO)``.

        An empty active segment already at that offset is replaced; stale
        files of that name (left by a crash) are removed first."""
        new_offset = max(expected_next_offset or 0, self.log_end_offset)
        active = self.active_segment
        with storage_errors("rolling", self._dir):
            if self.segments.contains(new_offset):
                if active.base_offset == new_offset and active.size == 0:
                    self.remove_and_delete_segments([active])
                else:
                    raise KafkaError(
                        f"cannot roll {self._name} to a new segment at {new_offset}: "
                        "a segment with that base offset already exists"
                    )
            elif new_offset < active.base_offset:
                raise KafkaError(
                    f"cannot roll {self._name} to a new segment at {new_offset}, below the "
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
            if self.segments:
                self.active_segment.on_became_inactive_segment()
            segment = self._open_segment(new_offset)
        self.segments.add(segment)
        self._next_offset_metadata = LogOffsetMetadata(self.log_end_offset, new_offset, 0)
        return segment

    def _open_segment(self, base_offset: int) -> LogSegment:
        return LogSegment.open(
            self._dir,
            base_offset,
            self.config,
            preallocate=self.config.preallocate,
            clock=self._clock,
        )

    # ------------------------------------------------------------------ read

    def read(
        self,
        start_offset: int,
        max_length: int,
        max_offset_metadata: LogOffsetMetadata,
        min_one_message: bool,
    ) -> FetchDataInfo:
        """Batches from the one holding ``start_offset``, up to ``max_length``
        bytes and not past ``max_offset_metadata`` (the caller's bound: the
        LEO or the high watermark, at or after ``start_offset``)."""
        # From the first segment when start_offset is below every base.
        candidates = self.segments.segments_from(start_offset)
        if start_offset < candidates[0].base_offset:
            raise self.out_of_range(start_offset, candidates[0].base_offset)
        bound_base = max_offset_metadata.segment_base_offset
        for segment in candidates:
            if segment.base_offset > bound_base:
                break
            if segment.base_offset == bound_base:
                max_position = max_offset_metadata.relative_position_in_segment
            else:
                max_position = segment.size
            # Not storage_errors(): every Fetch comes here, and the path (built
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
        return FetchDataInfo(max_offset_metadata)

    def convert_to_offset_metadata(self, offset: int) -> LogOffsetMetadata:
        """Locate ``offset`` (its segment and byte position); the LEO's metadata
        when it is at or past the last batch. The caller checks the range."""
        if offset == self.log_end_offset:
            return self._next_offset_metadata
        if self.segments.floor_segment(offset) is not None:
            for seg in self.segments.segments_from(offset):
                found = seg.translate_offset(offset)
                if found is not None:
                    return LogOffsetMetadata(offset, seg.base_offset, found[1])
        return self._next_offset_metadata

    def out_of_range(self, offset: int, first_offset: int) -> OffsetOutOfRangeError:
        return OffsetOutOfRangeError(
            f"offset {offset} is out of range for {self._name}: the log holds "
            f"[{first_offset}, {self.log_end_offset})"
        )

    # ------------------------------------------------------------------ truncation

    def truncate_to(self, target_offset: int) -> list[LogSegment]:
        """Cut the log so that it ends before ``target_offset``, which lies in
        or after the first segment; returns the segments removed."""
        with storage_errors("truncating", self._dir):
            removed = self.segments.higher_segments(target_offset)
            self.remove_and_delete_segments(removed)
            active = self.active_segment
            active.truncate_to(target_offset)
            active.resize_indexes(self.config.segment_index_bytes)
        end = LogOffsetMetadata(target_offset, active.base_offset, active.size)
        self._update_log_end_offset(end)
        return removed

    def truncate_fully_and_start_at(self, new_offset: int) -> list[LogSegment]:
        """Drop every segment and start empty at ``new_offset``; returns the
        segments removed."""
        with storage_errors("truncating", self._dir):
            # Renamed .deleted first, so the new segment's names are free; the
            # caller's lock keeps anyone from seeing the log without a segment.
            removed = self.segments.values()
            self.remove_and_delete_segments(removed)
            self.segments.add(self._open_segment(new_offset))
        self._next_offset_metadata = LogOffsetMetadata(new_offset, new_offset, 0)
        self._recovery_point = new_offset
        return removed

    # ------------------------------------------------------------------ flush

    def segments_to_flush(self, offset: int) -> list[LogSegment]:
        """The segments holding offsets in ``[recovery point, offset)``."""
        return self.segments.segments_from(self._recovery_point, offset)

    @staticmethod
    def flush_segments(segments: Sequence[LogSegment]) -> None:
        """fsync ``segments`` (outside the Log's lock); one closed meanwhile
        (deleted, truncated away) is skipped."""
        for segment in segments:
            if segment.closed:
                continue
            try:
                segment.flush()
            except KafkaStorageError:
                if not segment.closed:
                    raise

    # ------------------------------------------------------------------ deletion

    def remove_and_delete_segments(self, segments: Sequence[LogSegment]) -> None:
        """Take ``segments`` out of the log now; rename their files ``.deleted``
        and remove them after ``file.delete.delay.ms`` (Kafka's asyncDelete)."""
        for segment in segments:
            self.segments.remove(segment)
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
            f"delete-file-{self._name}-{batch[0].base_offset}",
            delete,
            self.config.file_delete_delay_ms,
        )

    def replace_segments(
        self,
        new_segments: Sequence[LogSegment],
        old_segments: Sequence[LogSegment],
        after_phase: Callable[[str], None],
    ) -> None:
        """Swap compaction output in for the segments it was made from, in an
        order the loader can finish after a crash at any step: ``.cleaned`` →
        ``.swap``, the map switched, the old ones ``.deleted``, ``.swap`` →
        final name. KafkaError, with nothing replaced, if an old segment left
        the log already or is the active one."""
        for s in old_segments:
            if self.segments.get(s.base_offset) is not s:
                raise KafkaError(
                    f"cannot replace segment {s.base_offset} of {self._name}: it left the log"
                )
            if s is self.active_segment:
                raise KafkaError(f"cannot replace the active segment of {self._name}")
        with storage_errors("replacing segments of", self._dir):
            for s in new_segments:
                if s.has_suffix(CLEANED_FILE_SUFFIX):
                    s.change_file_suffixes(CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX)
            # The .swap names must be durable before any old segment goes.
            fsync_dir(self._dir)
            after_phase("swap")
            for s in old_segments:
                self.segments.remove(s)
            for s in new_segments:
                self.segments.add(s)
            self.remove_and_delete_segments(old_segments)
            after_phase("deleted")
            for s in new_segments:
                s.change_file_suffixes(SWAP_FILE_SUFFIX, "")
            fsync_dir(self._dir)
            after_phase("done")

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Close every segment (indexes and a preallocated file trimmed)."""
        self.closed = True
        for segment in self.segments:
            with storage_errors("closing", segment.log_path):
                segment.close()

    def close_handlers(self) -> None:
        """Release every file without trimming (after a disk failure)."""
        self.closed = True
        for segment in self.segments:
            segment.close_handlers()

    def delete_all_segments(self) -> None:
        """Remove every segment's files at once (the partition is gone)."""
        self.closed = True
        for segment in self.segments:
            with storage_errors("deleting", segment.log_path):
                segment.delete_if_exists()
        self.segments.clear()

    def delete_dir(self) -> None:
        with storage_errors("deleting", self._dir):
            shutil.rmtree(self._dir, ignore_errors=False)
