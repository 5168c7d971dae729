"""The small Kafka client under the ``pylog`` client commands, on pylog's own
protocol codec (:class:`pylog.protocol.client.KafkaConnection`).

It routes requests the way a Kafka client does: the bootstrap servers answer
Metadata, which names every broker, each partition's leader and the
controller; Produce, Fetch and ListOffsets go to a partition's leader;
CreateTopics, DeleteTopics and CreatePartitions to the controller; group
requests to the coordinator FindCoordinator names; a broker's configs to
that broker; anything else to any broker. Each connection asks ApiVersions
first and every request is sent at the newest version both sides know.

Kafka error codes become the exceptions of :mod:`pylog.errors` (the class
with that code, or :class:`BrokerError` for a code pylog has no class for),
named and described by :func:`error_name` and :func:`describe`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pylog import errors
from pylog.errors import ErrorCode, KafkaError
from pylog.protocol import ApiKey
from pylog.protocol.client import KafkaConnection
from pylog.protocol.messages import ApiVersionsResponse
from pylog.security.sasl_client_authenticator import ClientSecurity, authenticate_blocking

__all__ = [
    "BrokerError",
    "BrokerUnreachableError",
    "ClusterClient",
    "ClusterMetadata",
    "PartitionMetadata",
    "TopicMetadata",
    "describe",
    "error_for",
    "error_name",
]

# The newest version of each API this client builds requests for; a broker
# advertising less gets its newest (the request bodies below fit every version
# from the broker's minimum up to these).
CLIENT_MAX_VERSIONS: dict[int, int] = {
    ApiKey.PRODUCE: 9,
    ApiKey.FETCH: 12,  # 13+ names topics by id only
    ApiKey.LIST_OFFSETS: 7,
    ApiKey.METADATA: 12,
    ApiKey.OFFSET_COMMIT: 8,
    ApiKey.OFFSET_FETCH: 7,  # 8+ batches groups
    ApiKey.FIND_COORDINATOR: 3,  # 4+ batches keys
    ApiKey.JOIN_GROUP: 7,
    ApiKey.HEARTBEAT: 4,
    ApiKey.LEAVE_GROUP: 4,
    ApiKey.SYNC_GROUP: 5,
    ApiKey.DESCRIBE_GROUPS: 5,
    ApiKey.LIST_GROUPS: 5,  # 5 adds the group type (KIP-848)
    ApiKey.DELETE_GROUPS: 2,
    ApiKey.CREATE_TOPICS: 7,
    ApiKey.DELETE_TOPICS: 5,
    ApiKey.CREATE_PARTITIONS: 3,
    ApiKey.DESCRIBE_CONFIGS: 4,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: 1,
    ApiKey.ELECT_LEADERS: 2,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: 0,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: 0,
    ApiKey.DESCRIBE_ACLS: 3,
    ApiKey.CREATE_ACLS: 3,
    ApiKey.DELETE_ACLS: 3,
    ApiKey.CONSUMER_GROUP_DESCRIBE: 0,
    ApiKey.SHARE_GROUP_DESCRIBE: 1,
    ApiKey.LIST_TRANSACTIONS: 1,
    ApiKey.DESCRIBE_TRANSACTIONS: 0,
    ApiKey.DESCRIBE_PRODUCERS: 0,
    ApiKey.WRITE_TXN_MARKERS: 1,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: 0,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: 0,
    ApiKey.DESCRIBE_LOG_DIRS: 4,
    ApiKey.ALTER_REPLICA_LOG_DIRS: 2,
    ApiKey.DESCRIBE_CLIENT_QUOTAS: 1,
    ApiKey.ALTER_CLIENT_QUOTAS: 1,
}

EARLIEST_TIMESTAMP, LATEST_TIMESTAMP = -2, -1
RETRY_BACKOFF_S = 0.1
ZERO_UUID_TEXT = "AAAAAAAAAAAAAAAAAAAAAA"

# ---------------------------------------------------------------- errors


class BrokerError(KafkaError):
    """A Kafka error code pylog has no exception class for; ``code`` and
    ``error_name`` are set on the instance."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code
        try:
            self.error_name = ErrorCode(code).name
        except ValueError:
            self.error_name = f"ERROR_CODE_{code}"
        self.retriable = code in _RETRIABLE


class BrokerUnreachableError(KafkaError):
    """No broker answered (connection refused, timed out or closed)."""

    code, error_name, retriable = 13, "NETWORK_EXCEPTION", True


def _classes_by_code() -> dict[int, type[KafkaError]]:
    found: dict[int, type[KafkaError]] = {}
    for obj in vars(errors).values():
        if (
            isinstance(obj, type)
            and issubclass(obj, KafkaError)
            and obj is not KafkaError
            and "code" in vars(obj)
            and obj.code >= 0
        ):
            found.setdefault(obj.code, obj)
    return found


_CLASSES = _classes_by_code()
_RETRIABLE = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.NETWORK_EXCEPTION,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_COORDINATOR,
    ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ErrorCode.NOT_CONTROLLER,
    ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH,
}
# Codes a request is retried on after new metadata or a new coordinator.
_ROUTING = {
    ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_COORDINATOR,
    ErrorCode.NOT_CONTROLLER,
    ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH,
}

# The standard text of the codes a user of the commands is likely to meet;
# others are described by their name.
_DESCRIPTIONS = {
    ErrorCode.UNKNOWN_SERVER_ERROR: "The server experienced an unexpected error",
    ErrorCode.OFFSET_OUT_OF_RANGE: "The requested offset is not within the range kept",
    ErrorCode.CORRUPT_MESSAGE: "The message failed its CRC check or is otherwise corrupt",
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition",
    ErrorCode.LEADER_NOT_AVAILABLE: "There is no leader for this topic-partition",
    ErrorCode.NOT_LEADER_OR_FOLLOWER: "This server is not the leader for the partition",
    ErrorCode.REQUEST_TIMED_OUT: "The request timed out",
    ErrorCode.MESSAGE_TOO_LARGE: "The record is larger than the server accepts",
    ErrorCode.COORDINATOR_NOT_AVAILABLE: "The group coordinator is not available",
    ErrorCode.NOT_COORDINATOR: "This is not the correct coordinator for the group",
    ErrorCode.INVALID_TOPIC_EXCEPTION: "The topic name is not valid",
    ErrorCode.NOT_ENOUGH_REPLICAS: "Fewer in-sync replicas than required",
    ErrorCode.ILLEGAL_GENERATION: "The generation is not the group's current one",
    ErrorCode.UNKNOWN_MEMBER_ID: "The coordinator does not know this member",
    ErrorCode.REBALANCE_IN_PROGRESS: "The group is rebalancing",
    ErrorCode.TOPIC_ALREADY_EXISTS: "The topic already exists",
    ErrorCode.INVALID_PARTITIONS: "The number of partitions is not valid",
    ErrorCode.INVALID_REPLICATION_FACTOR: "The replication factor is not valid",
    ErrorCode.INVALID_CONFIG: "The configuration is not valid",
    ErrorCode.UNSUPPORTED_VERSION: "The version of the API is not supported",
    ErrorCode.NON_EMPTY_GROUP: "The group is not empty",
    ErrorCode.GROUP_ID_NOT_FOUND: "The group id does not exist",
    ErrorCode.TOPIC_DELETION_DISABLED: "Topic deletion is disabled",
}


def error_name(code: int) -> str:
    """``TopicAlreadyExistsError`` for 36: the pylog class's name, else one
    built from Kafka's name of the code (``GROUP_ID_NOT_FOUND`` ->
    ``GroupIdNotFoundError``)."""
    cls = _CLASSES.get(code)
    if cls is not None:
        return cls.__name__
    try:
        name = ErrorCode(code).name
    except ValueError:
        return f"KafkaError({code})"
    return "".join(w.capitalize() for w in name.split("_")).removesuffix("Exception") + "Error"


def _standard_text(code: int) -> str:
    text = _DESCRIPTIONS.get(code)  # type: ignore[call-overload]
    if text:
        return str(text)
    try:
        return ErrorCode(code).name.replace("_", " ").lower()
    except ValueError:
        return f"error code {code}"


def error_for(code: int, message: str | None = None) -> KafkaError:
    """The exception for a Kafka error code, with the broker's message (or the
    code's standard text)."""
    text = message or _standard_text(code)
    cls = _CLASSES.get(code)
    if cls is not None:
        try:
            return cls(text)
        except TypeError:  # a class wanting more than a message
            pass
    return BrokerError(text, code)


def describe(code: int, message: str | None = None) -> str:
    """``Name: text`` for an error code."""
    return f"{error_name(code)}: {message or _standard_text(code)}"


def check(code: int, message: str | None = None) -> None:
    if code:
        raise error_for(code, message)


# ---------------------------------------------------------------- metadata


@dataclass(frozen=True)
class PartitionMetadata:
    partition: int
    leader: int
    replicas: list[int]
    isr: list[int]
    offline: list[int]
    error_code: int
    #: Metadata v7+ (KIP-320): what a Fetch or ListOffsets names as the
    #: current leader epoch so a stale leader is fenced; -1 when unknown.
    leader_epoch: int = -1


@dataclass(frozen=True)
class TopicMetadata:
    name: str
    error_code: int
    topic_id: str | None
    is_internal: bool
    partitions: dict[int, PartitionMetadata]


@dataclass
class ClusterMetadata:
    brokers: dict[int, tuple[str, int]]
    controller_id: int
    topics: dict[str, TopicMetadata] = field(default_factory=dict)
    racks: dict[int, str | None] = field(default_factory=dict)
    cluster_id: str | None = None


# ---------------------------------------------------------------- the client


class _Node:
    """One connection and the versions its broker serves."""

    def __init__(self, conn: KafkaConnection, versions: dict[int, tuple[int, int]]) -> None:
        self.conn = conn
        self.versions = versions


Body = Mapping[str, Any] | Callable[[int], Mapping[str, Any]]


class ClusterClient:
    """Connections to a cluster's brokers, opened as requests need them."""

    def __init__(
        self,
        bootstrap_servers: str,
        *,
        timeout_ms: int = 30_000,
        client_id: str = "pylog-cli",
        security: ClientSecurity | None = None,
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        #: TLS and SASL of every connection (``--command-config``).
        self.security = security or ClientSecurity()
        self.timeout_s = timeout_ms / 1000
        self.client_id = client_id
        self._nodes: dict[int, _Node] = {}  # -1: the bootstrap connection
        self._brokers: dict[int, tuple[str, int]] = {}
        self._coordinators: dict[str, int] = {}
        self.cluster: ClusterMetadata | None = None
        self._node(-1)  # fail early on a wrong --bootstrap-server

    def close(self) -> None:
        for node in self._nodes.values():
            node.conn.close()
        self._nodes.clear()

    def __enter__(self) -> ClusterClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -------------------------------------------------- connections

    def _connect(self, servers: str) -> _Node:
        try:
            security = self.security
            conn = KafkaConnection(
                servers,
                timeout=self.timeout_s,
                client_id=self.client_id,
                ssl_context=security.ssl_context,
                authenticate=(
                    (lambda c: authenticate_blocking(c.request, security))
                    if security.uses_sasl
                    else None
                ),
            )
        except KafkaError as e:
            raise BrokerUnreachableError(str(e)) from None
        try:
            conn.send(ApiKey.API_VERSIONS, 0, {})
            resp = conn.recv(ApiKey.API_VERSIONS, 0, ApiVersionsResponse)
        except (OSError, KafkaError) as e:
            conn.close()
            raise BrokerUnreachableError(f"{servers}: no ApiVersions answer: {e}") from None
        check(resp.error_code)
        versions = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
        return _Node(conn, versions)

    def _node(self, node_id: int) -> _Node:
        node = self._nodes.get(node_id)
        if node is None:
            if node_id == -1:
                servers = self.bootstrap_servers
            else:
                if node_id not in self._brokers:
                    self.metadata([])
                if node_id not in self._brokers:
                    raise BrokerUnreachableError(f"broker {node_id} is not in the cluster")
                host, port = self._brokers[node_id]
                servers = f"{host}:{port}"
            node = self._nodes[node_id] = self._connect(servers)
        return node

    def _drop(self, node_id: int) -> None:
        node = self._nodes.pop(node_id, None)
        if node is not None:
            node.conn.close()

    def version(self, node_id: int, api_key: int) -> int:
        """The newest version of the API both this client and the broker know."""
        served = self._node(node_id).versions.get(api_key)
        mine = CLIENT_MAX_VERSIONS[api_key]
        if served is None or served[0] > mine:
            raise errors.UnsupportedVersionError(
                f"the broker does not serve {ApiKey(api_key).name} at a version this "
                f"client speaks (it serves {served}, the client up to {mine})"
            )
        return min(mine, served[1])

    def send(self, api_key: int, body: Body, node_id: int = -1) -> tuple[int, int]:
        """Send without waiting (Produce with acks=0); (node id, version)."""
        node = self._node(node_id)
        version = self.version(node_id, api_key)
        node.conn.send(api_key, version, dict(body(version) if callable(body) else body))
        return node_id, version

    def receive(self, node_id: int, api_key: int, version: int) -> Any:
        """The answer to a request ``send`` wrote to the node."""
        try:
            return self._node(node_id).conn.recv(api_key, version)
        except TimeoutError:
            self._drop(node_id)
            raise errors.RequestTimedOutError(
                f"no answer to {ApiKey(api_key).name} within {self.timeout_s:g} s"
            ) from None
        except (OSError, KafkaError) as e:
            self._drop(node_id)
            raise BrokerUnreachableError(f"broker {node_id}: {e}") from None

    def request(
        self, api_key: int, body: Body, node_id: int = -1, *, timeout_s: float | None = None
    ) -> Any:
        """One request to a node and its decoded response; a lost connection
        is reopened once. ``timeout_s``: wait this long for this answer
        instead of the client's timeout (a JoinGroup waits for the rebalance)."""
        wait = self.timeout_s if timeout_s is None else timeout_s
        for attempt in (1, 2):
            node = self._node(node_id)
            version = self.version(node_id, api_key)
            try:
                node.conn.sock.settimeout(wait)
                try:
                    return node.conn.request(
                        api_key, version, dict(body(version) if callable(body) else body)
                    )
                finally:
                    node.conn.sock.settimeout(self.timeout_s)
            except TimeoutError:
                self._drop(node_id)
                raise errors.RequestTimedOutError(
                    f"no answer to {ApiKey(api_key).name} within {wait:g} s"
                ) from None
            except (OSError, KafkaError) as e:
                self._drop(node_id)
                if attempt == 2 or isinstance(e, errors.UnsupportedVersionError):
                    raise BrokerUnreachableError(f"broker {node_id}: {e}") from None
        raise AssertionError("unreachable")

    def any_node(self) -> int:
        return next(iter(self._nodes), -1)

    def retrying(self, what: Callable[[], Any]) -> Any:
        """Run ``what`` again while it fails with a retriable routing error
        (stale leader or coordinator), until the timeout."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                return what()
            except KafkaError as e:
                if e.code not in _ROUTING or time.monotonic() >= deadline:
                    raise
                self._coordinators.clear()
                self.cluster = None
                time.sleep(RETRY_BACKOFF_S)

    # -------------------------------------------------- metadata

    def metadata(
        self, topics: Iterable[str] | None = None, *, auto_create: bool = False
    ) -> ClusterMetadata:
        """Metadata for ``topics`` (None: every topic). With ``auto_create`` a
        broker with auto.create.topics.enable creates the topics named (as a
        producer's Metadata does); otherwise topics are never created."""
        names = None if topics is None else list(topics)

        def body(version: int) -> dict[str, Any]:
            wanted = names
            if wanted is None and version == 0:
                wanted = []  # v0: an empty list means every topic
            return {
                "topics": None if wanted is None else [{"name": n} for n in wanted],
                "allow_auto_topic_creation": auto_create,
            }

        resp = self.request(ApiKey.METADATA, body, self.any_node())
        self._brokers = {b.node_id: (b.host, b.port) for b in resp.brokers}
        cluster = ClusterMetadata(
            dict(self._brokers),
            resp.controller_id,
            racks={b.node_id: b.get("rack") for b in resp.brokers},
            cluster_id=resp.get("cluster_id"),
        )
        for t in resp.topics:
            topic_id = t.topic_id if isinstance(t.topic_id, str) else None
            cluster.topics[t.name] = TopicMetadata(
                name=t.name,
                error_code=t.error_code,
                topic_id=None if topic_id in (None, ZERO_UUID_TEXT) else topic_id,
                is_internal=bool(t.is_internal),
                partitions={
                    p.partition_index: PartitionMetadata(
                        p.partition_index,
                        p.leader_id,
                        list(p.replica_nodes),
                        list(p.isr_nodes),
                        list(p.offline_replicas or []),
                        p.error_code,
                        p.get("leader_epoch", -1),
                    )
                    for p in t.partitions
                },
            )
        if names is not None and self.cluster is not None:
            self.cluster.topics.update(cluster.topics)
            self.cluster.brokers = cluster.brokers
            self.cluster.controller_id = cluster.controller_id
            self.cluster.racks = cluster.racks
            self.cluster.cluster_id = cluster.cluster_id
        else:
            self.cluster = cluster
        return cluster

    def partitions(
        self, topic: str, *, auto_create: bool = False, wait_s: float = 0.0
    ) -> dict[int, PartitionMetadata] | None:
        """The topic's partitions, or None when it does not exist. ``wait_s``:
        ask again for this long while the topic is missing or has no leaders
        yet (one being created)."""
        deadline = time.monotonic() + wait_s
        while True:
            t = self.metadata([topic], auto_create=auto_create).topics.get(topic)
            code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if t is None else t.error_code
            ready = t is not None and code == 0 and t.partitions
            if ready or time.monotonic() >= deadline or code not in _RETRIABLE:
                break
            time.sleep(RETRY_BACKOFF_S)
        if t is None or code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            return None
        check(code, f"topic {topic}")
        return t.partitions

    def leader(self, topic: str, partition: int) -> int:
        """The node id of the partition's leader (metadata refreshed when unknown)."""
        for fresh in (False, True):
            if fresh or self.cluster is None or topic not in self.cluster.topics:
                self.metadata([topic])
            assert self.cluster is not None
            t = self.cluster.topics.get(topic)
            p = t.partitions.get(partition) if t is not None else None
            if p is not None and p.leader >= 0:
                return p.leader
        if t is None or t.error_code or p is None:
            raise errors.UnknownTopicOrPartitionError(f"{topic}-{partition}: unknown partition")
        raise error_for(ErrorCode.LEADER_NOT_AVAILABLE, f"{topic}-{partition} has no leader")

    def controller(self) -> int:
        cluster = self.metadata([])
        return cluster.controller_id if cluster.controller_id >= 0 else self.any_node()

    def coordinator(self, group: str, key_type: int = 0) -> int:
        """The node id of the group's coordinator (FindCoordinator); with
        ``key_type`` 1 a transactional id's transaction coordinator."""
        cached = group if key_type == 0 else f"{key_type}\0{group}"
        node_id = self._coordinators.get(cached)
        if node_id is not None:
            return node_id
        deadline = time.monotonic() + self.timeout_s
        while True:
            resp = self.request(
                ApiKey.FIND_COORDINATOR, {"key": group, "key_type": key_type}, self.any_node()
            )
            if resp.error_code == 0:
                break
            if resp.error_code not in _ROUTING or time.monotonic() >= deadline:
                raise error_for(resp.error_code, resp.error_message)
            time.sleep(RETRY_BACKOFF_S)
        self._brokers[resp.node_id] = (resp.host, resp.port)
        self._coordinators[cached] = resp.node_id
        return int(resp.node_id)

    def group_request(
        self,
        group: str,
        api_key: int,
        body: Body,
        code: str = "error_code",
        *,
        timeout_s: float | None = None,
    ) -> Any:
        """A request to the group's coordinator, found again (and the request
        resent) while the answer's ``code`` field says it moved or is loading."""

        def attempt() -> Any:
            resp = self.request(api_key, body, self.coordinator(group), timeout_s=timeout_s)
            if code:
                err = resp.get(code) or 0
                if err in _ROUTING:
                    raise error_for(err)
            return resp

        return self.retrying(attempt)

    # -------------------------------------------------- offsets

    def list_offsets(self, query: Mapping[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        """ListOffsets at each partition's leader: (topic, partition) ->
        timestamp (-2 earliest, -1 latest, else ms) gives the offset (-1 none)."""

        def attempt() -> dict[tuple[str, int], int]:
            by_leader: dict[int, dict[str, list[dict[str, int]]]] = {}
            for (t, p), ts in query.items():
                by_leader.setdefault(self.leader(t, p), {}).setdefault(t, []).append(
                    {"partition_index": p, "timestamp": ts, "current_leader_epoch": -1}
                )
            out: dict[tuple[str, int], int] = {}
            for node_id, topics in by_leader.items():
                body = {
                    "replica_id": -1,
                    "isolation_level": 0,
                    "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
                }
                resp = self.request(ApiKey.LIST_OFFSETS, body, node_id)
                for t in resp.topics:
                    for p in t.partitions:
                        check(p.error_code, f"{t.name}-{p.partition_index}")
                        out[(t.name, p.partition_index)] = p.offset
            return out

        return dict(self.retrying(attempt))

    def committed(self, group: str) -> dict[tuple[str, int], int]:
        """The group's committed offsets (OffsetFetch of every topic)."""
        resp = self.group_request(group, ApiKey.OFFSET_FETCH, {"group_id": group, "topics": None})
        check(resp.error_code)
        out: dict[tuple[str, int], int] = {}
        for t in resp.topics:
            for p in t.partitions:
                check(p.error_code, f"{t.name}-{p.partition_index}")
                if p.committed_offset >= 0:
                    out[(t.name, p.partition_index)] = p.committed_offset
        return out

    def commit(
        self,
        group: str,
        offsets: Mapping[tuple[str, int], int],
        generation: int = -1,
        member_id: str = "",
    ) -> dict[tuple[str, int], int]:
        """OffsetCommit; (topic, partition) -> error code."""
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (t, p), o in sorted(offsets.items()):
            by_topic.setdefault(t, []).append(
                {
                    "partition_index": p,
                    "committed_offset": o,
                    "committed_leader_epoch": -1,
                    "committed_metadata": "",
                }
            )
        body = {
            "group_id": group,
            "generation_id_or_member_epoch": generation,
            "member_id": member_id,
            "retention_time_ms": -1,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
        }
        resp = self.group_request(group, ApiKey.OFFSET_COMMIT, body, code="")
        result = {
            (t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions
        }
        if any(c in _ROUTING for c in result.values()):
            self._coordinators.pop(group, None)
            resp = self.group_request(group, ApiKey.OFFSET_COMMIT, body, code="")
            result = {
                (t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions
            }
        return result

    # -------------------------------------------------- groups

    def list_groups(self) -> list[tuple[str, str]]:
        """(group id, state) of every group on every broker."""
        return [(g, s) for g, s, _ in self.list_groups_typed()]

    def list_groups_typed(self) -> list[tuple[str, str, str]]:
        """(group id, state, type) of every group on every broker; the type
        (``classic``, ``consumer``) is ListGroups v5's, "" from older brokers."""
        cluster = self.metadata([])
        found: dict[str, tuple[str, str]] = {}
        for node_id in sorted(cluster.brokers):
            resp = self.request(
                ApiKey.LIST_GROUPS, {"states_filter": [], "types_filter": []}, node_id
            )
            check(resp.error_code)
            for g in resp.groups:
                found[g.group_id] = (g.group_state or "", g.group_type or "")
        return [(gid, st, ty) for gid, (st, ty) in sorted(found.items())]

    def describe_consumer_group(self, group: str) -> Any:
        """ConsumerGroupDescribe (KIP-848) for one group: its described entry
        (error GROUP_ID_NOT_FOUND when it is not a consumer group)."""

        def attempt() -> Any:
            resp = self.request(
                ApiKey.CONSUMER_GROUP_DESCRIBE,
                {"group_ids": [group], "include_authorized_operations": False},
                self.coordinator(group),
            )
            (described,) = resp.groups
            if described.error_code in _ROUTING:
                raise error_for(described.error_code)
            return described

        return self.retrying(attempt)

    def describe_share_group(self, group: str) -> Any:
        """ShareGroupDescribe (KIP-932) for one group: its described entry
        (error GROUP_ID_NOT_FOUND when it is not a share group)."""

        def attempt() -> Any:
            resp = self.request(
                ApiKey.SHARE_GROUP_DESCRIBE,
                {"group_ids": [group], "include_authorized_operations": False},
                self.coordinator(group),
            )
            (described,) = resp.groups
            if described.error_code in _ROUTING:
                raise error_for(described.error_code)
            return described

        return self.retrying(attempt)

    def describe_group(self, group: str) -> Any:
        """DescribeGroups for one group: its described entry."""

        def attempt() -> Any:
            resp = self.request(
                ApiKey.DESCRIBE_GROUPS,
                {"groups": [group], "include_authorized_operations": False},
                self.coordinator(group),
            )
            (described,) = resp.groups
            if described.error_code in _ROUTING:
                raise error_for(described.error_code)
            return described

        return self.retrying(attempt)

    def delete_group(self, group: str) -> int:
        """DeleteGroups for one group; its error code."""

        def attempt() -> int:
            resp = self.request(
                ApiKey.DELETE_GROUPS, {"groups_names": [group]}, self.coordinator(group)
            )
            codes = [r.error_code for r in resp.results if r.group_id == group]
            code = codes[0] if codes else 0
            if code in _ROUTING:
                raise error_for(code)
            return int(code)

        return int(self.retrying(attempt))

    # -------------------------------------------------- transactions

    def list_transactions(
        self, states: Iterable[str] = (), producer_ids: Iterable[int] = (), duration_ms: int = -1
    ) -> list[tuple[int, str, int, str]]:
        """(coordinator id, transactional id, producer id, state) of every
        transaction every broker coordinates (ListTransactions to each, as
        Kafka's admin client asks); ``duration_ms`` (v1+): only those running
        longer."""
        cluster = self.metadata([])
        found: list[tuple[int, str, int, str]] = []
        for node_id in sorted(cluster.brokers):

            def body(version: int) -> dict[str, Any]:
                b: dict[str, Any] = {
                    "state_filters": list(states),
                    "producer_id_filters": list(producer_ids),
                }
                if version >= 1:
                    b["duration_filter"] = duration_ms
                return b

            resp = self.request(ApiKey.LIST_TRANSACTIONS, body, node_id)
            if resp.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                continue  # Kafka's admin reports it per broker; the rest still list
            check(resp.error_code)
            for t in resp.transaction_states:
                found.append((node_id, t.transactional_id, t.producer_id, t.transaction_state))
        return sorted(found, key=lambda t: (t[1], t[0]))

    def describe_transaction(self, transactional_id: str) -> tuple[int, Any]:
        """(coordinator id, DescribeTransactions' entry) of one transactional id."""

        def attempt() -> tuple[int, Any]:
            node = self.coordinator(transactional_id, 1)
            resp = self.request(
                ApiKey.DESCRIBE_TRANSACTIONS, {"transactional_ids": [transactional_id]}, node
            )
            (state,) = resp.transaction_states
            if state.error_code in _ROUTING:
                raise error_for(state.error_code)
            check(state.error_code, f"transactional id {transactional_id}")
            return node, state

        result: tuple[int, Any] = self.retrying(attempt)
        return result

    def describe_producers(self, topic: str, partition: int, broker: int | None = None) -> Any:
        """DescribeProducers of one partition at its leader (or at
        ``broker``, any replica): its partition entry, errors raised."""

        def attempt() -> Any:
            node = self.leader(topic, partition) if broker is None else broker
            resp = self.request(
                ApiKey.DESCRIBE_PRODUCERS,
                {"topics": [{"name": topic, "partition_indexes": [partition]}]},
                node,
            )
            (p,) = resp.topics[0].partitions
            if p.error_code in _ROUTING:
                raise error_for(p.error_code, p.error_message)
            check(p.error_code, f"{topic}-{partition}")
            return p

        return self.retrying(attempt)

    def abort_transaction(
        self,
        topic: str,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
    ) -> None:
        """Write an ABORT marker for the producer's open transaction on the
        partition, at its leader (WriteTxnMarkers, as Kafka's
        Admin.abortTransaction does: needs CLUSTER_ACTION or ALTER)."""

        def attempt() -> None:
            node = self.leader(topic, partition)
            marker = {
                "producer_id": producer_id,
                "producer_epoch": producer_epoch,
                "transaction_result": False,
                "topics": [{"name": topic, "partition_indexes": [partition]}],
                "coordinator_epoch": coordinator_epoch,
            }
            resp = self.request(ApiKey.WRITE_TXN_MARKERS, {"markers": [marker]}, node)
            (m,) = resp.markers
            code = m.topics[0].partitions[0].error_code
            if code in _ROUTING:
                raise error_for(code)
            check(code, f"{topic}-{partition}")

        self.retrying(attempt)

    # -------------------------------------------------- topics and configs

    def create_topics(self, topics: list[dict[str, Any]]) -> list[Any]:
        """CreateTopics at the controller; the per-topic results."""
        body = {"topics": topics, "timeout_ms": int(self.timeout_s * 1000), "validate_only": False}
        return self._at_controller(ApiKey.CREATE_TOPICS, body, "topics")

    def create_partitions(self, counts: Mapping[str, int]) -> list[Any]:
        """CreatePartitions at the controller; the per-topic results."""
        body = {
            "topics": [{"name": t, "count": n, "assignments": None} for t, n in counts.items()],
            "timeout_ms": int(self.timeout_s * 1000),
            "validate_only": False,
        }
        return self._at_controller(ApiKey.CREATE_PARTITIONS, body, "results")

    def delete_topics(self, names: list[str]) -> list[Any]:
        """DeleteTopics at the controller; the per-topic results."""
        body = {"topic_names": names, "timeout_ms": int(self.timeout_s * 1000)}
        return self._at_controller(ApiKey.DELETE_TOPICS, body, "responses")

    def elect_leaders(
        self, election_type: int, partitions: Mapping[str, list[int]] | None
    ) -> list[tuple[str, int, int, str | None]]:
        """ElectLeaders at the controller (None: every partition); per
        partition (topic, partition, error code, message)."""

        def body(version: int) -> dict[str, Any]:
            return {
                "election_type": election_type,
                "topic_partitions": None
                if partitions is None
                else [{"topic": t, "partitions": ps} for t, ps in partitions.items()],
                "timeout_ms": int(self.timeout_s * 1000),
            }

        def attempt() -> list[tuple[str, int, int, str | None]]:
            resp = self.request(ApiKey.ELECT_LEADERS, body, self.controller())
            check(resp.get("error_code", 0))
            found = [
                (t.topic, p.partition_id, p.error_code, p.error_message)
                for t in resp.replica_election_results
                for p in t.partition_result
            ]
            for _, _, code, message in found:
                if code == ErrorCode.NOT_CONTROLLER:
                    raise error_for(code, message)
            return found

        return list(self.retrying(attempt))

    def _at_controller(self, api_key: int, body: Mapping[str, Any], results: str) -> list[Any]:
        def attempt() -> list[Any]:
            found = list(self.request(api_key, body, self.controller())[results])
            for r in found:
                if r.error_code == ErrorCode.NOT_CONTROLLER:
                    raise error_for(r.error_code, r.get("error_message"))
            return found

        return list(self.retrying(attempt))

    def describe_configs(self, resource_type: int, name: str, *, synonyms: bool) -> list[Any]:
        """DescribeConfigs of one resource (a broker's at that broker); its
        config entries."""
        # A broker's own configs at that broker; the cluster default ("") anywhere.
        node_id = int(name) if resource_type == CONFIG_RESOURCE_BROKER and name else self.any_node()
        body = {
            "resources": [
                {"resource_type": resource_type, "resource_name": name, "configuration_keys": None}
            ],
            "include_synonyms": synonyms,
            "include_documentation": False,
        }
        resp = self.request(ApiKey.DESCRIBE_CONFIGS, body, node_id)
        (result,) = resp.results
        check(result.error_code, result.error_message)
        return list(result.configs)

    def alter_configs(
        self,
        resource_type: int,
        name: str,
        changes: Mapping[str, str | None],
        *,
        validate_only: bool,
    ) -> tuple[int, str | None]:
        """IncrementalAlterConfigs: each key set to its value, or deleted when
        the value is None; (error code, message)."""
        # A broker's own configs at that broker; the cluster default ("") anywhere.
        node_id = int(name) if resource_type == CONFIG_RESOURCE_BROKER and name else self.any_node()
        body = {
            "resources": [
                {
                    "resource_type": resource_type,
                    "resource_name": name,
                    "configs": [
                        {
                            "name": k,
                            "config_operation": CONFIG_DELETE if v is None else CONFIG_SET,
                            "value": v,
                        }
                        for k, v in changes.items()
                    ],
                }
            ],
            "validate_only": validate_only,
        }
        resp = self.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, body, node_id)
        (result,) = resp.responses
        return result.error_code, result.error_message


CONFIG_RESOURCE_TOPIC, CONFIG_RESOURCE_BROKER = 2, 4
CONFIG_SET, CONFIG_DELETE = 0, 1
#: DescribeConfigs' config sources, by number.
CONFIG_SOURCES = {
    0: "UNKNOWN",
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
    7: "CLIENT_METRICS_CONFIG",
    8: "GROUP_CONFIG",
}
#: Sources that are not a change made on the resource (the broker's static
#: file, a cluster-wide default, Kafka's default).
UNMODIFIED_SOURCES = (3, 4, 5)
