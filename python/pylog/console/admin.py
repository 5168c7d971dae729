"""What the console's pages show, gathered over the Kafka protocol with
pylog's own client (:class:`pylog.cli.client.ClusterClient`), so the console
works against any Kafka-protocol cluster, pylog or Apache Kafka.

The client is blocking and not thread-safe: :class:`ConsoleAdmin` holds one,
behind a lock, and the web layer calls it from worker threads. A broker that
goes away closes its connections; the client is then opened again from the
bootstrap servers and the question asked once more, so a page keeps working
while a broker is down (it is how the topic page shows that broker's
partitions under-replicated)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pylog.cli.client import (
    CONFIG_RESOURCE_TOPIC,
    CONFIG_SOURCES,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    BrokerUnreachableError,
    ClusterClient,
    PartitionMetadata,
    describe,
)
from pylog.cli.consumer import ConsumedRecord, Consumer, ConsumerSettings
from pylog.cli.producer import Producer, ProducerSettings
from pylog.cli.reassign_partitions import list_reassignments
from pylog.console.security_admin import (
    AclSpec,
    AclsView,
    QuotasView,
    ScramUsersView,
    alter_quota,
    create_acl,
    delete_acl,
    delete_scram_user,
    describe_acls,
    describe_quotas,
    describe_scram_users,
    upsert_scram_user,
)
from pylog.console.zookeeper_state import ZooKeeperView, zookeeper_state
from pylog.coordinator.records import assigned_partitions
from pylog.errors import KafkaError, UnsupportedVersionError
from pylog.protocol import ApiKey
from pylog.security.sasl_client_authenticator import ClientSecurity

__all__ = [
    "BrokerView",
    "ClusterView",
    "ConsoleAdmin",
    "ConsoleClient",
    "GroupView",
    "LogDirView",
    "MessagesView",
    "TopicRow",
    "TopicView",
]

T = TypeVar("T")

# Kafka's ConsumerGroupCommand resets only a group nobody is in.
INACTIVE_GROUP_STATES = ("Empty", "Dead")
RESET_TARGETS = ("earliest", "latest", "offset", "timestamp", "shift")

# APIs the console asks beyond those of the CLI's client, with the newest
# version it builds: ApiVersions v3 for the brokers' features, DescribeLogDirs
# v4 for the directories' total and usable bytes (KIP-827); the client quota
# APIs (KIP-546) for the quotas page.
_CONSOLE_MAX_VERSIONS: dict[int, int] = {
    ApiKey.API_VERSIONS: 3,
    ApiKey.DESCRIBE_LOG_DIRS: 4,
    ApiKey.DESCRIBE_CLIENT_QUOTAS: 1,
    ApiKey.ALTER_CLIENT_QUOTAS: 1,
}


class ConsoleClient(ClusterClient):
    """The CLI's client, speaking also the APIs only the console asks."""

    def version(self, node_id: int, api_key: int) -> int:
        mine = _CONSOLE_MAX_VERSIONS.get(api_key)
        if mine is None:
            return super().version(node_id, api_key)
        served = self._node(node_id).versions.get(api_key)
        if served is None or served[0] > mine:
            raise UnsupportedVersionError(f"the broker does not serve {ApiKey(api_key).name}")
        return min(mine, served[1])

    def api_versions(self, node_id: int) -> dict[int, tuple[int, int]]:
        """The (min, max) version of each API the broker serves, as it
        answered the connection's first ApiVersions."""
        return dict(self._node(node_id).versions)


# ---------------------------------------------------------------- page data


@dataclass
class LogDirView:
    path: str
    error: str | None
    size: int  # bytes of the partitions' replicas in it
    total: int | None  # the volume's bytes (DescribeLogDirs v4), None before
    usable: int | None


@dataclass
class BrokerView:
    node_id: int
    host: str
    port: int
    rack: str | None
    controller: bool
    error: str | None = None
    api_count: int = 0
    features: list[tuple[str, int, int]] = field(default_factory=list)  # finalized
    log_dirs: list[LogDirView] = field(default_factory=list)


@dataclass
class ReplicaProgress:
    broker: int
    size: int | None  # bytes of its copy so far (None: its broker did not say)

    def percent(self, leader_size: int | None) -> int | None:
        """How much of the leader's bytes the new replica holds, 0-100."""
        if self.size is None or not leader_size:
            return None if self.size is None else 100
        return min(100, self.size * 100 // leader_size)


@dataclass
class ReassignmentView:
    """A partition being reassigned (ListPartitionReassignments), with how
    far each replica it is adding has copied the leader (DescribeLogDirs)."""

    topic: str
    partition: int
    replicas: list[int]
    adding: list[int]
    removing: list[int]
    leader: int
    leader_size: int | None
    progress: list[ReplicaProgress] = field(default_factory=list)


@dataclass
class ClusterView:
    cluster_id: str | None
    controller_id: int
    brokers: list[BrokerView]
    # API name -> (min, max) per broker id
    apis: list[tuple[str, int, dict[int, tuple[int, int] | None]]]
    topics: int
    partitions: int
    under_replicated: int
    offline: int
    reassignments: list[ReassignmentView] = field(default_factory=list)
    reassignments_error: str | None = None
    zookeeper: ZooKeeperView | None = None


@dataclass
class TopicRow:
    name: str
    internal: bool
    partitions: int
    replication_factor: int
    under_replicated: int
    offline: int
    size: int | None
    error: str | None = None


@dataclass
class PartitionRow:
    partition: int
    leader: int
    replicas: list[int]
    isr: list[int]
    offline_replicas: list[int]
    start_offset: int | None
    end_offset: int | None
    size: int | None  # the leader's replica, in bytes

    @property
    def is_offline(self) -> bool:
        """No leader: nobody can read or write it (Kafka's OfflinePartitionsCount)."""
        return self.leader < 0

    @property
    def is_under_replicated(self) -> bool:
        """Fewer in-sync replicas than replicas (Kafka's UnderReplicatedPartitions)."""
        return len(self.isr) < len(self.replicas) or bool(self.offline_replicas)


@dataclass
class ConfigRow:
    name: str
    value: str | None
    source: str
    sensitive: bool
    read_only: bool

    @property
    def overridden(self) -> bool:
        return self.source == "DYNAMIC_TOPIC_CONFIG"


@dataclass
class TopicView:
    name: str
    topic_id: str | None
    internal: bool
    partitions: list[PartitionRow]
    configs: list[ConfigRow]
    config_error: str | None
    unreachable: list[int]  # brokers whose sizes could not be asked


@dataclass
class MessagesView:
    topic: str
    partition: int
    partitions: int
    start_offset: int  # the log start offset
    end_offset: int  # the high watermark
    from_offset: int
    records: list[ConsumedRecord]


@dataclass
class GroupMemberView:
    member_id: str
    client_id: str
    client_host: str
    epoch: int | None
    assignment: list[tuple[str, int]]


@dataclass
class OffsetRow:
    topic: str
    partition: int
    committed: int | None
    end_offset: int | None
    owner: str | None

    @property
    def lag(self) -> int | None:
        if self.committed is None or self.end_offset is None:
            return None
        return max(0, self.end_offset - self.committed)


@dataclass
class GroupView:
    group_id: str
    group_type: str
    state: str
    protocol: str
    members: list[GroupMemberView]
    offsets: list[OffsetRow]
    error: str | None = None

    @property
    def total_lag(self) -> int:
        return sum(r.lag or 0 for r in self.offsets)


def _partition_counts(partitions: Mapping[int, PartitionMetadata]) -> tuple[int, int]:
    under = sum(1 for p in partitions.values() if len(p.isr) < len(p.replicas) or p.offline)
    offline = sum(1 for p in partitions.values() if p.leader < 0)
    return under, offline


def _error_text(e: BaseException) -> str:
    code = getattr(e, "code", None)
    if isinstance(code, int) and code > 0:
        return describe(code, str(e) or None)
    return f"{type(e).__name__}: {e}"


# ---------------------------------------------------------------- the admin


class ConsoleAdmin:
    """The console's one connection to the cluster, shared by its pages.
    ``zookeeper``: the cluster's ZooKeeper connect string, when the cluster
    page should show its state (a Kafka client cannot see it otherwise)."""

    def __init__(
        self,
        bootstrap_servers: str,
        *,
        security: ClientSecurity | None = None,
        timeout_ms: int = 15_000,
        client_id: str = "pylog-console",
        zookeeper: str | None = None,
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.zookeeper = zookeeper
        self.security = security or ClientSecurity()
        self.timeout_ms = timeout_ms
        self.client_id = client_id
        self._lock = threading.Lock()
        self._client: ConsoleClient | None = None

    @property
    def principal(self) -> str:
        """Who the cluster sees the console as: ``User:<name>`` with SASL,
        else ``User:ANONYMOUS`` (a TLS certificate's name is the broker's to
        decide)."""
        name = self.security.username if self.security.uses_sasl else None
        return f"User:{name or 'ANONYMOUS'}"

    def check(self) -> None:
        """Connect (and authenticate) now: KafkaError when the cluster
        refuses these credentials or cannot be reached."""
        self._call(lambda c: c.metadata([]))

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    def _call(self, what: Callable[[ConsoleClient], T]) -> T:
        """``what`` with the client; asked once more on a fresh client when a
        broker went away under it."""
        with self._lock:
            for attempt in (1, 2):
                if self._client is None:
                    self._client = ConsoleClient(
                        self.bootstrap_servers,
                        timeout_ms=self.timeout_ms,
                        client_id=self.client_id,
                        security=self.security,
                    )
                try:
                    return what(self._client)
                except BrokerUnreachableError:
                    self._client.close()
                    self._client = None
                    if attempt == 2:
                        raise
            raise AssertionError("unreachable")

    # -------------------------------------------------- log dirs

    @staticmethod
    def _log_dirs(client: ConsoleClient, node_id: int) -> Any:
        resp = client.request(ApiKey.DESCRIBE_LOG_DIRS, {"topics": None}, node_id)
        if resp.get("error_code", 0):
            raise KafkaError(describe(resp.error_code))
        return resp.results

    def _replica_sizes(
        self, client: ConsoleClient, brokers: list[int]
    ) -> tuple[dict[tuple[int, str, int], int], list[int]]:
        """(broker, topic, partition) -> bytes of that replica, and the brokers
        that did not answer."""
        sizes: dict[tuple[int, str, int], int] = {}
        failed: list[int] = []
        for b in brokers:
            try:
                results = self._log_dirs(client, b)
            except KafkaError:
                failed.append(b)
                continue
            for d in results:
                for t in d.topics:
                    for p in t.partitions:
                        if not p.is_future_key:
                            sizes[(b, t.name, p.partition_index)] = p.partition_size
        return sizes, failed

    # -------------------------------------------------- cluster

    def cluster(self) -> ClusterView:
        view = self._call(self._cluster)
        if self.zookeeper:
            view.zookeeper = zookeeper_state(self.zookeeper, self.timeout_ms / 1000)
        return view

    def _cluster(self, client: ConsoleClient) -> ClusterView:
        meta = client.metadata(None)
        brokers: list[BrokerView] = []
        versions: dict[int, dict[int, tuple[int, int]]] = {}
        # (broker, topic, partition) -> bytes of each replica
        copies: dict[tuple[int, str, int], int] = {}
        for b in sorted(meta.brokers):
            host, port = meta.brokers[b]
            view = BrokerView(b, host, port, meta.racks.get(b), b == meta.controller_id)
            brokers.append(view)

            try:
                versions[b] = client.api_versions(b)
                view.api_count = len(versions[b])
                resp = client.request(
                    ApiKey.API_VERSIONS,
                    {"client_software_name": "pylog-console", "client_software_version": "1"},
                    b,
                )
                view.features = [
                    (f.name, f.min_version_level, f.max_version_level)
                    for f in resp.get("finalized_features") or []
                ]
                for d in self._log_dirs(client, b):
                    for t in d.topics:
                        for p in t.partitions:
                            if not p.is_future_key:
                                copies[(b, t.name, p.partition_index)] = p.partition_size
                    size = sum(p.partition_size for t in d.topics for p in t.partitions)
                    total = d.get("total_bytes", -1)
                    usable = d.get("usable_bytes", -1)
                    view.log_dirs.append(
                        LogDirView(
                            d.log_dir,
                            describe(d.error_code) if d.error_code else None,
                            size,
                            total if total >= 0 else None,
                            usable if usable >= 0 else None,
                        )
                    )
            except KafkaError as e:
                view.error = _error_text(e)
        apis: list[tuple[str, int, dict[int, tuple[int, int] | None]]] = []
        keys = sorted({k for v in versions.values() for k in v})
        for k in keys:
            try:
                name = ApiKey(k).name
            except ValueError:
                name = f"API {k}"
            apis.append((name, k, {b: versions[b].get(k) for b in versions}))
        parts = [p for t in meta.topics.values() for p in t.partitions.values()]
        under, offline = _partition_counts({i: p for i, p in enumerate(parts)})
        out = ClusterView(
            meta.cluster_id,
            meta.controller_id,
            brokers,
            apis,
            len(meta.topics),
            len(parts),
            under,
            offline,
        )
        try:
            ongoing = list_reassignments(client)
        except KafkaError as e:
            out.reassignments_error = _error_text(e)
            ongoing = {}
        for (topic, p), o in sorted(ongoing.items()):
            known = meta.topics.get(topic)
            pm = known.partitions.get(p) if known is not None else None
            leader = pm.leader if pm is not None else -1

            r = ReassignmentView(
                topic,
                p,
                o.replicas,
                o.adding,
                o.removing,
                leader,
                copies.get((leader, topic, p)),
            )
            for b in o.adding:
                r.progress.append(ReplicaProgress(b, copies.get((b, topic, p))))
            out.reassignments.append(r)
        return out

    # -------------------------------------------------- topics

    def topics(self) -> list[TopicRow]:
        return self._call(self._topics)

    def _topics(self, client: ConsoleClient) -> list[TopicRow]:
        meta = client.metadata(None)
        sizes, _ = self._replica_sizes(client, sorted(meta.brokers))
        rows = []
        for name in sorted(meta.topics):
            t = meta.topics[name]
            under, offline = _partition_counts(t.partitions)
            leader_sizes = [
                sizes.get((p.leader, name, i)) for i, p in t.partitions.items() if p.leader >= 0
            ]
            known = [s for s in leader_sizes if s is not None]
            rows.append(
                TopicRow(
                    name,
                    t.is_internal,
                    len(t.partitions),
                    max((len(p.replicas) for p in t.partitions.values()), default=0),
                    under,
                    offline,
                    sum(known) if known else None,
                    describe(t.error_code) if t.error_code else None,
                )
            )
        return rows

    def topic(self, name: str) -> TopicView | str | None:
        """The topic's partitions, sizes and configs; None when there is no
        such topic; the cluster's error when it refused (not authorized)."""
        return self._call(lambda c: self._topic(c, name))

    def _topic(self, client: ConsoleClient, name: str) -> TopicView | str | None:
        meta = client.metadata([name])
        t = meta.topics.get(name)
        if t is None or t.error_code == 3:  # UNKNOWN_TOPIC_OR_PARTITION
            return None
        if t.error_code == 29:  # TOPIC_AUTHORIZATION_FAILED: the principal may not see it
            return describe(t.error_code)
        sizes, failed = self._replica_sizes(client, sorted(meta.brokers))
        tps = {(name, i): 0 for i, p in t.partitions.items() if p.leader >= 0}
        starts: dict[tuple[str, int], int] = {}
        ends: dict[tuple[str, int], int] = {}
        if tps:
            try:
                starts = client.list_offsets(dict.fromkeys(tps, EARLIEST_TIMESTAMP))
                ends = client.list_offsets(dict.fromkeys(tps, LATEST_TIMESTAMP))
            except KafkaError:
                pass  # a leader moving: the page shows the offsets next time
        partitions = [
            PartitionRow(
                i,
                p.leader,
                p.replicas,
                p.isr,
                p.offline,
                starts.get((name, i)),
                ends.get((name, i)),
                sizes.get((p.leader, name, i)),
            )
            for i, p in sorted(t.partitions.items())
        ]
        configs: list[ConfigRow] = []
        config_error = None
        try:
            for c in client.describe_configs(CONFIG_RESOURCE_TOPIC, name, synonyms=False):
                source = c.get("config_source", -1)
                configs.append(
                    ConfigRow(
                        c.name,
                        c.value,
                        CONFIG_SOURCES.get(source, "UNKNOWN"),
                        bool(c.is_sensitive),
                        bool(c.read_only),
                    )
                )
        except KafkaError as e:
            config_error = _error_text(e)
        return TopicView(
            name,
            t.topic_id,
            t.is_internal,
            partitions,
            sorted(configs, key=lambda r: r.name),
            config_error,
            failed,
        )

    def create_topic(
        self, name: str, partitions: int, replication_factor: int, configs: Mapping[str, str]
    ) -> str | None:
        """CreateTopics; None when made, else the error."""

        def create(client: ConsoleClient) -> str | None:
            (result,) = client.create_topics(
                [
                    {
                        "name": name,
                        "num_partitions": partitions,
                        "replication_factor": replication_factor,
                        "assignments": [],
                        "configs": [{"name": k, "value": v} for k, v in configs.items()],
                    }
                ]
            )
            if result.error_code:
                return describe(result.error_code, result.get("error_message"))
            # The page shown next is the topic's: wait (a little) for every
            # partition's leader to be in the metadata the brokers answer.
            deadline = time.monotonic() + min(5.0, self.timeout_ms / 1000)
            while time.monotonic() < deadline:
                parts = client.partitions(name, wait_s=deadline - time.monotonic())
                if parts and all(p.leader >= 0 and p.replicas for p in parts.values()):
                    break
                time.sleep(0.1)
            return None

        return self._call(create)

    def alter_topic_config(self, name: str, key: str, value: str | None) -> str | None:
        """IncrementalAlterConfigs of one topic key (None: back to its
        default); None when done, else the error."""

        def alter(client: ConsoleClient) -> str | None:
            code, message = client.alter_configs(
                CONFIG_RESOURCE_TOPIC, name, {key: value}, validate_only=False
            )
            return describe(code, message) if code else None

        return self._call(alter)

    def delete_topic(self, name: str) -> str | None:
        """DeleteTopics; None when deleted, else the error."""

        def delete(client: ConsoleClient) -> str | None:
            (result,) = client.delete_topics([name])
            if result.error_code:
                return describe(result.error_code, result.get("error_message"))
            return None

        return self._call(delete)

    # -------------------------------------------------- messages

    def messages(
        self,
        topic: str,
        partition: int,
        *,
        offset: int | None,
        timestamp_ms: int | None,
        limit: int,
        read_committed: bool = False,
    ) -> MessagesView | None:
        """Up to ``limit`` records of one partition from ``offset``, or from
        the first at or after ``timestamp_ms``, or else the last ``limit``;
        None when the topic or partition does not exist."""
        return self._call(
            lambda c: self._messages(
                c, topic, partition, offset, timestamp_ms, limit, read_committed
            )
        )

    def _messages(
        self,
        client: ConsoleClient,
        topic: str,
        partition: int,
        offset: int | None,
        timestamp_ms: int | None,
        limit: int,
        read_committed: bool,
    ) -> MessagesView | None:
        parts = client.partitions(topic)
        if parts is None or partition not in parts:
            return None
        tp = (topic, partition)
        start = client.list_offsets({tp: EARLIEST_TIMESTAMP})[tp]
        end = client.list_offsets({tp: LATEST_TIMESTAMP})[tp]
        if timestamp_ms is not None:
            found = client.list_offsets({tp: timestamp_ms})[tp]
            begin = end if found < 0 else found
        elif offset is not None:
            begin = offset
        else:
            begin = end - limit
        begin = min(max(begin, start), end)
        records: list[ConsumedRecord] = []
        if begin < end:
            consumer = Consumer(
                client,
                ConsumerSettings(
                    auto_offset_reset="earliest",
                    fetch_max_wait_ms=100,
                    max_partition_fetch_bytes=1024 * 1024,
                    isolation_level=1 if read_committed else 0,
                    enable_auto_commit=False,
                ),
            )
            consumer.assign({tp: begin})
            deadline = time.monotonic() + self.timeout_ms / 1000
            while len(records) < limit and time.monotonic() < deadline:
                got = consumer.poll(limit - len(records), 200)
                records.extend(got)
                if consumer.positions.get(tp, end) >= end and not got:
                    break
        return MessagesView(topic, partition, len(parts), start, end, begin, records[:limit])

    def produce(
        self,
        topic: str,
        partition: int | None,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes | None]],
    ) -> str | None:
        """One record, acks=all; None when written, else the error."""

        def send(client: ConsoleClient) -> str | None:
            producer = Producer(
                client,
                topic,
                ProducerSettings(acks=-1, linger_ms=0, delivery_timeout_ms=self.timeout_ms),
            )
            if partition is not None and not 0 <= partition < producer.partition_count:
                return f"topic {topic} has no partition {partition}"
            producer.send(key, value, headers, partition=partition)
            producer.flush()
            if producer.failures:
                return _error_text(producer.failures[0][1])
            return None

        return self._call(send)

    # -------------------------------------------------- groups

    def groups(self) -> list[tuple[str, str, str]]:
        """(group id, state, type) of every group any broker lists (ListGroups
        v5 names classic, consumer, share and streams groups alike)."""
        return self._call(lambda c: c.list_groups_typed())

    def group(self, group_id: str) -> GroupView | None:
        return self._call(lambda c: self._group(c, group_id))

    def _group(self, client: ConsoleClient, group_id: str) -> GroupView | None:
        listed = {g: (s, t) for g, s, t in client.list_groups_typed()}
        if group_id not in listed:
            return None
        state, group_type = listed[group_id]
        view = GroupView(group_id, group_type or "classic", state, "", [], [])
        try:
            if group_type == "consumer":
                self._describe_consumer(client, view)
            elif group_type == "share":
                self._describe_share(client, view)
            else:
                self._describe_classic(client, view)
        except KafkaError as e:
            view.error = _error_text(e)
        if group_type != "share":  # a share group keeps no committed offsets
            self._offsets(client, view)
        return view

    def _describe_classic(self, client: ConsoleClient, view: GroupView) -> None:
        info = client.describe_group(view.group_id)
        if info.error_code:
            raise KafkaError(describe(info.error_code))
        view.state = info.group_state or view.state
        view.protocol = f"{info.protocol_type}/{info.protocol_data}".strip("/")
        for m in info.members:
            decoded = None
            if info.protocol_type == "consumer" and m.member_assignment:
                decoded = assigned_partitions(bytes(m.member_assignment))
            view.members.append(
                GroupMemberView(
                    m.member_id,
                    m.client_id,
                    m.client_host,
                    None,
                    sorted((t, p) for t, ps in decoded or [] for p in ps),
                )
            )

    @staticmethod
    def _members_of(info: Any, view: GroupView) -> None:
        if info.error_code:
            raise KafkaError(describe(info.error_code, info.get("error_message")))
        view.state = info.group_state or view.state
        view.protocol = f"assignor {info.assignor_name}" if info.assignor_name else ""
        for m in info.members:
            view.members.append(
                GroupMemberView(
                    m.member_id,
                    m.client_id,
                    m.client_host,
                    m.member_epoch,
                    sorted(
                        (t.topic_name, p)
                        for t in m.assignment.topic_partitions
                        for p in t.partitions
                    ),
                )
            )

    def _describe_consumer(self, client: ConsoleClient, view: GroupView) -> None:
        self._members_of(client.describe_consumer_group(view.group_id), view)

    def _describe_share(self, client: ConsoleClient, view: GroupView) -> None:
        self._members_of(client.describe_share_group(view.group_id), view)

    @staticmethod
    def _offsets(client: ConsoleClient, view: GroupView) -> None:
        try:
            committed = client.committed(view.group_id)
        except KafkaError as e:
            view.error = view.error or _error_text(e)
            return
        owners = {tp: m.client_id or m.member_id for m in view.members for tp in m.assignment}
        tps = sorted(set(committed) | set(owners))
        ends: dict[tuple[str, int], int] = {}
        if tps:
            try:
                ends = client.list_offsets(dict.fromkeys(tps, LATEST_TIMESTAMP))
            except KafkaError as e:
                view.error = view.error or _error_text(e)
        view.offsets = [
            OffsetRow(t, p, committed.get((t, p)), ends.get((t, p)), owners.get((t, p)))
            for t, p in tps
        ]

    # -------------------------------------------------- changes to groups and topics

    def reset_offsets(
        self, group_id: str, topic: str | None, to: str, value: int | None
    ) -> tuple[dict[tuple[str, int], int], str | None]:
        """New committed offsets for an inactive group, as Kafka's
        ``kafka-consumer-groups --reset-offsets --execute`` makes them: of
        ``topic``'s partitions (None: every partition the group has an
        offset for), ``to`` "earliest", "latest", "offset" (``value``),
        "timestamp" (``value`` ms: the first offset at or after it) or "shift"
        (the committed offset moved by ``value``), clamped to the log's
        range. The plan, and None when committed, else why not."""

        def reset(client: ConsoleClient) -> tuple[dict[tuple[str, int], int], str | None]:
            listed = {g: s for g, s, _ in client.list_groups_typed()}
            state = listed.get(group_id)
            if state is None:
                return {}, f"no group {group_id}"
            if state not in INACTIVE_GROUP_STATES:
                return {}, (
                    f"offsets can only be reset while the group is inactive (Empty), "
                    f"and it is {state}: stop its consumers first"
                )
            if to not in RESET_TARGETS:
                return {}, f"reset to what? ({to!r})"
            if to in ("offset", "timestamp", "shift") and value is None:
                return {}, f"resetting to {to} needs a number"
            committed = client.committed(group_id)
            if topic:
                parts = client.partitions(topic)
                if not parts:
                    return {}, f"no topic {topic}"
                tps = sorted((topic, p) for p in parts)
            else:
                tps = sorted(committed)
            if not tps:
                return {}, "the group has no committed offsets to reset"
            starts = client.list_offsets(dict.fromkeys(tps, EARLIEST_TIMESTAMP))
            ends = client.list_offsets(dict.fromkeys(tps, LATEST_TIMESTAMP))
            found = client.list_offsets(dict.fromkeys(tps, value or 0)) if to == "timestamp" else {}
            plan: dict[tuple[str, int], int] = {}
            for tp in tps:
                lo, hi = starts[tp], ends[tp]
                if to == "earliest":
                    new = lo
                elif to == "latest":
                    new = hi
                elif to == "offset":
                    new = value or 0
                elif to == "shift":
                    new = committed.get(tp, lo) + (value or 0)
                else:
                    new = found[tp] if found.get(tp, -1) >= 0 else hi
                plan[tp] = min(max(new, lo), hi)
            results = client.commit(group_id, plan)
            bad = [f"{t}-{p}: {describe(c)}" for (t, p), c in sorted(results.items()) if c]
            return plan, ("; ".join(bad) if bad else None)

        try:
            return self._call(reset)
        except KafkaError as e:
            return {}, _error_text(e)

    def add_partitions(self, topic: str, count: int) -> str | None:
        """CreatePartitions: ``topic`` grown to ``count`` partitions (Kafka
        never shrinks one); None when done, else the error."""

        def grow(client: ConsoleClient) -> str | None:
            (result,) = client.create_partitions({topic: count})
            if result.error_code:
                return describe(result.error_code, result.get("error_message"))
            deadline = time.monotonic() + min(5.0, self.timeout_ms / 1000)
            while time.monotonic() < deadline:  # the next page shows them all, led
                parts = client.partitions(topic, wait_s=deadline - time.monotonic())
                if parts and len(parts) >= count and all(p.leader >= 0 for p in parts.values()):
                    break
                time.sleep(0.1)
            return None

        try:
            return self._call(grow)
        except KafkaError as e:
            return _error_text(e)

    # -------------------------------------------------- ACLs, SCRAM users, quotas

    def acls(self) -> AclsView:
        return self._call(describe_acls)

    def create_acl(self, acl: AclSpec) -> str | None:
        return self._change(lambda c: create_acl(c, acl))

    def delete_acl(self, acl: AclSpec) -> str | None:
        return self._change(lambda c: delete_acl(c, acl))

    def scram_users(self) -> ScramUsersView:
        return self._call(describe_scram_users)

    def upsert_scram_user(
        self, user: str, mechanism: str, password: str, iterations: int
    ) -> str | None:
        return self._change(lambda c: upsert_scram_user(c, user, mechanism, password, iterations))

    def delete_scram_user(self, user: str, mechanism: str) -> str | None:
        return self._change(lambda c: delete_scram_user(c, user, mechanism))

    def quotas(self) -> QuotasView:
        return self._call(describe_quotas)

    def alter_quota(
        self, entity: list[tuple[str, str | None]], key: str, value: float | None
    ) -> str | None:
        return self._change(lambda c: alter_quota(c, entity, key, value))

    def _change(self, what: Callable[[ConsoleClient], str | None]) -> str | None:
        """A change's error as text, whether the cluster answered it with an
        error code or refused the request itself."""
        try:
            return self._call(what)
        except KafkaError as e:
            return _error_text(e)
