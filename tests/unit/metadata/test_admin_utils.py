"""Kafka's replica assignment (AdminUtils.assignReplicasToBrokers)."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from pylog.errors import InvalidReplicationFactorError
from pylog.metadata.admin_utils import assign_replicas_to_brokers


def test_rack_unaware_matches_kafkas_documented_layout() -> None:
    # Kafka's doc example: 5 brokers, 10 partitions, RF 3, start index 0.
    got = assign_replicas_to_brokers([0, 1, 2, 3, 4], 10, 3, fixed_start_index=0)
    assert got[0] == [0, 1, 2] and got[4] == [4, 0, 1]
    assert got[5] == [0, 2, 3] and got[9] == [4, 1, 2]  # the shift grows after n partitions


def test_random_start_spreads_leaders_and_replicas_evenly() -> None:
    got = assign_replicas_to_brokers([1, 2, 3], 30, 3, rng=random.Random(7))
    assert all(sorted(r) == [1, 2, 3] for r in got.values())
    assert Counter(r[0] for r in got.values()) == {1: 10, 2: 10, 3: 10}


def test_rack_aware_puts_each_replica_on_another_rack() -> None:
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    got = assign_replicas_to_brokers(racks, 12, 3, rng=random.Random(1))
    for replicas in got.values():
        assert len({racks[b] for b in replicas}) == 3
        assert len(set(replicas)) == 3


def test_added_partitions_continue_the_numbering() -> None:
    got = assign_replicas_to_brokers([1, 2, 3], 2, 2, start_partition_id=3, fixed_start_index=0)
    assert sorted(got) == [3, 4]


def test_refusals() -> None:
    with pytest.raises(InvalidReplicationFactorError, match="larger than available brokers"):
        assign_replicas_to_brokers([1, 2], 1, 3)
    with pytest.raises(InvalidReplicationFactorError, match="rack"):
        assign_replicas_to_brokers({1: "a", 2: None}, 1, 2)
