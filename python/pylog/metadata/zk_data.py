"""ZkData: the znodes a ZooKeeper-mode Kafka cluster keeps, their paths and
their JSON, in Kafka's layout (Kafka's ``kafka.zk.ZkData``), so Kafka's tools
(``zookeeper-shell``, ``kafka-topics --zookeeper`` of old, the admin scripts)
and anyone who knows Kafka can read a pylog cluster's ZooKeeper.

One small class per znode: ``path(...)`` builds its path, ``encode(...)``
gives the bytes pylog writes and ``decode(bytes)`` reads what pylog *or Kafka*
wrote (older versions and unknown fields are accepted). JSON is written
compactly, with the field names and value types Kafka uses — note the places
where Kafka writes a number as a string (``/cluster/id``'s version, the
controller's and a broker's timestamp, the producer-id block bounds).

The layout (docs/cluster.md has it with examples)::

    /cluster/id                                   {"version":"1","id":"<base64 uuid>"}
    /controller                        ephemeral  {"version":1,"brokerid":1,"timestamp":"<ms>"}
    /controller_epoch                             "<int>"
    /brokers/ids/<id>                  ephemeral  version 5 (czxid = broker epoch)
    /brokers/topics/<topic>                       version 3: partitions → replicas, topic_id
    /brokers/topics/<topic>/partitions/<p>/state  version 1: leader, leader_epoch, isr,
                                                  controller_epoch
    /brokers/seqid                                broker.id generation (znode version)
    /admin/delete_topics/<topic>                  empty: a deletion request
    /admin/reassign_partitions                    a reassignment request (KIP-455 replaced it)
    /admin/preferred_replica_election             a preferred-leader election request
    /isr_change_notification/isr_change_<seq>     {"version":1,"partitions":[{"topic","partition"}]}
    /log_dir_event_notification/log_dir_event_<seq>
    /config/<entity type>/<name>                  {"version":1,"config":{...}}
    /config/changes/config_change_<seq>           {"version":2,"entity_path":"topics/<topic>"}
    /latest_producer_id_block                     {"version":1,"broker":..,
                                                   "block_start":"..","block_end":".."}
    /feature                                      {"version":2,"status":1,"features":
                                                   {"<name>":{"max_version_level":L}}}
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pylog.security.pattern_type import PatternType
from pylog.security.resource_pattern import ResourcePattern
from pylog.security.resource_type import ResourceType

__all__ = [
    "PERSISTENT_ZK_PATHS",
    "AdminZNode",
    "BrokerIdZNode",
    "BrokerIdsZNode",
    "BrokerInfo",
    "BrokerSequenceIdZNode",
    "BrokersZNode",
    "ClusterIdZNode",
    "ConfigEntityChangeNotificationZNode",
    "ConfigEntityTypeZNode",
    "ConfigEntityZNode",
    "ControllerEpochZNode",
    "ControllerZNode",
    "DeleteTopicsTopicZNode",
    "DeleteTopicsZNode",
    "EndPointInfo",
    "FeatureZNode",
    "FinalizedFeatures",
    "IsrChangeNotificationZNode",
    "LeaderAndIsr",
    "LogDirEventNotificationZNode",
    "PreferredReplicaElectionZNode",
    "ProducerIdBlock",
    "ProducerIdBlockZNode",
    "ReassignPartitionsZNode",
    "TopicPartitionStateZNode",
    "TopicPartitionZNode",
    "TopicPartitionsZNode",
    "TopicReplicaAssignment",
    "TopicZNode",
    "TopicsZNode",
    "ZkAclStore",
    "ZkDataError",
]


class ZkDataError(ValueError):
    """A znode's bytes are not the JSON its path should hold."""


def _dumps(doc: Mapping[str, Any]) -> bytes:
    # Compact, as Kafka's Json.encodeAsBytes writes.
    return json.dumps(doc, separators=(",", ":")).encode("utf-8")


def _loads(path: str, data: bytes | None) -> dict[str, Any]:
    if not data:
        raise ZkDataError(f"{path}: empty znode")
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ZkDataError(f"{path}: not JSON: {e}") from e
    if not isinstance(doc, dict):
        raise ZkDataError(f"{path}: a JSON object expected, got {type(doc).__name__}")
    return doc


def _int(path: str, doc: Mapping[str, Any], key: str, default: int | None = None) -> int:
    value = doc.get(key, default)
    if value is None:
        raise ZkDataError(f"{path}: no {key!r}")
    try:
        return int(value)  # Kafka writes some numbers as strings
    except (TypeError, ValueError) as e:
        raise ZkDataError(f"{path}: {key!r} is not an integer: {value!r}") from e


def _int_list(path: str, value: object) -> list[int]:
    if not isinstance(value, list):
        raise ZkDataError(f"{path}: a list of broker ids expected, got {value!r}")
    try:
        return [int(v) for v in value]
    except (TypeError, ValueError) as e:
        raise ZkDataError(f"{path}: a list of broker ids expected, got {value!r}") from e


def _now_ms() -> int:
    return int(time.time() * 1000)


# ---------------------------------------------------------------- cluster id


class ClusterIdZNode:
    """``/cluster/id``: the cluster's id, created once by the first broker."""

    @staticmethod
    def path() -> str:
        return "/cluster/id"

    @staticmethod
    def encode(cluster_id: str) -> bytes:
        return _dumps({"version": "1", "id": cluster_id})  # version is a string here

    @staticmethod
    def decode(data: bytes) -> str:
        doc = _loads("/cluster/id", data)
        cid = doc.get("id")
        if not isinstance(cid, str) or not cid:
            raise ZkDataError(f"/cluster/id: no cluster id in {doc!r}")
        return cid


# ---------------------------------------------------------------- controller


class ControllerZNode:
    """``/controller`` (ephemeral): the broker that won the controller election."""

    @staticmethod
    def path() -> str:
        return "/controller"

    @staticmethod
    def encode(broker_id: int, timestamp_ms: int | None = None) -> bytes:
        ts = _now_ms() if timestamp_ms is None else timestamp_ms
        return _dumps({"version": 1, "brokerid": broker_id, "timestamp": str(ts)})

    @staticmethod
    def decode(data: bytes) -> int:
        """The controller's broker id."""
        return _int("/controller", _loads("/controller", data), "brokerid")


class ControllerEpochZNode:
    """``/controller_epoch``: a bare integer, raised by each new controller with
    a write conditional on the znode version (the fencing of a zombie controller)."""

    @staticmethod
    def path() -> str:
        return "/controller_epoch"

    @staticmethod
    def encode(epoch: int) -> bytes:
        return str(epoch).encode("ascii")

    @staticmethod
    def decode(data: bytes) -> int:
        try:
            return int(data.decode("ascii").strip())
        except (UnicodeDecodeError, ValueError) as e:
            raise ZkDataError(f"/controller_epoch: not an integer: {data!r}") from e


# ---------------------------------------------------------------- brokers


class BrokersZNode:
    @staticmethod
    def path() -> str:
        return "/brokers"


@dataclass(frozen=True)
class EndPointInfo:
    """One advertised listener as a broker registers it."""

    listener_name: str
    host: str
    port: int
    security_protocol: str

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener_name}://{host}:{self.port}"


@dataclass(frozen=True)
class BrokerInfo:
    """A live broker's registration. ``epoch`` is the czxid of its znode (Kafka's
    broker epoch, KIP-380): a new session's registration gets a larger one, so
    requests from an older incarnation can be fenced. -1 before it is read."""

    id: int
    endpoints: tuple[EndPointInfo, ...]
    rack: str | None = None
    jmx_port: int = -1
    timestamp_ms: int = 0
    features: dict[str, tuple[int, int]] = field(default_factory=dict)
    epoch: int = -1

    def endpoint(self, listener_name: str) -> EndPointInfo | None:
        for ep in self.endpoints:
            if ep.listener_name == listener_name:
                return ep
        return None


class BrokerIdsZNode:
    @staticmethod
    def path() -> str:
        return "/brokers/ids"


class BrokerIdZNode:
    """``/brokers/ids/<id>`` (ephemeral), version 5 (Kafka 2.7+, KIP-584 features).

    ``host``/``port`` are the PLAINTEXT endpoint's, for clients from before
    version 2 of the format (null/-1 without a PLAINTEXT listener); ``endpoints``
    are ``LISTENER://host:port`` and ``listener_security_protocol_map`` maps each
    listener name to its protocol; ``rack`` is written only when set."""

    VERSION = 5

    @staticmethod
    def path(broker_id: int) -> str:
        return f"/brokers/ids/{broker_id}"

    @staticmethod
    def encode(info: BrokerInfo) -> bytes:
        plaintext = next((ep for ep in info.endpoints if ep.security_protocol == "PLAINTEXT"), None)
        doc: dict[str, Any] = {
            "features": {
                name: {"min_version": lo, "max_version": hi}
                for name, (lo, hi) in sorted(info.features.items())
            },
            "listener_security_protocol_map": {
                ep.listener_name: ep.security_protocol for ep in info.endpoints
            },
            "endpoints": [str(ep) for ep in info.endpoints],
            "jmx_port": info.jmx_port,
            "host": plaintext.host if plaintext else None,
            "timestamp": str(info.timestamp_ms or _now_ms()),
            "port": plaintext.port if plaintext else -1,
            "version": BrokerIdZNode.VERSION,
        }
        if info.rack is not None:
            doc["rack"] = info.rack
        return _dumps(doc)

    @staticmethod
    def decode(broker_id: int, data: bytes, czxid: int = -1) -> BrokerInfo:
        """Versions 1 to 5; ``czxid`` (the znode's) becomes the broker epoch."""
        path = BrokerIdZNode.path(broker_id)
        doc = _loads(path, data)
        version = _int(path, doc, "version", 1)
        endpoints: list[EndPointInfo] = []
        if version >= 2 and "endpoints" in doc:
            pmap = doc.get("listener_security_protocol_map") or {}
            for raw in doc["endpoints"]:
                endpoints.append(_parse_endpoint(path, str(raw), pmap))
        elif doc.get("host") is not None:
            endpoints.append(
                EndPointInfo("PLAINTEXT", str(doc["host"]), _int(path, doc, "port"), "PLAINTEXT")
            )
        features: dict[str, tuple[int, int]] = {}
        for name, rng in (doc.get("features") or {}).items():
            if isinstance(rng, dict):
                features[str(name)] = (
                    _int(path, rng, "min_version"),
                    _int(path, rng, "max_version"),
                )
        rack = doc.get("rack")
        return BrokerInfo(
            id=broker_id,
            endpoints=tuple(endpoints),
            rack=str(rack) if rack is not None else None,
            jmx_port=_int(path, doc, "jmx_port", -1),
            timestamp_ms=_int(path, doc, "timestamp", 0),
            features=features,
            epoch=czxid,
        )


def _parse_endpoint(path: str, raw: str, pmap: Mapping[str, Any]) -> EndPointInfo:
    name, sep, rest = raw.partition("://")
    host, colon, port = rest.rpartition(":")
    if not sep or not colon:
        raise ZkDataError(f"{path}: endpoint {raw!r} is not LISTENER://host:port")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        port_no = int(port)
    except ValueError as e:
        raise ZkDataError(f"{path}: endpoint {raw!r} has no port number") from e
    # Before listener names existed the name was the protocol.
    return EndPointInfo(name, host, port_no, str(pmap.get(name, name)))


class BrokerSequenceIdZNode:
    """``/brokers/seqid``: its znode version drives ``broker.id.generation.enable``."""

    @staticmethod
    def path() -> str:
        return "/brokers/seqid"


# ---------------------------------------------------------------- topics


class TopicsZNode:
    @staticmethod
    def path() -> str:
        return "/brokers/topics"


@dataclass(frozen=True)
class TopicReplicaAssignment:
    """``/brokers/topics/<topic>``: partition → replicas (the first is the
    preferred leader), the topic id, and a reassignment in flight (KIP-455)."""

    topic_id: str | None
    partitions: dict[int, list[int]]
    adding_replicas: dict[int, list[int]] = field(default_factory=dict)
    removing_replicas: dict[int, list[int]] = field(default_factory=dict)

    @property
    def replication_factor(self) -> int:
        return len(self.partitions[0]) if self.partitions else 0


class TopicZNode:
    """``/brokers/topics/<topic>``, version 3 (Kafka 2.8+, with the topic id)."""

    VERSION = 3

    @staticmethod
    def path(topic: str) -> str:
        return f"/brokers/topics/{topic}"

    @staticmethod
    def encode(assignment: TopicReplicaAssignment) -> bytes:
        def by_partition(m: Mapping[int, Sequence[int]]) -> dict[str, list[int]]:
            return {str(p): list(r) for p, r in sorted(m.items())}

        doc: dict[str, Any] = {
            "partitions": by_partition(assignment.partitions),
            "adding_replicas": by_partition(assignment.adding_replicas),
            "removing_replicas": by_partition(assignment.removing_replicas),
            "version": TopicZNode.VERSION,
        }
        if assignment.topic_id is not None:
            doc["topic_id"] = assignment.topic_id
        return _dumps(doc)

    @staticmethod
    def decode(topic: str, data: bytes) -> TopicReplicaAssignment:
        """Versions 1 to 3 (no topic id before 3, no reassignment fields before 2)."""
        path = TopicZNode.path(topic)
        doc = _loads(path, data)

        def by_partition(key: str) -> dict[int, list[int]]:
            raw = doc.get(key) or {}
            if not isinstance(raw, dict):
                raise ZkDataError(f"{path}: {key!r} is not an object")
            try:
                return {int(p): _int_list(path, r) for p, r in raw.items()}
            except ValueError as e:
                raise ZkDataError(f"{path}: {key!r} has a partition that is not a number") from e

        if "partitions" not in doc:
            raise ZkDataError(f"{path}: no 'partitions'")
        topic_id = doc.get("topic_id")
        return TopicReplicaAssignment(
            topic_id=str(topic_id) if topic_id is not None else None,
            partitions=by_partition("partitions"),
            adding_replicas=by_partition("adding_replicas"),
            removing_replicas=by_partition("removing_replicas"),
        )


class TopicPartitionsZNode:
    @staticmethod
    def path(topic: str) -> str:
        return f"{TopicZNode.path(topic)}/partitions"


class TopicPartitionZNode:
    @staticmethod
    def path(topic: str, partition: int) -> str:
        return f"{TopicPartitionsZNode.path(topic)}/{partition}"


@dataclass(frozen=True)
class LeaderAndIsr:
    """A partition's leader, leader epoch, ISR and the epoch of the controller
    that wrote it. ``leader_recovery_state`` is KIP-704's (0 recovered, 1
    recovering after an unclean election). ``zk_version`` is the znode version
    it was read at (-1: not read from ZooKeeper), the condition for the next write."""

    leader: int
    leader_epoch: int
    isr: list[int]
    controller_epoch: int
    leader_recovery_state: int = 0
    zk_version: int = -1


class TopicPartitionStateZNode:
    """``/brokers/topics/<topic>/partitions/<p>/state``, version 1."""

    @staticmethod
    def path(topic: str, partition: int) -> str:
        return f"{TopicPartitionZNode.path(topic, partition)}/state"

    @staticmethod
    def encode(state: LeaderAndIsr) -> bytes:
        doc: dict[str, Any] = {
            "controller_epoch": state.controller_epoch,
            "leader": state.leader,
            "version": 1,
            "leader_epoch": state.leader_epoch,
            "isr": list(state.isr),
        }
        if state.leader_recovery_state:  # written only while recovering, as Kafka
            doc["leader_recovery_state"] = state.leader_recovery_state
        return _dumps(doc)

    @staticmethod
    def decode(topic: str, partition: int, data: bytes, zk_version: int = -1) -> LeaderAndIsr:
        path = TopicPartitionStateZNode.path(topic, partition)
        doc = _loads(path, data)
        return LeaderAndIsr(
            leader=_int(path, doc, "leader"),
            leader_epoch=_int(path, doc, "leader_epoch"),
            isr=_int_list(path, doc.get("isr")),
            controller_epoch=_int(path, doc, "controller_epoch"),
            leader_recovery_state=_int(path, doc, "leader_recovery_state", 0),
            zk_version=zk_version,
        )


# ---------------------------------------------------------------- admin


class AdminZNode:
    @staticmethod
    def path() -> str:
        return "/admin"


class DeleteTopicsZNode:
    @staticmethod
    def path() -> str:
        return "/admin/delete_topics"


class DeleteTopicsTopicZNode:
    """``/admin/delete_topics/<topic>``: the request to delete a topic (empty);
    the controller deletes the topic's znodes, then this one."""

    @staticmethod
    def path(topic: str) -> str:
        return f"{DeleteTopicsZNode.path()}/{topic}"


class ReassignPartitionsZNode:
    """``/admin/reassign_partitions``: target replicas per partition, the
    ZooKeeper-era reassignment request; the controller starts them and takes
    each partition out as it completes (the znode goes with the last)."""

    VERSION = 1

    @staticmethod
    def path() -> str:
        return "/admin/reassign_partitions"

    @staticmethod
    def encode(reassignments: Mapping[tuple[str, int], Sequence[int]]) -> bytes:
        return _dumps(
            {
                "version": ReassignPartitionsZNode.VERSION,
                "partitions": [
                    {"topic": t, "partition": p, "replicas": list(r)}
                    for (t, p), r in sorted(reassignments.items())
                ],
            }
        )

    @staticmethod
    def decode(data: bytes) -> dict[tuple[str, int], list[int]]:
        path = ReassignPartitionsZNode.path()
        doc = _loads(path, data)
        out: dict[tuple[str, int], list[int]] = {}
        for entry in doc.get("partitions") or []:
            if not isinstance(entry, dict) or "topic" not in entry:
                raise ZkDataError(f"{path}: bad partition entry {entry!r}")
            key = (str(entry["topic"]), _int(path, entry, "partition"))
            out[key] = _int_list(path, entry.get("replicas"))
        return out


class PreferredReplicaElectionZNode:
    """``/admin/preferred_replica_election``: partitions whose preferred
    replica should lead (the ZooKeeper-era tool's request); the controller
    elects them, then deletes the znode."""

    @staticmethod
    def path() -> str:
        return "/admin/preferred_replica_election"

    @staticmethod
    def encode(partitions: Sequence[tuple[str, int]]) -> bytes:
        return IsrChangeNotificationZNode.encode(partitions)

    @staticmethod
    def decode(data: bytes) -> list[tuple[str, int]]:
        path = PreferredReplicaElectionZNode.path()
        doc = _loads(path, data)
        out = []
        for entry in doc.get("partitions") or []:
            if not isinstance(entry, dict) or "topic" not in entry:
                raise ZkDataError(f"{path}: bad partition entry {entry!r}")
            out.append((str(entry["topic"]), _int(path, entry, "partition")))
        return out


# ---------------------------------------------------------------- notifications


def _sequence_number(path: str, name: str, prefix: str) -> int:
    if not name.startswith(prefix):
        raise ZkDataError(f"{path}/{name}: not a {prefix}<sequence> znode")
    try:
        return int(name[len(prefix) :])
    except ValueError as e:
        raise ZkDataError(f"{path}/{name}: not a {prefix}<sequence> znode") from e


class IsrChangeNotificationZNode:
    """``/isr_change_notification/isr_change_<seq>`` (persistent sequential): a
    leader tells the controller which partitions' ISR it changed, so the
    controller can send UpdateMetadata to every broker."""

    PREFIX = "isr_change_"

    @staticmethod
    def parent() -> str:
        return "/isr_change_notification"

    @staticmethod
    def path_prefix() -> str:
        return f"{IsrChangeNotificationZNode.parent()}/{IsrChangeNotificationZNode.PREFIX}"

    @staticmethod
    def path(sequence: str | int) -> str:
        seq = f"{sequence:010d}" if isinstance(sequence, int) else sequence
        return IsrChangeNotificationZNode.path_prefix() + seq

    @staticmethod
    def sequence_number(name: str) -> int:
        return _sequence_number(
            IsrChangeNotificationZNode.parent(), name, IsrChangeNotificationZNode.PREFIX
        )

    @staticmethod
    def encode(partitions: Sequence[tuple[str, int]]) -> bytes:
        return _dumps(
            {
                "version": 1,
                "partitions": [{"topic": t, "partition": p} for t, p in partitions],
            }
        )

    @staticmethod
    def decode(data: bytes) -> list[tuple[str, int]]:
        path = IsrChangeNotificationZNode.parent()
        doc = _loads(path, data)
        out = []
        for entry in doc.get("partitions") or []:
            if not isinstance(entry, dict) or "topic" not in entry:
                raise ZkDataError(f"{path}: bad partition entry {entry!r}")
            out.append((str(entry["topic"]), _int(path, entry, "partition")))
        return out


class LogDirEventNotificationZNode:
    """``/log_dir_event_notification/log_dir_event_<seq>``: a broker lost a log dir."""

    PREFIX = "log_dir_event_"

    @staticmethod
    def parent() -> str:
        return "/log_dir_event_notification"

    #: Kafka's LogDirFailure event (the only one it defines)
    LOG_DIR_FAILURE_EVENT = 1

    @staticmethod
    def path_prefix() -> str:
        return f"{LogDirEventNotificationZNode.parent()}/{LogDirEventNotificationZNode.PREFIX}"

    @staticmethod
    def sequence_number(name: str) -> int:
        return _sequence_number(
            LogDirEventNotificationZNode.parent(), name, LogDirEventNotificationZNode.PREFIX
        )

    @staticmethod
    def encode(broker_id: int) -> bytes:
        return _dumps({"version": 1, "broker": broker_id, "event": 1})

    @staticmethod
    def decode(data: bytes) -> int:
        path = LogDirEventNotificationZNode.parent()
        return _int(path, _loads(path, data), "broker")


# ---------------------------------------------------------------- configs


class ConfigEntityTypeZNode:
    """``/config/<type>``: ``topics``, ``brokers``, ``clients``, ``users``, ``ips``."""

    TYPES = ("topics", "clients", "users", "brokers", "ips")

    @staticmethod
    def path(entity_type: str) -> str:
        return f"/config/{entity_type}"


class ConfigEntityZNode:
    """``/config/<type>/<name>``: an entity's dynamic config overrides (a topic's
    overrides are ``/config/topics/<topic>``), version 1, values as strings."""

    @staticmethod
    def path(entity_type: str, entity_name: str) -> str:
        return f"{ConfigEntityTypeZNode.path(entity_type)}/{entity_name}"

    @staticmethod
    def encode(config: Mapping[str, str]) -> bytes:
        return _dumps({"version": 1, "config": {k: str(v) for k, v in config.items()}})

    @staticmethod
    def decode(data: bytes | None) -> dict[str, str]:
        if not data:  # Kafka treats an empty node as no overrides
            return {}
        doc = _loads("/config", data)
        raw = doc.get("config") or {}
        if not isinstance(raw, dict):
            raise ZkDataError(f"/config: 'config' is not an object: {raw!r}")
        return {str(k): str(v) for k, v in raw.items()}


class ConfigEntityChangeNotificationZNode:
    """``/config/changes/config_change_<seq>`` (persistent sequential): tells
    every broker that ``/config/<entity_path>`` changed. Version 2 carries the
    entity path (``topics/<topic>``, ``clients/<id>``, ``users/<u>/clients/<id>``)."""

    PREFIX = "config_change_"

    @staticmethod
    def parent() -> str:
        return "/config/changes"

    @staticmethod
    def path_prefix() -> str:
        return (
            f"{ConfigEntityChangeNotificationZNode.parent()}/"
            f"{ConfigEntityChangeNotificationZNode.PREFIX}"
        )

    @staticmethod
    def sequence_number(name: str) -> int:
        return _sequence_number(
            ConfigEntityChangeNotificationZNode.parent(),
            name,
            ConfigEntityChangeNotificationZNode.PREFIX,
        )

    @staticmethod
    def encode(entity_type: str, entity_name: str) -> bytes:
        return _dumps({"version": 2, "entity_path": f"{entity_type}/{entity_name}"})

    @staticmethod
    def decode(data: bytes) -> tuple[str, str]:
        """(entity type, entity name); version 1 (``entity_type``, ``entity_name``) too."""
        path = ConfigEntityChangeNotificationZNode.parent()
        doc = _loads(path, data)
        if _int(path, doc, "version", 1) >= 2:
            entity_path = str(doc.get("entity_path", ""))
            etype, sep, name = entity_path.partition("/")
            if not sep:
                raise ZkDataError(f"{path}: bad entity_path {entity_path!r}")
            return etype, name
        return str(doc.get("entity_type", "")), str(doc.get("entity_name", ""))


# ---------------------------------------------------------------- producer ids


@dataclass(frozen=True)
class ProducerIdBlock:
    """A block of producer ids owned by one broker; ``last`` is inclusive."""

    broker_id: int
    first: int
    size: int

    @property
    def last(self) -> int:
        return self.first + self.size - 1


class ProducerIdBlockZNode:
    """``/latest_producer_id_block``: the last block handed out, replaced with a
    write conditional on its znode version, so two brokers never get the same
    block. The bounds are strings (a long in JSON), ``block_end`` inclusive."""

    @staticmethod
    def path() -> str:
        return "/latest_producer_id_block"

    @staticmethod
    def encode(block: ProducerIdBlock) -> bytes:
        return _dumps(
            {
                "version": 1,
                "broker": block.broker_id,
                "block_start": str(block.first),
                "block_end": str(block.last),
            }
        )

    @staticmethod
    def decode(data: bytes) -> ProducerIdBlock:
        path = ProducerIdBlockZNode.path()
        doc = _loads(path, data)
        first = _int(path, doc, "block_start")
        last = _int(path, doc, "block_end")
        return ProducerIdBlock(_int(path, doc, "broker"), first, last - first + 1)


# ---------------------------------------------------------------- ACLs


class ZkAclStore:
    """Where ACLs live (Kafka's ZkAclStore): LITERAL patterns under
    ``/kafka-acl/<ResourceType>/<name>``, PREFIXED under
    ``/kafka-acl-extended/prefixed/<ResourceType>/<name>``; each znode holds
    the pattern's entries (:func:`~pylog.security.acl_entry.encode_acls`).
    A change to one is announced by a persistent sequential
    ``acl_changes_<seq>`` under ``/kafka-acl-changes`` (LITERAL: the text
    ``TOPIC:name``) or ``/kafka-acl-extended-changes`` (JSON naming the
    pattern), which every broker watches to refresh its cache."""

    LITERAL_PATH = "/kafka-acl"
    EXTENDED_PATH = "/kafka-acl-extended"
    LITERAL_CHANGES = "/kafka-acl-changes"
    EXTENDED_CHANGES = "/kafka-acl-extended-changes"
    CHANGE_PREFIX = "acl_changes_"

    @staticmethod
    def acl_path(pattern_type: PatternType) -> str:
        if pattern_type == PatternType.LITERAL:
            return ZkAclStore.LITERAL_PATH
        return f"{ZkAclStore.EXTENDED_PATH}/{pattern_type.name.lower()}"

    @staticmethod
    def path(pattern: ResourcePattern) -> str:
        return (
            f"{ZkAclStore.acl_path(pattern.pattern_type)}/"
            f"{pattern.resource_type.acl_name}/{pattern.name}"
        )

    @staticmethod
    def change_path(pattern_type: PatternType) -> str:
        if pattern_type == PatternType.LITERAL:
            return ZkAclStore.LITERAL_CHANGES
        return ZkAclStore.EXTENDED_CHANGES

    @staticmethod
    def sequence_number(parent: str, name: str) -> int:
        return _sequence_number(parent, name, ZkAclStore.CHANGE_PREFIX)

    @staticmethod
    def encode_change(pattern: ResourcePattern) -> bytes:
        if pattern.pattern_type == PatternType.LITERAL:
            return f"{pattern.resource_type.name}:{pattern.name}".encode()
        return _dumps(
            {
                "version": 1,
                "resourceType": pattern.resource_type.name,
                "name": pattern.name,
                "patternType": pattern.pattern_type.name,
            }
        )

    @staticmethod
    def decode_change(parent: str, data: bytes) -> ResourcePattern:
        try:
            if parent == ZkAclStore.LITERAL_CHANGES:
                rtype, sep, name = data.decode().partition(":")
                if not sep:
                    raise ValueError("expected ResourceType:name")
                return ResourcePattern(ResourceType.parse(rtype), name, PatternType.LITERAL)
            doc = _loads(parent, data)
            if _int(parent, doc, "version", 1) > 1:
                raise ValueError(f"unsupported version {doc.get('version')!r}")
            return ResourcePattern(
                ResourceType.parse(str(doc["resourceType"])),
                str(doc["name"]),
                PatternType.parse(str(doc["patternType"])),
            )
        except (ValueError, KeyError, UnicodeDecodeError) as e:
            raise ZkDataError(f"{parent}: unreadable ACL change notification ({e})") from e


# ---------------------------------------------------------------- start-up


#: The persistent znodes every broker makes sure exist at start (Kafka's
#: ZkData.PersistentZkPaths), so watches on their children can be set.
@dataclass(frozen=True)
class FinalizedFeatures:
    """What ``/feature`` holds: whether versioning is enabled (status 1) and
    each finalized feature's level; ``epoch`` is the znode's version (KIP-584:
    the finalized features epoch ApiVersions answers)."""

    enabled: bool
    features: dict[str, int]
    epoch: int = -1


class FeatureZNode:
    """``/feature`` (KIP-584, Kafka's ``FeatureZNode``): the cluster-wide
    finalized feature levels of a ZooKeeper-mode cluster. Version 2 (Kafka
    3.3+) keeps only ``max_version_level`` per feature; version 1 also had
    ``min_version_level``. Status 1 is Enabled, 0 Disabled (the features are
    then to be ignored)."""

    VERSION = 2
    ENABLED = 1

    @staticmethod
    def path() -> str:
        return "/feature"

    @staticmethod
    def encode(features: Mapping[str, int]) -> bytes:
        return _dumps(
            {
                "version": FeatureZNode.VERSION,
                "status": FeatureZNode.ENABLED,
                "features": {
                    name: {"max_version_level": level} for name, level in sorted(features.items())
                },
            }
        )

    @staticmethod
    def decode(data: bytes, epoch: int = -1) -> FinalizedFeatures:
        path = FeatureZNode.path()
        doc = _loads(path, data)
        enabled = _int(path, doc, "status", 0) == FeatureZNode.ENABLED
        features: dict[str, int] = {}
        for name, levels in (doc.get("features") or {}).items():
            if not isinstance(levels, dict):
                raise ZkDataError(f"{path}: feature {name!r} has no levels")
            features[str(name)] = _int(path, levels, "max_version_level")
        return FinalizedFeatures(enabled, features if enabled else {}, epoch)


PERSISTENT_ZK_PATHS: tuple[str, ...] = (
    "/consumers",  # the old consumer's; kept for Kafka's tools
    BrokerIdsZNode.path(),
    TopicsZNode.path(),
    ConfigEntityChangeNotificationZNode.parent(),
    DeleteTopicsZNode.path(),
    BrokerSequenceIdZNode.path(),
    IsrChangeNotificationZNode.parent(),
    ProducerIdBlockZNode.path(),
    LogDirEventNotificationZNode.parent(),
    *(ConfigEntityTypeZNode.path(t) for t in ConfigEntityTypeZNode.TYPES),
)
