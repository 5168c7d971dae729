"""ControllerEventManager: the controller's single event queue. Every ZooKeeper
watch and broker change becomes an event; one asyncio task runs them in
arrival order, one at a time, so the controller's state needs no lock."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from pylog.metadata.kafka_zk_client import ZkConnectionError

__all__ = ["ControllerEvent", "ControllerEventManager"]

_log = logging.getLogger("pylog.controller.events")


@dataclass(frozen=True)
class ControllerEvent:
    """A named unit of the controller's work (the name is for the logs).
    ``preempt`` answers whoever waits on an event dropped unprocessed (Kafka's
    ControllerEvent.preempt: a resignation, a shutdown)."""

    name: str
    process: Callable[[], Awaitable[None]]
    preempt: Callable[[], None] | None = None


class ControllerEventManager:
    def __init__(self) -> None:
        self._queue: asyncio.Queue[ControllerEvent | None] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="controller-events")

    def put(self, event: ControllerEvent) -> None:
        """Queue an event; call on the event loop."""
        self._queue.put_nowait(event)

    def clear(self) -> None:
        """Drop events not yet started (a resignation makes them moot)."""
        while not self._queue.empty():
            event = self._queue.get_nowait()
            if event is not None and event.preempt is not None:
                try:
                    event.preempt()
                except Exception:
                    _log.exception("preempting controller event %s failed", event.name)

    @property
    def queue_size(self) -> int:
        return self._queue.qsize()

    async def _run(self) -> None:
        while True:
            event = await self._queue.get()
            if event is None:
                return
            try:
                await event.process()
            except asyncio.CancelledError:
                raise
            except ZkConnectionError as e:
                # ZooKeeper went away: one line, not a traceback (a session
                # that expires makes the controller resign and start over)
                _log.warning("controller event %s failed: %s", event.name, e)
            except Exception:
                _log.exception("controller event %s failed", event.name)

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is None:
            return
        self.clear()
        self._queue.put_nowait(None)
        try:
            await asyncio.wait_for(asyncio.shield(task), 5)
        except (TimeoutError, asyncio.CancelledError):
            task.cancel()
