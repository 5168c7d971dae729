"""KIP-714 client telemetry against a real broker process: a subscription set
with Kafka's own `kafka-client-metrics` tool, the Java client 4.x and
librdkafka (confluent-kafka) pushing their metrics by default, and the broker
showing the decoded metrics of each client instance on /metrics; then what
Kafka answers to pushes it must refuse (stale subscription id, too large,
unknown compression, garbage, too soon, after a terminating push), with the
broker serving on."""

from __future__ import annotations

import gzip
import re
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from broker_process import BrokerProcess, metrics_broker, topic_name
from java_client import run_java
from kafka_tools import run_tool
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

from pylog.errors import ErrorCode
from pylog.protocol import ApiKey
from pylog.protocol.client import KafkaConnection
from pylog.protocol.messages import (
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    MetadataRequest,
    MetadataResponse,
    PushTelemetryRequest,
    PushTelemetryResponse,
)
from pylog.protocol.messages.describe_configs_request import DescribeConfigsResource
from pylog.protocol.messages.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
)

CLIENT_METRICS = 16
MAX_BYTES = 4096
ZERO = "AAAAAAAAAAAAAAAAAAAAAA"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, int]]:
    with metrics_broker(
        tmp_path_factory.mktemp("telemetry") / "data", {"telemetry.max.bytes": MAX_BYTES}
    ) as got:
        yield got


@pytest.fixture(scope="module")
def subscribed(broker: tuple[BrokerProcess, int], tmp_path_factory: pytest.TempPathFactory) -> str:
    """Kafka's tool sets the subscription every client matches: all of
    Kafka's client metrics, pushed every second."""
    b, _ = broker
    work = tmp_path_factory.mktemp("tools")
    run_tool(
        "kafka-client-metrics", "--bootstrap-server", b.bootstrap, "--alter", "--name", "all",
        "--metrics", "org.apache.kafka.", "--interval", "1000", workdir=work,
    )  # fmt: skip
    described = run_tool(
        "kafka-client-metrics", "--bootstrap-server", b.bootstrap, "--describe", "--name", "all",
        workdir=work,
    ).stdout  # fmt: skip
    assert "org.apache.kafka." in described and "1000" in described, described
    return "all"


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        return str(r.read().decode())


def _pushed(port: int, client_id: str, deadline_s: float = 60) -> list[str]:
    """The pylog_client_telemetry samples of ``client_id``, once there are some."""
    pattern = re.compile(rf'^pylog_client_telemetry\{{[^}}]*client_id="{re.escape(client_id)}"')
    end = time.monotonic() + deadline_s
    while True:
        lines = [x for x in _scrape(port).splitlines() if pattern.match(x)]
        if lines or time.monotonic() > end:
            return lines
        time.sleep(0.3)


def test_java_client_pushes_its_metrics(broker: tuple[BrokerProcess, int], subscribed: str) -> None:
    b, port = broker
    client_id = f"java-telemetry-{uuid.uuid4().hex[:6]}"
    topic = topic_name("telemetry")
    run_java("admin", "--bootstrap", b.bootstrap, "create-topic", "--topic", topic).check()
    run_java("produce", "--bootstrap", b.bootstrap, "--topic", topic, "--count", "5").check()
    # A consumer that polls for a while: it fetches its subscription, then
    # pushes every second (a short-lived producer closes before its first push).
    consumed = run_java(
        "consume", "--bootstrap", b.bootstrap, "--topic", topic, "--assign", "0",
        "--timeout-ms", "15000", "--property", f"client.id={client_id}",
    )  # fmt: skip
    assert consumed.last["type"] == "done" and consumed.last["count"] == 5, consumed.stderr
    lines = _pushed(port, client_id)
    assert lines, f"no telemetry of {client_id} on /metrics"
    assert any('client_software_name="apache-kafka-java"' in x for x in lines), lines[:3]
    # named metrics of Kafka's consumer, with their attributes as labels
    assert any('metric="org.apache.kafka.consumer.' in x for x in lines), lines[:5]
    ids = {re.search(r'client_instance_id="([^"]+)"', x).group(1) for x in lines}  # type: ignore[union-attr]
    assert len(ids) == 1 and len(ids.pop()) == 22
    assert re.search(
        rf'^pylog_client_telemetry_last_push_timestamp_seconds\{{[^}}]*client_id="{client_id}"',
        _scrape(port),
        re.M,
    )


def test_librdkafka_pushes_its_metrics(broker: tuple[BrokerProcess, int], subscribed: str) -> None:
    from confluent_kafka import Producer

    b, port = broker
    client_id = f"rdkafka-telemetry-{uuid.uuid4().hex[:6]}"
    topic = topic_name("telemetry-rd")
    p = Producer({"bootstrap.servers": b.bootstrap, "client.id": client_id})
    try:
        for i in range(10):
            p.produce(topic, value=f"v{i}".encode())
        assert p.flush(30) == 0
        lines = _pushed(port, client_id)
    finally:
        p.flush(5)
    assert lines, f"no telemetry of {client_id} on /metrics"
    assert any('client_software_name="confluent-kafka-python"' in x
               or 'client_software_name="librdkafka"' in x for x in lines), lines[:3]  # fmt: skip
    assert any('metric="org.apache.kafka.producer.' in x for x in lines), lines[:5]


def _metrics_payload(name: str, value: float, attribute: str = "t1") -> bytes:
    point = NumberDataPoint(
        as_double=value,
        time_unix_nano=time.time_ns(),
        attributes=[KeyValue(key="topic", value=AnyValue(string_value=attribute))],
    )
    data = MetricsData(
        resource_metrics=[
            ResourceMetrics(
                scope_metrics=[
                    ScopeMetrics(
                        metrics=[
                            Metric(name=name, gauge=Gauge(data_points=[point])),
                            Metric(
                                name=f"{name}.total",
                                sum=Sum(
                                    data_points=[point],
                                    aggregation_temporality=AGGREGATION_TEMPORALITY_DELTA,
                                    is_monotonic=True,
                                ),
                            ),
                        ]
                    )
                ]
            )
        ]
    )
    return bytes(data.SerializeToString())


def _get(c: KafkaConnection, instance: str = ZERO) -> GetTelemetrySubscriptionsResponse:
    return c.request(
        ApiKey.GET_TELEMETRY_SUBSCRIPTIONS,
        0,
        GetTelemetrySubscriptionsRequest(client_instance_id=instance),
        GetTelemetrySubscriptionsResponse,
    )


def _push(
    c: KafkaConnection,
    sub: GetTelemetrySubscriptionsResponse,
    metrics: bytes,
    *,
    compression: int = 0,
    subscription_id: int | None = None,
    terminating: bool = False,
    instance: str | None = None,
) -> int:
    got = c.request(
        ApiKey.PUSH_TELEMETRY,
        0,
        PushTelemetryRequest(
            client_instance_id=instance or sub.client_instance_id,
            subscription_id=sub.subscription_id if subscription_id is None else subscription_id,
            terminating=terminating,
            compression_type=compression,
            metrics=metrics,
        ),
        PushTelemetryResponse,
    )
    return int(got.error_code)


def test_pushes_kafka_refuses(broker: tuple[BrokerProcess, int], subscribed: str) -> None:
    b, port = broker
    client_id = f"raw-telemetry-{uuid.uuid4().hex[:6]}"
    with KafkaConnection(b.bootstrap, client_id=client_id) as c:
        sub = _get(c)
        assert sub.error_code == ErrorCode.NONE
        assert sub.client_instance_id != ZERO and len(sub.client_instance_id) == 22
        assert sub.requested_metrics == ["org.apache.kafka."]
        assert sub.push_interval_ms == 1000
        assert sub.telemetry_max_bytes == MAX_BYTES
        assert sub.accepted_compression_types == [4, 3, 1, 2]  # zstd, lz4, gzip, snappy
        assert sub.delta_temporality is True
        # asked again at once: too soon
        assert _get(c, sub.client_instance_id).error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED

        good = _metrics_payload("org.apache.kafka.test.<script>alert(1)</script>", 7.0)
        assert _push(c, sub, good, subscription_id=sub.subscription_id ^ 1) == (
            ErrorCode.UNKNOWN_SUBSCRIPTION_ID
        )
        # a stale subscription id: the client may fetch its subscription at once
        sub = _get(c, sub.client_instance_id)
        assert sub.error_code == ErrorCode.NONE
        assert _push(c, sub, gzip.compress(good), compression=1) == ErrorCode.NONE
        # another push within the interval is throttled
        assert _push(c, sub, good) == ErrorCode.THROTTLING_QUOTA_EXCEEDED

        # fresh instances for each refusal (the pacing would throttle one instance)
        def fresh() -> GetTelemetrySubscriptionsResponse:
            s = _get(c)
            assert s.error_code == ErrorCode.NONE
            return s

        assert _push(c, fresh(), b"\x00" * (MAX_BYTES + 1)) == ErrorCode.TELEMETRY_TOO_LARGE
        assert _push(c, fresh(), good, compression=9) == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        assert _push(c, fresh(), b"\xff\x13garbage" * 20) == ErrorCode.INVALID_RECORD
        assert _push(c, fresh(), b"not gzip at all", compression=1) == ErrorCode.INVALID_RECORD
        assert _push(c, fresh(), good, instance=ZERO) == ErrorCode.INVALID_REQUEST
        # an instance the broker never gave out: its subscription id is unknown
        unknown = "q" + uuid.uuid4().hex[:21]
        assert _push(c, fresh(), good, instance=unknown) == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
        # a terminating push is taken even early; nothing after it
        last = fresh()
        assert _push(c, last, good) == ErrorCode.NONE
        assert _push(c, last, good, terminating=True) == ErrorCode.NONE
        assert _push(c, last, good, terminating=True) == ErrorCode.INVALID_REQUEST

        # the broker serves on
        meta = c.request(ApiKey.METADATA, 9, MetadataRequest(topics=[]), MetadataResponse)
        assert meta.brokers

    text = _scrape(port)
    mine = [x for x in text.splitlines() if f'client_id="{client_id}"' in x]
    gauge = [x for x in mine if 'metric="org.apache.kafka.test.<script>alert(1)</script>"' in x]
    assert gauge and 'topic="t1"' in gauge[0] and gauge[0].endswith(" 7"), mine
    errors = re.search(r"^pylog_client_telemetry_decode_errors_total (\d+)$", text, re.M)
    assert errors is not None and int(errors.group(1)) >= 2


def test_subscription_configs(broker: tuple[BrokerProcess, int]) -> None:
    """IncrementalAlterConfigs / DescribeConfigs on the CLIENT_METRICS
    resource: Kafka's checks, and a subscription removed with its keys."""
    b, _ = broker

    def alter(name: str, *ops: tuple[str, int, str | None]) -> tuple[int, str | None]:
        with KafkaConnection(b.bootstrap) as c:
            got = c.request(
                ApiKey.INCREMENTAL_ALTER_CONFIGS,
                1,
                IncrementalAlterConfigsRequest(
                    resources=[
                        AlterConfigsResource(
                            resource_type=CLIENT_METRICS,
                            resource_name=name,
                            configs=[
                                AlterableConfig(name=k, config_operation=op, value=v)
                                for k, op, v in ops
                            ],
                        )
                    ]
                ),
                IncrementalAlterConfigsResponse,
            )
        r = got.responses[0]
        return int(r.error_code), r.error_message

    def describe(name: str) -> dict[str, str | None]:
        with KafkaConnection(b.bootstrap) as c:
            got = c.request(
                ApiKey.DESCRIBE_CONFIGS,
                4,
                DescribeConfigsRequest(
                    resources=[
                        DescribeConfigsResource(resource_type=CLIENT_METRICS, resource_name=name)
                    ]
                ),
                DescribeConfigsResponse,
            )
        res = got.results[0]
        assert res.error_code == ErrorCode.NONE, res.error_message
        return {e.name: e.value for e in res.configs}

    assert alter("bad", ("colour", 0, "red"))[0] == ErrorCode.INVALID_REQUEST
    assert alter("bad", ("interval.ms", 0, "50"))[0] == ErrorCode.INVALID_REQUEST
    assert alter("bad", ("match", 0, "hostname=x"))[0] == ErrorCode.INVALID_CONFIG
    assert alter("bad", ("match", 0, "client_id=(unclosed"))[0] == ErrorCode.INVALID_CONFIG
    defaults = {"metrics": "", "interval.ms": "300000", "match": ""}
    assert describe("bad") == defaults  # never set: Kafka 4.x shows the defaults
    assert alter("sub2", ("metrics", 0, "org.apache.kafka.producer."), ("interval.ms", 0, "2000"),
                 ("match", 0, "client_id=only-me.*"))[0] == ErrorCode.NONE  # fmt: skip
    # Kafka 4.3 refuses APPEND and SUBTRACT on a subscription's keys
    assert alter("sub2", ("metrics", 2, "x."))[0] == ErrorCode.INVALID_CONFIG
    producer_and_consumer = "org.apache.kafka.producer.,org.apache.kafka.consumer."
    assert alter("sub2", ("metrics", 0, producer_and_consumer))[0] == ErrorCode.NONE
    assert describe("sub2") == {
        "metrics": "org.apache.kafka.producer.,org.apache.kafka.consumer.",
        "interval.ms": "2000",
        "match": "client_id=only-me.*",
    }
    with KafkaConnection(b.bootstrap, client_id="only-me-1") as c:
        sub = _get(c)
    wanted = {"org.apache.kafka.producer.", "org.apache.kafka.consumer."}
    assert set(sub.requested_metrics) >= wanted
    with KafkaConnection(b.bootstrap, client_id="someone-else") as c:
        assert "org.apache.kafka.producer." not in _get(c).requested_metrics
    assert alter("sub2", ("metrics", 1, None), ("interval.ms", 1, None), ("match", 1, None))[0] == 0
    assert describe("sub2") == defaults
    with KafkaConnection(b.bootstrap, client_id="only-me-2") as c:
        assert "org.apache.kafka.producer." not in _get(c).requested_metrics


def test_subscriptions_survive_a_restart(tmp_path: Path) -> None:
    """The lone broker keeps its subscriptions in its metadata store."""
    b = BrokerProcess(tmp_path / "data").start()
    try:
        run_tool(
            "kafka-client-metrics", "--bootstrap-server", b.bootstrap, "--alter", "--name", "keep",
            "--metrics", "org.apache.kafka.producer.", "--interval", "5000", workdir=tmp_path,
        )  # fmt: skip
        b.stop()
        b.start()
        with KafkaConnection(b.bootstrap) as c:
            sub = _get(c)
        assert sub.requested_metrics == ["org.apache.kafka.producer."]
        assert sub.push_interval_ms == 5000
        tool = ("kafka-client-metrics", "--bootstrap-server", b.bootstrap)
        listed = run_tool(*tool, "--list", workdir=tmp_path).stdout.split()
        assert listed == ["keep"]
        run_tool(*tool, "--delete", "--name", "keep", workdir=tmp_path)
        assert run_tool(*tool, "--list", workdir=tmp_path).stdout.split() == []
    finally:
        if b.proc is not None:
            b.stop()
