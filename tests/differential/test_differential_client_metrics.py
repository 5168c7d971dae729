"""Kafka as the oracle for KIP-714's subscriptions: the CLIENT_METRICS config
resource through IncrementalAlterConfigs (valid, and each of Kafka's
refusals), DescribeConfigs of it, and ListConfigResources (v0: the
subscriptions; v1: by resource type). GetTelemetrySubscriptions and
PushTelemetry have no oracle: Kafka serves them only with a client-telemetry
MetricsReporter (tests/integration/test_client_telemetry.py drives them with
real clients)."""

from __future__ import annotations

from typing import Any

import pytest

from pylog.protocol import ApiKey

from .conftest import Brokers
from .diff_harness import Oracle, Pair, name, versions

CLIENT_METRICS = 16


@pytest.fixture
def oracle(pair: Pair) -> Oracle:
    return Oracle(pair)


def test_client_metrics_subscriptions(brokers: Brokers, oracle: Oracle) -> None:
    sub = name("cm")

    def alter(*ops: tuple[str, int, str | None]) -> None:
        oracle.send(
            ApiKey.INCREMENTAL_ALTER_CONFIGS,
            1,
            {"resources": [{"resource_type": CLIENT_METRICS, "resource_name": sub,
                            "configs": [{"name": k, "config_operation": op, "value": v}
                                        for k, op, v in ops]}],
             "validate_only": False},
        )  # fmt: skip

    def describe() -> None:
        body: dict[str, Any] = {
            "resources": [{"resource_type": CLIENT_METRICS, "resource_name": sub,
                           "configuration_keys": None}],
        }  # fmt: skip
        # KRaft's brokers learn of a config change a moment after it is committed
        oracle.settle(ApiKey.DESCRIBE_CONFIGS, 4, body)
        oracle.send(ApiKey.DESCRIBE_CONFIGS, 4, body)

    def listed() -> None:
        for v in versions(brokers.kafka_versions, brokers.pylog_versions,
                          ApiKey.LIST_CONFIG_RESOURCES):  # fmt: skip
            body: dict[str, Any] = {"resource_types": [CLIENT_METRICS]} if v >= 1 else {}
            oracle.settle(ApiKey.LIST_CONFIG_RESOURCES, v, body)
            oracle.send(ApiKey.LIST_CONFIG_RESOURCES, v, body)

    alter(("metrics", 0, "org.apache.kafka.producer."), ("interval.ms", 0, "2000"),
          ("match", 0, "client_id=app-.*"))  # fmt: skip
    describe()
    listed()
    alter(("metrics", 2, "org.apache.kafka.consumer."))
    describe()
    for bad in (("colour", 0, "red"), ("interval.ms", 0, "50"), ("interval.ms", 0, "soon"),
                ("match", 0, "hostname=x")):  # fmt: skip
        alter(bad)
    describe()
    alter(("metrics", 1, None), ("interval.ms", 1, None), ("match", 1, None))
    describe()
    listed()
    oracle.verify()
