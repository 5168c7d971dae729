"""The ClientMetricsManager's decisions (KIP-714) without a socket: which
subscriptions a client matches, what it is asked for, its pacing and expiry,
the bounds of what is kept, and the pushed metrics as /metrics and the
console's reader of /metrics see them."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    AGGREGATION_TEMPORALITY_DELTA,
    Gauge,
    Metric,
    MetricsData,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
    Sum,
)

from pylog.console.client_telemetry import parse_exposition
from pylog.errors import ErrorCode, InvalidConfigurationError, InvalidRequestError
from pylog.network import Request
from pylog.network.metrics import MetricsRegistry
from pylog.protocol.codec import RequestHeader
from pylog.protocol.messages import GetTelemetrySubscriptionsRequest, PushTelemetryRequest
from pylog.server.client_metrics_configs import validate
from pylog.server.client_metrics_manager import ClientMetricsManager
from pylog.server.client_metrics_receiver_plugin import (
    ClientMetricsReceiverPlugin,
    ClientTelemetry,
    InvalidTelemetryError,
)

ZERO = "AAAAAAAAAAAAAAAAAAAAAA"


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def _request(client_id: str, connection: str = "c1") -> Request:
    header = RequestHeader(71, 0, 1, client_id, 0)
    return Request(header, memoryview(b""), connection, "127.0.0.1", "PLAINTEXT", 0, 5555)


def _payload(value: float, name: str = "org.apache.kafka.producer.x") -> bytes:
    point = NumberDataPoint(
        as_double=value, attributes=[KeyValue(key="node.id", value=AnyValue(int_value=3))]
    )
    metrics = [
        Metric(name=name, gauge=Gauge(data_points=[point])),
        Metric(
            name=name + ".total",
            sum=Sum(data_points=[point], aggregation_temporality=AGGREGATION_TEMPORALITY_DELTA),
        ),
    ]
    data = MetricsData(
        resource_metrics=[ResourceMetrics(scope_metrics=[ScopeMetrics(metrics=metrics)])]
    )
    return bytes(data.SerializeToString())


def _push(m: ClientMetricsManager, request: Request, body: PushTelemetryRequest) -> Any:
    return asyncio.run(m.process_push_telemetry(request, body))


def test_subscriptions_matched_and_merged() -> None:
    clock = Clock()
    m = ClientMetricsManager(1024, clock=clock)
    m.update_subscription("p", {"metrics": "org.apache.kafka.producer.", "interval.ms": "2000"})
    m.update_subscription(
        "c",
        {"metrics": "org.apache.kafka.consumer.", "interval.ms": "500",
         "match": "client_software_name=apache-kafka-java,client_id=app-.*"},
    )  # fmt: skip
    m.record_client_information("c1", "apache-kafka-java", "4.3.1")
    got = m.process_get_telemetry_subscriptions(
        _request("app-1"), GetTelemetrySubscriptionsRequest(client_instance_id=ZERO)
    )
    assert got.error_code == ErrorCode.NONE and got.client_instance_id != ZERO
    assert got.requested_metrics == ["org.apache.kafka.consumer.", "org.apache.kafka.producer."]
    assert got.push_interval_ms == 500
    # another software: only the unconditional subscription
    m.record_client_information("c2", "librdkafka", "2.8.0")
    other = m.process_get_telemetry_subscriptions(
        _request("app-1", "c2"), GetTelemetrySubscriptionsRequest(client_instance_id=ZERO)
    )
    assert other.requested_metrics == ["org.apache.kafka.producer."]
    assert other.push_interval_ms == 2000
    # '*' anywhere: everything, as one '*'
    m.update_subscription("all", {"metrics": "*"})
    clock.now += 10_000
    again = m.process_get_telemetry_subscriptions(
        _request("app-1"),
        GetTelemetrySubscriptionsRequest(client_instance_id=got.client_instance_id),
    )
    assert again.requested_metrics == ["*"]
    assert again.subscription_id != got.subscription_id
    # none left: nothing asked, the default five minutes
    for name in ("p", "c", "all"):
        m.update_subscription(name, {})
    clock.now += 10_000
    empty = m.process_get_telemetry_subscriptions(
        _request("x"), GetTelemetrySubscriptionsRequest(client_instance_id=ZERO)
    )
    assert empty.requested_metrics == [] and empty.push_interval_ms == 300_000


def test_a_changed_subscription_makes_the_old_id_unknown() -> None:
    clock = Clock()
    m = ClientMetricsManager(1 << 20, clock=clock)
    m.update_subscription("s", {"metrics": "org.apache.kafka.", "interval.ms": "1000"})
    sub = m.process_get_telemetry_subscriptions(
        _request("a"), GetTelemetrySubscriptionsRequest(client_instance_id=ZERO)
    )
    m.update_subscription("s", {"metrics": "org.apache.kafka.producer.", "interval.ms": "1000"})
    push = PushTelemetryRequest(
        client_instance_id=sub.client_instance_id,
        subscription_id=sub.subscription_id,
        metrics=_payload(1.0),
    )
    assert _push(m, _request("a"), push).error_code == (ErrorCode.UNKNOWN_SUBSCRIPTION_ID)
    fresh = m.process_get_telemetry_subscriptions(
        _request("a"),
        GetTelemetrySubscriptionsRequest(client_instance_id=sub.client_instance_id),
    )
    assert fresh.error_code == ErrorCode.NONE
    assert fresh.requested_metrics == ["org.apache.kafka.producer."]
    push.subscription_id = fresh.subscription_id
    assert _push(m, _request("a"), push).error_code == ErrorCode.NONE


def test_pacing_expiry_and_the_lru_bound() -> None:
    clock = Clock()
    m = ClientMetricsManager(1 << 20, clock=clock, cache_max_size=3)
    m.update_subscription("s", {"metrics": "*", "interval.ms": "1000"})
    sub = m.process_get_telemetry_subscriptions(
        _request("a"), GetTelemetrySubscriptionsRequest(client_instance_id=ZERO)
    )
    iid = sub.client_instance_id
    push = PushTelemetryRequest(
        client_instance_id=iid, subscription_id=sub.subscription_id, metrics=_payload(2.0)
    )
    assert _push(m, _request("a"), push).error_code == ErrorCode.NONE
    clock.now += 999
    assert _push(m, _request("a"), push).error_code == (ErrorCode.THROTTLING_QUOTA_EXCEEDED)
    clock.now += 1
    assert _push(m, _request("a"), push).error_code == ErrorCode.NONE
    # idle past max(60 s, 3 intervals): forgotten
    clock.now += 60_001
    for _ in range(2):
        m.process_get_telemetry_subscriptions(
            _request("b"), GetTelemetrySubscriptionsRequest(client_instance_id=ZERO)
        )
    assert m.instance(iid) is None
    for _ in range(5):
        m.process_get_telemetry_subscriptions(
            _request("c"), GetTelemetrySubscriptionsRequest(client_instance_id=ZERO)
        )
    assert len(m._instances) == 3


def test_delta_sums_add_up_and_are_shown_on_metrics() -> None:
    receiver = ClientMetricsReceiverPlugin(max_instances=2)
    who = ClientTelemetry("inst-1", 'app "1"\n', "apache-kafka-java", "4.3.1", "127.0.0.1:1", "u")
    receiver.export_metrics(who, _payload(2.0), now_ms=1000)
    receiver.export_metrics(who, _payload(3.0), now_ms=2000)
    (kept,) = receiver.clients()
    by_kind = {p.kind: p for p in kept.points}
    assert by_kind["gauge"].value == 3.0 and by_kind["gauge"].total == 3.0
    assert by_kind["sum"].value == 3.0 and by_kind["sum"].total == 5.0
    assert kept.pushes == 2 and kept.last_push_ms == 2000

    registry = MetricsRegistry()
    receiver.register_metrics(registry)
    text = registry.render()
    assert 'node_id="3"' in text  # the attribute's dot made a label name
    # the console's reader of /metrics finds the same client and values
    (read,) = parse_exposition(text)
    assert read.client_id == 'app "1"\n' and read.last_push_ms == 2000
    assert sorted(p.total for p in read.points) == [3.0, 5.0]
    assert {p.name for p in read.points} == {
        "org.apache.kafka.producer.x",
        "org.apache.kafka.producer.x.total",
    }
    # bounded: the least recently pushed instance goes first
    for i in range(2, 5):
        other = ClientTelemetry(f"inst-{i}", "c", "", "", "", "")
        receiver.export_metrics(other, _payload(1.0), now_ms=3000 + i)
    assert [c.client_instance_id for c in receiver.clients()] == ["inst-4", "inst-3"]


def test_what_is_not_telemetry() -> None:
    receiver = ClientMetricsReceiverPlugin()
    who = ClientTelemetry("i", "c", "", "", "", "")
    for junk in (b"\xff\xff\xff\xff", b"\x0a\x05abc", b"\x08\x01\x10\x02"):
        with pytest.raises(InvalidTelemetryError):
            receiver.export_metrics(who, junk)
    assert receiver.clients() == []


def test_subscription_checks() -> None:
    validate("ok", {"metrics": "a.,b.", "interval.ms": "100", "match": "client_id=x.*"})
    with pytest.raises(InvalidRequestError):
        validate("", {"metrics": "a"})
    with pytest.raises(InvalidRequestError):
        validate("s", {"interval.ms": "3600001"})
    with pytest.raises(InvalidConfigurationError):
        validate("s", {"interval.ms": "soon"})
    with pytest.raises(InvalidConfigurationError):
        validate("s", {"match": "client_id"})
    with pytest.raises(InvalidRequestError):
        validate("s", {"push.interval": "1"})


def test_the_points_kept_are_bounded_over_every_instance() -> None:
    receiver = ClientMetricsReceiverPlugin(max_total_points=5)  # each push: 2 points
    for i in range(4):
        receiver.export_metrics(ClientTelemetry(f"i{i}", "c", "", "", "", ""), _payload(1.0), i)
    assert [c.client_instance_id for c in receiver.clients()] == ["i3", "i2"]
    # pushed again: replaced, not counted twice
    receiver.export_metrics(ClientTelemetry("i3", "c", "", "", "", ""), _payload(2.0), 9)
    assert [c.client_instance_id for c in receiver.clients()] == ["i3", "i2"]
