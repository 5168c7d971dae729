"""Shared test fixtures: record batches built for real, a settable clock and a
scheduler the test drives by hand. Everything writes real files under tmp_path."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from pylog import _native

Record = tuple[bytes | None, bytes | None]


def build_batch(
    records: Sequence[Record | bytes],
    *,
    base_offset: int = 0,
    timestamp: int | Sequence[int] | None = None,
    compression: int = 0,
    partition_leader_epoch: int = -1,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
) -> bytes:
    """One v2 batch of ``records`` ((key, value) pairs or bare values).

    ``timestamp`` is one timestamp for all records, one per record, or now.
    Uses ``pylog._native.build_batch`` when the extension has it, else
    kafka-python's builder (same bytes, different author: a useful cross-check).
    """
    pairs: list[Record] = [r if isinstance(r, tuple) else (None, r) for r in records]
    now = int(time.time() * 1000)
    if timestamp is None:
        stamps = [now] * len(pairs)
    elif isinstance(timestamp, int):
        stamps = [timestamp] * len(pairs)
    else:
        stamps = list(timestamp)
    if hasattr(_native, "build_batch"):
        return _native.build_batch(
            [(k, v, [], ts) for (k, v), ts in zip(pairs, stamps, strict=True)],
            base_offset=base_offset,
            compression=compression,
            partition_leader_epoch=partition_leader_epoch,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
            is_transactional=is_transactional,
        )
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=compression,
        is_transactional=is_transactional,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        batch_size=1 << 30,
    )
    for i, ((k, v), ts) in enumerate(zip(pairs, stamps, strict=True)):
        builder.append(i, ts, k, v, [])
    buf = builder.build()
    # Base offset and partition leader epoch sit before the CRC'd part of the header.
    buf[0:8] = base_offset.to_bytes(8, "big", signed=True)
    buf[12:16] = partition_leader_epoch.to_bytes(4, "big", signed=True)
    return bytes(buf)


class ManualClock:
    """Milliseconds that only move when the test says so."""

    def __init__(self, now_ms: int | None = None) -> None:
        self.now_ms = int(time.time() * 1000) if now_ms is None else now_ms

    def __call__(self) -> int:
        return self.now_ms

    def advance(self, ms: int) -> None:
        self.now_ms += ms


class ManualScheduler:
    """Collects scheduled tasks; ``run_due(clock)`` / ``run_all()`` runs them in
    the test's thread, so background work happens at a known moment."""

    def __init__(self, clock: Callable[[], int] | None = None) -> None:
        self.clock = clock
        self.tasks: list[tuple[float, str, Callable[[], Any]]] = []

    def schedule_once(self, name: str, fn: Callable[[], object], delay_ms: float = 0) -> None:
        due = (self.clock() if self.clock else 0) + delay_ms
        self.tasks.append((due, name, fn))

    def names(self) -> list[str]:
        return [name for _, name, _ in self.tasks]

    def run_all(self) -> int:
        ran = 0
        while self.tasks:
            tasks, self.tasks = self.tasks, []
            for _, _, fn in tasks:
                fn()
                ran += 1
        return ran

    def run_due(self) -> int:
        now = self.clock() if self.clock else 0
        due = [t for t in self.tasks if t[0] <= now]
        self.tasks = [t for t in self.tasks if t[0] > now]
        for _, _, fn in due:
            fn()
        return len(due)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_700_000_000_000)


@pytest.fixture
def scheduler(clock: ManualClock) -> ManualScheduler:
    return ManualScheduler(clock)


@pytest.fixture
def batch() -> Callable[..., bytes]:
    """``batch([b"v1", (b"k", b"v2")], base_offset=..., timestamp=...)`` → one v2 batch."""
    return build_batch


# ---------------------------------------------------------------- markers by directory

_TESTS = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """tests/integration → integration; tests/spark → spark and integration
    (a Spark session with a broker process). Unit tests under tests/unit carry
    no marker, so ``-m "not integration"`` runs exactly them."""
    for item in items:
        parts = Path(item.path).resolve().relative_to(_TESTS).parts
        if parts[0] == "spark":
            item.add_marker(pytest.mark.spark)
            item.add_marker(pytest.mark.integration)
        elif parts[0] in ("integration", "differential"):
            item.add_marker(pytest.mark.integration)
