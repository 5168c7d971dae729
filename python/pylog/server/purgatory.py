"""The purgatory: requests that cannot be answered yet (a Produce waiting for
acks=all, a Fetch waiting for min_bytes) wait here until they can, or until
their time is up.

A :class:`DelayedOperation` is watched under one or more keys (the partitions
it waits on). Whatever may let it finish — an append, a high-watermark move —
calls :meth:`DelayedOperationPurgatory.check_and_complete` with the key, which
retries every operation watching it. Deadlines live on the native hierarchical
timing wheel (``pylog._native.TimingWheel``: tick 1 ms, 20 buckets a level,
overflow levels made on demand, O(1) insert and cancel); the event loop wakes
when the wheel's next bucket is due, advances it, and expires what it returns.

Everything here runs on the broker's event loop thread: an operation completes
exactly once (``force_complete`` flips a flag; no lock is needed because there
is one thread), and callers that appended on a worker thread come back to the
loop before they check the purgatory.
"""

from __future__ import annotations

import abc
import asyncio
import itertools
import logging
import time
from collections.abc import Callable, Hashable, Iterable
from typing import Generic, Protocol, TypeVar

from pylog import _native

__all__ = ["DelayedOperation", "DelayedOperationPurgatory", "monotonic_ms"]

_log = logging.getLogger("pylog.server.purgatory")

TICK_MS = 1
WHEEL_SIZE = 20
# When the timer names no next expiration, the loop still wakes this often while
# anything waits.
_MAX_SLEEP_MS = 20


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class DelayedOperation(abc.ABC):
    """An operation that completes when :meth:`try_complete` says it can, or
    when ``delay_ms`` has passed (then :meth:`on_expiration` runs first).

    Subclasses implement ``try_complete`` (call ``force_complete`` and return
    its result when the operation can finish) and ``on_complete`` (send the
    answer; runs exactly once)."""

    def __init__(self, delay_ms: int) -> None:
        self.delay_ms = max(0, int(delay_ms))
        self._completed = False
        self._timer_id: int | None = None
        # The watching purgatory's timer cancel (its _cancel_timer), set when it
        # starts watching: a bound method, since the purgatory's type parameter
        # is the operation's subclass, which this base does not know.
        self._cancel_timer: Callable[[DelayedOperation], None] | None = None

    @property
    def is_completed(self) -> bool:
        return self._completed

    def force_complete(self) -> bool:
        """Complete now. True if this call completed it (False: it already was)."""
        if self._completed:
            return False
        self._completed = True
        cancel_timer = self._cancel_timer
        if cancel_timer is not None:
            cancel_timer(self)
        self.on_complete()
        return True

    @abc.abstractmethod
    def try_complete(self) -> bool: ...

    @abc.abstractmethod
    def on_complete(self) -> None: ...

    def on_expiration(self) -> None:  # noqa: B027 - optional hook
        """Runs just before ``on_complete`` when the deadline passed."""

    def _run_expiration(self) -> None:
        self._timer_id = None
        if self.force_complete():
            self.on_expiration()


T = TypeVar("T", bound=DelayedOperation)


class Timer(Protocol):
    """What the purgatory needs of a timer: the native wheel (``make_timer``);
    the tests run a heap (tests/support/timers.py) beside it to show both
    behave alike."""

    def add(self, id: int, expiration_ms: int) -> bool: ...
    def cancel(self, id: int) -> bool: ...
    def advance(self, now_ms: int) -> list[int]: ...
    def next_expiration_ms(self) -> int | None: ...


def make_timer(start_ms: int | None = None) -> Timer:
    """The native hierarchical timing wheel: tick 1 ms, 20 buckets per level."""
    start = monotonic_ms() if start_ms is None else start_ms
    timer: Timer = _native.TimingWheel(tick_ms=TICK_MS, wheel_size=WHEEL_SIZE, start_ms=start)
    return timer


class DelayedOperationPurgatory(Generic[T]):
    """Delayed operations of one kind (``name``: "Produce", "Fetch"), watched by key."""

    def __init__(
        self, name: str, timer: Timer | None = None, *, purge_interval: int = 1000
    ) -> None:
        self.name = name
        self._timer = timer if timer is not None else make_timer()
        self._watchers: dict[Hashable, list[T]] = {}
        self._ops: dict[int, T] = {}  # timer id -> operation with a pending deadline
        self._ids = itertools.count(1)
        self._purge_interval = purge_interval
        self._watched_ops = 0  # entries in watcher lists, completed ones included
        #: Operations handed to :meth:`try_complete_else_watch` (completed there
        #: or not): what the callers' fast paths that skip the purgatory save.
        self.operations_total = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wakeup: asyncio.TimerHandle | None = None
        self._wakeup_ms: int | None = None
        self._shut_down = False

    # ------------------------------------------------------------------ watching

    def try_complete_else_watch(self, op: T, keys: Iterable[Hashable]) -> bool:
        """Complete ``op`` now if it can; else watch it under ``keys`` and start
        its clock. True if it completed here."""
        self.operations_total += 1
        if op.try_complete():
            return True
        keys = list(keys)
        op._cancel_timer = self._cancel_timer
        for key in keys:
            if op.is_completed:
                return True
            self._watchers.setdefault(key, []).append(op)
            self._watched_ops += 1
        if op.is_completed:
            return True
        now = monotonic_ms()
        deadline = now + op.delay_ms
        timer_id = next(self._ids)
        op._timer_id = timer_id
        added = self._timer.add(timer_id, deadline)
        if added is False or op.delay_ms == 0:
            # The deadline falls in the current tick: it expires at once.
            self._timer.cancel(timer_id)
            op._run_expiration()
            return False
        self._ops[timer_id] = op
        self._schedule_wakeup(deadline)
        return False

    def check_and_complete(self, key: Hashable) -> int:
        """Retry the operations watching ``key``; returns how many completed."""
        ops = self._watchers.get(key)
        if not ops:
            return 0
        completed = 0
        # A completion may come back here for the same key (a follower's fetch
        # moves the high watermark, which retries the fetches on its
        # partition) or watch new operations under it: iterate over a copy,
        # then prune the list as it stands afterwards.
        for op in list(ops):
            if not op.is_completed and op.try_complete():
                completed += 1
        current = self._watchers.get(key)
        if current is not None:
            keep = [op for op in current if not op.is_completed]
            self._watched_ops -= len(current) - len(keep)
            if keep:
                self._watchers[key] = keep
            else:
                del self._watchers[key]
        return completed

    def cancel_for_key(self, key: Hashable) -> list[T]:
        """Stop watching ``key`` (its partition went away); returns its pending
        operations, which the caller completes."""
        ops = self._watchers.pop(key, [])
        self._watched_ops -= len(ops)
        return [op for op in ops if not op.is_completed]

    def watched(self) -> int:
        """Watcher-list entries (an operation is counted once per key)."""
        return self._watched_ops

    def delayed(self) -> int:
        """Operations waiting for their deadline."""
        return len(self._ops)

    def watched_keys(self) -> int:
        return len(self._watchers)

    # ------------------------------------------------------------------ time

    def _cancel_timer(self, op: DelayedOperation) -> None:
        tid = op._timer_id
        if tid is not None:
            op._timer_id = None
            if self._ops.pop(tid, None) is not None:
                self._timer.cancel(tid)

    def advance_clock(self, now_ms: int | None = None) -> int:
        """Expire every operation whose deadline is at or before ``now_ms``;
        returns how many expired. The event loop calls this by itself."""
        now = monotonic_ms() if now_ms is None else now_ms
        expired = 0
        for tid in self._timer.advance(now):
            op = self._ops.pop(tid, None)
            if op is None:
                continue
            op._timer_id = None
            try:
                op._run_expiration()
            except Exception:
                _log.exception("%s purgatory: expiring %r failed", self.name, op)
            expired += 1
        if self._watched_ops - len(self._ops) > self._purge_interval:
            self._purge_completed()
        return expired

    def _purge_completed(self) -> None:
        total = 0
        for key in list(self._watchers):
            ops = [op for op in self._watchers[key] if not op.is_completed]
            if ops:
                self._watchers[key] = ops
                total += len(ops)
            else:
                del self._watchers[key]
        self._watched_ops = total

    def _schedule_wakeup(self, deadline_ms: int) -> None:
        if self._shut_down:
            return
        if self._wakeup_ms is not None and self._wakeup_ms <= deadline_ms:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop (tests driving advance_clock by hand)
        self._loop = loop
        if self._wakeup is not None:
            self._wakeup.cancel()
        delay = max(0.0, (deadline_ms - monotonic_ms()) / 1000.0)
        self._wakeup_ms = deadline_ms
        self._wakeup = loop.call_later(delay, self._on_wakeup)

    def _on_wakeup(self) -> None:
        self._wakeup = None
        self._wakeup_ms = None
        now = monotonic_ms()
        self.advance_clock(now)
        if not self._ops:
            return
        nxt = self._timer.next_expiration_ms()
        if nxt is None:
            nxt = now + _MAX_SLEEP_MS
        self._schedule_wakeup(max(nxt, now + TICK_MS))

    def shutdown(self) -> None:
        """Expire nothing more; pending operations complete now (their answers
        go out as the connections close). From another thread, the work is
        handed to the event loop the purgatory runs on."""
        loop = self._loop
        if loop is not None and loop.is_running() and not loop.is_closed():
            try:
                running = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            if running is not loop:
                self._shut_down = True
                loop.call_soon_threadsafe(self._shutdown_now)
                return
        self._shutdown_now()

    def _shutdown_now(self) -> None:
        self._shut_down = True
        if self._wakeup is not None:
            self._wakeup.cancel()
            self._wakeup = None
        pending = list(self._ops.values())
        self._ops.clear()
        for op in pending:
            op._timer_id = None
            op.force_complete()
        self._watchers.clear()
        self._watched_ops = 0

    def __repr__(self) -> str:
        return (
            f"DelayedOperationPurgatory({self.name!r}, delayed={self.delayed()}, "
            f"watched={self.watched()})"
        )
