"""The KIP-932 share-group handlers: ShareGroupHeartbeat (v1),
ShareGroupDescribe (v1), ShareFetch and ShareAcknowledge (v1-2) — the APIs
of Kafka 4.x's KafkaShareConsumer ("queues for Kafka"). KafkaApis routes
them (and ApiVersions advertises them, with the ``share.version`` feature)
when ``group.coordinator.rebalance.protocols`` names ``share``.

The membership is the GroupCoordinator's (ShareGroupHeartbeat in
``pylog.coordinator``); which records a member gets is the partition
leader's (SharePartitionManager in ``pylog.server.share``), persisted by
the ShareCoordinator on ``__share_group_state``.

Authorization as Kafka's: READ on the group to heartbeat, fetch and
acknowledge, DESCRIBE on it to be described (GROUP_AUTHORIZATION_FAILED);
DESCRIBE on each subscribed topic to heartbeat, READ on each topic fetched
or acknowledged (TOPIC_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from pylog.broker.auth_helper import AuthHelper
from pylog.broker.share_coordinator_apis import ShareCoordinatorApis
from pylog.broker.share_group_offsets_apis import ShareGroupOffsetsApis
from pylog.common.topic_partition import TopicPartition
from pylog.coordinator.group import GroupState
from pylog.coordinator.group_coordinator import GroupCoordinator
from pylog.coordinator.share_coordinator import SHARE_GROUP_STATE_TOPIC, ShareCoordinator
from pylog.coordinator.share_group import ShareGroup
from pylog.coordinator.share_group_heartbeat import ShareGroupHeartbeat
from pylog.errors import ErrorCode
from pylog.metadata.store import MetadataStore
from pylog.network import Request
from pylog.protocol import ApiKey
from pylog.protocol._struct import Struct
from pylog.protocol.messages import (
    ApiVersionsResponse,
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
    ShareFetchRequest,
    ShareFetchResponse,
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)
from pylog.protocol.messages import api_versions_response as avr
from pylog.protocol.messages import share_acknowledge_response as sar
from pylog.protocol.messages import share_fetch_response as sfr
from pylog.protocol.messages import share_group_describe_response as sgd
from pylog.protocol.messages import share_group_heartbeat_response as sgh
from pylog.security.acl_operation import AclOperation
from pylog.security.resource_type import ResourceType
from pylog.server.add_partitions_to_txn_manager import CoordinatorNode
from pylog.server.config import KafkaConfig
from pylog.server.replica_manager import ReplicaManager
from pylog.server.share.default_state_persister import DefaultStatePersister
from pylog.server.share.persister import Persister
from pylog.server.share.share_partition_manager import (
    ShareFetchPartitionResult,
    SharePartitionManager,
)
from pylog.server.share.share_session_cache import FINAL_EPOCH, INITIAL_EPOCH, next_epoch

__all__ = ["SHARE_VERSION_FEATURE", "ShareGroupApis", "add_feature"]

#: The feature Kafka 4.x gates share groups with (KIP-932), as ApiVersions
#: lists it: (name, min supported, max supported = finalized level).
SHARE_VERSION_FEATURE = ("share.version", 0, 1)

_AUTHORIZED_OPS_NOT_REQUESTED = -(2**31)
#: How long a share-partition leader retries its share coordinator (a moved
#: state partition gets its next leader within the ZooKeeper session timeout)
_PERSISTER_RETRY_S = 15.0
_INT_MAX = 2**31 - 1

_Acks = list[tuple[int, int, list[int]]]


class ShareGroupApis:
    auth: AuthHelper = AuthHelper()

    def __init__(
        self,
        config: KafkaConfig,
        coordinator: GroupCoordinator,
        replica_manager: ReplicaManager,
        metadata_store: MetadataStore,
    ) -> None:
        self.coordinator = coordinator
        self.metadata_store = metadata_store
        self.replica_manager = replica_manager
        self.broker_id = config.broker_id
        self.state = ShareCoordinator(config, replica_manager, metadata_store)
        self.coordinator_apis = ShareCoordinatorApis(self.state)
        #: On a cluster the share coordinator of a key may be another broker:
        #: the leaders reach it with the DefaultStatePersister; a lone broker
        #: is every key's coordinator and persists in-process.
        self.persister: DefaultStatePersister | None = None
        persister: Persister = self.state
        if replica_manager.controller_managed:
            persister = self.persister = DefaultStatePersister(
                config.broker_id,
                self._share_coordinator_of,
                self.state,
                ensure_topic=self.state.ensure_topic,
                request_timeout_s=int(config.get("request.timeout.ms")) / 1000,
                retry_timeout_s=_PERSISTER_RETRY_S,
            )
        self.listener = config.inter_broker_listener_name
        self.partitions = SharePartitionManager(config, replica_manager, persister)
        self.offsets = ShareGroupOffsetsApis(
            coordinator, persister, self.partitions, replica_manager, metadata_store
        )
        # DeleteGroups of a share group deletes its state first (Kafka's
        # DeleteShareGroupState from the group coordinator).
        coordinator.on_share_group_deleted = self.offsets.delete_state
        self.heartbeats = ShareGroupHeartbeat(
            config, coordinator.manager, metadata_store, coordinator.clock
        )
        self.heartbeats.on_assigned = self.partitions.initialize
        # The groups' own configs (IncrementalAlterConfigs on a GROUP resource).
        self.heartbeats.group_config = self.partitions.group_config = metadata_store.group_config
        self.heartbeats.on_member_left = self._member_left
        coordinator.on_share_group_loaded = self.heartbeats.on_loaded
        self._loaded = False

    def _share_coordinator_of(
        self, group_id: str, topic_id: str, partition: int
    ) -> CoordinatorNode | None:
        """The leader of the key's ``__share_group_state`` partition as the
        metadata cache has it, on the inter-broker listener (Kafka's
        ShareCoordinatorMetadataCacheHelper); None while unknown."""
        cache = self.replica_manager.metadata_cache
        if not cache.contains_topic(SHARE_GROUP_STATE_TOPIC):
            return None
        p = self.state.partition_for(group_id, topic_id, partition)
        leader = cache.leader_of(SHARE_GROUP_STATE_TOPIC, p)
        if leader is None or leader < 0:
            return None
        ep = cache.broker_endpoint(leader, self.listener)
        return None if ep is None else CoordinatorNode(leader, ep.host, ep.port)

    def routes(self) -> dict[int, tuple[type, Callable[[Request, Any], Awaitable[Struct]]]]:
        """KafkaApis' table entries: api key -> (request class, handler)."""
        self.coordinator_apis.auth = self.offsets.auth = self.auth
        return {
            **self.coordinator_apis.routes(),
            **self.offsets.routes(),
            ApiKey.SHARE_GROUP_HEARTBEAT: (
                ShareGroupHeartbeatRequest,
                self.handle_share_group_heartbeat_request,
            ),
            ApiKey.SHARE_GROUP_DESCRIBE: (
                ShareGroupDescribeRequest,
                self.handle_share_group_describe_request,
            ),
            ApiKey.SHARE_FETCH: (ShareFetchRequest, self.handle_share_fetch_request),
            ApiKey.SHARE_ACKNOWLEDGE: (
                ShareAcknowledgeRequest,
                self.handle_share_acknowledge_request,
            ),
        }

    def shutdown(self) -> None:
        self.heartbeats.shutdown()
        self.partitions.shutdown()
        if self.persister is not None:
            self.persister.shutdown()

    def _member_left(self, group_id: str, member_id: str) -> None:
        self.partitions.sessions.remove(group_id, member_id)
        self.partitions.release_member(group_id, member_id)
        self.partitions.forget_idle(group_id)

    def _ensure_loaded(self) -> None:
        """A lone broker: the persisted share-partition state, read once
        before it is first used (a cluster's coordinator loads a partition
        when it is elected its leader)."""
        if not self._loaded and not self.replica_manager.controller_managed:
            self._loaded = True
            self.state.load()

    def _leader(self, topic: str | None, partition: int) -> tuple[int, int]:
        """(leader id, leader epoch) as this broker knows them; -1s if unknown."""
        if topic is None:
            return -1, -1
        part = self.replica_manager.partition(TopicPartition(topic, partition))
        if part is None:
            return -1, -1
        return part.leader_id if part.leader_id is not None else -1, part.leader_epoch

    def _topic_names(self) -> dict[str, str]:
        return {t.topic_id: t.name for t in self.metadata_store.topics()}

    # ------------------------------------------------------------ heartbeat

    async def handle_share_group_heartbeat_request(
        self, request: Request, body: ShareGroupHeartbeatRequest
    ) -> ShareGroupHeartbeatResponse:
        if not self.auth.authorize(request, AclOperation.READ, ResourceType.GROUP, body.group_id):
            return ShareGroupHeartbeatResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
        if body.subscribed_topic_names and self.auth.enabled:
            for name in body.subscribed_topic_names:
                if not self.auth.authorize(
                    request, AclOperation.DESCRIBE, ResourceType.TOPIC, name
                ):
                    return ShareGroupHeartbeatResponse(
                        error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    )
        self._ensure_loaded()
        r = await self.heartbeats.heartbeat(
            body.group_id,
            body.member_id,
            body.member_epoch,
            body.rack_id,
            body.subscribed_topic_names,
            request.header.client_id or "",
            "/" + request.client_host,
        )
        if r.error_code:
            return ShareGroupHeartbeatResponse(
                error_code=r.error_code, error_message=r.error_message
            )
        return ShareGroupHeartbeatResponse(
            error_code=ErrorCode.NONE,
            member_id=r.member_id,
            member_epoch=r.member_epoch,
            heartbeat_interval_ms=r.heartbeat_interval_ms,
            assignment=None
            if r.assignment is None
            else sgh.Assignment(
                topic_partitions=[
                    sgh.TopicPartitions(topic_id=t, partitions=sorted(ps))
                    for t, ps in sorted(r.assignment.items())
                ]
            ),
        )

    # ------------------------------------------------------------ describe

    async def handle_share_group_describe_request(
        self, request: Request, body: ShareGroupDescribeRequest
    ) -> ShareGroupDescribeResponse:
        out = []
        names: dict[str, str] | None = None
        for gid in body.group_ids:
            entry = sgd.DescribedGroup(
                error_code=ErrorCode.NONE,
                group_id=gid,
                group_state="",
                members=[],
                authorized_operations=_AUTHORIZED_OPS_NOT_REQUESTED,
            )
            out.append(entry)
            if not self.auth.authorize(request, AclOperation.DESCRIBE, ResourceType.GROUP, gid):
                entry.error_code = ErrorCode.GROUP_AUTHORIZATION_FAILED
                continue
            code, group = self.coordinator.describe_group(gid)
            if code:
                entry.error_code = code
                continue
            if group is None or group.is_in(GroupState.DEAD):
                entry.error_code = ErrorCode.GROUP_ID_NOT_FOUND
                entry.error_message = f"Group {gid} not found."
                continue
            if not isinstance(group, ShareGroup):
                entry.error_code = ErrorCode.GROUP_ID_NOT_FOUND
                entry.error_message = f"Group {gid} is not a share group."
                continue
            if body.include_authorized_operations:
                entry.authorized_operations = self.auth.authorized_operations(
                    request, ResourceType.GROUP, gid
                )
            if names is None:
                names = self._topic_names()
            entry.group_state = group.share_state.value
            entry.group_epoch = group.group_epoch
            entry.assignment_epoch = group.assignment_epoch
            entry.assignor_name = self.heartbeats.assignor.name
            entry.members = [
                sgd.Member(
                    member_id=m.member_id,
                    rack_id=m.rack_id,
                    member_epoch=m.member_epoch,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    subscribed_topic_names=list(m.subscribed_topic_names),
                    assignment=sgd.Assignment(
                        topic_partitions=[
                            sgd.TopicPartitions(
                                topic_id=t, topic_name=names.get(t, ""), partitions=sorted(ps)
                            )
                            for t, ps in sorted(m.assignment.items())
                        ]
                    ),
                )
                for m in group.share_members.values()
            ]
        return ShareGroupDescribeResponse(throttle_time_ms=0, groups=out)

    # ------------------------------------------------------------ fetch

    async def handle_share_fetch_request(
        self, request: Request, body: ShareFetchRequest
    ) -> ShareFetchResponse:
        lock_ms = self.partitions.lock_duration_ms(body.group_id or "")

        def refused(code: int, message: str | None = None) -> ShareFetchResponse:
            return ShareFetchResponse(error_code=code, error_message=message)

        group_id, member_id = body.group_id or "", body.member_id or ""
        if not group_id or not member_id:
            return refused(ErrorCode.INVALID_REQUEST, "GroupId and MemberId must be set.")
        if not self.auth.authorize(request, AclOperation.READ, ResourceType.GROUP, group_id):
            return refused(ErrorCode.GROUP_AUTHORIZATION_FAILED)
        epoch = body.share_session_epoch
        acks: dict[tuple[str, int], _Acks] = {}
        for t in body.topics:
            for p in t.partitions:
                if p.acknowledgement_batches:
                    acks[(t.topic_id, p.partition_index)] = [
                        (b.first_offset, b.last_offset, list(b.acknowledge_types))
                        for b in p.acknowledgement_batches
                    ]
        if epoch == INITIAL_EPOCH and acks:
            return refused(ErrorCode.INVALID_REQUEST)  # Kafka 4.3: no message
        sessions = self.partitions.sessions
        if epoch == INITIAL_EPOCH:
            if not sessions.has_group(group_id):
                # The group's first session here: its idle share partitions are
                # read again (the offsets may have been altered meanwhile).
                self.partitions.forget_idle(group_id)
            session, gone = sessions.open(group_id, member_id)
            for s in gone:
                if s.group_id != group_id or s.member_id != member_id:
                    self.partitions.release_member(s.group_id, s.member_id)
        else:
            found = sessions.get(group_id, member_id)
            if found is None:
                return refused(ErrorCode.SHARE_SESSION_NOT_FOUND)
            if epoch != FINAL_EPOCH and found.epoch != epoch:
                return refused(ErrorCode.INVALID_SHARE_SESSION_EPOCH)
            session = found
            if epoch != FINAL_EPOCH:
                session.epoch = next_epoch(epoch)
        self._ensure_loaded()
        names = self._topic_names()
        answers: dict[tuple[str, int], sfr.PartitionData] = {}

        def answer(tid: str, p: int) -> sfr.PartitionData:
            a = answers.get((tid, p))
            if a is None:
                a = answers[(tid, p)] = sfr.PartitionData(
                    partition_index=p,
                    error_code=ErrorCode.NONE,
                    acknowledge_error_code=ErrorCode.NONE,
                    current_leader=sfr.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1),
                    records=b"",
                    acquired_records=[],
                )
            return a

        readable: dict[str, bool] = {}

        def may_read(name: str) -> bool:
            ok = readable.get(name)
            if ok is None:
                ok = readable[name] = self.auth.authorize(
                    request, AclOperation.READ, ResourceType.TOPIC, name
                )
            return ok

        for t in body.topics:
            name = names.get(t.topic_id)
            for p in t.partitions:
                if name is None:
                    answer(t.topic_id, p.partition_index).error_code = ErrorCode.UNKNOWN_TOPIC_ID
                    continue
                if not may_read(name):
                    answer(
                        t.topic_id, p.partition_index
                    ).error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    continue
                session.partitions[(t.topic_id, p.partition_index)] = TopicPartition(
                    name, p.partition_index
                )
        for f in body.forgotten_topics_data:
            for pi in f.partitions:
                session.partitions.pop((f.topic_id, pi), None)
        request.mark_local_complete()
        for (tid, pi), batches in acks.items():
            name = names.get(tid)
            if name is None or not may_read(name):
                continue
            code = await self.partitions.acknowledge(
                group_id, member_id, tid, TopicPartition(name, pi), batches
            )
            a = answer(tid, pi)
            a.acknowledge_error_code = code
            a.acknowledge_error_message = _ack_message(code)
        if epoch == FINAL_EPOCH:
            sessions.remove(group_id, member_id)
            self.partitions.release_member(group_id, member_id)
            self.partitions.forget_idle(group_id)
        else:
            max_records = body.max_records if body.max_records > 0 else _INT_MAX
            results = await self.partitions.fetch(
                group_id,
                member_id,
                list((tid, tp) for (tid, _), tp in session.partitions.items()),
                max_wait_ms=body.max_wait_ms,
                max_bytes=body.max_bytes if body.max_bytes > 0 else _INT_MAX,
                max_records=max_records,
                # KIP-1206 (ShareFetch v2): 1 is RECORD_LIMIT, 0 BATCH_OPTIMIZED
                record_limit=body.share_acquire_mode == 1,
            )
            for (tid, pi), r in results.items():
                if r.error_code or r.acquired or epoch == INITIAL_EPOCH or (tid, pi) in answers:
                    _fill(answer(tid, pi), r, self.broker_id)
        return ShareFetchResponse(
            throttle_time_ms=0,
            error_code=ErrorCode.NONE,
            acquisition_lock_timeout_ms=lock_ms,
            responses=[
                sfr.ShareFetchableTopicResponse(
                    topic_id=tid,
                    partitions=[a for (t, _), a in sorted(answers.items()) if t == tid],
                )
                for tid in sorted({t for t, _ in answers})
            ],
            node_endpoints=[],
        )

    # ------------------------------------------------------------ acknowledge

    async def handle_share_acknowledge_request(
        self, request: Request, body: ShareAcknowledgeRequest
    ) -> ShareAcknowledgeResponse:
        lock_ms = self.partitions.lock_duration_ms(body.group_id or "")

        def refused(code: int, message: str | None = None) -> ShareAcknowledgeResponse:
            return ShareAcknowledgeResponse(error_code=code, error_message=message)

        group_id, member_id = body.group_id or "", body.member_id or ""
        if not group_id or not member_id:
            return refused(ErrorCode.INVALID_REQUEST, "GroupId and MemberId must be set.")
        if not self.auth.authorize(request, AclOperation.READ, ResourceType.GROUP, group_id):
            return refused(ErrorCode.GROUP_AUTHORIZATION_FAILED)
        epoch = body.share_session_epoch
        if epoch == INITIAL_EPOCH:
            return refused(ErrorCode.INVALID_SHARE_SESSION_EPOCH)
        sessions = self.partitions.sessions
        session = sessions.get(group_id, member_id)
        if session is None:
            return refused(ErrorCode.SHARE_SESSION_NOT_FOUND)
        if epoch != FINAL_EPOCH:
            if session.epoch != epoch:
                return refused(ErrorCode.INVALID_SHARE_SESSION_EPOCH)
            session.epoch = next_epoch(epoch)
        self._ensure_loaded()
        names = self._topic_names()
        request.mark_local_complete()
        out = []
        for t in body.topics:
            name = names.get(t.topic_id)
            parts = []
            for p in t.partitions:
                code: int
                if name is None:
                    code = ErrorCode.UNKNOWN_TOPIC_ID
                elif not self.auth.authorize(request, AclOperation.READ, ResourceType.TOPIC, name):
                    code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                else:
                    code = await self.partitions.acknowledge(
                        group_id,
                        member_id,
                        t.topic_id,
                        TopicPartition(name, p.partition_index),
                        [
                            (b.first_offset, b.last_offset, list(b.acknowledge_types))
                            for b in p.acknowledgement_batches
                        ],
                    )
                leader_id, leader_epoch = self._leader(name, p.partition_index)
                parts.append(
                    sar.PartitionData(
                        partition_index=p.partition_index,
                        error_code=code,
                        error_message=_ack_message(code),
                        current_leader=sar.LeaderIdAndEpoch(
                            leader_id=leader_id, leader_epoch=leader_epoch
                        ),
                    )
                )
            out.append(sar.ShareAcknowledgeTopicResponse(topic_id=t.topic_id, partitions=parts))
        if epoch == FINAL_EPOCH:
            sessions.remove(group_id, member_id)
            self.partitions.release_member(group_id, member_id)
            self.partitions.forget_idle(group_id)
        return ShareAcknowledgeResponse(
            throttle_time_ms=0,
            error_code=ErrorCode.NONE,
            acquisition_lock_timeout_ms=lock_ms,
            responses=out,
            node_endpoints=[],
        )


def _ack_message(code: int) -> str | None:
    if code == ErrorCode.INVALID_RECORD_STATE:
        return "Some of the records are not acquired by this member."
    return None


def _fill(a: sfr.PartitionData, r: ShareFetchPartitionResult, broker_id: int) -> None:
    a.error_code = r.error_code
    if r.leader_epoch >= 0 and r.error_code != ErrorCode.NOT_LEADER_OR_FOLLOWER:
        a.current_leader = sfr.LeaderIdAndEpoch(leader_id=broker_id, leader_epoch=r.leader_epoch)
    a.records = r.records
    a.acquired_records = [
        sfr.AcquiredRecords(first_offset=f, last_offset=last, delivery_count=c)
        for f, last, c in r.acquired
    ]


def add_feature(response: ApiVersionsResponse, name: str, lo: int, hi: int) -> None:
    """List a feature in an ApiVersions answer (v3+ reads them) as supported
    ``lo``..``hi`` and finalized at ``hi``, as a Kafka 4.x cluster with the
    feature enabled does."""
    response.supported_features = [
        *(response.supported_features or []),
        avr.SupportedFeatureKey(name=name, min_version=lo, max_version=hi),
    ]
    response.finalized_features = [
        *(response.finalized_features or []),
        avr.FinalizedFeatureKey(name=name, max_version_level=hi, min_version_level=hi),
    ]
    if response.finalized_features_epoch is None or response.finalized_features_epoch < 0:
        response.finalized_features_epoch = 0
