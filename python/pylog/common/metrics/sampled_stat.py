"""SampledStat, Rate and Avg: a value measured over a few rolling time windows,
as Kafka's metrics library measures the client quotas
(``org.apache.kafka.common.metrics.stats``), so a quota throttles exactly as
much as Kafka's would.

A stat keeps ``samples`` samples of ``window_ms`` each. A sample starts at the
first value recorded after the previous one filled its window (samples are
not aligned to the clock), and a sample older than ``samples * window_ms`` is
forgotten. A Rate is the sum of the samples divided by the time they cover —
at least ``samples - 1`` windows, so a client's first burst is not measured
over a few milliseconds and throttled for ever. A SimpleRate (Kafka's, which
its ReplicationQuotaManager measures with) divides by the time since the
oldest sample, at least one window.
"""

from __future__ import annotations

__all__ = ["Avg", "Rate", "SampledStat", "SimpleRate"]


class _Sample:
    __slots__ = ("count", "start_ms", "value")

    def __init__(self, start_ms: int) -> None:
        self.start_ms = start_ms
        self.value = 0.0
        self.count = 0

    def reset(self, now_ms: int) -> None:
        self.start_ms = now_ms
        self.value = 0.0
        self.count = 0


class SampledStat:
    """The samples; :meth:`record` adds a value at a time."""

    __slots__ = ("_current", "_samples", "samples", "window_ms")

    def __init__(self, samples: int, window_ms: int) -> None:
        self.samples = max(samples, 1)
        self.window_ms = max(window_ms, 1)
        self._samples: list[_Sample] = []
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        sample = self._samples[self._current]
        if now_ms - sample.start_ms >= self.window_ms:
            self._current = (self._current + 1) % self.samples
            if self._current >= len(self._samples):
                self._samples.append(_Sample(now_ms))
            sample = self._samples[self._current]
            sample.reset(now_ms)
        sample.value += value
        sample.count += 1

    def _purge(self, now_ms: int) -> None:
        expire = self.samples * self.window_ms
        for s in self._samples:
            if now_ms - s.start_ms >= expire:
                s.reset(now_ms)

    def total(self, now_ms: int) -> tuple[float, int]:
        """(sum of the values, number of values) of the live samples."""
        self._purge(now_ms)
        return sum(s.value for s in self._samples), sum(s.count for s in self._samples)

    def idle_since(self) -> int:
        """When the last sample started (ms): how long ago this stat saw a value."""
        return max((s.start_ms for s in self._samples), default=0)


class Rate(SampledStat):
    """Values per second over the live samples."""

    __slots__ = ()

    def window_size_ms(self, now_ms: int) -> int:
        """The time the samples cover, at least ``samples - 1`` whole windows."""
        self._purge(now_ms)
        oldest = min((s.start_ms for s in self._samples), default=now_ms)
        elapsed = now_ms - oldest
        full = elapsed // self.window_ms
        least = self.samples - 1
        if full < least:
            elapsed += (least - full) * self.window_ms
        return max(elapsed, 1)

    def measure(self, now_ms: int) -> float:
        value, _ = self.total(now_ms)
        return value / (self.window_size_ms(now_ms) / 1000.0)

    def time_until_window_ms(self, window_ms: int, now_ms: int) -> int:
        """About how long until the measured window is ``window_ms`` long
        (no sample expiring meanwhile)."""
        return max(0, window_ms - self.window_size_ms(now_ms))


class SimpleRate(Rate):
    """Values per second since the oldest live sample started, counting the
    first window whole (Kafka's SimpleRate): a first burst is measured over
    one window, not ``samples - 1``."""

    __slots__ = ()

    def window_size_ms(self, now_ms: int) -> int:
        self._purge(now_ms)
        oldest = min((s.start_ms for s in self._samples), default=now_ms)
        return max(now_ms - oldest, self.window_ms)

    def time_until_window_ms(self, window_ms: int, now_ms: int) -> int:
        # The window is the time since the oldest sample began, once past one window.
        self._purge(now_ms)
        oldest = min((s.start_ms for s in self._samples), default=now_ms)
        return max(0, oldest + window_ms - now_ms)


class Avg(SampledStat):
    """The mean of the values in the live samples (0 when there are none)."""

    __slots__ = ()

    def measure(self, now_ms: int) -> float:
        value, count = self.total(now_ms)
        return value / count if count else 0.0
