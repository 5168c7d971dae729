"""Shared test fixtures: record batches built for real, a settable clock and a
scheduler the test drives by hand (their classes are in tests/support/).
Everything writes real files under tmp_path."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from support.clock import ManualClock
from support.scheduler import ManualScheduler

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


# The files that take longest (make test's --durations), slowest first. Each
# file runs whole on one xdist worker (--dist loadfile) in collection order
# (the Makefile turns off xdist's reordering by test count, which put these
# few-test files last): started first, they no longer leave one worker
# running a four-minute file while the other has finished.
SLOW_FIRST = (
    "integration/test_mixed_cluster_rolling.py",
    "integration/test_librdkafka_suite.py",
    "integration/test_cluster_guarantees.py",
    "integration/test_network_partitions.py",
    "integration/test_mixed_cluster.py",
    "integration/test_kafka_streams.py",
    "integration/test_go_clients.py",
    "integration/test_jbod.py",
    "integration/test_dynamic_broker_config.py",
    "integration/test_share_groups.py",
    "integration/test_cli_transactions.py",
    "integration/test_cli_tools.py",
    "integration/test_readme.py",
    "integration/test_security_clients.py",
)


def _file_rank(item: pytest.Item) -> int:
    rel = Path(item.path).resolve().relative_to(_TESTS).as_posix()
    return SLOW_FIRST.index(rel) if rel in SLOW_FIRST else len(SLOW_FIRST)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """tests/integration → integration; tests/spark → spark and integration
    (a Spark session with a broker process). Unit tests under tests/unit carry
    no marker, so ``-m "not integration"`` runs exactly them. The slowest
    files go first (SLOW_FIRST); a stable sort keeps every other file's place."""
    items.sort(key=_file_rank)
    for item in items:
        parts = Path(item.path).resolve().relative_to(_TESTS).parts
        if parts[0] == "spark":
            item.add_marker(pytest.mark.spark)
            item.add_marker(pytest.mark.integration)
        elif parts[0] in ("integration", "differential"):
            item.add_marker(pytest.mark.integration)
