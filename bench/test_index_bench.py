"""OffsetIndex.lookup called from Python (target: <= 1 µs per call) against
the cheapest native call there is, ``_native.crc32c(b"")``, in the same run
and group, on a full 10 MiB index (1.3 M entries) with warm and random targets.
The per-call figures and the lookup's cost above the baseline are printed at
the end.

    .venv/bin/python -m pytest -q -s bench/test_index_bench.py
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pylog import _native

GROUP = "offset-index-lookup"
MEANS: dict[str, float] = {}
N = 1 << 16  # targets cycled through per benchmark round


@pytest.fixture(scope="module")
def full_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_native.OffsetIndex]:
    path: Path = tmp_path_factory.mktemp("index") / "00000000000000000000.index"
    idx = _native.OffsetIndex(str(path), 0, max_index_size=10 * 1024 * 1024)
    i = 0
    while not idx.is_full():
        idx.append(3 * i + 1, 3000 * i)
        i += 1
    yield idx
    idx.close()


def _targets(idx: _native.OffsetIndex, warm: bool) -> list[int]:
    rng = random.Random(11)
    top = idx.last_offset
    if warm:
        return [top - rng.randrange(3000) for _ in range(N)]
    return [rng.randrange(top) for _ in range(N)]


def _run_lookups(lookup: Any, targets: list[int]) -> None:
    for t in targets:
        lookup(t)


def _record(name: str, benchmark: Any, calls: int) -> None:
    stats = getattr(benchmark, "stats", None)
    if stats is not None:
        MEANS[name] = stats.stats.mean / calls


def test_baseline_native_call(benchmark: Any) -> None:
    benchmark.group = GROUP
    crc = _native.crc32c
    empty = [b""] * N
    benchmark(_run_lookups, crc, empty)
    _record("baseline crc32c(b'')", benchmark, N)


@pytest.mark.parametrize("warm", [True, False], ids=["warm", "random"])
def test_offset_index_lookup(benchmark: Any, full_index: _native.OffsetIndex, warm: bool) -> None:
    benchmark.group = GROUP
    targets = _targets(full_index, warm)
    assert full_index.lookup(targets[0])[0] <= targets[0]
    benchmark(_run_lookups, full_index.lookup, targets)
    _record(f"lookup ({'warm' if warm else 'random'})", benchmark, N)


def test_report(capsys: pytest.CaptureFixture[str]) -> None:
    base = MEANS.get("baseline crc32c(b'')")
    if base is None or len(MEANS) < 2:
        pytest.skip("benchmarks disabled")
    with capsys.disabled():
        print(f"\n[{GROUP}] per call, one Python loop iteration included:")
        for name, mean in MEANS.items():
            extra = "" if mean is base else f"  (+{(mean - base) * 1e9:.0f} ns over the baseline)"
            print(f"  {name:<22} {mean * 1e9:7.0f} ns{extra}")
