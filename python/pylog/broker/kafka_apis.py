"""KafkaApis: decodes a request, routes it by API key to its handler, encodes
the answer (docs/internals/request-path.md).

The routing is one table from ApiKey to handler, built in :meth:`KafkaApis.__init__`
from the handlers of each concern, as Kafka splits them:

* ``produce_fetch_apis`` — Produce, Fetch, ListOffsets, OffsetForLeaderEpoch,
  InitProducerId;
* ``topic_apis`` — CreateTopics, DeleteTopics, CreatePartitions, DeleteRecords;
* ``config_apis`` — DescribeConfigs, AlterConfigs, IncrementalAlterConfigs;
* ``cluster_apis`` — Metadata, DescribeCluster, DescribeLogDirs;
* ``group_apis`` — the group APIs, when there is a GroupCoordinator (the
  broker always has one; the data-path tests drive KafkaApis without);
* ``sasl_apis`` — SaslHandshake;
* ApiVersions here, which advertises exactly the table's keys.

A handler that must wait (acks=-1, a Fetch below min_bytes) calls
``request.mark_local_complete()`` first, so the connection's next request may
start while this one waits in the purgatory.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from types import MappingProxyType
from typing import Any, TypeVar

from pylog.broker.cluster_apis import ClusterApis
from pylog.broker.config_apis import ConfigApis
from pylog.broker.group_apis import GroupApis
from pylog.broker.produce_fetch_apis import ProduceFetchApis
from pylog.broker.sasl_apis import SaslApis
from pylog.broker.topic_apis import TopicApis
from pylog.coordinator.group_coordinator import GroupCoordinator
from pylog.errors import (
    CloseConnection,
    ErrorCode,
    InvalidRequestError,
    UnsupportedVersionError,
)
from pylog.metadata.store import MetadataStore
from pylog.network import Chunk, Request
from pylog.protocol import (
    ApiKey,
    RequestHeader,
    decode_request,
    encode_api_versions_fallback,
    encode_response,
    served_versions,
)
from pylog.server.config import KafkaConfig
from pylog.server.producer_id_manager import ProducerIdManager
from pylog.server.replica_manager import ReplicaManager

__all__ = ["Handler", "KafkaApis"]

_T = TypeVar("_T")

Handler = Callable[[Request, Any], Awaitable[Mapping[str, Any] | None]]

#: Frames from this size on are decoded, and answered, off the event loop (``_decode_off_loop``):
#: below it a request holds at most some 30,000 elements, milliseconds of decoding.
OFF_LOOP_DECODE_BYTES = 32 * 1024

_SOFTWARE_NAME = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")


class KafkaApis:
    """The request handler the SocketServer calls."""

    def __init__(
        self,
        config: KafkaConfig,
        replica_manager: ReplicaManager,
        metadata_store: MetadataStore,
        group_coordinator: GroupCoordinator | None = None,
        producer_id_manager: ProducerIdManager | None = None,
    ) -> None:
        self.config = config
        self.replica_manager = replica_manager
        self.metadata_store = metadata_store
        self.group_coordinator = group_coordinator
        self.producer_ids = producer_id_manager or ProducerIdManager(metadata_store)
        self.broker_id = config.broker_id
        self._codec_executor: ThreadPoolExecutor | None = None
        self._decoding: dict[str, asyncio.Future[Any]] = {}  # connection -> its last decode

        data = ProduceFetchApis(config, replica_manager, metadata_store, self.producer_ids)
        cluster = ClusterApis(config, replica_manager, metadata_store)
        configs = ConfigApis(config, metadata_store)
        topics = TopicApis(config, replica_manager, metadata_store, configs)
        sasl = SaslApis()
        handlers: dict[int, Handler] = {
            ApiKey.PRODUCE: data.handle_produce_request,
            ApiKey.FETCH: data.handle_fetch_request,
            ApiKey.LIST_OFFSETS: data.handle_list_offset_request,
            ApiKey.METADATA: cluster.handle_topic_metadata_request,
            ApiKey.SASL_HANDSHAKE: sasl.handle_sasl_handshake_request,
            ApiKey.API_VERSIONS: self.handle_api_versions_request,
            ApiKey.CREATE_TOPICS: topics.handle_create_topics_request,
            ApiKey.DELETE_TOPICS: topics.handle_delete_topics_request,
            ApiKey.DELETE_RECORDS: topics.handle_delete_records_request,
            ApiKey.INIT_PRODUCER_ID: data.handle_init_producer_id_request,
            ApiKey.OFFSET_FOR_LEADER_EPOCH: data.handle_offset_for_leader_epoch_request,
            ApiKey.DESCRIBE_CONFIGS: configs.handle_describe_configs_request,
            ApiKey.ALTER_CONFIGS: configs.handle_alter_configs_request,
            ApiKey.DESCRIBE_LOG_DIRS: cluster.handle_describe_log_dirs_request,
            ApiKey.CREATE_PARTITIONS: topics.handle_create_partitions_request,
            ApiKey.INCREMENTAL_ALTER_CONFIGS: configs.handle_incremental_alter_configs_request,
            ApiKey.DESCRIBE_CLUSTER: cluster.handle_describe_cluster_request,
        }
        if group_coordinator is not None:
            groups = GroupApis(group_coordinator, self.broker_id, cluster.broker_endpoint)
            handlers.update(
                {
                    ApiKey.OFFSET_COMMIT: groups.handle_offset_commit_request,
                    ApiKey.OFFSET_FETCH: groups.handle_offset_fetch_request,
                    ApiKey.FIND_COORDINATOR: groups.handle_find_coordinator_request,
                    ApiKey.JOIN_GROUP: groups.handle_join_group_request,
                    ApiKey.HEARTBEAT: groups.handle_heartbeat_request,
                    ApiKey.LEAVE_GROUP: groups.handle_leave_group_request,
                    ApiKey.SYNC_GROUP: groups.handle_sync_group_request,
                    ApiKey.DESCRIBE_GROUPS: groups.handle_describe_groups_request,
                    ApiKey.LIST_GROUPS: groups.handle_list_groups_request,
                    ApiKey.DELETE_GROUPS: groups.handle_delete_groups_request,
                    ApiKey.OFFSET_DELETE: groups.handle_offset_delete_request,
                }
            )
        self.handlers: Mapping[int, Handler] = MappingProxyType(
            {int(k): h for k, h in sorted(handlers.items())}
        )

    # ------------------------------------------------------------------ routing

    async def shutdown(self) -> None:
        """Answer every waiting request now (the broker is stopping); runs on
        the event loop, where the purgatories live."""
        self.replica_manager.delayed_fetch_purgatory.shutdown()
        self.replica_manager.delayed_produce_purgatory.shutdown()
        if self._codec_executor is not None:
            self._codec_executor.shutdown(wait=False)

    async def handle(self, request: Request) -> list[Chunk] | None:
        header = request.header
        key = header.api_key
        handler = self.handlers.get(key)
        if handler is None:
            raise CloseConnection(f"api key {key} is not served by this broker")
        try:
            if len(request.frame) < OFF_LOOP_DECODE_BYTES and not self._decoding:
                body = decode_request(header, request.frame)
            else:
                body = await self._decode_off_loop(request)
        except UnsupportedVersionError as e:
            if key == ApiKey.API_VERSIONS:
                return self._api_versions_too_high(header)
            raise CloseConnection(str(e)) from e
        except InvalidRequestError as e:
            raise CloseConnection(f"malformed request (api key {key}): {e}") from e
        response = await handler(request, body)
        if response is None:
            return None
        if len(request.frame) < OFF_LOOP_DECODE_BYTES:
            return list(encode_response(header, response))
        # a large request may have asked for a large answer (one entry per element)
        return list(await self._on_codec_thread(encode_response, header, response))

    async def _decode_off_loop(self, request: Request) -> Any:
        """Decode a large frame on the codec's worker thread (its answer is encoded
        there too): a request's arrays may hold up to MAX_REQUEST_ELEMENTS elements,
        a few tenths of a second of decoding that would stall every connection. One
        thread: big decodes (and their transient objects) take turns; the event loop
        keeps its share of the GIL meanwhile.

        A connection's requests reach their handlers in the order they came: one that
        starts while an earlier one of its connection is still decoding there (a
        handler let it start early) is decoded behind it, on the same thread."""
        conn = request.connection_id
        if len(request.frame) < OFF_LOOP_DECODE_BYTES and conn not in self._decoding:
            return decode_request(request.header, request.frame)
        decoding = self._on_codec_thread(decode_request, request.header, request.frame)
        self._decoding[conn] = decoding
        try:
            return await decoding
        finally:
            if self._decoding.get(conn) is decoding:
                del self._decoding[conn]

    def _on_codec_thread(self, fn: Callable[..., _T], *args: Any) -> asyncio.Future[_T]:
        if self._codec_executor is None:
            self._codec_executor = ThreadPoolExecutor(1, thread_name_prefix="pylog-codec")
        return asyncio.get_running_loop().run_in_executor(self._codec_executor, fn, *args)

    # ------------------------------------------------------------------ ApiVersions

    def _versions(self) -> dict[int, tuple[int, int]]:
        """The table's APIs with the versions the codec serves."""
        out: dict[int, tuple[int, int]] = {}
        for key in sorted(self.handlers):
            rng = served_versions(key)
            if rng is not None:
                out[key] = rng
        return out

    def _api_keys(self) -> list[dict[str, int]]:
        return [
            {"api_key": k, "min_version": lo, "max_version": hi}
            for k, (lo, hi) in self._versions().items()
        ]

    def _api_versions_too_high(self, header: RequestHeader) -> list[Chunk]:
        return list(
            encode_api_versions_fallback(header, ErrorCode.UNSUPPORTED_VERSION, self._versions())
        )

    async def handle_api_versions_request(self, request: Request, body: Any) -> Mapping[str, Any]:
        if request.header.api_version >= 3:
            name = body.get("client_software_name") or ""
            version = body.get("client_software_version") or ""
            if not (_SOFTWARE_NAME.match(name) and _SOFTWARE_NAME.match(version)):
                return {"error_code": ErrorCode.INVALID_REQUEST, "api_keys": self._api_keys()}
        return {"error_code": ErrorCode.NONE, "api_keys": self._api_keys(), "throttle_time_ms": 0}
