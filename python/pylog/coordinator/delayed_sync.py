"""DelayedSync: the wait for every member of a new generation to send its
SyncGroup. A member that joined but never syncs (the leader above all: its
followers cannot get their assignment without it) would otherwise hold the
group until its session ends, as long as it keeps heartbeating. After the
rebalance timeout the members still pending are removed and the group
rebalances without them, as Kafka's coordinator does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pylog.server.purgatory import DelayedOperation

if TYPE_CHECKING:
    from pylog.coordinator.group import GroupMetadata
    from pylog.coordinator.group_coordinator import GroupCoordinator

__all__ = ["DelayedSync"]


class DelayedSync(DelayedOperation):
    def __init__(
        self, coordinator: GroupCoordinator, group: GroupMetadata, timeout_ms: int
    ) -> None:
        super().__init__(timeout_ms)
        self.coordinator = coordinator
        self.group = group

    def try_complete(self) -> bool:
        # The coordinator completes it (force_complete) once nobody is pending.
        return False

    def on_expiration(self) -> None:
        self.coordinator.on_sync_expired(self.group, self)

    def on_complete(self) -> None:
        pass
