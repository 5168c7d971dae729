"""Reading partitions straight from log directories (the ``path`` option).

The driver lists ``<topic>-<partition>`` directories and learns each
partition's earliest offset (first segment, log-start-offset checkpoint), its
latest (the high watermark in ``replication-offset-checkpoint``, else the end
of the last complete batch) and offsets by timestamp. Executors read their
offset range segment by segment with the native columnar reader, starting at
the offset index's entry for the first offset.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass

from pylog import _native
from pylog.errors import CorruptRecordError, KafkaStorageError, OffsetOutOfRangeError
from pylog.log.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    OffsetCheckpointFile,
)
from pylog.log.files import (
    TXN_INDEX_FILE_SUFFIX,
    log_file_name,
    offset_from_file_name,
    offset_index_file_name,
)
from pylog.log.transaction_index import decode_aborted_txns

from ._aborted import aborted_ranges, kept_ranges

__all__ = ["LogDirs", "PartitionDir", "aborted_batches", "partition_log_end", "read_partition"]

_PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")
# rows per Arrow batch and bytes of segment read per native call: big enough to
# amortise the per-call Python work, small enough to bound executor memory
BATCH_RECORDS = 65536
WINDOW_BYTES = 8 << 20
_LAST = 2**63 - 1


@dataclass(frozen=True)
class PartitionDir:
    topic: str
    partition: int
    path: str


def _floor_position(path: str, base: int, target: int) -> int:
    """Where to start reading ``target`` in a segment: its offset index entry (0 without one)."""
    index = offset_index_file_name(path, base)
    if not os.path.exists(index):
        return 0
    return _native.index_floor_position(index, base, target)


def segment_bases(path: str) -> list[int]:
    """Base offsets of the live segments of a partition directory, ascending."""
    try:
        names = os.listdir(path)
    except OSError as e:
        raise KafkaStorageError(f"cannot list partition directory {path}: {e}") from e
    return sorted(offset_from_file_name(n) for n in names if n.endswith(".log"))


class LogDirs:
    """The partitions found under one or more log directories."""

    def __init__(self, dirs: list[str], up_to_log_end: bool = False) -> None:
        self.dirs = dirs
        self.up_to_log_end = up_to_log_end
        self.partitions: dict[tuple[str, int], PartitionDir] = {}
        self._hw: dict[tuple[str, int], int] = {}
        self._start: dict[tuple[str, int], int] = {}
        for d in dirs:
            if not os.path.isdir(d):
                raise KafkaStorageError(f"log directory {d!r} does not exist or is not readable")
            try:
                entries = sorted(os.listdir(d))
            except OSError as e:
                raise KafkaStorageError(f"cannot list log directory {d!r}: {e}") from e
            for name in entries:
                m = _PARTITION_DIR.match(name)
                full = os.path.join(d, name)
                # '-delete' / '-future' / '-stray' dirs carry a dot and a suffix
                if m is None or "." in name or not os.path.isdir(full):
                    continue
                tp = (m["topic"], int(m["partition"]))
                self.partitions[tp] = PartitionDir(tp[0], tp[1], full)
            for name, into in (
                (REPLICATION_OFFSET_CHECKPOINT, self._hw),
                (LOG_START_OFFSET_CHECKPOINT, self._start),
            ):
                cp = os.path.join(d, name)
                if os.path.exists(cp):
                    for tp2, off in OffsetCheckpointFile(cp).read().items():
                        into[(tp2.topic, tp2.partition)] = off

    def topics(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for t, p in sorted(self.partitions):
            out.setdefault(t, []).append(p)
        return out

    def earliest(self, tp: tuple[str, int]) -> int:
        pd = self.partitions[tp]
        bases = segment_bases(pd.path)
        first = bases[0] if bases else 0
        return max(first, self._start.get(tp, first))

    def log_end(self, tp: tuple[str, int]) -> int:
        """The offset after the last complete batch of the partition."""
        return partition_log_end(self.partitions[tp].path)

    def latest(self, tp: tuple[str, int]) -> int:
        end = self.log_end(tp)
        if self.up_to_log_end or tp not in self._hw:
            return end
        return min(self._hw[tp], end)

    def offset_for_time(self, tp: tuple[str, int], timestamp: int) -> int | None:
        """The first offset whose record timestamp is >= ``timestamp`` (None if none)."""
        pd = self.partitions[tp]
        for base in segment_bases(pd.path):
            log = log_file_name(pd.path, base)
            found = _native.find_offset_by_timestamp(log, timestamp, 0, os.path.getsize(log))
            if found is not None:
                return found[1]
        return None


def partition_log_end(path: str) -> int:
    """The offset after the last complete batch in a partition directory."""
    for base in reversed(segment_bases(path)):
        log = log_file_name(path, base)
        pos = _floor_position(path, base, _LAST)
        last = -1
        while True:
            infos, pos = _native.read_batch_infos(log, pos, 10000)
            if not infos:
                break
            last = infos[-1].last_offset
        if last >= 0:
            return last + 1
        if base > 0 or os.path.getsize(log) == 0:
            return base
    return 0


def batch_starts(path: str) -> list[int]:
    """Offsets where a batch starts that the offset indexes know of (an entry's
    offset is its batch's last), with the segment bases, ascending."""
    out = []
    for base in segment_bases(path):
        out.append(base)
        index = offset_index_file_name(path, base)
        if os.path.exists(index):
            out.extend(o + 1 for o in _native.index_entry_offsets(index, base))
    return sorted(set(out))


def aborted_batches(path: str, start: int, end: int) -> list[tuple[int, int]]:
    """(base, last) offsets of the batches in ``[start, end)`` of aborted
    transactions: the ``.txnindex`` entries (one per ABORT marker, Kafka's
    format) overlapping the range, then the batch headers they span."""
    txns = []
    try:
        names = os.listdir(path)
    except OSError as e:
        raise KafkaStorageError(f"cannot list partition directory {path}: {e}") from e
    for name in names:
        if not name.endswith(TXN_INDEX_FILE_SUFFIX):
            continue
        full = os.path.join(path, name)
        try:
            with open(full, "rb") as f:
                data = f.read()
        except OSError as e:
            raise KafkaStorageError(f"cannot read {full}: {e}") from e
        txns += [
            t
            for t in decode_aborted_txns(data, full)
            if t.last_offset >= start and t.first_offset < end
        ]
    if not txns:
        return []
    lo = max(start, min(t.first_offset for t in txns))
    hi = min(end, max(t.last_offset for t in txns) + 1)
    infos: list[_native.BatchInfo] = []
    bases = segment_bases(path)
    for i, base in enumerate(bases):
        nxt = bases[i + 1] if i + 1 < len(bases) else None
        if (nxt is not None and nxt <= lo) or base >= hi:
            continue
        log = log_file_name(path, base)
        pos = _floor_position(path, base, max(lo, base))
        while True:
            got, pos = _native.read_batch_infos(log, pos, 10000)
            if not got:
                break
            infos += [b for b in got if b.last_offset >= lo]
            if got[-1].last_offset + 1 >= hi:
                break
    return aborted_ranges(infos, [(t.producer_id, t.first_offset) for t in txns])


def read_partition(
    path: str,
    topic: str,
    partition: int,
    start: int,
    end: int,
    include_headers: bool,
    fail_on_data_loss: bool,
    read_committed: bool = False,
) -> Iterator[tuple[object, ...]]:
    """Native column tuples for the records of ``[start, end)`` in a partition
    directory; ``read_committed`` leaves out aborted transactions' records."""
    if not read_committed:
        yield from _read_range(
            path, topic, partition, start, end, include_headers, fail_on_data_loss
        )
        return
    holes = aborted_batches(path, start, end)
    for i, (a, b) in enumerate(kept_ranges(start, end, holes)):
        # only the first piece can start below the log start
        check = fail_on_data_loss if i == 0 else False
        yield from _read_range(path, topic, partition, a, b, include_headers, check)


def _read_range(
    path: str,
    topic: str,
    partition: int,
    start: int,
    end: int,
    include_headers: bool,
    fail_on_data_loss: bool,
) -> Iterator[tuple[object, ...]]:
    bases = segment_bases(path)
    if not bases or start < bases[0]:
        first = bases[0] if bases else None
        if fail_on_data_loss:
            raise OffsetOutOfRangeError(
                f"{topic}-{partition}: offsets from {start} were requested but the log "
                f"{'is empty' if first is None else f'starts at {first}'} in {path} (records "
                "deleted by retention?); set failOnDataLoss=false to skip them"
            )
        if first is None:
            return
        start = max(start, first)
    cur = start
    for i, base in enumerate(bases):
        nxt = bases[i + 1] if i + 1 < len(bases) else None
        if nxt is not None and nxt <= cur:
            continue
        if base >= end or cur >= end:
            break
        log = log_file_name(path, base)
        pos = _floor_position(path, base, cur)
        while True:
            try:
                cols, pos, next_offset, done = _native.read_segment_columns(
                    log,
                    pos,
                    None,
                    cur,
                    end,
                    include_headers=include_headers,
                    max_records=BATCH_RECORDS,
                    window=WINDOW_BYTES,
                )
            except CorruptRecordError as e:
                # name the file: the native error only knows the position
                raise CorruptRecordError(str(e), e.position, log) from e
            cur = max(cur, next_offset)
            if cols[0]:
                yield cols
            if done:
                break
