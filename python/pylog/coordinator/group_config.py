"""GroupConfig: the per-group overrides of the group coordinator's
settings (Kafka's ``org.apache.kafka.coordinator.group.GroupConfig``), set
with IncrementalAlterConfigs / AlterConfigs on a GROUP resource (type 32)
and described with DescribeConfigs.

Each key overrides a broker setting for one group and must lie within that
setting's broker bounds (``group.share.min.*`` / ``group.share.max.*`` and
the consumer ones), as Kafka validates; a heartbeat interval must stay below
its session timeout. Stored by the MetadataStore (ZooKeeper:
``/config/groups/<group id>`` with a ``/config/changes`` notification, as
the other config entities; Kafka 3.9's ZooKeeper mode had no group configs).

Served: the keys Kafka 4.x's share and consumer groups use for which pylog
has the setting. ``share.auto.offset.reset`` takes ``earliest`` or ``latest``
(Kafka's ``by_duration:<ISO-8601>`` is refused as INVALID_CONFIG here).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pylog.errors import InvalidConfigurationError
from pylog.server.config import KafkaConfig

__all__ = ["GROUP_CONFIG_KEYS", "GroupConfigKey", "group_config_defaults", "validate_group_config"]


@dataclass(frozen=True, slots=True)
class GroupConfigKey:
    name: str
    broker_key: str  # the broker setting it overrides (its default)
    doc: str
    #: (lower, upper) broker keys bounding an int value; None: a string choice
    bounds: tuple[str, str] | None = None
    choices: tuple[str, ...] = ()


GROUP_CONFIG_KEYS: dict[str, GroupConfigKey] = {
    k.name: k
    for k in (
        GroupConfigKey(
            "consumer.session.timeout.ms",
            "group.consumer.session.timeout.ms",
            "Silence after which a consumer-group member is removed.",
            ("group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms"),
        ),
        GroupConfigKey(
            "consumer.heartbeat.interval.ms",
            "group.consumer.heartbeat.interval.ms",
            "A consumer-group member's heartbeat interval.",
            (
                "group.consumer.min.heartbeat.interval.ms",
                "group.consumer.max.heartbeat.interval.ms",
            ),
        ),
        GroupConfigKey(
            "share.session.timeout.ms",
            "group.share.session.timeout.ms",
            "Silence after which a share-group member is removed.",
            ("group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms"),
        ),
        GroupConfigKey(
            "share.heartbeat.interval.ms",
            "group.share.heartbeat.interval.ms",
            "A share-group member's heartbeat interval.",
            ("group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms"),
        ),
        GroupConfigKey(
            "share.record.lock.duration.ms",
            "group.share.record.lock.duration.ms",
            "How long a share-group member holds the records it acquired.",
            (
                "group.share.min.record.lock.duration.ms",
                "group.share.max.record.lock.duration.ms",
            ),
        ),
        GroupConfigKey(
            "share.delivery.count.limit",
            "group.share.delivery.count.limit",
            "Deliveries of a record to the share group before it is archived.",
            ("group.share.min.delivery.count.limit", "group.share.max.delivery.count.limit"),
        ),
        GroupConfigKey(
            "share.auto.offset.reset",
            "",
            "Where a share partition starts when the group first uses it.",
            choices=("latest", "earliest"),
        ),
        GroupConfigKey(
            "share.isolation.level",
            "",
            "read_committed: the share group delivers only committed transactional records.",
            choices=("read_uncommitted", "read_committed"),
        ),
    )
}

#: Heartbeat intervals that must stay below a session timeout.
_BELOW = (
    ("consumer.heartbeat.interval.ms", "consumer.session.timeout.ms"),
    ("share.heartbeat.interval.ms", "share.session.timeout.ms"),
)


def group_config_defaults(config: KafkaConfig) -> dict[str, str]:
    """Every key's value for a group that overrides nothing."""
    out = {}
    for k in GROUP_CONFIG_KEYS.values():
        out[k.name] = str(config.get(k.broker_key)) if k.broker_key else k.choices[0]
    return out


def validate_group_config(config: KafkaConfig, overrides: Mapping[str, str]) -> None:
    """InvalidConfigurationError naming the first unknown key or bad value."""
    for name, value in overrides.items():
        key = GROUP_CONFIG_KEYS.get(name)
        if key is None:
            raise InvalidConfigurationError(f"Unknown group config name: {name}")
        if key.bounds is None:
            if value not in key.choices:
                raise InvalidConfigurationError(
                    f"Invalid value {value} for configuration {name}: "
                    f"String must be one of: {', '.join(key.choices)}"
                )
            continue
        try:
            n = int(value)
        except ValueError:
            raise InvalidConfigurationError(
                f"Invalid value {value} for configuration {name}: Not a number of type INT"
            ) from None
        lo, hi = (int(config.get(b)) for b in key.bounds)
        if not lo <= n <= hi:
            raise InvalidConfigurationError(
                f"{name} must be greater than or equal to {key.bounds[0]} ({lo}) "
                f"and less than or equal to {key.bounds[1]} ({hi})"
            )
    effective = {**group_config_defaults(config), **overrides}
    for beat, session in _BELOW:
        if beat not in overrides and session not in overrides:
            continue
        if int(effective[beat]) >= int(effective[session]):
            raise InvalidConfigurationError(f"{beat} must be less than {session}")
