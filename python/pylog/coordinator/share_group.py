"""ShareGroup: a KIP-932 share group (Kafka's ``ShareGroup`` and
``ShareGroupMember``), the membership side of "queues for Kafka".

A share group has members and an assignment, but no revocation and no
committed offsets: several members may be assigned the same partition, and
which records each member gets is decided per record by the partition
leader's share-partition state (``pylog.server.share``), not by the
assignment. So a member takes its target assignment at once, its epoch
becomes the group's assignment epoch, and Kafka's states are only::

    Empty    no member
    Stable   some member
    Dead     deleted, or its coordinator partition moved away

The membership is written to ``__consumer_offsets`` as Kafka's ShareGroup*
records (``share_group_records.py``), so a coordinator that takes over the
group's partition knows its members and their epochs. The share-partition
state that matters — which records were delivered and acknowledged — is
persisted in ``__share_group_state`` (``share_coordinator.py``).

Like ConsumerGroup it extends GroupMetadata for what every group type shares
(the id, the Dead state, the shard); ``state`` mirrors Empty or Stable so that
the classic and KIP-848 paths refuse a group that has share members.
"""

from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass, field

from pylog.coordinator.group import GroupMetadata, GroupState

__all__ = ["ShareGroup", "ShareGroupMember", "ShareGroupState"]

#: topic id -> partitions
ShareAssignment = dict[str, frozenset[int]]


class ShareGroupState(enum.Enum):
    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(slots=True)
class ShareGroupMember:
    member_id: str
    member_epoch: int = 0
    previous_epoch: int = -1
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    assignment: ShareAssignment = field(default_factory=dict)
    session: asyncio.TimerHandle | None = None


class ShareGroup(GroupMetadata):
    group_type = "share"

    def __init__(self, group_id: str, now_ms: int) -> None:
        super().__init__(group_id, now_ms)
        self.protocol_type = "share"
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.share_members: dict[str, ShareGroupMember] = {}
        self.lock = asyncio.Lock()
        # (topic id, partition) this group was ever assigned: their share
        # partitions were initialized (Kafka's InitializeShareGroupState).
        self.initialized: set[tuple[str, int]] = set()
        # topic id -> name of the topics in ``initialized`` (record 15 names them).
        self.initialized_names: dict[str, str] = {}
        # The subscribed topics as the last assignment saw them: name -> (id, partitions).
        self.topic_snapshot: dict[str, tuple[str, int]] = {}
        # The target assignment at assignment_epoch: member id -> topic id -> partitions.
        self.targets: dict[str, ShareAssignment] = {}

    @property
    def share_state(self) -> ShareGroupState:
        if self.state is GroupState.DEAD:
            return ShareGroupState.DEAD
        return ShareGroupState.STABLE if self.share_members else ShareGroupState.EMPTY

    def mirror_state(self, now_ms: int) -> None:
        if self.state is GroupState.DEAD:
            return
        want = GroupState.STABLE if self.share_members else GroupState.EMPTY
        if self.state is not want:
            self.state = want
            self.state_timestamp = now_ms

    def subscribed_topic_names(self) -> set[str]:
        out: set[str] = set()
        for m in self.share_members.values():
            out.update(m.subscribed_topic_names)
        return out
