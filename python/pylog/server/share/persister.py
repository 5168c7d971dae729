"""The Persister: where share-partition state is saved and read back
(Kafka's ``org.apache.kafka.server.share.persister.Persister``; its
DefaultStatePersister talks to the share coordinator). The share coordinator
(``pylog.coordinator.share_coordinator``) implements it on the
``__share_group_state`` topic; ``InMemoryPersister`` keeps nothing across a
restart (a broker built without a coordinator)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from pylog.errors import ErrorCode

__all__ = ["InMemoryPersister", "PersistedState", "Persister", "StateBatch"]


@dataclass(frozen=True, slots=True)
class StateBatch:
    """A run of offsets in one delivery state (Kafka's PersisterStateBatch)."""

    first_offset: int
    last_offset: int
    delivery_state: int  # RecordState's value: 0 available, 2 acknowledged, 4 archived
    delivery_count: int


@dataclass(slots=True)
class PersistedState:
    start_offset: int
    state_epoch: int = 0
    leader_epoch: int = -1
    batches: list[StateBatch] = field(default_factory=list)


class Persister(Protocol):
    async def read_state(
        self, group_id: str, topic_id: str, partition: int
    ) -> PersistedState | None: ...

    async def write_state(
        self, group_id: str, topic_id: str, partition: int, state: PersistedState
    ) -> int: ...


class InMemoryPersister:
    def __init__(self) -> None:
        self.states: dict[tuple[str, str, int], PersistedState] = {}

    async def read_state(
        self, group_id: str, topic_id: str, partition: int
    ) -> PersistedState | None:
        return self.states.get((group_id, topic_id, partition))

    async def write_state(
        self, group_id: str, topic_id: str, partition: int, state: PersistedState
    ) -> int:
        self.states[(group_id, topic_id, partition)] = state
        return ErrorCode.NONE
