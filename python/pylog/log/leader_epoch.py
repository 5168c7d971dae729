"""The leader-epoch cache of one partition: which epoch began at which offset.

Each entry says "epoch E's first batch is at offset O". The cache lives in
memory and is written to ``<partition dir>/leader-epoch-checkpoint`` (Kafka's
checkpoint format, version 0, ``<epoch> <start offset>`` lines) on every
change. Followers ask it, through OffsetsForLeaderEpoch, where an epoch ended
so they can truncate to the leader's history.

Entries are kept strictly increasing in both epoch and start offset: a new entry
removes every later entry that would break that order.
"""

from __future__ import annotations

import bisect
import logging
import os
import threading
from typing import NamedTuple

from pylog.log.checkpoint import CheckpointFile

__all__ = [
    "LEADER_EPOCH_CHECKPOINT",
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
    "EpochEntry",
    "LeaderEpochCheckpointFile",
    "LeaderEpochFileCache",
]

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1

_log = logging.getLogger("pylog.log")


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


class _EpochFormatter:
    def to_line(self, entry: EpochEntry) -> str:
        return f"{entry.epoch} {entry.start_offset}"

    def from_line(self, line: str) -> EpochEntry | None:
        parts = line.split()
        if len(parts) != 2:
            return None
        try:
            return EpochEntry(int(parts[0]), int(parts[1]))
        except ValueError:
            return None


class LeaderEpochCheckpointFile(CheckpointFile[EpochEntry]):
    VERSION = 0

    def __init__(self, path: str | os.PathLike[str]):
        super().__init__(path, self.VERSION, _EpochFormatter())


class LeaderEpochFileCache:
    """Epoch → start offset, persisted on every change. Thread-safe."""

    def __init__(self, path: str | os.PathLike[str]):
        self._checkpoint = LeaderEpochCheckpointFile(path)
        self._lock = threading.RLock()
        # Two parallel sorted lists: epochs strictly increase, and so do offsets.
        self._epochs: list[int] = []
        self._offsets: list[int] = []
        with self._lock:
            for entry in self._checkpoint.read():
                self._assign(entry)

    @property
    def path(self) -> str:
        return self._checkpoint.path

    # ------------------------------------------------------------------ updates

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset``.

        Re-assigning the latest epoch at a later offset is a no-op (the epoch
        already started earlier). An entry that goes back in epoch or offset
        removes the later entries it conflicts with.
        """
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid leader epoch entry: epoch {epoch}, offset {start_offset}")
        with self._lock:
            if self._assign(EpochEntry(epoch, start_offset)):
                self._flush()

    def _assign(self, entry: EpochEntry) -> bool:
        if self._epochs:
            last_epoch, last_offset = self._epochs[-1], self._offsets[-1]
            if entry.epoch == last_epoch and entry.start_offset >= last_offset:
                return False
        removed: list[EpochEntry] = []
        while self._epochs and (
            self._epochs[-1] >= entry.epoch or self._offsets[-1] >= entry.start_offset
        ):
            removed.append(EpochEntry(self._epochs.pop(), self._offsets.pop()))
        # Replacing only an entry at the same offset means nothing was written in
        # that epoch: expected, not worth a warning.
        if len(removed) > 1 or (removed and removed[0].start_offset != entry.start_offset):
            _log.warning(
                "leader epoch cache %s: new entry %s truncated conflicting entries %s",
                self.path,
                entry,
                list(reversed(removed)),
            )
        self._epochs.append(entry.epoch)
        self._offsets.append(entry.start_offset)
        return True

    def truncate_from_end(self, end_offset: int) -> None:
        """Remove every entry starting at or after ``end_offset`` (the log was truncated there)."""
        with self._lock:
            if end_offset < 0 or not self._offsets or self._offsets[-1] < end_offset:
                return
            cut = bisect.bisect_left(self._offsets, end_offset)
            del self._epochs[cut:]
            del self._offsets[cut:]
            self._flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop entries wholly before ``start_offset``; the epoch covering it now starts there."""
        with self._lock:
            # Entries with start offset <= start_offset; the last of them covers start_offset.
            cut = bisect.bisect_right(self._offsets, start_offset)
            if cut == 0:
                return
            covering = self._epochs[cut - 1]
            del self._epochs[:cut]
            del self._offsets[:cut]
            self._epochs.insert(0, covering)
            self._offsets.insert(0, start_offset)
            self._flush()

    def clear(self) -> None:
        """Remove every entry (and persist the empty cache)."""
        with self._lock:
            self._epochs.clear()
            self._offsets.clear()
            self._flush()

    def _flush(self) -> None:
        self._checkpoint.write(self.entries())

    # ------------------------------------------------------------------ queries

    def entries(self) -> list[EpochEntry]:
        with self._lock:
            return [EpochEntry(e, o) for e, o in zip(self._epochs, self._offsets, strict=True)]

    def __len__(self) -> int:
        with self._lock:
            return len(self._epochs)

    @property
    def latest_epoch(self) -> int | None:
        with self._lock:
            return self._epochs[-1] if self._epochs else None

    @property
    def latest_entry(self) -> EpochEntry | None:
        with self._lock:
            return EpochEntry(self._epochs[-1], self._offsets[-1]) if self._epochs else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        with self._lock:
            return EpochEntry(self._epochs[0], self._offsets[0]) if self._epochs else None

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch the batch at ``offset`` belongs to; None before the first entry."""
        with self._lock:
            i = bisect.bisect_right(self._offsets, offset)
            return self._epochs[i - 1] if i > 0 else None

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) answering OffsetsForLeaderEpoch for ``requested_epoch``.

        The epoch is the greatest known epoch <= the requested one and the end
        offset is the start of the next higher epoch; the latest epoch ends at
        the log end offset. An epoch older than the first entry answers itself
        with the first entry's start offset (as Kafka does: nothing before that
        offset can diverge). An undefined epoch, or one newer than the latest,
        answers (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET).
        """
        with self._lock:
            if requested_epoch == UNDEFINED_EPOCH or not self._epochs:
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            if requested_epoch == self._epochs[-1]:
                return requested_epoch, log_end_offset
            higher = bisect.bisect_right(self._epochs, requested_epoch)
            if higher == len(self._epochs):
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            if higher == 0:
                return requested_epoch, self._offsets[0]
            return self._epochs[higher - 1], self._offsets[higher]

    def __repr__(self) -> str:
        return f"LeaderEpochFileCache({self.path!r}, {self.entries()!r})"
