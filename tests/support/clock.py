"""ManualClock: a broker clock (``pylog.common.utils.time.Clock``) that only moves when the
test says so."""

from __future__ import annotations

import time


class ManualClock:
    """Milliseconds that only move when the test says so."""

    def __init__(self, now_ms: int | None = None) -> None:
        self.now_ms = int(time.time() * 1000) if now_ms is None else now_ms

    def __call__(self) -> int:
        return self.now_ms

    def advance(self, ms: int) -> None:
        self.now_ms += ms
