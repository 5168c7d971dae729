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

A third one, of Kafka's quota type AlterLogDirsReplication, paces the copies
of replicas moving between this broker's own log directories
(``replica.alter.log.dirs.io.max.bytes.per.second``; the
ReplicaAlterLogDirsThreads): every move is throttled, there is no replica
list, and the rate is measured over ``alter.log.dirs.replication.quota.window.num``
samples of ``alter.log.dirs.replication.quota.window.size.seconds``.

Kafka measures all three with its SimpleRate: the bytes of the live samples
over the time since the oldest began, at least one window, so a copy that
starts idle moves at most one window's worth before the pacing shows. The
alter-log-dirs quota does so here; the leader's and the follower's still use
the client quotas' Rate (at least ``window.num - 1`` windows: ten seconds'
worth at once, docs/operations.md).
"""

from __future__ import annotations

import enum
import functools
import threading

from pylog.common.metrics.sampled_stat import Rate, SimpleRate
from pylog.common.topic_partition import TopicPartition
from pylog.common.utils.time import Clock, now_ms

__all__ = ["UNBOUNDED", "QuotaType", "ReplicationQuotaManager", "throttled_partitions"]

#: The bound of an unset throttle (Kafka's Long.MaxValue default).
UNBOUNDED = (1 << 63) - 1


class QuotaType(enum.Enum):
    """The replication quotas of Kafka's ``org.apache.kafka.server.quota.QuotaType``."""

    LEADER_REPLICATION = "LeaderReplication"
    FOLLOWER_REPLICATION = "FollowerReplication"
    ALTER_LOG_DIRS_REPLICATION = "AlterLogDirsReplication"


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
        quota_type: QuotaType = QuotaType.LEADER_REPLICATION,
        window_num: int = 11,
        window_size_seconds: int = 1,
        clock: Clock = now_ms,
    ) -> None:
        self.broker_id = broker_id
        self.bound = bound
        self.quota_type = quota_type
        stat = SimpleRate if quota_type is QuotaType.ALTER_LOG_DIRS_REPLICATION else Rate
        self._rate: Rate = stat(window_num, window_size_seconds * 1000)
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

    def throttle_time_ms(self) -> int:
        """How long to hold off before the next throttled copy: 0 while the
        rate is within the bound, else the time until the bytes already
        recorded, spread over the measured window, fall to the bound (no
        sample expiring meanwhile: an upper estimate, worth checking again)."""
        with self._lock:
            bound = self.bound
            if bound >= UNBOUNDED:
                return 0
            now = self._clock()
            total, _ = self._rate.total(now)
            window = self._rate.window_size_ms(now)
            if total * 1000.0 <= bound * window:
                return 0
            if bound <= 0:
                return self._rate.window_ms
            needed = int(total * 1000.0 / bound) + 1
            return max(1, self._rate.time_until_window_ms(needed, now))

    def record(self, size: int) -> None:
        if size <= 0:
            return
        with self._lock:
            self._rate.record(size, self._clock())

    def rate(self) -> float:
        """Bytes per second of throttled replication now (a metric)."""
        with self._lock:
            return self._rate.measure(self._clock())
