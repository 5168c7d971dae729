"""ControllerChannelManager: one request queue and one sender task per live
broker, connected to the broker's inter-broker listener; and
ControllerBrokerRequestBatch, which gathers a state change's LeaderAndIsr,
UpdateMetadata and StopReplica requests per broker and queues them.

Requests go out in queue order, one at a time, over pylog's blocking
KafkaConnection run on a worker thread. A failed send closes the connection
and retries the same request after a back-off, until the broker is removed
(it died: the controller has already moved its work elsewhere)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pylog.common.topic_partition import TopicPartition
from pylog.controller.controller_context import ControllerContext
from pylog.metadata.zk_data import BrokerInfo, LeaderAndIsr
from pylog.protocol import ZERO_UUID, ApiKey
from pylog.protocol.client import KafkaConnection
from pylog.protocol.messages import (
    LeaderAndIsrRequest,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from pylog.protocol.messages.leader_and_isr_request import (
    LeaderAndIsrLiveLeader,
    LeaderAndIsrPartitionState,
    LeaderAndIsrTopicState,
)
from pylog.protocol.messages.stop_replica_request import (
    StopReplicaPartitionState,
    StopReplicaTopicState,
)
from pylog.protocol.messages.update_metadata_request import (
    UpdateMetadataBroker,
    UpdateMetadataEndpoint,
    UpdateMetadataPartitionState,
    UpdateMetadataTopicState,
)

__all__ = ["ControllerBrokerRequestBatch", "ControllerChannelManager"]

_log = logging.getLogger("pylog.controller.channel")

# The versions pylog's controller speaks (all served by controller_apis):
# grouped by topic, with topic ids.
LEADER_AND_ISR_VERSION = 5
UPDATE_METADATA_VERSION = 7
STOP_REPLICA_VERSION = 3
LEADER_DURING_DELETE = -2  # Kafka's LeaderAndIsr.LeaderDuringDelete
_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}

Body = LeaderAndIsrRequest | UpdateMetadataRequest | StopReplicaRequest


@dataclass
class _Queued:
    api_key: int
    version: int
    body: Body
    callback: Callable[[object], None] | None = None


@dataclass
class _BrokerChannel:
    info: BrokerInfo
    queue: asyncio.Queue[_Queued] = field(default_factory=asyncio.Queue)
    task: asyncio.Task[None] | None = None
    conn: KafkaConnection | None = None


class ControllerChannelManager:
    def __init__(
        self,
        listener_name: str,
        *,
        broker_id: int = -1,
        socket_timeout_s: float = 30.0,
        backoff_s: float = 0.2,
    ) -> None:
        self.listener_name = listener_name
        self.broker_id = broker_id
        self.socket_timeout_s = socket_timeout_s
        self.backoff_s = backoff_s
        #: Extra KafkaConnection arguments: the inter-broker listener's TLS
        #: context and SASL login (set by the broker; docs/security.md).
        self.connection_options: dict[str, Any] = {}
        #: ``(broker, response)`` for every LeaderAndIsr answered (the
        #: controller reads the replicas on offline log dirs from it).
        self.on_leader_and_isr_response: Callable[[int, object], None] | None = None
        self._channels: dict[int, _BrokerChannel] = {}

    def add_broker(self, info: BrokerInfo) -> None:
        if info.id in self._channels:
            self.remove_broker(info.id)
        ch = _BrokerChannel(info)
        ch.task = asyncio.get_running_loop().create_task(
            self._send_loop(ch), name=f"controller-channel-{info.id}"
        )
        self._channels[info.id] = ch

    def remove_broker(self, broker_id: int) -> None:
        ch = self._channels.pop(broker_id, None)
        if ch is None:
            return
        if ch.task is not None:
            ch.task.cancel()
        self._close(ch)

    def brokers(self) -> list[int]:
        return sorted(self._channels)

    def send(
        self,
        broker_id: int,
        api_key: int,
        version: int,
        body: Body,
        callback: Callable[[object], None] | None = None,
    ) -> None:
        ch = self._channels.get(broker_id)
        if ch is None:
            _log.debug("not sending %s to broker %d: not live", ApiKey(api_key).name, broker_id)
            return
        ch.queue.put_nowait(_Queued(api_key, version, body, callback))

    async def close(self) -> None:
        for b in list(self._channels):
            self.remove_broker(b)

    @staticmethod
    def _close(ch: _BrokerChannel) -> None:
        conn, ch.conn = ch.conn, None
        if conn is not None:
            # shutdown() first: a worker thread blocked reading the answer
            # (close() alone does not wake it) returns now, instead of holding
            # the executor — and the broker's exit — for the socket timeout.
            with contextlib.suppress(Exception):
                conn.sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(Exception):
                conn.close()

    def _address(self, info: BrokerInfo) -> str:
        ep = info.endpoint(self.listener_name) or (info.endpoints[0] if info.endpoints else None)
        if ep is None:
            raise ConnectionError(f"broker {info.id} registered no endpoint")
        return f"{ep.host}:{ep.port}"

    async def _send_loop(self, ch: _BrokerChannel) -> None:
        while True:
            item = await ch.queue.get()
            while True:
                try:
                    if ch.conn is None:
                        address = self._address(ch.info)
                        ch.conn = await asyncio.to_thread(
                            KafkaConnection,
                            address,
                            timeout=self.socket_timeout_s,
                            # Kafka's send thread name: who sends, to whom.
                            client_id=f"controller-{self.broker_id}-to-broker-{ch.info.id}",
                            **self.connection_options,
                        )
                    conn = ch.conn
                    response = await asyncio.to_thread(
                        conn.request, item.api_key, item.version, item.body
                    )
                except asyncio.CancelledError:
                    self._close(ch)
                    raise
                except Exception as e:
                    _log.info(
                        "sending %s to broker %d failed (%s); retrying",
                        ApiKey(item.api_key).name,
                        ch.info.id,
                        e,
                    )
                    self._close(ch)
                    await asyncio.sleep(self.backoff_s)
                    continue
                code = getattr(response, "error_code", 0)
                if code:
                    _log.warning(
                        "broker %d answered %s with error %d",
                        ch.info.id,
                        ApiKey(item.api_key).name,
                        code,
                    )
                if item.callback is not None:
                    try:
                        item.callback(response)
                    except Exception:
                        _log.exception("controller request callback failed")
                break


@dataclass
class _LeaderAndIsrEntry:
    state: LeaderAndIsr
    replicas: list[int]
    is_new: bool
    adding: list[int] = field(default_factory=list)
    removing: list[int] = field(default_factory=list)


class ControllerBrokerRequestBatch:
    """Collect a state change's requests, then :meth:`send` them per broker."""

    def __init__(
        self, controller_id: int, context: ControllerContext, channel: ControllerChannelManager
    ) -> None:
        self.controller_id = controller_id
        self.context = context
        self.channel = channel
        self._leader_and_isr: dict[int, dict[TopicPartition, _LeaderAndIsrEntry]] = {}
        self._update_metadata_brokers: set[int] = set()
        self._update_metadata_partitions: set[TopicPartition] = set()
        self._stop_replica: dict[int, dict[TopicPartition, tuple[int, bool]]] = {}

    def add_leader_and_isr(
        self, brokers: Iterable[int], tp: TopicPartition, *, is_new: bool = False
    ) -> None:
        state = self.context.leadership.get(tp)
        if state is None:
            return
        replicas = self.context.replicas(tp)
        adding = self.context.adding_replicas.get(tp, [])
        removing = self.context.removing_replicas.get(tp, [])
        for b in brokers:
            if b in self.context.live_brokers:
                self._leader_and_isr.setdefault(b, {})[tp] = _LeaderAndIsrEntry(
                    state, replicas, is_new, list(adding), list(removing)
                )
        self.add_update_metadata(self.context.live_brokers, [tp])

    def add_update_metadata(
        self, brokers: Iterable[int], partitions: Iterable[TopicPartition]
    ) -> None:
        self._update_metadata_brokers.update(b for b in brokers if b in self.context.live_brokers)
        self._update_metadata_partitions.update(partitions)

    def add_stop_replica(self, broker: int, tp: TopicPartition, *, delete: bool) -> None:
        if broker not in self.context.live_brokers:
            return
        state = self.context.leadership.get(tp)
        epoch = state.leader_epoch if state is not None else -1
        if delete and tp.topic in self.context.topics_being_deleted:
            epoch = LEADER_DURING_DELETE  # any leader epoch: the topic goes
        self._stop_replica.setdefault(broker, {})[tp] = (epoch, delete)

    def send(self, callback: Callable[[int, object], None] | None = None) -> None:
        ctx = self.context
        hook = self.channel.on_leader_and_isr_response
        for b, entries in sorted(self._leader_and_isr.items()):
            on_response = None
            if hook is not None:
                on_response = (lambda broker: lambda r: hook(broker, r))(b)
            self.channel.send(b, ApiKey.LEADER_AND_ISR, LEADER_AND_ISR_VERSION,
                              self._leader_and_isr_request(b, entries), on_response)  # fmt: skip
        if self._update_metadata_brokers:
            partitions = sorted(self._update_metadata_partitions)
            for b in sorted(self._update_metadata_brokers):
                self.channel.send(b, ApiKey.UPDATE_METADATA, UPDATE_METADATA_VERSION,
                                  self._update_metadata_request(b, partitions))  # fmt: skip
        for b, parts in sorted(self._stop_replica.items()):
            body = StopReplicaRequest(
                controller_id=self.controller_id,
                controller_epoch=ctx.epoch,
                broker_epoch=ctx.broker_epoch(b),
                topic_states=[
                    StopReplicaTopicState(
                        topic_name=topic,
                        partition_states=[
                            StopReplicaPartitionState(
                                partition_index=tp.partition,
                                leader_epoch=epoch,
                                delete_partition=delete,
                            )
                            for tp, (epoch, delete) in sorted(parts.items())
                            if tp.topic == topic
                        ],
                    )
                    for topic in sorted({tp.topic for tp in parts})
                ],
            )
            cb = None
            if callback is not None:
                cb = (lambda broker: lambda r: callback(broker, r))(b)
            self.channel.send(b, ApiKey.STOP_REPLICA, STOP_REPLICA_VERSION, body, cb)
        self._leader_and_isr.clear()
        self._update_metadata_brokers.clear()
        self._update_metadata_partitions.clear()
        self._stop_replica.clear()

    def _leader_and_isr_request(
        self, broker: int, entries: Mapping[TopicPartition, _LeaderAndIsrEntry]
    ) -> LeaderAndIsrRequest:
        ctx = self.context
        leaders = {e.state.leader for e in entries.values()}
        live_leaders = []
        for lid in sorted(leaders):
            info = ctx.live_brokers.get(lid)
            if info is None:
                continue
            ep = info.endpoint(self.channel.listener_name) or (
                info.endpoints[0] if info.endpoints else None
            )
            if ep is not None:
                live_leaders.append(
                    LeaderAndIsrLiveLeader(broker_id=lid, host_name=ep.host, port=ep.port)
                )
        topics = []
        for topic in sorted({tp.topic for tp in entries}):
            states = [
                LeaderAndIsrPartitionState(
                    partition_index=tp.partition,
                    controller_epoch=e.state.controller_epoch,
                    leader=e.state.leader,
                    leader_epoch=e.state.leader_epoch,
                    isr=list(e.state.isr),
                    partition_epoch=max(e.state.zk_version, 0),
                    replicas=list(e.replicas),
                    adding_replicas=list(e.adding),
                    removing_replicas=list(e.removing),
                    is_new=e.is_new,
                )
                for tp, e in sorted(entries.items())
                if tp.topic == topic
            ]
            topics.append(
                LeaderAndIsrTopicState(
                    topic_name=topic,
                    topic_id=ctx.topic_ids.get(topic) or ZERO_UUID,
                    partition_states=states,
                )
            )
        return LeaderAndIsrRequest(
            controller_id=self.controller_id,
            controller_epoch=ctx.epoch,
            broker_epoch=ctx.broker_epoch(broker),
            type=0,
            topic_states=topics,
            live_leaders=live_leaders,
        )

    def _update_metadata_request(
        self, broker: int, partitions: list[TopicPartition]
    ) -> UpdateMetadataRequest:
        ctx = self.context
        live = set(ctx.live_brokers)
        topics = []
        for topic in sorted({tp.topic for tp in partitions}):
            states = []
            for tp in partitions:
                if tp.topic != topic:
                    continue
                s = ctx.leadership.get(tp)
                replicas = ctx.replicas(tp)
                deleting = topic in ctx.topics_being_deleted or s is None
                states.append(
                    UpdateMetadataPartitionState(
                        partition_index=tp.partition,
                        controller_epoch=s.controller_epoch if s else ctx.epoch,
                        leader=LEADER_DURING_DELETE if deleting or s is None else s.leader,
                        leader_epoch=s.leader_epoch if s else 0,
                        isr=list(s.isr) if s else [],
                        zk_version=max(s.zk_version, 0) if s else 0,
                        replicas=replicas,
                        offline_replicas=[
                            r for r in replicas if r not in live or not ctx.is_replica_online(r, tp)
                        ],
                    )
                )
            topics.append(
                UpdateMetadataTopicState(
                    topic_name=topic,
                    topic_id=ctx.topic_ids.get(topic) or ZERO_UUID,
                    partition_states=states,
                )
            )
        brokers = [
            UpdateMetadataBroker(
                id=info.id,
                endpoints=[
                    UpdateMetadataEndpoint(
                        port=ep.port,
                        host=ep.host,
                        listener=ep.listener_name,
                        security_protocol=_PROTOCOL_IDS.get(ep.security_protocol, 0),
                    )
                    for ep in info.endpoints
                ],
                rack=info.rack,
            )
            for _, info in sorted(ctx.live_brokers.items())
        ]
        return UpdateMetadataRequest(
            controller_id=self.controller_id,
            controller_epoch=ctx.epoch,
            broker_epoch=ctx.broker_epoch(broker),
            topic_states=topics,
            live_brokers=brokers,
        )
