"""The controller's requests to a broker (ZooKeeper mode): LeaderAndIsr,
UpdateMetadata and StopReplica, answered through the ReplicaManager; and the
requests a broker or a client makes of the controller: ControlledShutdown,
answered by this broker's KafkaController when it is the active one
(NOT_CONTROLLER otherwise).

Each version's layout is read here (v0-1 LeaderAndIsr and v0-4 UpdateMetadata
list partitions ungrouped; later versions group them by topic, with topic ids
from LeaderAndIsr v5 and UpdateMetadata v7; StopReplica v3 carries a leader
epoch and a delete flag per partition) and handed on as the ReplicaManager's
types. The fencing (controller epoch, broker epoch, leader epochs) is the
ReplicaManager's. After a LeaderAndIsr, the group coordinator takes the
``__consumer_offsets`` partitions this broker now leads and drops the ones it
follows (Kafka's onLeadershipChange).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine

from pylog.controller.kafka_controller import KafkaController
from pylog.coordinator.group_coordinator import GroupCoordinator
from pylog.errors import ErrorCode
from pylog.log.checkpoint import TopicPartition
from pylog.metadata.metadata_cache import BrokerEndpoint, MetadataBroker, PartitionInfo
from pylog.network import Request
from pylog.protocol import ZERO_UUID
from pylog.protocol.messages import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from pylog.protocol.messages.controlled_shutdown_response import RemainingPartition
from pylog.protocol.messages.leader_and_isr_request import LeaderAndIsrPartitionState
from pylog.protocol.messages.leader_and_isr_response import (
    LeaderAndIsrPartitionError,
    LeaderAndIsrTopicError,
)
from pylog.protocol.messages.stop_replica_response import StopReplicaPartitionError
from pylog.protocol.messages.update_metadata_request import UpdateMetadataPartitionState
from pylog.server.partition import PartitionState
from pylog.server.replica_fetcher_blocking_send import BrokerEndPoint
from pylog.server.replica_manager import ReplicaManager, StopReplicaState

__all__ = ["ControllerApis"]

_log = logging.getLogger("pylog.broker.controller_apis")

_GROUP_METADATA_TOPIC = "__consumer_offsets"
# Kafka's SecurityProtocol ids, for UpdateMetadata v1-2 endpoints without a listener name.
_PROTOCOL_NAMES = {0: "PLAINTEXT", 1: "SSL", 2: "SASL_PLAINTEXT", 3: "SASL_SSL"}


class ControllerApis:
    """LeaderAndIsr, UpdateMetadata, StopReplica; ControlledShutdown."""

    def __init__(
        self,
        replica_manager: ReplicaManager,
        group_coordinator: GroupCoordinator | None = None,
        controller: Callable[[], KafkaController | None] | None = None,
    ) -> None:
        self.replica_manager = replica_manager
        self.group_coordinator = group_coordinator
        #: this broker's KafkaController (None: no cluster, or not started yet)
        self.controller = controller or (lambda: None)
        self._tasks: set[asyncio.Task[None]] = set()

    # ------------------------------------------------------------------ LeaderAndIsr

    async def handle_leader_and_isr_request(
        self, request: Request, body: LeaderAndIsrRequest
    ) -> LeaderAndIsrResponse:
        version = request.header.api_version
        states: dict[TopicPartition, PartitionState] = {}
        topic_ids: dict[str, str] = {}

        def add(topic: str, p: LeaderAndIsrPartitionState) -> None:
            states[TopicPartition(topic, p.partition_index)] = PartitionState(
                controller_epoch=p.controller_epoch,
                leader=p.leader,
                leader_epoch=p.leader_epoch,
                isr=tuple(p.isr),
                partition_epoch=p.partition_epoch,
                replicas=tuple(p.replicas),
                is_new=p.is_new,
            )

        if version <= 1:
            for p in body.ungrouped_partition_states:
                add(p.topic_name, p)
        else:
            for t in body.topic_states:
                if version >= 5 and t.topic_id and t.topic_id != ZERO_UUID:
                    topic_ids[t.topic_name] = t.topic_id
                for p in t.partition_states:
                    add(t.topic_name, p)
        leaders = {
            b.broker_id: BrokerEndPoint(b.broker_id, b.host_name, b.port) for b in body.live_leaders
        }
        result = self.replica_manager.become_leader_or_follower(
            controller_id=body.controller_id,
            controller_epoch=body.controller_epoch,
            broker_epoch=body.broker_epoch,
            partition_states=states,
            topic_ids=topic_ids,
            live_leaders=leaders,
        )
        errors = result.partition_errors or {}
        if result.error_code == ErrorCode.NONE:
            self._on_leadership_change(states, errors)
        if version <= 4:
            return LeaderAndIsrResponse(
                error_code=result.error_code,
                partition_errors=[
                    LeaderAndIsrPartitionError(
                        topic_name=tp.topic, partition_index=tp.partition, error_code=code
                    )
                    for tp, code in errors.items()
                ],
            )
        by_topic: dict[str, list[LeaderAndIsrPartitionError]] = {}
        for tp, code in errors.items():
            by_topic.setdefault(tp.topic, []).append(
                LeaderAndIsrPartitionError(partition_index=tp.partition, error_code=code)
            )
        topics = []
        for name, parts in by_topic.items():
            topic_id = topic_ids.get(name)
            if topic_id is None:
                partition = self.replica_manager.partition(TopicPartition(name, 0))
                topic_id = partition.topic_id if partition is not None else ZERO_UUID
            topics.append(LeaderAndIsrTopicError(topic_id=topic_id, partition_errors=parts))
        return LeaderAndIsrResponse(error_code=result.error_code, topics=topics)

    def _on_leadership_change(
        self, states: dict[TopicPartition, PartitionState], errors: dict[TopicPartition, int]
    ) -> None:
        coordinator = self.group_coordinator
        if coordinator is None:
            return
        me = self.replica_manager.broker_id
        for tp, state in states.items():
            if tp.topic != _GROUP_METADATA_TOPIC or errors.get(tp) != ErrorCode.NONE:
                continue
            if state.leader == me:
                self._spawn(coordinator.on_election(tp.partition))
            else:
                coordinator.on_resignation(tp.partition)

    def _spawn(self, coro: Coroutine[object, object, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ------------------------------------------------------------------ UpdateMetadata

    async def handle_update_metadata_request(
        self, request: Request, body: UpdateMetadataRequest
    ) -> UpdateMetadataResponse:
        version = request.header.api_version
        brokers: list[MetadataBroker] = []
        for b in body.live_brokers:
            if version == 0:
                endpoints: tuple[BrokerEndpoint, ...] = (
                    BrokerEndpoint("PLAINTEXT", b.v0_host, b.v0_port, 0),
                )
            else:
                endpoints = tuple(
                    BrokerEndpoint(
                        e.listener
                        if version >= 3
                        else _PROTOCOL_NAMES.get(e.security_protocol, "PLAINTEXT"),
                        e.host,
                        e.port,
                        e.security_protocol,
                    )
                    for e in b.endpoints
                )
            brokers.append(MetadataBroker(b.id, endpoints, b.rack if version >= 2 else None))
        partitions: list[PartitionInfo] = []
        topic_ids: dict[str, str] = {}

        def add(topic: str, p: UpdateMetadataPartitionState) -> None:
            partitions.append(
                PartitionInfo(
                    topic=topic,
                    partition=p.partition_index,
                    leader=p.leader,
                    leader_epoch=p.leader_epoch,
                    replicas=tuple(p.replicas),
                    isr=tuple(p.isr),
                    zk_version=p.zk_version,
                    offline_replicas=tuple(p.offline_replicas),
                    controller_epoch=p.controller_epoch,
                )
            )

        if version <= 4:
            for p in body.ungrouped_partition_states:
                add(p.topic_name, p)
        else:
            for t in body.topic_states:
                if version >= 7 and t.topic_id and t.topic_id != ZERO_UUID:
                    topic_ids[t.topic_name] = t.topic_id
                for p in t.partition_states:
                    add(t.topic_name, p)
        code = self.replica_manager.maybe_update_metadata_cache(
            controller_id=body.controller_id,
            controller_epoch=body.controller_epoch,
            broker_epoch=body.broker_epoch,
            brokers=brokers,
            partitions=partitions,
            topic_ids=topic_ids,
        )
        return UpdateMetadataResponse(error_code=code)

    # ------------------------------------------------------------------ StopReplica

    async def handle_stop_replica_request(
        self, request: Request, body: StopReplicaRequest
    ) -> StopReplicaResponse:
        version = request.header.api_version
        parts: dict[TopicPartition, StopReplicaState] = {}
        if version == 0:
            for p in body.ungrouped_partitions:
                parts[TopicPartition(p.topic_name, p.partition_index)] = StopReplicaState(
                    -1, body.delete_partitions
                )
        elif version <= 2:
            for t in body.topics:
                for i in t.partition_indexes:
                    parts[TopicPartition(t.name, i)] = StopReplicaState(-1, body.delete_partitions)
        else:
            for ts in body.topic_states:
                for s in ts.partition_states:
                    parts[TopicPartition(ts.topic_name, s.partition_index)] = StopReplicaState(
                        s.leader_epoch, s.delete_partition
                    )
        result = self.replica_manager.stop_replicas(
            controller_id=body.controller_id,
            controller_epoch=body.controller_epoch,
            broker_epoch=body.broker_epoch,
            partitions=parts,
        )
        errors = result.partition_errors or {}
        coordinator = self.group_coordinator
        if coordinator is not None and result.error_code == ErrorCode.NONE:
            for tp, code in errors.items():
                if tp.topic == _GROUP_METADATA_TOPIC and code == ErrorCode.NONE:
                    coordinator.on_resignation(tp.partition)
        return StopReplicaResponse(
            error_code=result.error_code,
            partition_errors=[
                StopReplicaPartitionError(
                    topic_name=tp.topic, partition_index=tp.partition, error_code=code
                )
                for tp, code in errors.items()
            ],
        )

    # ------------------------------------------------------------------ ControlledShutdown

    async def handle_controlled_shutdown_request(
        self, request: Request, body: ControlledShutdownRequest
    ) -> ControlledShutdownResponse:
        controller = self.controller()
        if controller is None or not controller.is_active:
            return ControlledShutdownResponse(error_code=ErrorCode.NOT_CONTROLLER)
        # v0-1 carry no broker epoch: -1, which the controller does not check.
        epoch = body.broker_epoch if request.header.api_version >= 2 else -1
        result = await controller.controlled_shutdown(body.broker_id, epoch)
        return ControlledShutdownResponse(
            error_code=result.error_code,
            remaining_partitions=[
                RemainingPartition(topic_name=tp.topic, partition_index=tp.partition)
                for tp in result.remaining
            ],
        )
