"""The server-side assignors' interface (Kafka's ``ConsumerGroupPartitionAssignor``,
KIP-848): what a member asks for and what the group already has in, a target
assignment out. ``group.consumer.assignors`` names the ones a broker offers;
a member picks one with ``group.remote.assignor`` (the heartbeat's
``ServerAssignor``), the group uses the one most of its members ask for.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["AssignmentMember", "PartitionAssignor", "TopicInfo"]


@dataclass(frozen=True)
class TopicInfo:
    topic_id: str
    name: str
    partitions: int


@dataclass(frozen=True)
class AssignmentMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    #: topic ids the member subscribes to (existing topics only)
    subscribed: frozenset[str]
    #: its current target assignment, for stickiness
    current: Mapping[str, frozenset[int]]


class PartitionAssignor(abc.ABC):
    #: the name members ask for (``uniform``, ``range``)
    name: str

    @abc.abstractmethod
    def assign(
        self, members: list[AssignmentMember], topics: Mapping[str, TopicInfo]
    ) -> dict[str, dict[str, frozenset[int]]]:
        """member id -> topic id -> partitions: every partition of a
        subscribed topic to exactly one member subscribed to it."""
