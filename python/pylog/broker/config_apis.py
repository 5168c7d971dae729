"""The config handlers: DescribeConfigs, AlterConfigs and IncrementalAlterConfigs,
for TOPIC and BROKER resources, answered as a single Kafka broker would.

Configuration, as Kafka reports it (DescribeConfigs, CreateTopics v5+):

* a topic key's value is the topic's override (source TOPIC_CONFIG), else the
  broker key that supplies its default when set in the broker's configuration
  (STATIC_BROKER_CONFIG), else the broker key's default (DEFAULT_CONFIG); the
  synonyms list those candidates in that order, broker keys with their own
  synonyms (``log.retention.ms`` / ``.minutes`` / ``.hours``, ``log.roll.ms`` /
  ``.hours``, …) each listed, from the primary key's (``log.roll.ms``) own
  first entry on: Kafka drops the entries of the other names before it;
* a broker key's value is this broker's dynamic config (DYNAMIC_BROKER_CONFIG,
  ``/config/brokers/<id>``), else the cluster-wide one
  (DYNAMIC_DEFAULT_BROKER_CONFIG, ``/config/brokers/<default>``), else
  STATIC_BROKER_CONFIG when set, else DEFAULT_CONFIG; a topic key inheriting a
  broker default lists the same layers among its synonyms. The keys Kafka
  lets change at run time (:data:`DYNAMIC_BROKER_CONFIGS`) are not read-only.

AlterConfigs and IncrementalAlterConfigs of a BROKER resource (a broker id, or
"" for the cluster default) write the dynamic layer through the metadata store,
and every broker applies it (:class:`DynamicBrokerConfig`). A key that is not
dynamic answers INVALID_CONFIG ("Cannot update these configs dynamically"), a
bad value INVALID_CONFIG with the parser's reason, nothing written; a broker id
other than this broker's is INVALID_REQUEST, as in Kafka.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TypeVar

from pylog.broker.auth_helper import AuthHelper
from pylog.broker.request_helpers import Pacer, duplicates, error_of
from pylog.config import ConfigKey, ConfigType
from pylog.coordinator.group_config import (
    GROUP_CONFIG_KEYS,
    group_config_defaults,
    validate_group_config,
)
from pylog.errors import (
    ErrorCode,
    InvalidConfigurationError,
    InvalidRequestError,
    UnknownTopicOrPartitionError,
)
from pylog.log.config import TOPIC_CONFIG, LogConfig
from pylog.logsafe import quoted
from pylog.metadata.store import MetadataStore, TopicMetadata, validate_topic_name
from pylog.network import Request
from pylog.protocol.messages import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    alter_configs_request,
    alter_configs_response,
    incremental_alter_configs_request,
    incremental_alter_configs_response,
)
from pylog.protocol.messages.describe_configs_response import (
    DescribeConfigsResourceResult,
    DescribeConfigsResult,
    DescribeConfigsSynonym,
)
from pylog.security.acl_operation import AclOperation
from pylog.security.resource_type import ResourceType as AclResourceType
from pylog.server.client_metrics_configs import CLIENT_METRICS_KEYS, DEFAULT_INTERVAL_MS
from pylog.server.client_metrics_configs import validate as validate_client_metrics
from pylog.server.config import ALL_BROKER_CONFIG, KafkaConfig
from pylog.server.dynamic_broker_config import (
    DEFAULT_ENTITY,
    DYNAMIC_BROKER_CONFIGS,
    DynamicBrokerConfig,
    listener_sasl_key,
    listener_ssl_key,
)

__all__ = ["ConfigApis", "ConfigSource", "ResourceType"]

_log = logging.getLogger("pylog.broker.config_apis")


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
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


# DescribeConfigs v3+ config_type ids.
_CONFIG_TYPE_ID = {
    ConfigType.BOOLEAN: 1,
    ConfigType.STRING: 2,
    ConfigType.INT: 3,
    ConfigType.LONG: 5,
    ConfigType.DOUBLE: 6,
    ConfigType.LIST: 7,
    ConfigType.PASSWORD: 9,
}

# Broker keys whose value comes from the first of several keys that is set.
_BROKER_SYNONYMS: dict[str, tuple[str, ...]] = {
    "log.roll.ms": ("log.roll.ms", "log.roll.hours"),
    "log.roll.jitter.ms": ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    "log.retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "log.flush.interval.ms": ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
}

# A KIP-714 subscription's keys: (default as DescribeConfigs shows it, type).
CLIENT_METRICS_DEFAULTS: dict[str, tuple[str, ConfigType]] = {
    "interval.ms": (str(DEFAULT_INTERVAL_MS), ConfigType.INT),
    "match": ("", ConfigType.LIST),
    "metrics": ("", ConfigType.LIST),
}

# IncrementalAlterConfigs operations.
_SET, _DELETE, _APPEND, _SUBTRACT = 0, 1, 2, 3

# A resource of AlterConfigs or of IncrementalAlterConfigs (same fields but the
# configs' operation).
_Resource = TypeVar(
    "_Resource",
    alter_configs_request.AlterConfigsResource,
    incremental_alter_configs_request.AlterConfigsResource,
)


def _sensitive(name: str) -> bool:
    """A broker key whose value is a secret (PASSWORD; listener-prefixed ones too)."""
    key = ALL_BROKER_CONFIG.get(name)
    if key is not None:
        return key.type is ConfigType.PASSWORD
    return name.endswith((".sasl.jaas.config", ".password", ".ssl.keystore.key"))


def _listener_key_type(name: str) -> ConfigType:
    """The type of a listener-prefixed dynamic key (its base key's)."""
    if _sensitive(name):
        return ConfigType.PASSWORD
    if name.endswith(".sasl.enabled.mechanisms"):
        return ConfigType.LIST
    return ConfigType.STRING


def _show(value: object) -> str | None:
    """A config key's default as DescribeConfigs shows it."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(value)
    return str(value)


def _checked_config_names(
    resource: _Resource, duplicate_resources: set[tuple[int, str]]
) -> list[str]:
    """The config names of one AlterConfigs / IncrementalAlterConfigs resource,
    refusing (as Kafka does) a resource named twice or a key given twice."""
    if (resource.resource_type, resource.resource_name) in duplicate_resources:
        raise InvalidRequestError("Each resource must appear at most once.")
    names = [c.name for c in resource.configs]
    if repeated := duplicates(names):
        raise InvalidRequestError(f"Duplicate config keys: {', '.join(sorted(repeated))}")
    return names


class ConfigApis:
    """DescribeConfigs, AlterConfigs, IncrementalAlterConfigs, and the topic
    config entries and checks CreateTopics shares."""

    #: Who may do what (KafkaApis sets the broker's; none: everything allowed).
    auth: AuthHelper = AuthHelper()

    def _refusal(
        self, request: Request, operation: AclOperation, rtype: int, rname: str
    ) -> tuple[int, str] | None:
        """Kafka's ConfigHelper checks: a topic's configs need ``operation``
        (DESCRIBE_CONFIGS / ALTER_CONFIGS) on the topic, a broker's on the
        cluster; (error code, message) when refused."""
        if rtype == ResourceType.TOPIC and not self.auth.authorize(
            request, operation, AclResourceType.TOPIC, rname
        ):
            return ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed."
        if rtype in (
            ResourceType.BROKER,
            ResourceType.BROKER_LOGGER,
            ResourceType.CLIENT_METRICS,
        ) and not self.auth.authorize_cluster(request, operation):
            return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."
        if rtype == ResourceType.GROUP and not self.auth.authorize(
            request, operation, AclResourceType.GROUP, rname
        ):
            return ErrorCode.GROUP_AUTHORIZATION_FAILED, "Group authorization failed."
        return None

    def __init__(
        self,
        config: KafkaConfig,
        metadata_store: MetadataStore,
        dynamic_config: DynamicBrokerConfig | None = None,
    ) -> None:
        self.metadata_store = metadata_store
        self.broker_id = config.broker_id
        if dynamic_config is None:
            # Handlers built without a KafkaServer follow the store themselves.
            dynamic_config = DynamicBrokerConfig(config)
            mine = (DEFAULT_ENTITY, str(config.broker_id))
            metadata_store.add_broker_config_listener(
                lambda entity, configs: (
                    dynamic_config.update(entity, configs) if entity in mine else None
                )
            )
        self.dynamic_config = dynamic_config

    @property
    def config(self) -> KafkaConfig:
        """The broker's configuration in effect, dynamic layers included."""
        return self.dynamic_config.current

    # ------------------------------------------------------------------ config entries

    @property
    def _default_log_config(self) -> LogConfig:
        return self.config.log.default_log_config

    def _broker_synonyms(self, broker_key: str) -> list[DescribeConfigsSynonym]:
        """Kafka's synonyms of a broker key: the keys set in the broker's
        configuration (STATIC_BROKER_CONFIG), then the keys' non-null defaults
        (DEFAULT_CONFIG), each in precedence order, from the key's own first entry."""
        names = _BROKER_SYNONYMS.get(broker_key, (broker_key,))
        originals = self.dynamic_config.static.originals
        out = [
            DescribeConfigsSynonym(name=n, value=None if _sensitive(n) else value, source=source)
            for n in names
            for source, value in self.dynamic_config.source_layers(n)
        ]
        out += [
            DescribeConfigsSynonym(
                name=n,
                # a secret is never shown (Kafka answers null for a PASSWORD)
                value=None if _sensitive(n) else originals[n],
                source=ConfigSource.STATIC_BROKER_CONFIG,
            )
            for n in names
            if n in originals
        ]
        for n in names:
            key = ALL_BROKER_CONFIG.get(n)
            if key is not None and key.default is not None:
                out.append(
                    DescribeConfigsSynonym(
                        name=n, value=_show(key.default), source=ConfigSource.DEFAULT_CONFIG
                    )
                )
        # As Kafka's ConfigHelper: the list starts at the first entry of the key
        # itself; the other names' entries before it are left out (so with no
        # log.roll.ms set, segment.ms lists no log.roll.hours default).
        for i, syn in enumerate(out):
            if syn.name == broker_key:
                return out[i:]
        return []

    def topic_config_entries(
        self,
        overrides: Mapping[str, str],
        effective: LogConfig,
        names: Iterable[str] | None,
        *,
        synonyms: bool,
        documentation: bool,
        typed: bool = True,
    ) -> list[DescribeConfigsResourceResult]:
        """DescribeConfigs entries of a topic; ``typed``: the version carries
        config_type and documentation (v3+)."""
        values = effective.to_props()
        wanted = list(values) if names is None else [n for n in names if n in values]
        out = []
        for name in wanted:
            key = TOPIC_CONFIG[name]
            syn: list[DescribeConfigsSynonym] = []
            if name in overrides:
                syn.append(
                    DescribeConfigsSynonym(
                        name=name, value=values[name], source=ConfigSource.TOPIC_CONFIG
                    )
                )
            if key.server_default is not None:
                syn.extend(self._broker_synonyms(key.server_default))
            out.append(
                DescribeConfigsResourceResult(
                    name=name,
                    value=values[name],
                    read_only=False,
                    config_source=syn[0].source if syn else ConfigSource.DEFAULT_CONFIG,
                    is_sensitive=False,
                    synonyms=syn if synonyms else [],
                    config_type=_CONFIG_TYPE_ID.get(key.type, 0) if typed else 0,
                    documentation=key.doc if documentation and typed else None,
                )
            )
        return out

    def _broker_entries(
        self, names: Iterable[str] | None, *, synonyms: bool, documentation: bool, typed: bool
    ) -> list[DescribeConfigsResourceResult]:
        described = self.config.describe()
        wanted = list(described) if names is None else [n for n in names if n in described]
        out = []
        for name in wanted:
            key: ConfigKey = ALL_BROKER_CONFIG[name]
            syn = self._broker_synonyms(name)
            sensitive = key.type is ConfigType.PASSWORD
            value = described[name] if self.config.get(name) is not None and not sensitive else None
            out.append(
                DescribeConfigsResourceResult(
                    name=name,
                    value=value,
                    read_only=name not in DYNAMIC_BROKER_CONFIGS,
                    config_source=syn[0].source if syn else ConfigSource.DEFAULT_CONFIG,
                    is_sensitive=sensitive,
                    synonyms=syn if synonyms else [],
                    config_type=_CONFIG_TYPE_ID.get(key.type, 0) if typed else 0,
                    documentation=key.doc if documentation and typed else None,
                )
            )
        # The listener-prefixed keys of this broker's dynamic layer (a
        # rotated keystore's location, a JAAS text masked), as Kafka lists them.
        for name, value in sorted(self.dynamic_config.dynamic_broker().items()):
            listener_key = listener_ssl_key(name) or listener_sasl_key(name)
            if listener_key is None or (names is not None and name not in names):
                continue
            source = ConfigSource.DYNAMIC_BROKER_CONFIG
            shown = None if _sensitive(name) else value
            out.append(
                DescribeConfigsResourceResult(
                    name=name,
                    value=shown,
                    read_only=False,
                    config_source=source,
                    is_sensitive=_sensitive(name),
                    synonyms=(
                        [DescribeConfigsSynonym(name=name, value=shown, source=source)]
                        if synonyms
                        else []
                    ),
                    config_type=_CONFIG_TYPE_ID[_listener_key_type(name)] if typed else 0,
                    documentation=None,
                )
            )
        return out

    def _default_entries(
        self, names: Iterable[str] | None, *, synonyms: bool, documentation: bool, typed: bool
    ) -> list[DescribeConfigsResourceResult]:
        layer = self.dynamic_config.dynamic_default()
        wanted = sorted(layer) if names is None else [n for n in names if n in layer]
        out = []
        for name in wanted:
            key = ALL_BROKER_CONFIG[name]
            value = None if _sensitive(name) else layer[name]
            source = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
            out.append(
                DescribeConfigsResourceResult(
                    name=name,
                    value=value,
                    read_only=False,
                    config_source=source,
                    is_sensitive=_sensitive(name),
                    synonyms=(
                        [DescribeConfigsSynonym(name=name, value=value, source=source)]
                        if synonyms
                        else []
                    ),
                    config_type=_CONFIG_TYPE_ID.get(key.type, 0) if typed else 0,
                    documentation=key.doc if documentation and typed else None,
                )
            )
        return out

    def validate_topic_configs(self, configs: Mapping[str, str | None]) -> LogConfig:
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

    # ------------------------------------------------------------------ DescribeConfigs

    async def handle_describe_configs_request(
        self, request: Request, body: DescribeConfigsRequest
    ) -> DescribeConfigsResponse:
        synonyms = bool(body.include_synonyms)
        documentation = bool(body.include_documentation)
        typed = request.header.api_version >= 3
        results = []
        pace = Pacer()
        for r in body.resources:
            await pace()
            rtype, rname = r.resource_type, r.resource_name
            keys = r.configuration_keys
            # Kafka leaves the message unset, which its codec writes as "" (not
            # null), on success and for an unknown topic.
            out = DescribeConfigsResult(
                error_code=ErrorCode.NONE,
                error_message="",
                resource_type=rtype,
                resource_name=rname,
                configs=[],
            )
            refused = self._refusal(request, AclOperation.DESCRIBE_CONFIGS, rtype, rname)
            if refused is not None:
                out.error_code, out.error_message = refused
                results.append(out)
                continue
            try:
                if rtype == ResourceType.TOPIC:
                    validate_topic_name(rname)
                    meta = self.metadata_store.topic(rname)
                    if meta is None:
                        raise UnknownTopicOrPartitionError("")
                    effective = self._default_log_config.with_overrides(meta.configs)
                    out.configs = self.topic_config_entries(
                        meta.configs, effective, keys, synonyms=synonyms,
                        documentation=documentation,
                        typed=typed,
                    )  # fmt: skip
                elif rtype == ResourceType.BROKER:
                    if self._broker_resource_check(rname, allow_default=True):
                        out.configs = self._broker_entries(
                            keys, synonyms=synonyms, documentation=documentation, typed=typed
                        )
                    else:
                        # The cluster-wide default ("") shows its dynamic keys only.
                        out.configs = self._default_entries(
                            keys, synonyms=synonyms, documentation=documentation, typed=typed
                        )
                elif rtype == ResourceType.GROUP:
                    out.configs = self.group_config_entries(
                        rname, keys, synonyms=synonyms, documentation=documentation, typed=typed
                    )
                elif rtype == ResourceType.CLIENT_METRICS:
                    out.configs = self.client_metrics_entries(
                        rname, keys, documentation=documentation, typed=typed
                    )
                else:
                    raise InvalidRequestError(
                        f"Unsupported resource type {rtype} for DescribeConfigs"
                    )
            except Exception as e:
                out.error_code, out.error_message = error_of(e)
                out.configs = []
            results.append(out)
        return DescribeConfigsResponse(throttle_time_ms=0, results=results)

    # ------------------------------------------------------ AlterConfigs, IncrementalAlterConfigs

    async def handle_alter_configs_request(
        self, request: Request, body: AlterConfigsRequest
    ) -> AlterConfigsResponse:
        # Replace semantics: the request's keys become the topic's whole
        # override set (a null value is the same as absent).
        # The store's write (an fsync, or ZooKeeper's) may wait behind a topic
        # creation: on a worker thread.
        refused, allowed = self._split_alter(request, body.resources)
        results = await asyncio.to_thread(
            self._alter_config_resources,
            allowed,
            bool(body.validate_only),
            "AlterConfigs",
            lambda meta, r: {c.name: c.value for c in r.configs if c.value is not None},
            lambda current, r: {c.name: c.value for c in r.configs if c.value is not None},
            group_configs=lambda current, r: {
                c.name: c.value for c in r.configs if c.value is not None
            },
            client_metrics_configs=lambda current, r: {
                c.name: c.value for c in r.configs if c.value is not None
            },
        )
        results = _in_order(body.resources, results, refused)
        return AlterConfigsResponse(
            throttle_time_ms=0,
            responses=[
                alter_configs_response.AlterConfigsResourceResponse(
                    error_code=code,
                    error_message=msg,
                    resource_type=r.resource_type,
                    resource_name=r.resource_name,
                )
                for r, code, msg in results
            ],
        )

    async def handle_incremental_alter_configs_request(
        self, request: Request, body: IncrementalAlterConfigsRequest
    ) -> IncrementalAlterConfigsResponse:
        def known_operations(r: incremental_alter_configs_request.AlterConfigsResource) -> None:
            for c in r.configs:
                if c.config_operation not in (_SET, _DELETE, _APPEND, _SUBTRACT):
                    raise InvalidRequestError(
                        f"Unknown config operation {c.config_operation} for {c.name}"
                    )

        refused, allowed = self._split_alter(request, body.resources)
        results = await asyncio.to_thread(
            self._alter_config_resources,
            allowed,
            bool(body.validate_only),
            "IncrementalAlterConfigs",
            lambda meta, r: self._apply_incremental(
                meta.configs, r.configs, self._default_log_config.to_props()
            ),
            lambda current, r: self._apply_incremental(current, r.configs, broker=True),
            precheck=known_operations,
            group_configs=lambda current, r: self._apply_incremental(
                current, r.configs, group=True
            ),
            client_metrics_configs=lambda current, r: self._apply_incremental(
                current, r.configs, client_metrics=True
            ),
        )
        results = _in_order(body.resources, results, refused)
        return IncrementalAlterConfigsResponse(
            throttle_time_ms=0,
            responses=[
                incremental_alter_configs_response.AlterConfigsResourceResponse(
                    error_code=code,
                    error_message=msg,
                    resource_type=r.resource_type,
                    resource_name=r.resource_name,
                )
                for r, code, msg in results
            ],
        )

    def _split_alter(
        self, request: Request, resources: list[_Resource]
    ) -> tuple[dict[int, tuple[int, str]], list[_Resource]]:
        """(index → refusal) of the resources the request may not alter
        (nothing of theirs is changed), and the others."""
        refused: dict[int, tuple[int, str]] = {}
        allowed = []
        for i, r in enumerate(resources):
            why = self._refusal(
                request, AclOperation.ALTER_CONFIGS, r.resource_type, r.resource_name
            )
            if why is None:
                allowed.append(r)
            else:
                refused[i] = why
        return refused, allowed

    def _alter_config_resources(
        self,
        resources: list[_Resource],
        validate_only: bool,
        api: str,
        topic_configs: Callable[[TopicMetadata, _Resource], dict[str, str]],
        broker_configs: Callable[[Mapping[str, str], _Resource], dict[str, str]],
        precheck: Callable[[_Resource], None] | None = None,
        group_configs: Callable[[Mapping[str, str], _Resource], dict[str, str]] | None = None,
        client_metrics_configs: Callable[[Mapping[str, str], _Resource], dict[str, str]]
        | None = None,
    ) -> list[tuple[_Resource, int, str | None]]:
        """The per-resource loop both alter-configs APIs share: checks, the
        topic's new override set from ``topic_configs``, a broker's new dynamic
        layer from ``broker_configs`` (given the layer as stored), and
        (resource, error code, error message) per resource, for the response."""
        dupes = duplicates((r.resource_type, r.resource_name) for r in resources)
        responses = []
        for r in resources:
            code: int = ErrorCode.NONE
            msg: str | None = None
            try:
                _checked_config_names(r, dupes)
                if precheck is not None:
                    precheck(r)
                if r.resource_type == ResourceType.TOPIC:
                    meta = self._existing_topic(r.resource_name)
                    wanted = topic_configs(meta, r)
                    self.validate_topic_configs(wanted)
                    if not validate_only:
                        self.metadata_store.set_topic_config(meta.name, wanted)
                        _log.info(
                            "topic %s configs set to %s", quoted(meta.name), quoted(wanted, 2048)
                        )
                elif r.resource_type == ResourceType.BROKER:
                    self._alter_broker(r, validate_only, broker_configs)
                elif r.resource_type == ResourceType.GROUP:
                    self._alter_group(r, validate_only, group_configs)
                elif r.resource_type == ResourceType.CLIENT_METRICS and client_metrics_configs:
                    self._alter_client_metrics(r, validate_only, client_metrics_configs)
                else:
                    raise InvalidRequestError(
                        f"Unsupported resource type {r.resource_type} for {api}"
                    )
            except Exception as e:
                code, msg = error_of(e)
            responses.append((r, int(code), msg))
        return responses

    @staticmethod
    def _apply_incremental(
        current: Mapping[str, str],
        ops: Iterable[incremental_alter_configs_request.AlterableConfig],
        defaults: Mapping[str, str] | None = None,
        *,
        broker: bool = False,
        group: bool = False,
        client_metrics: bool = False,
    ) -> dict[str, str]:
        """``current`` overrides changed by ``ops``; APPEND and SUBTRACT start
        from the override, else from the value the topic has by default (as
        Kafka: appending compact to a default cleanup.policy gives delete,compact)."""
        merged = dict(current)
        for c in ops:
            name, op, value = c.name, c.config_operation, c.value
            key = (ALL_BROKER_CONFIG if broker else TOPIC_CONFIG).get(name)
            if group:  # checked whole by validate_group_config, naming the key
                key = ConfigKey(name, ConfigType.STRING, None, "")
            if client_metrics:  # checked whole by client_metrics_configs.validate
                if op in (_APPEND, _SUBTRACT):
                    # Kafka 4.3 refuses them on a subscription's keys (its lists too)
                    verb = "append" if op == _APPEND else "subtract"
                    raise InvalidConfigurationError(
                        f"Config value {verb} is not allowed for config key: {name}"
                    )
                key = ConfigKey(name, ConfigType.STRING, None, "")
            if key is None:
                if broker:  # refused by the dynamic-config check, naming it
                    key = ConfigKey(name, ConfigType.STRING, None, "")
                else:
                    raise InvalidConfigurationError(f"Unknown topic config name: {name}")
            if op == _SET:
                if value is None:
                    kind = "broker" if broker else "group" if group else "topic"
                    raise InvalidConfigurationError(
                        f"Null value not supported for {kind} configs: {name}"
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
                if base is None and defaults is not None:
                    base = defaults.get(name)
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
        meta = self.metadata_store.topic(name)
        if meta is None:
            raise UnknownTopicOrPartitionError(f"The topic '{name}' does not exist.")
        return meta

    def _alter_broker(
        self,
        r: _Resource,
        validate_only: bool,
        broker_configs: Callable[[Mapping[str, str], _Resource], dict[str, str]],
    ) -> None:
        """Check and write a broker entity's new dynamic layer; the store's
        broker-config listener applies it (here and on every broker)."""
        this_broker = self._broker_resource_check(r.resource_name, allow_default=True)
        entity = str(self.broker_id) if this_broker else DEFAULT_ENTITY
        dynamic = self.dynamic_config
        stored = dynamic.from_persistent(self.metadata_store.broker_config(entity))
        wanted = broker_configs(stored, r)
        dynamic.validate(entity, wanted)
        persistent = dynamic.to_persistent(entity, wanted)
        if not validate_only:
            self.metadata_store.set_broker_config(entity, persistent)
            shown = {k: "[hidden]" if _sensitive(k) else v for k, v in wanted.items()}
            _log.info("broker %s dynamic configs set to %s", entity, quoted(shown, 2048))

    def _alter_group(
        self,
        r: _Resource,
        validate_only: bool,
        group_configs: Callable[[Mapping[str, str], _Resource], dict[str, str]] | None,
    ) -> None:
        """Check and write a group's new overrides (Kafka's GroupConfig):
        an unknown key or a value outside the broker's bounds is
        INVALID_CONFIG, and nothing of the group's changes."""
        gid = r.resource_name
        if not gid or "/" in gid or gid in (".", ".."):
            raise InvalidRequestError(f"Invalid group name {gid!r} for a GROUP config resource")
        if group_configs is None:
            raise InvalidRequestError("Unsupported resource type 32")
        wanted = group_configs(self.metadata_store.group_config(gid), r)
        validate_group_config(self.config, wanted)
        if not validate_only:
            self.metadata_store.set_group_config(gid, wanted)
            _log.info("group %s configs set to %s", quoted(gid), quoted(wanted, 2048))

    def _alter_client_metrics(
        self,
        r: _Resource,
        validate_only: bool,
        client_metrics_configs: Callable[[Mapping[str, str], _Resource], dict[str, str]],
    ) -> None:
        """Check and write a KIP-714 subscription (Kafka's ClientMetricsConfigs
        checks); none of its keys left removes it. Every broker's
        ClientMetricsManager hears of it from the store."""
        name = r.resource_name
        if "/" in name or name in (".", ".."):
            raise InvalidRequestError(f"Invalid client metrics subscription name {name!r}")
        current = self.metadata_store.client_metrics_configs().get(name, {})
        wanted = client_metrics_configs(current, r)
        validate_client_metrics(name, wanted)
        if not validate_only:
            self.metadata_store.set_client_metrics_config(name, wanted)
            _log.info("client metrics %s set to %s", quoted(name), quoted(wanted, 2048))

    def client_metrics_entries(
        self, name: str, names: Iterable[str] | None, *, documentation: bool, typed: bool
    ) -> list[DescribeConfigsResourceResult]:
        """DescribeConfigs entries of a KIP-714 subscription, as Kafka 4.x
        lists them: every key, as set (CLIENT_METRICS_CONFIG) or its default
        (DEFAULT_CONFIG) — a subscription never set shows the defaults."""
        if not name:
            raise InvalidRequestError("Client metrics subscription name must not be empty")
        configs = self.metadata_store.client_metrics_configs().get(name, {})
        wanted = set(names) if names else None
        out = []
        for key, (default, kind) in CLIENT_METRICS_DEFAULTS.items():
            if wanted is not None and key not in wanted:
                continue
            out.append(
                DescribeConfigsResourceResult(
                    name=key,
                    value=configs.get(key, default),
                    read_only=False,
                    config_source=ConfigSource.CLIENT_METRICS_CONFIG
                    if key in configs
                    else ConfigSource.DEFAULT_CONFIG,
                    is_sensitive=False,
                    synonyms=[],
                    config_type=_CONFIG_TYPE_ID[kind] if typed else 0,
                    documentation=CLIENT_METRICS_KEYS[key] if documentation and typed else None,
                )
            )
        return out

    def group_config_entries(
        self,
        group_id: str,
        names: Iterable[str] | None,
        *,
        synonyms: bool,
        documentation: bool,
        typed: bool,
    ) -> list[DescribeConfigsResourceResult]:
        """DescribeConfigs entries of a group: every GroupConfig key, its
        override (GROUP_CONFIG) or the broker's value (DEFAULT_CONFIG)."""
        if not group_id:
            raise InvalidRequestError("Group name must not be empty")
        overrides = self.metadata_store.group_config(group_id)
        defaults = group_config_defaults(self.config)
        values = {**defaults, **overrides}
        wanted = list(GROUP_CONFIG_KEYS) if names is None else [n for n in names if n in values]
        out = []
        for name in wanted:
            key = GROUP_CONFIG_KEYS[name]
            source = ConfigSource.GROUP_CONFIG if name in overrides else ConfigSource.DEFAULT_CONFIG
            # As Kafka: the override, then the broker's value under its own key.
            syn = [
                DescribeConfigsSynonym(
                    name=key.broker_key or name,
                    value=defaults[name],
                    source=ConfigSource.DEFAULT_CONFIG,
                )
            ]
            if name in overrides:
                syn.insert(
                    0,
                    DescribeConfigsSynonym(
                        name=name, value=overrides[name], source=ConfigSource.GROUP_CONFIG
                    ),
                )
            out.append(
                DescribeConfigsResourceResult(
                    name=name,
                    value=values[name],
                    read_only=False,
                    config_source=source,
                    is_sensitive=False,
                    synonyms=syn if synonyms else [],
                    config_type=(_CONFIG_TYPE_ID[ConfigType.STRING if key.choices
                                                 else ConfigType.INT] if typed else 0),
                    documentation=key.doc if documentation and typed else None,
                )
            )  # fmt: skip
        return out


def _in_order(
    resources: Sequence[_Resource],
    done: list[tuple[_Resource, int, str | None]],
    refused: Mapping[int, tuple[int, str]],
) -> list[tuple[_Resource, int, str | None]]:
    """The alter results in the request's order, the refused ones among them."""
    it = iter(done)
    out: list[tuple[_Resource, int, str | None]] = []
    for i, r in enumerate(resources):
        why = refused.get(i)
        out.append((r, why[0], why[1]) if why is not None else next(it))
    return out
