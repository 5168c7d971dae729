"""ControllerMutationQuotaManager: the ``controller_mutation_rate`` quota of
users and client ids (KIP-599, Kafka's ``kafka.server.ControllerMutationQuotaManager``).

A mutation is a partition created or deleted: CreateTopics counts each new
topic's partitions, CreatePartitions the partitions added, DeleteTopics the
deleted topic's partitions. The quota applies with the client quotas'
precedence (``/config/users/<u>/clients/<c>`` … ``/config/clients/<default>``;
:mod:`pylog.server.client_quota_manager`) and is measured in a token bucket
per quota entity (:class:`~pylog.common.metrics.token_bucket.TokenBucket`):
it refills at the quota's rate and holds ``controller.quota.window.num *
controller.quota.window.size.seconds`` seconds' worth (110 credits at a
rate of 10 with the defaults); a new bucket is full.

Requests meet one of two quotas, chosen by version as Kafka chooses:

* **strict** — CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+
  (clients that understand THROTTLING_QUOTA_EXCEEDED): a topic is refused
  with that error while the bucket is below zero; one that finds the bucket at
  zero or above goes through whatever its size (and may take the bucket below
  zero). The answer's ``throttle_time_ms`` is the time until the bucket is
  back to zero, from the first refused topic;
* **permissive** — older versions: every topic goes through, and once the
  bucket is below zero the answer carries the throttle time and the broker
  reads nothing more from the connection for as long (the client waits).

Validation-only requests and topics refused for another reason cost nothing.
The manager runs on the event loop and on the worker threads that create
partitions: a lock guards the buckets.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from pylog.common.metrics.sampled_stat import Avg, Rate
from pylog.common.metrics.token_bucket import TokenBucket
from pylog.errors import ThrottlingQuotaExceededError
from pylog.metadata.client_quota_entity import ClientQuotaEntity
from pylog.security.kafka_principal import KafkaPrincipal
from pylog.server.client_quota_manager import (
    INACTIVE_SENSOR_EXPIRATION_MS,
    ClientQuotaManager,
    QuotaType,
)

__all__ = [
    "STRICT_SINCE_VERSION",
    "ControllerMutationQuota",
    "ControllerMutationQuotaManager",
    "PermissiveControllerMutationQuota",
    "StrictControllerMutationQuota",
    "UnboundedControllerMutationQuota",
]

#: API key → the first version whose clients get THROTTLING_QUOTA_EXCEEDED
#: (KafkaApis' strictSinceVersion): CreateTopics v6, DeleteTopics v5,
#: CreatePartitions v3.
STRICT_SINCE_VERSION = {19: 6, 20: 5, 37: 3}

_EXPIRE_CHECK_MS = 60 * 1000


@dataclass(slots=True)
class _MutationSensors:
    bucket: TokenBucket
    rate: Rate
    throttle_time: Avg
    last_record_ms: int
    #: The quota the bucket was last used at (for the ``tokens`` metric).
    bound: float = math.inf


class ControllerMutationQuota:
    """One request's view of its client's quota (Kafka's trait of that name)."""

    def record(self, permits: float) -> None:
        """Count ``permits`` partitions; ThrottlingQuotaExceededError if the
        quota refuses them (strict only)."""

    def throttle_time(self) -> int:
        """Milliseconds the client is to wait, as of now."""
        return 0


class UnboundedControllerMutationQuota(ControllerMutationQuota):
    """No quota of this kind set anywhere, or a request exempt from quotas."""


UNBOUNDED = UnboundedControllerMutationQuota()


class _BoundedQuota(ControllerMutationQuota):
    def __init__(
        self, manager: ControllerMutationQuotaManager, tags: tuple[str, str], bound: float
    ) -> None:
        self._manager = manager
        self._tags = tags
        self._bound = bound
        self._throttle_ms = 0
        self._recorded_ms = 0

    def _set_throttle(self, tokens: float, now_ms: int) -> None:
        self._throttle_ms = _throttle_ms(tokens, self._bound)
        self._recorded_ms = now_ms

    def throttle_time(self) -> int:
        # Kafka subtracts the time since the throttle was computed: a request
        # may be answered a while after its topics were counted.
        elapsed = self._manager.clock() - self._recorded_ms
        return max(0, self._throttle_ms - elapsed)


class StrictControllerMutationQuota(_BoundedQuota):
    """Refuses every mutation while the bucket is below zero; never throttles
    one that found it at zero or above."""

    def record(self, permits: float) -> None:
        now = self._manager.clock()
        with self._manager.lock:
            sensors = self._manager.sensors_of(self._tags, now)
            sensors.bound = self._bound
            tokens = sensors.bucket.measure(self._bound, now)
            if tokens < 0:
                self._set_throttle(tokens, now)
                raise ThrottlingQuotaExceededError(self._throttle_ms)
            sensors.bucket.record(permits, self._bound, now)
            sensors.rate.record(permits, now)


class PermissiveControllerMutationQuota(_BoundedQuota):
    """Takes every mutation; throttles once the bucket is below zero."""

    def record(self, permits: float) -> None:
        now = self._manager.clock()
        with self._manager.lock:
            sensors = self._manager.sensors_of(self._tags, now)
            sensors.bound = self._bound
            sensors.bucket.record(permits, self._bound, now)
            sensors.rate.record(permits, now)
            tokens = sensors.bucket.measure(self._bound, now)
        if tokens < 0:
            self._set_throttle(tokens, now)


def _throttle_ms(tokens: float, bound: float) -> int:
    """The time until a bucket at ``tokens`` refills to zero at ``bound`` per second."""
    if bound <= 0:
        return 2**31 - 1  # a zero quota never refills (Kafka's division gives infinity)
    return int(min(round(-tokens / bound * 1000), 2**31 - 1))


class ControllerMutationQuotaManager(ClientQuotaManager):
    """The ``controller_mutation_rate`` quotas: who is held to which rate
    (ClientQuotaManager's precedence) and the token bucket of each."""

    def __init__(
        self,
        quotas: Callable[[], Mapping[ClientQuotaEntity, Mapping[str, float]]],
        *,
        samples: int = 11,
        window_seconds: int = 1,
        clock: Callable[[], int],
    ) -> None:
        super().__init__(
            QuotaType.CONTROLLER_MUTATION, quotas, samples=samples, window_seconds=window_seconds
        )
        self.clock = clock
        self.lock = threading.Lock()
        self._buckets: dict[tuple[str, str], _MutationSensors] = {}
        self._last_bucket_expiry_ms = 0

    def sensors_of(self, tags: tuple[str, str], now_ms: int) -> _MutationSensors:
        """The bucket of ``tags`` (made full when new); call under :attr:`lock`."""
        sensors = self._buckets.get(tags)
        if sensors is None:
            self._expire_buckets(now_ms)
            sensors = self._buckets[tags] = _MutationSensors(
                TokenBucket(self.samples, self.window_ms),
                Rate(self.samples, self.window_ms),
                Avg(2, 30_000),
                now_ms,
            )
        sensors.last_record_ms = now_ms
        return sensors

    def _expire_buckets(self, now_ms: int) -> None:
        if now_ms - self._last_bucket_expiry_ms < _EXPIRE_CHECK_MS:
            return
        self._last_bucket_expiry_ms = now_ms
        for tags in [
            t
            for t, s in self._buckets.items()
            if now_ms - s.last_record_ms >= INACTIVE_SENSOR_EXPIRATION_MS
        ]:
            del self._buckets[tags]

    def new_quota_for(
        self,
        principal: KafkaPrincipal,
        client_id: str,
        *,
        strict: bool,
        exempt: bool = False,
    ) -> ControllerMutationQuota:
        """The quota one request is held to (Kafka's newQuotaFor): strict or
        permissive, or unbounded when no such quota is set or the request is
        exempt (a broker's own)."""
        if exempt or not self.quotas_enabled():
            return UNBOUNDED
        tags, bound = self.quota(principal, client_id)
        if math.isinf(bound):
            return UNBOUNDED
        if strict:
            return StrictControllerMutationQuota(self, tags, bound)
        return PermissiveControllerMutationQuota(self, tags, bound)

    def record_throttle(
        self, principal: KafkaPrincipal, client_id: str, throttle_ms: int, now_ms: int
    ) -> None:
        if throttle_ms <= 0:
            return
        tags, _ = self.quota(principal, client_id)
        with self.lock:
            self.sensors_of(tags, now_ms).throttle_time.record(throttle_ms, now_ms)

    def metric_values(self, now_ms: int, which: str) -> Iterable[tuple[dict[str, str], float]]:
        """Per (user, client-id): the credits left (``"tokens"``), the partitions
        mutated per second (``"rate"``) or the mean throttle in ms (``"throttle"``)."""
        with self.lock:
            self._expire_buckets(now_ms)
            out = []
            for (user, client_id), s in sorted(self._buckets.items()):
                labels = {"user": user, "client_id": client_id}
                if which == "tokens":
                    bound = s.bound
                    value = s.bucket.measure(bound, now_ms) if math.isfinite(bound) else 0.0
                elif which == "rate":
                    value = s.rate.measure(now_ms)
                else:
                    value = s.throttle_time.measure(now_ms)
                out.append((labels, value))
        return out
