"""EagerFuture: an asyncio future whose waiting request handler resumes inside
``set_result``, not on a later turn of the event loop.

A request that waits in a purgatory (a Fetch below ``min.bytes``, an acks=-1
Produce) awaits a future the purgatory's callback completes. With a plain
future the handler resumes on the loop's next turn: after the rest of the
callback that completed it (the Produce whose append woke the Fetch encodes
and writes its own answer first), after a poll of every socket, and after the
callbacks already queued. Kafka answers the Fetch from inside the append.

The network layer drives a handler's coroutine itself until its first wait
(:meth:`pylog.network.processor.Processor._begin`). When that wait is on an
EagerFuture it registers a resume with :meth:`add_eager_callback` instead of
starting a task, and ``set_result`` runs it at once: the handler finishes and
its answer is written in the same call, before the answer of the request
that set it (Kafka's order; the Produce's acknowledgement waits for the
fetches its append woke, as on Kafka's request thread). Awaited anywhere
else (a task), an EagerFuture is an ordinary future.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TypeVar

__all__ = ["EagerFuture"]

_log = logging.getLogger("pylog.network.eager_future")

_T = TypeVar("_T")


class EagerFuture(asyncio.Future[_T]):
    """``set_result`` runs the callbacks added by :meth:`add_eager_callback`
    before it returns (each once, in order, on the caller's stack)."""

    __slots__ = ("_eager",)

    def __init__(self, *, loop: asyncio.AbstractEventLoop | None = None) -> None:
        super().__init__(loop=loop)
        self._eager: list[Callable[[], None]] | None = None

    def add_eager_callback(self, fn: Callable[[], None]) -> None:
        """Call ``fn()`` as soon as the result is set (now if it already is).
        ``fn`` must not raise: what it raises is logged and dropped, so the
        caller of ``set_result`` (an append completing a fetch) is not hit."""
        if self.done():
            _run(fn)
            return
        if self._eager is None:
            self._eager = []
        self._eager.append(fn)

    def set_result(self, result: _T) -> None:
        super().set_result(result)
        self._resume()

    def set_exception(self, exception: type | BaseException) -> None:
        super().set_exception(exception)
        self._resume()

    def cancel(self, msg: object | None = None) -> bool:
        if not super().cancel(msg):
            return False
        self._resume()
        return True

    def _resume(self) -> None:
        eager, self._eager = self._eager, None
        if eager:
            for fn in eager:
                _run(fn)


def _run(fn: Callable[[], None]) -> None:
    try:
        fn()
    except Exception:
        _log.exception("resuming a request handler failed")
