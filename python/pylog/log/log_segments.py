"""LogSegments: a log's segments keyed by base offset.

Kafka's ``LogSegments``: the ordered collection a log keeps its segments in,
oldest first, the last one the *active* segment that takes appends. Lookups are
by offset: the segment whose range holds an offset is the one with the greatest
base offset at or below it (:meth:`LogSegments.floor_segment`). The collection
is not thread-safe; the Log that owns it serialises access with its lock.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator

from pylog.log.segment import LogSegment

__all__ = ["LogSegments"]


class LogSegments:
    """Segments by base offset, oldest first (at most one per base offset)."""

    __slots__ = ("_bases", "_segments")

    def __init__(self, segments: Iterable[LogSegment] = ()) -> None:
        self._segments: list[LogSegment] = sorted(segments, key=lambda s: s.base_offset)
        self._bases: list[int] = [s.base_offset for s in self._segments]

    def __len__(self) -> int:
        return len(self._segments)

    def __iter__(self) -> Iterator[LogSegment]:
        return iter(self._segments)

    def values(self) -> list[LogSegment]:
        """Every segment, oldest first (a copy)."""
        return list(self._segments)

    @property
    def first_segment(self) -> LogSegment:
        return self._segments[0]

    @property
    def last_segment(self) -> LogSegment:
        """The active segment."""
        return self._segments[-1]

    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    # ------------------------------------------------------------ lookups

    def contains(self, base_offset: int) -> bool:
        """Whether a segment starts at ``base_offset``."""
        i = bisect.bisect_left(self._bases, base_offset)
        return i < len(self._bases) and self._bases[i] == base_offset

    def get(self, base_offset: int) -> LogSegment | None:
        """The segment starting at ``base_offset``, if any."""
        i = bisect.bisect_left(self._bases, base_offset)
        if i < len(self._bases) and self._bases[i] == base_offset:
            return self._segments[i]
        return None

    def floor_segment(self, offset: int) -> LogSegment | None:
        """The segment whose range holds ``offset`` (greatest base <= offset)."""
        i = bisect.bisect_right(self._bases, offset) - 1
        return self._segments[i] if i >= 0 else None

    def segments_from(self, offset: int, to_offset: int | None = None) -> list[LogSegment]:
        """The segment holding ``offset`` (the first one when ``offset`` is below
        every base) and each later one, stopping before the first based at or
        after ``to_offset``."""
        start = max(bisect.bisect_right(self._bases, offset) - 1, 0)
        end = len(self._bases) if to_offset is None else bisect.bisect_left(self._bases, to_offset)
        return self._segments[start:end]

    def higher_segments(self, offset: int) -> list[LogSegment]:
        """The segments based above ``offset``."""
        return self._segments[bisect.bisect_right(self._bases, offset) :]

    def with_next(self) -> Iterator[tuple[LogSegment, LogSegment | None]]:
        """Each segment with the one after it (None after the active one)."""
        segments = self._segments
        for i, segment in enumerate(segments):
            yield segment, segments[i + 1] if i + 1 < len(segments) else None

    # ------------------------------------------------------------ changes

    def add(self, segment: LogSegment) -> None:
        """Insert ``segment``, replacing any segment at its base offset."""
        i = bisect.bisect_left(self._bases, segment.base_offset)
        if i < len(self._bases) and self._bases[i] == segment.base_offset:
            self._segments[i] = segment
        else:
            self._bases.insert(i, segment.base_offset)
            self._segments.insert(i, segment)

    def remove(self, segment: LogSegment) -> bool:
        """Take out ``segment`` itself (not another at its base offset); whether
        it was there."""
        i = bisect.bisect_left(self._bases, segment.base_offset)
        if i < len(self._bases) and self._segments[i] is segment:
            del self._bases[i]
            del self._segments[i]
            return True
        return False

    def clear(self) -> None:
        self._segments.clear()
        self._bases.clear()
