"""DescribeProducers (api key 61, KIP-664): the producers a partition
replica remembers, with each one's open transaction.

Kafka's ``KafkaApis.handleDescribeProducersRequest``: READ on the topic
(else TOPIC_AUTHORIZATION_FAILED on each partition), a topic the cluster
does not know, or a partition it does not have, is UNKNOWN_TOPIC_OR_PARTITION,
a partition this broker holds no replica of NOT_LEADER_OR_FOLLOWER; any replica (leader or follower)
answers from its own producer state (``kafka-transactions
describe-producers`` and ``find-hanging`` read it).
"""

from __future__ import annotations

from pylog.broker.auth_helper import AuthHelper
from pylog.common.topic_partition import TopicPartition
from pylog.errors import ErrorCode
from pylog.metadata.store import MetadataStore
from pylog.network import Request
from pylog.protocol.messages import DescribeProducersRequest, DescribeProducersResponse
from pylog.protocol.messages.describe_producers_response import (
    PartitionResponse,
    ProducerState,
    TopicResponse,
)
from pylog.security.acl_operation import AclOperation
from pylog.security.resource_type import ResourceType
from pylog.server.replica_manager import ReplicaManager

__all__ = ["DescribeProducersApis"]

# Kafka's ApiError without a message carries the error's default one.
_MESSAGES: dict[int, str] = {
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: "Topic authorization failed.",
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition.",
}


class DescribeProducersApis:
    #: Who may do what (KafkaApis sets the broker's; none: everything allowed).
    auth: AuthHelper = AuthHelper()

    def __init__(self, replica_manager: ReplicaManager, metadata_store: MetadataStore) -> None:
        self.replica_manager = replica_manager
        self.metadata_store = metadata_store

    async def handle_describe_producers_request(
        self, request: Request, body: DescribeProducersRequest
    ) -> DescribeProducersResponse:
        topics: list[TopicResponse] = []
        for t in body.topics:
            error: ErrorCode | None = None
            if not self.auth.authorize(request, AclOperation.READ, ResourceType.TOPIC, t.name):
                error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif self.metadata_store.topic(t.name) is None:
                error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            parts: list[PartitionResponse] = []
            for index in t.partition_indexes:
                if error is not None:
                    parts.append(PartitionResponse(index, error, _MESSAGES.get(error)))
                else:
                    parts.append(self._partition(t.name, index))
            topics.append(TopicResponse(name=t.name, partitions=parts))
        return DescribeProducersResponse(throttle_time_ms=0, topics=topics)

    def _partition(self, topic: str, index: int) -> PartitionResponse:
        partition = self.replica_manager.partition(TopicPartition(topic, index))
        if partition is None:
            # Kafka's getPartitionOrError: a partition the topic does not
            # have is unknown; one held elsewhere is another broker's.
            meta = self.metadata_store.topic(topic)
            if meta is None or not 0 <= index < meta.partitions:
                # (Kafka's answer here carries no message.)
                return PartitionResponse(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            return PartitionResponse(index, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        producers = partition.log.producer_state_manager.active_producers()
        return PartitionResponse(
            index,
            ErrorCode.NONE,
            None,
            [
                ProducerState(
                    producer_id=pid,
                    producer_epoch=e.producer_epoch,
                    last_sequence=e.last_seq,
                    last_timestamp=e.last_timestamp,
                    coordinator_epoch=e.coordinator_epoch,
                    current_txn_start_offset=-1
                    if e.current_txn_first_offset is None
                    else e.current_txn_first_offset,
                )
                for pid, e in sorted(producers.items())
            ],
        )
