"""The share coordinator's inter-broker APIs (KIP-932): InitializeShareGroupState
(83), ReadShareGroupState (84), WriteShareGroupState (85),
DeleteShareGroupState (86) and ReadShareGroupStateSummary (87), which the
share-partition leaders' persister sends the broker leading a key's
``__share_group_state`` partition. Like Kafka's KafkaApis they need
CLUSTER_ACTION on the cluster (each partition answers
CLUSTER_AUTHORIZATION_FAILED otherwise); the ShareCoordinator answers the
rest (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, FENCED_STATE_EPOCH, ...).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from pylog.broker.auth_helper import AuthHelper
from pylog.coordinator.share_coordinator import ShareCoordinator
from pylog.errors import ErrorCode
from pylog.network import Request
from pylog.protocol import ApiKey
from pylog.protocol._struct import Struct
from pylog.protocol.messages import (
    DeleteShareGroupStateRequest,
    DeleteShareGroupStateResponse,
    InitializeShareGroupStateRequest,
    InitializeShareGroupStateResponse,
    ReadShareGroupStateRequest,
    ReadShareGroupStateResponse,
    ReadShareGroupStateSummaryRequest,
    ReadShareGroupStateSummaryResponse,
    WriteShareGroupStateRequest,
    WriteShareGroupStateResponse,
)
from pylog.protocol.messages import delete_share_group_state_response as dsr
from pylog.protocol.messages import initialize_share_group_state_response as isr
from pylog.protocol.messages import read_share_group_state_response as rsr
from pylog.protocol.messages import read_share_group_state_summary_response as rss
from pylog.protocol.messages import write_share_group_state_response as wsr
from pylog.security.acl_operation import AclOperation
from pylog.security.resource_type import ResourceType
from pylog.server.share.persister import PersistedState, StateBatch

__all__ = ["ShareCoordinatorApis"]

_DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def _message(code: int) -> str | None:
    return None if code == ErrorCode.NONE else ErrorCode(code).name


def _start(code: int, st: PersistedState | None) -> int:
    """The start offset answered: Kafka's error answers carry the default (0);
    a key never initialized, -1."""
    if st is not None:
        return st.start_offset
    return 0 if code else -1


class ShareCoordinatorApis:
    auth: AuthHelper = AuthHelper()

    def __init__(self, coordinator: ShareCoordinator) -> None:
        self.coordinator = coordinator

    def routes(self) -> dict[int, tuple[type, Callable[[Request, Any], Awaitable[Struct]]]]:
        return {
            ApiKey.INITIALIZE_SHARE_GROUP_STATE: (
                InitializeShareGroupStateRequest,
                self.handle_initialize_share_group_state_request,
            ),
            ApiKey.READ_SHARE_GROUP_STATE: (
                ReadShareGroupStateRequest,
                self.handle_read_share_group_state_request,
            ),
            ApiKey.WRITE_SHARE_GROUP_STATE: (
                WriteShareGroupStateRequest,
                self.handle_write_share_group_state_request,
            ),
            ApiKey.DELETE_SHARE_GROUP_STATE: (
                DeleteShareGroupStateRequest,
                self.handle_delete_share_group_state_request,
            ),
            ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: (
                ReadShareGroupStateSummaryRequest,
                self.handle_read_share_group_state_summary_request,
            ),
        }

    def _allowed(self, request: Request) -> bool:
        return self.auth.authorize(request, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER)

    async def handle_initialize_share_group_state_request(
        self, request: Request, body: InitializeShareGroupStateRequest
    ) -> InitializeShareGroupStateResponse:
        ok = self._allowed(request)
        results = []
        for t in body.topics:
            parts = []
            for p in t.partitions:
                code = (
                    await self.coordinator.initialize(
                        body.group_id, t.topic_id, p.partition, p.state_epoch, p.start_offset
                    )
                    if ok
                    else _DENIED
                )
                parts.append(
                    isr.PartitionResult(
                        partition=p.partition, error_code=code, error_message=_message(code)
                    )
                )
            results.append(isr.InitializeStateResult(topic_id=t.topic_id, partitions=parts))
        return InitializeShareGroupStateResponse(results=results)

    async def handle_read_share_group_state_request(
        self, request: Request, body: ReadShareGroupStateRequest
    ) -> ReadShareGroupStateResponse:
        ok = self._allowed(request)
        results = []
        for t in body.topics:
            parts = []
            for p in t.partitions:
                code: int = _DENIED
                st: PersistedState | None = None
                if ok:
                    code, st = await self.coordinator.read(
                        body.group_id, t.topic_id, p.partition, p.leader_epoch
                    )
                parts.append(
                    rsr.PartitionResult(
                        partition=p.partition,
                        error_code=code,
                        error_message=_message(code),
                        state_epoch=st.state_epoch if st is not None else 0,
                        start_offset=_start(code, st),
                        state_batches=[
                            rsr.StateBatch(
                                first_offset=b.first_offset,
                                last_offset=b.last_offset,
                                delivery_state=b.delivery_state,
                                delivery_count=b.delivery_count,
                            )
                            for b in (st.batches if st is not None else [])
                        ],
                    )
                )
            results.append(rsr.ReadStateResult(topic_id=t.topic_id, partitions=parts))
        return ReadShareGroupStateResponse(results=results)

    async def handle_write_share_group_state_request(
        self, request: Request, body: WriteShareGroupStateRequest
    ) -> WriteShareGroupStateResponse:
        ok = self._allowed(request)
        results = []
        for t in body.topics:
            parts = []
            for p in t.partitions:
                code: int = _DENIED
                if ok:
                    code = await self.coordinator.write(
                        body.group_id,
                        t.topic_id,
                        p.partition,
                        PersistedState(
                            p.start_offset,
                            p.state_epoch,
                            p.leader_epoch,
                            [
                                StateBatch(
                                    b.first_offset,
                                    b.last_offset,
                                    b.delivery_state,
                                    b.delivery_count,
                                )
                                for b in p.state_batches
                            ],
                        ),
                    )
                parts.append(
                    wsr.PartitionResult(
                        partition=p.partition, error_code=code, error_message=_message(code)
                    )
                )
            results.append(wsr.WriteStateResult(topic_id=t.topic_id, partitions=parts))
        return WriteShareGroupStateResponse(results=results)

    async def handle_delete_share_group_state_request(
        self, request: Request, body: DeleteShareGroupStateRequest
    ) -> DeleteShareGroupStateResponse:
        ok = self._allowed(request)
        results = []
        for t in body.topics:
            parts = []
            for p in t.partitions:
                code = (
                    await self.coordinator.delete(body.group_id, t.topic_id, p.partition)
                    if ok
                    else _DENIED
                )
                parts.append(
                    dsr.PartitionResult(
                        partition=p.partition, error_code=code, error_message=_message(code)
                    )
                )
            results.append(dsr.DeleteStateResult(topic_id=t.topic_id, partitions=parts))
        return DeleteShareGroupStateResponse(results=results)

    async def handle_read_share_group_state_summary_request(
        self, request: Request, body: ReadShareGroupStateSummaryRequest
    ) -> ReadShareGroupStateSummaryResponse:
        ok = self._allowed(request)
        results = []
        for t in body.topics:
            parts = []
            for p in t.partitions:
                code: int = _DENIED
                st: PersistedState | None = None
                if ok:
                    code, st = await self.coordinator.summary(
                        body.group_id, t.topic_id, p.partition
                    )
                parts.append(
                    rss.PartitionResult(
                        partition=p.partition,
                        error_code=code,
                        error_message=_message(code),
                        state_epoch=st.state_epoch if st is not None else 0,
                        leader_epoch=max(0, st.leader_epoch) if st is not None else 0,
                        start_offset=_start(code, st),
                        delivery_complete_count=-1,
                    )
                )
            results.append(rss.ReadStateSummaryResult(topic_id=t.topic_id, partitions=parts))
        return ReadShareGroupStateSummaryResponse(results=results)
