"""TargetAssignmentBuilder: the group's target assignment for a new group
epoch (Kafka's ``TargetAssignmentBuilder``, KIP-848).

Runs the group's assignor over its members (one updated or removed by the
heartbeat in progress) and the subscribed topics as the metadata has them
now, and says which members' targets changed: only those get a
ConsumerGroupTargetAssignmentMember record, then one
ConsumerGroupTargetAssignmentMetadata record sets the assignment epoch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pylog.coordinator.consumer_group_member import Assignment, ConsumerGroupMember
from pylog.coordinator.partition_assignor import AssignmentMember, PartitionAssignor, TopicInfo

__all__ = ["TargetAssignmentBuilder", "TargetAssignmentResult"]


@dataclass
class TargetAssignmentResult:
    #: member id -> its target (every member of the group)
    targets: dict[str, Assignment]
    #: members whose target differs from the one before
    changed: list[str]


class TargetAssignmentBuilder:
    def __init__(
        self,
        assignor: PartitionAssignor,
        members: Mapping[str, ConsumerGroupMember],
        current_targets: Mapping[str, Assignment],
        topics: Mapping[str, TopicInfo],
        subscriptions: Mapping[str, frozenset[str]],
    ) -> None:
        """``topics``: topic id -> info of every subscribed topic that exists;
        ``subscriptions``: member id -> the topic ids it subscribes to."""
        self.assignor = assignor
        self.members = members
        self.current = current_targets
        self.topics = topics
        self.subscriptions = subscriptions

    def build(self) -> TargetAssignmentResult:
        specs = [
            AssignmentMember(
                m.member_id,
                m.instance_id,
                m.rack_id,
                self.subscriptions.get(mid, frozenset()),
                self.current.get(mid, {}),
            )
            for mid, m in sorted(self.members.items())
        ]
        new = self.assignor.assign(specs, self.topics)
        targets: dict[str, Assignment] = {mid: new.get(mid, {}) for mid in self.members}
        changed = [mid for mid, t in targets.items() if dict(t) != dict(self.current.get(mid, {}))]
        return TargetAssignmentResult(targets, sorted(changed))
