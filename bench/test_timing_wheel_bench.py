"""The purgatory's timer: 1M delayed operations inserted, then expired or
cancelled, on the native TimingWheel and on the best pure-Python timer
(``heapq`` of (deadline, id) with lazy cancellation through a set), in the
same run, on the same pre-built schedule. The ratio is printed at the end.

The schedule imitates a loaded broker: for 1 s, 1000 operations arrive per
ms, each with the timeout of a DelayedFetch (max wait 500 ms, 70%), a
DelayedProduce (request timeout 30 s, 10%) or a short wait (1-100 ms, 20%);
half of them complete early (their condition is met) and are cancelled at a
random point of their wait. The clock then advances ms by ms until the last
deadline, expiring the rest; at the peak about 370k operations are pending.

Three runs, each labelled for what it is:

* heapq: the idiomatic pure-Python timer, one call per operation;
* TimingWheel, per call: the same Python loop, one ``add``/``cancel`` call
  per operation (as the purgatory calls it);
* TimingWheel, batched: one ``add_many`` and one ``cancel_many`` call per ms
  of the schedule, for callers that have a batch at hand (heapq has no batched
  form: its per-operation loop is what a Python developer would write).

Two more runs bound the per-call figure: the same loop calling C builtins
that do nothing (``dict.get``), and calling the wheel's methods where they do
no wheel work (an empty wheel whose clock is past every deadline: ``add`` is
refused, ``cancel`` finds nothing, ``advance`` expires nothing). No wheel can
take a per-call run below the second.

    .venv/bin/python -m pytest -q -s bench/test_timing_wheel_bench.py

On a loaded machine, add ``--benchmark-timer time.process_time`` (CPU time
instead of wall time) and alternate the builds being compared, run by run.
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass, field
from typing import Any

import pytest

from pylog._native import TimingWheel

GROUP = "timer: 1M delayed ops inserted + expired/cancelled"
MEANS: dict[str, float] = {}
OPS = 1_000_000
PER_MS = 1000
START = 1_700_000_000_000


@dataclass
class Tick:
    add_ids: list[int] = field(default_factory=list)
    add_deadlines: list[int] = field(default_factory=list)
    cancels: list[int] = field(default_factory=list)


@dataclass
class Schedule:
    ticks: list[Tick]
    expiring: int
    cancelled: int


def build_schedule(seed: int = 7) -> Schedule:
    rng = random.Random(seed)
    arrival_ms = OPS // PER_MS
    deadlines: list[tuple[int, int, int | None]] = []  # (arrival, deadline, cancel time)
    horizon = 0
    for op in range(OPS):
        now = op // PER_MS
        r = rng.random()
        if r < 0.7:
            delay = 500
        elif r < 0.8:
            delay = 30_000
        else:
            delay = rng.randint(1, 100)
        cancel = now + rng.randrange(delay) if rng.random() < 0.5 else None
        deadlines.append((now, now + delay, cancel))
        horizon = max(horizon, now + delay)
    ticks = [Tick() for _ in range(horizon + 1)]
    cancelled = 0
    for op, (arrival, deadline, cancel) in enumerate(deadlines):
        t = ticks[arrival]
        t.add_ids.append(op)
        t.add_deadlines.append(START + deadline)
        if cancel is not None:
            # Cancelled after its arrival in the same or a later ms, always before its deadline.
            ticks[cancel].cancels.append(op)
            cancelled += 1
    assert arrival_ms <= horizon
    return Schedule(ticks, OPS - cancelled, cancelled)


@pytest.fixture(scope="module")
def schedule() -> Schedule:
    return build_schedule()


def run_wheel(schedule: Schedule) -> tuple[int, int]:
    wheel = TimingWheel(start_ms=START)
    add, cancel, advance = wheel.add, wheel.cancel, wheel.advance
    expired = cancelled = 0
    now = START
    for tick in schedule.ticks:
        for ident, deadline in zip(tick.add_ids, tick.add_deadlines, strict=True):
            add(ident, deadline)
        for ident in tick.cancels:
            if cancel(ident):
                cancelled += 1
        expired += len(advance(now))
        now += 1
    assert len(wheel) == 0
    return expired, cancelled


def run_wheel_batched(schedule: Schedule) -> tuple[int, int]:
    wheel = TimingWheel(start_ms=START)
    add_many, cancel_many, advance = wheel.add_many, wheel.cancel_many, wheel.advance
    expired = cancelled = 0
    now = START
    for tick in schedule.ticks:
        if tick.add_ids:
            refused = add_many(tick.add_ids, tick.add_deadlines)
            assert not refused
        if tick.cancels:
            cancelled += cancel_many(tick.cancels)
        expired += len(advance(now))
        now += 1
    assert len(wheel) == 0
    return expired, cancelled


def _call_loop(schedule: Schedule, add: Any, cancel: Any, advance: Any) -> int:
    calls = 0
    now = START
    for tick in schedule.ticks:
        for ident, deadline in zip(tick.add_ids, tick.add_deadlines, strict=True):
            add(ident, deadline)
        for ident in tick.cancels:
            if cancel(ident):
                calls += 1
        calls += len(advance(now))
        now += 1
    return calls


def run_c_noop_calls(schedule: Schedule) -> int:
    get: Any = {}.get
    # advance: one Python call per ms (31k in all), a few ms of the run
    return _call_loop(schedule, get, get, lambda now: ())


def run_wheel_noop_calls(schedule: Schedule) -> int:
    wheel = TimingWheel(start_ms=START + 10**9)
    return _call_loop(schedule, wheel.add, wheel.cancel, wheel.advance)


def run_heapq(schedule: Schedule) -> tuple[int, int]:
    heap: list[tuple[int, int]] = []
    live: set[int] = set()
    push, pop = heapq.heappush, heapq.heappop
    live_add, live_remove = live.add, live.remove
    expired = cancelled = 0
    now = START
    for tick in schedule.ticks:
        for ident, deadline in zip(tick.add_ids, tick.add_deadlines, strict=True):
            push(heap, (deadline, ident))
            live_add(ident)
        for ident in tick.cancels:
            if ident in live:
                live_remove(ident)
                cancelled += 1
        due: list[int] = []
        while heap and heap[0][0] <= now:
            ident = pop(heap)[1]
            if ident in live:
                live_remove(ident)
                due.append(ident)
        expired += len(due)
        now += 1
    assert not live
    return expired, cancelled


def _record(name: str, benchmark: Any) -> None:
    stats = getattr(benchmark, "stats", None)
    if stats is not None:
        MEANS[name] = stats.stats.mean


def test_heapq(benchmark: Any, schedule: Schedule) -> None:
    benchmark.group = GROUP
    result = benchmark.pedantic(run_heapq, args=(schedule,), rounds=3, iterations=1)
    assert result == (schedule.expiring, schedule.cancelled)
    _record("heapq + lazy cancel", benchmark)


def test_timing_wheel(benchmark: Any, schedule: Schedule) -> None:
    benchmark.group = GROUP
    result = benchmark.pedantic(run_wheel, args=(schedule,), rounds=3, iterations=1)
    assert result == (schedule.expiring, schedule.cancelled)
    _record("TimingWheel, per call", benchmark)


def test_timing_wheel_batched(benchmark: Any, schedule: Schedule) -> None:
    benchmark.group = GROUP
    result = benchmark.pedantic(run_wheel_batched, args=(schedule,), rounds=3, iterations=1)
    assert result == (schedule.expiring, schedule.cancelled)
    _record("TimingWheel, batched", benchmark)


def test_c_noop_calls(benchmark: Any, schedule: Schedule) -> None:
    benchmark.group = GROUP
    assert benchmark.pedantic(run_c_noop_calls, args=(schedule,), rounds=3, iterations=1) == 0
    _record("bound: C no-op calls", benchmark)


def test_wheel_noop_calls(benchmark: Any, schedule: Schedule) -> None:
    benchmark.group = GROUP
    assert benchmark.pedantic(run_wheel_noop_calls, args=(schedule,), rounds=3, iterations=1) == 0
    _record("bound: no-op wheel calls", benchmark)


def test_report(capsys: pytest.CaptureFixture[str]) -> None:
    base = MEANS.get("heapq + lazy cancel")
    if base is None or len(MEANS) < 2:
        pytest.skip("benchmarks disabled")
    with capsys.disabled():
        print(f"\n[{GROUP}]")
        for name, mean in MEANS.items():
            print(f"  {name:<24} {mean * 1e3:8.1f} ms  ({mean / OPS * 1e9:.0f} ns per operation)")
        for name, mean in MEANS.items():
            if name.startswith("bound"):
                print(f"  {name}: a per-call run can reach at most {base / mean:.1f}x heapq")
            elif name != "heapq + lazy cancel":
                print(f"  {name} is {base / mean:.1f}x heapq (goal >= 10x)")
