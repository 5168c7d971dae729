"""The cluster handlers: Metadata (with topic auto-creation), DescribeCluster
and DescribeLogDirs. A single broker is its own controller, so each answers
with this broker alone; once the MetadataCache (``pylog.metadata``) is fed by
UpdateMetadata, the broker list and the leaders come from it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os

from pylog.broker.auth_helper import AuthHelper, ops_bit_field
from pylog.broker.request_helpers import MAX_PARTITIONS_PER_REQUEST, Pacer
from pylog.broker.response_dicts import (
    DescribeClusterResponseDict,
    DescribeLogDirsPartitionDict,
    DescribeLogDirsResponseDict,
    DescribeLogDirsResultDict,
    MetadataResponseBrokerDict,
    MetadataResponseDict,
    MetadataResponsePartitionDict,
    MetadataResponseTopicDict,
)
from pylog.common.topic_partition import TopicPartition
from pylog.errors import (
    ErrorCode,
    InvalidReplicationFactorError,
    InvalidTopicError,
    TopicAlreadyExistsError,
)
from pylog.logsafe import quoted
from pylog.metadata.metadata_cache import MetadataCache
from pylog.metadata.store import (
    INTERNAL_TOPICS,
    MetadataStore,
    NewTopic,
    TopicMetadata,
    validate_topic_name,
)
from pylog.network import Request
from pylog.protocol import ZERO_UUID
from pylog.protocol.messages import (
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirsResponse,
    DescribeClusterRequest,
    DescribeLogDirsRequest,
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
    MetadataRequest,
)
from pylog.protocol.messages.alter_replica_log_dirs_response import (
    AlterReplicaLogDirPartitionResult,
    AlterReplicaLogDirTopicResult,
)
from pylog.protocol.messages.describe_topic_partitions_response import (
    Cursor,
    DescribeTopicPartitionsResponsePartition,
    DescribeTopicPartitionsResponseTopic,
)
from pylog.security.acl_entry import supported_operations
from pylog.security.acl_operation import AclOperation
from pylog.security.resource_type import ResourceType
from pylog.server.config import EndPoint, KafkaConfig
from pylog.server.replica_manager import ReplicaManager

__all__ = ["ClusterApis"]

_log = logging.getLogger("pylog.broker.cluster_apis")

# The responses are dicts typed by response_dicts (its docstring says why).

_AUTHORIZED_OPS_NOT_REQUESTED = -(2**31)
# Without an authorizer every operation a resource supports is allowed (the
# cluster has seven: no WRITE); with one, AuthHelper works them out per request.
_TOPIC_OPS = ops_bit_field(supported_operations(ResourceType.TOPIC))


def _uuid_out(topic_id: str | None) -> str:
    return topic_id or ZERO_UUID


def _described(code: int, name: str) -> DescribeTopicPartitionsResponseTopic:
    """A topic DescribeTopicPartitions answers with an error only."""
    return DescribeTopicPartitionsResponseTopic(
        error_code=code,
        name=name,
        topic_id=ZERO_UUID,
        is_internal=False,
        partitions=[],
        topic_authorized_operations=_AUTHORIZED_OPS_NOT_REQUESTED,
    )


class ClusterApis:
    """Metadata, DescribeCluster, DescribeLogDirs, and this broker's endpoint
    on each listener (also FindCoordinator's answer)."""

    #: Who may do what (KafkaApis sets the broker's; none: everything allowed).
    auth: AuthHelper = AuthHelper()

    def _cluster_ops(self, request: Request) -> int:
        """The cluster's authorized operations: none without DESCRIBE on it."""
        if not self.auth.authorize_cluster(request, AclOperation.DESCRIBE):
            return 0
        return self.auth.authorized_operations(request, ResourceType.CLUSTER)

    def __init__(
        self,
        config: KafkaConfig,
        replica_manager: ReplicaManager,
        metadata_store: MetadataStore,
    ) -> None:
        self.config = config
        self.replica_manager = replica_manager
        self.metadata_store = metadata_store
        self.log_manager = replica_manager.log_manager
        self.broker_id = config.broker_id
        self.max_partitions = int(config.get("max.broker.partitions"))
        self._endpoints: tuple[EndPoint, ...] = config.advertised_listeners

    # ------------------------------------------------------------------ endpoints

    def broker_endpoint(self, listener: str) -> tuple[str, int]:
        """This broker's advertised (host, port) on ``listener``; the first
        advertised listener's for a listener it does not name."""
        for ep in self._endpoints:
            if ep.listener_name == listener:
                return ep.host, ep.port
        if self._endpoints:
            return self._endpoints[0].host, self._endpoints[0].port
        return "localhost", 9092

    # ------------------------------------------------------------------ Metadata

    async def _auto_create(self, names: list[str]) -> dict[str, tuple[int, TopicMetadata | None]]:
        """Create the topics a Metadata request named and lacks, all in one
        store change (one fsync) on a worker thread: (error code, metadata) per
        name. At most MAX_PARTITIONS_PER_REQUEST partitions are made per
        request; the names past that are answered LEADER_NOT_AVAILABLE (the
        client asks again, and the next request makes the next share)."""
        cfg = self.config
        per_topic = cfg.num_partitions
        budget = MAX_PARTITIONS_PER_REQUEST // per_topic
        if budget == 0:  # num.partitions alone is past what a request may add
            _log.warning(
                "not auto-creating %d topic(s): num.partitions=%d is more than one request "
                "may create (%d)",
                len(names),
                per_topic,
                MAX_PARTITIONS_PER_REQUEST,
            )
            return {n: (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None) for n in names}
        now, later = names[:budget], names[budget:]
        made = await asyncio.to_thread(
            self.metadata_store.create_topics,
            [NewTopic(n, per_topic, cfg.default_replication_factor) for n in now],
            max_partitions=self.max_partitions,
        )
        out: dict[str, tuple[int, TopicMetadata | None]] = {
            n: (ErrorCode.LEADER_NOT_AVAILABLE, None) for n in later
        }
        created = 0
        failed: list[tuple[str, Exception]] = []
        for name, meta in zip(now, made, strict=True):
            if isinstance(meta, TopicMetadata):
                created += 1
                out[name] = (ErrorCode.NONE, meta)
            elif isinstance(meta, TopicAlreadyExistsError):
                out[name] = (ErrorCode.NONE, self.metadata_store.topic(name))
            elif isinstance(meta, (InvalidTopicError, InvalidReplicationFactorError)):
                out[name] = (meta.code, None)
            else:
                failed.append((name, meta))
                out[name] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)
        if failed:  # one line, however many topics
            _log.warning(
                "auto-creating %d topic(s) failed, %s first: %s",
                len(failed),
                quoted(failed[0][0]),
                failed[0][1],
            )
        if created:
            _log.info(
                "auto-created %d topic(s) with %d partition(s) each%s",
                created,
                per_topic,
                f", {quoted(now[0])} first" if created > 1 else f": {quoted(now[0])}",
            )
        return out

    # ------------------------------------------------------------------ the cluster view

    @property
    def metadata_cache(self) -> MetadataCache:
        return self.replica_manager.metadata_cache

    def in_cluster(self) -> bool:
        """Whether a controller's UpdateMetadata has filled the MetadataCache:
        then Metadata, DescribeCluster and FindCoordinator answer from it; a
        lone broker answers with itself, as before."""
        return bool(self.metadata_cache.alive_brokers())

    def cluster_brokers(self, listener: str) -> list[tuple[int, str, int, str | None]]:
        """(id, host, port, rack) of every live broker with an endpoint on
        ``listener`` (Kafka leaves out the brokers without one)."""
        out = []
        for b in self.metadata_cache.alive_brokers():
            ep = b.endpoint(listener)
            if ep is not None:
                out.append((b.id, ep.host, ep.port, b.rack))
        return out

    def controller_id(self) -> int:
        if not self.in_cluster():
            return self.broker_id
        found = self.metadata_cache.controller_id
        return found if found is not None else -1

    def _cached_partition(self, topic: str, i: int, listener: str) -> MetadataResponsePartitionDict:
        """One partition as the MetadataCache has it: its leader, or
        LEADER_NOT_AVAILABLE / -1 when the leader is not a live broker
        (LISTENER_NOT_FOUND when it is, without the request's listener)."""
        cache = self.metadata_cache
        info = cache.partition_info(topic, i)
        if info is None:
            return {
                "error_code": ErrorCode.LEADER_NOT_AVAILABLE,
                "partition_index": i,
                "leader_id": -1,
                "leader_epoch": -1,
                "replica_nodes": [],
                "isr_nodes": [],
                "offline_replicas": [],
            }
        code: int = ErrorCode.NONE
        leader = info.leader
        leader_broker = cache.alive_broker(leader) if leader >= 0 else None
        if leader_broker is None:
            code, leader = ErrorCode.LEADER_NOT_AVAILABLE, -1
        elif leader_broker.endpoint(listener) is None:
            code, leader = ErrorCode.LISTENER_NOT_FOUND, -1
        isr = list(info.isr)
        if info.leader == self.broker_id:
            # The leader's own ISR is newer than the cache's until the
            # controller propagates an ISR change it wrote (UpdateMetadata).
            local = self.replica_manager.partition(TopicPartition(topic, i))
            if local is not None and local.is_leader and local.leader_epoch == info.leader_epoch:
                isr = local.in_sync_replicas
        return {
            "error_code": code,
            "partition_index": i,
            "leader_id": leader,
            "leader_epoch": info.leader_epoch,
            "replica_nodes": list(info.replicas),
            "isr_nodes": isr,
            "offline_replicas": list(info.offline_replicas),
        }

    def _cached_topic_entry(
        self, name: str, meta: TopicMetadata | None, with_ops: bool, listener: str
    ) -> MetadataResponseTopicDict:
        cache = self.metadata_cache
        cached = {p.partition for p in cache.partitions_of(name)}
        count = max(meta.partitions if meta is not None else 0, max(cached, default=-1) + 1)
        topic_id = meta.topic_id if meta is not None else cache.topic_id(name)
        return {
            "error_code": ErrorCode.NONE,
            "name": name,
            "topic_id": _uuid_out(topic_id),
            "is_internal": name in INTERNAL_TOPICS,
            "partitions": [self._cached_partition(name, i, listener) for i in range(count)],
            "topic_authorized_operations": _TOPIC_OPS
            if with_ops
            else _AUTHORIZED_OPS_NOT_REQUESTED,
        }

    def _topic_entry(
        self, meta: TopicMetadata, with_ops: bool, listener: str | None = None
    ) -> MetadataResponseTopicDict:
        if listener is not None and self.in_cluster():
            return self._cached_topic_entry(meta.name, meta, with_ops, listener)
        b = self.broker_id
        rm = self.replica_manager
        partitions: list[MetadataResponsePartitionDict] = []
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

    async def handle_topic_metadata_request(
        self, request: Request, body: MetadataRequest
    ) -> MetadataResponseDict:
        version = request.header.api_version
        store = self.metadata_store
        with_ops = bool(body.include_topic_authorized_operations)
        allow_auto = bool(body.allow_auto_topic_creation) if version >= 4 else True
        allow_auto = allow_auto and self.config.auto_create_topics_enable
        requested = body.topics
        listener = request.listener
        cluster = self.in_cluster()
        topics: list[MetadataResponseTopicDict] = []
        auth = self.auth
        if requested is None or (version == 0 and not requested):
            topics = [self._topic_entry(m, with_ops, listener) for m in store.topics()]
            if cluster:  # and the topics only the controller has told of
                known = {m.name for m in store.topics()}
                topics += [
                    self._cached_topic_entry(t, None, with_ops, listener)
                    for t in self.metadata_cache.topics()
                    if t not in known
                ]
            if auth.enabled:  # the topics it may not describe are left out, silently
                describable = auth.filter_by_authorized(
                    request,
                    AclOperation.DESCRIBE,
                    ResourceType.TOPIC,
                    (str(t["name"]) for t in topics),
                    log_if_denied=False,
                )
                topics = [t for t in topics if t["name"] in describable]
        else:
            # One entry per requested topic, in order; the names to auto-create
            # are filled in once they are made, all together.
            entries: list[MetadataResponseTopicDict | str] = []
            missing: dict[str, None] = {}
            seen: set[tuple[str | None, str | None]] = set()
            pace = Pacer()
            for t in requested:
                await pace()
                name = t.name
                topic_id = t.topic_id
                key = (name, None if name is not None else topic_id)
                if key in seen:  # each topic is answered once, however often it is named
                    continue
                seen.add(key)
                if name is None and topic_id not in (None, ZERO_UUID):
                    meta = store.topic_by_id(topic_id)
                    if meta is None:
                        # The name is nullable from v12; before, an empty name.
                        unnamed = None if version >= 12 else ""
                        entries.append(
                            self._topic_error(ErrorCode.UNKNOWN_TOPIC_ID, unnamed, topic_id)
                        )
                    elif not auth.authorize(
                        request, AclOperation.DESCRIBE, ResourceType.TOPIC, meta.name
                    ):
                        entries.append(
                            self._topic_error(ErrorCode.TOPIC_AUTHORIZATION_FAILED, None, topic_id)
                        )
                    else:
                        entries.append(self._topic_entry(meta, with_ops, listener))
                    continue
                if name is None:
                    # Neither a name nor an id. The name is nullable in the
                    # response from v12; before, an empty name.
                    unnamed = None if version >= 12 else ""
                    entries.append(self._topic_error(ErrorCode.INVALID_REQUEST, unnamed, None))
                    continue
                if not auth.authorize(request, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
                    # whether it exists is not disclosed
                    entries.append(self._topic_error(ErrorCode.TOPIC_AUTHORIZATION_FAILED, name))
                    continue
                meta = store.topic(name)
                if meta is not None:
                    entries.append(self._topic_entry(meta, with_ops, listener))
                    continue
                if cluster and self.metadata_cache.contains_topic(name):
                    entries.append(self._cached_topic_entry(name, None, with_ops, listener))
                    continue
                try:
                    validate_topic_name(name)
                except InvalidTopicError:
                    entries.append(self._topic_error(ErrorCode.INVALID_TOPIC_EXCEPTION, name))
                    continue
                if not allow_auto or name in INTERNAL_TOPICS:
                    # An internal topic is made by its coordinator, with its
                    # own partition count and configs (__consumer_offsets by
                    # the first FindCoordinator), never as a plain topic.
                    entries.append(self._topic_error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name))
                    continue
                if not (
                    auth.authorize(
                        request, AclOperation.CREATE, ResourceType.CLUSTER, log_if_denied=False
                    )
                    or auth.authorize(request, AclOperation.CREATE, ResourceType.TOPIC, name)
                ):
                    entries.append(self._topic_error(ErrorCode.TOPIC_AUTHORIZATION_FAILED, name))
                    continue
                entries.append(name)
                missing[name] = None
            made = await self._auto_create(list(missing)) if missing else {}
            for entry in entries:
                if not isinstance(entry, str):
                    topics.append(entry)
                    continue
                code, meta = made[entry]
                if meta is None:
                    topics.append(self._topic_error(code, entry))
                else:
                    topics.append(self._topic_entry(meta, with_ops, listener))
            if with_ops:
                # Kafka gives every topic it answers its operations, an unknown
                # or invalid one's too (what the principal could do with that name).
                for entry_ in topics:
                    entry_.setdefault("topic_authorized_operations", _TOPIC_OPS)
        brokers: list[MetadataResponseBrokerDict]
        if cluster:
            brokers = [
                {"node_id": i, "host": h, "port": p, "rack": r}
                for i, h, p, r in self.cluster_brokers(listener)
            ]
        else:
            host, port = self.broker_endpoint(listener)
            brokers = [{"node_id": self.broker_id, "host": host, "port": port, "rack": None}]
        response: MetadataResponseDict = {
            "throttle_time_ms": 0,
            "brokers": brokers,
            "cluster_id": store.cluster_id,
            "controller_id": self.controller_id(),
            "topics": topics,
        }
        if body.include_cluster_authorized_operations:
            response["cluster_authorized_operations"] = self._cluster_ops(request)
        if with_ops and auth.enabled:
            for entry in topics:
                name = entry["name"]
                if "topic_authorized_operations" in entry and name is not None:
                    entry["topic_authorized_operations"] = auth.authorized_operations(
                        request, ResourceType.TOPIC, name
                    )
        return response

    @staticmethod
    def _topic_error(
        code: int, name: str | None, topic_id: str | None = None
    ) -> MetadataResponseTopicDict:
        return {
            "error_code": code,
            "name": name,
            "topic_id": _uuid_out(topic_id),
            "is_internal": False,
            "partitions": [],
        }

    # ------------------------------------------------------------------ DescribeTopicPartitions

    async def handle_describe_topic_partitions_request(
        self, request: Request, body: DescribeTopicPartitionsRequest
    ) -> DescribeTopicPartitionsResponse:
        """KIP-966's paged topic description, which Kafka 4's Admin.describeTopics
        (and so kafka-topics --describe) asks for: the topics in name order from
        the cursor on, at most ``response_partition_limit`` partitions (and
        ``max.request.partition.size.limit``), and the cursor to go on from."""
        store = self.metadata_store
        cursor = body.cursor
        start_topic = cursor.topic_name if cursor is not None else ""
        everything = not body.topics
        if everything:
            names = {m.name for m in store.topics()}
            if self.in_cluster():
                names |= set(self.metadata_cache.topics())
        else:
            names = {t.name for t in body.topics}
        names = {n for n in names if n >= start_topic}
        bad_cursor = cursor is not None and (
            (not everything and cursor.topic_name not in names) or cursor.partition_index < 0
        )
        if bad_cursor:
            # Kafka's InvalidRequestException here becomes its error response:
            # every requested topic with INVALID_REQUEST, the connection kept.
            return DescribeTopicPartitionsResponse(
                throttle_time_ms=0,
                topics=[_described(ErrorCode.INVALID_REQUEST, t.name) for t in body.topics],
                next_cursor=None,
            )
        auth = self.auth
        refused: list[DescribeTopicPartitionsResponseTopic] = []
        allowed: list[str] = []
        for name in sorted(names):
            if auth.authorize(request, AclOperation.DESCRIBE, ResourceType.TOPIC, name,
                              log_if_denied=not everything):  # fmt: skip
                allowed.append(name)
            elif not everything:  # its existence is not disclosed
                refused.append(_described(ErrorCode.TOPIC_AUTHORIZATION_FAILED, name))
        limit = max(1, min(int(self.config.get("max.request.partition.size.limit")),
                           body.response_partition_limit))  # fmt: skip
        topics: list[DescribeTopicPartitionsResponseTopic] = []
        next_cursor: Cursor | None = None
        for name in allowed:
            if limit == 0:
                next_cursor = Cursor(topic_name=name, partition_index=0)
                break
            meta = store.topic(name)
            if meta is None and not (
                self.in_cluster() and self.metadata_cache.contains_topic(name)
            ):
                if not everything:
                    topics.append(_described(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name))
                continue
            entry = (
                self._topic_entry(meta, False, request.listener)
                if meta is not None
                else self._cached_topic_entry(name, None, False, request.listener)
            )
            first = cursor.partition_index if cursor is not None and name == start_topic else 0
            partitions = [p for p in entry["partitions"] if p["partition_index"] >= first]
            if len(partitions) > limit:
                next_cursor = Cursor(
                    topic_name=name, partition_index=partitions[limit]["partition_index"]
                )
                partitions = partitions[:limit]
            limit -= len(partitions)
            topics.append(
                DescribeTopicPartitionsResponseTopic(
                    error_code=ErrorCode.NONE,
                    name=name,
                    topic_id=entry["topic_id"],
                    is_internal=bool(entry["is_internal"]),
                    partitions=[
                        DescribeTopicPartitionsResponsePartition(
                            error_code=p["error_code"],
                            partition_index=p["partition_index"],
                            leader_id=p["leader_id"],
                            leader_epoch=p["leader_epoch"],
                            replica_nodes=list(p["replica_nodes"]),
                            isr_nodes=list(p["isr_nodes"]),
                            # No eligible leader replicas (KIP-966's ELR) on ZooKeeper.
                            eligible_leader_replicas=[],
                            last_known_elr=[],
                            offline_replicas=list(p["offline_replicas"]),
                        )
                        for p in partitions
                    ],
                    topic_authorized_operations=auth.authorized_operations(
                        request, ResourceType.TOPIC, name
                    )
                    if auth.enabled
                    else _TOPIC_OPS,
                )
            )
            if next_cursor is not None:
                break
        return DescribeTopicPartitionsResponse(
            throttle_time_ms=0, topics=topics + refused, next_cursor=next_cursor
        )

    # ------------------------------------------------------------------ DescribeCluster

    async def handle_describe_cluster_request(
        self, request: Request, body: DescribeClusterRequest
    ) -> DescribeClusterResponseDict:
        endpoint_type = body.endpoint_type
        response: DescribeClusterResponseDict = {
            "throttle_time_ms": 0,
            "error_code": ErrorCode.NONE,
            "error_message": None,
            "endpoint_type": endpoint_type,
            "cluster_id": self.metadata_store.cluster_id,
            "controller_id": self.broker_id,
            "brokers": [],
            "cluster_authorized_operations": self._cluster_ops(request)
            if body.include_cluster_authorized_operations
            else _AUTHORIZED_OPS_NOT_REQUESTED,
        }
        if endpoint_type != 1:
            code = (
                ErrorCode.MISMATCHED_ENDPOINT_TYPE
                if endpoint_type == 2
                else ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
            )
            response["error_code"] = code
            response["error_message"] = (
                "The request was sent to an endpoint of type BROKER, but we wanted an endpoint "
                "of type CONTROLLER"
                if endpoint_type == 2
                else f"Unsupported endpoint type {endpoint_type}"
            )
            response["controller_id"] = -1
            return response
        if self.in_cluster():
            response["controller_id"] = self.controller_id()
            response["brokers"] = [
                {"broker_id": i, "host": h, "port": p, "rack": r}
                for i, h, p, r in self.cluster_brokers(request.listener)
            ]
            return response
        host, port = self.broker_endpoint(request.listener)
        response["brokers"] = [
            {"broker_id": self.broker_id, "host": host, "port": port,
             "rack": self.config.get("broker.rack")}
        ]  # fmt: skip
        return response

    # ------------------------------------------------------------------ DescribeLogDirs

    async def handle_describe_log_dirs_request(
        self, request: Request, body: DescribeLogDirsRequest
    ) -> DescribeLogDirsResponseDict:
        if not self.auth.authorize_cluster(request, AclOperation.DESCRIBE):
            return {
                "throttle_time_ms": 0,
                "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "results": [],
            }
        wanted: set[TopicPartition] | None = None
        if body.topics is not None:
            wanted = {TopicPartition(t.topic, p) for t in body.topics for p in t.partitions}
        results: list[DescribeLogDirsResultDict] = []
        for path in self.log_manager.log_dirs:
            if self.log_manager.is_offline(path):
                # Kafka's answer for a failed directory: the error, no sizes.
                results.append(
                    {"error_code": ErrorCode.KAFKA_STORAGE_ERROR, "log_dir": path, "topics": [],
                     "total_bytes": -1, "usable_bytes": -1}
                )  # fmt: skip
                continue
            lm = self.log_manager
            logs = [(tp, log, False) for tp, log in lm.logs_in_dir(path).items()]
            logs += [(tp, log, True) for tp, log in lm.future_logs_in_dir(path).items()]
            by_topic: dict[str, list[DescribeLogDirsPartitionDict]] = {}
            for tp, log, future in sorted(logs, key=lambda x: (x[0], x[2])):
                if wanted is not None and tp not in wanted:
                    continue
                # Kafka's getLogEndOffsetLag: a future log's distance to the
                # current log's end; a current log's to its high watermark.
                current = lm.get_log(tp)
                if current is None:
                    lag = -1
                elif future:
                    lag = max(current.log_end_offset - log.log_end_offset, 0)
                else:
                    lag = max(log.high_watermark - log.log_end_offset, 0)
                by_topic.setdefault(tp.topic, []).append(
                    {"partition_index": tp.partition, "partition_size": log.size,
                     "offset_lag": lag, "is_future_key": future}
                )  # fmt: skip
            total = usable = -1
            with contextlib.suppress(OSError):
                st = os.statvfs(path)
                total, usable = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
            results.append(
                {
                    "error_code": ErrorCode.NONE,
                    "log_dir": path,
                    "topics": [{"name": n, "partitions": p} for n, p in by_topic.items()],
                    "total_bytes": total,
                    "usable_bytes": usable,
                }
            )
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "results": results}

    # ------------------------------------------------------------------ AlterReplicaLogDirs

    async def handle_alter_replica_log_dirs_request(
        self, request: Request, body: AlterReplicaLogDirsRequest
    ) -> AlterReplicaLogDirsResponse:
        """Move replicas between this broker's log directories (KIP-113;
        Kafka's handleAlterReplicaLogDirsRequest): CLUSTER ALTER, then each
        partition's outcome from the ReplicaManager."""
        dirs: dict[TopicPartition, str] = {}
        for d in body.dirs:
            for t in d.topics:
                for p in t.partitions:
                    dirs[TopicPartition(t.name, p)] = d.path
        if self.auth.authorize_cluster(request, AclOperation.ALTER):
            codes = self.replica_manager.alter_replica_log_dirs(dirs)
        else:
            codes = {tp: int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED) for tp in dirs}
        by_topic: dict[str, list[AlterReplicaLogDirPartitionResult]] = {}
        for tp, code in codes.items():
            by_topic.setdefault(tp.topic, []).append(
                AlterReplicaLogDirPartitionResult(partition_index=tp.partition, error_code=code)
            )
        return AlterReplicaLogDirsResponse(
            throttle_time_ms=0,
            results=[
                AlterReplicaLogDirTopicResult(topic_name=t, partitions=ps)
                for t, ps in by_topic.items()
            ],
        )
