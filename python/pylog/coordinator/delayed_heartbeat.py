"""DelayedHeartbeat: a member's session. It completes quietly when the member
shows it is alive (a heartbeat, a JoinGroup or SyncGroup it is waiting on)
and a new one starts; when the session timeout passes first, the member is
removed from its group (which rebalances).

A member id handed out with MEMBER_ID_REQUIRED gets one too: if the client
never comes back with it, the pending id is forgotten.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pylog.server.purgatory import DelayedOperation

if TYPE_CHECKING:
    from pylog.coordinator.group import GroupMetadata
    from pylog.coordinator.group_coordinator import GroupCoordinator

__all__ = ["DelayedHeartbeat"]


class DelayedHeartbeat(DelayedOperation):
    def __init__(
        self,
        coordinator: GroupCoordinator,
        group: GroupMetadata,
        member_id: str,
        is_pending: bool,
        timeout_ms: int,
    ) -> None:
        super().__init__(timeout_ms)
        self.coordinator = coordinator
        self.group = group
        self.member_id = member_id
        self.is_pending = is_pending

    def try_complete(self) -> bool:
        # Liveness completes it directly (force_complete) when the next one starts.
        return False

    def on_expiration(self) -> None:
        self.coordinator.on_heartbeat_expired(self.group, self.member_id, self.is_pending, self)

    def on_complete(self) -> None:
        pass
