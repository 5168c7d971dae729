"""What a read of the log returns: a byte range of one segment file, not a copy.

``FileRecords`` names a slice (file descriptor, position, size) so the network
layer can ``os.sendfile`` it straight to the socket; ``read_bytes`` copies it
for callers that need the bytes (replica fetchers, tests, the cleaner).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Protocol

from pylog.errors import KafkaStorageError
from pylog.log.offset_metadata import LogOffsetMetadata


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


@dataclass(frozen=True, slots=True)
class FetchDataInfo:
    """Where a read started and what it found.

    ``first_entry_incomplete`` is set when the first batch at the fetch offset
    is larger than ``max_size`` allowed and ``min_one_message`` was off: the
    slice then holds a partial batch, which a consumer recognises and answers
    by raising its fetch size.
    """

    fetch_offset_metadata: LogOffsetMetadata
    records: FileRecords = EMPTY_RECORDS
    first_entry_incomplete: bool = False

    @property
    def is_empty(self) -> bool:
        return self.records.size == 0
