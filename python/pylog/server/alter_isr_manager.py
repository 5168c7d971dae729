"""AlterIsrManager: how a partition leader makes an ISR change durable before
it acts on it (Kafka's ``AlterIsrManager``; ``ZkIsrManager`` in ZooKeeper mode).

A leader that shrinks or expands its ISR proposes the new
:class:`LeaderAndIsr` with the partition epoch (ZooKeeper: the znode version
of ``/brokers/topics/<t>/partitions/<p>/state``) it was based on. The manager
writes it conditionally on that version and calls back with the state as
written (its new partition epoch), or with an error code when the write lost a
race with the controller (the leader then keeps its ISR and waits for the
controller's LeaderAndIsr). The ZooKeeper implementation also records an ISR
change notification so the controller propagates the ISR by UpdateMetadata.

Until the ZooKeeper client lands, :class:`InProcessAlterIsrManager` stands in:
it keeps the latest state per partition in memory, applies a proposal when
its partition epoch matches, and records every accepted change in
``changes`` for tests to read. Callbacks may run synchronously inside
``submit`` (the in-process one does) or later on the event loop (a ZooKeeper
write).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from pylog.common.topic_partition import TopicPartition
from pylog.errors import ErrorCode

__all__ = [
    "AlterIsrCallback",
    "AlterIsrManager",
    "InProcessAlterIsrManager",
    "LeaderAndIsr",
]


@dataclass(frozen=True, slots=True)
class LeaderAndIsr:
    """A partition's leadership as the controller keeps it (Kafka's LeaderAndIsr)."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int  # the ZooKeeper version of the partition state znode


#: Called with the state as written, or a Kafka error code: INVALID_UPDATE_VERSION
#: when the stored partition epoch moved on, FENCED_LEADER_EPOCH when the leader
#: epoch did. Until it is called the leader proposes no other ISR change, so an
#: implementation must call it exactly once per submit (retrying inside if it must).
AlterIsrCallback = Callable[[LeaderAndIsr | int], None]


class AlterIsrManager(Protocol):
    def submit(
        self,
        tp: TopicPartition,
        proposed: LeaderAndIsr,
        controller_epoch: int,
        callback: AlterIsrCallback,
    ) -> None:
        """Write ``proposed`` if the stored partition epoch is still
        ``proposed.partition_epoch``; call ``callback`` with the result."""
        ...


#: Kafka's INVALID_UPDATE_VERSION (a conditional write found another version).
INVALID_UPDATE_VERSION = 95


class InProcessAlterIsrManager:
    """An AlterIsrManager without ZooKeeper: the stored state lives here."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state: dict[TopicPartition, LeaderAndIsr] = {}
        #: every accepted change, in order: (partition, state as written)
        self.changes: list[tuple[TopicPartition, LeaderAndIsr]] = []

    def seed(self, tp: TopicPartition, state: LeaderAndIsr) -> None:
        """The state the controller wrote (LeaderAndIsr), which proposals build on.
        Kept when older than what is stored."""
        with self._lock:
            cur = self._state.get(tp)
            if cur is None or (state.leader_epoch, state.partition_epoch) >= (
                cur.leader_epoch,
                cur.partition_epoch,
            ):
                self._state[tp] = state

    def state(self, tp: TopicPartition) -> LeaderAndIsr | None:
        with self._lock:
            return self._state.get(tp)

    def submit(
        self,
        tp: TopicPartition,
        proposed: LeaderAndIsr,
        controller_epoch: int,
        callback: AlterIsrCallback,
    ) -> None:
        with self._lock:
            cur = self._state.get(tp)
            if cur is not None and (
                cur.partition_epoch != proposed.partition_epoch
                or cur.leader_epoch != proposed.leader_epoch
            ):
                result: LeaderAndIsr | int = (
                    ErrorCode.FENCED_LEADER_EPOCH
                    if cur.leader_epoch != proposed.leader_epoch
                    else INVALID_UPDATE_VERSION
                )
            else:
                result = LeaderAndIsr(
                    proposed.leader,
                    proposed.leader_epoch,
                    tuple(sorted(proposed.isr)),
                    proposed.partition_epoch + 1,
                )
                self._state[tp] = result
                self.changes.append((tp, result))
        callback(result)
