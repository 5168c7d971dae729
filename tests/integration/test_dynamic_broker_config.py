"""Dynamic broker configuration with Kafka's own ``kafka-configs`` (from the jars
`make kafka` fetches): a broker key changed per broker or cluster-wide takes
effect without a restart, survives one, is reported with Kafka's config
sources, and a key that is not dynamic or a bad value is refused with nothing
changed — on a lone broker (its embedded store) and on a ZooKeeper cluster
(``/config/brokers/<id>``, ``/config/brokers/<default>``, heard by every broker
through ``/config/changes``)."""

from __future__ import annotations

import json
import re
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from broker_process import BrokerProcess
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_tools import run_tool

from pylog.protocol import ApiKey
from pylog.protocol.client import KafkaConnection
from pylog.protocol.codec import encode_request
from pylog.protocol.messages import (
    AlterClientQuotasResponse,
    DescribeConfigsResponse,
    IncrementalAlterConfigsResponse,
)
from pylog.testing import LocalCluster, ZooKeeperServer

BIG = b"x" * 10_000  # past message.max.bytes=5000, well inside the default


def _configs(bootstrap: str, workdir: Path, *args: str, check: bool = True) -> str:
    done = run_tool(
        "kafka-configs", "--bootstrap-server", bootstrap, *args, workdir=workdir, check=check
    )
    return done.stdout + done.stderr


def _send(bootstrap: str, topic: str, partition: int, value: bytes) -> KafkaError | None:
    """Produce one record; the delivery error, or None once it is written."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "message.timeout.ms": 20_000})
    got: list[KafkaError | None] = []
    p.produce(topic, value, partition=partition, on_delivery=lambda err, _m: got.append(err))
    assert p.flush(30) == 0
    return got[0]


def _too_large(err: KafkaError | None) -> bool:
    return err is not None and err.code() == KafkaError.MSG_SIZE_TOO_LARGE


def _create(bootstrap: str, topic: str, partitions: int = 1, replication: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, replication)])[topic].result(30)


def _until(check: object, what: str, timeout: float = 30) -> None:
    """Changes reach the other brokers through ZooKeeper: wait (an upper bound)."""
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def test_kafka_configs_changes_a_lone_broker_without_a_restart(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", log_path=tmp_path / "broker.log",
                           log_level="INFO").start()  # fmt: skip
    try:
        b = broker.bootstrap
        topic = f"dyn-{uuid.uuid4().hex[:6]}"
        _create(b, topic)
        assert _send(b, topic, 0, BIG) is None

        out = _configs(b, tmp_path, "--alter", "--entity-type", "brokers", "--entity-name", "0",
                       "--add-config", "message.max.bytes=5000")  # fmt: skip
        assert "Completed updating config for broker 0." in out
        assert _too_large(_send(b, topic, 0, BIG))  # the topic inherits the new default
        assert _send(b, topic, 0, b"small") is None

        layer = "log.cleaner.threads=2,log.retention.ms=7200000"
        out = _configs(b, tmp_path, "--alter", "--entity-type", "brokers", "--entity-default",
                       "--add-config", layer)  # fmt: skip
        assert "Completed updating default config for brokers in the cluster." in out
        out = _configs(b, tmp_path, "--describe", "--entity-type", "brokers", "--entity-name", "0")
        assert "message.max.bytes=5000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:" in out
        out = _configs(b, tmp_path, "--describe", "--entity-type", "brokers", "--entity-default")
        assert "log.cleaner.threads=2 sensitive=false" in out
        assert "DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=7200000" in out
        log = (tmp_path / "broker.log").read_text()
        assert "log cleaner reconfigured: 2 threads" in log

        # Refused, nothing changed: a key that is not dynamic, a bad value.
        out = _configs(b, tmp_path, "--alter", "--entity-type", "brokers", "--entity-name", "0",
                       "--add-config", "num.partitions=3", check=False)  # fmt: skip
        assert "Cannot update these configs dynamically: Set(num.partitions)" in out
        out = _configs(b, tmp_path, "--alter", "--entity-type", "brokers", "--entity-name", "0",
                       "--add-config", "message.max.bytes=lots", check=False)  # fmt: skip
        assert "message.max.bytes" in out and "InvalidConfigurationException" in out
        # a dynamic password needs password.encoder.secret, which this broker lacks
        out = _configs(b, tmp_path, "--alter", "--entity-type", "brokers", "--entity-name", "0",
                       "--add-config", "listener.name.plaintext.ssl.key.password=x",
                       check=False)  # fmt: skip
        assert "Password encoder secret not configured" in out
        assert _too_large(_send(b, topic, 0, BIG))

        # The dynamic layers live in the broker's store: a restart keeps them.
        broker.stop()
        broker.start()
        assert _too_large(_send(b, topic, 0, BIG))
        out = _configs(b, tmp_path, "--describe", "--entity-type", "brokers", "--entity-name", "0")
        assert "message.max.bytes=5000" in out

        _configs(b, tmp_path, "--alter", "--entity-type", "brokers", "--entity-name", "0",
                 "--delete-config", "message.max.bytes")  # fmt: skip
        assert _send(b, topic, 0, BIG) is None
    finally:
        if broker.proc is not None:
            broker.stop()


@pytest.fixture(scope="module")
def cluster(
    pylog_zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalCluster]:
    c = LocalCluster(
        3,
        {"controlled.shutdown.retry.backoff.ms": 200},
        zookeeper=pylog_zookeeper,
        directory=str(tmp_path_factory.mktemp("cluster")),
    )
    try:
        yield c.start()
    finally:
        c.close()


def test_cluster_wide_and_per_broker_configs(cluster: LocalCluster, tmp_path: Path) -> None:
    """The cluster default reaches every broker; a per-broker value overrides it
    on that broker alone; both sit in Kafka's znodes, where a Kafka broker of
    the same cluster would read them."""
    b = cluster.bootstrap_servers
    topic = f"dyn-{uuid.uuid4().hex[:6]}"
    _create(b, topic, partitions=3)
    leaders = {p: cluster.wait_for_leader(topic, p) for p in range(3)}
    assert sorted(leaders.values()) == sorted(cluster.registered())  # one partition each

    _configs(b, tmp_path, "--alter", "--entity-type", "brokers", "--entity-default",
             "--add-config", "message.max.bytes=5000")  # fmt: skip
    assert cluster.zk is not None
    doc = json.loads(cluster.zk.get("/config/brokers/<default>")[0])
    assert doc == {"version": 1, "config": {"message.max.bytes": "5000"}}
    for p in range(3):
        _until(lambda p=p: _too_large(_send(b, topic, p, BIG)), f"partition {p} refusing")

    special = leaders[1]
    _configs(b, tmp_path, "--alter", "--entity-type", "brokers", "--entity-name", str(special),
             "--add-config", "message.max.bytes=20000")  # fmt: skip
    doc = json.loads(cluster.zk.get(f"/config/brokers/{special}")[0])
    assert doc["config"] == {"message.max.bytes": "20000"}
    assert _send(b, topic, 1, BIG) is None
    assert _too_large(_send(b, topic, 0, BIG))
    assert _too_large(_send(b, topic, 2, BIG))

    # A broker started later reads the layers at start-up.
    victim = cluster.broker(leaders[2])
    victim.stop()
    victim.start()
    out = _configs(b, tmp_path, "--describe", "--all", "--entity-type", "brokers",
                   "--entity-name", str(leaders[2]))  # fmt: skip
    assert "message.max.bytes=5000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:" in out
    assert _too_large(_send(b, topic, 2, BIG))

    _configs(b, tmp_path, "--alter", "--entity-type", "brokers", "--entity-default",
             "--delete-config", "message.max.bytes")  # fmt: skip
    _configs(b, tmp_path, "--alter", "--entity-type", "brokers", "--entity-name", str(special),
             "--delete-config", "message.max.bytes")  # fmt: skip
    for p in range(3):
        _until(lambda p=p: _send(b, topic, p, BIG) is None, f"partition {p} accepting")


def test_tls_certificate_rotation_without_a_restart(tmp_path: Path) -> None:
    """A listener's keystore replaced through ``kafka-configs`` (Kafka's
    per-listener ``listener.name.<l>.ssl.keystore.location``): connections
    made from then on get the new certificate, the open ones keep working,
    and a keystore that does not load is refused with nothing changed."""
    from confluent_kafka import KafkaException
    from security_support import KEY_PASSWORD, listener_ports, make_certs

    old, new = make_certs(tmp_path / "old"), make_certs(tmp_path / "new")  # two CAs
    broker = BrokerProcess(tmp_path / "data", {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(old.broker_keystore),
        "ssl.key.password": KEY_PASSWORD,
    }).start()  # fmt: skip
    try:
        ssl_port = listener_ports(broker.start_line)["SSL"]
        plain = broker.bootstrap

        def over_tls(ca: Path) -> dict[str, object]:
            return {"bootstrap.servers": f"127.0.0.1:{ssl_port}", "security.protocol": "SSL",
                    "ssl.ca.location": str(ca), "socket.timeout.ms": 5000}  # fmt: skip

        def trusted(ca: Path) -> bool:
            try:
                AdminClient(over_tls(ca)).list_topics(timeout=5)
                return True
            except KafkaException:
                return False

        topic = f"tls-{uuid.uuid4().hex[:6]}"
        _create(plain, topic)
        opened = Producer({**over_tls(old.ca), "linger.ms": 0})
        sent: list[KafkaError | None] = []
        opened.produce(topic, b"before", on_delivery=lambda err, _m: sent.append(err))
        assert opened.flush(30) == 0 and sent == [None]
        assert trusted(old.ca) and not trusted(new.ca)

        key = "listener.name.ssl.ssl.keystore.location"
        out = _configs(plain, tmp_path, "--alter", "--entity-type", "brokers", "--entity-name",
                       "0", "--add-config", f"{key}={new.broker_keystore}")  # fmt: skip
        assert "Completed updating config for broker 0." in out
        assert trusted(new.ca) and not trusted(old.ca)
        opened.produce(topic, b"after", on_delivery=lambda err, _m: sent.append(err))
        assert opened.flush(30) == 0 and sent == [None, None]  # its connection stayed
        out = _configs(plain, tmp_path, "--describe", "--entity-type", "brokers",
                       "--entity-name", "0")  # fmt: skip
        assert f"{key}={new.broker_keystore} sensitive=false" in out

        # Refused, nothing changed.
        bad = _configs(plain, tmp_path, "--alter", "--entity-type", "brokers", "--entity-name",
                       "0", "--add-config", f"{key}={tmp_path / 'missing.pem'}",
                       check=False)  # fmt: skip
        assert "Validation of dynamic config update of SSLFactory failed" in bad
        bad = _configs(plain, tmp_path, "--alter", "--entity-type", "brokers", "--entity-name",
                       "0", "--add-config", f"ssl.keystore.location={old.broker_keystore}",
                       check=False)  # fmt: skip
        assert "can be dynamically updated only per-listener using the listener prefix" in bad
        bad = _configs(plain, tmp_path, "--alter", "--entity-type", "brokers",
                       "--entity-default", "--add-config", f"{key}={old.broker_keystore}",
                       check=False)  # fmt: skip
        assert "broker id must be specified" in bad
        assert trusted(new.ca) and not trusted(old.ca)

        # The layer is kept: a restart serves the rotated certificate.
        broker.stop()
        broker.start()
        ssl_port = listener_ports(broker.start_line)["SSL"]
        assert trusted(new.ca) and not trusted(old.ca)
    finally:
        if broker.proc is not None:
            broker.stop()


def test_keystore_password_rotation_with_password_encoder_secret(tmp_path: Path) -> None:
    """A PKCS12 keystore and its password replaced together through
    ``kafka-configs`` (Kafka's ``listener.name.<l>.ssl.keystore.password``):
    the password is stored encrypted with ``password.encoder.secret`` in
    Kafka's format, new connections get the new certificate, a restart
    decrypts it again, and a wrong password is refused with nothing changed."""
    from confluent_kafka import KafkaException
    from cryptography.hazmat.primitives.serialization import BestAvailableEncryption, pkcs12
    from security_support import STORE_PASSWORD, listener_ports, make_certs

    from pylog.security.password_encoder import PasswordEncoder

    old, new = make_certs(tmp_path / "old"), make_certs(tmp_path / "new")  # two CAs
    key, cert, chain = pkcs12.load_key_and_certificates(
        new.broker_p12.read_bytes(), STORE_PASSWORD.encode()
    )
    rotated = tmp_path / "rotated.p12"
    rotated.write_bytes(pkcs12.serialize_key_and_certificates(
        b"broker", key, cert, chain, BestAvailableEncryption(b"rotated-secret")))  # fmt: skip
    broker = BrokerProcess(tmp_path / "data", {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        "ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(old.broker_p12),
        "ssl.keystore.password": STORE_PASSWORD,
        "password.encoder.secret": "encoder-secret",
    }).start()  # fmt: skip
    try:
        plain = broker.bootstrap

        def trusted(ca: Path) -> bool:
            ssl_port = listener_ports(broker.start_line)["SSL"]
            try:
                AdminClient({"bootstrap.servers": f"127.0.0.1:{ssl_port}",
                             "security.protocol": "SSL", "ssl.ca.location": str(ca),
                             "socket.timeout.ms": 5000}).list_topics(timeout=5)  # fmt: skip
                return True
            except KafkaException:
                return False

        assert trusted(old.ca)
        prefix = "listener.name.ssl.ssl.keystore"
        # a wrong password is refused, nothing stored (IncrementalAlterConfigs,
        # what kafka-configs sends)
        with KafkaConnection(plain) as c:
            refused = c.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {
                "resources": [{"resource_type": 4, "resource_name": "0", "configs": [
                    {"name": f"{prefix}.location", "config_operation": 0, "value": str(rotated)},
                    {"name": f"{prefix}.password", "config_operation": 0,
                     "value": "wrong-password"}]}],
                "validate_only": False,
            }, IncrementalAlterConfigsResponse)  # fmt: skip
        assert refused.responses[0].error_code == 40  # INVALID_CONFIG
        assert "Validation of dynamic config update of SSLFactory failed" in str(
            refused.responses[0].error_message
        )
        assert not (tmp_path / "data" / "pylog-metadata.journal").exists() or (
            "keyFactoryAlgorithm" not in (tmp_path / "data" / "pylog-metadata.journal").read_text()
        )
        out = _configs(plain, tmp_path, "--alter", "--entity-type", "brokers", "--entity-name",
                       "0", "--add-config",
                       f"{prefix}.location={rotated},{prefix}.password=rotated-secret")  # fmt: skip
        assert "Completed updating config for broker 0." in out
        assert trusted(new.ca) and not trusted(old.ca)
        # DescribeConfigs hides it (sensitive, no value), as kafka-configs --describe shows
        with KafkaConnection(plain) as c:
            described = c.request(ApiKey.DESCRIBE_CONFIGS, 4, {
                "resources": [{"resource_type": 4, "resource_name": "0",
                               "configuration_keys": None}],
                "include_synonyms": False, "include_documentation": False,
            }, DescribeConfigsResponse)  # fmt: skip
        entry = next(e for e in described.results[0].configs if e.name == f"{prefix}.password")
        assert entry.value is None and entry.is_sensitive

        # Stored as Kafka stores it: encrypted, never in the clear.
        stored = "".join(f.read_text() for f in (tmp_path / "data").glob("pylog-metadata.*"))
        assert "rotated-secret" not in stored
        found = re.search(r'"(keyFactoryAlgorithm:[^"]+)"', stored)
        assert found is not None, stored
        assert PasswordEncoder("encoder-secret").decode(found.group(1)) == "rotated-secret"

        broker.stop()
        broker.start()
        assert trusted(new.ca)  # the stored password decoded: the rotated keystore loads
    finally:
        if broker.proc is not None:
            broker.stop()


def _answered(port: int, source: str, hold: list[socket.socket] | None = None) -> bool:
    """Whether a connection from ``source`` gets an answer to ApiVersions
    (False: closed unanswered); kept open in ``hold`` when given."""
    s = socket.create_connection(("127.0.0.1", port), timeout=30, source_address=(source, 0))
    try:
        s.sendall(encode_request(ApiKey.API_VERSIONS, 0, 1, "probe", {}))
        try:
            got = s.recv(4)
        except ConnectionResetError:
            got = b""
    finally:
        if hold is None or not got:
            s.close()
        else:
            hold.append(s)
    return bool(got)


def _ip_quota(bootstrap: str, ip: str, rate: float | None) -> None:
    body = {"entries": [{"entity": [{"entity_type": "ip", "entity_name": ip}],
                         "ops": [{"key": "connection_creation_rate", "value": rate or 0.0,
                                  "remove": rate is None}]}],
            "validate_only": False}  # fmt: skip
    with KafkaConnection(bootstrap) as c:
        r = c.request(ApiKey.ALTER_CLIENT_QUOTAS, 1, body, AlterClientQuotasResponse)
    assert [e.error_code for e in r.entries] == [0], r


def test_ip_quotas_and_connection_limits_reach_every_broker(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    """KIP-612 on ZooKeeper: an IP quota set through one broker is
    ``/config/ips/<ip>`` in Kafka's JSON, announced under ``/config/changes``
    as ``ips/<ip>``, and every broker applies it (rate 0: every connection
    from the address is closed unanswered) and drops it; the dynamic
    ``max.connections.per.ip.overrides`` set cluster-wide with kafka-configs
    holds on every broker; a listener's ``max.connection.creation.rate`` of 0
    is refused as Kafka refuses it."""
    assert cluster.zk is not None
    ports = {i: cluster.broker(i).port for i in cluster.registered()}
    first = ports[min(ports)]
    _ip_quota(f"127.0.0.1:{first}", "127.0.0.2", 0)
    doc = json.loads(cluster.zk.get("/config/ips/127.0.0.2")[0])
    assert doc == {"version": 1, "config": {"connection_creation_rate": "0"}}
    notes = [json.loads(cluster.zk.get(f"/config/changes/{n}")[0])
             for n in cluster.zk.get_children("/config/changes")]  # fmt: skip
    assert {"version": 2, "entity_path": "ips/127.0.0.2"} in notes
    try:
        for port in ports.values():
            _until(lambda port=port: not _answered(port, "127.0.0.2"), f"{port} refusing")
            assert _answered(port, "127.0.0.1")  # other addresses are served
    finally:
        _ip_quota(f"127.0.0.1:{first}", "127.0.0.2", None)
    for port in ports.values():
        _until(lambda port=port: _answered(port, "127.0.0.2"), f"{port} serving again")

    b = cluster.bootstrap_servers
    _configs(b, tmp_path, "--alter", "--entity-type", "brokers", "--entity-default",
             "--add-config", "max.connections.per.ip.overrides=127.0.0.3:1")  # fmt: skip
    held: list[socket.socket] = []
    try:
        for port in ports.values():

            def one_only(port: int = port) -> bool:
                for s in held:
                    s.close()
                held.clear()
                return _answered(port, "127.0.0.3", held) and not _answered(port, "127.0.0.3")

            _until(one_only, f"{port} holding 127.0.0.3 to one connection")
            assert _answered(port, "127.0.0.1")
    finally:
        for s in held:
            s.close()
        _configs(b, tmp_path, "--alter", "--entity-type", "brokers", "--entity-default",
                 "--delete-config", "max.connections.per.ip.overrides")  # fmt: skip
    out = _configs(b, tmp_path, "--alter", "--entity-type", "brokers", "--entity-name",
                   str(min(ports)), "--add-config",
                   "listener.name.plaintext.max.connection.creation.rate=0",
                   check=False)  # fmt: skip
    assert "Invalid max.connection.creation.rate 0" in out, out


PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"


def test_sasl_users_and_mechanisms_change_without_a_restart(tmp_path: Path) -> None:
    """A SASL_PLAINTEXT listener's JAAS text and mechanisms changed through
    ``kafka-configs --add-config-file`` (``listener.name.<l>.plain.sasl.jaas.config``,
    a PASSWORD, and ``listener.name.<l>.sasl.enabled.mechanisms``): a JAAS text
    that does not parse is refused with nothing stored; then user carol added
    and SCRAM-SHA-256 removed: carol produces without a restart, a new SCRAM
    handshake gets UNSUPPORTED_SASL_MECHANISM while a connection opened before
    the change still gets SCRAM; the JAAS text is stored encrypted, described
    masked, and all of it survives a restart."""
    from security_support import listener_ports

    from pylog.errors import KafkaError as PylogKafkaError
    from pylog.protocol.messages import SaslHandshakeResponse
    from pylog.security.sasl_client_authenticator import ClientSecurity, authenticate_blocking

    jaas_key = "listener.name.sasl_plaintext.plain.sasl.jaas.config"
    mechanisms_key = "listener.name.sasl_plaintext.sasl.enabled.mechanisms"
    broker = BrokerProcess(tmp_path / "data", {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        jaas_key: f'{PLAIN_MODULE} required user_alice="alice-pw";',
        "password.encoder.secret": "encoder-secret",
    }).start()  # fmt: skip
    try:
        plain = broker.bootstrap

        def sasl() -> str:
            return f"127.0.0.1:{listener_ports(broker.start_line)['SASL_PLAINTEXT']}"

        def produced_as(user: str, password: str) -> bool:
            p = Producer({"bootstrap.servers": sasl(), "security.protocol": "SASL_PLAINTEXT",
                          "sasl.mechanism": "PLAIN", "sasl.username": user,
                          "sasl.password": password, "linger.ms": 0,
                          "message.timeout.ms": 8000})  # fmt: skip
            got: list[KafkaError | None] = []
            p.produce("jaas", b"v", on_delivery=lambda err, _m: got.append(err))
            p.flush(15)
            return got == [None]

        def refused(user: str, password: str) -> bool:
            """PLAIN login refused (SASL_AUTHENTICATION_FAILED), over a raw connection."""
            security = ClientSecurity("SASL_PLAINTEXT", None, sasl_mechanism="PLAIN",
                                      username=user, password=password)  # fmt: skip
            try:
                KafkaConnection(
                    sasl(), authenticate=lambda c: authenticate_blocking(c.request, security)
                ).close()
            except PylogKafkaError as e:
                assert "SASL_AUTHENTICATION_FAILED" in str(e), e
                return True
            return False

        def handshake(c: KafkaConnection, mechanism: str) -> SaslHandshakeResponse:
            return c.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": mechanism},
                             SaslHandshakeResponse)  # fmt: skip

        _create(plain, "jaas")
        assert produced_as("alice", "alice-pw") and refused("carol", "carol-pw")

        # A JAAS text without its closing ';' does not parse: INVALID_CONFIG, nothing stored.
        with KafkaConnection(plain) as c:
            bad = c.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {
                "resources": [{"resource_type": 4, "resource_name": "0", "configs": [
                    {"name": jaas_key, "config_operation": 0,
                     "value": f'{PLAIN_MODULE} required user_carol="carol-pw"'}]}],
                "validate_only": False,
            }, IncrementalAlterConfigsResponse)  # fmt: skip
        assert bad.responses[0].error_code == 40, bad  # INVALID_CONFIG
        assert "SaslChannelBuilder" in str(bad.responses[0].error_message)
        assert refused("carol", "carol-pw")

        before = KafkaConnection(sasl())  # opened before the change: keeps its settings
        try:
            changes = tmp_path / "sasl.properties"
            changes.write_text(
                f'{jaas_key}={PLAIN_MODULE} required user_alice="alice-pw" '
                f'user_carol="carol-pw";\n{mechanisms_key}=PLAIN\n'
            )
            out = _configs(plain, tmp_path, "--alter", "--entity-type", "brokers",
                           "--entity-name", "0", "--add-config-file", str(changes))  # fmt: skip
            assert "Completed updating config for broker 0." in out
            assert produced_as("carol", "carol-pw") and produced_as("alice", "alice-pw")
            assert refused("carol", "wrong")
            with KafkaConnection(sasl()) as c:
                refused_scram = handshake(c, "SCRAM-SHA-256")
            assert refused_scram.error_code == 33  # UNSUPPORTED_SASL_MECHANISM
            assert refused_scram.mechanisms == ["PLAIN"]
            assert handshake(before, "SCRAM-SHA-256").error_code == 0
        finally:
            before.close()

        # Described masked (sensitive, no value); stored encrypted, never in the clear.
        with KafkaConnection(plain) as c:
            described = c.request(ApiKey.DESCRIBE_CONFIGS, 4, {
                "resources": [{"resource_type": 4, "resource_name": "0",
                               "configuration_keys": None}],
                "include_synonyms": False, "include_documentation": False,
            }, DescribeConfigsResponse)  # fmt: skip
        entries = {e.name: e for e in described.results[0].configs}
        assert entries[jaas_key].value is None and entries[jaas_key].is_sensitive
        assert entries[mechanisms_key].value == "PLAIN"
        stored = "".join(f.read_text() for f in (tmp_path / "data").glob("pylog-metadata.*"))
        assert "carol-pw" not in stored and "keyFactoryAlgorithm:" in stored

        broker.stop()
        broker.start()
        assert produced_as("carol", "carol-pw")
        with KafkaConnection(sasl()) as c:
            assert handshake(c, "SCRAM-SHA-256").error_code == 33
    finally:
        if broker.proc is not None:
            broker.stop()
