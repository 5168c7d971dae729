"""``pylog user-scram`` against a broker process: a user added is described
with its mechanisms and iterations, logs in with confluent-kafka over
SASL_SSL, survives a broker restart (the embedded store keeps it salted),
and once deleted no longer logs in. The command also runs over a secured
listener with Kafka's ``--command-config`` properties."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from broker_process import PYLOG, BrokerProcess
from security_support import listener_ports, make_certs, secure_listeners


def pylog(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYLOG, *args], capture_output=True, text=True, timeout=60,
        env={**os.environ, **env}, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def login(broker: BrokerProcess, ca: Path, mechanism: str, user: str, password: str) -> Any:
    """An AdminClient's Metadata over SASL_SSL: None, or librdkafka's error."""
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient

    errors: list[Any] = []
    port = listener_ports(broker.start_line)["SASL_SSL"]
    admin = AdminClient({
        "bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(ca), "sasl.mechanism": mechanism, "sasl.username": user,
        "sasl.password": password, "error_cb": errors.append,
    })  # fmt: skip
    try:
        admin.list_topics(timeout=5)
        return None
    except Exception:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            admin.poll(0.2)  # serves error_cb
            auth = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
            if auth:
                return auth[0]
        raise AssertionError(f"no authentication error: {errors}") from None


def test_add_describe_login_restart_delete(tmp_path: Path) -> None:
    certs = make_certs(tmp_path / "certs")
    b = BrokerProcess(tmp_path / "data", secure_listeners(certs)).start()
    try:
        plain = f"127.0.0.1:{listener_ports(b.start_line)['PLAINTEXT']}"
        out = pylog("user-scram", "add", "--bootstrap-server", plain, "--user", "bob",
                    "--mechanism", "SCRAM-SHA-256", "--mechanism", "SCRAM-SHA-512",
                    "--iterations", "4096", PYLOG_SCRAM_PASSWORD="bob-secret")  # fmt: skip
        assert out.returncode == 0, out.stderr
        assert "bob: SCRAM-SHA-256, SCRAM-SHA-512 set (4096 iterations)" in out.stdout
        out = pylog("user-scram", "describe", "--bootstrap-server", plain)
        assert out.stdout.splitlines() == [
            "User: bob\tSCRAM-SHA-256 (iterations 4096), SCRAM-SHA-512 (iterations 4096)"
        ]
        assert login(b, certs.ca, "SCRAM-SHA-256", "bob", "bob-secret") is None
        assert login(b, certs.ca, "SCRAM-SHA-512", "bob", "wrong") is not None
        # too few iterations: refused by the client and, asked directly, the broker
        out = pylog("user-scram", "add", "--bootstrap-server", plain, "--user", "carol",
                    "--iterations", "1000", PYLOG_SCRAM_PASSWORD="x")  # fmt: skip
        assert out.returncode != 0

        b.stop()
        b.start()
        plain = f"127.0.0.1:{listener_ports(b.start_line)['PLAINTEXT']}"
        assert login(b, certs.ca, "SCRAM-SHA-512", "bob", "bob-secret") is None
        store = (tmp_path / "data" / "pylog-metadata.json").read_text()
        journal = (tmp_path / "data" / "pylog-metadata.journal").read_text()
        assert "bob-secret" not in store + journal
        assert oct((tmp_path / "data" / "pylog-metadata.journal").stat().st_mode & 0o777) == "0o600"

        # the same tool over SASL_SSL with a Kafka client properties file
        config = tmp_path / "client.properties"
        config.write_text(
            "security.protocol=SASL_SSL\n"
            "sasl.mechanism=SCRAM-SHA-512\n"
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule "
            'required username="bob" password="bob-secret";\n'
            f"ssl.truststore.type=PEM\nssl.truststore.location={certs.ca}\n"
        )
        sasl_ssl = f"127.0.0.1:{listener_ports(b.start_line)['SASL_SSL']}"
        out = pylog("user-scram", "describe", "--bootstrap-server", sasl_ssl,
                    "--command-config", str(config), "--user", "bob")  # fmt: skip
        assert out.returncode == 0, out.stderr
        assert out.stdout.startswith("User: bob\t")

        out = pylog("user-scram", "delete", "--bootstrap-server", plain, "--user", "bob",
                    "--mechanism", "SCRAM-SHA-256")  # fmt: skip
        assert out.returncode == 0, out.stderr
        assert login(b, certs.ca, "SCRAM-SHA-256", "bob", "bob-secret") is not None
        assert login(b, certs.ca, "SCRAM-SHA-512", "bob", "bob-secret") is None
        out = pylog("user-scram", "delete", "--bootstrap-server", plain, "--user", "bob")
        assert out.returncode == 0, out.stderr
        out = pylog("user-scram", "describe", "--bootstrap-server", plain, "--user", "bob")
        assert out.returncode != 0
        assert "RESOURCE_NOT_FOUND" in out.stderr or "does not exist" in out.stderr
        deadline = time.monotonic() + 5
        while login(b, certs.ca, "SCRAM-SHA-512", "bob", "bob-secret") is None:
            assert time.monotonic() < deadline
    finally:
        b.stop()


@pytest.mark.skipif(sys.platform != "linux", reason="checks a file mode")
def test_the_password_is_never_on_the_command_line_unless_given(tmp_path: Path) -> None:
    out = pylog("user-scram", "add", "--help")
    assert "prompted for when not given" in out.stdout
