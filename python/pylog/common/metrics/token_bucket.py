"""TokenBucket: credits that refill at the quota's rate, as Kafka's
``org.apache.kafka.common.metrics.stats.TokenBucket`` measures the
``controller_mutation_rate`` quota (KIP-599).

The bucket holds at most ``samples * window * quota`` credits (the burst) and
gains ``quota`` credits per second up to that. Recording takes credits away
and may leave the bucket below zero; while it is below zero the quota is
exhausted, and ``-credits / quota`` seconds bring it back to zero. Unlike a
rate over sampled windows, one large burst costs exactly the time it takes
to earn its credits back, not until its sample expires.

A new bucket is full (Kafka's starts empty at time 0, so its first refill
fills it). The quota is passed on each call: a changed quota takes effect on
the next one, with the credits earned so far kept.
"""

from __future__ import annotations

__all__ = ["TokenBucket"]


class TokenBucket:
    __slots__ = ("_last_ms", "samples", "tokens", "window_ms")

    def __init__(self, samples: int, window_ms: int) -> None:
        self.samples = max(samples, 1)
        self.window_ms = max(window_ms, 1)
        self.tokens: float | None = None  # None: full at the first use
        self._last_ms = 0

    def burst(self, quota: float) -> float:
        """The most credits the bucket holds at ``quota`` credits per second."""
        return self.samples * (self.window_ms / 1000.0) * quota

    def _refill(self, quota: float, now_ms: int) -> float:
        burst = self.burst(quota)
        if self.tokens is None:
            tokens = burst
        else:
            elapsed = max(now_ms - self._last_ms, 0) / 1000.0
            tokens = min(burst, self.tokens + quota * elapsed)
        self.tokens = tokens
        self._last_ms = now_ms
        return tokens

    def measure(self, quota: float, now_ms: int) -> float:
        """The credits left now (below zero: the quota is exhausted)."""
        return self._refill(quota, now_ms)

    def record(self, value: float, quota: float, now_ms: int) -> None:
        """Take ``value`` credits (a negative value gives them back, up to the burst)."""
        tokens = self._refill(quota, now_ms)
        self.tokens = min(self.burst(quota), tokens - value)
