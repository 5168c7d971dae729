"""The group handlers: FindCoordinator, JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, OffsetCommit, OffsetFetch, OffsetDelete, ListGroups, DescribeGroups
and DeleteGroups. Each decodes what its version carries, asks the
GroupCoordinator, and answers in that version's shape; KafkaApis routes them
(and ApiVersions advertises them, GROUP_API_VERSIONS) when it has a
coordinator.

FindCoordinator on a cluster answers, as Kafka's does, from the MetadataCache:
the leader of the group's ``__consumer_offsets`` partition. The first one
creates the topic (with ``offsets.topic.replication.factor`` replicas, once
that many brokers are alive) and is answered COORDINATOR_NOT_AVAILABLE, as is
every one until the controller has placed the topic and elected the
partition's leader. A lone broker answers with itself.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable
from typing import Any

from pylog.broker.auth_helper import AuthHelper
from pylog.broker.request_helpers import Pacer
from pylog.broker.transaction_apis import TransactionApis
from pylog.coordinator.group import GroupState
from pylog.coordinator.group_coordinator import GroupCoordinator, JoinRequest
from pylog.coordinator.group_metadata_manager import GROUP_METADATA_TOPIC
from pylog.coordinator.share_coordinator import SHARE_GROUP_STATE_TOPIC, ShareCoordinator
from pylog.errors import ErrorCode
from pylog.metadata.metadata_cache import MetadataCache
from pylog.network import Request
from pylog.protocol import ZERO_UUID
from pylog.protocol._runtime import uuid_raw
from pylog.protocol.messages import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from pylog.protocol.messages.delete_groups_response import DeletableGroupResult
from pylog.protocol.messages.describe_groups_response import DescribedGroup, DescribedGroupMember
from pylog.protocol.messages.find_coordinator_response import Coordinator
from pylog.protocol.messages.join_group_response import JoinGroupResponseMember
from pylog.protocol.messages.leave_group_response import MemberResponse
from pylog.protocol.messages.list_groups_response import ListedGroup
from pylog.protocol.messages.offset_commit_response import (
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from pylog.protocol.messages.offset_delete_response import (
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)
from pylog.protocol.messages.offset_fetch_request import (
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
)
from pylog.protocol.messages.offset_fetch_response import (
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
)
from pylog.security.acl_operation import AclOperation
from pylog.security.resource_type import ResourceType

__all__ = ["GroupApis"]

_KEY_TYPE_GROUP = 0
_KEY_TYPE_TRANSACTION = 1
_KEY_TYPE_SHARE = 2  # "groupId:topicId:partition", a share partition's share coordinator
_AUTHORIZED_OPS_NOT_REQUESTED = -(2**31)
_TOPIC_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED
_GROUP_DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED
#: Prefixes an unknown topic id (OffsetCommit/OffsetFetch v10) to key it apart
#: from every topic name (a NUL is in no valid name).
_UNKNOWN_ID_KEY = "\x00"


class GroupApis:
    """The group APIs over one GroupCoordinator. ``broker_endpoint`` maps a
    listener name to this broker's (host, port) on it, FindCoordinator's answer."""

    #: Who may do what (KafkaApis sets the broker's; none: everything allowed).
    auth: AuthHelper = AuthHelper()

    def _may(self, request: Request, operation: AclOperation, group_id: str) -> bool:
        return self.auth.authorize(request, operation, ResourceType.GROUP, group_id)

    def _topics_allowed(
        self, request: Request, operation: AclOperation, names: Iterable[str]
    ) -> set[str]:
        return self.auth.filter_by_authorized(request, operation, ResourceType.TOPIC, names)

    def __init__(
        self,
        coordinator: GroupCoordinator,
        broker_id: int,
        broker_endpoint: Callable[[str], tuple[str, int]],
        metadata_cache: MetadataCache | None = None,
        transactions: TransactionApis | None = None,
    ) -> None:
        self.coordinator = coordinator
        #: FindCoordinator's answer for transactional ids (None: no
        #: transaction coordinator runs here)
        self.transactions = transactions
        self.broker_id = broker_id
        self.broker_endpoint = broker_endpoint
        #: the cluster as UpdateMetadata describes it: on a cluster, a group's
        #: coordinator is the leader of its offsets partition, wherever it is
        self.metadata_cache = metadata_cache
        self._creating: asyncio.Future[None] | None = None
        #: FindCoordinator's answer for share-partition keys (KafkaApis sets
        #: it when share groups are served)
        self.share_coordinator: ShareCoordinator | None = None

    # ------------------------------------------------------------ FindCoordinator

    def _cluster_coordinator(self, request: Request, key: str) -> Coordinator:
        """The leader of ``key``'s offsets partition, as the MetadataCache has
        it; COORDINATOR_NOT_AVAILABLE while the topic is not placed yet or the
        partition has no live leader (or none on the request's listener).
        Whether the leader has loaded the group is its own answer to the
        group's requests (COORDINATOR_LOAD_IN_PROGRESS), as on Kafka."""
        cache = self.metadata_cache
        assert cache is not None
        partition = self.coordinator.manager.partition_for(key)
        leader = cache.leader_of(GROUP_METADATA_TOPIC, partition)
        ep = cache.broker_endpoint(leader, request.listener) if leader is not None else None
        if leader is None or ep is None:
            code = ErrorCode.COORDINATOR_NOT_AVAILABLE
            return Coordinator(key=key, node_id=-1, host="", port=-1, error_code=code,
                               error_message=code.name)  # fmt: skip
        return Coordinator(key=key, node_id=leader, host=ep.host, port=ep.port,
                           error_code=0, error_message="")  # fmt: skip

    def _on_cluster(self) -> bool:
        return self.metadata_cache is not None and self.coordinator.manager.controller_managed

    def _share_coordinator(self, request: Request, key: str) -> Coordinator:
        """A share-partition key's share coordinator: the leader of its
        ``__share_group_state`` partition (Kafka's SharePartitionKey format,
        ``groupId:topicId:partition``; INVALID_REQUEST otherwise)."""
        share = self.share_coordinator

        def refused(code: int, message: str) -> Coordinator:
            return Coordinator(key=key, node_id=-1, host="", port=-1, error_code=code,
                               error_message=message)  # fmt: skip

        if share is None:
            return refused(ErrorCode.INVALID_REQUEST, "Share groups are not enabled.")
        parts = key.split(":")
        if len(parts) != 3 or not parts[0] or not parts[1] or not parts[2].isdigit():
            return refused(ErrorCode.INVALID_REQUEST, f"Invalid coordinator key {key}.")
        try:
            if len(uuid_raw(parts[1])) != 16:
                raise ValueError(parts[1])
        except (ValueError, TypeError):
            return refused(ErrorCode.INVALID_REQUEST, f"Invalid coordinator key {key}.")
        partition = share.partition_for(parts[0], parts[1], int(parts[2]))
        if self._on_cluster():
            cache = self.metadata_cache
            assert cache is not None
            leader = cache.leader_of(SHARE_GROUP_STATE_TOPIC, partition)
            ep = cache.broker_endpoint(leader, request.listener) if leader is not None else None
            if leader is None or leader < 0 or ep is None:
                code = ErrorCode.COORDINATOR_NOT_AVAILABLE
                return refused(code, code.name)
            return Coordinator(key=key, node_id=leader, host=ep.host, port=ep.port,
                               error_code=0, error_message="")  # fmt: skip
        host, port = self.broker_endpoint(request.listener)
        return Coordinator(key=key, node_id=self.broker_id, host=host, port=port,
                           error_code=0, error_message="")  # fmt: skip

    def _may_describe(self, request: Request, key: str, key_type: int) -> bool:
        """DESCRIBE on the group (or transactional id): what FindCoordinator
        needs before anything else, the offsets topic's creation included.
        A share-partition key is the brokers' own: CLUSTER_ACTION."""
        if key_type == _KEY_TYPE_GROUP:
            return self._may(request, AclOperation.DESCRIBE, key)
        if key_type == _KEY_TYPE_SHARE:
            return self.auth.authorize(request, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER)
        return self.auth.authorize(
            request, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key
        )

    def _coordinator_for(
        self, request: Request, key: str, key_type: int, authorized: bool
    ) -> Coordinator:
        if not authorized and key_type == _KEY_TYPE_GROUP:
            return Coordinator(key=key, node_id=-1, host="", port=-1, error_code=_GROUP_DENIED,
                               error_message="Group authorization failed.")  # fmt: skip
        if not authorized and key_type == _KEY_TYPE_SHARE:
            return Coordinator(key=key, node_id=-1, host="", port=-1,
                               error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                               error_message="Cluster authorization failed.")  # fmt: skip
        if key_type == _KEY_TYPE_SHARE:
            return self._share_coordinator(request, key)
        if not authorized:
            return Coordinator(key=key, node_id=-1, host="", port=-1,
                               error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                               error_message="Transactional Id authorization failed.")  # fmt: skip
        if key_type == _KEY_TYPE_GROUP and self._on_cluster():
            return self._cluster_coordinator(request, key)
        if key_type == _KEY_TYPE_TRANSACTION and self.transactions is not None:
            return self.transactions.coordinator_for(request, key)
        host, port = self.broker_endpoint(request.listener)
        node = self.broker_id
        if key_type != _KEY_TYPE_GROUP:
            # No transaction coordinator runs here (yet).
            code: int = ErrorCode.COORDINATOR_NOT_AVAILABLE
        else:
            code = self.coordinator.find_coordinator(key)
        if code:
            node, host, port = -1, "", -1
        return Coordinator(
            key=key,
            node_id=node,
            host=host,
            port=port,
            error_code=code,
            # Kafka leaves a found coordinator's message unset: "" on the wire
            error_message="" if code == 0 else ErrorCode(code).name,
        )

    async def _create_offsets_topic(self) -> None:
        """Create ``__consumer_offsets`` if it is missing: its logs are made
        (and, on ZooKeeper, its znodes written) on a worker thread, where a
        store busy with another request's topics is waited for. One creation
        at a time: concurrent FindCoordinators wait for it rather than race
        it (Kafka's in-flight set). A failure is the caller's
        COORDINATOR_NOT_AVAILABLE."""
        manager = self.coordinator.manager
        if manager.metadata_store.topic(GROUP_METADATA_TOPIC) is not None:
            return
        task = self._creating
        if task is None or task.done():
            task = self._creating = asyncio.get_running_loop().create_task(
                asyncio.to_thread(manager.ensure_topic)
            )
            # Read the outcome even when every waiter was cancelled.
            task.add_done_callback(lambda t: t.cancelled() or t.exception())
        with contextlib.suppress(Exception):
            await asyncio.shield(task)

    async def handle_find_coordinator_request(
        self, request: Request, body: FindCoordinatorRequest
    ) -> FindCoordinatorResponse:
        version = request.header.api_version
        key_type = body.key_type
        keys = list(body.coordinator_keys) if version >= 4 else [body.key]
        # Each key's DESCRIBE is checked once, and first: a refused requester
        # creates no internal topic (Kafka's getCoordinator).
        authorized = [self._may_describe(request, k, key_type) for k in keys]
        if key_type == _KEY_TYPE_TRANSACTION and self.transactions is not None and any(authorized):
            # The first FindCoordinator of a transactional id creates
            # __transaction_state (Kafka's getOrCreateInternalTopic).
            await self.transactions.ensure_topic()
        if key_type == _KEY_TYPE_GROUP and any(authorized):
            cache = self.metadata_cache
            if not (self._on_cluster() and cache is not None and
                    cache.contains_topic(GROUP_METADATA_TOPIC)):  # fmt: skip
                # The first FindCoordinator creates the offsets topic. A lone
                # broker answers with itself at once; on a cluster the answer
                # stays COORDINATOR_NOT_AVAILABLE until the controller has
                # placed it and told this broker (UpdateMetadata).
                await self._create_offsets_topic()
        if key_type == _KEY_TYPE_SHARE and self.share_coordinator is not None and any(authorized):
            # The first FindCoordinator of a share-partition key creates
            # __share_group_state (Kafka's getOrCreateInternalTopic).
            with contextlib.suppress(Exception):
                await asyncio.to_thread(self.share_coordinator.ensure_topic)
        found = [
            self._coordinator_for(request, k, key_type, ok)
            for k, ok in zip(keys, authorized, strict=True)
        ]
        if version >= 4:
            return FindCoordinatorResponse(throttle_time_ms=0, coordinators=found)
        # Before v4, one key and the answer's fields at the top level.
        c = found[0]
        return FindCoordinatorResponse(
            throttle_time_ms=0,
            error_code=c.error_code,
            # Kafka writes its error's name here, "NONE" on success
            error_message=c.error_message if c.error_code else "NONE",
            node_id=c.node_id,
            host=c.host,
            port=c.port,
        )

    # ------------------------------------------------------------ membership

    async def handle_join_group_request(
        self, request: Request, body: JoinGroupRequest
    ) -> JoinGroupResponse:
        version = request.header.api_version
        if not self._may(request, AclOperation.READ, body.group_id):
            return JoinGroupResponse(
                throttle_time_ms=0,
                error_code=_GROUP_DENIED,
                generation_id=-1,
                protocol_name="" if version < 7 else None,
                leader="",
                member_id="",
            )
        session = body.session_timeout_ms
        rebalance = body.rebalance_timeout_ms
        req = JoinRequest(
            group_id=body.group_id,
            member_id=body.member_id,
            group_instance_id=body.group_instance_id,
            client_id=request.header.client_id or "",
            client_host="/" + request.client_host,
            rebalance_timeout_ms=rebalance if version >= 1 and rebalance > 0 else session,
            session_timeout_ms=session,
            protocol_type=body.protocol_type,
            protocols=[(p.name, bytes(p.metadata)) for p in body.protocols],
            require_known_member_id=version >= 4,
        )
        # No mark_local_complete here or in SyncGroup: as on Kafka, the
        # connection's next request (a heartbeat, say) is handled only after
        # this answer, so it sees the group as the answer left it, not a
        # rebalance that is already over.
        result = await self.coordinator.join_group(req)
        # Fields a version lacks keep their defaults (the codec refuses others).
        protocol_name = result.protocol_name
        if version < 7 and protocol_name is None:
            protocol_name = ""  # not nullable before v7
        return JoinGroupResponse(
            throttle_time_ms=0,
            error_code=result.error_code,
            generation_id=result.generation_id,
            protocol_type=result.protocol_type if version >= 7 else None,
            protocol_name=protocol_name,
            leader=result.leader,
            skip_assignment=result.skip_assignment if version >= 9 else False,
            member_id=result.member_id,
            members=[
                JoinGroupResponseMember(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id if version >= 5 else None,
                    metadata=m.metadata,
                )
                for m in result.members
            ],
        )

    async def handle_sync_group_request(
        self, request: Request, body: SyncGroupRequest
    ) -> SyncGroupResponse:
        if not self._may(request, AclOperation.READ, body.group_id):
            return SyncGroupResponse(throttle_time_ms=0, error_code=_GROUP_DENIED, assignment=b"")
        result = await self.coordinator.sync_group(
            body.group_id,
            body.generation_id,
            body.member_id,
            body.group_instance_id,
            body.protocol_type,
            body.protocol_name,
            {a.member_id: bytes(a.assignment) for a in body.assignments},
        )
        v5 = request.header.api_version >= 5
        return SyncGroupResponse(
            throttle_time_ms=0,
            error_code=result.error_code,
            protocol_type=result.protocol_type if v5 else None,
            protocol_name=result.protocol_name if v5 else None,
            assignment=result.assignment,
        )

    async def handle_heartbeat_request(
        self, request: Request, body: HeartbeatRequest
    ) -> HeartbeatResponse:
        if not self._may(request, AclOperation.READ, body.group_id):
            return HeartbeatResponse(throttle_time_ms=0, error_code=_GROUP_DENIED)
        code = self.coordinator.heartbeat(
            body.group_id, body.member_id, body.group_instance_id, body.generation_id
        )
        return HeartbeatResponse(throttle_time_ms=0, error_code=code)

    async def handle_leave_group_request(
        self, request: Request, body: LeaveGroupRequest
    ) -> LeaveGroupResponse:
        version = request.header.api_version
        if not self._may(request, AclOperation.READ, body.group_id):
            return LeaveGroupResponse(throttle_time_ms=0, error_code=_GROUP_DENIED)
        if version >= 3:
            members = [(m.member_id, m.group_instance_id) for m in body.members]
        else:
            members = [(body.member_id, None)]
        code, codes = await self.coordinator.leave_group(body.group_id, members)
        if version < 3:
            if code == ErrorCode.NONE and codes:
                code = codes[0]
            return LeaveGroupResponse(throttle_time_ms=0, error_code=code)
        return LeaveGroupResponse(
            throttle_time_ms=0,
            error_code=code,
            members=[
                MemberResponse(member_id=m, group_instance_id=i, error_code=c)
                for (m, i), c in zip(members, codes, strict=False)
            ],
        )

    # ------------------------------------------------------------ offsets

    async def handle_offset_commit_request(
        self, request: Request, body: OffsetCommitRequest
    ) -> OffsetCommitResponse:
        offsets: dict[tuple[str, int], tuple[int, int, str | None]] = {}
        denied: dict[tuple[str, int], int] = {}
        if request.header.api_version >= 10:
            # v10 names topics by id (KIP-516): an id the cluster does not
            # know answers UNKNOWN_TOPIC_ID on each of its partitions, ahead
            # of any topic authorization, as KafkaApis does
            for t in body.topics:
                t.name = self._topic_name(t.topic_id)
                if t.name.startswith(_UNKNOWN_ID_KEY):
                    for p in t.partitions:
                        denied[(t.name, p.partition_index)] = ErrorCode.UNKNOWN_TOPIC_ID
        if self.auth.enabled:
            # a group it may not read commits nothing; a topic it may not read, nothing of it
            if not self._may(request, AclOperation.READ, body.group_id):
                readable: set[str] = set()
                code = _GROUP_DENIED
            else:
                readable = self._topics_allowed(
                    request,
                    AclOperation.READ,
                    (t.name for t in body.topics if not t.name.startswith(_UNKNOWN_ID_KEY)),
                )
                code = _TOPIC_DENIED
            for t in body.topics:
                if t.name not in readable:
                    for p in t.partitions:
                        tp = (t.name, p.partition_index)
                        # a group it may not read refuses everything, even unknown ids
                        if code == _GROUP_DENIED or tp not in denied:
                            denied[tp] = code
        codes: dict[tuple[str, int], int] = {}
        for t in body.topics:
            for p in t.partitions:
                tp = (t.name, p.partition_index)
                if tp in denied:
                    continue
                if not self._partition_exists(*tp):
                    # As Kafka: a partition the cluster lacks is refused
                    # before the group is asked; the others are committed.
                    codes[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                offsets[tp] = (p.committed_offset, p.committed_leader_epoch, p.committed_metadata)
        request.mark_local_complete()
        if offsets:
            codes.update(
                await self.coordinator.commit_offsets(
                    body.group_id,
                    body.member_id,
                    body.group_instance_id,
                    body.generation_id_or_member_epoch,
                    offsets,
                    body.retention_time_ms,
                    api_version=request.header.api_version,
                )
            )
        codes = {**codes, **denied}
        return OffsetCommitResponse(
            throttle_time_ms=0,
            topics=[
                OffsetCommitResponseTopic(
                    name=t.name,
                    topic_id=t.topic_id,
                    partitions=[
                        OffsetCommitResponsePartition(
                            partition_index=p.partition_index,
                            error_code=codes[(t.name, p.partition_index)],
                        )
                        for p in t.partitions
                    ],
                )
                for t in body.topics
            ],
        )

    def _topic_name(self, topic_id: str) -> str:
        """The name of the topic with id ``topic_id``, or for an id the
        cluster does not know, a key no topic name can equal."""
        meta = self.coordinator.manager.metadata_store.topic_by_id(topic_id)
        return meta.name if meta is not None else _UNKNOWN_ID_KEY + topic_id

    def _topic_id(self, name: str) -> str:
        """The id of topic ``name``; the zero id when it has none (deleted)."""
        meta = self.coordinator.manager.metadata_store.topic(name)
        return meta.topic_id if meta is not None else ZERO_UUID

    def _partition_exists(self, topic: str, partition: int) -> bool:
        """Whether the cluster has ``topic``'s partition ``partition``: the
        metadata store's topics, or (on a cluster) the MetadataCache's."""
        meta = self.coordinator.manager.metadata_store.topic(topic)
        if meta is not None and 0 <= partition < meta.partitions:
            return True
        cache = self.metadata_cache
        return cache is not None and cache.partition_info(topic, partition) is not None

    def _fetch_group(
        self,
        request: Request,
        group_id: str,
        topics: list[OffsetFetchRequestTopic] | list[OffsetFetchRequestTopics] | None,
        member_id: str | None = None,
        member_epoch: int = -1,
        require_stable: bool = False,
        legacy: bool = False,
    ) -> tuple[int, list[tuple[str, list[OffsetFetchResponsePartitions]]]]:
        """(error, [(topic, partitions)]) of one group's committed offsets, in
        v8's partition class; ``topics`` None asks for every committed one.
        ``require_stable`` (KIP-447): a partition with a transactional offset
        commit still pending answers UNSTABLE_OFFSET_COMMIT, no offset.
        ``legacy``: v0-1, which carry a group's error on each partition."""
        wanted: list[tuple[str, int]] | None = None
        if topics is not None:
            wanted = [(t.name, p) for t in topics for p in t.partition_indexes]
        found: dict[tuple[str, int], Any]
        code: int
        if not self._may(request, AclOperation.DESCRIBE, group_id):
            code, found = _GROUP_DENIED, {}
        else:
            code, found = self.coordinator.fetch_offsets(group_id, wanted, member_id, member_epoch)
        if code:
            # A group-level error lists no partitions (Kafka's getErrorResponse);
            # before v2 the caller repeats it on each partition asked for.
            found = dict.fromkeys(wanted) if wanted is not None and legacy else {}
        describable: set[str] | None = None
        if self.auth.enabled and not code:
            describable = self._topics_allowed(
                request, AclOperation.DESCRIBE, {t for t, _ in found}
            )
            if wanted is None:  # every committed topic: only those it may describe
                found = {k: o for k, o in found.items() if k[0] in describable}
            else:
                found = {k: (o if k[0] in describable else None) for k, o in found.items()}
        unstable = (
            self.coordinator.pending_txn_partitions(group_id)
            if require_stable and not code
            else frozenset()
        )
        by_topic: dict[str, list[OffsetFetchResponsePartitions]] = {}
        for (topic, partition), o in found.items():
            error = 0 if describable is None or topic in describable else _TOPIC_DENIED
            if not error and (topic, partition) in unstable:
                o, error = None, ErrorCode.UNSTABLE_OFFSET_COMMIT
            by_topic.setdefault(topic, []).append(
                OffsetFetchResponsePartitions(
                    partition_index=partition,
                    committed_offset=o.offset if o is not None else -1,
                    committed_leader_epoch=o.leader_epoch if o is not None else -1,
                    metadata=o.metadata if o is not None else "",
                    error_code=error,
                )
            )
        return code, list(by_topic.items())

    async def handle_offset_fetch_request(
        self, request: Request, body: OffsetFetchRequest
    ) -> OffsetFetchResponse:
        version = request.header.api_version
        if version >= 8:
            by_id = version >= 10
            groups = []
            for g in body.groups:
                unknown: list[OffsetFetchResponseTopics] = []
                asked = g.topics
                if by_id and asked is not None:
                    # v10 names topics by id (KIP-516): an unknown id answers
                    # UNKNOWN_TOPIC_ID on each partition asked for
                    for t in asked:
                        t.name = self._topic_name(t.topic_id)
                    unknown = [
                        OffsetFetchResponseTopics(
                            topic_id=t.topic_id,
                            partitions=[
                                OffsetFetchResponsePartitions(
                                    partition_index=p,
                                    committed_offset=-1,
                                    committed_leader_epoch=-1,
                                    metadata="",
                                    error_code=ErrorCode.UNKNOWN_TOPIC_ID,
                                )
                                for p in t.partition_indexes
                            ],
                        )
                        for t in asked
                        if t.name.startswith(_UNKNOWN_ID_KEY)
                    ]
                    asked = [t for t in asked if not t.name.startswith(_UNKNOWN_ID_KEY)]
                code, found = self._fetch_group(
                    request, g.group_id, asked, g.member_id, g.member_epoch,
                    body.require_stable,
                )  # fmt: skip
                topics = [
                    OffsetFetchResponseTopics(
                        name=n, topic_id=self._topic_id(n) if by_id else ZERO_UUID, partitions=ps
                    )
                    for n, ps in found
                ]
                if by_id:
                    # a committed topic since deleted has no id to name it by
                    topics = [t for t in topics if t.topic_id != ZERO_UUID]
                    if not code:
                        topics += unknown
                groups.append(
                    OffsetFetchResponseGroup(group_id=g.group_id, topics=topics, error_code=code)
                )
            return OffsetFetchResponse(throttle_time_ms=0, groups=groups)
        code, found = self._fetch_group(
            request, body.group_id, body.topics,
            require_stable=version >= 7 and body.require_stable, legacy=version < 2,
        )  # fmt: skip
        # No top-level error before v2: every partition carries it.
        partition_code = code if version < 2 else 0
        return OffsetFetchResponse(
            throttle_time_ms=0,
            topics=[
                OffsetFetchResponseTopic(
                    name=name,
                    partitions=[
                        OffsetFetchResponsePartition(
                            partition_index=p.partition_index,
                            committed_offset=p.committed_offset,
                            committed_leader_epoch=p.committed_leader_epoch,
                            metadata=p.metadata,
                            error_code=partition_code or p.error_code,
                        )
                        for p in ps
                    ],
                )
                for name, ps in found
            ],
            error_code=code,
        )

    async def handle_offset_delete_request(
        self, request: Request, body: OffsetDeleteRequest
    ) -> OffsetDeleteResponse:
        if not self._may(request, AclOperation.DELETE, body.group_id):
            return OffsetDeleteResponse(error_code=_GROUP_DENIED, throttle_time_ms=0)
        readable = self._topics_allowed(request, AclOperation.READ, (t.name for t in body.topics))
        wanted = [
            (t.name, p.partition_index)
            for t in body.topics
            for p in t.partitions
            if t.name in readable
        ]
        # As Kafka: partitions the cluster lacks are answered here; a group
        # error from the coordinator still wins over them.
        missing = {tp for tp in wanted if not self._partition_exists(*tp)}
        request.mark_local_complete()
        code, codes = await self.coordinator.delete_offsets(
            body.group_id, [tp for tp in wanted if tp not in missing]
        )
        codes.update(dict.fromkeys(missing, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
        codes = {
            **{
                (t.name, p.partition_index): _TOPIC_DENIED
                for t in body.topics
                if t.name not in readable
                for p in t.partitions
            },
            **codes,
        }
        topics = []
        if code == ErrorCode.NONE:
            for t in body.topics:
                topics.append(
                    OffsetDeleteResponseTopic(
                        name=t.name,
                        partitions=[
                            OffsetDeleteResponsePartition(
                                partition_index=p.partition_index,
                                error_code=codes[(t.name, p.partition_index)],
                            )
                            for p in t.partitions
                        ],
                    )
                )
        return OffsetDeleteResponse(error_code=code, throttle_time_ms=0, topics=topics)

    # ------------------------------------------------------------ admin

    async def handle_list_groups_request(
        self, request: Request, body: ListGroupsRequest
    ) -> ListGroupsResponse:
        states = {s.lower() for s in body.states_filter or []}
        types = {t.lower() for t in body.types_filter or []}
        code, groups = self.coordinator.list_groups(states or None, types or None)
        if not self.auth.authorize(
            request, AclOperation.DESCRIBE, ResourceType.CLUSTER, log_if_denied=False
        ):
            # without DESCRIBE on the cluster: the groups it may describe
            groups = [
                g
                for g in groups
                if self.auth.authorize(
                    request, AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id,
                    log_if_denied=False,
                )
            ]  # fmt: skip
        return ListGroupsResponse(
            throttle_time_ms=0,
            error_code=code,
            groups=[
                ListedGroup(
                    group_id=g.group_id,
                    protocol_type=g.protocol_type or "",
                    group_state=self.coordinator.group_state(g),
                    group_type=self.coordinator.group_type(g),
                )
                for g in groups
            ],
        )

    async def handle_describe_groups_request(
        self, request: Request, body: DescribeGroupsRequest
    ) -> DescribeGroupsResponse:
        with_ops = bool(body.include_authorized_operations)
        version = request.header.api_version
        out = []
        pace = Pacer()
        for gid in body.groups:
            await pace()
            if not self._may(request, AclOperation.DESCRIBE, gid):
                out.append(
                    DescribedGroup(
                        error_code=_GROUP_DENIED,
                        group_id=gid,
                        group_state="",
                        protocol_type="",
                        protocol_data="",
                        members=[],
                        authorized_operations=_AUTHORIZED_OPS_NOT_REQUESTED,
                    )
                )
                continue
            code, group = self.coordinator.describe_group(gid)
            not_classic = group is not None and self.coordinator.group_type(group) != "classic"
            missing = group is None or group.is_in(GroupState.DEAD)
            if version >= 6 and not code and (missing or not_classic):
                # v6 (KIP-1043): a group that is missing, or not a classic
                # group, is GROUP_ID_NOT_FOUND with a message, as
                # Kafka's GroupMetadataManager answers
                why = "is not a classic group" if not_classic else "not found"
                out.append(
                    DescribedGroup(
                        error_code=ErrorCode.GROUP_ID_NOT_FOUND,
                        error_message=f"Group {gid} {why}.",
                        group_id=gid,
                        group_state=GroupState.DEAD.value,
                        protocol_type="",
                        protocol_data="",
                        members=[],
                        authorized_operations=_AUTHORIZED_OPS_NOT_REQUESTED,
                    )
                )
                continue
            ops = (
                self.auth.authorized_operations(request, ResourceType.GROUP, gid)
                if with_ops
                else _AUTHORIZED_OPS_NOT_REQUESTED
            )
            entry = DescribedGroup(
                error_code=code,
                group_id=gid,
                group_state=GroupState.DEAD.value,
                protocol_type="",
                protocol_data="",
                members=[],
                authorized_operations=ops,
            )
            if not_classic:
                # As Kafka before DescribeGroups v6: a group of another type
                # is Dead, without an error (ConsumerGroupDescribe tells).
                group = None
            if group is not None:
                stable = group.is_in(GroupState.STABLE)
                entry.group_state = group.state.value
                entry.protocol_type = group.protocol_type or ""
                entry.protocol_data = (group.protocol_name or "") if stable else ""
                members = []
                for m in group.members.values():
                    meta = b""
                    if stable and group.protocol_name is not None:
                        try:
                            meta = m.metadata(group.protocol_name)
                        except KeyError:
                            meta = b""
                    members.append(
                        DescribedGroupMember(
                            member_id=m.member_id,
                            group_instance_id=m.group_instance_id if version >= 4 else None,
                            client_id=m.client_id,
                            client_host=m.client_host,
                            member_metadata=meta,
                            member_assignment=m.assignment if stable else b"",
                        )
                    )
                entry.members = members
            out.append(entry)
        return DescribeGroupsResponse(throttle_time_ms=0, groups=out)

    async def handle_delete_groups_request(
        self, request: Request, body: DeleteGroupsRequest
    ) -> DeleteGroupsResponse:
        names = list(body.groups_names)
        deletable = [g for g in names if self._may(request, AclOperation.DELETE, g)]
        request.mark_local_complete()
        codes = {g: int(_GROUP_DENIED) for g in names}
        if deletable:
            codes.update(await self.coordinator.delete_groups(deletable))
        return DeleteGroupsResponse(
            throttle_time_ms=0,
            results=[
                DeletableGroupResult(group_id=g, error_code=codes[g]) for g in body.groups_names
            ],
        )
