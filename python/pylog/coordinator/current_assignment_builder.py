"""CurrentAssignmentBuilder: one member's reconciliation towards its target
assignment (Kafka's ``CurrentAssignmentBuilder``, KIP-848).

The rule that keeps a partition with one consumer at a time: a member gives
up what it must revoke *first* (UNREVOKED_PARTITIONS, its epoch unchanged),
and only then moves to the group's assignment epoch; a partition still held
by another member (assigned or pending revocation there) is not handed out
until that member has released it (UNRELEASED_PARTITIONS). A member reports
what it owns in each full heartbeat; ``owned`` None means "unchanged", which
is read as "still owns what it had to revoke".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from pylog.coordinator.consumer_group_member import (
    Assignment,
    ConsumerGroupMember,
    MemberState,
)

__all__ = ["CurrentAssignmentBuilder"]

#: (topic id, partition) -> the epoch of the member holding it, -1 when free
PartitionEpoch = Callable[[str, int], int]


class CurrentAssignmentBuilder:
    def __init__(
        self,
        member: ConsumerGroupMember,
        target_epoch: int,
        target: Assignment,
        subscribed_topic_ids: Iterable[str],
        partition_epoch: PartitionEpoch,
        owned: Assignment | None,
    ) -> None:
        self.member = member
        self.target_epoch = target_epoch
        self.target = target
        self.subscribed = frozenset(subscribed_topic_ids)
        self.partition_epoch = partition_epoch
        self.owned = owned

    def build(self) -> ConsumerGroupMember:
        m = self.member
        if m.state is MemberState.STABLE:
            if m.member_epoch != self.target_epoch:
                return self._next(m.member_epoch)
            return m
        if m.state is MemberState.UNREVOKED_PARTITIONS:
            if self._owns_any(m.pending_revocation):
                return m
            return self._next(m.member_epoch)
        if m.state is MemberState.UNRELEASED_PARTITIONS:
            return self._next(m.member_epoch)
        # UNKNOWN (a newer coordinator's state): start over from the target.
        return self._next(self.target_epoch)

    def _owns_any(self, pending: Assignment) -> bool:
        if self.owned is None:
            return True
        return any(pending.get(t, frozenset()) & ps for t, ps in self.owned.items())

    def _next(self, member_epoch: int) -> ConsumerGroupMember:
        m = self.member
        keep: dict[str, frozenset[int]] = {}
        revoke: dict[str, frozenset[int]] = {}
        add: dict[str, frozenset[int]] = {}
        unreleased = False
        for topic in set(self.target) | set(m.assigned):
            target = (
                self.target.get(topic, frozenset()) if topic in self.subscribed else frozenset()
            )
            current = m.assigned.get(topic, frozenset())
            k = current & target
            r = current - k
            mine = m.pending_revocation.get(topic, frozenset())
            wanted = target - k
            free = frozenset(p for p in wanted if p in mine or self.partition_epoch(topic, p) == -1)
            if free != wanted:
                unreleased = True
            if k:
                keep[topic] = k
            if r:
                revoke[topic] = r
            if free:
                add[topic] = free
        if revoke and self._owns_any(revoke):
            return m.replace(
                state=MemberState.UNREVOKED_PARTITIONS,
                **_epochs(m, member_epoch),
                assigned=keep,
                pending_revocation=revoke,
            )
        for topic, ps in add.items():
            keep[topic] = keep.get(topic, frozenset()) | ps
        return m.replace(
            state=MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE,
            **_epochs(m, self.target_epoch),
            assigned=keep,
            pending_revocation={},
        )


def _epochs(m: ConsumerGroupMember, epoch: int) -> dict[str, int]:
    if epoch == m.member_epoch:
        return {}
    return {"member_epoch": epoch, "previous_member_epoch": m.member_epoch}
