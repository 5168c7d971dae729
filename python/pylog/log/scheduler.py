"""The storage layer's one scheduler for background tasks.

Kafka's ``KafkaScheduler`` in miniature: one-off and periodic tasks run on a
few daemon worker threads. The LogManager owns the broker's; a Log opened on
its own (a tool, a test) shares :func:`default_scheduler`. A periodic task
never overlaps itself (the next run is queued when the current one ends, at
the next multiple of its period, or at once when it ran late). A task that
raises is logged and, if periodic, keeps its schedule. Tasks scheduled
before ``startup`` wait for it; after ``shutdown`` (which lets running tasks
finish, drops queued ones and joins the workers) new tasks are dropped with a
log line.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Scheduler", "default_scheduler"]

_log = logging.getLogger("pylog.log")


@dataclass(order=True)
class _Task:
    due: float
    seq: int
    name: str = field(compare=False)
    fn: Callable[[], object] = field(compare=False)
    period_s: float | None = field(compare=False, default=None)
    cancelled: bool = field(compare=False, default=False)


class Scheduler:
    """Run named tasks after a delay, once or every ``period_ms``."""

    def __init__(self, threads: int = 1, thread_name_prefix: str = "pylog-scheduler"):
        if threads < 1:
            raise ValueError(f"a scheduler needs at least one thread, got {threads}")
        self._threads_wanted = threads
        self._prefix = thread_name_prefix
        self._cond = threading.Condition()
        self._queue: list[_Task] = []
        self._seq = itertools.count()
        self._workers: list[threading.Thread] = []
        self._running = False
        self._stopped = False
        self._tasks_by_name: dict[str, _Task] = {}

    @property
    def is_started(self) -> bool:
        with self._cond:
            return self._running

    def startup(self) -> None:
        with self._cond:
            if self._running or self._stopped:
                raise RuntimeError("a scheduler starts once")
            self._running = True
            for i in range(self._threads_wanted):
                t = threading.Thread(target=self._work, name=f"{self._prefix}-{i}", daemon=True)
                self._workers.append(t)
                t.start()

    def schedule(
        self,
        name: str,
        fn: Callable[[], object],
        delay_ms: float = 0,
        period_ms: float | None = None,
    ) -> None:
        """Run ``fn`` after ``delay_ms``; then every ``period_ms`` if given (> 0)."""
        if period_ms is not None and period_ms <= 0:
            period_ms = None
        with self._cond:
            if self._stopped:
                _log.debug("scheduler is shut down; dropped task %r", name)
                return
            task = _Task(
                due=time.monotonic() + max(delay_ms, 0) / 1000.0,
                seq=next(self._seq),
                name=name,
                fn=fn,
                period_s=None if period_ms is None else period_ms / 1000.0,
            )
            heapq.heappush(self._queue, task)
            self._tasks_by_name[name] = task
            self._cond.notify()

    def schedule_once(self, name: str, fn: Callable[[], object], delay_ms: float = 0) -> None:
        self.schedule(name, fn, delay_ms, None)

    def cancel(self, name: str) -> None:
        """Stop a task from running again (a run in progress completes)."""
        with self._cond:
            task = self._tasks_by_name.pop(name, None)
            if task is not None:
                task.cancelled = True

    def shutdown(self, timeout_s: float | None = None) -> None:
        with self._cond:
            if self._stopped:
                return
            self._stopped = True
            self._running = False
            self._queue.clear()
            self._tasks_by_name.clear()
            self._cond.notify_all()
            workers, self._workers = self._workers, []
        current = threading.current_thread()
        for t in workers:
            if t is not current:
                t.join(timeout_s)

    def _work(self) -> None:
        while True:
            with self._cond:
                task: _Task | None = None
                while self._running:
                    if not self._queue:
                        self._cond.wait()
                        continue
                    head = self._queue[0]
                    if head.cancelled:
                        heapq.heappop(self._queue)
                        continue
                    wait = head.due - time.monotonic()
                    if wait > 0:
                        self._cond.wait(wait)
                        continue
                    task = heapq.heappop(self._queue)
                    break
                if task is None:
                    return
            try:
                task.fn()
            except Exception:
                _log.exception("background task %r failed", task.name)
            with self._cond:
                if task.period_s is None or task.cancelled or not self._running:
                    if self._tasks_by_name.get(task.name) is task and task.period_s is None:
                        del self._tasks_by_name[task.name]
                    continue
                # Late after a slow run or a stall: run again now, without replaying missed runs.
                task.due = max(task.due + task.period_s, time.monotonic())
                task.seq = next(self._seq)
                heapq.heappush(self._queue, task)
                self._cond.notify()


_default: Scheduler | None = None
_default_lock = threading.Lock()


def default_scheduler() -> Scheduler:
    """The process's shared scheduler (one daemon thread, started on first use)
    for logs opened without a LogManager: their roll flushes and ``.deleted``
    file removals run there."""
    global _default
    with _default_lock:
        if _default is None:
            s = Scheduler(threads=1, thread_name_prefix="pylog-log-scheduler")
            s.startup()
            _default = s
        return _default
