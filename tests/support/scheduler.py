"""ManualScheduler: the storage layer's Scheduler whose tasks run only when the
test says so (Kafka's MockScheduler role), so background work — roll
flushes, ``.deleted`` file removals — happens at a known moment."""

from __future__ import annotations

from collections.abc import Callable

from pylog.log.scheduler import Scheduler


class ManualScheduler(Scheduler):
    """Collects scheduled tasks; ``run_due()`` / ``run_all()`` runs them in the
    test's thread. No worker thread is ever started."""

    def __init__(self, clock: Callable[[], int] | None = None) -> None:
        super().__init__(threads=1, thread_name_prefix="manual-scheduler")
        self.clock = clock
        self.tasks: list[tuple[float, str, Callable[[], object]]] = []

    def schedule(
        self,
        name: str,
        fn: Callable[[], object],
        delay_ms: float = 0,
        period_ms: float | None = None,
    ) -> None:
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
