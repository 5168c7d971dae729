"""ConsumerGroupTimeout: a KIP-848 member's session, or its deadline to revoke
partitions, on the coordinator's purgatory (Kafka schedules both on the
shard's timer: ``group.consumer.session.timeout.ms`` from each heartbeat;
the member's rebalance timeout from the moment it is asked to revoke).

A heartbeat completes the pending session quietly and starts the next; a
deadline that passes fences the member (it leaves the group, which gets a
new epoch and target assignment).
"""

from __future__ import annotations

import enum
from collections.abc import Callable

from pylog.server.purgatory import DelayedOperation

__all__ = ["ConsumerGroupTimeout", "TimeoutKind"]


class TimeoutKind(enum.Enum):
    SESSION = "session"
    REVOCATION = "revocation"
    #: A classic member told REBALANCE_IN_PROGRESS must rejoin within its
    #: rebalance timeout; one that joined must SyncGroup within it.
    JOIN = "join"
    SYNC = "sync"


class ConsumerGroupTimeout(DelayedOperation):
    def __init__(
        self,
        kind: TimeoutKind,
        group_id: str,
        member_id: str,
        timeout_ms: int,
        on_expired: Callable[[ConsumerGroupTimeout], None],
    ) -> None:
        super().__init__(timeout_ms)
        self.kind = kind
        self.group_id = group_id
        self.member_id = member_id
        self._on_expired = on_expired

    def try_complete(self) -> bool:
        return False  # completed by force (a heartbeat) or by its deadline

    def on_expiration(self) -> None:
        self._on_expired(self)

    def on_complete(self) -> None:
        pass
