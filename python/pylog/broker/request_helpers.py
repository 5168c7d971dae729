"""What several request handlers share: a failure as the (error code, message)
pair a response carries, and the names a request repeats (Kafka's
RequestHandlerHelper and the duplicate checks of its admin APIs)."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Hashable, Iterable
from typing import TypeVar

from pylog.errors import ErrorCode, KafkaError

__all__ = ["MAX_PARTITIONS_PER_REQUEST", "TOO_MANY_PARTITIONS", "duplicates", "error_of"]

#: The most partitions one CreateTopics or CreatePartitions request (or one
#: Metadata request's auto-creations) may add: Kafka's controller refuses a
#: larger request whole (MAX_PARTITIONS_PER_BATCH, POLICY_VIOLATION).
MAX_PARTITIONS_PER_REQUEST = 10_000
#: Kafka's message for that refusal.
TOO_MANY_PARTITIONS = "Excessively large number of partitions per request."

_log = logging.getLogger("pylog.broker")

_K = TypeVar("_K", bound=Hashable)


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
