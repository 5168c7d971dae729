"""The broker's configuration and lifecycle: KafkaConfig, BrokerStates, clean and
unclean shutdown, `pylog broker start` under SIGTERM, the embedded test broker
and its pytest fixture, the metrics endpoint."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from pylog.broker.broker_state import BrokerState, IllegalBrokerStateTransition
from pylog.broker.kafka_server import KafkaServer
from pylog.errors import InvalidConfigurationError
from pylog.log.manager import CLEAN_SHUTDOWN_FILE
from pylog.server.config import ALL_BROKER_CONFIG, EndPoint, KafkaConfig
from pylog.testing import EmbeddedBroker, broker

PYLOG = str(Path(sys.executable).with_name("pylog"))

# ---------------------------------------------------------------- KafkaConfig


def test_kafka_defaults() -> None:
    c = KafkaConfig.from_props({})
    assert c.broker_id == 0
    assert c.listeners == (EndPoint("PLAINTEXT", "127.0.0.1", 9092),)
    assert c.advertised_listeners == c.listeners
    assert c.num_partitions == 1 and c.default_replication_factor == 1
    assert c.auto_create_topics_enable is True
    assert c.socket_request_max_bytes == 104857600
    assert c.queued_max_requests == 500
    assert c.connections_max_idle_ms == 600000
    assert c.max_connections == 2**31 - 1
    assert c.metrics_port == 0
    assert c.message_max_bytes == 1048588
    assert c.min_insync_replicas == 1
    assert c.get("num.network.threads") == 3 and c.get("num.io.threads") == 8
    assert c.log.log_dirs == ("/tmp/kafka-logs",)
    # one table: the storage keys are part of it
    assert "log.retention.hours" in ALL_BROKER_CONFIG and "listeners" in ALL_BROKER_CONFIG


def test_properties_file_with_overrides(tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text(
        "# a Kafka server.properties\n"
        "node.id=3\n"
        "listeners=PLAINTEXT://:9093,INTERNAL://127.0.0.1:0\n"
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT\n"
        "advertised.listeners=PLAINTEXT://broker3.example:9093,INTERNAL://127.0.0.1:0\n"
        "log.dirs=/data/a,/data/b\n"
        "num.partitions=4\n"
        "host.name=localhost\n"  # retired in Kafka 3.0: kept, logged, ignored
    )
    c = KafkaConfig.from_properties(props, {"num.partitions": "6", "log.segment.bytes": "2097152"})
    assert c.broker_id == 3
    assert c.listeners[0] == EndPoint("PLAINTEXT", "", 9093)
    assert c.listeners[0].bind_host is None
    assert c.advertised_listeners[0].host == "broker3.example"
    assert c.log_dirs == ("/data/a", "/data/b")
    assert c.num_partitions == 6
    assert c.log.default_log_config.segment_bytes == 2097152
    assert c.unknown == ("host.name",)
    bound = c.with_bound_ports({"INTERNAL": 40000, "PLAINTEXT": 9093})
    assert bound.listener("internal") == EndPoint("INTERNAL", "127.0.0.1", 40000)
    assert bound.advertised_listeners[1].port == 40000


def test_ipv6_listener() -> None:
    c = KafkaConfig.from_props({"listeners": "PLAINTEXT://[::1]:0"})
    assert c.listeners[0].host == "::1"
    assert str(c.listeners[0]) == "PLAINTEXT://[::1]:0"


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"listeners": "PLAINTEXT:/localhost:9092"}, "expected NAME://host:port"),
        ({"listeners": "PLAINTEXT://localhost:99999"}, "port must be"),
        ({"listeners": "FOO://localhost:9092"}, "not in listener.security.protocol.map"),
        ({"listeners": "PLAINTEXT://a:1,PLAINTEXT://b:2"}, "appears twice"),
        ({"advertised.listeners": "PLAINTEXT://0.0.0.0:9092"}, "wildcard"),
        ({"node.id": "1", "broker.id": "2"}, "must equal node.id"),
        ({"queued.max.requests": "0"}, "queued.max.requests"),
        ({"metrics.port": "70000"}, "metrics.port"),
        ({"auto.create.topics.enable": "yes"}, "auto.create.topics.enable"),
        ({"log.segment.bytes": "12"}, "log.segment.bytes"),
    ],
)
def test_invalid_values_name_the_key(props: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidConfigurationError, match=message):
        KafkaConfig.from_props(props)


def test_a_secured_listener_without_its_settings_is_refused_at_start() -> None:
    # docs/security.md: an SSL listener needs a keystore; a SASL listener needs
    # sasl.enabled.mechanisms (Kafka's default, GSSAPI, is not served).
    c = KafkaConfig.from_props({"listeners": "SSL://127.0.0.1:0"})
    with pytest.raises(InvalidConfigurationError, match="needs a keystore"):
        KafkaServer(c)
    c = KafkaConfig.from_props({"listeners": "SASL_PLAINTEXT://127.0.0.1:0"})
    with pytest.raises(InvalidConfigurationError, match="GSSAPI"):
        KafkaServer(c)


# ---------------------------------------------------------------- lifecycle


class _Recorder:
    """A handler factory that records the broker state it was called in."""

    def __init__(self) -> None:
        self.states: list[BrokerState] = []

    def __call__(self, server: KafkaServer) -> Any:
        self.states.append(server.state)

        class Refuse:
            async def handle(self, request: Any) -> None:
                return None

        return Refuse()


def _config(tmp_path: Path, **extra: str) -> KafkaConfig:
    return KafkaConfig.from_props(
        {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "data"), **extra}
    )


def test_states_through_start_and_clean_shutdown(tmp_path: Path) -> None:
    async def main() -> None:
        rec = _Recorder()
        server = KafkaServer(_config(tmp_path), handler_factory=rec)
        assert server.state is BrokerState.NotRunning
        await server.startup()
        assert rec.states == [BrokerState.Starting]  # a fresh directory: nothing to recover
        assert server.state is BrokerState.RunningAsBroker
        assert server.port > 0 and server.config.advertised_listeners[0].port == server.port
        with pytest.raises(IllegalBrokerStateTransition):
            server._transition(BrokerState.Starting)
        await server.shutdown()
        assert server.state is BrokerState.NotRunning
        await server.shutdown()  # idempotent

    asyncio.run(main())
    assert (tmp_path / "data" / CLEAN_SHUTDOWN_FILE).exists()


def test_unclean_directory_goes_through_recovering(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "t-0").mkdir(parents=True)  # data but no clean-shutdown marker

    async def main() -> None:
        rec = _Recorder()
        server = KafkaServer(_config(tmp_path), handler_factory=rec)
        await server.startup()
        assert rec.states == [BrokerState.RecoveringFromUncleanShutdown]
        assert server.state is BrokerState.RunningAsBroker
        await server.shutdown()

    asyncio.run(main())


def test_failed_start_up_releases_everything(tmp_path: Path) -> None:
    def boom(server: KafkaServer) -> Any:
        raise RuntimeError("handler construction failed")

    async def main() -> None:
        server = KafkaServer(_config(tmp_path), handler_factory=boom)
        with pytest.raises(RuntimeError, match="handler construction failed"):
            await server.startup()
        assert server.state is BrokerState.NotRunning
        # The log directory lock was released: another broker can start on it.
        again = KafkaServer(_config(tmp_path), handler_factory=_Recorder())
        await again.startup()
        await again.shutdown()

    asyncio.run(main())


def test_embedded_broker_starts_fast_and_serves_kafka_clients() -> None:
    from kafka import KafkaAdminClient

    t0 = time.perf_counter()
    with broker(num_partitions=2) as b:
        # its start time is a figure in bench/ (make bench); here only a hang fails
        assert time.perf_counter() - t0 < 10.0
        assert b.server is not None and b.server.state is BrokerState.RunningAsBroker
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers, request_timeout_ms=5000)
        try:
            assert admin.describe_cluster()["brokers"][0]["port"] == b.port
        finally:
            admin.close()
        log_dir = b.log_dir
        assert os.path.isdir(log_dir)
    assert not os.path.exists(log_dir)


def test_embedded_broker_restart_keeps_port_and_data(tmp_path: Path) -> None:
    b = EmbeddedBroker(log_dir=str(tmp_path)).start()
    try:
        port = b.port
        b.restart()
        assert b.port == port
        assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists() is False  # removed at start
    finally:
        b.close()
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()


def test_pytest_fixture(pylog_broker: EmbeddedBroker) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": pylog_broker.bootstrap_servers})
    md = admin.list_topics(timeout=5)
    assert [b.port for b in md.brokers.values()] == [pylog_broker.port]


def test_metrics_endpoint_reports_broker_state() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        mport = s.getsockname()[1]
    with broker({"metrics.port": str(mport)}) as b:
        text = urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics", timeout=5).read()
        assert b"kafka_server_kafkaserver_brokerstate 3" in text
        assert b"kafka_server_replicamanager_partitioncount 0" in text
        assert b.server is not None


def test_pylog_broker_start_and_sigterm(tmp_path: Path) -> None:
    data = tmp_path / "data"
    proc = subprocess.Popen(
        [PYLOG, "broker", "start", "--override", "listeners=PLAINTEXT://127.0.0.1:0",
         "--override", f"log.dirs={data}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("pylog broker 0 started: PLAINTEXT://127.0.0.1:"), line
        port = int(line.split("127.0.0.1:")[1].split()[0])
        from kafka import KafkaAdminClient

        admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{port}")
        admin.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert (data / CLEAN_SHUTDOWN_FILE).exists()


def test_pylog_broker_start_reports_bad_config(tmp_path: Path) -> None:
    done = subprocess.run(
        [PYLOG, "broker", "start", "--override", "num.partitions=zero"],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=tmp_path,
    )
    assert done.returncode == 2
    assert "num.partitions" in done.stderr


def test_high_watermarks_are_checkpointed_periodically_and_at_shutdown(tmp_path: Path) -> None:
    """``replication-offset-checkpoint`` holds each partition's high watermark
    (what segment readers such as the Spark source take as committed), written
    every ``replica.high.watermark.checkpoint.interval.ms`` and on shutdown."""
    from confluent_kafka import Producer

    from pylog.log.checkpoint import REPLICATION_OFFSET_CHECKPOINT, OffsetCheckpointFile

    checkpoint = OffsetCheckpointFile(str(tmp_path / REPLICATION_OFFSET_CHECKPOINT))
    with broker({"replica.high.watermark.checkpoint.interval.ms": 100}, log_dir=str(tmp_path)) as b:
        producer = Producer({"bootstrap.servers": b.bootstrap_servers, "linger.ms": 0})
        for i in range(7):
            producer.produce("hw", value=b"v%d" % i, partition=0)
        assert producer.flush(10) == 0
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if os.path.exists(checkpoint.path) and checkpoint.read().get(("hw", 0)) == 7:
                break
            time.sleep(0.05)
        assert checkpoint.read()[("hw", 0)] == 7  # written while running
    # With periodic writes an hour apart, only the shutdown can write the new HW.
    with broker(
        {"replica.high.watermark.checkpoint.interval.ms": 3_600_000}, log_dir=str(tmp_path)
    ) as b:
        producer = Producer({"bootstrap.servers": b.bootstrap_servers, "linger.ms": 0})
        for i in range(3):
            producer.produce("hw", value=b"w%d" % i, partition=0)
        assert producer.flush(10) == 0
        assert checkpoint.read()[("hw", 0)] == 7
    assert checkpoint.read()[("hw", 0)] == 10
