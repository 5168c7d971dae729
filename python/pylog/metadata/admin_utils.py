"""Replica assignment for new topics and partitions, by Kafka's algorithm
(AdminUtils.assignReplicasToBrokers).

Without racks: the brokers sorted by id; partition p's first replica is the
broker at (p + start) mod n, and each further replica is offset from it by a
shift that grows by one every n partitions, so leaders and followers both
spread evenly. ``start`` and the initial shift are random (fixed when
``fixed_start_index`` is given). With a rack for every broker: the brokers
are listed alternating racks, the same walk is made over that list, and a
follower is taken only from a rack (and a broker) the partition does not have
yet, until every rack has one."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from pylog.errors import InvalidReplicationFactorError

__all__ = ["assign_replicas_to_brokers"]


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    step = 1 + (shift + j) % (n - 1)
    return (first + step) % n


def assign_replicas_to_brokers(
    brokers: Sequence[int] | Mapping[int, str | None],
    num_partitions: int,
    replication_factor: int,
    *,
    fixed_start_index: int = -1,
    start_partition_id: int = 0,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """partition → replicas for partitions ``start_partition_id`` onward.
    ``brokers``: ids, or id → rack (rack-aware when every broker has one; a
    mix of racks and none is refused, as Kafka does)."""
    racks: dict[int, str | None] = (
        dict(brokers) if isinstance(brokers, Mapping) else {b: None for b in brokers}
    )
    ids = sorted(racks)
    if num_partitions <= 0:
        raise ValueError("number of partitions must be larger than 0")
    if replication_factor <= 0:
        raise InvalidReplicationFactorError("replication factor must be larger than 0")
    if replication_factor > len(ids):
        raise InvalidReplicationFactorError(
            f"replication factor: {replication_factor} larger than available brokers: {len(ids)}"
        )
    rnd = rng or random.Random()
    with_rack = [b for b in ids if racks[b] is not None]
    if not with_rack:
        return _assign_unaware(ids, num_partitions, replication_factor,
                               fixed_start_index, start_partition_id, rnd)  # fmt: skip
    if len(with_rack) != len(ids):
        raise InvalidReplicationFactorError(
            "not all brokers have rack information (broker.rack) for replica assignment"
        )
    return _assign_aware({b: str(racks[b]) for b in ids}, num_partitions, replication_factor,
                         fixed_start_index, start_partition_id, rnd)  # fmt: skip


def _assign_unaware(
    ids: list[int], partitions: int, rf: int, fixed: int, start_pid: int, rnd: random.Random
) -> dict[int, list[int]]:
    n = len(ids)
    out: dict[int, list[int]] = {}
    start = fixed if fixed >= 0 else rnd.randrange(n)
    shift = fixed if fixed >= 0 else rnd.randrange(n)
    pid = max(0, start_pid)
    for _ in range(partitions):
        if pid > 0 and pid % n == 0:
            shift += 1
        first = (pid + start) % n
        replicas = [ids[first]]
        replicas += [ids[_replica_index(first, shift, j, n)] for j in range(rf - 1)]
        out[pid] = replicas
        pid += 1
    return out


def _rack_alternated(racks: Mapping[int, str]) -> list[int]:
    by_rack: dict[str, list[int]] = {}
    for b in sorted(racks):
        by_rack.setdefault(racks[b], []).append(b)
    ordered = [by_rack[r] for r in sorted(by_rack)]
    out: list[int] = []
    for i in range(max(len(x) for x in ordered)):
        out += [x[i] for x in ordered if i < len(x)]
    return out


def _assign_aware(
    racks: Mapping[int, str], partitions: int, rf: int, fixed: int, start_pid: int,
    rnd: random.Random,
) -> dict[int, list[int]]:  # fmt: skip
    arranged = _rack_alternated(racks)
    n = len(arranged)
    num_racks = len(set(racks.values()))
    out: dict[int, list[int]] = {}
    start = fixed if fixed >= 0 else rnd.randrange(n)
    shift = fixed if fixed >= 0 else rnd.randrange(n)
    pid = max(0, start_pid)
    for _ in range(partitions):
        if pid > 0 and pid % n == 0:
            shift += 1
        first = (pid + start) % n
        leader = arranged[first]
        replicas = [leader]
        used_racks = {racks[leader]}
        used = {leader}
        k = 0
        while len(replicas) < rf:
            b = arranged[_replica_index(first, shift * num_racks, k, n)]
            k += 1
            if (racks[b] not in used_racks or len(used_racks) == num_racks) and (
                b not in used or len(used) == n
            ):
                replicas.append(b)
                used_racks.add(racks[b])
                used.add(b)
        out[pid] = replicas
        pid += 1
    return out
