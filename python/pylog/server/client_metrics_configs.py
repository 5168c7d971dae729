"""KIP-714's client metrics subscriptions: the keys of a CLIENT_METRICS config
resource (Kafka's ``ClientMetricsConfigs``), their checks, and the parsed form
the ClientMetricsManager matches clients against.

A subscription is named (``kafka-client-metrics.sh --name``, or
``kafka-configs --entity-type client-metrics --entity-name``) and holds three
keys: ``metrics``, the metric-name prefixes it asks for (``*`` all of them,
empty none); ``interval.ms``, how often to push (100 ms to one hour, five
minutes by default); ``match``, ``selector=regex`` pairs a client must all
match (none: every client). The selectors are the client's instance id, its
``client.id``, the software name and version it gave in ApiVersions, and its
address and port.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from pylog.errors import InvalidConfigurationError, InvalidRequestError

__all__ = [
    "ALL_SUBSCRIBED_METRICS",
    "CLIENT_METRICS_KEYS",
    "DEFAULT_INTERVAL_MS",
    "MATCH_SELECTORS",
    "SubscriptionInfo",
    "parse_match",
    "parse_subscription",
    "validate",
]

METRICS = "metrics"
INTERVAL_MS = "interval.ms"
MATCH = "match"
#: The keys of a client metrics resource, with what DescribeConfigs documents.
CLIENT_METRICS_KEYS: dict[str, str] = {
    METRICS: "Metric name prefixes the matching clients push ('*': all).",
    INTERVAL_MS: "How often the matching clients push, in milliseconds.",
    MATCH: "selector=regex pairs a client must all match (none: every client).",
}
#: ``metrics`` holding this: every metric the client has.
ALL_SUBSCRIBED_METRICS = "*"
DEFAULT_INTERVAL_MS = 5 * 60 * 1000
_MIN_INTERVAL_MS, _MAX_INTERVAL_MS = 100, 3_600_000
#: What ``match`` may select on (Kafka's ClientMetricsInstanceMetadata attributes).
MATCH_SELECTORS = frozenset(
    {
        "client_instance_id",
        "client_id",
        "client_software_name",
        "client_software_version",
        "client_source_address",
        "client_source_port",
    }
)


@dataclass(frozen=True, slots=True)
class SubscriptionInfo:
    """One subscription as the manager uses it."""

    name: str
    metrics: frozenset[str]
    interval_ms: int
    match: Mapping[str, re.Pattern[str]]


def _list(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def parse_match(patterns: list[str]) -> dict[str, re.Pattern[str]]:
    """``selector=regex`` entries → selector → compiled regex; a malformed
    entry, an unknown selector or a bad regex is INVALID_CONFIG (Kafka's)."""
    out: dict[str, re.Pattern[str]] = {}
    for pattern in patterns:
        parts = pattern.split("=")
        if len(parts) != 2 or parts[0].strip() not in MATCH_SELECTORS:
            raise InvalidConfigurationError(f"Illegal client matching pattern: {pattern}")
        try:
            out[parts[0].strip()] = re.compile(parts[1].strip())
        except re.error as e:
            raise InvalidConfigurationError(f"Illegal client matching pattern: {pattern}") from e
    return out


def validate(name: str, configs: Mapping[str, str]) -> None:
    """Kafka's checks of a subscription's new configs: a name, known keys
    (else INVALID_REQUEST), an interval within bounds, parseable selectors."""
    if not name:
        raise InvalidRequestError("Subscription name can't be empty")
    for key in configs:
        if key not in CLIENT_METRICS_KEYS:
            raise InvalidRequestError(f"Unknown client metrics configuration: {key}")
    if INTERVAL_MS in configs:
        try:
            interval = int(configs[INTERVAL_MS].strip())
        except ValueError as e:
            raise InvalidConfigurationError(
                f"Invalid value {configs[INTERVAL_MS]} for configuration {INTERVAL_MS}: "
                "Not a number of type INT"
            ) from e
        if not _MIN_INTERVAL_MS <= interval <= _MAX_INTERVAL_MS:
            raise InvalidRequestError(
                f"Invalid value {interval} for {INTERVAL_MS}, interval must be between "
                f"{_MIN_INTERVAL_MS} and {_MAX_INTERVAL_MS} (1 hour)"
            )
    parse_match(_list(configs.get(MATCH, "")))


def parse_subscription(name: str, configs: Mapping[str, str]) -> SubscriptionInfo:
    """A stored (already validated) subscription in the manager's form."""
    interval = configs.get(INTERVAL_MS)
    return SubscriptionInfo(
        name=name,
        metrics=frozenset(_list(configs.get(METRICS, ""))),
        interval_ms=int(interval) if interval else DEFAULT_INTERVAL_MS,
        match=parse_match(_list(configs.get(MATCH, ""))),
    )
