"""The share-group offsets admin (KIP-932, Kafka 4.1+): DescribeShareGroupOffsets
(90), AlterShareGroupOffsets (91) and DeleteShareGroupOffsets (92) — what
``kafka-share-groups.sh --describe --offsets``, ``--reset-offsets`` and
``--delete-offsets`` send to the group's coordinator. A share group's
"offset" of a partition is its share partition's start offset, kept by the
share coordinator; these handlers read it (ReadShareGroupState), set it
(InitializeShareGroupState with the next state epoch, which fences the
share-partition leader's copy) or delete it (DeleteShareGroupState) through
the persister, as Kafka's GroupCoordinatorService does.

As Kafka: DESCRIBE on the group and the topics to describe; READ on the
group and topics to alter; DELETE on the group and READ on the topics to
delete. Altering or deleting needs an empty group (NON_EMPTY_GROUP);
a group that is not there, or not a share group, is GROUP_ID_NOT_FOUND.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from pylog.broker.auth_helper import AuthHelper
from pylog.common.topic_partition import TopicPartition
from pylog.coordinator.group import GroupState
from pylog.coordinator.group_coordinator import GroupCoordinator
from pylog.coordinator.share_group import ShareGroup
from pylog.errors import ErrorCode
from pylog.metadata.store import MetadataStore, TopicMetadata
from pylog.network import Request
from pylog.protocol import ApiKey
from pylog.protocol._struct import Struct
from pylog.protocol.messages import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsResponse,
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse,
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse,
)
from pylog.protocol.messages import alter_share_group_offsets_response as asr
from pylog.protocol.messages import delete_share_group_offsets_response as dsr
from pylog.protocol.messages import describe_share_group_offsets_response as dgr
from pylog.security.acl_operation import AclOperation
from pylog.security.resource_type import ResourceType
from pylog.server.replica_manager import ReplicaManager
from pylog.server.share.persister import PersistedState, Persister, PersisterError
from pylog.server.share.share_partition_manager import SharePartitionManager

__all__ = ["ShareGroupOffsetsApis"]

_ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"
_DONE_STATES = (2, 4)  # ACKNOWLEDGED, ARCHIVED


def _message(code: int) -> str | None:
    return None if code == ErrorCode.NONE else ErrorCode(code).name


class ShareGroupOffsetsApis:
    auth: AuthHelper = AuthHelper()

    def __init__(
        self,
        coordinator: GroupCoordinator,
        persister: Persister,
        partitions: SharePartitionManager,
        replica_manager: ReplicaManager,
        metadata_store: MetadataStore,
    ) -> None:
        self.coordinator = coordinator
        self.persister = persister
        self.partitions = partitions
        self.replica_manager = replica_manager
        self.metadata_store = metadata_store

    def routes(self) -> dict[int, tuple[type, Callable[[Request, Any], Awaitable[Struct]]]]:
        return {
            ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: (
                DescribeShareGroupOffsetsRequest,
                self.handle_describe_share_group_offsets_request,
            ),
            ApiKey.ALTER_SHARE_GROUP_OFFSETS: (
                AlterShareGroupOffsetsRequest,
                self.handle_alter_share_group_offsets_request,
            ),
            ApiKey.DELETE_SHARE_GROUP_OFFSETS: (
                DeleteShareGroupOffsetsRequest,
                self.handle_delete_share_group_offsets_request,
            ),
        }

    # ------------------------------------------------------------ helpers

    def _share_group(self, group_id: str) -> tuple[int, str | None, ShareGroup | None]:
        code, group = self.coordinator.describe_group(group_id)
        if code:
            return code, None, None
        if group is None or group.is_in(GroupState.DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.", None
        if not isinstance(group, ShareGroup):
            return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.", None
        return ErrorCode.NONE, None, group

    def _topic(self, name: str) -> TopicMetadata | None:
        return self.metadata_store.topic(name)

    def _lag(self, name: str, partition: int, st: PersistedState) -> int:
        """Records from the start offset to the high watermark not yet
        delivered to completion; -1 where this broker has no replica."""
        part = self.replica_manager.partition(TopicPartition(name, partition))
        if part is None:
            return -1
        done = sum(
            b.last_offset - max(b.first_offset, st.start_offset) + 1
            for b in st.batches
            if b.delivery_state in _DONE_STATES and b.last_offset >= st.start_offset
        )
        return max(0, part.high_watermark - st.start_offset - done)

    # ------------------------------------------------------------ describe

    async def handle_describe_share_group_offsets_request(
        self, request: Request, body: DescribeShareGroupOffsetsRequest
    ) -> DescribeShareGroupOffsetsResponse:
        out = []
        for g in body.groups:
            entry = dgr.DescribeShareGroupOffsetsResponseGroup(
                group_id=g.group_id, topics=[], error_code=ErrorCode.NONE
            )
            out.append(entry)
            if not self.auth.authorize(
                request, AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id
            ):
                entry.error_code = ErrorCode.GROUP_AUTHORIZATION_FAILED
                entry.error_message = "Group authorization failed."
                continue
            code, message, group = self._share_group(g.group_id)
            if group is None and code != ErrorCode.GROUP_ID_NOT_FOUND:
                entry.error_code, entry.error_message = code, message or _message(code)
                continue
            if group is None and message and "not a share group" in message:
                entry.error_code, entry.error_message = code, message
                continue
            # A group that is not there has no state: Kafka 4.3 answers its
            # partitions uninitialized (start offset -1), not an error.
            wanted: list[tuple[str, list[int]]]
            if group is None and g.topics is None:
                wanted = []
            elif group is None or g.topics is not None:
                wanted = [(t.topic_name, list(t.partitions)) for t in g.topics or []]
            else:
                by_id = {t.topic_id: t.name for t in self.metadata_store.topics()}
                every: dict[str, list[int]] = {}
                for tid, p in sorted(group.initialized):
                    if tid in by_id:
                        every.setdefault(by_id[tid], []).append(p)
                wanted = sorted(every.items())
            for name, partitions in wanted:
                meta = self._topic(name)
                topic = dgr.DescribeShareGroupOffsetsResponseTopic(
                    topic_name=name,
                    topic_id=meta.topic_id if meta is not None else _ZERO_UUID,
                    partitions=[],
                )
                entry.topics.append(topic)
                allowed = self.auth.authorize(
                    request, AclOperation.DESCRIBE, ResourceType.TOPIC, name
                )
                for p in partitions:
                    res = dgr.DescribeShareGroupOffsetsResponsePartition(
                        partition_index=p,
                        start_offset=-1,
                        leader_epoch=0,  # Kafka's default for a share partition's state
                        lag=-1,
                        error_code=ErrorCode.NONE,
                    )
                    topic.partitions.append(res)
                    if not allowed:
                        res.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    elif meta is None or not 0 <= p < meta.partitions:
                        pass  # no state: uninitialized, as Kafka 4.3 answers
                    else:
                        try:
                            st = await self.persister.read_state(g.group_id, meta.topic_id, p)
                        except PersisterError as e:
                            res.error_code = e.code
                        else:
                            if st is not None:
                                res.start_offset = st.start_offset
                                res.leader_epoch = max(0, st.leader_epoch)
                                res.lag = self._lag(name, p, st)
                    res.error_message = _message(res.error_code)
        return DescribeShareGroupOffsetsResponse(throttle_time_ms=0, groups=out)

    # ------------------------------------------------------------ alter

    async def handle_alter_share_group_offsets_request(
        self, request: Request, body: AlterShareGroupOffsetsRequest
    ) -> AlterShareGroupOffsetsResponse:
        def refused(code: int, message: str | None) -> AlterShareGroupOffsetsResponse:
            return AlterShareGroupOffsetsResponse(
                throttle_time_ms=0, error_code=code, error_message=message, responses=[]
            )

        gid = body.group_id
        if not self.auth.authorize(request, AclOperation.READ, ResourceType.GROUP, gid):
            return refused(ErrorCode.GROUP_AUTHORIZATION_FAILED, "Group authorization failed.")
        code, message, group = self._share_group(gid)
        if group is None:
            return refused(code, message or _message(code))
        if group.share_members:
            return refused(ErrorCode.NON_EMPTY_GROUP, "The group is not empty.")
        out = []
        for t in body.topics:
            meta = self._topic(t.topic_name)
            topic = asr.AlterShareGroupOffsetsResponseTopic(
                topic_name=t.topic_name,
                topic_id=meta.topic_id if meta is not None else _ZERO_UUID,
                partitions=[],
            )
            out.append(topic)
            allowed = self.auth.authorize(
                request, AclOperation.READ, ResourceType.TOPIC, t.topic_name
            )
            for p in t.partitions:
                c: int = ErrorCode.NONE
                if not allowed:
                    c = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                elif meta is None or not 0 <= p.partition_index < meta.partitions:
                    c = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif p.start_offset < 0:
                    c = ErrorCode.INVALID_REQUEST
                else:
                    c = await self._reset(gid, meta.topic_id, p.partition_index, p.start_offset)
                    if not c:
                        group.initialized.add((meta.topic_id, p.partition_index))
                topic.partitions.append(
                    asr.AlterShareGroupOffsetsResponsePartition(
                        partition_index=p.partition_index, error_code=c, error_message=_message(c)
                    )
                )
            if meta is not None:
                self.partitions.forget_idle(gid, meta.topic_id, group_empty=True)
        return AlterShareGroupOffsetsResponse(
            throttle_time_ms=0, error_code=ErrorCode.NONE, responses=out
        )

    async def _reset(self, group_id: str, topic_id: str, partition: int, start: int) -> int:
        """A new start with the next state epoch: the leader's older copy is
        fenced at its next write and read again."""
        try:
            st = await self.persister.read_state(group_id, topic_id, partition)
        except PersisterError as e:
            return e.code
        epoch = st.state_epoch + 1 if st is not None else 0
        return await self.persister.initialize_state(group_id, topic_id, partition, epoch, start)

    # ------------------------------------------------------------ delete

    async def handle_delete_share_group_offsets_request(
        self, request: Request, body: DeleteShareGroupOffsetsRequest
    ) -> DeleteShareGroupOffsetsResponse:
        def refused(code: int, message: str | None) -> DeleteShareGroupOffsetsResponse:
            return DeleteShareGroupOffsetsResponse(
                throttle_time_ms=0, error_code=code, error_message=message, responses=[]
            )

        gid = body.group_id
        if not self.auth.authorize(request, AclOperation.DELETE, ResourceType.GROUP, gid):
            return refused(ErrorCode.GROUP_AUTHORIZATION_FAILED, "Group authorization failed.")
        code, message, group = self._share_group(gid)
        if group is None:
            return refused(code, message or _message(code))
        if group.share_members:
            return refused(ErrorCode.NON_EMPTY_GROUP, "The group is not empty.")
        out = []
        for t in body.topics:
            meta = self._topic(t.topic_name)
            c: int = ErrorCode.NONE
            if not self.auth.authorize(
                request, AclOperation.READ, ResourceType.TOPIC, t.topic_name
            ):
                c = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif meta is None:
                c = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                c = await self.delete_state(
                    gid, {(tid, p) for tid, p in group.initialized if tid == meta.topic_id}
                )
                if not c:
                    group.initialized -= {k for k in group.initialized if k[0] == meta.topic_id}
                self.partitions.forget_idle(gid, meta.topic_id, group_empty=True)
            out.append(
                dsr.DeleteShareGroupOffsetsResponseTopic(
                    topic_name=t.topic_name,
                    topic_id=meta.topic_id if meta is not None else _ZERO_UUID,
                    error_code=c,
                    error_message=_message(c),
                )
            )
        return DeleteShareGroupOffsetsResponse(
            throttle_time_ms=0, error_code=ErrorCode.NONE, responses=out
        )

    async def delete_state(self, group_id: str, partitions: set[tuple[str, int]]) -> int:
        """DeleteShareGroupState of each; the first error, else NONE."""
        first = 0
        for tid, p in sorted(partitions):
            c = await self.persister.delete_state(group_id, tid, p)
            first = first or c
        self.partitions.forget_idle(group_id, group_empty=True)
        return first
