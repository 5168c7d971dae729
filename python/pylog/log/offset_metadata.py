"""LogOffsetMetadata: an offset together with where it sits on disk.

A fetch or a high-watermark check often needs to know not only an offset but
which segment holds it and at which byte, so that "how many bytes lie between
these two offsets" needs no index lookup. Positions are only known for offsets
the log has located; ``message_offset_only`` says when they are not.
"""

from __future__ import annotations

from dataclasses import dataclass

UNKNOWN_OFFSET = -1
UNKNOWN_FILE_POSITION = -1


@dataclass(frozen=True, slots=True)
class LogOffsetMetadata:
    """``message_offset`` in the segment based at ``segment_base_offset``, at byte
    ``relative_position_in_segment`` of its ``.log`` file."""

    message_offset: int
    segment_base_offset: int = UNKNOWN_OFFSET
    relative_position_in_segment: int = UNKNOWN_FILE_POSITION

    @property
    def message_offset_only(self) -> bool:
        """True when the segment and position are unknown."""
        return (
            self.segment_base_offset == UNKNOWN_OFFSET
            and self.relative_position_in_segment == UNKNOWN_FILE_POSITION
        )

    def on_older_segment(self, that: LogOffsetMetadata) -> bool:
        """True if this offset's segment precedes ``that``'s."""
        self._require_position("on_older_segment")
        that._require_position("on_older_segment")
        return self.segment_base_offset < that.segment_base_offset

    def on_same_segment(self, that: LogOffsetMetadata) -> bool:
        self._require_position("on_same_segment")
        that._require_position("on_same_segment")
        return self.segment_base_offset == that.segment_base_offset

    def position_diff(self, that: LogOffsetMetadata) -> int:
        """Bytes from ``that`` to this offset; both must be on the same segment."""
        if not self.on_same_segment(that):
            raise ValueError(f"{self} and {that} are not on the same segment")
        return self.relative_position_in_segment - that.relative_position_in_segment

    def _require_position(self, what: str) -> None:
        if self.message_offset_only:
            raise ValueError(f"{what} needs a located offset, {self} has only the message offset")

    def __str__(self) -> str:
        return (
            f"(offset={self.message_offset} segment=[{self.segment_base_offset}:"
            f"{self.relative_position_in_segment}])"
        )
