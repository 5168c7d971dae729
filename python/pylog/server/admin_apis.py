"""The admin APIs: CreateTopics, DeleteTopics, CreatePartitions, DeleteRecords,
DescribeConfigs, AlterConfigs, IncrementalAlterConfigs, DescribeCluster,
DescribeLogDirs and SaslHandshake, registered into :class:`KafkaApis`.

Each handler answers as a single Kafka broker that is also its own controller
would, error codes included. Topic changes go through the MetadataStore; its
listeners (the ReplicaManager) create, grow and delete the partitions' logs, so
a handler never touches a log directly except to read sizes and move a log
start offset (DeleteRecords, through the ReplicaManager).

Configuration, as Kafka reports it (DescribeConfigs, CreateTopics v5+):

* a topic key's value is the topic's override (source TOPIC_CONFIG), else the
  broker key that supplies its default when set in the broker's configuration
  (STATIC_BROKER_CONFIG), else the broker key's default (DEFAULT_CONFIG); the
  synonyms list those candidates in that order, broker keys with their own
  synonyms (``log.retention.ms`` / ``.minutes`` / ``.hours``, ``log.roll.ms`` /
  ``.hours``, …) each listed;
* broker keys are STATIC_BROKER_CONFIG when set, else DEFAULT_CONFIG, and are
  all read-only: pylog has no dynamic broker configuration yet.

Decision on altering broker configs: every broker key is read-only here, so an
AlterConfigs or IncrementalAlterConfigs of a BROKER resource that changes
anything answers INVALID_CONFIG ("Cannot update these configs dynamically"),
which is what Kafka answers for a broker key that is not dynamic. A broker id
other than this broker's is INVALID_REQUEST, as in Kafka.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Protocol

from pylog.errors import (
    ErrorCode,
    InvalidConfigurationError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    KafkaError,
    UnknownTopicOrPartitionError,
)
from pylog.log.checkpoint import TopicPartition
from pylog.log.config import TOPIC_CONFIG, ConfigKey, ConfigType, LogConfig
from pylog.metadata.store import MetadataStore, TopicMetadata, validate_topic_name
from pylog.protocol import ZERO_UUID, ApiKey
from pylog.server.config import ALL_BROKER_CONFIG, KafkaConfig
from pylog.server.replica_manager import ReplicaManager

__all__ = [
    "AdminApis",
    "ConfigSource",
    "ResourceType",
    "register_admin_apis",
]

_log = logging.getLogger("pylog.server.admin_apis")

# Error codes pylog.errors does not name yet.

_AUTHORIZED_OPS_NOT_REQUESTED = -(2**31)
# Without an authorizer every cluster operation is allowed (as KafkaApis' Metadata).
_CLUSTER_OPS = sum(1 << op for op in (4, 5, 7, 8, 9, 10, 11, 12))


class ResourceType:
    """ConfigResource.Type ids on the wire."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


class ConfigSource:
    """DescribeConfigs' config_source / synonym source ids."""

    UNKNOWN = 0
    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


# DescribeConfigs v3+ config_type ids.
_CONFIG_TYPE_ID = {
    ConfigType.BOOLEAN: 1,
    ConfigType.STRING: 2,
    ConfigType.INT: 3,
    ConfigType.LONG: 5,
    ConfigType.DOUBLE: 6,
    ConfigType.LIST: 7,
}

# Broker keys whose value comes from the first of several keys that is set.
_BROKER_SYNONYMS: dict[str, tuple[str, ...]] = {
    "log.roll.ms": ("log.roll.ms", "log.roll.hours"),
    "log.roll.jitter.ms": ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    "log.retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "log.flush.interval.ms": ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
}

# IncrementalAlterConfigs operations.
_SET, _DELETE, _APPEND, _SUBTRACT = 0, 1, 2, 3

Handler = Callable[[Any, Any], Awaitable[Mapping[str, Any] | None]]


class _Apis(Protocol):
    """What AdminApis needs of KafkaApis."""

    config: Any
    replica_manager: ReplicaManager
    metadata_store: MetadataStore
    broker_id: int

    def register(self, api_key: int, handler: Handler) -> None: ...


def _show(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(value)
    return str(value)


def _error(e: BaseException) -> tuple[int, str]:
    if isinstance(e, KafkaError):
        return int(e.code), str(e)
    _log.exception("admin request failed", exc_info=e)
    return int(ErrorCode.UNKNOWN_SERVER_ERROR), str(e)


def _checked_config_names(resource: Any, duplicate_resources: set[Any]) -> list[str]:
    """The config names of one AlterConfigs / IncrementalAlterConfigs resource,
    refusing (as Kafka does) a resource named twice or a key given twice."""
    if (resource.resource_type, resource.resource_name) in duplicate_resources:
        raise InvalidRequestError("Each resource must appear at most once.")
    names = [c.name for c in resource.configs]
    if repeated := _duplicates(names):
        raise InvalidRequestError(f"Duplicate config keys: {', '.join(sorted(repeated))}")
    return names


def _duplicates(names: Iterable[Any]) -> set[Any]:
    return {n for n, c in Counter(names).items() if c > 1}


class AdminApis:
    """The admin handlers of one broker. :meth:`register` wires them into KafkaApis."""

    def __init__(self, apis: _Apis, config: KafkaConfig | None = None) -> None:
        self.apis = apis
        self.config: KafkaConfig = config if config is not None else apis.config
        self.store = apis.metadata_store
        self.replica_manager = apis.replica_manager
        self.log_manager = apis.replica_manager.log_manager
        self.broker_id = apis.broker_id

    def register(self) -> None:
        a = self.apis
        a.register(ApiKey.CREATE_TOPICS, self.create_topics)
        a.register(ApiKey.DELETE_TOPICS, self.delete_topics)
        a.register(ApiKey.CREATE_PARTITIONS, self.create_partitions)
        a.register(ApiKey.DELETE_RECORDS, self.delete_records)
        a.register(ApiKey.DESCRIBE_CONFIGS, self.describe_configs)
        a.register(ApiKey.ALTER_CONFIGS, self.alter_configs)
        a.register(ApiKey.INCREMENTAL_ALTER_CONFIGS, self.incremental_alter_configs)
        a.register(ApiKey.DESCRIBE_CLUSTER, self.describe_cluster)
        a.register(ApiKey.DESCRIBE_LOG_DIRS, self.describe_log_dirs)
        a.register(ApiKey.SASL_HANDSHAKE, self.sasl_handshake)

    # ------------------------------------------------------------------ configs

    @property
    def _default_log_config(self) -> LogConfig:
        return self.config.log.default_log_config

    def _broker_synonyms(self, broker_key: str) -> list[dict[str, Any]]:
        """Kafka's synonyms of a broker key: the keys set in the broker's
        configuration (STATIC_BROKER_CONFIG), then the keys' non-null defaults
        (DEFAULT_CONFIG), each in precedence order."""
        names = _BROKER_SYNONYMS.get(broker_key, (broker_key,))
        originals = self.config.originals
        out = [
            {"name": n, "value": originals[n], "source": ConfigSource.STATIC_BROKER_CONFIG}
            for n in names
            if n in originals
        ]
        for n in names:
            key = ALL_BROKER_CONFIG.get(n)
            if key is not None and key.default is not None:
                out.append(
                    {"name": n, "value": _show(key.default), "source": ConfigSource.DEFAULT_CONFIG}
                )
        return out

    def _topic_entries(
        self,
        overrides: Mapping[str, str],
        effective: LogConfig,
        names: Iterable[str] | None,
        *,
        synonyms: bool,
        documentation: bool,
        typed: bool = True,
    ) -> list[dict[str, Any]]:
        """DescribeConfigs entries of a topic; ``typed``: the version carries
        config_type and documentation (v3+)."""
        values = effective.to_props()
        wanted = list(values) if names is None else [n for n in names if n in values]
        out = []
        for name in wanted:
            key = TOPIC_CONFIG[name]
            syn: list[dict[str, Any]] = []
            if name in overrides:
                syn.append(
                    {"name": name, "value": values[name], "source": ConfigSource.TOPIC_CONFIG}
                )
            if key.server_default is not None:
                syn.extend(self._broker_synonyms(key.server_default))
            out.append(
                {
                    "name": name,
                    "value": values[name],
                    "read_only": False,
                    "config_source": syn[0]["source"] if syn else ConfigSource.DEFAULT_CONFIG,
                    "is_sensitive": False,
                    "synonyms": syn if synonyms else [],
                    "config_type": _CONFIG_TYPE_ID.get(key.type, 0) if typed else 0,
                    "documentation": key.doc if documentation and typed else None,
                }
            )
        return out

    def _broker_entries(
        self, names: Iterable[str] | None, *, synonyms: bool, documentation: bool, typed: bool
    ) -> list[dict[str, Any]]:
        described = self.config.describe()
        wanted = list(described) if names is None else [n for n in names if n in described]
        out = []
        for name in wanted:
            key: ConfigKey = ALL_BROKER_CONFIG[name]
            syn = self._broker_synonyms(name)
            value = described[name] if self.config.get(name) is not None else None
            out.append(
                {
                    "name": name,
                    "value": value,
                    "read_only": True,
                    "config_source": syn[0]["source"] if syn else ConfigSource.DEFAULT_CONFIG,
                    "is_sensitive": False,
                    "synonyms": syn if synonyms else [],
                    "config_type": _CONFIG_TYPE_ID.get(key.type, 0) if typed else 0,
                    "documentation": key.doc if documentation and typed else None,
                }
            )
        return out

    def _validate_topic_configs(self, configs: Mapping[str, str | None]) -> LogConfig:
        """The effective config of a topic with these overrides; INVALID_CONFIG
        (InvalidConfigurationError) for an unknown name, a bad value or a null."""
        nulls = sorted(k for k, v in configs.items() if v is None)
        if nulls:
            raise InvalidConfigurationError(
                f"Null value not supported for topic configs: {', '.join(nulls)}"
            )
        return LogConfig.from_props(configs, defaults=self._default_log_config, strict=True)

    def _broker_resource_check(self, name: str, *, allow_default: bool) -> bool:
        """True for this broker, False for the cluster default (""); raises
        InvalidRequestError-like KafkaError otherwise."""
        if name == "":
            if allow_default:
                return False
        else:
            try:
                broker = int(name)
            except ValueError:
                raise InvalidRequestError(
                    f"Broker id must be an integer, but it is: {name}"
                ) from None
            if broker == self.broker_id:
                return True
        raise InvalidRequestError(
            f"Unexpected broker id, expected {self.broker_id} or empty string, but received {name}"
        )

    # ------------------------------------------------------------------ CreateTopics

    async def create_topics(self, request: Any, body: Any) -> Mapping[str, Any]:
        version = request.header.api_version
        validate_only = bool(body.get("validate_only", False))
        dupes = _duplicates(t.name for t in body.topics)
        results = []
        seen: set[str] = set()
        for t in body.topics:
            if t.name in dupes:
                if t.name in seen:
                    continue  # one answer per name, as Kafka
                seen.add(t.name)
                results.append(
                    self._create_result(
                        t.name, ErrorCode.INVALID_REQUEST, "Duplicate topic name.", version
                    )
                )
                continue
            try:
                meta, effective = self._create_topic(t, validate_only)
            except Exception as e:
                code, msg = _error(e)
                results.append(self._create_result(t.name, code, msg, version))
                continue
            result = self._create_result(t.name, ErrorCode.NONE, None, version)
            result["topic_id"] = meta.topic_id
            if version >= 5:
                result["num_partitions"] = meta.partitions
                result["replication_factor"] = meta.replication_factor
                result["configs"] = [
                    {
                        "name": e["name"],
                        "value": e["value"],
                        "read_only": e["read_only"],
                        "config_source": e["config_source"],
                        "is_sensitive": e["is_sensitive"],
                    }
                    for e in self._topic_entries(
                        meta.configs, effective, None, synonyms=False, documentation=False
                    )
                ]
            results.append(result)
        return {"throttle_time_ms": 0, "topics": results}

    @staticmethod
    def _create_result(name: str, code: int, message: str | None, version: int) -> dict[str, Any]:
        return {
            "name": name,
            "topic_id": ZERO_UUID,
            "error_code": code,
            "error_message": message,
            "num_partitions": -1,
            "replication_factor": -1,
            "configs": None,
        }

    def _create_topic(self, t: Any, validate_only: bool) -> tuple[TopicMetadata, LogConfig]:
        name: str = t.name
        validate_topic_name(name)
        num_partitions: int = t.num_partitions
        replication_factor: int = t.replication_factor
        assignments = list(t.assignments or [])
        if assignments:
            if num_partitions != -1 or replication_factor != -1:
                raise InvalidRequestError(
                    "Both numPartitions or replicationFactor and replicasAssignments were set. "
                    "Both cannot be used at the same time."
                )
            num_partitions, replication_factor = self._check_assignments(assignments)
        else:
            if num_partitions == -1:
                num_partitions = self.config.num_partitions
            elif num_partitions <= 0:
                raise InvalidPartitionsError(
                    "Number of partitions was set to an invalid non-positive value."
                )
            if replication_factor == -1:
                replication_factor = self.config.default_replication_factor
            elif replication_factor <= 0:
                raise InvalidReplicationFactorError(
                    "Replication factor must be larger than 0, or -1 to use the default value."
                )
            if replication_factor > 1:
                raise InvalidReplicationFactorError(
                    f"Unable to replicate the partition {replication_factor} time(s): the "
                    f"target replication factor of {replication_factor} cannot be reached "
                    "because only 1 broker(s) are registered."
                )
        configs: dict[str, str | None] = {}
        for c in t.configs or []:
            configs[c.name] = c.value
        effective = self._validate_topic_configs(configs)
        meta = self.store.create_topic(
            name,
            num_partitions,
            replication_factor,
            {k: v for k, v in configs.items() if v is not None},
            validate_only=validate_only,
        )
        if not validate_only:
            _log.info(
                "created topic %s (%d partitions, configs %s)", name, num_partitions, meta.configs
            )
        return meta, effective

    def _check_assignments(self, assignments: list[Any]) -> tuple[int, int]:
        """(partitions, replication factor) of an explicit replica assignment."""
        indexes = sorted(a.partition_index for a in assignments)
        if indexes != list(range(len(indexes))):
            raise InvalidReplicaAssignmentError(
                "Partitions must be numbered consecutively from 0 in the replica assignment."
            )
        factors = {len(a.broker_ids) for a in assignments}
        for a in assignments:
            if not a.broker_ids:
                raise InvalidReplicaAssignmentError(
                    f"Partition {a.partition_index} has an empty replica assignment."
                )
            if len(set(a.broker_ids)) != len(a.broker_ids):
                raise InvalidReplicaAssignmentError(
                    f"Duplicate brokers in the replica assignment of partition "
                    f"{a.partition_index}: {a.broker_ids}."
                )
            unknown = sorted(b for b in a.broker_ids if b != self.broker_id)
            if unknown:
                raise InvalidReplicaAssignmentError(
                    f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}."
                )
        if len(factors) != 1:
            raise InvalidReplicaAssignmentError(
                "All partitions must have the same replication factor in the replica assignment."
            )
        return len(indexes), factors.pop()

    # ------------------------------------------------------------------ DeleteTopics

    async def delete_topics(self, request: Any, body: Any) -> Mapping[str, Any]:
        version = request.header.api_version
        if version >= 6:
            wanted = [(t.get("name"), t.get("topic_id") or ZERO_UUID) for t in body.topics]
        else:
            wanted = [(n, ZERO_UUID) for n in body.topic_names]
        dup_names = _duplicates(n for n, i in wanted if n is not None and i == ZERO_UUID)
        dup_ids = _duplicates(i for n, i in wanted if i != ZERO_UUID)
        enabled = bool(self.config.delete_topic_enable)
        responses = []
        for name, topic_id in wanted:
            out: dict[str, Any] = {
                "name": name,
                "topic_id": topic_id,
                "error_code": ErrorCode.NONE,
                "error_message": None,
            }
            responses.append(out)
            code: int = ErrorCode.NONE
            msg: str | None = None
            if name is not None and topic_id != ZERO_UUID:
                code, msg = (
                    ErrorCode.INVALID_REQUEST,
                    "You may not specify both topic name and topic id.",
                )
            elif name is None and topic_id == ZERO_UUID:
                code, msg = ErrorCode.INVALID_REQUEST, "Neither topic name nor id were specified."
            elif name is not None and name in dup_names:
                code, msg = ErrorCode.INVALID_REQUEST, "Duplicate topic name."
            elif topic_id != ZERO_UUID and topic_id in dup_ids:
                code, msg = ErrorCode.INVALID_REQUEST, "Duplicate topic id."
            elif not enabled:
                code, msg = ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled."
            else:
                meta = (
                    self.store.topic(name) if name is not None else self.store.topic_by_id(topic_id)
                )
                if meta is None:
                    if name is not None:
                        code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                        msg = "This server does not host this topic-partition."
                    else:
                        code, msg = (
                            ErrorCode.UNKNOWN_TOPIC_ID,
                            "This server does not host this topic ID.",
                        )
                else:
                    out["name"], out["topic_id"] = meta.name, meta.topic_id
                    try:
                        self.store.delete_topic(meta.name)
                        _log.info("deleted topic %s", meta.name)
                    except Exception as e:
                        code, msg = _error(e)
            out["error_code"], out["error_message"] = int(code), msg
            if version < 6:
                out["topic_id"] = ZERO_UUID
        return {"throttle_time_ms": 0, "responses": responses}

    # ------------------------------------------------------------------ CreatePartitions

    async def create_partitions(self, request: Any, body: Any) -> Mapping[str, Any]:
        validate_only = bool(body.validate_only)
        dupes = _duplicates(t.name for t in body.topics)
        results = []
        seen: set[str] = set()
        for t in body.topics:
            if t.name in dupes:
                if t.name not in seen:
                    seen.add(t.name)
                    results.append(
                        {"name": t.name, "error_code": ErrorCode.INVALID_REQUEST,
                         "error_message": "Duplicate topic in request."}
                    )  # fmt: skip
                continue
            code: int = ErrorCode.NONE
            msg: str | None = None
            try:
                self._create_partitions(t, validate_only)
            except Exception as e:
                code, msg = _error(e)
            results.append({"name": t.name, "error_code": int(code), "error_message": msg})
        return {"throttle_time_ms": 0, "results": results}

    def _create_partitions(self, t: Any, validate_only: bool) -> None:
        meta = self.store.topic(t.name)
        if meta is None:
            raise UnknownTopicOrPartitionError(f"The topic '{t.name}' does not exist.")
        count: int = t.count
        if count < meta.partitions:
            raise InvalidPartitionsError(
                f"Topic currently has {meta.partitions} partitions, which is higher than the "
                f"requested {count}."
            )
        if count == meta.partitions:
            raise InvalidPartitionsError(f"Topic already has {meta.partitions} partitions.")
        assignments = t.assignments
        if assignments is not None:
            added = count - meta.partitions
            if len(assignments) != added:
                raise InvalidReplicaAssignmentError(
                    f"Increasing the number of partitions by {added} but {len(assignments)} "
                    "assignments provided."
                )
            for i, a in enumerate(assignments):
                unknown = sorted(b for b in a.broker_ids if b != self.broker_id)
                if unknown:
                    raise InvalidReplicaAssignmentError(
                        f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}."
                    )
                if len(a.broker_ids) != meta.replication_factor:
                    raise InvalidReplicaAssignmentError(
                        f"Inconsistent replication factor between partitions, partition 0 has "
                        f"{meta.replication_factor} while partition {meta.partitions + i} has "
                        f"{len(a.broker_ids)}."
                    )
        self.store.add_partitions(t.name, count, validate_only=validate_only)
        if not validate_only:
            _log.info("topic %s now has %d partitions", t.name, count)

    # ------------------------------------------------------------------ DeleteRecords

    async def delete_records(self, request: Any, body: Any) -> Mapping[str, Any]:
        offsets: dict[TopicPartition, int] = {}
        for t in body.topics:
            for p in t.partitions:
                offsets[TopicPartition(t.name, p.partition_index)] = p.offset
        done = self.replica_manager.delete_records(offsets)
        topics = []
        for t in body.topics:
            parts = []
            for p in t.partitions:
                code, low = done[TopicPartition(t.name, p.partition_index)]
                parts.append(
                    {"partition_index": p.partition_index, "low_watermark": low,
                     "error_code": int(code)}
                )  # fmt: skip
            topics.append({"name": t.name, "partitions": parts})
        return {"throttle_time_ms": 0, "topics": topics}

    # ------------------------------------------------------------------ DescribeConfigs

    async def describe_configs(self, request: Any, body: Any) -> Mapping[str, Any]:
        synonyms = bool(body.get("include_synonyms", False))
        documentation = bool(body.get("include_documentation", False))
        typed = request.header.api_version >= 3
        results = []
        for r in body.resources:
            rtype, rname = r.resource_type, r.resource_name
            keys = r.configuration_keys
            out: dict[str, Any] = {
                "error_code": ErrorCode.NONE,
                "error_message": None,
                "resource_type": rtype,
                "resource_name": rname,
                "configs": [],
            }
            try:
                if rtype == ResourceType.TOPIC:
                    validate_topic_name(rname)
                    meta = self.store.topic(rname)
                    if meta is None:
                        raise UnknownTopicOrPartitionError(f"The topic '{rname}' does not exist.")
                    effective = self._default_log_config.with_overrides(meta.configs)
                    out["configs"] = self._topic_entries(
                        meta.configs, effective, keys, synonyms=synonyms,
                        documentation=documentation,
                        typed=typed,
                    )  # fmt: skip
                elif rtype == ResourceType.BROKER:
                    if self._broker_resource_check(rname, allow_default=True):
                        out["configs"] = self._broker_entries(
                            keys, synonyms=synonyms, documentation=documentation, typed=typed
                        )
                    # The cluster-wide default ("") holds dynamic configs only: none here.
                else:
                    raise InvalidRequestError(
                        f"Unsupported resource type {rtype} for DescribeConfigs"
                    )
            except Exception as e:
                out["error_code"], out["error_message"] = _error(e)
                out["configs"] = []
            results.append(out)
        return {"throttle_time_ms": 0, "results": results}

    # ------------------------------------------------------------------ AlterConfigs

    async def alter_configs(self, request: Any, body: Any) -> Mapping[str, Any]:
        # Replace semantics: the request's keys become the topic's whole
        # override set (a null value is the same as absent).
        return self._alter_config_resources(
            body,
            "AlterConfigs",
            lambda meta, r: {c.name: c.value for c in r.configs if c.value is not None},
        )

    async def incremental_alter_configs(self, request: Any, body: Any) -> Mapping[str, Any]:
        def known_operations(r: Any) -> None:
            for c in r.configs:
                if c.config_operation not in (_SET, _DELETE, _APPEND, _SUBTRACT):
                    raise InvalidRequestError(
                        f"Unknown config operation {c.config_operation} for {c.name}"
                    )

        return self._alter_config_resources(
            body,
            "IncrementalAlterConfigs",
            lambda meta, r: self._apply_incremental(meta.configs, r.configs),
            precheck=known_operations,
        )

    def _alter_config_resources(
        self,
        body: Any,
        api: str,
        topic_configs: Callable[[TopicMetadata, Any], dict[str, Any]],
        precheck: Callable[[Any], None] | None = None,
    ) -> Mapping[str, Any]:
        """The per-resource loop both alter-configs APIs share: checks, the
        topic's new override set from ``topic_configs``, broker refusals, and
        one response entry per resource."""
        validate_only = bool(body.validate_only)
        dupes = _duplicates((r.resource_type, r.resource_name) for r in body.resources)
        responses = []
        for r in body.resources:
            code: int = ErrorCode.NONE
            msg: str | None = None
            try:
                names = _checked_config_names(r, dupes)
                if precheck is not None:
                    precheck(r)
                if r.resource_type == ResourceType.TOPIC:
                    meta = self._existing_topic(r.resource_name)
                    wanted = topic_configs(meta, r)
                    self._validate_topic_configs(wanted)
                    if not validate_only:
                        self.store.set_topic_config(meta.name, wanted)
                        _log.info("topic %s configs set to %s", meta.name, wanted)
                elif r.resource_type == ResourceType.BROKER:
                    self._broker_resource_check(r.resource_name, allow_default=True)
                    self._refuse_broker_changes(names)
                else:
                    raise InvalidRequestError(
                        f"Unsupported resource type {r.resource_type} for {api}"
                    )
            except Exception as e:
                code, msg = _error(e)
            responses.append(
                {"error_code": int(code), "error_message": msg,
                 "resource_type": r.resource_type, "resource_name": r.resource_name}
            )  # fmt: skip
        return {"throttle_time_ms": 0, "responses": responses}

    @staticmethod
    def _apply_incremental(current: Mapping[str, str], ops: Iterable[Any]) -> dict[str, str]:
        merged = dict(current)
        for c in ops:
            name, op, value = c.name, c.config_operation, c.value
            key = TOPIC_CONFIG.get(name)
            if key is None:
                raise InvalidConfigurationError(f"Unknown topic config name: {name}")
            if op == _SET:
                if value is None:
                    raise InvalidConfigurationError(
                        f"Null value not supported for topic configs: {name}"
                    )
                merged[name] = value
            elif op == _DELETE:
                merged.pop(name, None)
            else:
                if key.type is not ConfigType.LIST:
                    verb = "append" if op == _APPEND else "subtract"
                    raise InvalidConfigurationError(
                        f"Config value {verb} is not allowed for config key: {name}"
                    )
                base = merged.get(name)
                if base is None:
                    base = _show(key.default) or ""
                items = [v.strip() for v in base.split(",") if v.strip()]
                given = [v.strip() for v in (value or "").split(",") if v.strip()]
                if op == _APPEND:
                    items += [v for v in given if v not in items]
                else:
                    items = [v for v in items if v not in given]
                merged[name] = ",".join(items)
        return merged

    def _existing_topic(self, name: str) -> TopicMetadata:
        validate_topic_name(name)
        meta = self.store.topic(name)
        if meta is None:
            raise UnknownTopicOrPartitionError(f"The topic '{name}' does not exist.")
        return meta

    @staticmethod
    def _refuse_broker_changes(names: list[str]) -> None:
        if names:
            raise InvalidConfigurationError(
                "Cannot update these configs dynamically: "
                f"{', '.join(sorted(set(names)))} (pylog has no dynamic broker configuration; "
                "change server.properties and restart)"
            )

    # ------------------------------------------------------------------ DescribeCluster

    async def describe_cluster(self, request: Any, body: Any) -> Mapping[str, Any]:
        endpoint_type = body.get("endpoint_type", 1)
        response: dict[str, Any] = {
            "throttle_time_ms": 0,
            "error_code": ErrorCode.NONE,
            "error_message": None,
            "endpoint_type": endpoint_type,
            "cluster_id": self.store.cluster_id,
            "controller_id": self.broker_id,
            "brokers": [],
            "cluster_authorized_operations": _CLUSTER_OPS
            if body.get("include_cluster_authorized_operations")
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
        host, port = self._endpoint(request.listener)
        response["brokers"] = [
            {"broker_id": self.broker_id, "host": host, "port": port,
             "rack": self.config.get("broker.rack")}
        ]  # fmt: skip
        return response

    def _endpoint(self, listener: str) -> tuple[str, int]:
        lookup = getattr(self.apis, "broker_endpoint", None)
        if lookup is not None:
            host, port = lookup(listener)
            return str(host), int(port)
        for ep in self.config.advertised_listeners:
            if ep.listener_name == listener:
                return ep.host, ep.port
        ep = self.config.advertised_listeners[0]
        return ep.host, ep.port

    # ------------------------------------------------------------------ DescribeLogDirs

    async def describe_log_dirs(self, request: Any, body: Any) -> Mapping[str, Any]:
        wanted: set[TopicPartition] | None = None
        if body.topics is not None:
            wanted = {TopicPartition(t.topic, p) for t in body.topics for p in t.partitions}
        results = []
        for path in self.log_manager.log_dirs:
            logs = self.log_manager.logs_in_dir(path)
            by_topic: dict[str, list[dict[str, Any]]] = {}
            for tp in sorted(logs):
                if wanted is not None and tp not in wanted:
                    continue
                log = logs[tp]
                by_topic.setdefault(tp.topic, []).append(
                    {"partition_index": tp.partition, "partition_size": log.size,
                     "offset_lag": 0, "is_future_key": False}
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

    # ------------------------------------------------------------------ SaslHandshake

    async def sasl_handshake(self, request: Any, body: Any) -> Mapping[str, Any]:
        # No SASL mechanism is enabled until security lands.
        return {"error_code": ErrorCode.UNSUPPORTED_SASL_MECHANISM, "mechanisms": []}


def register_admin_apis(kafka_apis: Any, config: KafkaConfig | None = None) -> AdminApis:
    """Build the admin handlers over ``kafka_apis``' store and ReplicaManager
    and register them; returns the AdminApis."""
    admin = AdminApis(kafka_apis, config)
    admin.register()
    return admin
