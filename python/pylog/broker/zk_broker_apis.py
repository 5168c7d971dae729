"""AlterPartition (KIP-497) and AllocateProducerIds (KIP-730): the requests a
Kafka 3.x broker in ZooKeeper mode sends to its controller, answered by this
broker's KafkaController when it is the active one (NOT_CONTROLLER otherwise,
which the Kafka broker retries against the controller UpdateMetadata names).
The controller's side is controller/zk_broker_requests.py; docs/migration.md
has the mixed cluster.

AlterPartition v0-1 name topics, v2+ carry topic ids; v3 lists the new ISR
with each member's broker epoch (``newIsrWithEpochs``), which a ZooKeeper
controller does not check (KIP-903 fences stale replicas in KRaft only)."""

from __future__ import annotations

from collections.abc import Callable

from pylog.common.topic_partition import TopicPartition
from pylog.controller.kafka_controller import KafkaController
from pylog.controller.zk_broker_requests import (
    ProposedState,
    allocate_producer_ids,
    alter_partition,
)
from pylog.errors import ErrorCode
from pylog.network import Request
from pylog.protocol import ZERO_UUID
from pylog.protocol.messages import (
    AllocateProducerIdsRequest,
    AllocateProducerIdsResponse,
    AlterPartitionRequest,
    AlterPartitionResponse,
)
from pylog.protocol.messages.alter_partition_response import PartitionData, TopicData

__all__ = ["ZkBrokerApis"]


class ZkBrokerApis:
    """AlterPartition and AllocateProducerIds, for the active controller."""

    def __init__(self, controller: Callable[[], KafkaController | None]) -> None:
        self.controller = controller

    def _active(self) -> KafkaController | None:
        c = self.controller()
        return c if c is not None and c.is_active else None

    async def handle_alter_partition_request(
        self, request: Request, body: AlterPartitionRequest
    ) -> AlterPartitionResponse:
        version = request.header.api_version
        controller = self._active()
        if controller is None:
            return AlterPartitionResponse(error_code=ErrorCode.NOT_CONTROLLER)
        by_id = {tid: name for name, tid in controller.context.topic_ids.items()}
        proposals: dict[TopicPartition, ProposedState] = {}
        unknown_ids: dict[str, list[int]] = {}
        names: dict[str, str] = {}  # topic name -> how the request named it
        for t in body.topics:
            if version >= 2:
                name = by_id.get(t.topic_id)
                if name is None:
                    unknown_ids[t.topic_id] = [p.partition_index for p in t.partitions]
                    continue
                names[name] = t.topic_id
            else:
                name = t.topic_name
                names[name] = name
            for p in t.partitions:
                isr = (
                    tuple(b.broker_id for b in p.new_isr_with_epochs)
                    if version >= 3
                    else tuple(p.new_isr)
                )
                proposals[TopicPartition(name, p.partition_index)] = ProposedState(
                    leader_epoch=p.leader_epoch,
                    isr=isr,
                    leader_recovery_state=p.leader_recovery_state if version >= 1 else 0,
                    partition_epoch=p.partition_epoch,
                )
        got = await alter_partition(
            controller, body.broker_id, body.broker_epoch, proposals, version=version
        )
        if isinstance(got, int):
            return AlterPartitionResponse(error_code=got)
        topics: dict[str, list[PartitionData]] = {}
        for tp, answer in sorted(got.items()):
            if isinstance(answer, int):
                part = PartitionData(partition_index=tp.partition, error_code=answer)
            else:
                part = PartitionData(
                    partition_index=tp.partition,
                    error_code=ErrorCode.NONE,
                    leader_id=answer.leader,
                    leader_epoch=answer.leader_epoch,
                    isr=list(answer.isr),
                    leader_recovery_state=answer.leader_recovery_state,
                    partition_epoch=answer.zk_version,
                )
            topics.setdefault(tp.topic, []).append(part)
        out = [
            TopicData(topic_name=name, topic_id=names.get(name, ZERO_UUID), partitions=parts)
            if version >= 2
            else TopicData(topic_name=name, partitions=parts)
            for name, parts in topics.items()
        ]
        for tid, indexes in unknown_ids.items():
            out.append(
                TopicData(
                    topic_id=tid,
                    partitions=[
                        PartitionData(partition_index=i, error_code=ErrorCode.UNKNOWN_TOPIC_ID)
                        for i in indexes
                    ],
                )
            )
        return AlterPartitionResponse(error_code=ErrorCode.NONE, topics=out)

    async def handle_allocate_producer_ids_request(
        self, request: Request, body: AllocateProducerIdsRequest
    ) -> AllocateProducerIdsResponse:
        controller = self._active()
        if controller is None:
            return AllocateProducerIdsResponse(error_code=ErrorCode.NOT_CONTROLLER)
        got = await allocate_producer_ids(controller, body.broker_id, body.broker_epoch)
        if isinstance(got, int):
            return AllocateProducerIdsResponse(error_code=got)
        return AllocateProducerIdsResponse(
            error_code=ErrorCode.NONE, producer_id_start=got.first, producer_id_len=got.size
        )
