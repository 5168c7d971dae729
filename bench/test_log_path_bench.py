"""The Log's per-call cost on the Produce and Fetch paths, with small batches
where the Python around the native calls shows: ``append_as_leader`` of one
1 KiB-record batch, ``append_as_follower`` of the same bytes, and ``read`` of
one batch at the high watermark's side (a consumer's fetch) and from the log
end's side (a follower's). Beside them, in the same run and group, the
cheapest native call there is (``_native.crc32c(b"")``) as the baseline.

    .venv/bin/python -m pytest -q -s bench/test_log_path_bench.py

Only the Log's public API is used, so the same file measures another tree
(another venv's interpreter) for a before/after comparison.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pylog import _native
from pylog.log.config import LogConfig
from pylog.log.log import FetchIsolation, Log

GROUP = "log-path"
CALLS = 2000  # calls per benchmark round
#: name -> (min, median) seconds per call; the minimum is the figure to
#: compare on a shared machine, where others' load only ever adds time
FIGURES: dict[str, tuple[float, float]] = {}


def _batch() -> bytearray:
    records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]] = [
        (b"k", os.urandom(1000), [], int(time.time() * 1000))
    ]
    return bytearray(_native.build_batch(records))


def _config() -> LogConfig:
    # No roll during a run: segment.bytes far above what the rounds write.
    return LogConfig.from_props({"segment.bytes": 1 << 30})


@pytest.fixture
def log(tmp_path: Path) -> Iterator[Log]:
    log = Log.open(str(tmp_path / "t-0"), _config())
    yield log
    log.close()


def _record(name: str, benchmark: Any) -> None:
    stats = getattr(benchmark, "stats", None)
    if stats is not None:
        FIGURES[name] = (stats.stats.min / CALLS, stats.stats.median / CALLS)


def test_baseline_native_call(benchmark: Any) -> None:
    benchmark.group = GROUP
    crc = _native.crc32c

    def run() -> None:
        for _ in range(CALLS):
            crc(b"")

    benchmark(run)
    _record("native call", benchmark)


def test_append_as_leader(benchmark: Any, log: Log) -> None:
    benchmark.group = GROUP
    batch = _batch()
    zero = bytes(8)

    def run() -> None:
        for _ in range(CALLS):
            batch[0:8] = zero
            log.append_as_leader(batch, 0)

    benchmark(run)
    assert log.log_end_offset > 0
    _record("append_as_leader", benchmark)


def test_append_as_follower(benchmark: Any, log: Log) -> None:
    benchmark.group = GROUP
    batch = _batch()
    state = {"next": 0}

    def run() -> None:
        n = state["next"]
        for _ in range(CALLS):
            batch[0:8] = n.to_bytes(8, "big")
            log.append_as_follower(batch)
            n += 1
        state["next"] = n

    benchmark(run)
    assert log.log_end_offset == state["next"]
    _record("append_as_follower", benchmark)


def _filled(log: Log) -> int:
    batch = _batch()
    zero = bytes(8)
    for _ in range(CALLS):
        batch[0:8] = zero
        log.append_as_leader(batch, 0)
    log.update_high_watermark(log.log_end_offset)
    return log.log_end_offset


def test_read_high_watermark(benchmark: Any, log: Log) -> None:
    benchmark.group = GROUP
    end = _filled(log)

    def run() -> None:
        for i in range(CALLS):
            log.read(i % end, 1 << 20, FetchIsolation.HIGH_WATERMARK, True)

    benchmark(run)
    assert log.read(0, 1 << 20, FetchIsolation.HIGH_WATERMARK, True).records.size > 0
    _record("read (HW)", benchmark)


def test_read_log_end(benchmark: Any, log: Log) -> None:
    benchmark.group = GROUP
    end = _filled(log)

    def run() -> None:
        for i in range(CALLS):
            log.read(i % end, 1 << 20, FetchIsolation.LOG_END, True)

    benchmark(run)
    _record("read (LEO)", benchmark)


def test_zz_report() -> None:
    if not FIGURES:
        pytest.skip("benchmarks disabled")
    base = FIGURES.get("native call", (0.0, 0.0))[0]
    print()
    for name, (low, median) in FIGURES.items():
        print(
            f"{name:20s} min {low * 1e6:7.2f} µs per call ({(low - base) * 1e6:7.2f} above the "
            f"native call), median {median * 1e6:7.2f} µs"
        )
