"""Retention: which of a log's oldest segments are due for deletion.

Kafka's ``UnifiedLog.deleteOldSegments`` applies three rules in turn, each to
the oldest segments:

* **log start offset** — a segment wholly below it (DeleteRecords, or an
  earlier rule, moved it) goes, whatever the ``cleanup.policy``;
* **retention.bytes** — under the delete policy, the oldest segments go while
  the log stays at least that large without them;
* **retention.ms** — under the delete policy, a segment whose newest record is
  older than that goes.

A rule is a :data:`Breach`: a test of a segment (and the one after it, None
for the active segment). :func:`deletable_segments` takes the oldest run of
segments a rule holds for, never past the high watermark and never the empty
active segment. This module only decides; the Log removes what it names
(rolling a new segment first when every segment goes) and moves its log start
offset to its new first segment.
"""

from __future__ import annotations

from collections.abc import Callable

from pylog.common.utils.time import Clock
from pylog.log.log_segments import LogSegments
from pylog.log.segment import LogSegment

__all__ = [
    "Breach",
    "deletable_segments",
    "log_start_offset_breached",
    "retention_ms_breached",
    "retention_size_breached",
]

#: Whether a segment (given the one after it, None for the active one) is due.
Breach = Callable[[LogSegment, LogSegment | None], bool]


def log_start_offset_breached(log_start_offset: int) -> Breach:
    """Segments whose successor starts at or below the log start offset."""

    def breached(_: LogSegment, nxt: LogSegment | None) -> bool:
        return nxt is not None and nxt.base_offset <= log_start_offset

    return breached


def retention_size_breached(segments: LogSegments, retention_bytes: int) -> Breach | None:
    """The oldest segments the log can lose and keep ``retention_bytes``; None
    when there is no limit (-1) or the log is within it."""
    total = segments.size_in_bytes()
    if retention_bytes < 0 or total < retention_bytes:
        return None
    excess = total - retention_bytes

    def breached(segment: LogSegment, _: LogSegment | None) -> bool:
        nonlocal excess
        if excess - segment.size >= 0:
            excess -= segment.size
            return True
        return False

    return breached


def retention_ms_breached(retention_ms: int, clock: Clock) -> Breach | None:
    """Segments whose newest record is older than ``retention_ms``; None when
    segments are kept forever (-1)."""
    if retention_ms < 0:
        return None
    now = clock()

    def breached(segment: LogSegment, _: LogSegment | None) -> bool:
        return now - segment.largest_timestamp > retention_ms

    return breached


def deletable_segments(
    segments: LogSegments, breached: Breach, high_watermark: int, log_end_offset: int
) -> list[LogSegment]:
    """The oldest segments ``breached`` holds for, up to the first it fails for
    or that reaches past the high watermark (and never the empty active one)."""
    out: list[LogSegment] = []
    for segment, nxt in segments.with_next():
        if nxt is None and segment.size == 0:
            break  # never the empty active segment
        if not breached(segment, nxt):
            break
        upper = nxt.base_offset if nxt is not None else log_end_offset
        if high_watermark < upper:
            break
        out.append(segment)
    return out
