"""Client quotas per user, against one broker process with a SASL_PLAINTEXT
(PLAIN) listener: Kafka's kafka-configs sets and describes them
(AlterClientQuotas / DescribeClientQuotas); alice, over her quota, is told to
wait (throttle_time_ms in the Produce and Fetch responses, as confluent-kafka's
throttle_cb reports them) while bob, under his, is not; nothing is lost to the
throttling; /metrics shows each user's byte rate and throttle time.

KIP-612's IP quotas: ``kafka-configs --entity-type ips`` sets a
``connection_creation_rate``; connections from that address beyond it are
closed unanswered while another loopback address (127.0.0.2) is served, and
removing the quota restores the address at once. KIP-599's
``controller_mutation_rate``: CreateTopics, CreatePartitions and DeleteTopics
beyond a client's quota get THROTTLING_QUOTA_EXCEEDED (new versions) or a
throttle (old ones).

Assertions are on what the broker answered and measured, never on how long
anything took."""

from __future__ import annotations

import re
import socket
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
from pylog.protocol.codec import encode_request
from pylog.protocol.messages import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)
from pylog.protocol.messages import alter_client_quotas_request as alter_in
from pylog.protocol.messages import create_topics_request as create_in
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
          validate_only: bool = False,
          source: str = "127.0.0.1") -> list[tuple[int, str | None]]:  # fmt: skip
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
    with KafkaConnection(broker.plaintext, source_address=(source, 0)) as c:
        r = c.request(ApiKey.ALTER_CLIENT_QUOTAS, 1, body, AlterClientQuotasResponse)
    return [(e.error_code, e.error_message) for e in r.entries]


def describe(
    broker: Broker,
    components: list[tuple[str, int, str | None]],
    strict: bool = False,
    source: str = "127.0.0.1",
) -> DescribeClientQuotasResponse:
    body = DescribeClientQuotasRequest(
        components=[
            describe_in.ComponentData(entity_type=t, match_type=m, match=n)
            for t, m, n in components
        ],
        strict=strict,
    )
    with KafkaConnection(broker.plaintext, source_address=(source, 0)) as c:
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


# ---------------------------------------------------------------- KIP-612: IP quotas

# Kafka's ip quota is connections per second over the quota window (11
# windows of 1 s, measured over at least 10 s): at 1/s an address may open 10
# connections at once; BURST goes well past that, so some are refused
# whatever the timing.
BURST = 25


def burst(broker: Broker, source: str, count: int = BURST) -> tuple[int, int]:
    """Opens ``count`` connections from ``source`` at once, each sending an
    ApiVersions: (answered, closed unanswered)."""
    port = int(broker.ports["PLAINTEXT"])
    socks = [
        socket.create_connection(("127.0.0.1", port), timeout=WAIT, source_address=(source, 0))
        for _ in range(count)
    ]
    answered = closed = 0
    try:
        for i, s in enumerate(socks):
            s.sendall(encode_request(ApiKey.API_VERSIONS, 0, i, "burst", {}))
        for s in socks:
            try:
                got = s.recv(4)
            except ConnectionResetError:
                got = b""
            if got:
                answered += 1
            else:
                closed += 1
    finally:
        for s in socks:
            s.close()
    return answered, closed


def test_kafka_configs_ip_quota_closes_connections_beyond_the_rate(
    broker: Broker, tmp_path: Path
) -> None:
    def configs(*args: str) -> str:
        return run_tool(
            "kafka-configs", "--bootstrap-server", broker.plaintext, *args, workdir=tmp_path
        ).stdout

    configs("--alter", "--entity-type", "ips", "--entity-default",
            "--add-config", "connection_creation_rate=1000")  # fmt: skip
    configs("--alter", "--entity-type", "ips", "--entity-name", "127.0.0.1",
            "--add-config", "connection_creation_rate=1")  # fmt: skip
    try:
        # DescribeClientQuotas from the other address (127.0.0.1 is limited now)
        assert entities(describe(broker, [("ip", 2, None)], source="127.0.0.2")) == {
            (("ip", "127.0.0.1"),): {"connection_creation_rate": 1.0},
            (("ip", None),): {"connection_creation_rate": 1000.0},
        }
        answered, closed = burst(broker, "127.0.0.1")
        assert closed > 0, "no connection from 127.0.0.1 was refused at 1 connection/s"
        assert answered + closed == BURST
        # another address is served meanwhile (the default's 1000/s)
        assert burst(broker, "127.0.0.2") == (BURST, 0)
        text = broker.scrape()
        assert metric_value(text, "kafka_network_socketserver_ip_connection_throttled_total") > 0
    finally:
        # removed from the address that is not limited; no restart
        assert alter(
            broker,
            ([("ip", "127.0.0.1")], {"connection_creation_rate": None}),
            ([("ip", None)], {"connection_creation_rate": None}),
            source="127.0.0.2",
        ) == [(0, None), (0, None)]  # fmt: skip
    assert burst(broker, "127.0.0.1") == (BURST, 0)
    assert entities(describe(broker, [("ip", 2, None)])) == {}


def test_bad_ip_quotas_are_refused_and_change_nothing(broker: Broker) -> None:
    results = alter(
        broker,
        ([("ip", "127.0.0.9")], {"connection_creation_rate": -5.0}),  # Kafka: not an INT
        ([("ip", "127.0.0.9")], {"connection_creation_rate": 2.5}),
        ([("ip", "127.0.0.9")], {"connection_creation_rate": 3e9}),  # beyond an INT
        ([("ip", "127.0.0.9")], {"producer_byte_rate": 1.0}),  # a user/client key
        ([("ip", None)], {"no_such_quota": 1.0}),
        ([("ip", "not an address")], {"connection_creation_rate": 1.0}),
        ([("ip", "")], {"connection_creation_rate": 1.0}),
        ([("ip", "127.0.0.9"), ("client-id", "x")], {"connection_creation_rate": 1.0}),
        ([("user", "dave")], {"connection_creation_rate": 1.0}),  # an IP key on a user
    )
    assert [code for code, _ in results] == [42] * 9, results
    assert results[0][1] == "Configuration connection_creation_rate must be a INT value"
    assert results[3][1] == "Invalid configuration key producer_byte_rate"
    assert results[5][1] == "not an address is not a valid IP or resolvable host."
    assert "IP entity should not be used with user/client ID entity" in str(results[7][1])
    assert entities(describe(broker, [])) == {}
    # an IP filter beside a user one is refused; a user filter sees no IPs
    assert describe(broker, [("ip", 0, "127.0.0.9"), ("user", 2, None)]).error_code == 42
    # validate_only: checked, not stored
    assert alter(broker, ([("ip", "127.0.0.9")], {"connection_creation_rate": 3.0}),
                 validate_only=True) == [(0, None)]  # fmt: skip
    assert entities(describe(broker, [("ip", 0, "127.0.0.9")])) == {}


def metric_value(text: str, family: str) -> float:
    found = re.findall(rf"^{family}(?:{{[^}}]*}})? (\S+)$", text, re.M)
    assert found, f"no {family} in the metrics"
    return sum(float(v) for v in found)


# ---------------------------------------------------------------- KIP-599: controller mutations


def create_topics(broker: Broker, client_id: str, names: list[str], partitions: int | list[int],
                  version: int) -> CreateTopicsResponse:  # fmt: skip
    counts = partitions if isinstance(partitions, list) else [partitions] * len(names)
    body = CreateTopicsRequest(
        topics=[
            create_in.CreatableTopic(
                name=n, num_partitions=p, replication_factor=1, assignments=[], configs=[]
            )
            for n, p in zip(names, counts, strict=True)
        ],
        timeout_ms=30_000,
        validate_only=False,
    )
    with KafkaConnection(broker.plaintext, client_id=client_id) as c:
        return c.request(ApiKey.CREATE_TOPICS, version, body, CreateTopicsResponse)


def test_controller_mutation_rate_refuses_the_excess_of_a_burst(broker: Broker) -> None:
    """controller_mutation_rate=1 on client id "mutator": a full bucket holds
    11 partitions (11 windows of 1 s); topics of 4, 4 and 40 partitions take
    it to 7, 3, then -37 (the third found it at 3: it passes whole), so of
    five topics in one CreateTopics v7 the last two are refused, with the
    time the bucket takes to refill — 37 s, longer than the rest of the test
    takes, so what follows finds it below zero whatever the timing."""
    assert alter(broker, ([("client-id", "mutator")], {"controller_mutation_rate": 1.0})) == [
        (0, None)
    ]
    try:
        names = [topic_name("mutated") for _ in range(5)]
        r = create_topics(broker, "mutator", names, [4, 4, 40, 4, 4], 7)
        codes = {t.name: t.error_code for t in r.topics}
        assert [codes[n] for n in names] == [0, 0, 0, 89, 89], r
        refused = [t for t in r.topics if t.error_code == 89]
        assert all(t.error_message == "The throttling quota has been exceeded." for t in refused)
        assert all(t.num_partitions == -1 and not t.configs for t in refused)
        assert r.throttle_time_ms > 0
        # the refused topics were not made; the others were
        meta = {t.name for t in create_topics(broker, "free", names[3:], 4, 7).topics
                if t.error_code == 0}  # fmt: skip
        assert meta == set(names[3:])  # created now, by a client without a quota
        # a client without a quota is never held back
        free = create_topics(broker, "free", [topic_name("free") for _ in range(5)], 4, 7)
        assert [t.error_code for t in free.topics] == [0] * 5 and free.throttle_time_ms == 0
        # still below zero: the strict versions of the other two refuse too
        # (each on a new connection: a throttled one is not read meanwhile)
        with KafkaConnection(broker.plaintext, client_id="mutator") as c:
            grow = c.request(ApiKey.CREATE_PARTITIONS, 3, {
                "topics": [{"name": names[0], "count": 6, "assignments": None}],
                "timeout_ms": 30_000, "validate_only": False,
            }, CreatePartitionsResponse)  # fmt: skip
        assert [res.error_code for res in grow.results] == [89] and grow.throttle_time_ms > 0
        with KafkaConnection(broker.plaintext, client_id="mutator") as c:
            gone = c.request(ApiKey.DELETE_TOPICS, 5, {
                "topic_names": [names[1]], "timeout_ms": 30_000,
            }, DeleteTopicsResponse)  # fmt: skip
        assert [res.error_code for res in gone.responses] == [89]
        # an old version (CreateTopics v5) is not refused: it is throttled
        old = create_topics(broker, "mutator", [topic_name("old")], 2, 5)
        assert [t.error_code for t in old.topics] == [0] and old.throttle_time_ms > 0
        text = broker.scrape()
        assert metric_value(text, "kafka_server_controllermutation_throttle_time") > 0
    finally:
        alter(broker, ([("client-id", "mutator")], {"controller_mutation_rate": None}))
    # without the quota the same client passes
    r = create_topics(broker, "mutator", [topic_name("after")], 4, 7)
    assert [t.error_code for t in r.topics] == [0] and r.throttle_time_ms == 0
