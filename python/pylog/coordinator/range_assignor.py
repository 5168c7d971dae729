"""RangeAssignor: the server-side ``range`` assignor (Kafka's RangeAssignor
of the group coordinator).

Per topic, the members subscribed to it, in a fixed order, get consecutive
ranges of its partitions: ``partitions // members`` each, the first
``partitions % members`` one more. Members are ordered by instance id when
they have one (so a static member keeps its range across restarts), then by
member id; topics with the same partition count and subscribers are thus
co-partitioned — partition i of each goes to the same member, which is what
joins of co-partitioned topics need. Kafka's assignor also keeps ranges
sticky when members come and go; this one recomputes them.
"""

from __future__ import annotations

from collections.abc import Mapping

from pylog.coordinator.partition_assignor import AssignmentMember, PartitionAssignor, TopicInfo

__all__ = ["RangeAssignor"]


class RangeAssignor(PartitionAssignor):
    name = "range"

    def assign(
        self, members: list[AssignmentMember], topics: Mapping[str, TopicInfo]
    ) -> dict[str, dict[str, frozenset[int]]]:
        out: dict[str, dict[str, frozenset[int]]] = {m.member_id: {} for m in members}
        ordered = sorted(
            members, key=lambda m: (m.instance_id is None, m.instance_id or "", m.member_id)
        )
        for tid, info in sorted(topics.items()):
            subs = [m.member_id for m in ordered if tid in m.subscribed]
            if not subs:
                continue
            each, extra = divmod(info.partitions, len(subs))
            start = 0
            for i, mid in enumerate(subs):
                n = each + (1 if i < extra else 0)
                if n:
                    out[mid][tid] = frozenset(range(start, start + n))
                start += n
        return out
