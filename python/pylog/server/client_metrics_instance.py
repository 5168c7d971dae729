"""One client instance the broker knows from its telemetry requests (Kafka's
``ClientMetricsInstance``, with the ``ClientMetricsInstanceMetadata`` its
subscriptions are matched against): the subscription it was given, and when
it last asked and pushed, which paces it."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from pylog.errors import ErrorCode

__all__ = ["ClientMetricsInstance", "ClientMetricsInstanceMetadata"]


@dataclass(frozen=True, slots=True)
class ClientMetricsInstanceMetadata:
    """What a subscription's ``match`` selects on; a selector whose value is
    unknown (no ApiVersions software name, say) never matches."""

    client_instance_id: str
    client_id: str
    client_software_name: str | None
    client_software_version: str | None
    client_source_address: str
    client_source_port: str
    principal: str = ""

    def is_match(self, patterns: Mapping[str, re.Pattern[str]]) -> bool:
        """Every pattern matches its selector's whole value (none: a match)."""
        for selector, pattern in patterns.items():
            value = getattr(self, selector, None)
            if value is None or pattern.fullmatch(value) is None:
                return False
        return True


class ClientMetricsInstance:
    """A client instance's subscription and its pacing."""

    __slots__ = (
        "expires_ms",
        "fetched_since_push",
        "last_get_ms",
        "last_known_error",
        "last_push_ms",
        "metadata",
        "metrics",
        "push_interval_ms",
        "subscription_id",
        "subscription_version",
        "terminating",
    )

    def __init__(
        self,
        metadata: ClientMetricsInstanceMetadata,
        subscription_id: int,
        subscription_version: int,
        metrics: list[str],
        push_interval_ms: int,
    ) -> None:
        self.metadata = metadata
        self.subscription_id = subscription_id
        self.subscription_version = subscription_version
        self.metrics = metrics
        self.push_interval_ms = push_interval_ms
        self.last_get_ms = 0
        self.last_push_ms = 0
        #: A GetTelemetrySubscriptions was answered since the last push (a flag,
        #: not Kafka's comparison of the two times, which two requests within
        #: one millisecond would defeat).
        self.fetched_since_push = False
        self.terminating = False
        self.last_known_error: int = ErrorCode.NONE
        self.expires_ms = 0

    def maybe_update_get_request_timestamp(self, now_ms: int) -> bool:
        """A GetTelemetrySubscriptions is due a push interval after the
        instance's last request of either kind."""
        if now_ms - max(self.last_get_ms, self.last_push_ms) >= self.push_interval_ms:
            self.last_get_ms = now_ms
            self.fetched_since_push = True
            return True
        return False

    def maybe_update_push_request_timestamp(self, now_ms: int) -> bool:
        """A push is due a push interval after the previous one, or at once
        after a GetTelemetrySubscriptions: clients jitter their first push
        (Kafka accepts it so too)."""
        ok = self.fetched_since_push or now_ms - self.last_push_ms >= self.push_interval_ms
        if ok:
            self.last_push_ms = now_ms
            self.fetched_since_push = False
        return ok
