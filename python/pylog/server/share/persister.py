"""The Persister: where share-partition state is saved and read back
(Kafka's ``org.apache.kafka.server.share.persister.Persister``). On a
cluster it is the DefaultStatePersister
(``pylog.server.share.default_state_persister``), which sends the share
coordinator of each key the share-state requests; a lone broker's share
coordinator (``pylog.coordinator.share_coordinator``) is its own persister;
``InMemoryPersister`` keeps nothing across a restart (a broker built
without a coordinator)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from pylog.errors import ErrorCode

__all__ = ["InMemoryPersister", "PersistedState", "Persister", "PersisterError", "StateBatch"]


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


class PersisterError(Exception):
    """A read that failed with this Kafka error code."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


class Persister(Protocol):
    async def read_state(
        self, group_id: str, topic_id: str, partition: int
    ) -> PersistedState | None:
        """The state, None when never initialized; PersisterError if unreadable."""
        ...

    async def write_state(
        self, group_id: str, topic_id: str, partition: int, state: PersistedState
    ) -> int: ...

    async def initialize_state(
        self, group_id: str, topic_id: str, partition: int, state_epoch: int, start_offset: int
    ) -> int: ...

    async def delete_state(self, group_id: str, topic_id: str, partition: int) -> int: ...


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

    async def initialize_state(
        self, group_id: str, topic_id: str, partition: int, state_epoch: int, start_offset: int
    ) -> int:
        self.states[(group_id, topic_id, partition)] = PersistedState(
            start_offset, state_epoch, -1, []
        )
        return ErrorCode.NONE

    async def delete_state(self, group_id: str, topic_id: str, partition: int) -> int:
        self.states.pop((group_id, topic_id, partition), None)
        return ErrorCode.NONE
