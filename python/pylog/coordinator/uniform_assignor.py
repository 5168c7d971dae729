"""UniformAssignor: the default server-side assignor (Kafka's ``uniform``).

Spreads the partitions of the subscribed topics as evenly as it can over the
members subscribed to each, and sticky: a partition stays with the member
whose current target has it as long as that keeps the spread within one.
Steps: keep what is still valid, hand the rest to the least-loaded eligible
member, then move partitions from the most to the least loaded eligible
member while their counts differ by more than one. Kafka's own builders
(homogeneous and heterogeneous) reach the same balance by other routes; the
exact partition a member gets may differ from Kafka's.
"""

from __future__ import annotations

from collections.abc import Mapping

from pylog.coordinator.partition_assignor import AssignmentMember, PartitionAssignor, TopicInfo

__all__ = ["UniformAssignor"]


class UniformAssignor(PartitionAssignor):
    name = "uniform"

    def assign(
        self, members: list[AssignmentMember], topics: Mapping[str, TopicInfo]
    ) -> dict[str, dict[str, frozenset[int]]]:
        owner: dict[tuple[str, int], str] = {}
        load: dict[str, int] = {m.member_id: 0 for m in members}
        by_id = {m.member_id: m for m in members}
        eligible: dict[str, list[str]] = {}
        for tid in sorted(topics):
            eligible[tid] = sorted(m.member_id for m in members if tid in m.subscribed)
        total = sum(topics[t].partitions for t in eligible if eligible[t])
        quota = -(-total // len(members)) if members else 0
        # 1. stickiness: keep the current target's partitions that still fit
        for m in sorted(members, key=lambda m: m.member_id):
            for tid, parts in sorted(m.current.items()):
                info = topics.get(tid)
                if info is None or tid not in m.subscribed:
                    continue
                for p in sorted(parts):
                    if p < info.partitions and (tid, p) not in owner and load[m.member_id] < quota:
                        owner[(tid, p)] = m.member_id
                        load[m.member_id] += 1
        # 2. the rest to the least loaded member subscribed to the topic
        for tid, candidates in eligible.items():
            if not candidates:
                continue
            for p in range(topics[tid].partitions):
                if (tid, p) not in owner:
                    best = min(candidates, key=lambda c: (load[c], c))
                    owner[(tid, p)] = best
                    load[best] += 1
        # 3. balance: a heterogeneous group can leave a member far ahead
        moved = True
        while moved:
            moved = False
            for tp, holder in sorted(owner.items()):
                candidates = eligible[tp[0]]
                lightest = min(candidates, key=lambda c: (load[c], c))
                if load[holder] - load[lightest] > 1:
                    owner[tp] = lightest
                    load[holder] -= 1
                    load[lightest] += 1
                    moved = True
        out: dict[str, dict[str, set[int]]] = {mid: {} for mid in by_id}
        for (tid, p), mid in owner.items():
            out[mid].setdefault(tid, set()).add(p)
        return {mid: {t: frozenset(ps) for t, ps in a.items()} for mid, a in out.items()}
