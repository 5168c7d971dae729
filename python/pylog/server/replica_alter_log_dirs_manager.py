"""ReplicaAlterLogDirsManager: the ReplicaAlterLogDirsThreads of a broker
(Kafka's ``kafka.server.ReplicaAlterLogDirsManager``, a fetcher manager whose
source is the broker itself).

``num.replica.alter.log.dirs.threads`` of them (unset: one per log directory,
Kafka's ``KafkaConfig.getNumReplicaAlterLogDirsThreads``); a partition goes
to the one its name hashes to, as a follower's partitions go to their
fetchers (``abs(31 * hash(topic) + partition) % threads``). All of them share
one quota, the broker's ``replica.alter.log.dirs.io.max.bytes.per.second``:
the bound is on the broker's moves together, not on each.

It also keeps the truncations a move must follow (Kafka's
``markPartitionsForTruncation``): when a follower truncates its current log,
the future log may hold copies of the batches that went, and the thread
truncates it too before its next copy.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING

from pylog.common.topic_partition import TopicPartition
from pylog.server.replica_alter_log_dirs_thread import ReplicaAlterLogDirsThread, Truncation
from pylog.server.replica_fetcher_manager import java_string_hash

if TYPE_CHECKING:
    from pylog.server.replica_manager import ReplicaManager

__all__ = ["ReplicaAlterLogDirsManager"]


class ReplicaAlterLogDirsManager:
    def __init__(self, replica_manager: ReplicaManager, num_threads: int) -> None:
        self.num_threads = max(1, num_threads)
        self.threads = [
            ReplicaAlterLogDirsThread(replica_manager, self, fetcher_id=i)
            for i in range(self.num_threads)
        ]
        self._truncations: dict[TopicPartition, Truncation] = {}
        self._lock = threading.Lock()

    def fetcher_id(self, tp: TopicPartition) -> int:
        h = (31 * java_string_hash(tp.topic) + tp.partition) & 0xFFFFFFFF
        if h >= 1 << 31:
            h -= 1 << 32
        return abs(h) % self.num_threads

    @property
    def partitions(self) -> set[TopicPartition]:
        """Every partition being moved."""
        out: set[TopicPartition] = set()
        for t in self.threads:
            out |= t.partitions
        return out

    def add_partitions(self, tps: Iterable[TopicPartition]) -> None:
        """Start (or go on) moving ``tps``, whose future logs exist; on the loop."""
        by_thread: dict[int, list[TopicPartition]] = {}
        for tp in tps:
            by_thread.setdefault(self.fetcher_id(tp), []).append(tp)
        for i, group in by_thread.items():
            self.threads[i].add_partitions(group)

    def remove_partitions(self, tps: Iterable[TopicPartition]) -> None:
        for tp in tps:
            self.threads[self.fetcher_id(tp)].remove_partitions([tp])

    def mark_partitions_for_truncation(
        self, tp: TopicPartition, offset: int, *, full: bool = False
    ) -> None:
        """The current log of ``tp`` was truncated to ``offset`` (``full``: emptied
        and restarted there); any thread. Several marks before the next copy
        add up to the deepest cut, a full one winning."""
        with self._lock:
            prev = self._truncations.get(tp)
            if prev is None:
                self._truncations[tp] = Truncation(offset, full)
            else:
                self._truncations[tp] = Truncation(min(prev.offset, offset), prev.full or full)

    def take_truncation(self, tp: TopicPartition) -> Truncation | None:
        with self._lock:
            return self._truncations.pop(tp, None)

    def shutdown(self) -> None:
        for t in self.threads:
            t.shutdown()
        with self._lock:
            self._truncations.clear()
