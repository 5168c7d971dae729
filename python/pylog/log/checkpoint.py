"""Kafka's checkpoint files: the one text format behind every ``*-checkpoint`` file.

A checkpoint is ``<version>\\n<count>\\n`` followed by ``count`` entry lines. The
offset checkpoints (``recovery-point-offset-checkpoint``,
``log-start-offset-checkpoint``, ``replication-offset-checkpoint``,
``cleaner-offset-checkpoint``) hold ``<topic> <partition> <offset>`` lines at
version 0; ``leader-epoch-checkpoint`` holds ``<epoch> <start offset>`` lines at
version 0 and reuses :class:`CheckpointFile` with its own formatter.

A write never leaves a half-written checkpoint behind: the entries go to
``<file>.tmp``, which is fsynced, renamed over the file, and the directory is
fsynced so that the rename itself survives a crash.
"""

from __future__ import annotations

import errno as errno_mod
import os
import threading
from collections.abc import Iterable, Mapping
from typing import Generic, NamedTuple, Protocol, TypeVar

from pylog.common.topic_partition import TopicPartition
from pylog.errors import KafkaStorageError

__all__ = [
    "CLEANER_OFFSET_CHECKPOINT",
    "LOG_START_OFFSET_CHECKPOINT",
    "RECOVERY_POINT_CHECKPOINT",
    "REPLICATION_OFFSET_CHECKPOINT",
    "CheckpointFile",
    "CorruptCheckpointError",
    "EntryFormatter",
    "OffsetCheckpointFile",
    "fsync_dir",
    "replace_file_durably",
]

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"

T = TypeVar("T")


class CorruptCheckpointError(KafkaStorageError):
    """A checkpoint file that does not parse; the message names the file and line."""

    def __init__(self, path: str, message: str, line_number: int | None = None):
        where = f"{path}:{line_number}" if line_number is not None else path
        super().__init__(f"corrupt checkpoint file {where}: {message}")
        self.path = path
        self.line_number = line_number


class EntryFormatter(Protocol[T]):
    """How one entry of a checkpoint becomes a line and back."""

    def to_line(self, entry: T) -> str: ...

    def from_line(self, line: str) -> T | None:
        """The entry of ``line``, or None when the line does not parse."""


def fsync_dir(path: str) -> None:
    """fsync a directory so that renames and creations in it are durable."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    except OSError as e:
        # Some filesystems refuse fsync on a directory; the data itself is synced.
        if e.errno not in (errno_mod.EINVAL, errno_mod.EBADF):
            raise
    finally:
        os.close(fd)


def replace_file_durably(path: str, data: bytes) -> None:
    """Make ``data`` the contents of ``path`` so that a crash leaves the old file
    or the new one, never a part: write ``path.tmp``, fsync it, rename it over
    ``path``, fsync the directory. OSError as it comes."""
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(os.path.dirname(os.path.abspath(path)))


class CheckpointFile(Generic[T]):
    """A versioned list of entries in Kafka's checkpoint text format. Thread-safe."""

    def __init__(self, path: str | os.PathLike[str], version: int, formatter: EntryFormatter[T]):
        self.path = os.fspath(path)
        self.version = version
        self._formatter = formatter
        self._lock = threading.Lock()

    def write(self, entries: Iterable[T]) -> None:
        items = list(entries)
        lines = [str(self.version), str(len(items))]
        lines.extend(self._formatter.to_line(e) for e in items)
        data = ("\n".join(lines) + "\n").encode("utf-8")
        with self._lock:
            try:
                replace_file_durably(self.path, data)
            except OSError as e:
                raise KafkaStorageError(
                    f"error while writing checkpoint file {self.path}: {e}", e.errno
                ) from e

    def read(self) -> list[T]:
        """The entries; an absent or empty file reads as no entries."""
        with self._lock:
            try:
                with open(self.path, encoding="utf-8") as f:
                    text = f.read()
            except FileNotFoundError:
                return []
            except (OSError, UnicodeDecodeError) as e:
                errno = e.errno if isinstance(e, OSError) else None
                raise KafkaStorageError(
                    f"error while reading checkpoint file {self.path}: {e}", errno
                ) from e
        return self._parse(text)

    def _parse(self, text: str) -> list[T]:
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        if not lines:
            return []
        try:
            version = int(lines[0].strip())
        except ValueError:
            raise CorruptCheckpointError(
                self.path, f"malformed version line {lines[0]!r}", 1
            ) from None
        if version != self.version:
            raise CorruptCheckpointError(
                self.path, f"unrecognized version {version} (expected {self.version})", 1
            )
        if len(lines) < 2:
            raise CorruptCheckpointError(self.path, "missing entry count line", 2)
        try:
            expected = int(lines[1].strip())
        except ValueError:
            raise CorruptCheckpointError(
                self.path, f"malformed entry count line {lines[1]!r}", 2
            ) from None
        if expected < 0:
            raise CorruptCheckpointError(self.path, f"negative entry count {expected}", 2)
        entries: list[T] = []
        for number, line in enumerate(lines[2:], start=3):
            entry = self._formatter.from_line(line)
            if entry is None:
                raise CorruptCheckpointError(self.path, f"malformed line {line!r}", number)
            entries.append(entry)
        if len(entries) != expected:
            raise CorruptCheckpointError(
                self.path, f"expected {expected} entries but found {len(entries)}"
            )
        return entries


class _OffsetEntry(NamedTuple):
    partition: TopicPartition
    offset: int


class _OffsetFormatter:
    def to_line(self, entry: _OffsetEntry) -> str:
        return f"{entry.partition.topic} {entry.partition.partition} {entry.offset}"

    def from_line(self, line: str) -> _OffsetEntry | None:
        parts = line.split()
        if len(parts) != 3:
            return None
        topic, partition, offset = parts
        try:
            return _OffsetEntry(TopicPartition(topic, int(partition)), int(offset))
        except ValueError:
            return None


class OffsetCheckpointFile:
    """``<topic> <partition> <offset>`` checkpoints (version 0), as a mapping."""

    VERSION = 0

    def __init__(self, path: str | os.PathLike[str]):
        self._file = CheckpointFile(path, self.VERSION, _OffsetFormatter())

    @property
    def path(self) -> str:
        return self._file.path

    def write(self, offsets: Mapping[TopicPartition, int] | Mapping[tuple[str, int], int]) -> None:
        self._file.write(
            _OffsetEntry(TopicPartition(tp[0], tp[1]), off)
            for tp, off in sorted(offsets.items(), key=lambda kv: (kv[0][0], kv[0][1]))
        )

    def read(self) -> dict[TopicPartition, int]:
        return {e.partition: e.offset for e in self._file.read()}
