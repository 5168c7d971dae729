"""Records as the wire sends them: a byte range of a segment file, not a copy.

Kafka's ``FileRecords``: the storage layer hands a read back as a slice
(file descriptor, position, size) so the network layer can ``os.sendfile`` it
straight to the socket; ``read_bytes`` copies it for callers that need the
bytes (replica fetchers, tests, the cleaner). It lives outside both layers so
that the wire (``pylog.network``, ``pylog.protocol``) knows no storage type:
it sees only the :class:`SliceSource` protocol a segment satisfies.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Protocol

from pylog.errors import KafkaStorageError

__all__ = ["EMPTY_RECORDS", "FileRecords", "SliceSource"]


class SliceSource(Protocol):
    """The open file a slice reads from (a LogSegment)."""

    @property
    def log_path(self) -> str: ...

    def fileno(self) -> int: ...


@dataclass(frozen=True, slots=True)
class FileRecords:
    """``size`` bytes of a segment's ``.log`` file from ``position``.

    The slice keeps its segment reachable, not open: a segment deleted by
    retention keeps its descriptor until ``file.delete.delay.ms`` has passed,
    which is the time a slice has to be sent.
    """

    source: SliceSource | None
    position: int
    size: int

    @property
    def path(self) -> str:
        return self.source.log_path if self.source is not None else ""

    def fileno(self) -> int:
        """The descriptor to hand to ``os.sendfile`` (with ``position``/``size``)."""
        if self.source is None:
            raise ValueError("an empty slice has no file")
        return self.source.fileno()

    def size_in_bytes(self) -> int:
        return self.size

    def __len__(self) -> int:
        return self.size

    def read_bytes(self) -> bytes:
        """The slice's bytes (fewer only if the file was truncated since)."""
        if self.size == 0 or self.source is None:
            return b""
        fd = self.source.fileno()
        chunks: list[bytes] = []
        done = 0
        try:
            while done < self.size:
                chunk = os.pread(fd, self.size - done, self.position + done)
                if not chunk:
                    break
                chunks.append(chunk)
                done += len(chunk)
        except OSError as e:
            raise KafkaStorageError(f"reading {self.path}: {e}", e.errno) from e
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)


EMPTY_RECORDS = FileRecords(None, 0, 0)
