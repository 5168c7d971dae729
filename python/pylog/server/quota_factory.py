"""QuotaManagers: the broker's client quota managers — produce bytes, fetch
bytes, request time, and the controller mutations of KIP-599 — over the
metadata store's quotas (Kafka's ``QuotaFactory.QuotaManagers``), and their
metrics.

The metrics are Kafka's quota sensors (JMX ``kafka.server:type=Produce|Fetch|Request,
user=…,client-id=…``, attributes ``byte-rate`` / ``request-time`` and
``throttle-time``) as Prometheus families, one series per (user, client-id)
the quota is measured under:

* ``kafka_server_produce_byte_rate``, ``kafka_server_fetch_byte_rate`` (bytes/s),
  ``kafka_server_request_request_time`` (percent of one thread);
* ``kafka_server_{produce,fetch,request}_throttle_time`` (mean ms of the
  throttles of the last minute or so);
* ``kafka_server_controllermutation_tokens`` (credits left in the token
  bucket), ``kafka_server_controllermutation_mutation_rate`` (partitions
  created or deleted per second) and ``kafka_server_controllermutation_throttle_time``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from pylog.metadata.store import MetadataStore
from pylog.network.metrics import MetricsRegistry
from pylog.server.client_quota_manager import ClientQuotaManager, QuotaType
from pylog.server.config import KafkaConfig
from pylog.server.controller_mutation_quota_manager import ControllerMutationQuotaManager

__all__ = ["QuotaManagers", "now_ms"]


def now_ms() -> int:
    """The quota managers' clock: monotonic, in milliseconds."""
    return time.monotonic_ns() // 1_000_000


class QuotaManagers:
    def __init__(self, config: KafkaConfig, store: MetadataStore) -> None:
        samples = int(config.get("quota.window.num"))
        window = int(config.get("quota.window.size.seconds"))

        def manager(quota_type: QuotaType) -> ClientQuotaManager:
            return ClientQuotaManager(
                quota_type, lambda: store.client_quotas, samples=samples, window_seconds=window
            )

        self.produce = manager(QuotaType.PRODUCE)
        self.fetch = manager(QuotaType.FETCH)
        self.request = manager(QuotaType.REQUEST)
        self.controller_mutation = ControllerMutationQuotaManager(
            lambda: store.client_quotas,
            samples=int(config.get("controller.quota.window.num")),
            window_seconds=int(config.get("controller.quota.window.size.seconds")),
            clock=now_ms,
        )

    def any_enabled(self) -> bool:
        return (
            self.request.quotas_enabled()
            or self.produce.quotas_enabled()
            or self.fetch.quotas_enabled()
        )

    def register_metrics(self, metrics: MetricsRegistry) -> None:
        for m in (self.produce, self.fetch, self.request):
            group = m.quota_type.group.lower()
            measured = m.quota_type.metric.replace("-", "_")
            unit = "percent of one thread" if m.quota_type is QuotaType.REQUEST else "bytes/s"
            metrics.gauge(
                f"kafka_server_{group}_{measured}",
                f"{m.quota_type.group} quota usage per user and client-id ({unit}).",
                _reader(m, "rate"),
            )
            metrics.gauge(
                f"kafka_server_{group}_throttle_time",
                f"Mean {m.quota_type.group} throttle time per user and client-id, in ms.",
                _reader(m, "throttle"),
            )
        cm = self.controller_mutation
        for which, name, doc in (
            ("tokens", "tokens", "Credits left in the controller mutation token bucket"),
            ("rate", "mutation_rate", "Partitions created or deleted per second"),
            ("throttle", "throttle_time", "Mean controller mutation throttle time, in ms,"),
        ):
            metrics.gauge(
                f"kafka_server_controllermutation_{name}",
                f"{doc} per user and client-id (KIP-599).",
                _reader(cm, which),
            )


def _reader(
    m: ClientQuotaManager, which: str
) -> Callable[[], Iterable[tuple[dict[str, str], float]]]:
    return lambda: list(m.metric_values(now_ms(), which))
