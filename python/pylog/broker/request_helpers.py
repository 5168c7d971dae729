"""What several request handlers share: a failure as the (error code, message)
pair a response carries, and the names a request repeats (Kafka's
RequestHandlerHelper and the duplicate checks of its admin APIs)."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import AsyncIterator, Hashable, Iterable
from typing import TypeVar

from pylog.errors import ErrorCode, KafkaError

__all__ = ["YIELD_EVERY", "duplicates", "error_of", "paced"]

_log = logging.getLogger("pylog.broker")

_K = TypeVar("_K", bound=Hashable)
_T = TypeVar("_T")

#: A handler working through a request's arrays gives the event loop a turn this
#: often (a request holds up to MAX_REQUEST_ELEMENTS elements: without a turn, a
#: second of work for the other connections to wait out).
YIELD_EVERY = 1000


async def paced(items: Iterable[_T], every: int = YIELD_EVERY) -> AsyncIterator[_T]:
    """``items``, with a turn of the event loop after every ``every`` of them."""
    n = 0
    for item in items:
        yield item
        n += 1
        if n == every:
            n = 0
            await asyncio.sleep(0)


def error_of(e: BaseException) -> tuple[int, str]:
    """The error code and message answering a request that raised ``e``; an
    exception that is not a KafkaError is a bug, logged, UNKNOWN_SERVER_ERROR."""
    if isinstance(e, KafkaError):
        return int(e.code), str(e)
    _log.exception("admin request failed", exc_info=e)
    return int(ErrorCode.UNKNOWN_SERVER_ERROR), str(e)


def duplicates(names: Iterable[_K]) -> set[_K]:
    """The names given more than once."""
    return {n for n, c in Counter(names).items() if c > 1}
