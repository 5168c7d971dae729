"""ClientQuotaManager: the produce, fetch and request quotas of users and
client ids, as Kafka's ZooKeeper-mode brokers apply them
(``kafka.server.ClientQuotaManager`` and ``ClientRequestQuotaManager``).

Quotas come from the metadata store's :attr:`client_quotas` (``/config/users``
and ``/config/clients`` in ZooKeeper, set with AlterClientQuotas or
``kafka-configs --entity-type users|clients``). For a request from user ``u``
with client id ``c`` the first entity that has the quota's key applies, in
Kafka's order:

1. ``/config/users/<u>/clients/<c>``
2. ``/config/users/<u>/clients/<default>``
3. ``/config/users/<u>``
4. ``/config/users/<default>/clients/<c>``
5. ``/config/users/<default>/clients/<default>``
6. ``/config/users/<default>``
7. ``/config/clients/<c>``
8. ``/config/clients/<default>``

Usage is measured per *metric tags* — (user, client id) for the levels naming
both, (user, "") for a user's own or the default user's quota, ("", client id)
for a client id's — so every connection of alice shares her user quota, as in
Kafka. The measured rate (:class:`~pylog.common.metrics.sampled_stat.Rate` over
``quota.window.num`` windows of ``quota.window.size.seconds``) above the quota
gives a throttle time: how long the client must stay quiet for its rate to
come back down to the quota. The response says so (``throttle_time_ms``) and
the broker stops reading from the connection for that long (KIP-219).

With no quota of a type anywhere, its manager records nothing (Kafka's
``quotasEnabled``): quotas cost a request nothing until one is set.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from pylog.common.metrics.sampled_stat import Avg, Rate
from pylog.metadata.client_quota_entity import (
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    DEFAULT,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    ClientQuotaEntity,
    sanitize,
)
from pylog.security.kafka_principal import KafkaPrincipal

__all__ = ["ClientQuotaManager", "QuotaType"]

#: Sensors of a (user, client id) not seen for this long are dropped (Kafka's
#: InactiveSensorExpirationTimeSeconds): a client cycling through client ids
#: cannot grow the broker's memory without bound.
INACTIVE_SENSOR_EXPIRATION_MS = 3600 * 1000
_EXPIRE_CHECK_MS = 60 * 1000

# The throttle-time sensor's samples (Kafka's MetricConfig defaults).
_THROTTLE_SAMPLES = 2
_THROTTLE_WINDOW_MS = 30_000


class QuotaType(enum.Enum):
    """(Kafka's sensor group, the quota key, the name of the measured metric)."""

    PRODUCE = ("Produce", PRODUCER_BYTE_RATE, "byte-rate")
    FETCH = ("Fetch", CONSUMER_BYTE_RATE, "byte-rate")
    REQUEST = ("Request", REQUEST_PERCENTAGE, "request-time")
    #: ControllerMutationQuotaManager's (a token bucket, not a rate).
    CONTROLLER_MUTATION = ("ControllerMutation", CONTROLLER_MUTATION_RATE, "mutation-rate")

    def __init__(self, group: str, key: str, metric: str) -> None:
        self.group = group
        self.key = key
        self.metric = metric


@dataclass(slots=True)
class _ClientSensors:
    rate: Rate
    throttle_time: Avg
    last_record_ms: int


def _levels(user: str, client_id: str) -> tuple[tuple[ClientQuotaEntity, str, str], ...]:
    """The entities to try, in Kafka's order, each with the metric tags
    (sanitized user, client id) usage is measured under when it applies."""
    c = sanitize(client_id)
    return (
        (ClientQuotaEntity(user, c), user, client_id),
        (ClientQuotaEntity(user, DEFAULT), user, client_id),
        (ClientQuotaEntity(user, None), user, ""),
        (ClientQuotaEntity(DEFAULT, c), user, client_id),
        (ClientQuotaEntity(DEFAULT, DEFAULT), user, client_id),
        (ClientQuotaEntity(DEFAULT, None), user, ""),
        (ClientQuotaEntity(None, c), "", client_id),
        (ClientQuotaEntity(None, DEFAULT), "", client_id),
    )


class ClientQuotaManager:
    """One quota type's manager. Runs on the event loop (no locks)."""

    def __init__(
        self,
        quota_type: QuotaType,
        quotas: Callable[[], Mapping[ClientQuotaEntity, Mapping[str, float]]],
        *,
        samples: int = 11,
        window_seconds: int = 1,
    ) -> None:
        self.quota_type = quota_type
        self._quotas = quotas
        self.samples = samples
        self.window_ms = window_seconds * 1000
        #: (sanitized user, client id) -> its sensors
        self._sensors: dict[tuple[str, str], _ClientSensors] = {}
        self._last_expiry_ms = 0
        self._seen: Mapping[ClientQuotaEntity, Mapping[str, float]] | None = None
        self._enabled = False

    # ------------------------------------------------------------------ quotas

    def quotas_enabled(self) -> bool:
        quotas = self._quotas()
        if quotas is not self._seen:  # the store replaces the map on each change
            key = self.quota_type.key
            self._enabled = any(key in values for values in quotas.values())
            self._seen = quotas
        return self._enabled

    def quota(self, principal: KafkaPrincipal, client_id: str) -> tuple[tuple[str, str], float]:
        """The metric tags a request of ``principal`` with ``client_id`` is
        measured under, and its quota (``inf`` when none applies)."""
        user = sanitize(principal.name)
        key = self.quota_type.key
        quotas = self._quotas()
        for entity, tag_user, tag_client in _levels(user, client_id):
            values = quotas.get(entity)
            if values is not None and key in values:
                return (tag_user, tag_client), values[key]
        return ("", client_id), math.inf

    # ------------------------------------------------------------------ recording

    def _sensors_of(self, tags: tuple[str, str], now_ms: int) -> _ClientSensors:
        sensors = self._sensors.get(tags)
        if sensors is None:
            self._expire(now_ms)
            sensors = self._sensors[tags] = _ClientSensors(
                Rate(self.samples, self.window_ms),
                Avg(_THROTTLE_SAMPLES, _THROTTLE_WINDOW_MS),
                now_ms,
            )
        sensors.last_record_ms = now_ms
        return sensors

    def _expire(self, now_ms: int) -> None:
        if now_ms - self._last_expiry_ms < _EXPIRE_CHECK_MS:
            return
        self._last_expiry_ms = now_ms
        stale = [
            tags
            for tags, s in self._sensors.items()
            if now_ms - s.last_record_ms >= INACTIVE_SENSOR_EXPIRATION_MS
        ]
        for tags in stale:
            del self._sensors[tags]

    def maybe_record_and_get_throttle_time_ms(
        self, principal: KafkaPrincipal, client_id: str, value: float, now_ms: int
    ) -> int:
        """Record ``value`` (bytes; for the request quota, a percentage of one
        second) against the client's quota; the throttle time its rate now
        calls for (0 within the quota, or with no quotas of this type)."""
        if not self.quotas_enabled():
            return 0
        tags, bound = self.quota(principal, client_id)
        sensors = self._sensors_of(tags, now_ms)
        rate = sensors.rate
        rate.record(value, now_ms)
        if math.isinf(bound):
            return 0
        measured = rate.measure(now_ms)
        if measured <= bound:
            return 0
        window = rate.window_size_ms(now_ms)
        if bound <= 0:
            # Kafka divides by the bound; a zero quota throttles for as long as
            # its rate can remember.
            return self.samples * self.window_ms
        throttle = round((measured - bound) / bound * window)
        if self.quota_type is QuotaType.REQUEST:
            # ClientRequestQuotaManager bounds its throttle to one window.
            throttle = min(throttle, self.window_ms)
        return int(throttle)

    def unrecord(
        self, principal: KafkaPrincipal, client_id: str, value: float, now_ms: int
    ) -> None:
        """Take back a recorded value (a throttled Fetch answered with no data)."""
        if not self.quotas_enabled():
            return
        tags, _ = self.quota(principal, client_id)
        self._sensors_of(tags, now_ms).rate.record(-value, now_ms)

    def record_throttle(
        self, principal: KafkaPrincipal, client_id: str, throttle_ms: int, now_ms: int
    ) -> None:
        """The client was throttled for ``throttle_ms`` (the throttle-time metric)."""
        if throttle_ms <= 0:
            return
        tags, _ = self.quota(principal, client_id)
        self._sensors_of(tags, now_ms).throttle_time.record(throttle_ms, now_ms)

    # ------------------------------------------------------------------ metrics

    def metric_values(self, now_ms: int, which: str) -> Iterable[tuple[dict[str, str], float]]:
        """Per (user, client-id) tags: the measured rate (``which="rate"``) or
        the mean throttle time in ms (``"throttle"``), labelled as Kafka tags
        its quota metrics (``user``, URL-encoded as in Kafka, and ``client-id``)."""
        self._expire(now_ms)
        for (user, client_id), s in sorted(self._sensors.items()):
            labels = {"user": user, "client_id": client_id}
            stat = s.rate if which == "rate" else s.throttle_time
            yield labels, stat.measure(now_ms)
