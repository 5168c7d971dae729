"""MetadataStore: the interface to the cluster metadata the broker keeps — topics,
their partition counts, topic ids and config overrides, the cluster id and the
producer-id blocks — and the values it hands out.

The broker names only this interface; :class:`~pylog.metadata.json_store.JsonMetadataStore`
(one JSON document in the first log directory) implements it for a single
broker, and a ZooKeeper store (Kafka's ``/brokers/topics/<topic>``,
``/config/topics/<topic>``, ``/cluster/id`` and ``/latest_producer_id_block``
nodes) can be added beside it.

Every change is durable when the call returns; listeners registered with
:meth:`MetadataStore.add_listener` hear it after that. The ReplicaManager
creates, grows and deletes partitions from those events, so whoever changes the
metadata (the admin APIs, auto-creation, the group coordinator, a tool) leaves
the logs consistent with it.
"""

from __future__ import annotations

import abc
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from pylog.errors import InvalidTopicError, KafkaError, PolicyViolationError
from pylog.log.partition_metadata import new_topic_id
from pylog.metadata.client_quota_entity import ClientQuotaEntity
from pylog.metadata.zk_data import FinalizedFeatures
from pylog.security.access_control_entry import AccessControlEntry
from pylog.security.acl_cache import AclCache
from pylog.security.credential_cache import CredentialCache
from pylog.security.resource_pattern import ResourcePattern
from pylog.security.scram_credential import ScramCredential
from pylog.security.scram_mechanism import ScramMechanism

__all__ = [
    "INTERNAL_TOPICS",
    "Listener",
    "MetadataEvent",
    "MetadataStore",
    "NewTopic",
    "TopicMetadata",
    "check_partition_limit",
    "new_uuid",
    "validate_topic_name",
]

_MAX_TOPIC_NAME = 249
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


def new_uuid() -> str:
    """A random UUID in Kafka's printed form: unpadded URL-safe base64 (22 chars).

    Same rule as Kafka's Uuid.randomUuid: never a reserved id, and never one
    starting with '-', which kafka-storage and the other tools would read as an
    option (a cluster id is passed to them on the command line)."""
    return new_topic_id()


def validate_topic_name(name: str) -> None:
    """InvalidTopicError unless ``name`` is a legal Kafka topic name."""
    if not name:
        raise InvalidTopicError("topic name is empty")
    if name in (".", ".."):
        raise InvalidTopicError(f"topic name cannot be {name!r}")
    if len(name) > _MAX_TOPIC_NAME:
        raise InvalidTopicError(
            f"topic name {name[:40]!r}... is {len(name)} characters, over {_MAX_TOPIC_NAME}"
        )
    if not _LEGAL_TOPIC.match(name):
        raise InvalidTopicError(
            f"topic name {name!r} has characters other than ASCII letters, digits, '.', '_', '-'"
        )


@dataclass(frozen=True)
class TopicMetadata:
    """A topic as the store keeps it. ``topic_id`` is Kafka's base64url form."""

    name: str
    topic_id: str
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)
    replication_factor: int = 1

    @property
    def is_internal(self) -> bool:
        return self.name in INTERNAL_TOPICS


@dataclass(frozen=True)
class NewTopic:
    """A topic to create (:meth:`MetadataStore.create_topics`).
    ``replica_assignment``: partition → replicas, given by the client instead
    of the store's placement (checked already: partitions 0..n-1, one
    replication factor, no broker twice)."""

    name: str
    num_partitions: int
    replication_factor: int = 1
    configs: Mapping[str, str] = field(default_factory=dict)
    topic_id: str | None = None
    replica_assignment: Mapping[int, Sequence[int]] | None = None


def check_partition_limit(current: int, adding: int, limit: int | None) -> None:
    """PolicyViolationError when ``adding`` partitions to the ``current`` ones
    would pass ``limit`` (``max.broker.partitions``; None: no limit)."""
    if limit is not None and current + adding > limit:
        raise PolicyViolationError(
            f"Adding {adding} partition(s) would exceed this broker's limit of {limit} "
            f"partitions (max.broker.partitions); it has {current}."
        )


@dataclass(frozen=True)
class MetadataEvent:
    """A durable change: ``kind`` is "create", "delete", "partitions" or "config".
    ``previous`` is the topic before the change (None for "create")."""

    kind: str
    topic: TopicMetadata
    previous: TopicMetadata | None = None


Listener = Callable[[MetadataEvent], None]
#: ``listener(entity, configs)``: a broker entity's whole dynamic config.
BrokerConfigListener = Callable[[str, Mapping[str, str]], None]


class MetadataStore(abc.ABC):
    """The operations the broker uses on the cluster metadata. Implementations
    are thread-safe, and every change is durable when it returns: a change may
    fsync or wait on ZooKeeper, so callers on the event loop make changes in a
    thread. Reads never block."""

    # ------------------------------------------------------------------ listeners

    @abc.abstractmethod
    def add_listener(self, listener: Listener) -> None:
        """Call ``listener`` with every change, once it is durable."""

    # ------------------------------------------------------------------ reads

    @property
    @abc.abstractmethod
    def cluster_id(self) -> str: ...

    @abc.abstractmethod
    def topic(self, name: str) -> TopicMetadata | None: ...

    def reload_topic(self, name: str) -> TopicMetadata | None:
        """The topic as its source of truth has it now. A store kept current
        by watches (ZooKeeper's) reads it, since a LeaderAndIsr can arrive
        before the watch that announces the topic; this one blocks then."""
        return self.topic(name)

    @abc.abstractmethod
    def topic_by_id(self, topic_id: str) -> TopicMetadata | None: ...

    @abc.abstractmethod
    def topics(self) -> list[TopicMetadata]:
        """Every topic, by name."""

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.topic(name) is not None

    def topic_configs(self) -> dict[str, dict[str, str]]:
        """Every topic's overrides (for LogManager's ``topic_configs``)."""
        return {t.name: dict(t.configs) for t in self.topics() if t.configs}

    def total_partitions(self) -> int:
        """The partitions of every topic together."""
        return sum(t.partitions for t in self.topics())

    # ------------------------------------------------------------------ changes

    def create_topics(
        self,
        topics: Sequence[NewTopic],
        *,
        validate_only: bool = False,
        max_partitions: int | None = None,
    ) -> list[TopicMetadata | KafkaError]:
        """Create several topics at once: per topic, its metadata or the
        KafkaError that refused it. ``max_partitions`` caps the partitions of
        all topics together (PolicyViolationError past it). A store that can
        make them durable together overrides this one-by-one default."""
        out: list[TopicMetadata | KafkaError] = []
        for t in topics:
            try:
                out.append(
                    self.create_topic(
                        t.name,
                        t.num_partitions,
                        t.replication_factor,
                        t.configs,
                        topic_id=t.topic_id,
                        validate_only=validate_only,
                        max_partitions=max_partitions,
                        replica_assignment=t.replica_assignment,
                    )
                )
            except KafkaError as e:
                out.append(e)
        return out

    @abc.abstractmethod
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
        """Add a topic (or, ``validate_only``, check that it could be added).
        TopicAlreadyExistsError, InvalidTopicError, InvalidPartitionsError,
        InvalidReplicationFactorError, PolicyViolationError (past
        ``max_partitions`` in all), InvalidReplicaAssignmentError (a
        ``replica_assignment`` naming a broker that is not registered). When a
        listener cannot make the topic (its logs), the topic is removed again
        and that error raised: the store never keeps a topic the broker could
        not create."""

    @abc.abstractmethod
    def delete_topic(self, name: str) -> None:
        """UnknownTopicOrPartitionError if there is no such topic."""

    @abc.abstractmethod
    def add_partitions(
        self,
        name: str,
        new_total: int,
        *,
        validate_only: bool = False,
        max_partitions: int | None = None,
        replica_assignment: Sequence[Sequence[int]] | None = None,
    ) -> TopicMetadata:
        """Grow a topic to ``new_total`` partitions; InvalidPartitionsError
        unless that is more than it has, PolicyViolationError past
        ``max_partitions`` in all. ``replica_assignment``: the new partitions'
        replicas, in order (InvalidReplicaAssignmentError for a broker that
        is not registered)."""

    @abc.abstractmethod
    def set_topic_config(self, name: str, configs: Mapping[str, str]) -> None:
        """Replace all of a topic's overrides (AlterConfigs' semantics)."""

    @abc.abstractmethod
    def alter_topic_config(self, name: str, configs: Mapping[str, str | None]) -> None:
        """Set overrides; a None value deletes that override."""

    @abc.abstractmethod
    def reserve_producer_id_block(self, size: int) -> int:
        """Persist a new block of ``size`` producer ids; returns its first id.
        The block is durable before any of its ids is used, so ids never repeat
        across restarts."""

    # ------------------------------------------------------------------ SCRAM users

    @property
    def scram_credentials(self) -> CredentialCache:
        """Every user's SCRAM credentials, as logins read them: in memory,
        current with the store (Kafka's CredentialCache)."""
        cache: CredentialCache | None = getattr(self, "_scram_cache", None)
        if cache is None:
            cache = self._scram_cache = CredentialCache()
        return cache

    def alter_user_scram_credentials(
        self, changes: Mapping[str, Mapping[ScramMechanism, ScramCredential | None]]
    ) -> None:
        """Durably set (a credential) or delete (None) SCRAM credentials: user →
        mechanism → credential. Kafka's AlterUserScramCredentials, validated by
        the caller; :attr:`scram_credentials` follows once this returns."""
        raise KafkaError("this metadata store keeps no SCRAM credentials")

    # ------------------------------------------------------------------ ACLs

    @property
    def acl_cache(self) -> AclCache:
        """Every resource pattern's ACLs, in memory, current with the store
        once :meth:`start_acls` has run (the authorizer reads it)."""
        cache: AclCache | None = getattr(self, "_acl_cache", None)
        if cache is None:
            cache = self._acl_cache = AclCache()
        return cache

    def start_acls(self) -> None:  # noqa: B027 - a store that follows others overrides it
        """Load the ACLs and follow changes made elsewhere (an authorizer is
        configured); the embedded store has them loaded already."""

    def update_acls(
        self,
        pattern: ResourcePattern,
        change: Callable[[frozenset[AccessControlEntry]], frozenset[AccessControlEntry]],
    ) -> frozenset[AccessControlEntry]:
        """Durably replace ``pattern``'s entries by ``change(current)`` (read
        from the store, retried when someone else changed them meanwhile);
        returns what is stored. :attr:`acl_cache` follows once this returns."""
        raise KafkaError("this metadata store keeps no ACLs")

    # ------------------------------------------------------------------ client quotas

    #: Every quota entity's quotas (key -> value); replaced whole on each change,
    #: so a reader on another thread always sees one consistent map.
    _client_quotas: Mapping[ClientQuotaEntity, Mapping[str, float]] = MappingProxyType({})

    @property
    def client_quotas(self) -> Mapping[ClientQuotaEntity, Mapping[str, float]]:
        """The quotas of every user and client-id entity that has any, as the
        quota managers read them on each request: in memory, current with the store."""
        return self._client_quotas

    def _set_entity_quotas(self, entity: ClientQuotaEntity, values: Mapping[str, float]) -> None:
        current = dict(self._client_quotas)
        if values:
            current[entity] = MappingProxyType(dict(values))
        else:
            current.pop(entity, None)
        self._client_quotas = MappingProxyType(current)

    def alter_client_quotas(
        self, changes: Mapping[ClientQuotaEntity, Mapping[str, float | None]]
    ) -> None:
        """Durably set (a value) or remove (None) quota keys of each entity;
        validated by the caller. :attr:`client_quotas` follows once this returns."""
        raise KafkaError("this metadata store keeps no client quotas")

    # ------------------------------------------------------------------ dynamic broker configs

    #: The dynamic broker config layers: ``<default>`` or a broker id -> key -> value.
    _broker_configs: Mapping[str, Mapping[str, str]] = MappingProxyType({})

    def broker_config(self, entity: str) -> dict[str, str]:
        """The dynamic config of ``entity`` (``<default>``: every broker; a broker
        id: that broker alone), as ``/config/brokers/<entity>`` holds it."""
        return dict(self._broker_configs.get(entity, {}))

    def set_broker_config(self, entity: str, configs: Mapping[str, str]) -> None:
        """Durably replace ``entity``'s dynamic broker config; validated by the
        caller. Every broker's broker-config listeners hear it."""
        raise KafkaError("this metadata store keeps no dynamic broker configs")

    def add_broker_config_listener(self, listener: BrokerConfigListener) -> None:
        """Call ``listener(entity, configs)`` with each broker entity's whole
        dynamic config once a change to it is durable, wherever it was made."""
        listeners: list[BrokerConfigListener] | None = getattr(
            self, "_broker_config_listeners", None
        )
        if listeners is None:
            listeners = []
            self._broker_config_listeners: list[BrokerConfigListener] = listeners
        listeners.append(listener)

    # ------------------------------------------------------------------ group configs

    #: Per-group overrides (KIP-848 / KIP-932 GroupConfig): group id -> key -> value.
    _group_configs: Mapping[str, Mapping[str, str]] = MappingProxyType({})

    def group_config(self, group_id: str) -> dict[str, str]:
        """The overrides of ``group_id`` (IncrementalAlterConfigs on a GROUP
        resource), as ``/config/groups/<group>`` holds them on ZooKeeper."""
        return dict(self._group_configs.get(group_id, {}))

    def set_group_config(self, group_id: str, configs: Mapping[str, str]) -> None:
        """Durably replace ``group_id``'s overrides; validated by the caller."""
        raise KafkaError("this metadata store keeps no group configs")

    def _put_group_config(self, group_id: str, configs: Mapping[str, str]) -> None:
        current = dict(self._group_configs)
        if configs:
            current[group_id] = MappingProxyType(dict(configs))
        else:
            current.pop(group_id, None)
        self._group_configs = MappingProxyType(current)

    # ------------------------------------------------------------------ client-metrics

    #: KIP-714's client metrics subscriptions (the CLIENT_METRICS config
    #: resource): subscription name -> key -> value.
    _client_metrics_configs: Mapping[str, Mapping[str, str]] = MappingProxyType({})

    def client_metrics_configs(self) -> dict[str, dict[str, str]]:
        """Every client metrics subscription, as ``/config/client-metrics/<name>``
        holds them on ZooKeeper (Kafka's ConfigType.ClientMetrics)."""
        return {n: dict(c) for n, c in self._client_metrics_configs.items()}

    def set_client_metrics_config(self, name: str, configs: Mapping[str, str]) -> None:
        """Durably replace subscription ``name`` (none left: removed);
        validated by the caller. Every broker's listeners hear it."""
        raise KafkaError("this metadata store keeps no client metrics subscriptions")

    def add_client_metrics_listener(self, listener: BrokerConfigListener) -> None:
        """Call ``listener(name, configs)`` with each subscription's whole config
        once a change to it is durable, wherever it was made."""
        listeners: list[BrokerConfigListener] | None = getattr(
            self, "_client_metrics_listeners", None
        )
        if listeners is None:
            listeners = []
            self._client_metrics_listeners: list[BrokerConfigListener] = listeners
        listeners.append(listener)

    def _put_client_metrics_config(self, name: str, configs: Mapping[str, str]) -> None:
        current = dict(self._client_metrics_configs)
        if configs:
            current[name] = MappingProxyType(dict(configs))
        else:
            current.pop(name, None)
        self._client_metrics_configs = MappingProxyType(current)
        for listener in list(getattr(self, "_client_metrics_listeners", [])):
            listener(name, dict(configs))

    def _put_broker_config(self, entity: str, configs: Mapping[str, str]) -> None:
        current = dict(self._broker_configs)
        if configs:
            current[entity] = MappingProxyType(dict(configs))
        else:
            current.pop(entity, None)
        self._broker_configs = MappingProxyType(current)
        for listener in list(getattr(self, "_broker_config_listeners", [])):
            listener(entity, dict(configs))

    # ------------------------------------------------------------------ finalized features

    #: What the store holds of the finalized features (KIP-584): ``/feature``
    #: on a ZooKeeper cluster, the document on a lone broker. Nothing stored
    #: (epoch -1): the brokers run each feature at its default.
    _finalized_features: FinalizedFeatures = FinalizedFeatures(True, {}, -1)
    #: Per feature, the highest level every registered broker supports (None:
    #: this store knows of no other broker, as on a lone broker).
    _feature_support: Mapping[str, int] | None = None

    def finalized_features(self) -> FinalizedFeatures:
        return self._finalized_features

    def feature_support(self) -> Mapping[str, int] | None:
        return self._feature_support

    def update_finalized_features(self, features: Mapping[str, int]) -> FinalizedFeatures:
        """Durably replace the finalized feature levels (validated by the
        caller: Kafka's UpdateFeatures); returns what is stored now."""
        raise KafkaError("this metadata store keeps no finalized features")

    def close(self) -> None:  # noqa: B027 - a store with a connection overrides it
        """Release what the store holds (a connection); nothing for a file."""
