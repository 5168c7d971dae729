"""ControllerContext: what the active controller knows of the cluster — the
live brokers with their epochs (and which of them are in controlled
shutdown), every topic's replica assignment and id (and a reassignment in
flight), each partition's leadership as last written to ZooKeeper
(LeaderAndIsr with its controller epoch and znode version), and the states of
the partition and replica state machines. Only the controller's event task touches it."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from pylog.common.topic_partition import TopicPartition
from pylog.metadata.zk_data import BrokerInfo, LeaderAndIsr

__all__ = ["ControllerContext", "PartitionState", "ReplicaAssignment", "ReplicaState"]


class PartitionState(enum.Enum):
    """Kafka's PartitionState names."""

    NonExistentPartition = 0
    NewPartition = 1
    OnlinePartition = 2
    OfflinePartition = 3


class ReplicaState(enum.Enum):
    """Kafka's ReplicaState names (the deletion states as far as pylog uses them)."""

    NewReplica = 1
    OnlineReplica = 2
    OfflineReplica = 3
    ReplicaDeletionStarted = 4
    ReplicaDeletionSuccessful = 5
    NonExistentReplica = 7


@dataclass(frozen=True)
class ReplicaAssignment:
    """A partition's replicas with a reassignment in flight (Kafka's
    ReplicaAssignment, KIP-455): ``replicas`` is the full set, the target
    replicas first; ``adding`` are in the target and not the original,
    ``removing`` in the original and not the target."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def origin_replicas(self) -> list[int]:
        return [r for r in self.replicas if r not in self.adding]

    @property
    def target_replicas(self) -> list[int]:
        return [r for r in self.replicas if r not in self.removing]

    @property
    def is_being_reassigned(self) -> bool:
        return bool(self.adding or self.removing)

    def reassign_to(self, target: list[int]) -> ReplicaAssignment:
        """From the original replicas to ``target`` (supplanting a
        reassignment in flight, whose added replicas are dropped)."""
        origin = self.origin_replicas
        full = list(dict.fromkeys([*target, *origin]))
        return ReplicaAssignment(
            tuple(full),
            tuple(r for r in full if r not in origin),
            tuple(r for r in full if r not in target),
        )


@dataclass
class ControllerContext:
    epoch: int = 0
    epoch_zk_version: int = -1
    #: every registered broker, those in controlled shutdown included (Kafka's
    #: liveOrShuttingDownBrokers): they still get the controller's requests
    live_brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    #: brokers that asked for a controlled shutdown and are still registered:
    #: never elected leader, and leaving every ISR
    shutting_down_brokers: set[int] = field(default_factory=set)
    #: topic -> partition -> replicas (assignment order: the first is preferred)
    assignments: dict[str, dict[int, list[int]]] = field(default_factory=dict)
    topic_ids: dict[str, str] = field(default_factory=dict)
    #: a reassignment in flight (KIP-455): the replicas being added and removed
    #: (both are in the assignment until it completes)
    adding_replicas: dict[TopicPartition, list[int]] = field(default_factory=dict)
    removing_replicas: dict[TopicPartition, list[int]] = field(default_factory=dict)
    leadership: dict[TopicPartition, LeaderAndIsr] = field(default_factory=dict)
    partition_states: dict[TopicPartition, PartitionState] = field(default_factory=dict)
    replica_states: dict[tuple[TopicPartition, int], ReplicaState] = field(default_factory=dict)
    topics_being_deleted: set[str] = field(default_factory=set)
    #: broker -> its replicas on a failed log directory (Kafka's
    #: replicasOnOfflineDirs): never elected, shown offline, until the broker
    #: registers again
    replicas_on_offline_dirs: dict[int, set[TopicPartition]] = field(default_factory=dict)

    def is_replica_online(self, broker_id: int, tp: TopicPartition) -> bool:
        """Registered, and the replica's log directory has not failed."""
        return broker_id in self.live_brokers and tp not in self.replicas_on_offline_dirs.get(
            broker_id, ()
        )

    def live_broker_ids(self) -> set[int]:
        """The brokers a leader may be elected from: registered and not in
        controlled shutdown (Kafka's liveBrokerIds)."""
        return set(self.live_brokers) - self.shutting_down_brokers

    def broker_epoch(self, broker_id: int) -> int:
        b = self.live_brokers.get(broker_id)
        return b.epoch if b is not None else -1

    def replicas(self, tp: TopicPartition) -> list[int]:
        return list(self.assignments.get(tp.topic, {}).get(tp.partition, []))

    def full_assignment(self, tp: TopicPartition) -> ReplicaAssignment:
        return ReplicaAssignment(
            tuple(self.replicas(tp)),
            tuple(self.adding_replicas.get(tp, ())),
            tuple(self.removing_replicas.get(tp, ())),
        )

    def set_full_assignment(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        self.assignments.setdefault(tp.topic, {})[tp.partition] = list(assignment.replicas)
        for held, value in (
            (self.adding_replicas, assignment.adding),
            (self.removing_replicas, assignment.removing),
        ):
            if value:
                held[tp] = list(value)
            else:
                held.pop(tp, None)

    def partitions_being_reassigned(self) -> list[TopicPartition]:
        return sorted(set(self.adding_replicas) | set(self.removing_replicas))

    def reassignment_target(self, tp: TopicPartition) -> list[int] | None:
        """The replicas a reassignment in flight ends with; None without one."""
        if tp not in self.adding_replicas and tp not in self.removing_replicas:
            return None
        removing = self.removing_replicas.get(tp, [])
        return [r for r in self.replicas(tp) if r not in removing]

    def all_partitions(self) -> list[TopicPartition]:
        return [
            TopicPartition(t, p)
            for t in sorted(self.assignments)
            for p in sorted(self.assignments[t])
        ]

    def partitions_of_topic(self, topic: str) -> list[TopicPartition]:
        return [TopicPartition(topic, p) for p in sorted(self.assignments.get(topic, {}))]

    def partitions_on_broker(self, broker_id: int) -> list[TopicPartition]:
        return [tp for tp in self.all_partitions() if broker_id in self.replicas(tp)]

    def partitions_led_by(self, broker_id: int) -> list[TopicPartition]:
        return [tp for tp, s in self.leadership.items() if s.leader == broker_id]

    def partitions_led_by_any(self, brokers: set[int]) -> list[TopicPartition]:
        return sorted(tp for tp, s in self.leadership.items() if s.leader in brokers)

    def partition_leaders_on_broker(self, broker_id: int) -> list[TopicPartition]:
        """The partitions of more than one replica, not being deleted, that
        ``broker_id`` leads: what a controlled shutdown still has to move."""
        return sorted(
            tp
            for tp, s in self.leadership.items()
            if s.leader == broker_id
            and tp.topic not in self.topics_being_deleted
            and len(self.replicas(tp)) > 1
        )

    def preferred_replica_imbalance_count(self) -> int:
        """Partitions not led by their preferred (first) replica, topics being
        deleted aside (Kafka's PreferredReplicaImbalanceCount)."""
        return sum(
            1
            for tp, s in self.leadership.items()
            if tp.topic not in self.topics_being_deleted
            and (r := self.replicas(tp))
            and s.leader != r[0]
        )

    def offline_partition_count(self) -> int:
        return sum(
            1
            for tp, s in self.partition_states.items()
            if s is PartitionState.OfflinePartition and tp.topic not in self.topics_being_deleted
        )

    def remove_topic(self, topic: str) -> None:
        for tp in self.partitions_of_topic(topic):
            self.leadership.pop(tp, None)
            self.partition_states.pop(tp, None)
            for r in self.replicas(tp):
                self.replica_states.pop((tp, r), None)
            self.adding_replicas.pop(tp, None)
            self.removing_replicas.pop(tp, None)
        self.assignments.pop(topic, None)
        self.topic_ids.pop(topic, None)
        self.topics_being_deleted.discard(topic)

    def reset(self) -> None:
        self.__init__()  # type: ignore[misc]
