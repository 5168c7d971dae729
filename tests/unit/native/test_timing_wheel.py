"""pylog._native.TimingWheel as the purgatory sees it: deadlines in ms, ids
expire in deadline order, cancel and reschedule, a reaper's next wake-up,
and random operations against a plain-dict model."""

from __future__ import annotations

import random

import pytest

from pylog._native import TimingWheel


def test_seed_example_three_levels() -> None:
    # +90 ms, +610 ms and +1610 ms: three levels, each expiring exactly on time.
    w = TimingWheel(start_ms=1_000_000)
    assert w.add(1, 1_000_090)
    assert w.add(2, 1_000_610)
    assert w.add(3, 1_001_610)
    assert w.levels == 3
    assert len(w) == 3
    assert w.advance(1_000_089) == []
    assert w.advance(1_000_090) == [1]
    assert w.advance(1_000_609) == []
    assert w.advance(1_000_610) == [2]
    assert w.advance(1_001_609) == []
    assert w.advance(1_001_610) == [3]
    assert len(w) == 0
    assert w.next_expiration_ms() is None


def test_defaults_and_repr() -> None:
    w = TimingWheel(start_ms=5)
    assert (w.tick_ms, w.wheel_size, w.current_ms) == (1, 20, 5)
    assert "pending=0" in repr(w)
    w2 = TimingWheel(10, 8, start_ms=105)
    assert (w2.tick_ms, w2.wheel_size, w2.current_ms) == (10, 8, 100)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"tick_ms": 0, "start_ms": 0},
        {"wheel_size": 1, "start_ms": 0},
        {"start_ms": -1},
    ],
)
def test_invalid_construction(kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        TimingWheel(**kwargs)


def test_start_ms_is_required() -> None:
    with pytest.raises(TypeError):
        TimingWheel()  # type: ignore[call-arg]


def test_already_expired_is_refused() -> None:
    w = TimingWheel(start_ms=100)
    assert not w.add(1, 100)  # in the current tick: the caller completes it now
    assert not w.add(2, 0)
    assert w.add(3, 101)
    assert len(w) == 1
    assert 3 in w and 1 not in w


def test_cancel() -> None:
    w = TimingWheel(start_ms=0)
    for i in range(100):
        assert w.add(i, 10 + i * 37)
    for i in range(0, 100, 2):
        assert w.cancel(i)
    assert not w.cancel(0)
    assert not w.cancel(12345)
    assert len(w) == 50
    assert w.advance(10_000) == list(range(1, 100, 2))


def test_add_reschedules_a_pending_id() -> None:
    w = TimingWheel(start_ms=0)
    assert w.add(7, 50)
    assert w.add(7, 5_000)
    assert len(w) == 1
    assert w.advance(100) == []
    assert not w.add(7, 10)  # moved into the past: dropped, the caller completes it
    assert len(w) == 0
    assert w.advance(10_000) == []


def test_expiration_order_across_levels_in_one_jump() -> None:
    w = TimingWheel(start_ms=0)
    deadlines = [5_000, 3, 700, 19, 20, 21, 399, 400, 401, 8_000, 8_001, 1, 160_000, 3_200_001]
    for i, d in enumerate(deadlines):
        w.add(i, d)
    assert w.advance(10**9) == [i for _, i in sorted((d, i) for i, d in enumerate(deadlines))]


def test_tick_larger_than_one_keeps_deadline_order() -> None:
    w = TimingWheel(10, 20, start_ms=0)
    w.add(1, 19)
    w.add(2, 13)
    w.add(3, 11)
    # All three share the bucket [10, 20): it expires when the clock reaches 10.
    assert w.advance(9) == []
    assert w.advance(10) == [3, 2, 1]


def test_next_expiration_for_a_reaper() -> None:
    w = TimingWheel(start_ms=0)
    assert w.next_expiration_ms() is None
    w.add(1, 30_000)  # a produce timeout: an upper level
    w.add(2, 15)
    assert w.next_expiration_ms() == 15
    w.cancel(2)  # its bucket is emptied: the reaper need not wake for it
    nxt = w.next_expiration_ms()
    assert nxt is not None and nxt <= 30_000
    # A reaper loop: sleep until the next bucket, advance, repeat.
    woke = 0
    expired: list[int] = []
    while (nxt := w.next_expiration_ms()) is not None:
        woke += 1
        expired += w.advance(nxt)
    assert expired == [1]
    assert woke <= 4  # one wake-up per level, not per millisecond


def test_times_at_the_ends_of_the_range() -> None:
    w = TimingWheel(start_ms=0)
    assert w.add(1, 2**63 - 1)
    assert w.add(2, 2**62)
    assert w.advance(2**62) == [2]
    assert w.advance(2**63 - 1) == [1]
    with pytest.raises(OverflowError):
        w.add(3, 2**63)


def test_time_going_backwards_changes_nothing() -> None:
    w = TimingWheel(start_ms=1000)
    w.add(1, 1500)
    assert w.advance(10) == []
    assert w.current_ms == 1000
    assert w.advance(1500) == [1]


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize(
    ("tick", "size", "max_delay"), [(1, 20, 60_000), (1, 20, 40), (7, 3, 5000)]
)
def test_random_operations_against_a_model(seed: int, tick: int, size: int, max_delay: int) -> None:
    rng = random.Random(seed)
    now = rng.randrange(10**6)
    w = TimingWheel(tick, size, start_ms=now)
    current = now - now % tick
    model: dict[int, int] = {}
    next_id = 0
    for _ in range(3000):
        op = rng.random()
        if op < 0.5:
            if model and rng.random() < 0.1:
                ident = rng.choice(list(model))
            else:
                next_id += 1
                ident = next_id
            exp = now + rng.randrange(max_delay) - 3
            model.pop(ident, None)
            ok = exp >= current + tick
            if ok:
                model[ident] = exp
            assert w.add(ident, exp) is ok
        elif op < 0.7:
            ident = rng.randrange(next_id + 1)
            assert w.cancel(ident) is (model.pop(ident, None) is not None)
        elif op < 0.75:
            nxt = w.next_expiration_ms()
            if model:
                assert nxt is not None and current < nxt <= min(model.values())
            else:
                assert nxt is None
        else:
            now += rng.choice([0, 1, rng.randrange(tick * 4 + 1), rng.randrange(max_delay * 2)])
            if now >= current + tick:
                current = now - now % tick
            due = sorted((e, i) for i, e in model.items() if e < current + tick)
            got = w.advance(now)
            assert sorted(got) == sorted(i for _, i in due)
            assert [model[i] for i in got] == [e for e, _ in due]
            for i in got:
                del model[i]
        assert len(w) == len(model)


def test_add_many_and_cancel_many_match_single_calls() -> None:
    rng = random.Random(5)
    a = TimingWheel(start_ms=1000)
    b = TimingWheel(start_ms=1000)
    now = 1000
    for _ in range(100):
        ids = [rng.randrange(2000) for _ in range(50)]
        exps = [now + rng.randrange(3000) - 3 for _ in range(50)]
        refused = [i for i, e in zip(ids, exps, strict=True) if not a.add(i, e)]
        assert b.add_many(ids, exps) == refused
        cancels = [rng.randrange(2000) for _ in range(30)]
        assert b.cancel_many(cancels) == sum(a.cancel(i) for i in cancels)
        now += rng.randrange(30)
        assert sorted(a.advance(now)) == sorted(b.advance(now))
        assert len(a) == len(b)


def test_batched_arguments() -> None:
    w = TimingWheel(start_ms=100)
    assert w.add_many([], []) == []
    assert w.add_many((1, 2, 3), (50, 200, 100)) == [1, 3]
    assert w.cancel_many([2, 2, 9]) == 1
    with pytest.raises(ValueError):
        w.add_many([1, 2], [500])
    with pytest.raises(TypeError):
        w.cancel_many("12")  # type: ignore[arg-type]


def test_single_call_arguments() -> None:
    # add and cancel take two exact ints (or one) on a fast path and hand
    # everything else to the general one: keywords, int subclasses, values
    # out of range and wrong types behave as for any method.
    class Id(int):
        pass

    w = TimingWheel(start_ms=100)
    assert w.add(1, 200)
    assert w.add(id=2, expiration_ms=300)
    assert w.add(3, expiration_ms=400)
    assert w.add(Id(4), Id(500))
    assert w.add(True, 600)  # bool is an int subclass: id 1, rescheduled
    assert not w.add(-(2**63), 100)  # in range, already reached: refused
    assert len(w) == 4
    assert w.cancel(id=2)
    assert w.cancel(Id(4))
    assert not w.cancel(2)
    assert not w.cancel(2**63 - 1)
    assert w.advance(600) == [3, 1]
    for bad_call, error in [
        (lambda: w.add(1), TypeError),
        (lambda: w.add(1, 2, 3), TypeError),
        (lambda: w.add(1, 200, id=1), TypeError),
        (lambda: w.add(1, nope=200), TypeError),
        (lambda: w.add(2**63, 700), OverflowError),
        (lambda: w.add(1, -(2**63) - 1), OverflowError),
        (lambda: w.add("1", 700), TypeError),
        (lambda: w.add(1, 700.0), TypeError),
        (lambda: w.cancel(), TypeError),
        (lambda: w.cancel(1, 2), TypeError),
        (lambda: w.cancel(2**64), OverflowError),
        (lambda: w.cancel(None), TypeError),
        (lambda: TimingWheel.add(object(), 1, 700), TypeError),  # type: ignore[arg-type]
        (lambda: TimingWheel.cancel(object(), 1), TypeError),  # type: ignore[arg-type]
    ]:
        with pytest.raises(error):
            bad_call()  # type: ignore[no-untyped-call]
    assert len(w) == 0
    assert w.add(5, 700)
    assert TimingWheel.cancel(w, 5)
    assert TimingWheel.add(w, 6, 800)
    assert 6 in w
