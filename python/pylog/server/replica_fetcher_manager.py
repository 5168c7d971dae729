"""ReplicaFetcherManager: the follower partitions of this broker spread over
fetchers (Kafka's AbstractFetcherManager / ReplicaFetcherManager).

There are ``num.replica.fetchers`` fetchers per source broker; a partition
goes to fetcher ``abs(31 * java_hash(topic) + partition) % num.replica.fetchers``
of its leader, so a partition keeps its fetcher while its leader does. A
fetcher left without partitions is shut down by
``shutdown_idle_fetcher_threads`` (the ReplicaManager calls it after each
LeaderAndIsr).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from pylog.common.topic_partition import TopicPartition
from pylog.server.replica_fetcher_blocking_send import BrokerEndPoint
from pylog.server.replica_fetcher_thread import (
    InitialFetchState,
    ReplicaFetcherConfig,
    ReplicaFetcherThread,
)

if TYPE_CHECKING:
    from pylog.server.replica_manager import ReplicaManager

__all__ = ["ReplicaFetcherManager", "java_string_hash"]

_log = logging.getLogger("pylog.server.replica_fetcher")


def java_string_hash(s: str) -> int:
    """Java's String.hashCode (UTF-16 code units), as a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


class ReplicaFetcherManager:
    def __init__(self, config: ReplicaFetcherConfig, replica_manager: ReplicaManager) -> None:
        self.config = config
        self.replica_manager = replica_manager
        # (source broker id, fetcher id) -> fetcher
        self.fetchers: dict[tuple[int, int], ReplicaFetcherThread] = {}
        self._retiring: set[asyncio.Task[None]] = set()

    def fetcher_id(self, tp: TopicPartition) -> int:
        h = (31 * java_string_hash(tp.topic) + tp.partition) & 0xFFFFFFFF
        signed = h - (1 << 32) if h >= 1 << 31 else h
        return abs(signed) % max(1, self.config.num_fetchers)

    def add_fetcher_for_partitions(
        self, initial: Mapping[TopicPartition, InitialFetchState]
    ) -> None:
        """Fetch each partition from its leader (moving it off any other fetcher)."""
        self.remove_fetcher_for_partitions(initial)
        grouped: dict[tuple[BrokerEndPoint, int], dict[TopicPartition, InitialFetchState]] = {}
        for tp, st in initial.items():
            grouped.setdefault((st.leader, self.fetcher_id(tp)), {})[tp] = st
        for (leader, fid), parts in grouped.items():
            key = (leader.id, fid)
            fetcher = self.fetchers.get(key)
            if fetcher is not None and fetcher.source != leader:
                # The leader's address changed: a new connection.
                self._retire(key)
                fetcher = None
            if fetcher is None:
                fetcher = ReplicaFetcherThread(
                    f"ReplicaFetcherThread-{fid}-{leader.id}", fid, leader, self.config,
                    self.replica_manager,
                )  # fmt: skip
                self.fetchers[key] = fetcher
                fetcher.start()
            fetcher.add_partitions(parts)
            _log.info("fetching %s from broker %d", sorted(parts), leader.id)

    def remove_fetcher_for_partitions(self, tps: Iterable[TopicPartition]) -> None:
        doomed = list(tps)
        for fetcher in self.fetchers.values():
            fetcher.remove_partitions(doomed)

    def _retire(self, key: tuple[int, int]) -> None:
        fetcher = self.fetchers.pop(key, None)
        if fetcher is not None:
            task = asyncio.get_running_loop().create_task(fetcher.shutdown())
            self._retiring.add(task)
            task.add_done_callback(self._retiring.discard)

    def shutdown_idle_fetcher_threads(self) -> None:
        for key, fetcher in list(self.fetchers.items()):
            if fetcher.partition_count == 0:
                self._retire(key)

    def partition_fetcher(self, tp: TopicPartition) -> ReplicaFetcherThread | None:
        for fetcher in self.fetchers.values():
            if tp in fetcher.states:
                return fetcher
        return None

    @property
    def max_lag(self) -> int:
        return max((f.max_lag for f in self.fetchers.values()), default=0)

    async def shutdown(self) -> None:
        fetchers = list(self.fetchers.values())
        self.fetchers.clear()
        for f in fetchers:
            await f.shutdown()
        for task in list(self._retiring):
            await task
