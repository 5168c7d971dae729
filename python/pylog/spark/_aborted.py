"""Read committed: which batches of a partition belong to aborted transactions.

Kafka's consumer rule (``CompletedFetch``, KIP-98): given the aborted
transactions overlapping a read as (producer id, first offset) — from a
read_committed Fetch answer, or from the partition's ``.txnindex`` files — a
producer's transactional batches are dropped from the first offset of its
aborted transaction on until that producer's next control batch, the
transaction's ABORT marker. Control batches themselves are never rows (the
native decoder skips them).
"""

from __future__ import annotations

import heapq

from pylog import _native

__all__ = ["aborted_ranges", "kept_ranges"]


def aborted_ranges(
    infos: list[_native.BatchInfo], aborted: list[tuple[int, int]]
) -> list[tuple[int, int]]:
    """The (base, last) offsets of the batches, among ``infos`` in offset
    order, of the aborted transactions (producer id, first offset) — Kafka's
    consumer rule: a producer's transactional batches are dropped from the
    first offset of an aborted transaction until that producer's next control
    batch (the transaction's ABORT marker)."""
    if not aborted:
        return []
    pending = sorted((first, pid) for pid, first in aborted)
    heapq.heapify(pending)
    current: set[int] = set()
    out: list[tuple[int, int]] = []
    for b in infos:
        if b.producer_id < 0:
            continue
        while pending and pending[0][0] <= b.last_offset:
            current.add(heapq.heappop(pending)[1])
        if b.is_control:
            current.discard(b.producer_id)
        elif b.is_transactional and b.producer_id in current:
            out.append((b.base_offset, b.last_offset))
    return out


def kept_ranges(start: int, end: int, holes: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """[start, end) without the inclusive (base, last) ``holes`` (sorted)."""
    out = []
    cur = start
    for base, last in holes:
        if last < cur:
            continue
        if base >= end:
            break
        if base > cur:
            out.append((cur, base))
        cur = max(cur, last + 1)
    if cur < end:
        out.append((cur, end))
    return out
