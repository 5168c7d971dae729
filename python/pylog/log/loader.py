"""LogLoader: turn a partition directory into segments a Log can serve, repairing it.

What Kafka's loader does, in order:

1. Leftovers of interrupted operations: ``*.deleted`` files (a deletion that did
   not finish) and ``*.tmp`` files (a checkpoint or snapshot write that did not
   finish) are deleted; ``*.cleaned`` files (a compaction's first phase) are
   deleted, and any ``*.swap`` at or above the lowest ``.cleaned`` offset is part
   of an unfinished split and deleted with them.
2. Each remaining ``<offset>.log.swap`` is a finished compaction output whose
   swap-in was interrupted: the segments it covers are deleted and it is renamed
   to its final name (its indexes rebuilt if missing or broken). Index ``.swap``
   files without a log are deleted.
3. Every ``.log`` is opened as a segment; an index without a ``.log`` is deleted;
   a missing or corrupt index is rebuilt from the log.
4. After an unclean shutdown every segment from the recovery point on is
   recovered: each batch validated, the indexes rebuilt; at the first invalid or
   torn batch the segment is cut and every later segment deleted, so nothing
   before the first bad batch is lost and nothing after it is kept.
5. The leader-epoch cache is cut to the log's offsets and the producer state is
   rebuilt from the newest usable snapshot plus the batches after it.

Every repair is one log line (logger ``pylog.log``, WARNING) naming the file and
the reason; routine progress is logged at DEBUG.
"""

from __future__ import annotations

import contextlib
import logging
import os
from dataclasses import dataclass

from pylog import _native
from pylog.common.utils.time import Clock, now_ms
from pylog.errors import CorruptIndexError, InvalidOffsetError
from pylog.log.config import LogConfig
from pylog.log.end_transaction_marker import EndTransactionMarker
from pylog.log.files import (
    CLEANED_FILE_SUFFIX,
    DELETE_DIR_SUFFIX,
    DELETED_FILE_SUFFIX,
    LOG_FILE_SUFFIX,
    SWAP_FILE_SUFFIX,
    is_index_file,
    log_file_name,
    offset_from_file_name,
    offset_index_file_name,
    strip_state_suffix,
    time_index_file_name,
    txn_index_file_name,
)
from pylog.log.leader_epoch import LeaderEpochFileCache
from pylog.log.log_segments import LogSegments
from pylog.log.offset_metadata import LogOffsetMetadata
from pylog.log.producer_state import ProducerStateManager
from pylog.log.segment import LogSegment
from pylog.log.transaction_index import AbortedTxn

__all__ = ["LoadedLog", "LogLoader"]

_log = logging.getLogger("pylog.log")

_TMP_SUFFIX = ".tmp"


@dataclass
class LoadedLog:
    """A loaded partition: its segments in offset order and where it stands."""

    segments: list[LogSegment]
    log_start_offset: int
    recovery_point: int
    next_offset_metadata: LogOffsetMetadata

    @property
    def log_end_offset(self) -> int:
        return self.next_offset_metadata.message_offset

    @property
    def active_segment(self) -> LogSegment:
        return self.segments[-1]


def _unlink(path: str) -> bool:
    try:
        os.unlink(path)
        return True
    except FileNotFoundError:
        return False


class LogLoader:
    """Loads (and repairs) one partition directory. Use once: ``load()``."""

    def __init__(
        self,
        dir: str | os.PathLike[str],
        config: LogConfig,
        log_start_offset: int,
        recovery_point: int,
        had_clean_shutdown: bool,
        producer_state: ProducerStateManager,
        leader_epoch_cache: LeaderEpochFileCache | None,
        *,
        clock: Clock = now_ms,
    ) -> None:
        self.dir = os.fspath(dir)
        self.config = config
        self.log_start_offset_checkpoint = log_start_offset
        self.recovery_point_checkpoint = recovery_point
        self.had_clean_shutdown = had_clean_shutdown
        self.producer_state = producer_state
        self.leader_epoch_cache = leader_epoch_cache
        self._clock = clock
        self._segments = LogSegments()
        # base offset -> bytes cut when the segment was recovered during this load
        self._recovered: dict[int, int] = {}

    # ------------------------------------------------------------------ entry point

    def load(self) -> LoadedLog:
        os.makedirs(self.dir, exist_ok=True)
        try:
            swap_logs = self._remove_temp_files_and_collect_swaps()
            for path in swap_logs:
                self._complete_swap(path)
            self._delete_remaining_swap_files()
            self._load_segment_files()
            if self.dir.endswith(DELETE_DIR_SUFFIX):
                # A directory awaiting deletion is never recovered, only opened.
                if not self._segments:
                    self._add(self._new_segment(0))
                recovery_point = next_offset = 0
            else:
                recovery_point, next_offset = self._recover_log()
                self._segments.last_segment.resize_indexes(self.config.max_index_size)
        except BaseException:
            for seg in self._segments:
                with contextlib.suppress(Exception):
                    seg.close_handlers()
            raise

        segments = self._segments.values()
        first, active = segments[0], segments[-1]
        if self.leader_epoch_cache is not None:
            self.leader_epoch_cache.truncate_from_end(next_offset)
        log_start_offset = max(self.log_start_offset_checkpoint, first.base_offset)
        if self.leader_epoch_cache is not None:
            self.leader_epoch_cache.truncate_from_start(self.log_start_offset_checkpoint)
        self._rebuild_producer_state(segments, log_start_offset, next_offset)
        return LoadedLog(
            segments=segments,
            log_start_offset=log_start_offset,
            recovery_point=recovery_point,
            next_offset_metadata=LogOffsetMetadata(next_offset, active.base_offset, active.size),
        )

    # ------------------------------------------------------------------ leftovers

    def _files(self) -> list[str]:
        return sorted(
            name for name in os.listdir(self.dir) if os.path.isfile(os.path.join(self.dir, name))
        )

    def _remove_temp_files_and_collect_swaps(self) -> list[str]:
        swaps: list[str] = []
        cleaned: list[str] = []
        min_cleaned: int | None = None
        for name in self._files():
            path = os.path.join(self.dir, name)
            if name.endswith(DELETED_FILE_SUFFIX):
                _unlink(path)
                _log.warning(
                    "deleted %s: left over from a segment deletion interrupted by shutdown", path
                )
            elif name.endswith(_TMP_SUFFIX):
                _unlink(path)
                _log.warning("deleted %s: a write interrupted before its rename", path)
            elif name.endswith(CLEANED_FILE_SUFFIX):
                cleaned.append(path)
                with contextlib.suppress(ValueError):
                    offset = offset_from_file_name(name)
                    min_cleaned = offset if min_cleaned is None else min(min_cleaned, offset)
            elif name.endswith(SWAP_FILE_SUFFIX):
                swaps.append(path)

        valid: list[str] = []
        for path in swaps:
            try:
                swap_offset: int | None = offset_from_file_name(path)
            except ValueError:
                swap_offset = None
            if swap_offset is None or (min_cleaned is not None and swap_offset >= min_cleaned):
                _unlink(path)
                _log.warning(
                    "deleted %s: swap file of a compaction or split that did not finish "
                    "(cleaned files start at offset %s)",
                    path,
                    min_cleaned,
                )
            else:
                valid.append(path)
        for path in cleaned:
            _unlink(path)
            _log.warning("deleted %s: output of a compaction that did not finish", path)
        return [p for p in valid if strip_state_suffix(p).endswith(LOG_FILE_SUFFIX)]

    def _complete_swap(self, swap_log_path: str) -> None:
        base = offset_from_file_name(swap_log_path)
        seg = self._open_segment(base, SWAP_FILE_SUFFIX)
        try:
            rebuilt = ""
            try:
                seg.sanity_check(os.path.exists(seg.time_index_path))
            except (FileNotFoundError, CorruptIndexError) as e:
                for idx in (seg.offset_index_path, seg.time_index_path):
                    _unlink(idx)
                seg.close_handlers()
                seg = self._open_segment(base, SWAP_FILE_SUFFIX)
                cut = seg.recover(None, self.leader_epoch_cache)
                rebuilt = f"; its indexes were rebuilt ({_reason(e)})"
                if cut:
                    rebuilt += f" and {cut} bytes of invalid data cut"
            next_offset = seg.read_next_offset()
            end = max(next_offset, base + 1)
            replaced: list[int] = []
            for name in self._files():
                if name.endswith(SWAP_FILE_SUFFIX):
                    continue
                if not (name.endswith(LOG_FILE_SUFFIX) or is_index_file(name)):
                    continue
                try:
                    offset = offset_from_file_name(name)
                except ValueError:
                    continue
                if base <= offset < end:
                    _unlink(os.path.join(self.dir, name))
                    if name.endswith(LOG_FILE_SUFFIX):
                        replaced.append(offset)
            seg.change_file_suffixes(SWAP_FILE_SUFFIX, "")
            _log.warning(
                "completed interrupted swap: renamed %s%s to %s, replacing segments %s%s",
                log_file_name(self.dir, base),
                SWAP_FILE_SUFFIX,
                log_file_name(self.dir, base),
                replaced or "none",
                rebuilt,
            )
        finally:
            seg.close_handlers()

    def _delete_remaining_swap_files(self) -> None:
        for name in self._files():
            if name.endswith(SWAP_FILE_SUFFIX):
                path = os.path.join(self.dir, name)
                _unlink(path)
                _log.warning("deleted %s: index swap file without its log swap file", path)

    # ------------------------------------------------------------------ segments

    def _open_segment(self, base_offset: int, file_suffix: str = "") -> LogSegment:
        """The existing segment files at ``base_offset`` (FileNotFoundError if none)."""
        return LogSegment.open(
            self.dir,
            base_offset,
            self.config,
            file_suffix=file_suffix,
            create=False,
            clock=self._clock,
        )

    def _delete(self, segments: list[LogSegment]) -> list[str]:
        """Take ``segments`` out of the log and delete their files; their paths."""
        paths = [s.log_path for s in segments]
        for s in segments:
            self._segments.remove(s)
            s.delete_if_exists()
        return paths

    def _new_segment(self, base_offset: int) -> LogSegment:
        return LogSegment.open(
            self.dir,
            base_offset,
            self.config,
            create=True,
            preallocate=self.config.preallocate,
            clock=self._clock,
        )

    def _add(self, seg: LogSegment) -> None:
        self._segments.add(seg)

    def _load_segment_files(self) -> None:
        names = self._files()
        present = set(names)
        for name in names:
            path = os.path.join(self.dir, name)
            if is_index_file(name):
                try:
                    offset = offset_from_file_name(name)
                except ValueError:
                    continue
                log_name = os.path.basename(log_file_name(self.dir, offset))
                if log_name not in present:
                    _unlink(path)
                    _log.warning("deleted %s: index file without a log file", path)
            elif name.endswith(LOG_FILE_SUFFIX):
                try:
                    base = offset_from_file_name(name)
                except ValueError:
                    continue
                time_index_exists = (
                    os.path.basename(time_index_file_name(self.dir, base)) in present
                )
                seg = self._open_segment(base)
                self._add(seg)
                try:
                    seg.sanity_check(time_index_exists)
                except FileNotFoundError:
                    self._rebuild_indexes(seg, f"index file {seg.offset_index_path} is missing")
                except CorruptIndexError as e:
                    self._rebuild_indexes(seg, _reason(e))

    def _rebuild_indexes(self, seg: LogSegment, why: str) -> None:
        # Start from no index files at all: a broken one may not even map.
        seg.close_handlers()
        _unlink(seg.offset_index_path)
        _unlink(seg.time_index_path)
        seg = self._open_segment(seg.base_offset)
        self._add(seg)
        cut = self._recover_segment(seg)
        extra = f"; {cut} bytes of invalid data cut from the log" if cut else ""
        _log.warning("rebuilt the indexes of %s: %s%s", seg.log_path, why, extra)

    def _recover_segment(self, seg: LogSegment) -> int:
        if seg.base_offset in self._recovered:
            return self._recovered[seg.base_offset]
        try:
            cut = seg.recover(None, self.leader_epoch_cache)
        except InvalidOffsetError as e:
            cut = seg.size
            seg.truncate_to(seg.base_offset)
            _log.warning(
                "emptied %s: invalid offsets found during recovery (%s)", seg.log_path, _reason(e)
            )
        self._recovered[seg.base_offset] = cut
        return cut

    # ------------------------------------------------------------------ recovery

    def _recover_log(self) -> tuple[int, int]:
        if not self.had_clean_shutdown:
            self._recover_unflushed()

        log_end: int | None = None
        if self._segments:
            log_end = self._segments.last_segment.read_next_offset()
            if log_end < self.log_start_offset_checkpoint:
                names = self._delete(self._segments.values())
                _log.warning(
                    "deleted every segment of %s (%s): the log ends at %d, before its log start "
                    "offset %d (segment files were removed behind the broker's back?)",
                    self.dir,
                    ", ".join(names),
                    log_end,
                    self.log_start_offset_checkpoint,
                )
                if self.leader_epoch_cache is not None:
                    self.leader_epoch_cache.clear()
                self.producer_state.truncate_fully(self.log_start_offset_checkpoint)
                log_end = None

        if not self._segments:
            self._add(self._new_segment(self.log_start_offset_checkpoint))
            log_end = self.log_start_offset_checkpoint
        assert log_end is not None
        if self.had_clean_shutdown:
            return log_end, log_end
        return min(self.recovery_point_checkpoint, log_end), log_end

    def _recover_unflushed(self) -> None:
        # The segment holding the recovery point and every one after it.
        unflushed = self._segments.segments_from(self.recovery_point_checkpoint)
        for i, seg in enumerate(unflushed):
            size_before = os.path.getsize(seg.log_path)
            cut = self._recover_segment(seg)
            _log.debug("recovered unflushed segment %s (%d bytes cut)", seg.log_path, cut)
            if cut <= 0:
                continue
            reason = seg.recovery_error or "invalid or torn batch"
            _log.warning(
                "truncated %s from %d to %d bytes: %s at position %d",
                seg.log_path,
                size_before,
                seg.size,
                reason,
                seg.size,
            )
            later = unflushed[i + 1 :]
            if later:
                paths = self._delete(later)
                _log.warning(
                    "deleted %d segment(s) after the corruption in %s: %s",
                    len(paths),
                    seg.log_path,
                    ", ".join(paths),
                )
            break

    # ------------------------------------------------------------------ producer state

    def _rebuild_producer_state(
        self, segments: list[LogSegment], log_start_offset: int, next_offset: int
    ) -> None:
        ps = self.producer_state
        now = self._clock()
        ps.truncate_and_reload(log_start_offset, next_offset, now)
        start = ps.map_end_offset
        if start < next_offset:
            _log.debug(
                "rebuilding producer state of %s from offset %d to %d", self.dir, start, next_offset
            )
            # The aborted transactions of the replayed range are indexed anew
            # from its markers (Kafka's LogSegment.recover rebuilds the
            # .txnindex the same way): entries there may be missing (not
            # flushed) or past a cut.
            for seg in segments:
                seg_next = seg.txn_index
                if seg.base_offset >= start:
                    seg_next.reset()
                else:
                    seg_next.truncate_to(start)
            for i, seg in enumerate(segments):
                seg_end = segments[i + 1].base_offset if i + 1 < len(segments) else next_offset
                if seg_end <= start or seg.size == 0:
                    continue
                position = 0
                if seg.base_offset < start:
                    found = seg.translate_offset(start)
                    if found is None:
                        continue
                    position = found[1]
                self._replay(seg, position, start)
        ps.update_map_end_offset(next_offset)
        ps.take_snapshot()

    def _replay(self, seg: LogSegment, position: int, from_offset: int) -> None:
        end = seg.size
        while position < end:
            infos, nxt = _native.read_batch_infos(seg.log_path, position, 1000, end)
            for b in infos:
                if b.producer_id < 0 or b.last_offset < from_offset:
                    continue
                marker = self._marker(seg, b) if b.is_control else None
                completed = self.producer_state.update(
                    b,
                    b.max_timestamp,
                    coordinator_epoch=None if marker is None else marker.coordinator_epoch,
                    is_abort=marker is not None and not marker.is_commit,
                )
                if completed is not None and completed.is_aborted:
                    seg.txn_index.append(
                        AbortedTxn(
                            completed.producer_id,
                            completed.first_offset,
                            completed.last_offset,
                            completed.last_stable_offset,
                        )
                    )
            if not infos or nxt <= position:
                break
            position = nxt

    @staticmethod
    def _marker(seg: LogSegment, batch: _native.BatchInfo) -> EndTransactionMarker | None:
        try:
            raw = os.pread(seg.fileno(), batch.size, batch.position)
        except OSError:
            return None
        return EndTransactionMarker.from_batch(raw)


def _reason(e: BaseException) -> str:
    text = str(e)
    return text if text else type(e).__name__


def segment_file_paths(dir: str, base_offset: int) -> list[str]:
    """The paths a segment's files have (log, indexes), for tools and tests."""
    return [
        log_file_name(dir, base_offset),
        offset_index_file_name(dir, base_offset),
        time_index_file_name(dir, base_offset),
        txn_index_file_name(dir, base_offset),
    ]
