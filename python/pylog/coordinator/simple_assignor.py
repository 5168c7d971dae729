"""Kafka's ``SimpleAssignor`` for share groups (KIP-932; the only share-group
assignor, ``group.share.assignors=simple``).

Per topic, over the members subscribed to it (sorted by member id):

* no more members than partitions: each partition goes to one member,
  round-robin, so every partition is consumed;
* more members than partitions: every member gets one partition,
  round-robin over the partitions, so a partition is shared by several
  members. A topic of ONE partition is shared by every subscribed member —
  the point of a queue: consumers scale past the partition count.

Kafka's builders also keep a member's previous partitions where they can
(stickiness); moving a partition costs a share group nothing (records in
flight stay with the partition, not the member), so this one does not.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["SimpleAssignor"]


class SimpleAssignor:
    name = "simple"

    def assign(
        self,
        subscriptions: Mapping[str, frozenset[str]],
        partitions: Mapping[str, int],
    ) -> dict[str, dict[str, frozenset[int]]]:
        """``subscriptions``: member id -> subscribed topic ids; ``partitions``:
        topic id -> partition count. Returns member id -> topic id -> partitions."""
        out: dict[str, dict[str, set[int]]] = {m: {} for m in subscriptions}
        for topic_id in sorted(partitions):
            count = partitions[topic_id]
            members = sorted(m for m, ts in subscriptions.items() if topic_id in ts)
            if not members or count <= 0:
                continue
            if len(members) <= count:
                for p in range(count):
                    out[members[p % len(members)]].setdefault(topic_id, set()).add(p)
            else:
                for i, m in enumerate(members):
                    out[m].setdefault(topic_id, set()).add(i % count)
        return {m: {t: frozenset(ps) for t, ps in a.items()} for m, a in out.items()}
