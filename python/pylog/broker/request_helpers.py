"""What several request handlers share: a failure as the (error code, message)
pair a response carries, the names a request repeats (Kafka's
RequestHandlerHelper and the duplicate checks of its admin APIs), and a
metadata change made off the event loop when the store waits on the network."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Hashable, Iterable
from typing import ParamSpec, TypeVar

from pylog.errors import ErrorCode, KafkaError

__all__ = [
    "MAX_PARTITIONS_PER_REQUEST",
    "TOO_MANY_PARTITIONS",
    "YIELD_EVERY",
    "Pacer",
    "duplicates",
    "error_of",
]

#: The most partitions one CreateTopics or CreatePartitions request (or one
#: Metadata request's auto-creations) may add: Kafka's controller refuses a
#: larger request whole (MAX_PARTITIONS_PER_BATCH, POLICY_VIOLATION).
MAX_PARTITIONS_PER_REQUEST = 10_000
#: Kafka's message for that refusal.
TOO_MANY_PARTITIONS = "Excessively large number of partitions per request."

_log = logging.getLogger("pylog.broker")

_K = TypeVar("_K", bound=Hashable)
_T = TypeVar("_T")
_P = ParamSpec("_P")


#: A handler working through a request's arrays gives the event loop a turn this
#: often (a request holds up to MAX_REQUEST_ELEMENTS elements: without a turn, up to
#: a second of work for the other connections to wait out).
YIELD_EVERY = 1000


class Pacer:
    """Counts the elements a handler works through, nested loops together, and
    gives the event loop a turn after every ``every`` of them::

        pace = Pacer()
        for t in body.topics:
            for p in t.partitions:
                await pace()
    """

    __slots__ = ("every", "n")

    def __init__(self, every: int = YIELD_EVERY) -> None:
        self.every = every
        self.n = 0

    async def __call__(self) -> None:
        self.n += 1
        if self.n >= self.every:
            self.n = 0
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
