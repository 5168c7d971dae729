"""The broker's wall clock, in milliseconds (Kafka's ``org.apache.kafka.common.utils.Time``).

Everything that stamps or ages data on disk (segment roll and retention, the
cleaner's compaction lags, producer-id expiry, a replica's last caught-up
time) reads :func:`now_ms`, and takes a :data:`Clock` so a test can pass its
own.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeAlias

__all__ = ["Clock", "now_ms"]

#: A source of wall-clock milliseconds.
Clock: TypeAlias = Callable[[], int]


def now_ms() -> int:
    """Milliseconds since the epoch (``time.time_ns()``, truncated)."""
    return time.time_ns() // 1_000_000
