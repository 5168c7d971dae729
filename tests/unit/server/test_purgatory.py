"""The purgatory: operations complete once, by key or by deadline; deadlines run
on the timer: the native wheel, and a heap (tests/support/timers.py) beside it."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from support.timers import HeapTimer

from pylog.server.purgatory import (
    DelayedOperation,
    DelayedOperationPurgatory,
    make_timer,
    monotonic_ms,
)


class Op(DelayedOperation):
    def __init__(self, delay_ms: int, ready: bool = False) -> None:
        super().__init__(delay_ms)
        self.ready = ready
        self.completions = 0
        self.expired = False

    def try_complete(self) -> bool:
        return self.force_complete() if self.ready else False

    def on_complete(self) -> None:
        self.completions += 1

    def on_expiration(self) -> None:
        self.expired = True


@pytest.fixture(params=["heap", "default"])
def timer(request: Any) -> Any:
    return HeapTimer(monotonic_ms()) if request.param == "heap" else make_timer()


def test_completes_at_once_when_ready(timer: Any) -> None:
    p: DelayedOperationPurgatory[Op] = DelayedOperationPurgatory("t", timer)
    op = Op(1000, ready=True)
    assert p.try_complete_else_watch(op, ["a"])
    assert op.completions == 1 and p.watched() == 0 and p.delayed() == 0


def test_check_and_complete_by_key_and_once_only(timer: Any) -> None:
    p: DelayedOperationPurgatory[Op] = DelayedOperationPurgatory("t", timer)
    op = Op(10_000)
    assert not p.try_complete_else_watch(op, ["a", "b"])
    assert p.watched() == 2 and p.delayed() == 1
    assert p.check_and_complete("a") == 0
    op.ready = True
    assert p.check_and_complete("b") == 1
    assert p.check_and_complete("a") == 0  # already done through "b"
    assert op.completions == 1 and not op.expired
    assert p.delayed() == 0  # its deadline was cancelled
    assert p.advance_clock(monotonic_ms() + 20_000) == 0


class ReentrantOp(Op):
    """Completing runs more purgatory work for its own key, as a follower's
    fetch does: its read moves the high watermark, which retries the fetches
    watching the same partition."""

    def __init__(self, purgatory: DelayedOperationPurgatory[Op], key: str, then: Op | None) -> None:
        super().__init__(10_000)
        self.purgatory, self.key, self.then = purgatory, key, then

    def on_complete(self) -> None:
        super().on_complete()
        if self.then is not None:  # a new operation watching the key, then a retry of it
            self.purgatory.try_complete_else_watch(self.then, [self.key])
        self.purgatory.check_and_complete(self.key)


def test_check_and_complete_reentered_for_the_same_key(timer: Any) -> None:
    p: DelayedOperationPurgatory[Op] = DelayedOperationPurgatory("t", timer)
    consumer = Op(10_000)
    follower = ReentrantOp(p, "tp", None)
    p.try_complete_else_watch(follower, ["tp"])
    p.try_complete_else_watch(consumer, ["tp"])
    follower.ready = consumer.ready = True
    # The follower's completion completes the consumer's fetch and empties
    # the key's watchers, inside the outer retry of that key.
    assert p.check_and_complete("tp") >= 1
    assert (follower.completions, consumer.completions) == (1, 1)
    assert p.watched() == 0 and p.watched_keys() == 0 and p.delayed() == 0

    # An operation watched during the outer retry is not dropped by it.
    late = Op(10_000)
    follower = ReentrantOp(p, "tp", late)
    p.try_complete_else_watch(follower, ["tp"])
    follower.ready = True
    assert p.check_and_complete("tp") == 1
    assert follower.completions == 1 and late.completions == 0
    assert p.watched() == 1 and p.watched_keys() == 1
    late.ready = True
    assert p.check_and_complete("tp") == 1 and late.completions == 1
    assert p.watched() == 0 and p.watched_keys() == 0 and p.delayed() == 0


def test_expires_on_advance(timer: Any) -> None:
    p: DelayedOperationPurgatory[Op] = DelayedOperationPurgatory("t", timer)
    ops = [Op(d) for d in (50, 100, 5000)]
    for op in ops:
        p.try_complete_else_watch(op, ["k"])
    now = monotonic_ms()
    p.advance_clock(now + 120)
    assert [o.expired for o in ops] == [True, True, False]
    assert [o.completions for o in ops] == [1, 1, 0]
    ops[2].ready = True
    assert p.check_and_complete("k") == 1
    assert not ops[2].expired


def test_zero_delay_expires_immediately(timer: Any) -> None:
    p: DelayedOperationPurgatory[Op] = DelayedOperationPurgatory("t", timer)
    op = Op(0)
    assert not p.try_complete_else_watch(op, ["k"])
    assert op.expired and op.completions == 1


def test_event_loop_expires_on_time(timer: Any) -> None:
    async def main() -> None:
        p: DelayedOperationPurgatory[Op] = DelayedOperationPurgatory("t", timer)
        start = time.monotonic()
        slow, fast = Op(200), Op(60)
        p.try_complete_else_watch(slow, ["k"])
        p.try_complete_else_watch(fast, ["k"])
        while not fast.expired:
            await asyncio.sleep(0.005)
        t_fast = time.monotonic() - start
        while not slow.expired:
            await asyncio.sleep(0.005)
        t_slow = time.monotonic() - start
        # never early; the upper bounds are loose so a loaded machine cannot fail them
        assert 0.055 <= t_fast < 1.0, t_fast
        assert 0.195 <= t_slow < 1.5, t_slow

    asyncio.run(main())


def test_purge_and_shutdown(timer: Any) -> None:
    p: DelayedOperationPurgatory[Op] = DelayedOperationPurgatory("t", timer, purge_interval=10)
    ops = [Op(60_000) for _ in range(30)]
    for i, op in enumerate(ops):
        p.try_complete_else_watch(op, [i, "shared"])
    for op in ops[:25]:
        op.ready = True
        p.check_and_complete(ops.index(op))
    p.advance_clock()  # purges completed entries from the "shared" list
    assert p.watched() == 10
    p.shutdown()
    assert all(o.completions == 1 for o in ops)
    assert p.delayed() == 0 and p.watched() == 0


def test_uses_the_native_wheel_when_the_extension_has_it() -> None:
    from pylog import _native

    if not hasattr(_native, "TimingWheel"):
        pytest.skip("this build of pylog._native has no TimingWheel yet")
    assert not isinstance(make_timer(), HeapTimer)
