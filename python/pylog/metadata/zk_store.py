"""ZkMetadataStore: the MetadataStore of a broker started with ``zookeeper.connect``
— topics, partition counts, topic ids and config overrides, the cluster id and
the producer-id blocks kept in ZooKeeper in Kafka's layout
(:mod:`pylog.metadata.zk_data`), so every broker of the cluster, and Kafka's
tools, see the same metadata.

Reads come from an in-memory view (the broker reads metadata on every
Metadata request; a ZooKeeper round trip each time would be absurd). The view
is loaded at start-up and kept current two ways: this broker's own changes
update it when ZooKeeper has accepted them, and watches re-read what others
(other brokers, tools) changed: ``/brokers/topics``' children (topics created
or deleted), each ``/brokers/topics/<topic>`` (partitions added) and
``/config/changes`` (config change notifications, followed by a
:class:`~pylog.metadata.dynamic_config_manager.DynamicConfigManager` with this
store's handlers for topics, users and clients).

SCRAM credentials live where Kafka keeps them, ``/config/users/<user>`` (the
user name URL-encoded as Kafka's Sanitizer does), one key per mechanism with
Kafka's credential string; they are loaded at start-up into
:attr:`scram_credentials` and re-read on a ``users/<user>`` change
notification, so every broker of the cluster accepts a user as soon as
AlterUserScramCredentials (on any broker, or Kafka's tools) has stored it.

ACLs (with an authorizer, :meth:`ZkMetadataStore.start_acls`) live in Kafka's
AclAuthorizer layout, ``/kafka-acl/<Type>/<name>`` and
``/kafka-acl-extended/prefixed/<Type>/<name>``, and each change is announced
under ``/kafka-acl-changes`` / ``/kafka-acl-extended-changes``, which every
broker watches to re-read the pattern into :attr:`acl_cache`
(:class:`~pylog.metadata.zk_data.ZkAclStore`).

Threads. Every change makes ZooKeeper round trips and blocks its caller, so
callers on the event loop run changes in a thread (the broker's handlers do,
whatever the store). Listeners always run on the event loop thread
(``loop``): a change made on another thread, or one learnt from a watch, is
handed to the loop with ``call_soon_threadsafe`` — queued before the caller's
``await asyncio.to_thread(...)`` resumes, so the caller sees the partitions the
listener made.

Until the controller exists (the next part of the cluster issue), this store
does the controller's share of a topic's life itself, for replication factor 1
on this broker only: it writes the assignment (every partition on this broker)
and each partition's initial state znode (this broker leader, ISR [it]) on
creation, and deletes the znodes directly on deletion instead of leaving a
``/admin/delete_topics`` marker for the controller. The controller issue moves
both to the controller, where Kafka has them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import partial
from types import MappingProxyType

from pylog.errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidTopicError,
    KafkaError,
    ReassignmentInProgressError,
    RequestTimedOutError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from pylog.metadata.admin_utils import assign_replicas_to_brokers
from pylog.metadata.client_quota_entity import ClientQuotaEntity
from pylog.metadata.dynamic_config_manager import (
    CHANGE_EXPIRATION_MS,
    ConfigType,
    DynamicConfigManager,
)
from pylog.metadata.kafka_zk_client import (
    KafkaZkClient,
    ZkConnectionError,
    ZkError,
    ZkNodeExists,
    ZkVersionMismatch,
)
from pylog.metadata.store import (
    Listener,
    MetadataEvent,
    MetadataStore,
    TopicMetadata,
    check_partition_limit,
    new_uuid,
    validate_topic_name,
)
from pylog.metadata.zk_data import (
    BrokerIdsZNode,
    BrokerInfo,
    ConfigEntityTypeZNode,
    FeatureZNode,
    FinalizedFeatures,
    LeaderAndIsr,
    TopicReplicaAssignment,
    TopicsZNode,
    TopicZNode,
    ZkAclStore,
    ZkDataError,
)
from pylog.security.access_control_entry import AccessControlEntry
from pylog.security.acl_entry import decode_acls, encode_acls
from pylog.security.pattern_type import PatternType
from pylog.security.resource_pattern import ResourcePattern
from pylog.security.resource_type import ResourceType
from pylog.security.scram_credential import ScramCredential
from pylog.security.scram_mechanism import ScramMechanism

__all__ = ["ZkMetadataStore", "sanitize"]

_log = logging.getLogger("pylog.metadata")

_DELETE_WAIT_S = 30.0
#: Conditional ACL writes lost to others before giving up (Kafka's maxUpdateRetries).
_ACL_UPDATE_RETRIES = 10


def sanitize(name: str) -> str:
    """A user name as a znode name: Kafka's Sanitizer (URL-encoding; letters,
    digits and ``._-~`` stay)."""
    return urllib.parse.quote(name, safe="")


class ZkMetadataError(KafkaError):
    """ZooKeeper refused or failed a metadata change (the client sees
    UNKNOWN_SERVER_ERROR with this message)."""


@contextlib.contextmanager
def _zk_errors(what: str) -> Iterator[None]:
    try:
        yield
    except ZkConnectionError as e:
        raise RequestTimedOutError(f"{what}: {e}") from e
    except (ZkError, ZkDataError) as e:
        raise ZkMetadataError(f"{what}: {e}") from e


class ZkMetadataStore(MetadataStore):
    """The ZooKeeper-backed store. Construct it off the event loop (it loads
    every topic); ``loop`` is where listeners run."""

    def __init__(
        self,
        zk: KafkaZkClient,
        broker_id: int,
        *,
        cluster_id: str | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
        controller_managed: bool = False,
        change_expiration_ms: int = CHANGE_EXPIRATION_MS,
    ) -> None:
        self.zk = zk
        self.change_expiration_ms = change_expiration_ms
        self.broker_id = broker_id
        #: A KafkaController runs in the cluster: new topics and partitions are
        #: assigned over every registered broker (any replication factor) and
        #: their partition states left to the controller; deletion leaves an
        #: /admin/delete_topics marker for it.
        self.controller_managed = controller_managed
        self._loop = loop
        self._lock = threading.RLock()
        self._listeners: list[Listener] = []
        self._topics: dict[str, TopicMetadata] = {}
        self._by_id: dict[str, TopicMetadata] = {}
        self._stop_watches: list[Callable[[], None]] = []
        self._topic_watches: dict[str, Callable[[], None]] = {}
        self._watching = False
        # Watch events are re-read here, one at a time, never on kazoo's thread.
        self._reader = concurrent.futures.ThreadPoolExecutor(1, "pylog-zk-metadata")
        self.config_manager = DynamicConfigManager(
            zk,
            {
                ConfigType.TOPIC: self._on_topic_config,
                ConfigType.USER: self._on_user_config,
                ConfigType.CLIENT: partial(self._apply_quotas, ConfigType.CLIENT),
                # Kafka's IpConfigHandler: connection_creation_rate (KIP-612)
                ConfigType.IP: partial(self._apply_quotas, ConfigType.IP),
                ConfigType.BROKER: self._put_broker_config,
                ConfigType.GROUP: self._put_group_config,
                ConfigType.CLIENT_METRICS: self._put_client_metrics_config,
            },
            executor=self._reader,
            lock=self._lock,
            change_expiration_ms=change_expiration_ms,
        )
        self._acl_change_seq: dict[str, int] = {}
        self._closed = False
        with _zk_errors("loading the metadata from ZooKeeper"):
            zk.create_top_level_paths()
            self._cluster_id = zk.get_or_create_cluster_id(cluster_id or new_uuid())
            if cluster_id is not None and cluster_id != self._cluster_id:
                _log.warning(
                    "cluster.id %s is set, but ZooKeeper holds cluster id %s: using ZooKeeper's",
                    cluster_id,
                    self._cluster_id,
                )
            self.config_manager.skip_existing()
            for name in zk.get_all_topics():
                meta = self._read_topic(name)
                if meta is not None:
                    self._put(meta)
            for sanitized in zk.get_children(ConfigEntityTypeZNode.path("users")):
                self._load_user(sanitized)
                clients = f"{ConfigEntityTypeZNode.path('users')}/{sanitized}/clients"
                for client in zk.get_children(clients):
                    self._load_quotas("users", f"{sanitized}/clients/{client}")
            for client in zk.get_children(ConfigEntityTypeZNode.path("clients")):
                self._load_quotas("clients", client)
            for ip in zk.get_children(ConfigEntityTypeZNode.path(ConfigType.IP)):
                self._load_quotas(ConfigType.IP, ip)
            metrics = ConfigType.CLIENT_METRICS
            for name in zk.get_children(ConfigEntityTypeZNode.path(metrics)):
                self._put_client_metrics_config(name, zk.get_entity_config(metrics, name))
            self._read_features()

    def start_watching(self) -> None:
        """Follow changes made by others (other brokers, tools)."""
        with self._lock, _zk_errors("watching ZooKeeper"):
            self._watching = True
            for name in list(self._topics):
                self._watch_topic(name)
            self._stop_watches.append(
                self.zk.watch_children(TopicsZNode.path(), self._on_topics_changed)
            )
            self.config_manager.start()
            # KIP-584: the finalized features (/feature, written by
            # UpdateFeatures on any broker or by a Kafka controller) and what
            # the registered brokers support (a level is finalized only if
            # every broker supports it; a Kafka 3.9 broker supports
            # transaction.version 0 alone and stops on a higher one).
            self._stop_watches.append(
                self.zk.watch_data(FeatureZNode.path(), self._on_feature_changed)
            )
            self._stop_watches.append(
                self.zk.watch_children(BrokerIdsZNode.path(), self._on_brokers_changed)
            )

    # ------------------------------------------------------------------ finalized features

    def _read_features(self) -> None:
        got = self.zk.get_finalized_features()
        self._finalized_features = got or FinalizedFeatures(True, {}, -1)
        self._feature_support = _feature_support(self.zk.get_all_brokers())

    def _on_feature_changed(self, data: bytes | None, version: int) -> None:
        if data is None or not data:
            self._finalized_features = FinalizedFeatures(True, {}, -1)
            return
        try:
            self._finalized_features = FeatureZNode.decode(data, version)
        except ZkDataError:
            _log.exception("unreadable %s", FeatureZNode.path())

    def _on_brokers_changed(self, children: list[str]) -> None:
        if not self._closed:
            with contextlib.suppress(RuntimeError):
                self._reader.submit(self._reread_broker_features)

    def _reread_broker_features(self) -> None:
        try:
            self._feature_support = _feature_support(self.zk.get_all_brokers())
        except (ZkError, ZkDataError):
            _log.exception("reading the brokers' features from ZooKeeper failed")

    def update_finalized_features(self, features: Mapping[str, int]) -> FinalizedFeatures:
        with _zk_errors("writing the finalized features"):
            for _ in range(10):
                current = self.zk.get_finalized_features()
                epoch = -1 if current is None else current.epoch
                written = self.zk.set_finalized_features(features, epoch)
                if written >= 0:
                    self._finalized_features = FinalizedFeatures(True, dict(features), written)
                    return self._finalized_features
        raise ZkMetadataError(f"{FeatureZNode.path()} kept changing")

    def close(self) -> None:
        self._closed = True
        self.config_manager.close()
        for stop in [*self._stop_watches, *self._topic_watches.values()]:
            stop()
        self._stop_watches.clear()
        self._topic_watches.clear()
        self._reader.shutdown(wait=False, cancel_futures=True)

    # ------------------------------------------------------------------ view

    def _read_topic(self, name: str) -> TopicMetadata | None:
        got = self.zk.get_topic_assignment(name)
        if got is None:
            return None
        assignment, _ = got
        configs = self.zk.get_entity_config("topics", name)
        return _topic_metadata(name, assignment, configs)

    def _put(self, meta: TopicMetadata) -> None:
        if self._watching and meta.name not in self._topic_watches:
            self._watch_topic(meta.name)
        old = self._topics.get(meta.name)
        if old is not None and old.topic_id != meta.topic_id:
            self._by_id.pop(old.topic_id, None)
        self._topics[meta.name] = meta
        self._by_id[meta.topic_id] = meta

    def _drop(self, name: str) -> TopicMetadata | None:
        stop = self._topic_watches.pop(name, None)
        if stop is not None:
            stop()
        meta = self._topics.pop(name, None)
        if meta is not None:
            self._by_id.pop(meta.topic_id, None)
        return meta

    # ------------------------------------------------------------------ listeners

    def add_listener(self, listener: Listener) -> None:
        with self._lock:
            self._listeners.append(listener)

    def _notify(self, event: MetadataEvent) -> None:
        listeners = list(self._listeners)
        loop = self._loop
        on_loop = False
        if loop is not None:
            with contextlib.suppress(RuntimeError):
                on_loop = asyncio.get_running_loop() is loop
        if loop is None or on_loop:
            for listener in listeners:
                listener(event)
            return
        if loop.is_closed():
            return
        for listener in listeners:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(listener, event)

    # ------------------------------------------------------------------ watches

    def _on_topics_changed(self, children: list[str]) -> None:
        # kazoo's thread: hand the reading to our own.
        if not self._closed:
            with contextlib.suppress(RuntimeError):
                self._reader.submit(self._reconcile_topics, set(children))

    def _reconcile_topics(self, children: set[str]) -> None:
        try:
            with self._lock:
                events = []
                for name in sorted(children - set(self._topics)):
                    meta = self._read_topic(name)
                    if meta is not None and name not in self._topics:
                        self._put(meta)
                        events.append(MetadataEvent("create", meta))
                        _log.info("topic %s created elsewhere", name)
                for name in sorted(set(self._topics) - children):
                    if self.zk.get_topic_assignment(name) is None:
                        gone = self._drop(name)
                        if gone is not None:
                            events.append(MetadataEvent("delete", gone, gone))
                            _log.info("topic %s deleted elsewhere", name)
                for event in events:
                    self._notify(event)
        except (ZkError, ZkDataError):
            _log.exception("reading the topics from ZooKeeper failed")

    def reload_topic(self, name: str) -> TopicMetadata | None:
        with self._lock, _zk_errors(f"reading topic {name!r} from ZooKeeper"):
            known = self._topics.get(name)
            meta = self._read_topic(name)
            if meta is None:
                return known
            if known is None:
                self._put(meta)
                _log.info("topic %s created elsewhere", name)
                self._notify(MetadataEvent("create", meta))
                return meta
            if meta.partitions > known.partitions:
                new = _replace(known, partitions=meta.partitions)
                self._put(new)
                _log.info("topic %s grew to %d partitions elsewhere", name, meta.partitions)
                self._notify(MetadataEvent("partitions", new, known))
                return new
            return known

    def _watch_topic(self, name: str) -> None:
        def on_assignment(data: bytes | None, version: int) -> None:
            if data is not None and not self._closed:
                with contextlib.suppress(RuntimeError):
                    self._reader.submit(self._reassess_topic, name, data)

        self._topic_watches[name] = self.zk.watch_data(TopicZNode.path(name), on_assignment)

    def _reassess_topic(self, name: str, data: bytes) -> None:
        """A topic's assignment changed: partitions added by another broker."""
        try:
            assignment = TopicZNode.decode(name, data)
        except ZkDataError:
            _log.exception("unreadable assignment of topic %s", name)
            return
        with self._lock:
            meta = self._topics.get(name)
            count = len(assignment.partitions)
            if meta is None or count <= meta.partitions:
                return
            new = _replace(meta, partitions=count)
            self._put(new)
            _log.info("topic %s grew to %d partitions elsewhere", name, count)
            self._notify(MetadataEvent("partitions", new, meta))

    def _on_topic_config(self, name: str, configs: Mapping[str, str]) -> None:
        """Kafka's TopicConfigHandler: a topic's overrides changed elsewhere."""
        meta = self._topics.get(name)
        if meta is not None and configs != meta.configs:
            new = _replace(meta, configs=dict(configs))
            self._put(new)
            self._notify(MetadataEvent("config", new, meta))

    def _on_user_config(self, name: str, configs: Mapping[str, str]) -> None:
        """Kafka's UserConfigHandler: a user's SCRAM credentials and quotas, or
        the quotas of ``<user>/clients/<client id>``."""
        if "/" in name:
            self._apply_quotas(ConfigType.USER, name, configs)
        else:
            self._apply_user(name, configs)

    # ------------------------------------------------------------------ SCRAM users

    def _load_user(self, sanitized: str) -> None:
        """(Re-)read ``/config/users/<sanitized>``'s SCRAM credentials and quotas."""
        self._apply_user(sanitized, self.zk.get_entity_config("users", sanitized))

    def _apply_user(self, sanitized: str, config: Mapping[str, str]) -> None:
        user = urllib.parse.unquote(sanitized)
        creds = {}
        self._apply_quotas("users", sanitized, config)
        for key, text in config.items():
            mechanism = ScramMechanism.by_name(key)
            if mechanism is None:
                continue  # a quota (producer_byte_rate, ...)
            try:
                creds[mechanism] = ScramCredential.from_string(text)
            except ValueError as e:
                _log.warning("/config/users/%s: %s is not a SCRAM credential (%s)",
                             sanitized, key, e)  # fmt: skip
        self.scram_credentials.set_user(user, creds)

    # ------------------------------------------------------------------ client quotas

    def _load_quotas(self, entity_type: str, name: str) -> None:
        """(Re-)read the quotas of ``/config/<entity_type>/<name>``."""
        self._apply_quotas(entity_type, name, self.zk.get_entity_config(entity_type, name))

    def _apply_quotas(self, entity_type: str, name: str, config: Mapping[str, str]) -> None:
        entity = ClientQuotaEntity.from_path(entity_type, name)
        if entity is None:
            return
        values = {}
        for key in entity.quota_keys().keys() & config.keys():
            try:
                values[key] = float(config[key])
            except ValueError:
                _log.warning("/config/%s/%s: %s is not a number: %r", entity_type, name, key,
                             config[key])  # fmt: skip
        self._set_entity_quotas(entity, values)

    def alter_client_quotas(
        self, changes: Mapping[ClientQuotaEntity, Mapping[str, float | None]]
    ) -> None:
        """Per entity, a conditional write of its znode (a user's SCRAM
        credentials kept) with its change notification, so every broker re-reads
        it. Kafka writes the byte rates as integers: ``"1024"``, not ``"1024.0"``."""
        for entity, per_key in changes.items():
            entity_type, name = entity.path()
            with _zk_errors(f"storing the quotas of {entity}"):
                while True:
                    got = self.zk.get_entity_config_versioned(entity_type, name)
                    config, version = got if got is not None else ({}, -1)
                    for key, value in per_key.items():
                        if value is None:
                            config.pop(key, None)
                        elif entity.quota_keys().get(key):
                            config[key] = str(int(value))
                        else:
                            config[key] = repr(float(value))
                    try:
                        if version < 0:
                            self.zk.set_entity_config(entity_type, name, config)
                        else:
                            self.zk.set_entity_config(entity_type, name, config, version)
                        break
                    except (ZkVersionMismatch, ZkNodeExists):
                        continue  # someone else changed the entity meanwhile: redo on theirs
            with self._lock:
                self._apply_quotas(entity_type, name, config)

    def alter_user_scram_credentials(
        self, changes: Mapping[str, Mapping[ScramMechanism, ScramCredential | None]]
    ) -> None:
        """Per user, a conditional write of ``/config/users/<user>`` (quota keys
        kept) with its change notification, so every broker re-reads it."""
        for user, per_mechanism in changes.items():
            sanitized = sanitize(user)
            with _zk_errors(f"storing the SCRAM credentials of {user!r}"):
                while True:
                    got = self.zk.get_entity_config_versioned("users", sanitized)
                    config, version = got if got is not None else ({}, -1)
                    for mechanism, cred in per_mechanism.items():
                        if cred is None:
                            config.pop(mechanism.mechanism_name, None)
                        else:
                            config[mechanism.mechanism_name] = cred.to_string()
                    try:
                        if version < 0:
                            self.zk.set_entity_config("users", sanitized, config)
                        else:
                            self.zk.set_entity_config("users", sanitized, config, version)
                        break
                    except (ZkVersionMismatch, ZkNodeExists):
                        continue  # someone else changed the user meanwhile: redo on theirs
            with self._lock:
                self._load_user(sanitized)

    # ------------------------------------------------------------------ ACLs

    def start_acls(self) -> None:
        """Kafka's AclAuthorizer start-up: the ACL paths, the change watches,
        then every ACL into :attr:`acl_cache` (notifications already there
        when loading starts are covered by the load)."""
        with self._lock, _zk_errors("loading the ACLs from ZooKeeper"):
            self.zk.create_acl_paths()
            for parent in (ZkAclStore.LITERAL_CHANGES, ZkAclStore.EXTENDED_CHANGES):
                seqs = [
                    ZkAclStore.sequence_number(parent, n)
                    for n in self.zk.get_children(parent)
                    if n.startswith(ZkAclStore.CHANGE_PREFIX)
                ]
                self._acl_change_seq[parent] = max(seqs, default=-1)
            acls = {}
            for pattern_type in (PatternType.LITERAL, PatternType.PREFIXED):
                base = ZkAclStore.acl_path(pattern_type)
                for type_name in self.zk.get_children(base):
                    try:
                        resource_type = ResourceType.parse(type_name)
                    except ValueError:
                        _log.warning(
                            "ignoring ACLs of unknown resource type %s/%s", base, type_name
                        )
                        continue
                    for name in self.zk.get_children(f"{base}/{type_name}"):
                        pattern = ResourcePattern(resource_type, name, pattern_type)
                        entries = self._read_acls(pattern)
                        if entries:
                            acls[pattern] = entries
            self.acl_cache.replace_all(acls)
            for parent in (ZkAclStore.LITERAL_CHANGES, ZkAclStore.EXTENDED_CHANGES):
                self._stop_watches.append(
                    self.zk.watch_children(parent, partial(self._on_acl_changes, parent))
                )
        _log.info("loaded ACLs of %d resource patterns from ZooKeeper", len(acls))

    def _read_acls(self, pattern: ResourcePattern) -> frozenset[AccessControlEntry]:
        data, _ = self.zk.get_versioned_acls(pattern)
        try:
            return decode_acls(data)
        except ValueError as e:
            _log.warning("%s: unreadable ACLs, ignored (%s)", ZkAclStore.path(pattern), e)
            return frozenset()

    def _on_acl_changes(self, parent: str, children: list[str]) -> None:
        if not self._closed:
            with contextlib.suppress(RuntimeError):
                self._reader.submit(self._apply_acl_changes, parent, children)

    def _apply_acl_changes(self, parent: str, children: list[str]) -> None:
        """Re-read each pattern a new notification names (Kafka's
        AclChangedNotificationHandler), then purge expired notifications."""
        try:
            names = sorted(
                (c for c in children if c.startswith(ZkAclStore.CHANGE_PREFIX)),
                key=lambda n: ZkAclStore.sequence_number(parent, n),
            )
            old = []
            now_ms = int(time.time() * 1000)
            with self._lock:
                for name in names:
                    seq = ZkAclStore.sequence_number(parent, name)
                    got = self.zk.get_data(f"{parent}/{name}")
                    if got is None:
                        continue
                    if now_ms - got[1].ctime_ms > self.change_expiration_ms:
                        old.append(name)
                    if seq <= self._acl_change_seq.get(parent, -1):
                        continue
                    self._acl_change_seq[parent] = seq
                    try:
                        pattern = ZkAclStore.decode_change(parent, got[0])
                    except ZkDataError as e:
                        _log.warning("%s/%s: %s", parent, name, e)
                        continue
                    entries = self._read_acls(pattern)
                    self.acl_cache.set(pattern, entries)
                    _log.info("ACLs of %s changed elsewhere: %d entries", pattern, len(entries))
            for name in old:
                self.zk.delete_recursive(f"{parent}/{name}")
        except (ZkError, ZkDataError):
            _log.exception("reading the ACL changes from ZooKeeper failed")

    def update_acls(
        self,
        pattern: ResourcePattern,
        change: Callable[[frozenset[AccessControlEntry]], frozenset[AccessControlEntry]],
    ) -> frozenset[AccessControlEntry]:
        """Read the znode, write the change conditional on its version (with
        its change notification), redo on a lost race (Kafka's
        updateResourceAcls). Under the lock the change watcher takes: it
        cannot re-read another broker's later change between this write and
        this cache update, and be overwritten by it."""
        with self._lock, _zk_errors(f"storing the ACLs of {pattern}"):
            for _ in range(_ACL_UPDATE_RETRIES):
                data, version = self.zk.get_versioned_acls(pattern)
                try:
                    old = decode_acls(data)
                except ValueError:
                    old = frozenset()  # unreadable: replaced by what is written now
                new = frozenset(change(old))
                if (new == old and version >= 0) or (not new and version < 0):
                    self.acl_cache.set(pattern, new)
                    return new
                if self.zk.set_acls(pattern, encode_acls(new) if new else None, version):
                    self.acl_cache.set(pattern, new)
                    return new
        raise ZkMetadataError(
            f"Failed to update ACLs for {pattern} after trying {_ACL_UPDATE_RETRIES} times"
        )

    # ------------------------------------------------------------------ reads

    @property
    def cluster_id(self) -> str:
        return self._cluster_id

    def topic(self, name: str) -> TopicMetadata | None:
        with self._lock:
            return self._topics.get(name)

    def topic_by_id(self, topic_id: str) -> TopicMetadata | None:
        with self._lock:
            return self._by_id.get(topic_id)

    def topics(self) -> list[TopicMetadata]:
        with self._lock:
            return [self._topics[n] for n in sorted(self._topics)]

    # ------------------------------------------------------------------ changes

    def _initial_state(self) -> LeaderAndIsr:
        epoch = self.zk.get_controller_epoch()
        return LeaderAndIsr(
            leader=self.broker_id,
            leader_epoch=0,
            isr=[self.broker_id],
            controller_epoch=epoch[0] if epoch else 0,
        )

    def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int = 1,
        configs: Mapping[str, str] | None = None,
        *,
        topic_id: str | None = None,
        validate_only: bool = False,
        max_partitions: int | None = None,
        replica_assignment: Mapping[int, Sequence[int]] | None = None,
    ) -> TopicMetadata:
        validate_topic_name(name)
        if num_partitions < 1:
            raise InvalidPartitionsError(
                f"number of partitions must be at least 1, not {num_partitions}"
            )
        if replication_factor < 1:
            raise InvalidReplicationFactorError(
                f"replication factor must be at least 1, not {replication_factor}"
            )
        if replication_factor > 1 and not self.controller_managed:
            # Only a controller places replicas on other brokers.
            raise InvalidReplicationFactorError(
                f"replication factor {replication_factor} needs the controller, which pylog "
                "does not have yet: topics are created with replication factor 1"
            )
        with self._lock, _zk_errors(f"creating topic {name}"):
            if name in self._topics or self.zk.get_topic_assignment(name) is not None:
                raise TopicAlreadyExistsError(f"topic {name!r} already exists")
            if self.zk.is_topic_marked_for_deletion(name):
                raise TopicAlreadyExistsError(f"topic {name!r} is marked for deletion")
            colliding = name.replace(".", "_")
            for other in self._topics:
                if other.replace(".", "_") == colliding:
                    raise InvalidTopicError(
                        f"topic {name!r} collides with existing topic {other!r} "
                        "('.' and '_' are the same in metric names)"
                    )
            check_partition_limit(self.total_partitions(), num_partitions, max_partitions)
            if replica_assignment is not None:
                self._check_registered(replica_assignment.values())
                placed = {p: list(r) for p, r in sorted(replica_assignment.items())}
            else:
                placed = self._assign(num_partitions, replication_factor)
            assignment = TopicReplicaAssignment(
                topic_id=topic_id or new_uuid(),
                partitions=placed,
            )
            clean = {k: str(v) for k, v in (configs or {}).items() if v is not None}
            meta = _topic_metadata(name, assignment, clean)
            if validate_only:
                return meta
            states = None
            if not self.controller_managed:
                state = self._initial_state()
                states = {p: state for p in range(num_partitions)}
            try:
                self.zk.create_topic(name, assignment, clean, states)
            except ZkNodeExists:
                raise TopicAlreadyExistsError(f"topic {name!r} already exists") from None
            self._put(meta)
            self._notify(MetadataEvent("create", meta))
            return meta

    def delete_topic(self, name: str) -> None:
        with self._lock, _zk_errors(f"deleting topic {name}"):
            meta = self._topics.get(name)
            if meta is None:
                raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
            if not self.controller_managed:
                self.zk.delete_topic_znodes(name)
                self._drop(name)
                self._notify(MetadataEvent("delete", meta, meta))
                return
            self.zk.create_delete_topic_marker(name)
        # The wait is without the lock: every reader of the store (the event
        # loop's requests, the StopReplica the controller sends this broker
        # to delete the topic) would otherwise stand still until it ends.
        with _zk_errors(f"deleting topic {name}"):
            self._wait_for_controller(name)
        with self._lock:
            # Unless the topics watch has dropped it meanwhile (or a new
            # topic of the name has come).
            if self._topics.get(name) is meta:
                self._drop(name)
                self._notify(MetadataEvent("delete", meta, meta))

    def _wait_for_controller(self, name: str) -> None:
        """Wait (bounded) for the controller to act on the
        /admin/delete_topics marker: the topic's znodes removed."""
        deadline = time.monotonic() + _DELETE_WAIT_S
        while time.monotonic() < deadline:
            if self.zk.get_topic_assignment(name) is None:
                return
            time.sleep(0.05)
        _log.warning("topic %s: the controller has not deleted it yet", name)

    def _live_brokers(self) -> dict[int, str | None]:
        return {b.id: b.rack for b in self.zk.get_all_brokers()}

    def _check_registered(self, replicas: Iterable[Sequence[int]]) -> None:
        """InvalidReplicaAssignmentError (Kafka's message) when an explicit
        assignment names a broker without a registration."""
        if self.controller_managed:
            registered = set(self.zk.get_sorted_broker_list())
        else:
            registered = {self.broker_id}
        unknown = sorted({b for r in replicas for b in r} - registered)
        if unknown:
            raise InvalidReplicaAssignmentError(
                f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}."
            )

    def _assign(self, num_partitions: int, replication_factor: int) -> dict[int, list[int]]:
        if not self.controller_managed:
            return {p: [self.broker_id] for p in range(num_partitions)}
        return assign_replicas_to_brokers(self._live_brokers(), num_partitions, replication_factor)

    def _assign_more(self, current: TopicReplicaAssignment, new_total: int) -> dict[int, list[int]]:
        count = len(current.partitions)
        if not self.controller_managed:
            return {p: [self.broker_id] for p in range(count, new_total)}
        brokers = self._live_brokers()
        ids = sorted(brokers)
        first = current.partitions.get(0, [])
        start = ids.index(first[0]) if first and first[0] in ids else -1
        return assign_replicas_to_brokers(
            brokers,
            new_total - count,
            current.replication_factor,
            fixed_start_index=start,
            start_partition_id=count,
        )

    def add_partitions(
        self,
        name: str,
        new_total: int,
        *,
        validate_only: bool = False,
        max_partitions: int | None = None,
        replica_assignment: Sequence[Sequence[int]] | None = None,
    ) -> TopicMetadata:
        with self._lock, _zk_errors(f"adding partitions to {name}"):
            if replica_assignment is not None:
                self._check_registered(replica_assignment)
            for _ in range(10):
                meta = self._topics.get(name)
                got = self.zk.get_topic_assignment(name)
                if meta is None or got is None:
                    raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
                assignment, version = got
                if assignment.adding_replicas or assignment.removing_replicas:
                    # Kafka refuses too: the controller is rewriting the assignment.
                    raise ReassignmentInProgressError(
                        f"A partition reassignment is in progress for the topic '{name}'."
                    )
                count = len(assignment.partitions)
                if new_total <= count:
                    raise InvalidPartitionsError(
                        f"topic {name!r} has {count} partitions; the new count "
                        f"{new_total} must be larger"
                    )
                check_partition_limit(self.total_partitions(), new_total - count, max_partitions)
                if replica_assignment is not None:
                    if len(replica_assignment) != new_total - count:
                        raise InvalidReplicaAssignmentError(
                            f"Increasing the number of partitions by {new_total - count} but "
                            f"{len(replica_assignment)} assignments provided."
                        )
                    added = {count + i: list(r) for i, r in enumerate(replica_assignment)}
                else:
                    added = self._assign_more(assignment, new_total)
                grown = TopicReplicaAssignment(
                    assignment.topic_id,
                    {**assignment.partitions, **added},
                    assignment.adding_replicas,
                    assignment.removing_replicas,
                )
                new = _replace(meta, partitions=new_total)
                if validate_only:
                    return new
                states = None
                if not self.controller_managed:
                    state = self._initial_state()
                    states = {p: state for p in range(count, new_total)}
                try:
                    self.zk.set_topic_assignment(name, grown, version, states)
                except (ZkVersionMismatch, ZkNodeExists):
                    continue  # changed under us: read again
                self._put(new)
                self._notify(MetadataEvent("partitions", new, meta))
                return new
            raise ZkMetadataError(f"topic {name!r} kept changing while adding partitions")

    def alter_topic_config(self, name: str, configs: Mapping[str, str | None]) -> None:
        """Merge into the overrides as ZooKeeper has them now (not as this
        broker last saw them), written conditional on the znode version: two
        brokers altering different keys at once both keep their change."""

        def merge(current: Mapping[str, str]) -> dict[str, str]:
            merged = dict(current)
            for k, v in configs.items():
                if v is None:
                    merged.pop(k, None)
                else:
                    merged[k] = str(v)
            return merged

        self._write_topic_config(name, merge)

    def set_topic_config(self, name: str, configs: Mapping[str, str]) -> None:
        clean = {k: str(v) for k, v in configs.items()}
        self._write_topic_config(name, lambda _current: clean)

    def _write_topic_config(
        self, name: str, compute: Callable[[Mapping[str, str]], dict[str, str]]
    ) -> None:
        with self._lock, _zk_errors(f"setting the config of {name}"):
            for _ in range(10):
                meta = self._topics.get(name)
                if meta is None:
                    raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
                got = self.zk.get_entity_config_versioned("topics", name)
                current, version = got if got is not None else ({}, -1)
                wanted = compute(current)
                try:
                    change = self.zk.set_entity_config("topics", name, wanted, version)
                except (ZkVersionMismatch, ZkNodeExists):
                    continue  # another broker changed it: merge again
                self.config_manager.mark_processed(change)  # applied here already
                new = _replace(meta, configs=wanted)
                self._put(new)
                self._notify(MetadataEvent("config", new, meta))
                return
            raise ZkMetadataError(f"the config of topic {name!r} kept changing")

    def broker_config(self, entity: str) -> dict[str, str]:
        # Read through: a broker reads its layers once at start-up, before the
        # change notifications it follows from then on.
        with _zk_errors(f"reading the config of broker {entity}"):
            return self.zk.get_entity_config(ConfigType.BROKER, entity)

    def set_broker_config(self, entity: str, configs: Mapping[str, str]) -> None:
        clean = {str(k): str(v) for k, v in configs.items()}
        with self._lock, _zk_errors(f"setting the config of broker {entity}"):
            change = self.zk.set_entity_config(ConfigType.BROKER, entity, clean)
            self.config_manager.mark_processed(change)  # applied here, below
            self._put_broker_config(entity, clean)

    def group_config(self, group_id: str) -> dict[str, str]:
        # Read through once per group; /config/changes keeps it current after.
        if not group_id or "/" in group_id or group_id in (".", ".."):
            return {}  # no znode can be named so: nothing was ever set
        got = self._group_configs.get(group_id)
        if got is not None:
            return dict(got)
        with _zk_errors(f"reading the config of group {group_id}"):
            configs = self.zk.get_entity_config(ConfigType.GROUP, group_id)
        with self._lock:
            if group_id not in self._group_configs:
                current = dict(self._group_configs)
                current[group_id] = MappingProxyType(configs)
                self._group_configs = MappingProxyType(current)
        return dict(configs)

    def set_group_config(self, group_id: str, configs: Mapping[str, str]) -> None:
        clean = {str(k): str(v) for k, v in configs.items()}
        with self._lock, _zk_errors(f"setting the config of group {group_id}"):
            change = self.zk.set_entity_config(ConfigType.GROUP, group_id, clean)
            self.config_manager.mark_processed(change)
            self._put_group_config(group_id, clean)

    def set_client_metrics_config(self, name: str, configs: Mapping[str, str]) -> None:
        clean = {str(k): str(v) for k, v in configs.items()}
        with self._lock, _zk_errors(f"setting the client metrics subscription {name}"):
            change = self.zk.set_entity_config(ConfigType.CLIENT_METRICS, name, clean)
            self.config_manager.mark_processed(change)
            self._put_client_metrics_config(name, clean)

    def reserve_producer_id_block(self, size: int) -> int:
        with _zk_errors("allocating producer ids"):
            return self.zk.allocate_producer_id_block(self.broker_id, size).first

    def __repr__(self) -> str:
        return f"ZkMetadataStore({self.zk.connect_string!r}, topics={len(self._topics)})"


def _feature_support(registered: Iterable[BrokerInfo]) -> dict[str, int] | None:
    """Per feature any broker registers, the highest level all of them
    support: a broker that does not name a feature supports only level 0.
    None while no broker is registered (this one is about to be)."""
    brokers = list(registered)
    if not brokers:
        return None
    names = {name for b in brokers for name in b.features}
    return {name: min(b.features.get(name, (0, 0))[1] for b in brokers) for name in names}


def _topic_metadata(
    name: str, assignment: TopicReplicaAssignment, configs: Mapping[str, str]
) -> TopicMetadata:
    return TopicMetadata(
        name=name,
        # A topic written by a Kafka older than 2.8 has no id: give it one here
        # (Kafka's controller would write one back).
        topic_id=assignment.topic_id or new_uuid(),
        partitions=len(assignment.partitions),
        configs=dict(configs),
        replication_factor=assignment.replication_factor or 1,
    )


def _replace(
    meta: TopicMetadata,
    *,
    partitions: int | None = None,
    configs: Mapping[str, str] | None = None,
) -> TopicMetadata:
    return TopicMetadata(
        meta.name,
        meta.topic_id,
        meta.partitions if partitions is None else partitions,
        dict(meta.configs if configs is None else configs),
        meta.replication_factor,
    )
