"""A three-broker cluster on ZooKeeper whose brokers talk to each other over
SASL_SSL with SCRAM-SHA-512 (``inter.broker.listener.name``,
``sasl.mechanism.inter.broker.protocol``, the brokers' own login in
``listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config``).

The brokers' user is written to ZooKeeper before they start (``pylog
user-scram add --zookeeper``, as Kafka's ``kafka-configs --zookeeper``); the
controller's requests and the followers' fetches then log in with it. A
client user added through one broker (AlterUserScramCredentials, on the
controller) reaches every broker by the ``/config/changes`` notification;
confluent-kafka produces acks=all to a three-replica topic over SASL_SSL,
every replica catches up (the ISR is full), and the records read back from
another broker."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

from broker_process import PYLOG, topic_name
from security_support import make_certs, secure_listeners

from pylog.testing import ZooKeeperServer
from pylog.testing.cluster import LocalCluster

WAIT = 90.0  # upper bound: only catches hangs
BROKER_USER, BROKER_PASSWORD = "admin", "admin-secret"
CLIENT_USER, CLIENT_PASSWORD = "carol", "carol-secret"


def test_sasl_ssl_between_brokers(pylog_zookeeper: ZooKeeperServer, tmp_path: Path) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import (
        AdminClient,
        NewTopic,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    certs = make_certs(tmp_path / "certs")
    chroot = f"/sec-{os.getpid()}-{time.monotonic_ns()}"
    connect = pylog_zookeeper.connect + chroot
    out = subprocess.run(
        [PYLOG, "user-scram", "add", "--zookeeper", connect, "--user", BROKER_USER,
         "--mechanism", "SCRAM-SHA-512"],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYLOG_SCRAM_PASSWORD": BROKER_PASSWORD},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    overrides: dict[str, object] = {
        k: v
        for k, v in secure_listeners(certs).items()
        if not k.startswith(("listener.name.ssl.", "listener.name.sasl_plaintext."))
    }
    overrides.update({
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "inter.broker.listener.name": "SASL_SSL",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512",
    })  # fmt: skip
    with LocalCluster(
        3, overrides, zookeeper=pylog_zookeeper, chroot=chroot, directory=str(tmp_path / "c")
    ) as cluster:
        ports = {}
        for b in cluster.brokers.values():
            registration = cluster._json(f"/brokers/ids/{b.broker_id}")
            assert registration is not None
            sasl = [e for e in registration["endpoints"] if e.startswith("SASL_SSL://")]
            assert registration["listener_security_protocol_map"]["SASL_SSL"] == "SASL_SSL"
            ports[b.broker_id] = int(sasl[0].rsplit(":", 1)[1])
        plaintext = AdminClient({"bootstrap.servers": cluster.brokers[1].bootstrap_servers})
        # The controller's UpdateMetadata reached every broker over SASL_SSL:
        # each knows all three brokers.
        deadline = time.monotonic() + WAIT
        while True:
            counts = [
                len(AdminClient({"bootstrap.servers": b.bootstrap_servers})
                    .list_topics(timeout=10).brokers)
                for b in cluster.brokers.values()
            ]  # fmt: skip
            if counts == [3, 3, 3]:
                break
            assert time.monotonic() < deadline, counts
            time.sleep(0.2)

        # a client user, added on the controller, known to every broker
        for f in plaintext.alter_user_scram_credentials([
            UserScramCredentialUpsertion(
                CLIENT_USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                CLIENT_PASSWORD.encode(),
            )
        ]).values():  # fmt: skip
            f.result(timeout=30)
        topic = topic_name("secure")
        for f in plaintext.create_topics([NewTopic(topic, 1, 3)]).values():
            f.result(timeout=30)

        def sasl_ssl(broker_id: int) -> dict[str, Any]:
            return {
                "bootstrap.servers": f"127.0.0.1:{ports[broker_id]}",
                "security.protocol": "SASL_SSL", "ssl.ca.location": str(certs.ca),
                "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": CLIENT_USER,
                "sasl.password": CLIENT_PASSWORD,
            }  # fmt: skip

        values = [f"v{i}".encode() for i in range(200)]
        p = Producer({**sasl_ssl(2), "acks": "all", "enable.idempotence": True})
        for v in values:
            p.produce(topic, value=v)
        assert p.flush(60) == 0
        cluster.wait_for_full_isr(topic, 1, timeout=WAIT)
        leader = cluster.leader(topic, 0)
        other = next(i for i in cluster.brokers if i != leader)
        c = Consumer({**sasl_ssl(other), "group.id": topic, "auto.offset.reset": "earliest",
                      "enable.auto.commit": False})  # fmt: skip
        c.assign([TopicPartition(topic, 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + WAIT
        while len(got) < len(values) and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
        c.close()
        assert got == values
        # every follower's log holds the records (its fetcher logged in)
        for b in cluster.brokers.values():
            seg = Path(b.log_dir) / f"{topic}-0" / "00000000000000000000.log"
            assert seg.stat().st_size > 0
        for b in cluster.brokers.values():
            log = Path(b.log_file).read_text()
            assert "Traceback" not in log
            # no broker spoke to another before logging in, or failed to log in
            # (a client closing a connection mid-login, as librdkafka does with
            # the spare connections it opened when the consumer closes, is
            # logged as "closed by the client during SASL" and is no failure)
            assert "Unexpected Kafka request" not in log
            assert "authentication failed" not in log
            assert BROKER_PASSWORD not in log and CLIENT_PASSWORD not in log
        # the brokers' credential is in ZooKeeper in Kafka's format, salted
        user = cluster._json(f"/config/users/{BROKER_USER}")
        assert user is not None and user["version"] == 1
        assert user["config"]["SCRAM-SHA-512"].endswith(",iterations=8192")
        assert json.dumps(user).count("salt=") == 1
