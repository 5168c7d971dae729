"""MetadataCache: this broker's view of the cluster, as the controller's
UpdateMetadata requests describe it (Kafka's ZooKeeper-mode ``ZkMetadataCache``).

It holds the live brokers (id, endpoints per listener, rack), the active
controller's id, and per partition the leader, leader epoch, replicas, ISR,
offline replicas and the partition's ZooKeeper version. An UpdateMetadata
replaces the broker list whole and the states of the partitions it names; a
partition state whose leader is -2 (Kafka's ``LeaderDuringDelete``) removes
the partition. Reads take a snapshot of immutable values, so handlers on the
event loop never see a half-applied update.

The fencing of stale requests (controller epoch, broker epoch) is the
ReplicaManager's: this module only stores what was accepted.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

__all__ = [
    "LEADER_DURING_DELETE",
    "BrokerEndpoint",
    "MetadataBroker",
    "MetadataCache",
    "PartitionInfo",
]

#: A partition state with this leader is a topic being deleted (Kafka's
#: LeaderAndIsr.LeaderDuringDelete): the partition leaves the cache.
LEADER_DURING_DELETE = -2


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    listener: str
    host: str
    port: int
    security_protocol: int = 0  # Kafka's SecurityProtocol id: 0 = PLAINTEXT


@dataclass(frozen=True, slots=True)
class MetadataBroker:
    id: int
    endpoints: tuple[BrokerEndpoint, ...]
    rack: str | None = None

    def endpoint(self, listener: str) -> BrokerEndpoint | None:
        for ep in self.endpoints:
            if ep.listener == listener:
                return ep
        return None


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    zk_version: int = 0
    offline_replicas: tuple[int, ...] = ()
    controller_epoch: int = 0


@dataclass(slots=True)
class _Snapshot:
    brokers: dict[int, MetadataBroker] = field(default_factory=dict)
    controller_id: int | None = None
    partitions: dict[str, dict[int, PartitionInfo]] = field(default_factory=dict)
    topic_ids: dict[str, str] = field(default_factory=dict)


class MetadataCache:
    """The cluster as the last accepted UpdateMetadata describes it."""

    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self._lock = threading.Lock()
        self._snapshot = _Snapshot()

    def update(
        self,
        *,
        controller_id: int,
        brokers: list[MetadataBroker],
        partitions: list[PartitionInfo],
        topic_ids: dict[str, str] | None = None,
    ) -> list[tuple[str, int]]:
        """Apply one UpdateMetadata: the broker list is replaced, the named
        partitions are set (or removed when their leader is -2). Returns the
        partitions removed."""
        with self._lock:
            old = self._snapshot
            parts = {t: dict(ps) for t, ps in old.partitions.items()}
            ids = dict(old.topic_ids)
            ids.update(topic_ids or {})
            deleted: list[tuple[str, int]] = []
            for p in partitions:
                if p.leader == LEADER_DURING_DELETE:
                    topic = parts.get(p.topic)
                    if topic is not None and topic.pop(p.partition, None) is not None:
                        deleted.append((p.topic, p.partition))
                        if not topic:
                            del parts[p.topic]
                            ids.pop(p.topic, None)
                    continue
                parts.setdefault(p.topic, {})[p.partition] = p
            self._snapshot = _Snapshot(
                brokers={b.id: b for b in brokers},
                controller_id=controller_id if controller_id >= 0 else None,
                partitions=parts,
                topic_ids=ids,
            )
            return deleted

    # ------------------------------------------------------------------ reads

    @property
    def controller_id(self) -> int | None:
        return self._snapshot.controller_id

    def alive_brokers(self) -> list[MetadataBroker]:
        return sorted(self._snapshot.brokers.values(), key=lambda b: b.id)

    def alive_broker(self, broker_id: int) -> MetadataBroker | None:
        return self._snapshot.brokers.get(broker_id)

    def has_broker(self, broker_id: int) -> bool:
        return broker_id in self._snapshot.brokers

    def broker_endpoint(self, broker_id: int, listener: str) -> BrokerEndpoint | None:
        b = self._snapshot.brokers.get(broker_id)
        return b.endpoint(listener) if b is not None else None

    def topics(self) -> list[str]:
        return sorted(self._snapshot.partitions)

    def contains_topic(self, topic: str) -> bool:
        return topic in self._snapshot.partitions

    def topic_id(self, topic: str) -> str | None:
        return self._snapshot.topic_ids.get(topic)

    def partition_info(self, topic: str, partition: int) -> PartitionInfo | None:
        return self._snapshot.partitions.get(topic, {}).get(partition)

    def partitions_of(self, topic: str) -> list[PartitionInfo]:
        found = self._snapshot.partitions.get(topic, {})
        return [found[i] for i in sorted(found)]

    def leader_of(self, topic: str, partition: int) -> int | None:
        p = self.partition_info(topic, partition)
        return p.leader if p is not None and p.leader >= 0 else None
