"""ReplicationQuotaManager: paces the replication of throttled replicas (Kafka's
``kafka.server.ReplicationQuotaManager``), the mechanism behind
``kafka-reassign-partitions --throttle``.

There are two per broker: the leader's (``leader.replication.throttled.rate``,
bytes per second it serves to followers) and the follower's
(``follower.replication.throttled.rate``, bytes per second it fetches). Only
replicas named in the topic's ``leader.replication.throttled.replicas`` /
``follower.replication.throttled.replicas`` (``partition:broker`` pairs naming
this broker, or ``*``) are throttled, and only while they are out of the ISR,
as Kafka does: a replica catching up is paced, one in sync never is, so a
throttle cannot push a follower out of the ISR. When the measured rate of the
throttled replicas' bytes is over the bound, the leader answers their fetches
without data and the follower leaves them out of its fetches until the rate
drops. The rate is measured as the client quotas are, over
``replication.quota.window.num`` samples of
``replication.quota.window.size.seconds``.
"""

from __future__ import annotations

import functools
import threading

from pylog.common.metrics.sampled_stat import Rate
from pylog.common.topic_partition import TopicPartition
from pylog.common.utils.time import Clock, now_ms

__all__ = ["UNBOUNDED", "ReplicationQuotaManager", "throttled_partitions"]

#: The bound of an unset throttle (Kafka's Long.MaxValue default).
UNBOUNDED = (1 << 63) - 1


@functools.lru_cache(maxsize=1024)
def throttled_partitions(entries: tuple[str, ...], broker_id: int) -> frozenset[int] | None:
    """The partitions a ``*.replication.throttled.replicas`` value throttles on
    ``broker_id``: None for ``*`` (all of them), else those of the pairs that
    name this broker (Kafka's TopicConfigHandler.parseThrottledPartitions)."""
    items = [e.strip() for e in entries if e.strip()]
    if items == ["*"]:
        return None
    out = set()
    for item in items:
        partition, _, broker = item.partition(":")
        if broker.strip().isdigit() and int(broker) == broker_id and partition.strip().isdigit():
            out.add(int(partition))
    return frozenset(out)


class ReplicationQuotaManager:
    """One side's bound and the rate of its throttled bytes. Thread-safe:
    recorded on the event loop, the bound changed by a config change."""

    def __init__(
        self,
        broker_id: int,
        bound: int = UNBOUNDED,
        *,
        window_num: int = 11,
        window_size_seconds: int = 1,
        clock: Clock = now_ms,
    ) -> None:
        self.broker_id = broker_id
        self.bound = bound
        self._rate = Rate(window_num, window_size_seconds * 1000)
        self._clock = clock
        self._lock = threading.Lock()

    def update_quota(self, bound: int) -> None:
        with self._lock:
            self.bound = bound

    def is_throttled(self, tp: TopicPartition, entries: tuple[str, ...]) -> bool:
        """Whether ``tp`` is throttled here by its topic's replica list ``entries``."""
        if not entries or self.bound >= UNBOUNDED:
            return False
        parts = throttled_partitions(entries, self.broker_id)
        return parts is None or tp.partition in parts

    def is_quota_exceeded(self) -> bool:
        with self._lock:
            if self.bound >= UNBOUNDED:
                return False
            return self._rate.measure(self._clock()) > self.bound

    def record(self, size: int) -> None:
        if size <= 0:
            return
        with self._lock:
            self._rate.record(size, self._clock())

    def rate(self) -> float:
        """Bytes per second of throttled replication now (a metric)."""
        with self._lock:
            return self._rate.measure(self._clock())
