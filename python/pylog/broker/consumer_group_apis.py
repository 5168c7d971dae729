"""The KIP-848 consumer-group handlers: ConsumerGroupHeartbeat (v0-1) and
ConsumerGroupDescribe (v0), over the GroupCoordinator's
ConsumerGroupHeartbeat. KafkaApis routes them (and ApiVersions advertises
them) when ``group.coordinator.rebalance.protocols`` names ``consumer``.

Authorization as Kafka's: READ on the group to heartbeat, DESCRIBE on it to
be described (GROUP_AUTHORIZATION_FAILED otherwise).
"""

from __future__ import annotations

from pylog.broker.auth_helper import AuthHelper
from pylog.coordinator.consumer_group import ConsumerGroup
from pylog.coordinator.consumer_group_heartbeat import HeartbeatRequest, owned_from_wire
from pylog.coordinator.consumer_group_member import (
    CLASSIC_MEMBER,
    CONSUMER_MEMBER,
    Assignment,
)
from pylog.coordinator.group import GroupState
from pylog.coordinator.group_coordinator import GroupCoordinator
from pylog.errors import ErrorCode
from pylog.network import Request
from pylog.protocol.messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from pylog.protocol.messages import consumer_group_describe_response as cgd
from pylog.protocol.messages import consumer_group_heartbeat_response as cgh
from pylog.security.acl_operation import AclOperation
from pylog.security.resource_type import ResourceType

__all__ = ["ConsumerGroupApis"]

_AUTHORIZED_OPS_NOT_REQUESTED = -(2**31)


class ConsumerGroupApis:
    auth: AuthHelper = AuthHelper()

    def __init__(self, coordinator: GroupCoordinator) -> None:
        self.coordinator = coordinator

    async def handle_consumer_group_heartbeat_request(
        self, request: Request, body: ConsumerGroupHeartbeatRequest
    ) -> ConsumerGroupHeartbeatResponse:
        if not self.auth.authorize(request, AclOperation.READ, ResourceType.GROUP, body.group_id):
            return ConsumerGroupHeartbeatResponse(
                error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, member_epoch=0
            )
        owned = owned_from_wire(
            None
            if body.topic_partitions is None
            else [(t.topic_id, list(t.partitions)) for t in body.topic_partitions]
        )
        req = HeartbeatRequest(
            group_id=body.group_id,
            member_id=body.member_id,
            member_epoch=body.member_epoch,
            instance_id=body.instance_id,
            rack_id=body.rack_id,
            rebalance_timeout_ms=body.rebalance_timeout_ms,
            subscribed_topic_names=body.subscribed_topic_names,
            subscribed_topic_regex=body.subscribed_topic_regex,
            server_assignor=body.server_assignor,
            owned=owned,
            client_id=request.header.client_id or "",
            client_host="/" + request.client_host,
            api_version=request.header.api_version,
        )
        # The answer may wait on an append: the connection's next request
        # (a commit, a fetch) need not.
        request.mark_local_complete()
        r = await self.coordinator.consumer.heartbeat(req)
        if r.error_code:
            return ConsumerGroupHeartbeatResponse(
                error_code=r.error_code, error_message=r.error_message, member_epoch=0
            )
        return ConsumerGroupHeartbeatResponse(
            error_code=ErrorCode.NONE,
            member_id=r.member_id,
            member_epoch=r.member_epoch,
            heartbeat_interval_ms=r.heartbeat_interval_ms,
            assignment=None
            if r.assignment is None
            else cgh.Assignment(topic_partitions=_wire(r.assignment)),
        )

    async def handle_consumer_group_describe_request(
        self, request: Request, body: ConsumerGroupDescribeRequest
    ) -> ConsumerGroupDescribeResponse:
        out = []
        for gid in body.group_ids:
            entry = cgd.DescribedGroup(
                error_code=ErrorCode.NONE,
                group_id=gid,
                group_state="",
                members=[],
                authorized_operations=_AUTHORIZED_OPS_NOT_REQUESTED,
            )
            out.append(entry)
            if not self.auth.authorize(request, AclOperation.DESCRIBE, ResourceType.GROUP, gid):
                entry.error_code = ErrorCode.GROUP_AUTHORIZATION_FAILED
                continue
            code, group = self.coordinator.describe_group(gid)
            if code:
                entry.error_code = code
                continue
            if group is None or group.is_in(GroupState.DEAD):
                entry.error_code = ErrorCode.GROUP_ID_NOT_FOUND
                entry.error_message = f"Group {gid} not found."
                continue
            if not isinstance(group, ConsumerGroup):
                entry.error_code = ErrorCode.GROUP_ID_NOT_FOUND
                entry.error_message = f"Group {gid} is not a consumer group."
                continue
            if body.include_authorized_operations:
                entry.authorized_operations = self.auth.authorized_operations(
                    request, ResourceType.GROUP, gid
                )
            names = self._topic_names()
            entry.group_state = group.consumer_state.value
            entry.group_epoch = group.group_epoch
            entry.assignment_epoch = group.assignment_epoch
            entry.assignor_name = group.preferred_assignor(
                self.coordinator.consumer.default_assignor
            )
            entry.members = [
                cgd.Member(
                    member_id=m.member_id,
                    instance_id=m.instance_id,
                    rack_id=m.rack_id,
                    member_epoch=m.member_epoch,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    subscribed_topic_names=list(m.subscribed_topic_names),
                    # Kafka's member keeps "" for no regex, and describes it so
                    subscribed_topic_regex=m.subscribed_topic_regex or "",
                    assignment=cgd.Assignment(topic_partitions=_described(m.assigned, names)),
                    target_assignment=cgd.Assignment(
                        topic_partitions=_described(group.targets.get(m.member_id, {}), names)
                    ),
                    # v1 (KIP-1099): classic members of an upgraded group are 0
                    member_type=CLASSIC_MEMBER if m.use_classic_protocol else CONSUMER_MEMBER,
                )
                for m in group.consumer_members.values()
            ]
        return ConsumerGroupDescribeResponse(throttle_time_ms=0, groups=out)

    def _topic_names(self) -> dict[str, str]:
        store = self.coordinator.manager.metadata_store
        return {t.topic_id: t.name for t in store.topics()}


def _wire(a: Assignment) -> list[cgh.TopicPartitions]:
    return [cgh.TopicPartitions(topic_id=t, partitions=sorted(ps)) for t, ps in sorted(a.items())]


def _described(a: Assignment, names: dict[str, str]) -> list[cgd.TopicPartitions]:
    return [
        cgd.TopicPartitions(topic_id=t, topic_name=names.get(t, ""), partitions=sorted(ps))
        for t, ps in sorted(a.items())
    ]
