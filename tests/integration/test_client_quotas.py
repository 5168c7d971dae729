"""Client quotas per user, against one broker process with a SASL_PLAINTEXT
(PLAIN) listener: Kafka's kafka-configs sets and describes them
(AlterClientQuotas / DescribeClientQuotas); alice, over her quota, is told to
wait (throttle_time_ms in the Produce and Fetch responses, as confluent-kafka's
throttle_cb reports them) while bob, under his, is not; nothing is lost to the
throttling; /metrics shows each user's byte rate and throttle time.

Assertions are on what the broker answered and measured, never on how long
anything took."""

from __future__ import annotations

import re
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from broker_process import BrokerProcess, topic_name
from kafka_tools import run_tool
from security_support import listener_ports, plain_jaas

from pylog.protocol import ApiKey
from pylog.protocol.client import KafkaConnection
from pylog.protocol.messages import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)
from pylog.protocol.messages import alter_client_quotas_request as alter_in
from pylog.protocol.messages import describe_client_quotas_request as describe_in

USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
WAIT = 60.0  # upper bound on any wait: only catches hangs
# Kafka measures a rate over at least 10 s (quota.window.num=11 windows of
# 1 s, the defaults): alice's 120 KB in one go are 12 KB/s against her
# 10 KB/s whatever the timing, and bob's quota is ten thousand times that.
ALICE_RATE = 10_000  # bytes/s
BOB_RATE = 100 * 1024 * 1024
VALUE = b"q" * 1000
COUNT = 120
# A Fetch answer larger than the quota's 10 s could never pass (it is
# answered without data each time): alice's consumer asks for 60 KB at most.
FETCH_BYTES = 60_000


class Broker:
    def __init__(self, proc: BrokerProcess, metrics_port: int) -> None:
        self.proc = proc
        self.ports = listener_ports(proc.start_line)
        self.metrics_port = metrics_port

    @property
    def plaintext(self) -> str:
        return f"127.0.0.1:{self.ports['PLAINTEXT']}"

    @property
    def sasl(self) -> str:
        return f"127.0.0.1:{self.ports['SASL_PLAINTEXT']}"

    def scrape(self) -> str:
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as r:
            return str(r.read().decode())


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        metrics_port = int(s.getsockname()[1])
    base = tmp_path_factory.mktemp("quotas")
    proc = BrokerProcess(
        base / "data",
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas(USERS),
            "metrics.port": metrics_port,
            "metrics.host": "127.0.0.1",
        },
        log_path=base / "broker.log",
    ).start()
    try:
        yield Broker(proc, metrics_port)
    finally:
        proc.stop()


def alter(broker: Broker, *entries: tuple[list[tuple[str, str | None]], dict[str, float | None]],
          validate_only: bool = False) -> list[tuple[int, str | None]]:  # fmt: skip
    body = AlterClientQuotasRequest(
        entries=[
            alter_in.EntryData(
                entity=[alter_in.EntityData(entity_type=t, entity_name=n) for t, n in entity],
                ops=[
                    alter_in.OpData(key=k, value=v or 0.0, remove=v is None) for k, v in ops.items()
                ],
            )
            for entity, ops in entries
        ],
        validate_only=validate_only,
    )
    with KafkaConnection(broker.plaintext) as c:
        r = c.request(ApiKey.ALTER_CLIENT_QUOTAS, 1, body, AlterClientQuotasResponse)
    return [(e.error_code, e.error_message) for e in r.entries]


def describe(
    broker: Broker, components: list[tuple[str, int, str | None]], strict: bool = False
) -> DescribeClientQuotasResponse:
    body = DescribeClientQuotasRequest(
        components=[
            describe_in.ComponentData(entity_type=t, match_type=m, match=n)
            for t, m, n in components
        ],
        strict=strict,
    )
    with KafkaConnection(broker.plaintext) as c:
        return c.request(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, body, DescribeClientQuotasResponse)


Entities = dict[tuple[tuple[str, str | None], ...], dict[str, float]]


def entities(r: DescribeClientQuotasResponse) -> Entities:
    assert r.error_code == 0, r.error_message
    return {
        tuple((e.entity_type, e.entity_name) for e in entry.entity): {
            v.key: v.value for v in entry.values
        }
        for entry in r.entries or []
    }


def test_kafka_configs_manages_user_quotas(broker: Broker, tmp_path: Path) -> None:
    """Kafka's own tool (AlterClientQuotas / DescribeClientQuotas underneath)."""

    def configs(*args: str) -> str:
        return run_tool(
            "kafka-configs", "--bootstrap-server", broker.plaintext, *args, workdir=tmp_path
        ).stdout

    configs("--alter", "--entity-type", "users", "--entity-name", "carol",
            "--add-config", "producer_byte_rate=1048576,request_percentage=25.5")  # fmt: skip
    configs("--alter", "--entity-type", "users", "--entity-name", "carol",
            "--entity-type", "clients", "--entity-name", "etl",
            "--add-config", "consumer_byte_rate=2097152")  # fmt: skip
    configs("--alter", "--entity-type", "users", "--entity-default",
            "--add-config", "consumer_byte_rate=4194304")  # fmt: skip
    configs("--alter", "--entity-type", "clients", "--entity-name", "etl",
            "--add-config", "request_percentage=200")  # fmt: skip
    assert entities(describe(broker, [("client-id", 0, "etl")], strict=True)) == {
        (("client-id", "etl"),): {"request_percentage": 200.0}
    }
    got = entities(describe(broker, [("user", 0, "carol")]))
    assert got[(("user", "carol"),)] == {"producer_byte_rate": 1048576.0,
                                         "request_percentage": 25.5}  # fmt: skip
    assert got[(("user", "carol"), ("client-id", "etl"))] == {"consumer_byte_rate": 2097152.0}
    out = configs("--describe", "--entity-type", "users", "--entity-name", "carol")
    assert "producer_byte_rate=1048576.0" in out and "request_percentage=25.5" in out, out
    out = configs("--describe", "--entity-type", "users", "--entity-default")
    assert "consumer_byte_rate=4194304.0" in out, out
    configs("--alter", "--entity-type", "users", "--entity-name", "carol",
            "--delete-config", "request_percentage")  # fmt: skip
    got = entities(describe(broker, [("user", 0, "carol")], strict=True))
    assert got == {(("user", "carol"),): {"producer_byte_rate": 1048576.0}}
    # the rest removed over the protocol (each tool run is a JVM start)
    assert (
        alter(
            broker,
            ([("user", None)], {"consumer_byte_rate": None}),
            ([("client-id", "etl")], {"request_percentage": None}),
            ([("user", "carol"), ("client-id", "etl")], {"consumer_byte_rate": None}),
            ([("user", "carol")], {"producer_byte_rate": None}),
        )
        == [(0, None)] * 4
    )
    assert entities(describe(broker, [])) == {}


def test_bad_alterations_are_refused_per_entity(broker: Broker) -> None:
    results = alter(
        broker,
        ([("user", "dave")], {"producer_byte_rate": 1.5}),  # a LONG key
        ([("user", "dave")], {"no_such_quota": 1.0}),
        ([("user", "dave"), ("user", "erin")], {"producer_byte_rate": 1.0}),
        ([("ip", "127.0.0.1"), ("user", "dave")], {"producer_byte_rate": 1.0}),
        ([("group", "g")], {"producer_byte_rate": 1.0}),
        ([], {"producer_byte_rate": 1.0}),
        ([("user", "")], {"producer_byte_rate": 1.0}),
        ([("user", "dave")], {"producer_byte_rate": float("inf")}),
        ([("user", "dave")], {"request_percentage": float("nan")}),
        ([("user", "dave")], {"producer_byte_rate": 1e300}),
        ([("user", "dave")], {"consumer_byte_rate": 4096.0}),
    )
    assert [code for code, _ in results] == [42] * 10 + [0]
    assert "must be a LONG value" in str(results[0][1])
    assert "Invalid configuration key no_such_quota" in str(results[1][1])
    assert entities(describe(broker, [("user", 0, "dave")])) == {
        (("user", "dave"),): {"consumer_byte_rate": 4096.0}
    }
    # validate_only changes nothing
    assert alter(broker, ([("user", "dave")], {"consumer_byte_rate": None}),
                 validate_only=True) == [(0, None)]  # fmt: skip
    assert entities(describe(broker, [("user", 0, "dave")]))
    assert alter(broker, ([("user", "dave")], {"consumer_byte_rate": None})) == [(0, None)]
    r = describe(broker, [("user", 0, "x"), ("ip", 2, None)])
    assert r.error_code == 42 and r.entries is None
    assert describe(broker, [("group", 2, None)]).error_code == 35  # UNSUPPORTED_VERSION


def sasl_conf(broker: Broker, user: str, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": broker.sasl, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": USERS[user],
            **extra}  # fmt: skip


def produce_as(broker: Broker, user: str, topic: str) -> list[int]:
    """Produces COUNT records at once; the throttle times the client was told
    (confluent-kafka's throttle_cb: the Produce responses' throttle_time_ms)."""
    from confluent_kafka import Producer

    throttles: list[int] = []
    p = Producer(sasl_conf(broker, user, **{
        # batches of at most 20 KB: a Fetch returns whole batches
        "client.id": f"{user}-producer", "linger.ms": 50, "batch.size": 20_000,
        "throttle_cb": lambda e: throttles.append(int(e.throttle_time * 1000)),
    }))  # fmt: skip
    for _ in range(COUNT):
        p.produce(topic, value=VALUE, partition=0)
    assert p.flush(WAIT) == 0
    p.poll(0.5)  # the callbacks of the last answers
    return throttles


def test_one_user_is_throttled_and_another_is_not(broker: Broker) -> None:
    assert alter(
        broker,
        ([("user", None)], {"producer_byte_rate": ALICE_RATE, "consumer_byte_rate": ALICE_RATE}),
        ([("user", "bob")], {"producer_byte_rate": BOB_RATE, "consumer_byte_rate": BOB_RATE}),
    ) == [(0, None), (0, None)]  # fmt: skip
    try:
        alice_topic, bob_topic = topic_name("alice"), topic_name("bob")
        bob = produce_as(broker, "bob", bob_topic)
        assert not any(bob), f"bob, under his quota, was throttled: {bob}"
        # the metrics are rates over the last 11 s (throttle times: a minute):
        # each is read right after what it measures
        text = broker.scrape()
        assert metric(text, "kafka_server_produce_byte_rate", "bob") > 0
        assert metric(text, "kafka_server_produce_throttle_time", "bob") == 0
        alice = produce_as(broker, "alice", alice_topic)
        # Kafka's formula: (12 KB/s - 10 KB/s) / 10 KB/s of the 10 s window
        assert alice and max(alice) > 0, "alice, over her quota, was never throttled"
        assert metric(broker.scrape(), "kafka_server_produce_throttle_time", "alice") > 0

        # consuming: alice's fetches are throttled (answered without data, then
        # the client waits), bob's are not; both get every record
        alice_got, alice_fetch = consume_as(broker, "alice", alice_topic)
        assert alice_got == COUNT
        assert alice_fetch and max(alice_fetch) > 0
        assert metric(broker.scrape(), "kafka_server_fetch_throttle_time", "alice") > 0
        bob_got, bob_fetch = consume_as(broker, "bob", bob_topic)
        assert bob_got == COUNT
        assert not any(bob_fetch), bob_fetch
        assert metric(broker.scrape(), "kafka_server_fetch_byte_rate", "bob") > 0
    finally:
        alter(
            broker,
            ([("user", None)], {"producer_byte_rate": None, "consumer_byte_rate": None}),
            ([("user", "bob")], {"producer_byte_rate": None, "consumer_byte_rate": None}),
        )


def consume_as(broker: Broker, user: str, topic: str) -> tuple[int, list[int]]:
    from confluent_kafka import Consumer, TopicPartition

    throttles: list[int] = []
    c = Consumer(sasl_conf(broker, user, **{
        "group.id": topic, "enable.auto.commit": False, "client.id": f"{user}-consumer",
        "fetch.max.bytes": FETCH_BYTES, "max.partition.fetch.bytes": FETCH_BYTES,
        "message.max.bytes": FETCH_BYTES,
        "throttle_cb": lambda e: throttles.append(int(e.throttle_time * 1000)),
    }))  # fmt: skip
    c.assign([TopicPartition(topic, 0, 0)])
    got = 0
    deadline = time.monotonic() + WAIT
    while got < COUNT and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            assert m.value() == VALUE
            got += 1
    # let the last answers' throttle callbacks through
    c.poll(0.5)
    c.close()
    return got, throttles


def metric(text: str, family: str, user: str) -> float:
    found = re.findall(rf'^{family}\{{client_id="[^"]*",user="{user}"\}} (\S+)$', text, re.M)
    assert found, f"no {family} for {user} in:\n" + "\n".join(
        line for line in text.splitlines() if family in line
    )
    return sum(float(v) for v in found)
