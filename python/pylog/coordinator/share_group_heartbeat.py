"""ShareGroupHeartbeat: KIP-932's membership protocol, the part of Kafka's
GroupMetadataManager behind ``shareGroupHeartbeat`` (the Java
KafkaShareConsumer's heartbeats).

One heartbeat, in Kafka's order: the request is checked (INVALID_REQUEST:
no group id, no member id — the client makes its own since KIP-1082 — an
epoch below -1, or a first heartbeat without topics); a group of another
type under the id is GROUP_ID_NOT_FOUND; a joining member (epoch 0) is
added (GROUP_MAX_SIZE_REACHED past ``group.share.max.size``), a known one
must send its epoch (UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH); epoch -1
leaves. A new member, a changed subscription or changed partitions of the
subscribed topics bump the group epoch and recompute the target assignment
with the SimpleAssignor. With no revocation in a share group a member takes
its target at its next heartbeat, at the new epoch (its previous epoch is
still accepted, as Kafka does for an answer lost on the way), and the answer
carries the assignment whenever it or the epoch changed.

Every change is written to ``__consumer_offsets`` as Kafka's ShareGroup*
records before it is answered (``share_group_records.py``); when the write
fails the group is put back as it was and the heartbeat gets the append's
error, so a coordinator taking over the partition finds what the members
were told. A member not heard from for ``group.share.session.timeout.ms`` is
removed (the group's epoch is bumped, the others get its partitions). Partitions
first assigned to the group are initialized through ``on_assigned`` (Kafka's
InitializeShareGroupState, which fixes the start offset by
``share.auto.offset.reset``); a member that leaves or is removed is told to
``on_member_left`` (Kafka's ShareGroupListener), which releases the records
it still holds.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from pylog.common.utils.time import Clock
from pylog.coordinator.group import GroupMetadata, GroupState
from pylog.coordinator.group_metadata_manager import CoordinatorError, GroupMetadataManager
from pylog.coordinator.share_group import ShareAssignment, ShareGroup, ShareGroupMember
from pylog.coordinator.share_group_records import (
    Record,
    current_assignment_record,
    group_epoch_record,
    member_metadata_record,
    member_tombstones,
    state_partition_record,
    target_epoch_record,
    target_member_record,
)
from pylog.coordinator.simple_assignor import SimpleAssignor
from pylog.errors import ErrorCode
from pylog.logsafe import quoted
from pylog.metadata.store import MetadataStore
from pylog.server.config import KafkaConfig

__all__ = ["ShareGroupHeartbeat", "ShareHeartbeatResult"]

_log = logging.getLogger("pylog.coordinator.share_group_heartbeat")

LEAVE_GROUP_MEMBER_EPOCH = -1


@dataclass(slots=True)
class ShareHeartbeatResult:
    error_code: int = ErrorCode.NONE
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: ShareAssignment | None = None


class _Refused(Exception):
    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(code, message)
        self.code = code
        self.message = message


@dataclass
class _Before:
    """A share group as it was before a change: what the change's records
    are the difference from, and what a failed write puts back."""

    group_epoch: int
    assignment_epoch: int
    targets: dict[str, ShareAssignment]
    initialized: set[tuple[str, int]]
    initialized_names: dict[str, str]
    topic_snapshot: dict[str, tuple[str, int]]
    members: dict[str, ShareGroupMember]

    @classmethod
    def of(cls, group: ShareGroup) -> _Before:
        return cls(
            group.group_epoch,
            group.assignment_epoch,
            dict(group.targets),
            set(group.initialized),
            dict(group.initialized_names),
            dict(group.topic_snapshot),
            {mid: dataclasses.replace(m) for mid, m in group.share_members.items()},
        )


def _metadata(m: ShareGroupMember) -> tuple[object, ...]:
    return m.rack_id, m.client_id, m.client_host, m.subscribed_topic_names


def _records(group: ShareGroup, before: _Before) -> list[Record]:
    """The ShareGroup* records that take the log from ``before`` to the
    group as it is, in Kafka's order: members gone, members' metadata, the
    group epoch, targets and their epoch, current assignments, then the
    initialized share partitions."""
    gid = group.group_id
    out: list[Record] = []
    for mid in sorted(before.members.keys() - group.share_members.keys()):
        out += member_tombstones(gid, mid)
    for mid, m in group.share_members.items():
        old = before.members.get(mid)
        if old is None or _metadata(old) != _metadata(m):
            out.append(member_metadata_record(gid, m))
    if group.group_epoch != before.group_epoch:
        out.append(group_epoch_record(gid, group.group_epoch))
    targets_changed = group.assignment_epoch != before.assignment_epoch
    for mid in group.share_members:
        target = group.targets.get(mid, {})
        if mid not in before.members or before.targets.get(mid, {}) != target:
            out.append(target_member_record(gid, mid, target))
            targets_changed = True
    if targets_changed:
        out.append(target_epoch_record(gid, group.assignment_epoch))
    for mid, m in group.share_members.items():
        old = before.members.get(mid)
        if old is None or (old.member_epoch, old.previous_epoch, old.assignment) != (
            m.member_epoch,
            m.previous_epoch,
            m.assignment,
        ):
            out.append(current_assignment_record(gid, m))
    if group.initialized != before.initialized:
        topics: dict[str, tuple[str, set[int]]] = {}
        for tid, p in group.initialized:
            name = group.initialized_names.get(tid, "")
            topics.setdefault(tid, (name, set()))[1].add(p)
        out.append(state_partition_record(gid, topics))
    return out


#: (group id, [(topic id, topic name, partition)]) of partitions newly assigned
InitializeHook = Callable[[str, list[tuple[str, str, int]]], None]
#: (group id, member id) of a member gone
MemberLeftHook = Callable[[str, str], None]


class ShareGroupHeartbeat:
    def __init__(
        self,
        config: KafkaConfig,
        manager: GroupMetadataManager,
        metadata_store: MetadataStore,
        clock: Clock,
    ) -> None:
        self.manager = manager
        self.metadata_store = metadata_store
        self.clock = clock
        self.session_timeout_ms = int(config.get("group.share.session.timeout.ms"))
        self.heartbeat_interval_ms = int(config.get("group.share.heartbeat.interval.ms"))
        #: A group's overrides (GroupConfig: share.session.timeout.ms,
        #: share.heartbeat.interval.ms); none by default.
        self.group_config: Callable[[str], Mapping[str, str]] = lambda group_id: {}
        self.max_size = int(config.get("group.share.max.size"))
        self.assignor = SimpleAssignor()
        self.on_assigned: InitializeHook = lambda group_id, tps: None
        self.on_member_left: MemberLeftHook = lambda group_id, member_id: None
        self.running = True
        self._expiring: set[asyncio.Task[None]] = set()

    def on_loaded(self, group: ShareGroup) -> None:
        """A share group read from the log by a new coordinator: its members
        get sessions from now (those alive heartbeat on at their epochs, the
        others expire)."""
        for m in group.share_members.values():
            self._schedule_session(group, m)

    def shutdown(self) -> None:
        self.running = False
        for t in self._expiring:
            t.cancel()
        for group in list(self.manager.all_groups()):
            if isinstance(group, ShareGroup):
                for m in group.share_members.values():
                    if m.session is not None:
                        m.session.cancel()

    # ------------------------------------------------------------ heartbeat

    async def heartbeat(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        rack_id: str | None,
        subscribed_topic_names: list[str] | None,
        client_id: str,
        client_host: str,
    ) -> ShareHeartbeatResult:
        try:
            if not group_id:
                raise _Refused(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
            if not member_id:
                # Kafka 4.3 answers this one without a message
                raise _Refused(ErrorCode.INVALID_REQUEST)
            if member_epoch < LEAVE_GROUP_MEMBER_EPOCH:
                raise _Refused(ErrorCode.INVALID_REQUEST, "MemberEpoch is invalid.")
            if member_epoch == 0 and not subscribed_topic_names:
                raise _Refused(
                    ErrorCode.INVALID_REQUEST, "SubscribedTopicNames must be set in first request."
                )
            if not self.running:
                raise _Refused(ErrorCode.COORDINATOR_NOT_AVAILABLE)
            try:
                found = self.manager.get_group(group_id)
            except CoordinatorError as e:
                raise _Refused(e.code) from None
            if member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
                if not isinstance(found, ShareGroup) or found.is_in(GroupState.DEAD):
                    raise _Refused(
                        ErrorCode.GROUP_ID_NOT_FOUND, f"Share group {group_id} not found."
                    )
                async with found.lock:
                    before = _Before.of(found)
                    result = self._leave(found, member_id)
                    await self._write(found, before, created=False)
                    return result
            group = self._group_for(found, group_id, member_epoch)
            async with group.lock:
                if group.is_in(GroupState.DEAD):
                    raise _Refused(ErrorCode.COORDINATOR_NOT_AVAILABLE)
                before = _Before.of(group)
                result = self._heartbeat(
                    group,
                    member_id,
                    member_epoch,
                    rack_id,
                    subscribed_topic_names,
                    client_id,
                    client_host,
                )
                await self._write(group, before, created=group is not found)
                return result
        except _Refused as e:
            return ShareHeartbeatResult(e.code, e.message)

    async def _write(self, group: ShareGroup, before: _Before, *, created: bool) -> None:
        """Write the change from ``before``; when the write fails put the
        group back (a group this heartbeat made goes) and refuse with the
        append's error."""
        records = _records(group, before)
        if not records:
            return
        code = await self.manager._append(group.group_id, records)
        if code == ErrorCode.NONE:
            return
        self._restore(group, before)
        if created:
            self.manager.remove_group(group)
        raise _Refused(code)

    def _restore(self, group: ShareGroup, before: _Before) -> None:
        for m in group.share_members.values():
            if m.session is not None:
                m.session.cancel()
        group.group_epoch = before.group_epoch
        group.assignment_epoch = before.assignment_epoch
        group.targets = before.targets
        group.initialized = before.initialized
        group.initialized_names = before.initialized_names
        group.topic_snapshot = before.topic_snapshot
        group.share_members = before.members
        for m in group.share_members.values():
            self._schedule_session(group, m)
        group.mirror_state(self.clock())

    def _group_for(
        self, found: GroupMetadata | None, group_id: str, member_epoch: int
    ) -> ShareGroup:
        if isinstance(found, ShareGroup) and not found.is_in(GroupState.DEAD):
            return found
        if found is not None and not found.is_in(GroupState.DEAD):
            raise _Refused(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
        if member_epoch != 0:
            raise _Refused(ErrorCode.GROUP_ID_NOT_FOUND, f"Share group {group_id} not found.")
        group = ShareGroup(group_id, self.clock())
        try:
            shard = self.manager.shard_for(group_id)
        except CoordinatorError as e:
            raise _Refused(e.code) from None
        shard.groups[group_id] = group
        return group

    def _heartbeat(
        self,
        group: ShareGroup,
        member_id: str,
        member_epoch: int,
        rack_id: str | None,
        subscribed: list[str] | None,
        client_id: str,
        client_host: str,
    ) -> ShareHeartbeatResult:
        member = group.share_members.get(member_id)
        changed = False  # what the target assignment depends on
        full = False  # the answer carries the assignment whatever happened
        if member is None:
            if member_epoch != 0:
                raise _Refused(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"Member {member_id} is not a member of group {group.group_id}.",
                )
            if len(group.share_members) >= self.max_size:
                raise _Refused(
                    ErrorCode.GROUP_MAX_SIZE_REACHED,
                    f"The share group has reached its maximum capacity of {self.max_size} members.",
                )
            member = ShareGroupMember(member_id, client_id=client_id, client_host=client_host)
            group.share_members[member_id] = member
            group.mirror_state(self.clock())
            changed = full = True
            _log.info("share group %s: member %s joined", quoted(group.group_id), member_id)
        elif member_epoch == 0:
            full = True  # a member joining again under its id
        elif member_epoch > member.member_epoch:
            raise _Refused(
                ErrorCode.FENCED_MEMBER_EPOCH,
                f"The share group member has a greater member epoch ({member_epoch}) than the "
                f"one known by the group coordinator ({member.member_epoch}). The member must "
                "abandon all its partitions and rejoin.",
            )
        elif member_epoch < member.member_epoch and member_epoch != member.previous_epoch:
            raise _Refused(
                ErrorCode.FENCED_MEMBER_EPOCH,
                f"The share group member has a smaller member epoch ({member_epoch}) than the "
                f"one known by the group coordinator ({member.member_epoch}), and it does not "
                f"match the previous member epoch ({member.previous_epoch}). The member must "
                "abandon all its partitions and rejoin.",
            )
        elif member_epoch != member.member_epoch:
            full = True  # the answer that moved it on was lost: say it again
        member.rack_id = rack_id
        if (
            subscribed is not None
            and tuple(sorted(set(subscribed))) != member.subscribed_topic_names
        ):
            member.subscribed_topic_names = tuple(sorted(set(subscribed)))
            changed = True
        topics = self._topics(group)
        if changed or topics != group.topic_snapshot:
            group.topic_snapshot = topics
            group.group_epoch += 1
            self._assign(group)
        # No revocation in a share group: the member takes its target now.
        target = group.targets.get(member_id, {})
        if member.member_epoch != group.assignment_epoch or member.assignment != target:
            member.previous_epoch = member.member_epoch
            member.member_epoch = group.assignment_epoch
            member.assignment = target
            full = True
        self._schedule_session(group, member)
        return ShareHeartbeatResult(
            member_id=member.member_id,
            member_epoch=member.member_epoch,
            heartbeat_interval_ms=int(
                self.group_config(group.group_id).get(
                    "share.heartbeat.interval.ms", self.heartbeat_interval_ms
                )
            ),
            assignment=dict(member.assignment) if full else None,
        )

    def _topics(self, group: ShareGroup) -> dict[str, tuple[str, int]]:
        """topic name -> (topic id, partitions) of the subscribed topics that exist."""
        names = group.subscribed_topic_names()
        out: dict[str, tuple[str, int]] = {}
        for name in sorted(names):
            meta = self.metadata_store.topic(name)
            if meta is not None and not meta.is_internal:
                out[name] = (meta.topic_id, int(meta.partitions))
        return out

    def _assign(self, group: ShareGroup) -> None:
        topics: dict[str, tuple[str, int]] = group.topic_snapshot
        subs = {
            m.member_id: frozenset(topics[n][0] for n in m.subscribed_topic_names if n in topics)
            for m in group.share_members.values()
        }
        counts = {tid: n for tid, n in topics.values()}
        targets = self.assignor.assign(subs, counts)
        group.assignment_epoch = group.group_epoch
        group.targets = targets
        names = {tid: name for name, (tid, _) in topics.items()}
        fresh = [
            (tid, names[tid], p)
            for tid, n in sorted(counts.items())
            for p in range(n)
            if (tid, p) not in group.initialized
            and any(p in a.get(tid, ()) for a in targets.values())
        ]
        if fresh:
            group.initialized.update((tid, p) for tid, _, p in fresh)
            group.initialized_names.update((tid, name) for tid, name, _ in fresh)
            self.on_assigned(group.group_id, fresh)

    # ------------------------------------------------------------ leaving

    def _leave(self, group: ShareGroup, member_id: str) -> ShareHeartbeatResult:
        member = group.share_members.get(member_id)
        if member is None:
            raise _Refused(
                ErrorCode.UNKNOWN_MEMBER_ID,
                f"Member {member_id} is not a member of group {group.group_id}.",
            )
        self._remove(group, member, "left the group")
        return ShareHeartbeatResult(member_id=member_id, member_epoch=LEAVE_GROUP_MEMBER_EPOCH)

    def _remove(self, group: ShareGroup, member: ShareGroupMember, why: str) -> None:
        if member.session is not None:
            member.session.cancel()
        group.share_members.pop(member.member_id, None)
        group.mirror_state(self.clock())
        group.group_epoch += 1
        self._assign(group)
        _log.info("share group %s: member %s %s", quoted(group.group_id), member.member_id, why)
        self.on_member_left(group.group_id, member.member_id)

    def _schedule_session(self, group: ShareGroup, member: ShareGroupMember) -> None:
        if member.session is not None:
            member.session.cancel()
        loop = asyncio.get_running_loop()
        timeout_ms = int(
            self.group_config(group.group_id).get(
                "share.session.timeout.ms", self.session_timeout_ms
            )
        )
        member.session = loop.call_later(timeout_ms / 1000, self._expired, group, member)

    def _expired(self, group: ShareGroup, member: ShareGroupMember) -> None:
        if group.share_members.get(member.member_id) is not member:
            return
        task = asyncio.get_running_loop().create_task(self._expire(group, member))
        self._expiring.add(task)
        task.add_done_callback(self._expiring.discard)

    async def _expire(self, group: ShareGroup, member: ShareGroupMember) -> None:
        async with group.lock:
            if group.share_members.get(member.member_id) is not member or group.is_in(
                GroupState.DEAD
            ):
                return
            before = _Before.of(group)
            self._remove(group, member, "was removed: its session timed out")
            records = _records(group, before)
            code = await self.manager._append(group.group_id, records)
            if code != ErrorCode.NONE:
                # The member is gone here all the same; a coordinator that
                # loads the log finds it and lets its session expire again.
                _log.warning(
                    "share group %s: writing the removal of %s failed (error %d)",
                    quoted(group.group_id),
                    member.member_id,
                    code,
                )
