"""BrokerState: where a broker is in its lifecycle (Kafka's ``BrokerState``,
``org.apache.kafka.metadata.BrokerState``; ZooKeeper-era Kafka kept the same
values in ``kafka.server.BrokerStates``), with the numbers Kafka's
``kafka.server:type=KafkaServer,name=BrokerState`` gauge reports, and the
transitions KafkaServer may make:

    NotRunning → Starting → [RecoveringFromUncleanShutdown →] RunningAsBroker
    RunningAsBroker ⇄ RunningAsController   (while it holds the controller's office)
    RunningAs… → PendingControlledShutdown → BrokerShuttingDown → NotRunning

A failed start-up goes from Starting (or recovery) straight to
BrokerShuttingDown.
"""

from __future__ import annotations

import enum

__all__ = ["BrokerState", "IllegalBrokerStateTransition"]


class IllegalBrokerStateTransition(RuntimeError):
    """A transition the lifecycle above does not have (a bug in the caller)."""


class BrokerState(enum.IntEnum):
    """Kafka's broker states, with the values Kafka's BrokerState metric reports."""

    NotRunning = 0
    Starting = 1
    RecoveringFromUncleanShutdown = 2
    RunningAsBroker = 3
    RunningAsController = 4
    PendingControlledShutdown = 6
    BrokerShuttingDown = 7

    def can_transition_to(self, new: BrokerState) -> bool:
        return new in _LEGAL[self]

    def check_transition(self, new: BrokerState) -> None:
        """Raise :class:`IllegalBrokerStateTransition` unless ``self → new`` is legal."""
        if not self.can_transition_to(new):
            raise IllegalBrokerStateTransition(f"{self.name} -> {new.name}")


_LEGAL: dict[BrokerState, frozenset[BrokerState]] = {
    BrokerState.NotRunning: frozenset({BrokerState.Starting}),
    BrokerState.Starting: frozenset(
        {
            BrokerState.RecoveringFromUncleanShutdown,
            BrokerState.RunningAsBroker,
            BrokerState.BrokerShuttingDown,  # start-up failed
        }
    ),
    BrokerState.RecoveringFromUncleanShutdown: frozenset(
        {BrokerState.RunningAsBroker, BrokerState.BrokerShuttingDown}
    ),
    BrokerState.RunningAsBroker: frozenset(
        {
            BrokerState.RunningAsController,
            BrokerState.PendingControlledShutdown,
            BrokerState.BrokerShuttingDown,
        }
    ),
    BrokerState.RunningAsController: frozenset(
        {
            BrokerState.RunningAsBroker,
            BrokerState.PendingControlledShutdown,
            BrokerState.BrokerShuttingDown,
        }
    ),
    BrokerState.PendingControlledShutdown: frozenset({BrokerState.BrokerShuttingDown}),
    BrokerState.BrokerShuttingDown: frozenset({BrokerState.NotRunning}),
}
