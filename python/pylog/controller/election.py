"""The leader elections of Kafka's controller (its ``Election`` and
``PartitionLeaderElectionAlgorithms``): one strategy per reason to move a
partition's leadership, each a pure function of the partition's assignment,
its ISR and which brokers are alive.

- OfflinePartition: the leader is gone. The first replica in assignment
  order that is alive and in the ISR; with unclean election allowed and no
  such replica, the first live one (its ISR becomes just itself, KIP-704's
  recovering state). The ISR keeps its live members.
- ReassignPartition: the leader is not among the target replicas of a
  reassignment. The first target replica alive and in the ISR; ISR unchanged.
- PreferredReplica: the preferred (first) replica, if it is alive and in the
  ISR; ISR unchanged.
- ControlledShutdown: the leader is stopping. The first replica alive, in the
  ISR and not itself stopping; the stopping brokers leave the ISR.

"Alive" excludes brokers in controlled shutdown, except where a strategy says
otherwise."""

from __future__ import annotations

import enum
from collections.abc import Sequence, Set

from pylog.metadata.zk_data import LeaderAndIsr

__all__ = [
    "LeaderElectionStrategy",
    "controlled_shutdown_partition_leader",
    "elect",
    "offline_partition_leader",
    "preferred_replica_partition_leader",
    "reassign_partition_leader",
]


class LeaderElectionStrategy(enum.Enum):
    """Kafka's PartitionLeaderElectionStrategy cases."""

    OfflinePartition = "offline"
    ReassignPartition = "reassign"
    PreferredReplica = "preferred"
    ControlledShutdown = "controlled shutdown"


def offline_partition_leader(
    assignment: Sequence[int], isr: Sequence[int], live: Set[int], unclean: bool
) -> tuple[int | None, bool]:
    """(leader, unclean?) for a partition whose leader is gone: the first
    replica in assignment order that is alive and in the ISR; failing that,
    with unclean election allowed, the first live replica; else None."""
    for r in assignment:
        if r in live and r in isr:
            return r, False
    if unclean:
        for r in assignment:
            if r in live:
                return r, True
    return None, False


def reassign_partition_leader(
    target: Sequence[int], isr: Sequence[int], live: Set[int]
) -> int | None:
    return next((r for r in target if r in live and r in isr), None)


def preferred_replica_partition_leader(
    assignment: Sequence[int], isr: Sequence[int], live: Set[int]
) -> int | None:
    if assignment and assignment[0] in live and assignment[0] in isr:
        return assignment[0]
    return None


def controlled_shutdown_partition_leader(
    assignment: Sequence[int], isr: Sequence[int], live: Set[int], shutting_down: Set[int]
) -> int | None:
    return next((r for r in assignment if r in live and r in isr and r not in shutting_down), None)


def elect(
    strategy: LeaderElectionStrategy,
    current: LeaderAndIsr,
    assignment: Sequence[int],
    *,
    live: Set[int],
    shutting_down: Set[int],
    controller_epoch: int,
    allow_unclean: bool = False,
    target: Sequence[int] | None = None,
) -> tuple[LeaderAndIsr | None, bool]:
    """The partition's next state under ``strategy`` (leader epoch + 1, this
    controller's epoch) and whether the election was unclean; (None, False)
    when no replica is eligible. ``live`` excludes the brokers in controlled
    shutdown; ``target`` is a reassignment's target replicas."""
    isr = list(current.isr)
    unclean = False
    recovery = current.leader_recovery_state
    if strategy is LeaderElectionStrategy.OfflinePartition:
        leader, unclean = offline_partition_leader(assignment, isr, live, allow_unclean)
        isr = [leader] if unclean and leader is not None else [r for r in isr if r in live]
        recovery = 1 if unclean else 0
    elif strategy is LeaderElectionStrategy.ReassignPartition:
        leader = reassign_partition_leader(target if target is not None else assignment, isr, live)
    elif strategy is LeaderElectionStrategy.PreferredReplica:
        leader = preferred_replica_partition_leader(assignment, isr, live)
    else:
        leader = controlled_shutdown_partition_leader(assignment, isr, live, shutting_down)
        isr = [r for r in isr if r not in shutting_down]
    if leader is None:
        return None, False
    new = LeaderAndIsr(
        leader=leader,
        leader_epoch=current.leader_epoch + 1,
        isr=isr,
        controller_epoch=controller_epoch,
        leader_recovery_state=recovery,
    )
    return new, unclean
