"""The controller's leader election strategies (Kafka's Election /
PartitionLeaderElectionAlgorithms), as pure functions."""

from __future__ import annotations

from pylog.controller.election import (
    LeaderElectionStrategy,
    controlled_shutdown_partition_leader,
    elect,
    preferred_replica_partition_leader,
    reassign_partition_leader,
)
from pylog.metadata.zk_data import LeaderAndIsr

S = LeaderElectionStrategy


def test_preferred_replica_only_when_alive_and_in_sync() -> None:
    assert preferred_replica_partition_leader([2, 1, 3], [1, 2, 3], {1, 2, 3}) == 2
    assert preferred_replica_partition_leader([2, 1, 3], [1, 3], {1, 2, 3}) is None  # not in ISR
    assert preferred_replica_partition_leader([2, 1, 3], [1, 2, 3], {1, 3}) is None  # not alive
    assert preferred_replica_partition_leader([], [1], {1}) is None


def test_controlled_shutdown_skips_the_stopping_brokers() -> None:
    assert controlled_shutdown_partition_leader([1, 2, 3], [1, 2, 3], {1, 2, 3}, {1}) == 2
    assert controlled_shutdown_partition_leader([1, 2, 3], [1, 3], {1, 2, 3}, {1}) == 3
    assert controlled_shutdown_partition_leader([1, 2], [1], {1, 2}, {1}) is None


def test_reassign_takes_the_first_live_in_sync_target() -> None:
    assert reassign_partition_leader([4, 5, 1], [1, 5], {1, 4, 5}) == 5
    assert reassign_partition_leader([4, 5], [1], {1, 4, 5}) is None


def test_elect_builds_the_next_state() -> None:
    cur = LeaderAndIsr(leader=1, leader_epoch=4, isr=[1, 2, 3], controller_epoch=2, zk_version=7)
    new, unclean = elect(
        S.ControlledShutdown, cur, [1, 2, 3], live={2, 3}, shutting_down={1}, controller_epoch=5
    )
    assert new is not None and not unclean
    assert (new.leader, new.leader_epoch, new.isr, new.controller_epoch) == (2, 5, [2, 3], 5)
    # preferred: the ISR stays as it is
    cur = LeaderAndIsr(leader=2, leader_epoch=4, isr=[2, 3, 1], controller_epoch=2)
    new, _ = elect(S.PreferredReplica, cur, [1, 2, 3], live={1, 2, 3}, shutting_down=set(),
                   controller_epoch=5)  # fmt: skip
    assert new is not None and (new.leader, new.isr) == (1, [2, 3, 1])
    # offline, unclean: the ISR is the new leader alone, recovering (KIP-704)
    cur = LeaderAndIsr(leader=1, leader_epoch=4, isr=[1], controller_epoch=2)
    new, unclean = elect(S.OfflinePartition, cur, [1, 2, 3], live={3}, shutting_down=set(),
                         controller_epoch=5, allow_unclean=True)  # fmt: skip
    assert new is not None and unclean
    assert (new.leader, new.isr, new.leader_recovery_state) == (3, [3], 1)
    new, _ = elect(S.OfflinePartition, cur, [1, 2, 3], live={3}, shutting_down=set(),
                   controller_epoch=5)  # fmt: skip
    assert new is None
