"""WriteTxnMarkers (api key 27, version 1): the transaction coordinator ends
a transaction on each partition it touched.

Kafka's ``KafkaApis.handleWriteTxnMarkersRequest``. The coordinator (on
any broker, this one included, over the wire) names per marker a producer
id and epoch, COMMIT or ABORT, its coordinator epoch and the partitions.
This broker, as each partition's leader, appends one control batch there
(``AppendOrigin.COORDINATOR``: no sequence check; a stale producer epoch is
INVALID_PRODUCER_EPOCH, a stale coordinator epoch
TRANSACTION_COORDINATOR_FENCED) with acks=all semantics: each marker is
answered once its partitions' high watermarks pass it (min.insync.replicas
as for a produce) or ``request.timeout.ms`` passes. A partition this
broker does not have is UNKNOWN_TOPIC_OR_PARTITION, one it does not lead
NOT_LEADER_OR_FOLLOWER. Only an inter-broker principal may ask: ALTER on
the cluster, else CLUSTER_ACTION, else every partition is
CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import asyncio

from pylog.broker.auth_helper import AuthHelper
from pylog.common.topic_partition import TopicPartition
from pylog.common.utils.time import now_ms
from pylog.coordinator.group_coordinator import GroupCoordinator
from pylog.coordinator.group_metadata_manager import GROUP_METADATA_TOPIC
from pylog.errors import ErrorCode
from pylog.log.end_transaction_marker import (
    ABORT,
    COMMIT,
    EndTransactionMarker,
    build_marker_batch,
)
from pylog.log.log import AppendOrigin
from pylog.network import Request
from pylog.protocol.messages import WriteTxnMarkersRequest, WriteTxnMarkersResponse
from pylog.protocol.messages.write_txn_markers_request import WritableTxnMarker
from pylog.protocol.messages.write_txn_markers_response import (
    WritableTxnMarkerPartitionResult,
    WritableTxnMarkerResult,
    WritableTxnMarkerTopicResult,
)
from pylog.security.acl_operation import AclOperation
from pylog.security.resource_type import ResourceType
from pylog.server.config import KafkaConfig
from pylog.server.replica_manager import ReplicaManager

__all__ = ["TxnMarkerApis"]


class TxnMarkerApis:
    """The partition side of a transaction's end."""

    #: Who may do what (KafkaApis sets the broker's; none: everything allowed).
    auth: AuthHelper = AuthHelper()

    def __init__(
        self,
        config: KafkaConfig,
        replica_manager: ReplicaManager,
        group_coordinator: GroupCoordinator | None = None,
    ) -> None:
        self.replica_manager = replica_manager
        self.request_timeout_ms = int(config.get("request.timeout.ms"))
        self.group_coordinator = group_coordinator

    async def handle_write_txn_markers_request(
        self, request: Request, body: WriteTxnMarkersRequest
    ) -> WriteTxnMarkersResponse:
        if not self.auth.authorize(
            request, AclOperation.ALTER, ResourceType.CLUSTER, log_if_denied=False
        ) and not self.auth.authorize_cluster(request, AclOperation.CLUSTER_ACTION):
            code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            return WriteTxnMarkersResponse(
                markers=[_result(m, {tp: code for tp in _partitions(m)}) for m in body.markers]
            )
        if body.markers:
            # Kafka appends the markers concurrently and answers when all are done.
            results = await asyncio.gather(*(self._write_marker(request, m) for m in body.markers))
        else:
            results = []
        return WriteTxnMarkersResponse(markers=list(results))

    async def _write_marker(
        self, request: Request, marker: WritableTxnMarker
    ) -> WritableTxnMarkerResult:
        end = EndTransactionMarker(
            COMMIT if marker.transaction_result else ABORT, marker.coordinator_epoch
        )
        batch = build_marker_batch(
            marker.producer_id, marker.producer_epoch, end, timestamp_ms=now_ms()
        )
        errors: dict[TopicPartition, int] = {}
        entries: dict[TopicPartition, bytes] = {}
        for tp in _partitions(marker):
            if self.replica_manager.partition(tp) is None:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                entries[tp] = batch
        if entries:
            appended = await self.replica_manager.append_records(
                self.request_timeout_ms,
                -1,
                entries,
                internal_topics_allowed=True,
                origin=AppendOrigin.COORDINATOR,
                before_wait=request.mark_local_complete,
                # v2 (KIP-1228): the marker's transaction version (0 before)
                transaction_version=marker.transaction_version,
            )
            for tp, r in appended.items():
                errors[tp] = r.error_code
        # __consumer_offsets: for each partition of the group metadata topic
        # written without error, the group coordinator is told that this
        # producer's transaction completed (COMMIT: its pending
        # TxnOffsetCommits become the group's offsets; ABORT: dropped), as
        # Kafka's groupCoordinator.scheduleHandleTxnCompletion.
        offsets_partitions = [
            tp.partition
            for tp, code in errors.items()
            if tp.topic == GROUP_METADATA_TOPIC and code == ErrorCode.NONE
        ]
        if offsets_partitions and self.group_coordinator is not None:
            self.group_coordinator.schedule_handle_txn_completion(
                marker.producer_id, offsets_partitions, marker.transaction_result
            )
        return _result(marker, errors)


def _partitions(marker: WritableTxnMarker) -> list[TopicPartition]:
    return [TopicPartition(t.name, p) for t in marker.topics for p in t.partition_indexes]


def _result(
    marker: WritableTxnMarker, errors: dict[TopicPartition, int]
) -> WritableTxnMarkerResult:
    """The marker's answer, its topics and partitions in the request's order."""
    topics = [
        WritableTxnMarkerTopicResult(
            name=t.name,
            partitions=[
                WritableTxnMarkerPartitionResult(
                    partition_index=p,
                    error_code=errors.get(TopicPartition(t.name, p), ErrorCode.NONE),
                )
                for p in t.partition_indexes
            ],
        )
        for t in marker.topics
    ]
    return WritableTxnMarkerResult(producer_id=marker.producer_id, topics=topics)
