"""Classic members of a consumer group: JoinGroup, SyncGroup, Heartbeat and
LeaveGroup from members that still speak the classic protocol, served
against a KIP-848 consumer group (Kafka's GroupMetadataManager
``classicGroupJoinToConsumerGroup``, ``classicGroupSyncToConsumerGroup``,
``classicGroupHeartbeatToConsumerGroup`` and
``classicGroupLeaveToConsumerGroup``). Such members come from the online
upgrade of their classic group, or join a consumer group that has members.

The server assigns, as for every member of a consumer group; the classic
rebalance is only how a classic member learns of it:

* JoinGroup updates the member from its subscription (topics, owned
  partitions, rack) — a new member or another subscription bumps the group
  epoch and the target assignment is recomputed — and reconciles it as a
  heartbeat would: it is answered at once, with its member epoch as the
  generation, no leader (it never assigns) and its first protocol;
* SyncGroup hands it its current assignment, serialized in the
  ConsumerProtocolAssignment version its subscription speaks;
* Heartbeat answers REBALANCE_IN_PROGRESS when the member must rejoin: the
  group epoch moved past its epoch, it has partitions to revoke, or the
  partitions it waited for are free now;
* a member told to rejoin that does not within its rebalance timeout, or
  that joined and does not SyncGroup within it, is fenced; its session is
  its JoinGroup's session timeout.

Every change is written (ConsumerGroup* records, the member's metadata with
its ClassicMemberMetadata) before it is answered, under the group's lock.
"""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING

from pylog.coordinator.consumer_group import ConsumerGroup
from pylog.coordinator.consumer_group_heartbeat import ConsumerGroupHeartbeat, _Refused
from pylog.coordinator.consumer_group_member import (
    ClassicMemberMetadata,
    ConsumerGroupMember,
    MemberState,
)
from pylog.coordinator.consumer_group_migration import to_topic_ids
from pylog.coordinator.consumer_group_timeout import TimeoutKind
from pylog.coordinator.consumer_protocol import (
    deserialize_subscription,
    deserialize_version,
    serialize_assignment,
)
from pylog.coordinator.group import (
    NO_GENERATION,
    UNKNOWN_MEMBER_ID,
    GroupState,
    JoinGroupResult,
    SyncGroupResult,
)
from pylog.coordinator.group_metadata_manager import CoordinatorError
from pylog.coordinator.records import RecordFormatError
from pylog.errors import ErrorCode
from pylog.logsafe import quoted

if TYPE_CHECKING:
    from pylog.coordinator.group_coordinator import JoinRequest

__all__ = ["ClassicMembers"]

_log = logging.getLogger("pylog.coordinator")


class ClassicMembers:
    def __init__(self, heartbeat: ConsumerGroupHeartbeat) -> None:
        self.hb = heartbeat

    # ------------------------------------------------------------ checks

    @staticmethod
    def _member(
        group: ConsumerGroup, member_id: str, instance_id: str | None
    ) -> ConsumerGroupMember:
        """Kafka's validateConsumerGroupMember, then the member must be classic."""
        if instance_id is None:
            member = group.member(member_id)
            if member is None:
                raise _Refused(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"Member {member_id} is not a member of group {group.group_id}.",
                )
        else:
            member = group.static_member(instance_id)
            if member is None:
                raise _Refused(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"Member with instance id {instance_id} is not a member of group "
                    f"{group.group_id}.",
                )
            if member.member_id != member_id:
                raise _Refused(ErrorCode.FENCED_INSTANCE_ID)
        if not member.use_classic_protocol:
            raise _Refused(
                ErrorCode.UNKNOWN_MEMBER_ID,
                f"Member {member.member_id} does not use the classic protocol.",
            )
        return member

    def _must_rejoin(self, group: ConsumerGroup, member: ConsumerGroupMember) -> bool:
        """The group moved on, the member has partitions to give up, or the
        ones it waited for are free: it must rejoin to reconcile."""
        return (
            member.member_epoch < group.group_epoch
            or member.state is MemberState.UNREVOKED_PARTITIONS
            or (
                member.state is MemberState.UNRELEASED_PARTITIONS
                and not group.waiting_on_unreleased_partition(member)
            )
        )

    def _join_deadline(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        """Kafka's scheduleConsumerGroupJoinTimeoutIfAbsent."""
        if member.member_id not in group.join_ops:
            timeout = member.rebalance_timeout_ms if member.rebalance_timeout_ms > 0 else 300_000
            self.hb._schedule(group, TimeoutKind.JOIN, member.member_id, timeout)

    # ------------------------------------------------------------ JoinGroup

    async def join(self, group: ConsumerGroup, req: JoinRequest) -> JoinGroupResult:
        try:
            async with group.lock:
                if group.is_in(GroupState.DEAD):
                    # Converted meanwhile: the client looks the group up again.
                    raise _Refused(ErrorCode.COORDINATOR_NOT_AVAILABLE)
                return await self._join(group, req)
        except _Refused as e:
            return JoinGroupResult(e.code, req.member_id, NO_GENERATION)

    async def _join(self, group: ConsumerGroup, req: JoinRequest) -> JoinGroupResult:
        hb = self.hb
        unknown = req.member_id == UNKNOWN_MEMBER_ID
        member_id = str(uuid.uuid4()) if unknown else req.member_id
        known = group.member(member_id) is not None or (
            req.group_instance_id is not None
            and group.static_member(req.group_instance_id) is not None
        )
        if not known:
            hb._check_size(group)
        if not group.supports_classic_protocols(req.protocol_type, {n for n, _ in req.protocols}):
            raise _Refused(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if unknown and req.require_known_member_id and req.group_instance_id is None:
            # KIP-394: the member comes back with this id.
            return JoinGroupResult(ErrorCode.MEMBER_ID_REQUIRED, member_id, NO_GENERATION)
        try:
            subscription = deserialize_subscription(req.protocols[0][1])
        except RecordFormatError as e:
            _log.info("group %s: JoinGroup of %s with a malformed subscription: %s",
                      quoted(group.group_id), quoted(member_id), e)  # fmt: skip
            raise _Refused(ErrorCode.UNKNOWN_SERVER_ERROR) from None
        replaced: ConsumerGroupMember | None = None
        is_new = False
        member: ConsumerGroupMember | None
        if req.group_instance_id is None:
            member = group.member(member_id)
        else:
            member = group.static_member(req.group_instance_id)
            if member is not None and member.member_id != member_id:
                if not unknown:
                    raise _Refused(ErrorCode.FENCED_INSTANCE_ID)
                # A static member restarted: it takes the old one's place and
                # assignment, from epoch 0 (Kafka's replaceMember).
                replaced = member
                member = member.replace(member_id=member_id)
        if member is None:
            member = ConsumerGroupMember(member_id)
            is_new = True
            _log.info("group %s: member %s joins the consumer group with the classic protocol",
                      quoted(group.group_id), quoted(member_id))  # fmt: skip
        before = member
        changes: dict[str, object] = {
            "client_id": req.client_id,
            "client_host": req.client_host,
            "subscribed_topic_names": subscription.topics,
            "classic": ClassicMemberMetadata(req.session_timeout_ms, tuple(req.protocols)),
        }
        if req.group_instance_id is not None:
            changes["instance_id"] = req.group_instance_id
        if subscription.rack_id is not None:
            changes["rack_id"] = subscription.rack_id
        if req.rebalance_timeout_ms != -1:
            changes["rebalance_timeout_ms"] = req.rebalance_timeout_ms
        if replaced is not None:
            changes["member_epoch"] = changes["previous_member_epoch"] = 0
        updated = member.replace(**changes)
        if updated == member:
            updated = member
        owned = to_topic_ids(subscription.owned_partitions, hb._topics())
        reconciled = await hb._apply(
            group, before, updated, is_new=is_new, replaced=replaced, owned=owned
        )
        if (
            replaced is not None
            and not replaced.use_classic_protocol
            and hb._downgrade_allowed(group, None)
            and await hb._downgrade(group, None) == ErrorCode.NONE
        ):
            # It replaced the last consumer-protocol member: the group is
            # classic again, Stable, the member holding the old one's target.
            try:
                now_classic = hb.manager.get_group(group.group_id)
            except CoordinatorError as e:
                raise _Refused(e.code) from None
            if now_classic is None or now_classic.is_in(GroupState.DEAD):
                raise _Refused(ErrorCode.COORDINATOR_NOT_AVAILABLE)
            return JoinGroupResult(
                error_code=ErrorCode.NONE,
                member_id=member_id,
                generation_id=now_classic.generation_id,
                protocol_type="consumer",
                protocol_name=now_classic.protocol_name,
                leader="",
            )
        hb._cancel_one(group.join_ops, member_id)
        timeout = req.rebalance_timeout_ms if req.rebalance_timeout_ms > 0 else 300_000
        hb._schedule(group, TimeoutKind.SYNC, member_id, timeout)
        classic = reconciled.classic
        return JoinGroupResult(
            error_code=ErrorCode.NONE,
            member_id=member_id,
            generation_id=reconciled.member_epoch,
            protocol_type="consumer",
            protocol_name=classic.protocol_name if classic is not None else None,
            leader="",
        )

    # ------------------------------------------------------------ SyncGroup

    async def sync(
        self,
        group: ConsumerGroup,
        generation_id: int,
        member_id: str,
        instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
    ) -> SyncGroupResult:
        try:
            async with group.lock:
                if group.is_in(GroupState.DEAD):
                    raise _Refused(ErrorCode.COORDINATOR_NOT_AVAILABLE)
                member = self._member(group, member_id, instance_id)
                if generation_id != member.member_epoch:
                    raise _Refused(ErrorCode.ILLEGAL_GENERATION)
                classic = member.classic
                assert classic is not None
                name = classic.protocol_name
                if (protocol_type is not None and protocol_type != "consumer") or (
                    protocol_name is not None and protocol_name != name
                ):
                    raise _Refused(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
                if (
                    group.group_epoch > member.member_epoch
                    and member.state is not MemberState.UNREVOKED_PARTITIONS
                ):
                    # A new epoch since its JoinGroup: it rejoins to catch up.
                    self._join_deadline(group, member)
                    raise _Refused(ErrorCode.REBALANCE_IN_PROGRESS)
                self.hb._cancel_one(group.sync_ops, member.member_id)
                self.hb._schedule_session(group, member.member_id)
                names = {t.topic_id: t.name for t in self.hb._topics().values()}
                by_name = {names[t]: sorted(ps) for t, ps in member.assigned.items() if t in names}
                version = deserialize_version(classic.supported_protocols[0][1])
                return SyncGroupResult(
                    ErrorCode.NONE, serialize_assignment(by_name, version), "consumer", name
                )
        except _Refused as e:
            return SyncGroupResult(e.code)

    # ------------------------------------------------------------ Heartbeat

    def heartbeat(
        self, group: ConsumerGroup, member_id: str, instance_id: str | None, generation_id: int
    ) -> int:
        try:
            member = self._member(group, member_id, instance_id)
        except _Refused as e:
            return e.code
        if generation_id != member.member_epoch:
            return ErrorCode.ILLEGAL_GENERATION
        self.hb._schedule_session(group, member.member_id)
        if self._must_rejoin(group, member):
            self._join_deadline(group, member)
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    # ------------------------------------------------------------ LeaveGroup

    async def leave(
        self, group: ConsumerGroup, members: list[tuple[str, str | None]]
    ) -> tuple[int, list[int]]:
        codes: list[int] = []
        async with group.lock:
            if group.is_in(GroupState.DEAD):
                return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
            for member_id, instance_id in members:
                try:
                    if instance_id is None:
                        member = self._member(group, member_id, None)
                    else:
                        found = group.static_member(instance_id)
                        if found is None:
                            raise _Refused(ErrorCode.UNKNOWN_MEMBER_ID)
                        # An admin removes a static member by instance id alone.
                        mid = found.member_id if member_id == UNKNOWN_MEMBER_ID else member_id
                        member = self._member(group, mid, instance_id)
                except _Refused as e:
                    codes.append(e.code)
                    continue
                code = await self.hb._remove(group, member, "left the group (LeaveGroup)")
                codes.append(code)
                if group.is_in(GroupState.DEAD):
                    # Removing it turned the group classic (never for a
                    # classic member; kept safe): the rest are unknown here.
                    codes.extend([ErrorCode.UNKNOWN_MEMBER_ID] * (len(members) - len(codes)))
                    break
        return ErrorCode.NONE, codes
