"""Stock clients over every secured listener of one broker process.

The broker (certificates made by the test, tests/security_support.py) has
PLAINTEXT, SSL with mutual TLS, SASL_PLAINTEXT with PLAIN and SASL_SSL with
SCRAM-SHA-512/256 and PLAIN listeners. confluent-kafka, kafka-python,
aiokafka and kcat each produce and consume over SASL_SSL with SCRAM-SHA-512,
over SSL with a client certificate and over SASL_PLAINTEXT with PLAIN; a
wrong password fails cleanly for each, and the broker logs the failure once,
without the password. The SCRAM user is made with AlterUserScramCredentials
(confluent-kafka's AdminClient) and checked with DescribeUserScramCredentials.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from broker_process import BrokerProcess, topic_name
from java_client import run_java
from security_support import (
    PLAIN_MODULE,
    SCRAM_MODULE,
    Certs,
    listener_ports,
    make_certs,
    secure_listeners,
)

SCRAM_USER, SCRAM_PASSWORD = "alice", "alice-scram-secret"
PLAIN_USER, PLAIN_PASSWORD = "alice", "alice-secret"
WRONG = "not-the-password"
COUNT = 20


class Secured:
    def __init__(self, broker: BrokerProcess, certs: Certs, log: Path) -> None:
        self.broker = broker
        self.certs = certs
        self.log = log
        self.ports = listener_ports(broker.start_line)

    def address(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    def log_text(self) -> str:
        return self.log.read_text()


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    base = tmp_path_factory.mktemp("secured")
    certs = make_certs(base / "certs")
    log = base / "broker.log"
    # DEBUG: the request log (pylog.request) names each request's principal.
    b = BrokerProcess(base / "data", secure_listeners(certs), log_path=log, log_level="DEBUG")
    b.start()
    s = Secured(b, certs, log)
    admin = AdminClient({"bootstrap.servers": s.address("PLAINTEXT")})
    for mechanism in (ScramMechanism.SCRAM_SHA_512, ScramMechanism.SCRAM_SHA_256):
        futures = admin.alter_user_scram_credentials(
            [
                UserScramCredentialUpsertion(
                    SCRAM_USER, ScramCredentialInfo(mechanism, 8192), SCRAM_PASSWORD.encode()
                )
            ]
        )
        for f in futures.values():
            f.result(timeout=20)
    described = admin.describe_user_scram_credentials([SCRAM_USER])[SCRAM_USER].result(timeout=20)
    infos = {(i.mechanism, i.iterations) for i in described.scram_credential_infos}
    assert infos == {(ScramMechanism.SCRAM_SHA_512, 8192), (ScramMechanism.SCRAM_SHA_256, 8192)}
    try:
        yield s
    finally:
        b.stop()


# ---------------------------------------------------------------- the set-ups

# (listener, what the client logs in with)
SETUPS = {
    "sasl_ssl_scram512": ("SASL_SSL", "SCRAM-SHA-512", SCRAM_USER, SCRAM_PASSWORD),
    "ssl_mutual_tls": ("SSL", None, None, None),
    "sasl_plaintext_plain": ("SASL_PLAINTEXT", "PLAIN", PLAIN_USER, PLAIN_PASSWORD),
}
WRONG_PASSWORD = {
    "sasl_ssl_scram512": ("SASL_SSL", "SCRAM-SHA-512", SCRAM_USER, WRONG),
    "sasl_plaintext_plain": ("SASL_PLAINTEXT", "PLAIN", PLAIN_USER, WRONG),
}


def records(n: int) -> list[bytes]:
    return [f"secured-{i}".encode() for i in range(n)]


# ---- confluent-kafka (librdkafka)


def ck_conf(s: Secured, listener: str, mechanism: str | None, user: str | None,
            password: str | None) -> dict[str, Any]:  # fmt: skip
    conf: dict[str, Any] = {"bootstrap.servers": s.address(listener),
                            "security.protocol": listener}  # fmt: skip
    if listener.endswith("SSL"):
        conf["ssl.ca.location"] = str(s.certs.ca)
    if listener == "SSL":
        conf["ssl.certificate.location"] = str(s.certs.client_cert)
        conf["ssl.key.location"] = str(s.certs.client_key)
    if mechanism:
        conf.update({"sasl.mechanism": mechanism, "sasl.username": user,
                     "sasl.password": password})  # fmt: skip
    return conf


def ck_round_trip(s: Secured, setup: tuple[Any, ...]) -> list[bytes]:
    from confluent_kafka import Consumer, Producer, TopicPartition

    conf = ck_conf(s, *setup)
    topic = topic_name("ck")
    p = Producer({**conf, "linger.ms": 5})
    for v in records(COUNT):
        p.produce(topic, value=v)
    assert p.flush(30) == 0
    c = Consumer({**conf, "group.id": topic, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})  # fmt: skip
    c.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < COUNT and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
    c.close()
    return got


def ck_wrong(s: Secured, setup: tuple[Any, ...]) -> str:
    from confluent_kafka import KafkaError, Producer

    errors: list[Any] = []
    p = Producer({**ck_conf(s, *setup), "error_cb": errors.append})
    deadline = time.monotonic() + 20
    while not errors and time.monotonic() < deadline:
        p.poll(0.2)
    assert errors, "no error reported"
    assert errors[0].code() == KafkaError._AUTHENTICATION, errors[0]
    return str(errors[0].str())


# ---- kafka-python


def kp_conf(s: Secured, listener: str, mechanism: str | None, user: str | None,
            password: str | None) -> dict[str, Any]:  # fmt: skip
    conf: dict[str, Any] = {"bootstrap_servers": s.address(listener),
                            "security_protocol": listener}  # fmt: skip
    if listener.endswith("SSL"):
        conf["ssl_cafile"] = str(s.certs.ca)
    if listener == "SSL":
        conf["ssl_certfile"] = str(s.certs.client_cert)
        conf["ssl_keyfile"] = str(s.certs.client_key)
    if mechanism:
        conf.update({"sasl_mechanism": mechanism, "sasl_plain_username": user,
                     "sasl_plain_password": password})  # fmt: skip
    return conf


def kp_round_trip(s: Secured, setup: tuple[Any, ...]) -> list[bytes]:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    conf = kp_conf(s, *setup)
    topic = topic_name("kp")
    p = KafkaProducer(**conf, linger_ms=5)
    for v in records(COUNT):
        p.send(topic, value=v)
    p.flush(30)
    p.close()
    c = KafkaConsumer(**conf, auto_offset_reset="earliest", enable_auto_commit=False,
                      consumer_timeout_ms=1000)  # fmt: skip
    c.assign([TopicPartition(topic, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < COUNT and time.monotonic() < deadline:
        for batch in c.poll(timeout_ms=500).values():
            got.extend(m.value for m in batch)
    c.close()
    return got


class _Captured(logging.Handler):
    """The messages a client library logs (kafka-python and aiokafka report a
    failed login in their log and keep retrying until their timeout)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextlib.contextmanager
def captured(logger: str) -> Iterator[_Captured]:
    handler = _Captured()
    log = logging.getLogger(logger)
    log.addHandler(handler)
    try:
        yield handler
    finally:
        log.removeHandler(handler)


def kp_wrong(s: Secured, setup: tuple[Any, ...]) -> str:
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    with captured("kafka") as log, pytest.raises(KafkaError):
        # bootstrap_timeout_ms: kafka-python 3 retries a failed login until it
        # runs out (30 s by default); the first failure is what is checked.
        KafkaProducer(**kp_conf(s, *setup), max_block_ms=5_000, bootstrap_timeout_ms=3_000)
    return "\n".join(m for m in log.messages if "SaslAuthenticationFailed" in m)


# ---- aiokafka


def ak_conf(s: Secured, listener: str, mechanism: str | None, user: str | None,
            password: str | None) -> dict[str, Any]:  # fmt: skip
    from aiokafka.helpers import create_ssl_context

    conf: dict[str, Any] = {"bootstrap_servers": s.address(listener),
                            "security_protocol": listener}  # fmt: skip
    if listener.endswith("SSL"):
        conf["ssl_context"] = create_ssl_context(
            cafile=str(s.certs.ca),
            certfile=str(s.certs.client_cert) if listener == "SSL" else None,
            keyfile=str(s.certs.client_key) if listener == "SSL" else None,
        )
    if mechanism:
        conf.update({"sasl_mechanism": mechanism, "sasl_plain_username": user,
                     "sasl_plain_password": password})  # fmt: skip
    return conf


def ak_round_trip(s: Secured, setup: tuple[Any, ...]) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    topic = topic_name("ak")

    async def run() -> list[bytes]:
        p = AIOKafkaProducer(**ak_conf(s, *setup))
        await p.start()
        try:
            for v in records(COUNT):
                await p.send(topic, value=v)
            await p.flush()
        finally:
            await p.stop()
        c = AIOKafkaConsumer(**ak_conf(s, *setup), auto_offset_reset="earliest",
                             enable_auto_commit=False)  # fmt: skip
        await c.start()
        got: list[bytes] = []
        try:
            c.assign([TopicPartition(topic, 0)])
            c.seek(TopicPartition(topic, 0), 0)
            deadline = time.monotonic() + 30
            while len(got) < COUNT and time.monotonic() < deadline:
                for batch in (await c.getmany(timeout_ms=500)).values():
                    got.extend(m.value for m in batch if m.value is not None)
        finally:
            await c.stop()
        return got

    return asyncio.run(run())


def ak_wrong(s: Secured, setup: tuple[Any, ...]) -> str:
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaError

    async def run() -> None:
        p = AIOKafkaProducer(**ak_conf(s, *setup), request_timeout_ms=5_000)
        try:
            with pytest.raises(KafkaError):
                await p.start()
        finally:
            await p.stop()

    with captured("aiokafka") as log:
        asyncio.run(run())
    return "\n".join(m for m in log.messages if "SaslAuthenticationFailed" in m)


# ---- kcat


def kcat_args(s: Secured, listener: str, mechanism: str | None, user: str | None,
              password: str | None) -> list[str]:  # fmt: skip
    args = ["kcat", "-b", s.address(listener), "-X", f"security.protocol={listener}"]
    if listener.endswith("SSL"):
        args += ["-X", f"ssl.ca.location={s.certs.ca}"]
    if listener == "SSL":
        args += ["-X", f"ssl.certificate.location={s.certs.client_cert}",
                 "-X", f"ssl.key.location={s.certs.client_key}"]  # fmt: skip
    if mechanism:
        args += ["-X", f"sasl.mechanisms={mechanism}", "-X", f"sasl.username={user}",
                 "-X", f"sasl.password={password}"]  # fmt: skip
    return args


def kcat_round_trip(s: Secured, setup: tuple[Any, ...]) -> list[bytes]:
    topic = topic_name("kcat")
    base = kcat_args(s, *setup)
    subprocess.run([*base, "-P", "-t", topic], input=b"\n".join(records(COUNT)) + b"\n",
                   check=True, timeout=60)  # fmt: skip
    out = subprocess.run([*base, "-C", "-t", topic, "-o", "beginning", "-e", "-q"],
                         check=True, capture_output=True, timeout=60)  # fmt: skip
    return out.stdout.splitlines()


def kcat_wrong(s: Secured, setup: tuple[Any, ...]) -> str:
    out = subprocess.run([*kcat_args(s, *setup), "-L", "-m", "10"], capture_output=True,
                         timeout=60)  # fmt: skip
    assert out.returncode != 0
    return out.stderr.decode(errors="replace")


# ---- the Java client (kafka-clients), with Kafka's client properties


def java_props(s: Secured, listener: str, mechanism: str | None, user: str | None,
               password: str | None) -> list[str]:  # fmt: skip
    props = {"security.protocol": listener}
    if listener.endswith("SSL"):
        # KIP-651: PEM files straight into the Java client, no keytool
        props.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": str(s.certs.ca)})
    if listener == "SSL":
        props.update({"ssl.keystore.type": "PEM",
                      "ssl.keystore.location": str(s.certs.client_keystore)})  # fmt: skip
    if mechanism:
        module = SCRAM_MODULE if mechanism.startswith("SCRAM") else PLAIN_MODULE
        props.update({"sasl.mechanism": mechanism, "sasl.jaas.config":
                      f'{module} required username="{user}" password="{password}";'})  # fmt: skip
    return [arg for k, v in props.items() for arg in ("--property", f"{k}={v}")]


def java_round_trip(s: Secured, setup: tuple[Any, ...]) -> list[bytes]:
    topic = topic_name("java")
    props = java_props(s, *setup)
    address = s.address(setup[0])
    run_java("produce", "--bootstrap", address, "--topic", topic, "--count", str(COUNT),
             "--value-prefix", "secured-", *props).check()  # fmt: skip
    consumed = run_java("consume", "--bootstrap", address, "--topic", topic, "--assign", "0",
                        "--count", str(COUNT), *props).check()  # fmt: skip
    return [str(line["value"]).encode() for line in consumed.of("record")]


def java_wrong(s: Secured, setup: tuple[Any, ...]) -> str:
    result = run_java("produce", "--bootstrap", s.address(setup[0]), "--topic", "never",
                      "--count", "1", "--property", "max.block.ms=20000",
                      *java_props(s, *setup))  # fmt: skip
    assert result.returncode != 0, result.lines
    failures = result.of("failed") or result.of("error")
    assert failures, result.lines
    assert failures[0]["error"] == "SaslAuthenticationException", failures[0]
    return str(failures[0]["message"])


CLIENTS: dict[str, tuple[Callable[[Secured, tuple[Any, ...]], list[bytes]],
                         Callable[[Secured, tuple[Any, ...]], str]]] = {
    "confluent-kafka": (ck_round_trip, ck_wrong),
    "kafka-python": (kp_round_trip, kp_wrong),
    "aiokafka": (ak_round_trip, ak_wrong),
    "kcat": (kcat_round_trip, kcat_wrong),
    "java": (java_round_trip, java_wrong),
}  # fmt: skip


@pytest.mark.parametrize("setup", sorted(SETUPS))
@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_produce_and_consume(secured: Secured, client: str, setup: str) -> None:
    round_trip, _ = CLIENTS[client]
    assert round_trip(secured, SETUPS[setup]) == records(COUNT)


@pytest.mark.parametrize("setup", sorted(WRONG_PASSWORD))
@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_a_wrong_password_fails_cleanly(secured: Secured, client: str, setup: str) -> None:
    _, wrong = CLIENTS[client]
    listener, mechanism, _, _ = WRONG_PASSWORD[setup]
    before = secured.log_text().count("authentication failed on connection")
    message = wrong(secured, WRONG_PASSWORD[setup])
    # each client reports the broker's answer: Kafka's message for the mechanism
    expected = (
        "Authentication failed during authentication due to invalid credentials with "
        "SASL mechanism SCRAM-SHA-512"
        if mechanism == "SCRAM-SHA-512"
        else "Authentication failed: Invalid username or password"
    )
    assert expected in message, message
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        log = secured.log_text()
        if log.count("authentication failed on connection") > before:
            break
        time.sleep(0.1)
    failures = [line for line in log.splitlines() if "authentication failed on connection" in line][
        before:
    ]
    assert failures, "the broker logged no failed authentication"
    assert all(f"listener {listener}, mechanism {mechanism}" in line for line in failures)
    assert WRONG not in log  # the password is never logged
    # the broker still serves a client with the right password
    assert ck_round_trip(secured, SETUPS[setup])[:1] == records(1)


def test_the_certificate_names_the_principal(secured: Secured) -> None:
    """ssl.principal.mapping.rules makes User:alice of CN=alice,OU=eng,O=pylog;
    the request log (DEBUG, pylog.request) shows each request's principal."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({**ck_conf(secured, *SETUPS["ssl_mutual_tls"]), "client.id": "mtls-probe"})
    assert admin.list_topics(timeout=20).brokers
    deadline = time.monotonic() + 10
    lines: list[str] = []
    while not lines and time.monotonic() < deadline:
        lines = [
            line
            for line in secured.log_text().splitlines()
            if "Completed request Metadata " in line and "listener SSL)" in line
        ]
        time.sleep(0.1)
    assert lines and all("principal User:alice:" in line for line in lines), lines[:3]
    # Without a client certificate the SSL listener (ssl.client.auth=required) refuses.
    errors: list[Any] = []
    conf = ck_conf(secured, "SSL", None, None, None)
    del conf["ssl.certificate.location"], conf["ssl.key.location"]
    p = __import__("confluent_kafka").Producer({**conf, "error_cb": errors.append})
    deadline = time.monotonic() + 20
    while not errors and time.monotonic() < deadline:
        p.poll(0.2)
    assert errors
    deadline = time.monotonic() + 10
    while "TLS handshake failed" not in secured.log_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert "TLS handshake failed" in secured.log_text()


def test_describe_configs_hides_the_secrets(secured: Secured) -> None:
    """The broker's passwords are PASSWORD keys: DescribeConfigs marks them
    sensitive with no value (Kafka's behaviour); the JAAS text (listener
    keys) is never described."""
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    admin = AdminClient({"bootstrap.servers": secured.address("PLAINTEXT")})
    resource = ConfigResource(ResourceType.BROKER, "0")
    entries = admin.describe_configs([resource])[resource].result(timeout=20)
    key = entries["ssl.key.password"]
    assert key.is_sensitive and key.value is None
    assert entries["ssl.keystore.location"].value == str(secured.certs.broker_keystore)
    assert not entries["ssl.keystore.location"].is_sensitive
    assert not any(name.startswith("listener.name.") for name in entries)
    assert all("secret" not in (e.value or "") for e in entries.values())


def test_the_request_log_names_each_requests_principal(secured: Secured) -> None:
    """pylog.request (DEBUG), Kafka's kafka.request.logger: the SASL user on
    SASL_SSL and SASL_PLAINTEXT, User:ANONYMOUS on PLAINTEXT, with the listener."""
    from confluent_kafka.admin import AdminClient

    for setup in ("sasl_ssl_scram512", "sasl_plaintext_plain"):
        conf = ck_conf(secured, *SETUPS[setup])
        assert AdminClient(conf).list_topics(timeout=20).brokers
    assert (
        AdminClient({"bootstrap.servers": secured.address("PLAINTEXT")})
        .list_topics(timeout=20)
        .brokers
    )
    want = {
        "SASL_SSL": "principal User:alice:",
        "SASL_PLAINTEXT": "principal User:alice:",
        "PLAINTEXT": "principal User:ANONYMOUS:",
    }
    found: dict[str, list[str]] = {}
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        log = secured.log_text().splitlines()
        found = {
            listener: [
                line
                for line in log
                if "Completed request Metadata " in line and f"listener {listener})" in line
            ]
            for listener in want
        }
        if all(found.values()):
            break
        time.sleep(0.1)
    for listener, principal in want.items():
        assert found[listener], f"no Metadata request logged on {listener}"
        assert all(principal in line for line in found[listener]), found[listener][:3]
