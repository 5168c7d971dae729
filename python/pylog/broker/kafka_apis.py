"""KafkaApis: decodes a request, routes it by API key to its handler, encodes
the answer (docs/internals/request-path.md).

The routing is one table from ApiKey to handler, built in :meth:`KafkaApis.__init__`
from the handlers of each concern, as Kafka splits them:

* ``produce_fetch_apis`` — Produce, Fetch, ListOffsets, OffsetForLeaderEpoch,
  InitProducerId;
* ``topic_apis`` — CreateTopics, DeleteTopics, CreatePartitions, DeleteRecords;
* ``config_apis`` — DescribeConfigs, AlterConfigs, IncrementalAlterConfigs;
* ``cluster_apis`` — Metadata, DescribeCluster, DescribeLogDirs, AlterReplicaLogDirs;
* ``group_apis`` — the group APIs, when there is a GroupCoordinator (the
  broker always has one; the data-path tests drive KafkaApis without);
* ``sasl_apis`` — SaslHandshake, SaslAuthenticate (off SASL listeners: on
  them the network layer's authenticator answers);
* ``scram_apis`` — DescribeUserScramCredentials, AlterUserScramCredentials;
* ``acl_apis`` — CreateAcls, DescribeAcls, DeleteAcls;
* ``transaction_apis`` — InitProducerId (the transactional path; the
  idempotent one stays ``produce_fetch_apis``'), AddPartitionsToTxn,
  AddOffsetsToTxn, EndTxn, TxnOffsetCommit, DescribeTransactions,
  ListTransactions, when there is a TransactionCoordinator;
* ``client_quota_apis`` — DescribeClientQuotas, AlterClientQuotas (DESCRIBE_CONFIGS /
  ALTER_CONFIGS on the cluster, as Kafka);
* ``controller_apis`` — the controller's LeaderAndIsr, UpdateMetadata and
  StopReplica (replication between brokers), and what is asked of the
  controller: ControlledShutdown, ElectLeaders, AlterPartitionReassignments,
  ListPartitionReassignments;
* ApiVersions here, which advertises exactly the table's keys.

With an authorizer (``authorizer.class.name``) every handler checks what
Kafka's KafkaApis checks (``auth_helper``); the APIs that need one operation
on the cluster for the whole request (the controller's requests to brokers,
reassignments, the SCRAM APIs) are checked here, by :func:`_cluster_gated`,
and refused with CLUSTER_AUTHORIZATION_FAILED before their handler runs.

A handler that must wait (acks=-1, a Fetch below min_bytes) calls
``request.mark_local_complete()`` first, so the connection's next request may
start while this one waits in the purgatory.

Client quotas are applied here, to every handler's answer, as Kafka's
KafkaApis and RequestHandlerHelper apply them (``_within_quotas``): the
request time of every request, the bytes of a Produce, the bytes of a Fetch's
answer — a Fetch over its quota is answered with no data, to be fetched again
once the client has waited.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from types import MappingProxyType
from typing import TypeAlias, TypeVar

from pylog.broker.acl_apis import AclApis
from pylog.broker.auth_helper import AuthHelper
from pylog.broker.client_metrics_apis import ClientMetricsApis
from pylog.broker.client_quota_apis import ClientQuotaApis
from pylog.broker.cluster_apis import ClusterApis
from pylog.broker.config_apis import ConfigApis
from pylog.broker.consumer_group_apis import ConsumerGroupApis
from pylog.broker.controller_apis import ControllerApis
from pylog.broker.describe_producers_apis import DescribeProducersApis
from pylog.broker.group_apis import GroupApis
from pylog.broker.produce_fetch_apis import ProduceFetchApis
from pylog.broker.sasl_apis import SaslApis
from pylog.broker.scram_apis import ScramApis
from pylog.broker.share_group_apis import SHARE_VERSION_FEATURE, ShareGroupApis, add_feature
from pylog.broker.topic_apis import TopicApis
from pylog.broker.transaction_apis import TransactionApis
from pylog.broker.txn_marker_apis import TxnMarkerApis
from pylog.broker.update_features_apis import UpdateFeaturesApis
from pylog.broker.zk_broker_apis import ZkBrokerApis
from pylog.common.transaction_version import FEATURE_NAME as TRANSACTION_VERSION_FEATURE
from pylog.common.transaction_version import MAX_TRANSACTION_VERSION
from pylog.controller.kafka_controller import KafkaController
from pylog.coordinator.group_coordinator import GroupCoordinator
from pylog.coordinator.group_metadata_manager import GROUP_METADATA_TOPIC
from pylog.errors import (
    CloseConnection,
    ErrorCode,
    InvalidRequestError,
    UnsupportedVersionError,
)
from pylog.metadata.finalized_feature_cache import FinalizedFeatureCache
from pylog.metadata.store import MetadataStore, TopicMetadata
from pylog.network import Chunk, Request
from pylog.protocol import (
    ApiKey,
    Body,
    RequestHeader,
    Struct,
    decode_request,
    encode_api_versions_fallback,
    encode_response,
    messages,
    produce_request_elements,
    served_versions,
)
from pylog.protocol.messages import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    AllocateProducerIdsRequest,
    AllocateProducerIdsResponse,
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    AlterConfigsRequest,
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    AlterPartitionRequest,
    AlterPartitionResponse,
    AlterReplicaLogDirsRequest,
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    ApiVersionsRequest,
    ApiVersionsResponse,
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    CreateAclsRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteAclsRequest,
    DeleteGroupsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
    DescribeAclsRequest,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
    DescribeClusterRequest,
    DescribeConfigsRequest,
    DescribeGroupsRequest,
    DescribeLogDirsRequest,
    DescribeProducersRequest,
    DescribeTopicPartitionsRequest,
    DescribeTransactionsRequest,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    EndTxnRequest,
    FetchRequest,
    FindCoordinatorRequest,
    GetTelemetrySubscriptionsRequest,
    HeartbeatRequest,
    IncrementalAlterConfigsRequest,
    InitProducerIdRequest,
    JoinGroupRequest,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    LeaveGroupRequest,
    ListConfigResourcesRequest,
    ListGroupsRequest,
    ListOffsetsRequest,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    ListTransactionsRequest,
    MetadataRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    OffsetForLeaderEpochRequest,
    ProduceRequest,
    PushTelemetryRequest,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
    StopReplicaRequest,
    StopReplicaResponse,
    SyncGroupRequest,
    TxnOffsetCommitRequest,
    UpdateFeaturesRequest,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
    WriteTxnMarkersRequest,
)
from pylog.protocol.messages import api_versions_response as avr
from pylog.protocol.messages.alter_client_quotas_response import (
    EntityData as AlterQuotaEntity,
)
from pylog.protocol.messages.alter_client_quotas_response import (
    EntryData as AlterQuotaEntry,
)
from pylog.protocol.messages.alter_user_scram_credentials_response import (
    AlterUserScramCredentialsResult,
)
from pylog.protocol.messages.api_versions_response import ApiVersion
from pylog.protocol.messages.elect_leaders_response import PartitionResult, ReplicaElectionResult
from pylog.security.acl_authorizer import AclAuthorizer
from pylog.security.acl_operation import AclOperation
from pylog.server.client_metrics_manager import ClientMetricsManager
from pylog.server.config import KafkaConfig
from pylog.server.dynamic_broker_config import DynamicBrokerConfig
from pylog.server.producer_id_manager import ProducerIdManager
from pylog.server.quota_factory import QuotaManagers, now_ms
from pylog.server.replica_manager import ReplicaManager
from pylog.transaction.transaction_coordinator import TransactionCoordinator

__all__ = ["Handler", "KafkaApis", "Route"]

_Req = TypeVar("_Req", bound=messages.Request)

#: A handler of requests decoded as ``_Req`` (``Handler[ProduceRequest]``): it
#: returns the response body — its response class (``ListOffsetsResponse``), or
#: dicts of the same fields typed by ``response_dicts`` (Produce and Fetch, for
#: speed; topic and cluster handlers, for now) — or None for no response.
Handler: TypeAlias = Callable[[Request, _Req], Awaitable[Body | None]]


class Route:
    """One entry of the handler table: the request class an api key decodes to
    and its handler, which takes exactly that class (checked where the table is
    built: ``Route(ProduceRequest, data.handle_produce_request)``)."""

    __slots__ = ("decode", "request_class")

    request_class: type[Struct]  # one of messages.Request's classes
    #: Decodes the request's body as ``request_class`` (the codec's errors
    #: propagate) and returns the handler's call on it, to await.
    decode: Callable[[Request], Callable[[], Awaitable[Body | None]]]

    def __init__(self, request_class: type[_Req], handler: Handler[_Req]) -> None:
        self.request_class = request_class

        def decode(request: Request) -> Callable[[], Awaitable[Body | None]]:
            body = decode_request(request.header, request.frame, request_class)
            return lambda: handler(request, body)

        self.decode = decode


_T = TypeVar("_T")
#: A decoded request bound to its handler, to await (what Route.decode returns).
_Call: TypeAlias = Callable[[], Awaitable[Body | None]]

#: Frames from this size on are decoded, and answered, off the event loop (``_decode_off_loop``):
#: below it a request holds at most some 30,000 elements, milliseconds of decoding.
OFF_LOOP_DECODE_BYTES = 32 * 1024

#: A Produce frame of any size whose topics and partitions number at most this many
#: is decoded, and answered, on the event loop (``produce_request_elements`` tells, in
#: microseconds): its records stay views of the frame, so its decode costs what a small
#: frame's does, and the worker thread's round trip (two wake-ups) is saved. The
#: append of its large batches still leaves the loop (ReplicaManager).
INLINE_PRODUCE_ELEMENTS = 1_000

#: Kafka's cluster actions, answered without throttling (sendResponseExemptThrottle).
_THROTTLE_EXEMPT = frozenset(
    {
        ApiKey.LEADER_AND_ISR,
        ApiKey.STOP_REPLICA,
        ApiKey.UPDATE_METADATA,
        ApiKey.CONTROLLED_SHUTDOWN,
        ApiKey.ALTER_PARTITION,
        ApiKey.ALLOCATE_PRODUCER_IDS,
    }
)

_SOFTWARE_NAME = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")


def _record_errors(response: Body) -> int:
    """The record errors a Produce answer names (one per refused record, KIP-467):
    what, beside its partitions, its encoding costs."""
    if not isinstance(response, Mapping):
        return 0
    return sum(
        len(p.get("record_errors") or ())
        for t in response.get("responses") or ()
        for p in t.get("partition_responses") or ()
    )


class KafkaApis:
    """The request handler the SocketServer calls."""

    def __init__(
        self,
        config: KafkaConfig,
        replica_manager: ReplicaManager,
        metadata_store: MetadataStore,
        group_coordinator: GroupCoordinator | None = None,
        producer_id_manager: ProducerIdManager | None = None,
        controller: Callable[[], KafkaController | None] | None = None,
        is_controller: Callable[[], bool] = lambda: True,
        authorizer: AclAuthorizer | None = None,
        quotas: QuotaManagers | None = None,
        dynamic_config: DynamicBrokerConfig | None = None,
        txn_coordinator: TransactionCoordinator | None = None,
    ) -> None:
        self.config = config
        self.quotas = quotas
        self.replica_manager = replica_manager
        self.metadata_store = metadata_store
        self.group_coordinator = group_coordinator
        self.txn_coordinator = txn_coordinator
        self.producer_ids = producer_id_manager or ProducerIdManager(metadata_store)
        self.broker_id = config.broker_id
        self._codec_executor: ThreadPoolExecutor | None = None
        self._decoding: dict[str, asyncio.Future[_Call]] = {}  # connection -> its last decode
        self.share_groups: ShareGroupApis | None = None
        #: The finalized features ApiVersions advertises (KIP-584).
        self.features = FinalizedFeatureCache(metadata_store)

        auth = self.auth = AuthHelper(authorizer)
        data = ProduceFetchApis(config, replica_manager, metadata_store, self.producer_ids)
        cluster = ClusterApis(config, replica_manager, metadata_store)
        configs = ConfigApis(config, metadata_store, dynamic_config)
        topics = TopicApis(
            config, replica_manager, metadata_store, configs, on_topic_deleted=self._topic_deleted
        )
        sasl = SaslApis()
        controller_apis = ControllerApis(
            replica_manager, group_coordinator, controller, txn_coordinator=txn_coordinator
        )
        zk_broker_apis = ZkBrokerApis(controller or (lambda: None))
        scram = ScramApis(metadata_store, is_controller)
        acls = AclApis(auth)
        txn_markers = TxnMarkerApis(config, replica_manager, group_coordinator)
        producers = DescribeProducersApis(replica_manager, metadata_store)
        txn_markers.auth = producers.auth = auth
        data.auth = cluster.auth = configs.auth = topics.auth = auth
        if quotas is not None:
            topics.mutation_quotas = quotas.controller_mutation

        def gated(
            operation: AclOperation,
            handler: Handler[_Req],
            refused: Callable[[Request, _Req], Body],
        ) -> Handler[_Req]:
            return _cluster_gated(auth, operation, handler, refused)

        _CA, _ALTER, _DESCRIBE = (
            AclOperation.CLUSTER_ACTION,
            AclOperation.ALTER,
            AclOperation.DESCRIBE,
        )
        _CAF = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        client_quotas = ClientQuotaApis(metadata_store)
        #: KIP-714's client telemetry: subscriptions, and the metrics clients push.
        self.client_metrics = ClientMetricsManager(
            int(config.get("telemetry.max.bytes")), metadata_store
        )
        telemetry = ClientMetricsApis(self.client_metrics, metadata_store)
        telemetry.auth = auth
        features = UpdateFeaturesApis(metadata_store, auth, is_controller)
        handlers: dict[int, Route] = {
            ApiKey.PRODUCE: Route(ProduceRequest, data.handle_produce_request),
            ApiKey.FETCH: Route(FetchRequest, data.handle_fetch_request),
            ApiKey.LIST_OFFSETS: Route(ListOffsetsRequest, data.handle_list_offset_request),
            ApiKey.METADATA: Route(MetadataRequest, cluster.handle_topic_metadata_request),
            ApiKey.SASL_HANDSHAKE: Route(SaslHandshakeRequest, sasl.handle_sasl_handshake_request),
            ApiKey.SASL_AUTHENTICATE: Route(
                SaslAuthenticateRequest, sasl.handle_sasl_authenticate_request
            ),
            ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: Route(
                DescribeUserScramCredentialsRequest,
                gated(
                    _DESCRIBE,
                    scram.handle_describe_user_scram_credentials_request,
                    lambda r, b: DescribeUserScramCredentialsResponse(
                        error_code=_CAF, error_message=_CLUSTER_REFUSED
                    ),
                ),
            ),
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS: Route(
                AlterUserScramCredentialsRequest,
                gated(
                    _ALTER,
                    scram.handle_alter_user_scram_credentials_request,
                    lambda r, b: AlterUserScramCredentialsResponse(
                        results=[
                            AlterUserScramCredentialsResult(
                                user=u, error_code=_CAF, error_message=_CLUSTER_REFUSED
                            )
                            for u in dict.fromkeys(
                                [x.name for x in b.upsertions] + [x.name for x in b.deletions]
                            )
                        ]
                    ),
                ),
            ),
            ApiKey.DESCRIBE_ACLS: Route(DescribeAclsRequest, acls.handle_describe_acls_request),
            ApiKey.CREATE_ACLS: Route(CreateAclsRequest, acls.handle_create_acls_request),
            ApiKey.DELETE_ACLS: Route(DeleteAclsRequest, acls.handle_delete_acls_request),
            ApiKey.DESCRIBE_CLIENT_QUOTAS: Route(
                DescribeClientQuotasRequest,
                gated(
                    AclOperation.DESCRIBE_CONFIGS,
                    client_quotas.handle_describe_client_quotas_request,
                    lambda r, b: DescribeClientQuotasResponse(
                        error_code=_CAF, error_message=_CLUSTER_REFUSED, entries=None
                    ),
                ),
            ),
            ApiKey.ALTER_CLIENT_QUOTAS: Route(
                AlterClientQuotasRequest,
                gated(
                    AclOperation.ALTER_CONFIGS,
                    client_quotas.handle_alter_client_quotas_request,
                    lambda r, b: AlterClientQuotasResponse(
                        entries=[
                            AlterQuotaEntry(
                                error_code=_CAF,
                                error_message=_CLUSTER_REFUSED,
                                entity=[
                                    AlterQuotaEntity(
                                        entity_type=x.entity_type, entity_name=x.entity_name
                                    )
                                    for x in e.entity
                                ],
                            )
                            for e in b.entries
                        ]
                    ),
                ),
            ),
            ApiKey.API_VERSIONS: Route(ApiVersionsRequest, self.handle_api_versions_request),
            ApiKey.GET_TELEMETRY_SUBSCRIPTIONS: Route(
                GetTelemetrySubscriptionsRequest,
                telemetry.handle_get_telemetry_subscriptions_request,
            ),
            ApiKey.PUSH_TELEMETRY: Route(
                PushTelemetryRequest, telemetry.handle_push_telemetry_request
            ),
            ApiKey.LIST_CONFIG_RESOURCES: Route(
                ListConfigResourcesRequest, telemetry.handle_list_config_resources_request
            ),
            ApiKey.UPDATE_FEATURES: Route(
                UpdateFeaturesRequest, features.handle_update_features_request
            ),
            ApiKey.CREATE_TOPICS: Route(CreateTopicsRequest, topics.handle_create_topics_request),
            ApiKey.DELETE_TOPICS: Route(DeleteTopicsRequest, topics.handle_delete_topics_request),
            ApiKey.DELETE_RECORDS: Route(
                DeleteRecordsRequest, topics.handle_delete_records_request
            ),
            ApiKey.INIT_PRODUCER_ID: Route(
                InitProducerIdRequest, data.handle_init_producer_id_request
            ),
            ApiKey.WRITE_TXN_MARKERS: Route(
                WriteTxnMarkersRequest, txn_markers.handle_write_txn_markers_request
            ),
            ApiKey.DESCRIBE_PRODUCERS: Route(
                DescribeProducersRequest, producers.handle_describe_producers_request
            ),
            ApiKey.OFFSET_FOR_LEADER_EPOCH: Route(
                OffsetForLeaderEpochRequest, data.handle_offset_for_leader_epoch_request
            ),
            ApiKey.DESCRIBE_CONFIGS: Route(
                DescribeConfigsRequest, configs.handle_describe_configs_request
            ),
            ApiKey.ALTER_CONFIGS: Route(AlterConfigsRequest, configs.handle_alter_configs_request),
            ApiKey.DESCRIBE_LOG_DIRS: Route(
                DescribeLogDirsRequest, cluster.handle_describe_log_dirs_request
            ),
            ApiKey.ALTER_REPLICA_LOG_DIRS: Route(
                AlterReplicaLogDirsRequest, cluster.handle_alter_replica_log_dirs_request
            ),
            ApiKey.CREATE_PARTITIONS: Route(
                CreatePartitionsRequest, topics.handle_create_partitions_request
            ),
            ApiKey.INCREMENTAL_ALTER_CONFIGS: Route(
                IncrementalAlterConfigsRequest, configs.handle_incremental_alter_configs_request
            ),
            ApiKey.DESCRIBE_CLUSTER: Route(
                DescribeClusterRequest, cluster.handle_describe_cluster_request
            ),
            ApiKey.DESCRIBE_TOPIC_PARTITIONS: Route(
                DescribeTopicPartitionsRequest, cluster.handle_describe_topic_partitions_request
            ),
            ApiKey.LEADER_AND_ISR: Route(
                LeaderAndIsrRequest,
                gated(
                    _CA,
                    controller_apis.handle_leader_and_isr_request,
                    lambda r, b: LeaderAndIsrResponse(error_code=_CAF),
                ),
            ),
            ApiKey.UPDATE_METADATA: Route(
                UpdateMetadataRequest,
                gated(
                    _CA,
                    controller_apis.handle_update_metadata_request,
                    lambda r, b: UpdateMetadataResponse(error_code=_CAF),
                ),
            ),
            ApiKey.STOP_REPLICA: Route(
                StopReplicaRequest,
                gated(
                    _CA,
                    controller_apis.handle_stop_replica_request,
                    lambda r, b: StopReplicaResponse(error_code=_CAF),
                ),
            ),
            ApiKey.CONTROLLED_SHUTDOWN: Route(
                ControlledShutdownRequest,
                gated(
                    _CA,
                    controller_apis.handle_controlled_shutdown_request,
                    lambda r, b: ControlledShutdownResponse(error_code=_CAF),
                ),
            ),
            # A Kafka 3.x broker's requests to its controller (the mixed cluster).
            ApiKey.ALTER_PARTITION: Route(
                AlterPartitionRequest,
                gated(
                    _CA,
                    zk_broker_apis.handle_alter_partition_request,
                    lambda r, b: AlterPartitionResponse(error_code=_CAF),
                ),
            ),
            ApiKey.ALLOCATE_PRODUCER_IDS: Route(
                AllocateProducerIdsRequest,
                gated(
                    _CA,
                    zk_broker_apis.handle_allocate_producer_ids_request,
                    lambda r, b: AllocateProducerIdsResponse(error_code=_CAF),
                ),
            ),
            ApiKey.ELECT_LEADERS: Route(
                ElectLeadersRequest,
                gated(_ALTER, controller_apis.handle_elect_leaders_request, _elect_refused),
            ),
            ApiKey.ALTER_PARTITION_REASSIGNMENTS: Route(
                AlterPartitionReassignmentsRequest,
                gated(
                    _ALTER,
                    controller_apis.handle_alter_partition_reassignments_request,
                    lambda r, b: AlterPartitionReassignmentsResponse(
                        error_code=_CAF, error_message=_CLUSTER_REFUSED
                    ),
                ),
            ),
            ApiKey.LIST_PARTITION_REASSIGNMENTS: Route(
                ListPartitionReassignmentsRequest,
                gated(
                    _DESCRIBE,
                    controller_apis.handle_list_partition_reassignments_request,
                    lambda r, b: ListPartitionReassignmentsResponse(
                        error_code=_CAF, error_message=_CLUSTER_REFUSED
                    ),
                ),
            ),
        }
        transactions: TransactionApis | None = None
        if txn_coordinator is not None:
            transactions = TransactionApis(
                txn_coordinator,
                group_coordinator,
                replica_manager,
                metadata_store,
                replica_manager.metadata_cache,
                self.broker_id,
                cluster.broker_endpoint,
                data.handle_init_producer_id_request,
            )
            transactions.auth = auth
            handlers.update(
                {
                    ApiKey.INIT_PRODUCER_ID: Route(
                        InitProducerIdRequest, transactions.handle_init_producer_id_request
                    ),
                    ApiKey.ADD_PARTITIONS_TO_TXN: Route(
                        AddPartitionsToTxnRequest,
                        transactions.handle_add_partitions_to_txn_request,
                    ),
                    ApiKey.ADD_OFFSETS_TO_TXN: Route(
                        AddOffsetsToTxnRequest, transactions.handle_add_offsets_to_txn_request
                    ),
                    ApiKey.END_TXN: Route(EndTxnRequest, transactions.handle_end_txn_request),
                    ApiKey.TXN_OFFSET_COMMIT: Route(
                        TxnOffsetCommitRequest, transactions.handle_txn_offset_commit_request
                    ),
                    ApiKey.DESCRIBE_TRANSACTIONS: Route(
                        DescribeTransactionsRequest,
                        transactions.handle_describe_transactions_request,
                    ),
                    ApiKey.LIST_TRANSACTIONS: Route(
                        ListTransactionsRequest, transactions.handle_list_transactions_request
                    ),
                }
            )
        if group_coordinator is not None:
            groups = GroupApis(
                group_coordinator,
                self.broker_id,
                cluster.broker_endpoint,
                metadata_cache=replica_manager.metadata_cache,
                transactions=transactions,
            )
            groups.auth = auth
            handlers.update(
                {
                    ApiKey.OFFSET_COMMIT: Route(
                        OffsetCommitRequest, groups.handle_offset_commit_request
                    ),
                    ApiKey.OFFSET_FETCH: Route(
                        OffsetFetchRequest, groups.handle_offset_fetch_request
                    ),
                    ApiKey.FIND_COORDINATOR: Route(
                        FindCoordinatorRequest, groups.handle_find_coordinator_request
                    ),
                    ApiKey.JOIN_GROUP: Route(JoinGroupRequest, groups.handle_join_group_request),
                    ApiKey.HEARTBEAT: Route(HeartbeatRequest, groups.handle_heartbeat_request),
                    ApiKey.LEAVE_GROUP: Route(LeaveGroupRequest, groups.handle_leave_group_request),
                    ApiKey.SYNC_GROUP: Route(SyncGroupRequest, groups.handle_sync_group_request),
                    ApiKey.DESCRIBE_GROUPS: Route(
                        DescribeGroupsRequest, groups.handle_describe_groups_request
                    ),
                    ApiKey.LIST_GROUPS: Route(ListGroupsRequest, groups.handle_list_groups_request),
                    ApiKey.DELETE_GROUPS: Route(
                        DeleteGroupsRequest, groups.handle_delete_groups_request
                    ),
                    ApiKey.OFFSET_DELETE: Route(
                        OffsetDeleteRequest, groups.handle_offset_delete_request
                    ),
                }
            )
            if group_coordinator.consumer_protocol:
                consumer_groups = ConsumerGroupApis(group_coordinator)
                consumer_groups.auth = auth
                handlers[ApiKey.CONSUMER_GROUP_HEARTBEAT] = Route(
                    ConsumerGroupHeartbeatRequest,
                    consumer_groups.handle_consumer_group_heartbeat_request,
                )
                handlers[ApiKey.CONSUMER_GROUP_DESCRIBE] = Route(
                    ConsumerGroupDescribeRequest,
                    consumer_groups.handle_consumer_group_describe_request,
                )
            if "share" in config.get("group.coordinator.rebalance.protocols"):
                shares = self.share_groups = ShareGroupApis(
                    config, group_coordinator, replica_manager, metadata_store
                )
                shares.auth = auth
                handlers.update({k: Route(c, h) for k, (c, h) in shares.routes().items()})
                controller_apis.share_coordinator = shares.state
                groups.share_coordinator = shares.state
        self.handlers: Mapping[int, Route] = MappingProxyType(
            {int(k): h for k, h in sorted(handlers.items())}
        )

    def _topic_deleted(self, meta: TopicMetadata) -> None:
        """DeleteTopics removed ``meta``: its groups' offsets of it go. (Kafka
        allows deleting the offsets topic; only its tools refuse.) With
        __consumer_offsets go its groups:
        the coordinator resigns every partition, so no group, member session
        or rebalance of the old topic lives on to write into the topic the
        next FindCoordinator makes."""
        coordinator = self.group_coordinator
        if coordinator is None:
            return
        if meta.name != GROUP_METADATA_TOPIC:
            # On a cluster every broker's coordinator hears of it from the
            # controller's UpdateMetadata (controller_apis), this one included.
            if not coordinator.manager.controller_managed:
                coordinator.on_topics_deleted([meta.name])
            return
        for partition in sorted(coordinator.manager.shards):
            coordinator.on_resignation(partition)

    # ------------------------------------------------------------------ routing

    async def shutdown(self) -> None:
        """Answer every waiting request now (the broker is stopping); runs on
        the event loop, where the purgatories live); the replica fetchers stop."""
        await self.replica_manager.shutdown_replica_fetchers()
        self.replica_manager.delayed_fetch_purgatory.shutdown()
        self.replica_manager.delayed_produce_purgatory.shutdown()
        if self.share_groups is not None:
            self.share_groups.shutdown()
        if self._codec_executor is not None:
            self._codec_executor.shutdown(wait=False)

    async def handle(self, request: Request) -> list[Chunk] | None:
        header = request.header
        key = header.api_key
        route = self.handlers.get(key)
        if route is None:
            raise CloseConnection(f"api key {key} is not served by this broker")
        cheap = len(request.frame) < OFF_LOOP_DECODE_BYTES or (
            key == ApiKey.PRODUCE
            and produce_request_elements(header, request.frame, INLINE_PRODUCE_ELEMENTS) is not None
        )
        try:
            if cheap and not self._decoding:
                call = route.decode(request)
            else:
                call = await self._decode_off_loop(request, route, cheap)
        except UnsupportedVersionError as e:
            if key == ApiKey.API_VERSIONS:
                return self._api_versions_too_high(header)
            raise CloseConnection(str(e)) from e
        except InvalidRequestError as e:
            raise CloseConnection(f"malformed request (api key {key}): {e}") from e
        response = await call()
        quotas = self.quotas
        if (
            quotas is not None
            and key not in _THROTTLE_EXEMPT
            and not request.quota_exempt
            and quotas.any_enabled()
        ):
            return self._within_quotas(quotas, request, response)
        if response is None:
            return None
        if cheap and (key != ApiKey.PRODUCE or _record_errors(response) <= INLINE_PRODUCE_ELEMENTS):
            return list(encode_response(header, response))
        # a large request may have asked for a large answer (one entry per element)
        return list(await self._on_codec_thread(encode_response, header, response))

    def _within_quotas(
        self, quotas: QuotaManagers, request: Request, response: Body | None
    ) -> list[Chunk] | None:
        """Record the request against its client's quotas; answer with the
        throttle time they call for (and mute the connection as long)."""
        header = request.header
        principal, client_id, now = request.principal, header.client_id or "", now_ms()
        local_ns = (request.local_complete_ns or time.monotonic_ns()) - request.dequeued_ns
        # ClientRequestQuotaManager's unit: percent of one thread for one second
        request_throttle = quotas.request.maybe_record_and_get_throttle_time_ms(
            principal, client_id, max(local_ns, 0) * 100 / 1e9, now
        )
        throttle, by = request_throttle, quotas.request
        chunks: list[Chunk] | None = None
        if header.api_key == ApiKey.PRODUCE:
            produce = quotas.produce.maybe_record_and_get_throttle_time_ms(
                principal, client_id, request.size, now
            )
            if produce > throttle:
                throttle, by = produce, quotas.produce
        elif header.api_key == ApiKey.FETCH and isinstance(response, Mapping):
            chunks = list(encode_response(header, response))
            size = sum(len(c) for c in chunks)
            fetch = quotas.fetch.maybe_record_and_get_throttle_time_ms(
                principal, client_id, size, now
            )
            if fetch > throttle:
                throttle, by = fetch, quotas.fetch
            if throttle > 0:
                # Kafka answers a throttled Fetch with no data (the client
                # fetches the same offsets again later), and takes its bytes back.
                quotas.fetch.unrecord(principal, client_id, size, now)
                response = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0,
                            "responses": []}  # fmt: skip
                chunks = None
        if throttle > 0 and throttle > request.throttle_ms:
            # (a handler may have set a longer one: the controller mutation quota's)
            by.record_throttle(principal, client_id, throttle, now)
            request.throttle_ms = throttle
            if isinstance(response, Struct):
                if "throttle_time_ms" in response._fields:
                    response.throttle_time_ms = throttle  # type: ignore[attr-defined]
            elif isinstance(response, MutableMapping) and "throttle_time_ms" in response:
                response["throttle_time_ms"] = throttle
        if response is None:
            return None
        if chunks is None:
            chunks = list(encode_response(header, response))
        return chunks

    async def _decode_off_loop(self, request: Request, route: Route, cheap: bool) -> _Call:
        """Decode a large frame on the codec's worker thread (its answer is encoded
        there too): a request's arrays may hold up to MAX_REQUEST_ELEMENTS elements,
        a few tenths of a second of decoding that would stall every connection. One
        thread: big decodes (and their transient objects) take turns; the event loop
        keeps its share of the GIL meanwhile.

        A connection's requests reach their handlers in the order they came: one that
        starts while an earlier one of its connection is still decoding there (a
        handler let it start early) is decoded behind it, on the same thread."""
        conn = request.connection_id
        if cheap and conn not in self._decoding:
            return route.decode(request)
        decoding = self._on_codec_thread(route.decode, request)
        self._decoding[conn] = decoding
        try:
            return await decoding
        finally:
            if self._decoding.get(conn) is decoding:
                del self._decoding[conn]

    def _on_codec_thread(self, fn: Callable[..., _T], *args: object) -> asyncio.Future[_T]:
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

    def _api_keys(self) -> list[ApiVersion]:
        return [
            ApiVersion(api_key=k, min_version=lo, max_version=hi)
            for k, (lo, hi) in self._versions().items()
        ]

    def _api_versions_too_high(self, header: RequestHeader) -> list[Chunk]:
        return list(
            encode_api_versions_fallback(header, ErrorCode.UNSUPPORTED_VERSION, self._versions())
        )

    async def handle_api_versions_request(
        self, request: Request, body: ApiVersionsRequest
    ) -> ApiVersionsResponse:
        if request.header.api_version >= 3:
            name = body.client_software_name
            version = body.client_software_version
            if not (_SOFTWARE_NAME.match(name) and _SOFTWARE_NAME.match(version)):
                return ApiVersionsResponse(
                    error_code=ErrorCode.INVALID_REQUEST, api_keys=self._api_keys()
                )
            # what KIP-714's subscriptions may match on
            self.client_metrics.record_client_information(request.connection_id, name, version)
        response = ApiVersionsResponse(
            error_code=ErrorCode.NONE, api_keys=self._api_keys(), throttle_time_ms=0
        )
        if self.share_groups is not None:
            add_feature(response, *SHARE_VERSION_FEATURE)
        self._add_transaction_version(response)
        return response

    def _add_transaction_version(self, response: ApiVersionsResponse) -> None:
        """``transaction.version``: supported 0..2, finalized at the cluster's
        level (2 unless lowered, KIP-890); a Kafka 4 producer runs
        transactions v2 when it sees 2."""
        levels, epoch = self.features.features()
        level = levels[TRANSACTION_VERSION_FEATURE]
        response.supported_features = [
            *(response.supported_features or []),
            avr.SupportedFeatureKey(
                name=TRANSACTION_VERSION_FEATURE,
                min_version=0,
                max_version=int(MAX_TRANSACTION_VERSION),
            ),
        ]
        response.finalized_features = [
            *(response.finalized_features or []),
            avr.FinalizedFeatureKey(
                name=TRANSACTION_VERSION_FEATURE, max_version_level=level, min_version_level=level
            ),
        ]
        response.finalized_features_epoch = max(response.finalized_features_epoch or 0, epoch)


_CLUSTER_REFUSED = "Cluster authorization failed."


def _cluster_gated(
    auth: AuthHelper,
    operation: AclOperation,
    handler: Handler[_Req],
    refused: Callable[[Request, _Req], Body],
) -> Handler[_Req]:
    """``handler``, run only when the request may ``operation`` on the
    cluster; ``refused`` builds the answer otherwise (nothing changed)."""

    async def checked(request: Request, body: _Req) -> Body | None:
        if not auth.authorize_cluster(request, operation):
            return refused(request, body)
        return await handler(request, body)

    return checked


def _elect_refused(request: Request, body: ElectLeadersRequest) -> ElectLeadersResponse:
    """Kafka's refusal: the error at the top and on every partition named."""
    code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    return ElectLeadersResponse(
        error_code=code,
        replica_election_results=[
            ReplicaElectionResult(
                topic=t.topic,
                partition_result=[
                    PartitionResult(partition_id=p, error_code=code, error_message=None)
                    for p in t.partitions
                ],
            )
            for t in body.topic_partitions or []
        ],
    )
