"""ACLs on a three-broker ZooKeeper cluster: the brokers talk over
SASL_PLAINTEXT as ``User:broker``, a super user (as Kafka operators configure
the inter-broker principal), so replication keeps working under the
authorizer. ACLs created through one broker are stored in Kafka's
``/kafka-acl`` layout and announced by ``/kafka-acl-changes`` notifications:
every broker applies them, and a deletion through another broker reaches all
of them too. A plain user is refused, and its refused records are nowhere."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("confluent_kafka")

from broker_process import topic_name
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from security_support import plain_jaas

from pylog.testing import ZooKeeperServer
from pylog.testing.cluster import LocalCluster

WAIT = 90.0  # upper bound: only catches hangs
USERS = {"broker": "broker-secret", "admin": "admin-secret", "alice": "alice-secret",
         "bob": "bob-secret"}  # fmt: skip


def test_acls_on_a_cluster(pylog_zookeeper: ZooKeeperServer, tmp_path: Path) -> None:
    chroot = f"/acls-{os.getpid()}-{time.monotonic_ns()}"
    overrides: dict[str, object] = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas(
            USERS, login=("broker", USERS["broker"])
        ),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:broker;User:admin",
        "offsets.topic.replication.factor": 3,
        "offsets.topic.num.partitions": 1,
    }
    with LocalCluster(
        3, overrides, zookeeper=pylog_zookeeper, chroot=chroot, directory=str(tmp_path / "c")
    ) as cluster:
        ports = {}
        for b in cluster.brokers.values():
            registration = cluster._json(f"/brokers/ids/{b.broker_id}")
            assert registration is not None
            [ep] = [e for e in registration["endpoints"] if e.startswith("SASL_PLAINTEXT://")]
            ports[b.broker_id] = int(ep.rsplit(":", 1)[1])

        def conf(user: str, broker_id: int = 1) -> dict[str, Any]:
            return {
                "bootstrap.servers": f"127.0.0.1:{ports[broker_id]}",
                "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                "sasl.username": user, "sasl.password": USERS[user],
            }  # fmt: skip

        admins = {i: AdminClient(conf("admin", i)) for i in cluster.brokers}
        # The controller's UpdateMetadata (over SASL, as User:broker) reached every broker.
        deadline = time.monotonic() + WAIT
        while True:
            counts = [len(a.list_topics(timeout=10).brokers) for a in admins.values()]
            if counts == [3, 3, 3]:
                break
            assert time.monotonic() < deadline, counts
            time.sleep(0.2)

        topic, other = topic_name("orders"), topic_name("payroll")
        for f in admins[1].create_topics([NewTopic(topic, 1, 3), NewTopic(other, 1, 3)]).values():
            f.result(timeout=30)
        binding = AclBinding(
            ResourceType.TOPIC, topic, ResourcePatternType.LITERAL,
            "User:alice", "*", AclOperation.WRITE, AclPermissionType.ALLOW,
        )  # fmt: skip
        for f in admins[1].create_acls([binding]).values():
            f.result(timeout=30)
        alice_filter = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY,
                                        "User:alice", None, AclOperation.ANY,
                                        AclPermissionType.ANY)  # fmt: skip

        def seen_everywhere(expected: list[AclBinding]) -> None:
            deadline = time.monotonic() + WAIT
            while True:
                got = [a.describe_acls(alice_filter).result(timeout=20) for a in admins.values()]
                if all(g == expected for g in got):
                    return
                assert time.monotonic() < deadline, got
                time.sleep(0.2)

        seen_everywhere([binding])
        # and a PREFIXED one through another broker: /kafka-acl-extended
        prefixed = AclBinding(
            ResourceType.GROUP, "team-", ResourcePatternType.PREFIXED,
            "User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW,
        )  # fmt: skip
        for f in admins[2].create_acls([prefixed]).values():
            f.result(timeout=30)
        seen_everywhere([binding, prefixed])
        assert cluster._json("/kafka-acl-extended/prefixed/Group/team-") == {
            "version": 1,
            "acls": [{"principal": "User:alice", "permissionType": "Allow",
                      "operation": "Read", "host": "*"}],
        }  # fmt: skip
        [change] = cluster._zk().get_children("/kafka-acl-extended-changes")
        assert json.loads(cluster._zk().get(f"/kafka-acl-extended-changes/{change}")[0]) == {
            "version": 1, "resourceType": "GROUP", "name": "team-", "patternType": "PREFIXED"
        }  # fmt: skip
        # Kafka's znode and change notification
        stored = cluster._json(f"/kafka-acl/Topic/{topic}")
        assert stored == {"version": 1, "acls": [
            {"principal": "User:alice", "permissionType": "Allow", "operation": "Write",
             "host": "*"}
        ]}  # fmt: skip
        zk = cluster._zk()
        changes = zk.get_children("/kafka-acl-changes")
        assert changes and all(c.startswith("acl_changes_") for c in changes)
        assert any(zk.get(f"/kafka-acl-changes/{c}")[0] == f"TOPIC:{topic}".encode()
                   for c in changes)  # fmt: skip

        # alice writes acks=all through a broker that is not where she was allowed:
        # the followers replicate (their fetches are User:broker's)
        values = [f"v{i}".encode() for i in range(50)]
        p = Producer({**conf("alice", 3), "acks": "all", "linger.ms": 5})
        errors: list[Any] = []
        for v in values:
            p.produce(topic, value=v, on_delivery=lambda e, m: errors.append(e) if e else None)
        assert p.flush(60) == 0 and errors == []
        cluster.wait_for_full_isr(topic, 1, timeout=WAIT)
        for b in cluster.brokers.values():
            seg = Path(b.log_dir) / f"{topic}-0" / "00000000000000000000.log"
            assert seg.stat().st_size > 0

        # bob, and alice on the other topic: refused, nothing written anywhere
        def refused(user: str, t: str, broker_id: int) -> list[int]:
            p = Producer({**conf(user, broker_id), "linger.ms": 0, "message.timeout.ms": 10000})
            out: list[Any] = []
            p.produce(t, value=b"x", on_delivery=lambda e, m: out.append(e))
            p.flush(20)
            return [e.code() if e is not None else 0 for e in out]

        for user, t in (("bob", topic), ("alice", other)):
            assert refused(user, t, 2) == [KafkaError.TOPIC_AUTHORIZATION_FAILED]

        c = Consumer({**conf("admin", 2), "group.id": "reader"})
        try:
            assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1] == 50
            assert c.get_watermark_offsets(TopicPartition(other, 0), timeout=10)[1] == 0
        finally:
            c.close()

        # a deletion through another broker reaches every broker
        [deleted] = [f.result(timeout=30) for f in admins[3].delete_acls([alice_filter]).values()]
        assert sorted(deleted, key=str) == sorted([binding, prefixed], key=str)
        seen_everywhere([])
        assert cluster._json(f"/kafka-acl/Topic/{topic}") is None
        assert refused("alice", topic, 1) == [KafkaError.TOPIC_AUTHORIZATION_FAILED]

        for b in cluster.brokers.values():
            log = Path(b.log_file).read_text()
            assert "Traceback" not in log
