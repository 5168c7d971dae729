"""KafkaApis: decodes a request, routes it by API key to its handler, encodes
the answer (docs/internals/request-path.md).

The data-path handlers live here — ApiVersions, Metadata, Produce, Fetch,
ListOffsets, OffsetForLeaderEpoch, InitProducerId; other components add theirs
with :meth:`KafkaApis.register` (the admin APIs, later the group coordinator).
ApiVersions advertises exactly the registered APIs.

A handler that must wait (acks=-1, a Fetch below min_bytes) calls
``request.mark_local_complete()`` first, so the connection's next request may
start while this one waits in the purgatory.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Protocol

from pylog.errors import (
    CloseConnection,
    ErrorCode,
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidTopicError,
    KafkaError,
    TopicAlreadyExistsError,
    UnsupportedVersionError,
)
from pylog.log.checkpoint import TopicPartition
from pylog.log.log import FetchIsolation
from pylog.metadata.store import (
    MetadataStore,
    TopicMetadata,
    validate_topic_name,
)
from pylog.protocol import (
    ZERO_UUID,
    ApiKey,
    decode_request,
    encode_api_versions_fallback,
    encode_response,
    served_versions,
)
from pylog.server.delayed_fetch import FetchParams, FetchPartitionRequest, FetchPartitionResult
from pylog.server.producer_id_manager import ProducerIdManager
from pylog.server.replica_manager import ReplicaManager

__all__ = ["Handler", "KafkaApis"]

_log = logging.getLogger("pylog.server.kafka_apis")

Handler = Callable[[Any, Any], Awaitable[Mapping[str, Any] | None]]

_ZERO_UUID = ZERO_UUID
_AUTHORIZED_OPS_NOT_REQUESTED = -(2**31)
# Without an authorizer every operation is allowed: READ..DESCRIBE, DESCRIBE_CONFIGS,
# ALTER_CONFIGS on a topic; the cluster operations likewise.
_TOPIC_OPS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))
_CLUSTER_OPS = sum(1 << op for op in (4, 5, 7, 8, 9, 10, 11, 12))
_FETCH_SESSION_ID_NOT_FOUND = 70
_INVALID_FETCH_SESSION_EPOCH = 71
_SOFTWARE_NAME = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")


class EndPointLike(Protocol):
    @property
    def listener_name(self) -> str: ...
    @property
    def host(self) -> str: ...
    @property
    def port(self) -> int: ...


class ApisConfig(Protocol):
    """The KafkaConfig keys KafkaApis reads (pylog.server.config.KafkaConfig)."""

    @property
    def broker_id(self) -> int: ...
    @property
    def advertised_listeners(self) -> tuple[Any, ...]: ...
    @property
    def auto_create_topics_enable(self) -> bool: ...
    @property
    def num_partitions(self) -> int: ...
    @property
    def default_replication_factor(self) -> int: ...
    @property
    def fetch_max_bytes(self) -> int: ...


def _uuid_out(topic_id: str | None) -> str:
    return topic_id or _ZERO_UUID


class KafkaApis:
    """The request handler the SocketServer calls."""

    def __init__(
        self,
        config: ApisConfig,
        replica_manager: ReplicaManager,
        metadata_store: MetadataStore,
        producer_id_manager: ProducerIdManager | None = None,
    ) -> None:
        self.config = config
        self.replica_manager = replica_manager
        self.metadata_store = metadata_store
        self.producer_ids = producer_id_manager or ProducerIdManager(metadata_store)
        self.broker_id = config.broker_id
        self._endpoints: list[EndPointLike] = list(config.advertised_listeners)
        self._handlers: dict[int, Handler] = {}
        self.register(ApiKey.API_VERSIONS, self._handle_api_versions)
        self.register(ApiKey.METADATA, self._handle_metadata)
        self.register(ApiKey.PRODUCE, self._handle_produce)
        self.register(ApiKey.FETCH, self._handle_fetch)
        self.register(ApiKey.LIST_OFFSETS, self._handle_list_offsets)
        self.register(ApiKey.OFFSET_FOR_LEADER_EPOCH, self._handle_offset_for_leader_epoch)
        self.register(ApiKey.INIT_PRODUCER_ID, self._handle_init_producer_id)

    # ------------------------------------------------------------------ routing

    async def shutdown(self) -> None:
        """Answer every waiting request now (the broker is stopping); runs on
        the event loop, where the purgatories live."""
        self.replica_manager.delayed_fetch_purgatory.shutdown()
        self.replica_manager.delayed_produce_purgatory.shutdown()

    def register(self, api_key: int, handler: Handler) -> None:
        """Route ``api_key`` to ``handler(request, decoded_body) -> body | None``.
        A later registration replaces an earlier one."""
        self._handlers[int(api_key)] = handler

    def registered(self) -> list[int]:
        return sorted(self._handlers)

    def set_advertised_endpoints(self, endpoints: Iterable[EndPointLike]) -> None:
        """The endpoints Metadata names for this broker (the real ports once
        the listeners are bound, when the config said port 0)."""
        self._endpoints = list(endpoints)

    async def handle(self, request: Any) -> list[Any] | None:
        header = request.header
        key = header.api_key
        handler = self._handlers.get(key)
        if handler is None:
            raise CloseConnection(f"api key {key} is not served by this broker")
        try:
            body = decode_request(header, request.frame)
        except UnsupportedVersionError as e:
            if key == ApiKey.API_VERSIONS:
                return self._api_versions_too_high(header)
            raise CloseConnection(str(e)) from e
        except InvalidRequestError as e:
            raise CloseConnection(f"malformed request (api key {key}): {e}") from e
        response = await handler(request, body)
        if response is None:
            return None
        return list(encode_response(header, response))

    # ------------------------------------------------------------------ ApiVersions

    def _versions(self) -> dict[int, tuple[int, int]]:
        """The registered APIs with the versions the codec serves."""
        out: dict[int, tuple[int, int]] = {}
        for key in sorted(self._handlers):
            rng = served_versions(key)
            if rng is not None:
                out[key] = rng
        return out

    def _api_keys(self) -> list[dict[str, int]]:
        return [
            {"api_key": k, "min_version": lo, "max_version": hi}
            for k, (lo, hi) in self._versions().items()
        ]

    def _api_versions_too_high(self, header: Any) -> list[Any]:
        return list(
            encode_api_versions_fallback(header, ErrorCode.UNSUPPORTED_VERSION, self._versions())
        )

    async def _handle_api_versions(self, request: Any, body: Any) -> Mapping[str, Any]:
        if request.header.api_version >= 3:
            name = body.get("client_software_name") or ""
            version = body.get("client_software_version") or ""
            if not (_SOFTWARE_NAME.match(name) and _SOFTWARE_NAME.match(version)):
                return {"error_code": ErrorCode.INVALID_REQUEST, "api_keys": self._api_keys()}
        return {"error_code": ErrorCode.NONE, "api_keys": self._api_keys(), "throttle_time_ms": 0}

    # ------------------------------------------------------------------ Metadata

    def broker_endpoint(self, listener: str) -> tuple[str, int]:
        for ep in self._endpoints:
            if ep.listener_name == listener:
                return ep.host, ep.port
        if self._endpoints:
            return self._endpoints[0].host, self._endpoints[0].port
        return "localhost", 9092

    def _auto_create(self, name: str) -> tuple[int, TopicMetadata | None]:
        cfg = self.config
        try:
            meta = self.metadata_store.create_topic(
                name, cfg.num_partitions, cfg.default_replication_factor
            )
            _log.info("auto-created topic %s with %d partition(s)", name, meta.partitions)
            return ErrorCode.NONE, meta
        except TopicAlreadyExistsError:
            return ErrorCode.NONE, self.metadata_store.topic(name)
        except (InvalidTopicError, InvalidReplicationFactorError) as e:
            return e.code, None
        except KafkaError as e:
            _log.warning("auto-creating topic %s failed: %s", name, e)
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None

    def _topic_entry(self, meta: TopicMetadata, with_ops: bool) -> dict[str, Any]:
        b = self.broker_id
        rm = self.replica_manager
        partitions = []
        for i in range(meta.partitions):
            p = rm.partition(TopicPartition(meta.name, i))
            if p is None:
                partitions.append(
                    {
                        "error_code": ErrorCode.LEADER_NOT_AVAILABLE,
                        "partition_index": i,
                        "leader_id": -1,
                        "leader_epoch": -1,
                        "replica_nodes": [b],
                        "isr_nodes": [],
                        "offline_replicas": [],
                    }
                )
                continue
            partitions.append(
                {
                    "error_code": ErrorCode.NONE,
                    "partition_index": i,
                    "leader_id": p.leader_id if p.leader_id is not None else -1,
                    "leader_epoch": p.leader_epoch,
                    "replica_nodes": p.assigned_replicas,
                    "isr_nodes": p.in_sync_replicas,
                    "offline_replicas": [],
                }
            )
        return {
            "error_code": ErrorCode.NONE,
            "name": meta.name,
            "topic_id": _uuid_out(meta.topic_id),
            "is_internal": meta.is_internal,
            "partitions": partitions,
            "topic_authorized_operations": _TOPIC_OPS
            if with_ops
            else _AUTHORIZED_OPS_NOT_REQUESTED,
        }

    async def _handle_metadata(self, request: Any, body: Any) -> Mapping[str, Any]:
        version = request.header.api_version
        store = self.metadata_store
        with_ops = bool(body.get("include_topic_authorized_operations"))
        allow_auto = bool(body.get("allow_auto_topic_creation", True)) if version >= 4 else True
        allow_auto = allow_auto and self.config.auto_create_topics_enable
        requested = body.topics
        topics: list[dict[str, Any]] = []
        if requested is None or (version == 0 and not requested):
            topics = [self._topic_entry(m, with_ops) for m in store.topics()]
        else:
            for t in requested:
                name = t.get("name")
                topic_id = t.get("topic_id")
                if name is None and topic_id not in (None, _ZERO_UUID):
                    meta = store.topic_by_id(topic_id)
                    if meta is None:
                        # The name is nullable from v12; before, an empty name.
                        unnamed = None if version >= 12 else ""
                        topics.append(
                            self._topic_error(ErrorCode.UNKNOWN_TOPIC_ID, unnamed, topic_id)
                        )
                    else:
                        topics.append(self._topic_entry(meta, with_ops))
                    continue
                if name is None:
                    topics.append(self._topic_error(ErrorCode.INVALID_REQUEST, None, None))
                    continue
                meta = store.topic(name)
                if meta is None:
                    try:
                        validate_topic_name(name)
                    except InvalidTopicError:
                        topics.append(self._topic_error(ErrorCode.INVALID_TOPIC_EXCEPTION, name))
                        continue
                    if allow_auto:
                        code, meta = self._auto_create(name)
                        if meta is None:
                            topics.append(self._topic_error(code, name))
                            continue
                    else:
                        topics.append(self._topic_error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name))
                        continue
                topics.append(self._topic_entry(meta, with_ops))
        host, port = self.broker_endpoint(request.listener)
        response: dict[str, Any] = {
            "throttle_time_ms": 0,
            "brokers": [{"node_id": self.broker_id, "host": host, "port": port, "rack": None}],
            "cluster_id": store.cluster_id,
            "controller_id": self.broker_id,
            "topics": topics,
        }
        if body.get("include_cluster_authorized_operations"):
            response["cluster_authorized_operations"] = _CLUSTER_OPS
        return response

    @staticmethod
    def _topic_error(code: int, name: str | None, topic_id: str | None = None) -> dict[str, Any]:
        return {
            "error_code": code,
            "name": name,
            "topic_id": _uuid_out(topic_id),
            "is_internal": False,
            "partitions": [],
        }

    # ------------------------------------------------------------------ Produce

    async def _handle_produce(self, request: Any, body: Any) -> Mapping[str, Any] | None:
        acks = body.acks
        entries: dict[TopicPartition, Any] = {}
        order: list[tuple[str, list[int]]] = []
        for t in body.topic_data:
            indexes = []
            for p in t.partition_data:
                tp = TopicPartition(t.name, p.index)
                entries[tp] = p.records
                indexes.append(p.index)
            order.append((t.name, indexes))
        if body.get("transactional_id") is not None:
            # No transaction coordinator yet: a transactional append could never
            # be committed or aborted, so it is refused.
            results = {
                tp: {
                    "error_code": ErrorCode.INVALID_TXN_STATE,
                    "error_message": "transactions are not supported by this broker",
                }
                for tp in entries
            }
            if acks == 0:
                raise CloseConnection("transactional produce with acks=0")
            return self._produce_response(order, results)
        appended = await self.replica_manager.append_records(
            body.timeout_ms,
            acks,
            entries,
            before_wait=request.mark_local_complete,
        )
        if acks == 0:
            # Kafka closes the connection when an acks=0 produce fails: the
            # client gets no response, and the closed socket tells it to refresh
            # its metadata.
            for tp, r in appended.items():
                if r.error_code != ErrorCode.NONE:
                    raise CloseConnection(f"acks=0 produce to {tp} failed with {r.error_code}")
            return None
        as_dicts = {
            tp: {
                "error_code": r.error_code,
                "base_offset": r.base_offset,
                "log_append_time_ms": r.log_append_time_ms,
                "log_start_offset": r.log_start_offset,
                "error_message": r.error_message if r.error_code else None,
            }
            for tp, r in appended.items()
        }
        return self._produce_response(order, as_dicts)

    @staticmethod
    def _produce_response(
        order: list[tuple[str, list[int]]], results: Mapping[TopicPartition, dict[str, Any]]
    ) -> Mapping[str, Any]:
        responses = []
        for name, indexes in order:
            parts = []
            for i in indexes:
                r = {
                    "index": i,
                    "base_offset": -1,
                    "log_append_time_ms": -1,
                    "log_start_offset": -1,
                    "record_errors": [],
                }
                r.update(results[TopicPartition(name, i)])
                parts.append(r)
            responses.append({"name": name, "partition_responses": parts})
        return {"responses": responses, "throttle_time_ms": 0}

    # ------------------------------------------------------------------ Fetch

    async def _handle_fetch(self, request: Any, body: Any) -> Mapping[str, Any]:
        version = request.header.api_version
        if version >= 15:
            state = body.get("replica_state")
            replica_id = state.get("replica_id", -1) if state is not None else -1
        else:
            replica_id = body.get("replica_id", -1)
        session_id = body.get("session_id", 0)
        session_epoch = body.get("session_epoch", -1)
        if session_id != 0:
            return {"error_code": _FETCH_SESSION_ID_NOT_FOUND, "session_id": 0, "responses": []}
        if session_epoch not in (-1, 0):
            return {"error_code": _INVALID_FETCH_SESSION_EPOCH, "session_id": 0, "responses": []}
        if replica_id >= 0:
            isolation = FetchIsolation.LOG_END
        elif body.get("isolation_level", 0) == 1:
            isolation = FetchIsolation.TXN_COMMITTED
        else:
            isolation = FetchIsolation.HIGH_WATERMARK
        if version >= 3:
            max_bytes = min(body.get("max_bytes", 0x7FFFFFFF), self.config.fetch_max_bytes)
        else:
            max_bytes = 0x7FFFFFFF
        params = FetchParams(
            replica_id=replica_id,
            max_wait_ms=body.max_wait_ms,
            min_bytes=body.min_bytes,
            max_bytes=max_bytes,
            isolation=isolation,
            hard_max_bytes_limit=version <= 2,
        )
        store = self.metadata_store
        by_id = version >= 13
        # (topic key, topic id, [(partition, index into reqs or an error code)])
        layout: list[tuple[str | None, str | None, list[tuple[int, int, bool]]]] = []
        reqs: list[FetchPartitionRequest] = []
        for t in body.topics:
            if by_id:
                topic_id = t.topic_id
                meta = store.topic_by_id(topic_id)
                name = meta.name if meta is not None else None
            else:
                name, topic_id = t.topic, None
            slots: list[tuple[int, int, bool]] = []
            for p in t.partitions:
                if name is None:
                    slots.append((p.partition, ErrorCode.UNKNOWN_TOPIC_ID, False))
                    continue
                slots.append((p.partition, len(reqs), True))
                reqs.append(
                    FetchPartitionRequest(
                        TopicPartition(name, p.partition),
                        p.fetch_offset,
                        p.partition_max_bytes,
                        current_leader_epoch=p.get("current_leader_epoch", -1),
                        last_fetched_epoch=p.get("last_fetched_epoch", -1),
                        log_start_offset=p.get("log_start_offset", -1),
                    )
                )
            layout.append((name, topic_id, slots))
        results = await self.replica_manager.fetch_messages(
            params, reqs, before_wait=request.mark_local_complete
        )
        committed = isolation is FetchIsolation.TXN_COMMITTED
        responses = []
        for name, topic_id, slots in layout:
            parts = []
            for index, ref, ok in slots:
                r = results[ref] if ok else FetchPartitionResult(ref)
                parts.append(self._fetch_partition(index, r, committed))
            entry: dict[str, Any] = {"partitions": parts}
            if by_id:
                entry["topic_id"] = _uuid_out(topic_id)
            else:
                entry["topic"] = name
            responses.append(entry)
        return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": responses}

    def _fetch_partition(
        self, index: int, r: FetchPartitionResult, committed: bool
    ) -> dict[str, Any]:
        out: dict[str, Any] = {
            "partition_index": index,
            "error_code": r.error_code,
            "high_watermark": r.high_watermark,
            "last_stable_offset": r.last_stable_offset,
            "log_start_offset": r.log_start_offset,
            "aborted_transactions": [] if committed else None,
            "preferred_read_replica": -1,
            "records": r.records,
        }
        if r.diverging_epoch is not None:
            out["diverging_epoch"] = {
                "epoch": r.diverging_epoch[0],
                "end_offset": r.diverging_epoch[1],
            }
        if r.error_code in (ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.NOT_LEADER_OR_FOLLOWER):
            out["current_leader"] = {"leader_id": self.broker_id, "leader_epoch": r.leader_epoch}
        return out

    # ------------------------------------------------------------------ ListOffsets

    async def _handle_list_offsets(self, request: Any, body: Any) -> Mapping[str, Any]:
        version = request.header.api_version
        replica_id = body.get("replica_id", -1)
        isolation: FetchIsolation | None
        if replica_id >= 0:
            isolation = None
        elif body.get("isolation_level", 0) == 1:
            isolation = FetchIsolation.TXN_COMMITTED
        else:
            isolation = FetchIsolation.HIGH_WATERMARK
        rm = self.replica_manager
        topics = []
        for t in body.topics:
            parts = []
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                out: dict[str, Any] = {
                    "partition_index": p.partition_index,
                    "error_code": ErrorCode.NONE,
                }
                try:
                    found = rm.fetch_offset_for_timestamp(
                        tp,
                        p.timestamp,
                        isolation=isolation,
                        current_leader_epoch=p.get("current_leader_epoch", -1),
                    )
                except KafkaError as e:
                    out["error_code"] = e.code
                    found = None
                # Each version carries only its own fields (none is ignorable).
                if version == 0:
                    offset = found.offset if found is not None else -1
                    out["old_style_offsets"] = [offset] if offset >= 0 else []
                elif found is not None:
                    out["timestamp"] = found.timestamp
                    out["offset"] = found.offset
                    if version >= 4:
                        out["leader_epoch"] = found.leader_epoch
                parts.append(out)
            topics.append({"name": t.name, "partitions": parts})
        return {"throttle_time_ms": 0, "topics": topics}

    # ------------------------------------------------------------------ OffsetForLeaderEpoch

    async def _handle_offset_for_leader_epoch(self, request: Any, body: Any) -> Mapping[str, Any]:
        rm = self.replica_manager
        topics = []
        for t in body.topics:
            parts = []
            for p in t.partitions:
                r = rm.last_offset_for_leader_epoch(
                    TopicPartition(t.topic, p.partition),
                    p.get("current_leader_epoch", -1),
                    p.leader_epoch,
                )
                parts.append(
                    {
                        "error_code": r.error_code,
                        "partition": p.partition,
                        "leader_epoch": r.leader_epoch,
                        "end_offset": r.end_offset,
                    }
                )
            topics.append({"topic": t.topic, "partitions": parts})
        return {"throttle_time_ms": 0, "topics": topics}

    # ------------------------------------------------------------------ InitProducerId

    async def _handle_init_producer_id(self, request: Any, body: Any) -> Mapping[str, Any]:
        txn_id = body.get("transactional_id")
        if txn_id is None:
            # Idempotent producer: always a fresh id at epoch 0 (a producer that
            # names its old id and epoch gets a new id too, as from Kafka).
            return {
                "throttle_time_ms": 0,
                "error_code": ErrorCode.NONE,
                "producer_id": self.producer_ids.generate_producer_id(),
                "producer_epoch": 0,
            }
        # No transaction coordinator runs here: a transactional id is answered
        # as by a Kafka whose transaction coordinator is unavailable.
        code = ErrorCode.INVALID_REQUEST if txn_id == "" else ErrorCode.COORDINATOR_NOT_AVAILABLE
        return {"throttle_time_ms": 0, "error_code": code, "producer_id": -1, "producer_epoch": -1}
