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

import re
from collections.abc import Awaitable, Callable, Mapping
from types import MappingProxyType
from typing import Any

from pylog.broker.cluster_apis import ClusterApis
from pylog.broker.config_apis import ConfigApis
from pylog.broker.group_apis import GroupApis
from pylog.broker.produce_fetch_apis import ProduceFetchApis
from pylog.broker.sasl_apis import SaslApis
from pylog.broker.topic_apis import TopicApis
from pylog.coordinator.group_coordinator import GroupCoordinator
from pylog.coordinator.group_metadata_manager import GROUP_METADATA_TOPIC
from pylog.errors import (
    CloseConnection,
    ErrorCode,
    InvalidRequestError,
    UnsupportedVersionError,
)
from pylog.metadata.store import MetadataStore, TopicMetadata
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

Handler = Callable[[Request, Any], Awaitable[Mapping[str, Any] | None]]

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

        data = ProduceFetchApis(config, replica_manager, metadata_store, self.producer_ids)
        cluster = ClusterApis(config, replica_manager, metadata_store)
        configs = ConfigApis(config, metadata_store)
        topics = TopicApis(
            config, replica_manager, metadata_store, configs, on_topic_deleted=self._topic_deleted
        )
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

    def _topic_deleted(self, meta: TopicMetadata) -> None:
        """DeleteTopics removed ``meta`` (Kafka allows deleting the offsets
        topic; only its tools refuse). With __consumer_offsets go its groups:
        the coordinator resigns every partition, so no group, member session
        or rebalance of the old topic lives on to write into the topic the
        next FindCoordinator makes."""
        coordinator = self.group_coordinator
        if coordinator is None or meta.name != GROUP_METADATA_TOPIC:
            return
        for partition in sorted(coordinator.manager.shards):
            coordinator.on_resignation(partition)

    # ------------------------------------------------------------------ routing

    async def shutdown(self) -> None:
        """Answer every waiting request now (the broker is stopping); runs on
        the event loop, where the purgatories live."""
        self.replica_manager.delayed_fetch_purgatory.shutdown()
        self.replica_manager.delayed_produce_purgatory.shutdown()

    async def handle(self, request: Request) -> list[Chunk] | None:
        header = request.header
        key = header.api_key
        handler = self.handlers.get(key)
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
