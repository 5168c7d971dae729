"""Each consumer group's lag over time, for the chart on its page.

A group is watched from the first time its page is shown until nobody has
looked at it for ``WATCH_S``; while watched, a sampler thread asks its lag
every ``interval_s`` (OffsetFetch and ListOffsets, as the page does), and
each view of the page adds a sample too. At most ``MAX_GROUPS`` groups and
``MAX_POINTS`` samples each are kept: memory stays bounded however many
groups the cluster has or however long the console runs."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass

from pylog.errors import KafkaError

__all__ = ["LagChart", "LagHistory"]

MAX_POINTS = 360
MAX_GROUPS = 100
WATCH_S = 600.0


@dataclass(frozen=True)
class LagChart:
    """A chart drawn by the template as SVG: ``points`` of the polyline and
    (x, y, time, lag) of each sample, in a ``width`` x ``height`` box."""

    width: int
    height: int
    points: str
    samples: list[tuple[float, float, str, int]]
    max_lag: int
    span_s: float


class LagHistory:
    def __init__(self, sample: Callable[[str], int | None], interval_s: float) -> None:
        """``sample(group)``: the group's total lag now (None: not known)."""
        self._sample = sample
        self.interval_s = interval_s
        self._lock = threading.Lock()
        self._series: OrderedDict[str, deque[tuple[float, int]]] = OrderedDict()
        self._viewed: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self.interval_s > 0 and self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name="console-lag-sampler", daemon=True
            )
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None

    def add(self, group: str, lag: int) -> None:
        """A sample taken now; the group is watched from now on."""
        now = time.time()
        with self._lock:
            series = self._series.get(group)
            if series is None:
                series = self._series[group] = deque(maxlen=MAX_POINTS)
                while len(self._series) > MAX_GROUPS:  # the least recently seen goes
                    gone, _ = self._series.popitem(last=False)
                    self._viewed.pop(gone, None)
            self._series.move_to_end(group)
            self._viewed[group] = time.monotonic()
            series.append((now, lag))

    def series(self, group: str) -> list[tuple[float, int]]:
        with self._lock:
            return list(self._series.get(group, ()))

    def _watched(self) -> list[str]:
        now = time.monotonic()
        with self._lock:
            return [g for g, seen in self._viewed.items() if now - seen < WATCH_S]

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            for group in self._watched():
                if self._stop.is_set():
                    return
                try:
                    lag = self._sample(group)
                except (KafkaError, OSError):  # a sample missed; the next one comes
                    continue
                if lag is not None:
                    with self._lock:
                        series = self._series.get(group)
                        if series is not None:
                            series.append((time.time(), lag))

    def chart(self, group: str, width: int = 720, height: int = 180) -> LagChart | None:
        """The group's samples scaled into the box; None before two samples."""
        data = self.series(group)
        if len(data) < 2:
            return None
        t0, t1 = data[0][0], data[-1][0]
        span = max(t1 - t0, 1e-3)
        top = max(max(lag for _, lag in data), 1)
        pad = 4.0
        samples = []
        for t, lag in data:
            x = pad + (t - t0) / span * (width - 2 * pad)
            y = height - pad - lag / top * (height - 2 * pad)
            stamp = time.strftime("%H:%M:%S", time.gmtime(t))
            samples.append((round(x, 1), round(y, 1), stamp, lag))
        points = " ".join(f"{x},{y}" for x, y, _, _ in samples)
        return LagChart(width, height, points, samples, top, span)
