"""DelayedJoin and InitialDelayedJoin: a rebalance waiting for its members.

A rebalance completes when every known member has sent its JoinGroup, or at
the longest rebalance timeout of the members (those that did not rejoin are
then removed). The first rebalance of an empty group waits
``group.initial.rebalance.delay.ms`` first, and again (up to the rebalance
timeout) while members keep arriving, so a group starting together gets one
rebalance instead of one per member.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pylog.server.purgatory import DelayedOperation

if TYPE_CHECKING:
    from pylog.coordinator.group import GroupMetadata
    from pylog.coordinator.group_coordinator import GroupCoordinator

__all__ = ["DelayedJoin", "InitialDelayedJoin"]


class DelayedJoin(DelayedOperation):
    def __init__(
        self, coordinator: GroupCoordinator, group: GroupMetadata, rebalance_timeout_ms: int
    ) -> None:
        super().__init__(rebalance_timeout_ms)
        self.coordinator = coordinator
        self.group = group

    def try_complete(self) -> bool:
        if self.coordinator.can_complete_join(self.group):
            return self.force_complete()
        return False

    def on_expiration(self) -> None:
        pass

    def on_complete(self) -> None:
        self.coordinator.on_complete_join(self.group, self)


class InitialDelayedJoin(DelayedJoin):
    """Waits out the initial delay whatever the members do (try_complete is
    False); at expiry either waits once more (new members came, time remains)
    or completes the join as a DelayedJoin would."""

    def __init__(
        self,
        coordinator: GroupCoordinator,
        group: GroupMetadata,
        delay_ms: int,
        remaining_ms: int,
    ) -> None:
        super().__init__(coordinator, group, delay_ms)
        self.initial_delay_ms = delay_ms
        self.remaining_ms = remaining_ms

    def try_complete(self) -> bool:
        return False

    def on_complete(self) -> None:
        self.coordinator.on_initial_join_delay_done(self.group, self)
