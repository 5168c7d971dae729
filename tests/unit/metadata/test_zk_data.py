"""ZkData: every znode's JSON round-trips, and JSON as Kafka writes it (the
shapes Kafka's documentation and zookeeper-shell show) parses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pylog.metadata.zk_data import (
    PERSISTENT_ZK_PATHS,
    BrokerIdZNode,
    BrokerInfo,
    ClusterIdZNode,
    ConfigEntityChangeNotificationZNode,
    ConfigEntityZNode,
    ControllerEpochZNode,
    ControllerZNode,
    DeleteTopicsTopicZNode,
    EndPointInfo,
    IsrChangeNotificationZNode,
    LeaderAndIsr,
    ProducerIdBlock,
    ProducerIdBlockZNode,
    TopicPartitionStateZNode,
    TopicReplicaAssignment,
    TopicZNode,
    ZkDataError,
)


def test_paths() -> None:
    assert ClusterIdZNode.path() == "/cluster/id"
    assert ControllerZNode.path() == "/controller"
    assert ControllerEpochZNode.path() == "/controller_epoch"
    assert BrokerIdZNode.path(3) == "/brokers/ids/3"
    assert TopicZNode.path("t") == "/brokers/topics/t"
    assert TopicPartitionStateZNode.path("t", 2) == "/brokers/topics/t/partitions/2/state"
    assert DeleteTopicsTopicZNode.path("t") == "/admin/delete_topics/t"
    assert IsrChangeNotificationZNode.path(7) == "/isr_change_notification/isr_change_0000000007"
    assert ConfigEntityZNode.path("topics", "t") == "/config/topics/t"
    assert ConfigEntityChangeNotificationZNode.path_prefix() == "/config/changes/config_change_"
    assert ProducerIdBlockZNode.path() == "/latest_producer_id_block"
    for p in ("/brokers/ids", "/brokers/topics", "/config/changes", "/admin/delete_topics",
              "/isr_change_notification", "/config/topics", "/brokers/seqid"):  # fmt: skip
        assert p in PERSISTENT_ZK_PATHS


def test_cluster_id() -> None:
    data = ClusterIdZNode.encode("1N7JbZwjS-aW9JCXTZUbGQ")
    assert json.loads(data) == {"version": "1", "id": "1N7JbZwjS-aW9JCXTZUbGQ"}
    assert ClusterIdZNode.decode(data) == "1N7JbZwjS-aW9JCXTZUbGQ"
    assert ClusterIdZNode.decode(b'{"version":"1","id":"abc"}') == "abc"
    with pytest.raises(ZkDataError):
        ClusterIdZNode.decode(b'{"version":"1"}')


def test_controller_and_epoch() -> None:
    data = ControllerZNode.encode(2, 1543300074836)
    assert json.loads(data) == {"version": 1, "brokerid": 2, "timestamp": "1543300074836"}
    assert ControllerZNode.decode(data) == 2
    # as Kafka writes it
    assert ControllerZNode.decode(b'{"version":1,"brokerid":1,"timestamp":"1600000000000"}') == 1
    assert ControllerEpochZNode.encode(7) == b"7"
    assert ControllerEpochZNode.decode(b"12") == 12
    with pytest.raises(ZkDataError):
        ControllerEpochZNode.decode(b"x")


def test_broker_registration_round_trip() -> None:
    info = BrokerInfo(
        id=1,
        endpoints=(
            EndPointInfo("PLAINTEXT", "10.0.0.1", 9092, "PLAINTEXT"),
            EndPointInfo("INTERNAL", "::1", 9093, "SASL_PLAINTEXT"),
        ),
        rack="rack-a",
        timestamp_ms=1700000000000,
        features={"metadata.version": (1, 7)},
    )
    data = BrokerIdZNode.encode(info)
    doc = json.loads(data)
    assert doc["version"] == 5
    assert doc["host"] == "10.0.0.1" and doc["port"] == 9092
    assert doc["endpoints"] == ["PLAINTEXT://10.0.0.1:9092", "INTERNAL://[::1]:9093"]
    assert doc["listener_security_protocol_map"] == {
        "PLAINTEXT": "PLAINTEXT",
        "INTERNAL": "SASL_PLAINTEXT",
    }
    assert doc["timestamp"] == "1700000000000" and doc["jmx_port"] == -1
    assert doc["rack"] == "rack-a"
    assert doc["features"] == {"metadata.version": {"min_version": 1, "max_version": 7}}
    back = BrokerIdZNode.decode(1, data, czxid=4242)
    assert back == BrokerInfo(**{**info.__dict__, "epoch": 4242})
    # no rack: the key is left out, as Kafka does
    assert "rack" not in json.loads(BrokerIdZNode.encode(BrokerInfo(2, info.endpoints[:1])))
    # no PLAINTEXT listener: host null, port -1
    only_sasl = json.loads(BrokerIdZNode.encode(BrokerInfo(2, info.endpoints[1:])))
    assert only_sasl["host"] is None and only_sasl["port"] == -1


def test_broker_registration_written_by_kafka() -> None:
    v5 = (
        b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT",'
        b'"SSL":"SSL"},"endpoints":["PLAINTEXT://kafka1:9092","SSL://kafka1:9093"],'
        b'"jmx_port":9999,"host":"kafka1","timestamp":"1633000000000","port":9092,"version":5}'
    )
    info = BrokerIdZNode.decode(1, v5, czxid=77)
    assert [str(e) for e in info.endpoints] == ["PLAINTEXT://kafka1:9092", "SSL://kafka1:9093"]
    assert info.endpoint("SSL") == EndPointInfo("SSL", "kafka1", 9093, "SSL")
    assert info.jmx_port == 9999 and info.rack is None and info.epoch == 77
    v4 = (
        b'{"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"endpoints":'
        b'["PLAINTEXT://10.9.167.48:9092"],"jmx_port":9999,"host":"10.9.167.48",'
        b'"timestamp":"1543300074836","port":9092,"version":4,"rack":"r1"}'
    )
    info = BrokerIdZNode.decode(3, v4)
    assert info.endpoints[0].host == "10.9.167.48" and info.rack == "r1"
    v1 = b'{"jmx_port":-1,"timestamp":"1","host":"old","version":1,"port":9092}'
    assert BrokerIdZNode.decode(0, v1).endpoints == (
        EndPointInfo("PLAINTEXT", "old", 9092, "PLAINTEXT"),
    )


def test_topic_assignment() -> None:
    a = TopicReplicaAssignment(
        "AAAAAAAAAAAAAAAAAAAAAQ", {0: [1, 2], 1: [2, 3]}, adding_replicas={1: [3]}
    )
    data = TopicZNode.encode(a)
    doc = json.loads(data)
    assert doc == {
        "version": 3,
        "topic_id": "AAAAAAAAAAAAAAAAAAAAAQ",
        "partitions": {"0": [1, 2], "1": [2, 3]},
        "adding_replicas": {"1": [3]},
        "removing_replicas": {},
    }
    assert TopicZNode.decode("t", data) == a
    assert a.replication_factor == 2
    # Kafka 2.4 (version 2, no topic id) and 1.x (version 1)
    v2 = TopicZNode.decode(
        "t", b'{"version":2,"partitions":{"0":[3,1]},"adding_replicas":{},"removing_replicas":{}}'
    )
    assert v2.topic_id is None and v2.partitions == {0: [3, 1]}
    v1 = TopicZNode.decode("t", b'{"version":1,"partitions":{"1":[1],"0":[2]}}')
    assert v1.partitions == {0: [2], 1: [1]}
    with pytest.raises(ZkDataError):
        TopicZNode.decode("t", b'{"version":3}')


def test_partition_state() -> None:
    s = LeaderAndIsr(leader=3, leader_epoch=55, isr=[1, 2, 3], controller_epoch=1)
    data = TopicPartitionStateZNode.encode(s)
    assert json.loads(data) == {
        "controller_epoch": 1,
        "leader": 3,
        "version": 1,
        "leader_epoch": 55,
        "isr": [1, 2, 3],
    }
    assert TopicPartitionStateZNode.decode("t", 0, data, zk_version=4) == LeaderAndIsr(
        3, 55, [1, 2, 3], 1, zk_version=4
    )
    kafka = b'{"controller_epoch":1,"leader":3,"version":1,"leader_epoch":55,"isr":[1,2,3]}'
    assert TopicPartitionStateZNode.decode("t", 0, kafka).isr == [1, 2, 3]
    recovering = LeaderAndIsr(1, 2, [1], 3, leader_recovery_state=1)
    assert json.loads(TopicPartitionStateZNode.encode(recovering))["leader_recovery_state"] == 1
    assert (
        TopicPartitionStateZNode.decode("t", 0, TopicPartitionStateZNode.encode(recovering))
        == recovering
    )
    with pytest.raises(ZkDataError):
        TopicPartitionStateZNode.decode("t", 0, b'{"leader":1}')


def test_notifications() -> None:
    data = IsrChangeNotificationZNode.encode([("t", 0), ("u", 3)])
    assert json.loads(data) == {
        "version": 1,
        "partitions": [{"topic": "t", "partition": 0}, {"topic": "u", "partition": 3}],
    }
    assert IsrChangeNotificationZNode.decode(data) == [("t", 0), ("u", 3)]
    assert IsrChangeNotificationZNode.sequence_number("isr_change_0000000042") == 42
    change = ConfigEntityChangeNotificationZNode.encode("topics", "t")
    assert json.loads(change) == {"version": 2, "entity_path": "topics/t"}
    assert ConfigEntityChangeNotificationZNode.decode(change) == ("topics", "t")
    assert ConfigEntityChangeNotificationZNode.decode(
        b'{"version":2,"entity_path":"users/alice/clients/c1"}'
    ) == ("users", "alice/clients/c1")
    assert ConfigEntityChangeNotificationZNode.decode(
        b'{"version":1,"entity_type":"topics","entity_name":"t"}'
    ) == ("topics", "t")
    with pytest.raises(ZkDataError):
        ConfigEntityChangeNotificationZNode.sequence_number("other_1")


def test_entity_config() -> None:
    data = ConfigEntityZNode.encode({"cleanup.policy": "compact", "retention.ms": "1000"})
    assert json.loads(data) == {
        "version": 1,
        "config": {"cleanup.policy": "compact", "retention.ms": "1000"},
    }
    assert ConfigEntityZNode.decode(data)["retention.ms"] == "1000"
    assert ConfigEntityZNode.decode(b'{"version":1,"config":{}}') == {}
    assert ConfigEntityZNode.decode(b"") == {}


def test_producer_id_block() -> None:
    block = ProducerIdBlock(broker_id=2, first=1000, size=1000)
    data = ProducerIdBlockZNode.encode(block)
    assert json.loads(data) == {
        "version": 1,
        "broker": 2,
        "block_start": "1000",
        "block_end": "1999",
    }
    assert ProducerIdBlockZNode.decode(data) == block
    kafka = b'{"version":1,"broker":0,"block_start":"0","block_end":"999"}'
    assert ProducerIdBlockZNode.decode(kafka) == ProducerIdBlock(0, 0, 1000)


@pytest.mark.parametrize("data", [b"", b"not json", b"[1,2]", b"\xff\xfe"])
def test_garbage_is_a_clear_error(data: bytes) -> None:
    with pytest.raises(ZkDataError, match="/cluster/id"):
        ClusterIdZNode.decode(data)


def test_feature_znode_is_kafkas_version_2_json() -> None:
    from pylog.metadata.zk_data import FeatureZNode

    data = FeatureZNode.encode({"transaction.version": 1})
    assert json.loads(data) == {
        "version": 2, "status": 1, "features": {"transaction.version": {"max_version_level": 1}},
    }  # fmt: skip
    got = FeatureZNode.decode(data, 4)
    assert (got.enabled, got.features, got.epoch) == (True, {"transaction.version": 1}, 4)
    # Version 1 (Kafka before 3.3) also had min_version_level; disabled means none.
    v1 = (
        b'{"version":1,"status":1,"features":'
        b'{"metadata.version":{"min_version_level":1,"max_version_level":7}}}'
    )
    assert FeatureZNode.decode(v1).features == {"metadata.version": 7}
    off = b'{"version":2,"status":0,"features":{"transaction.version":{"max_version_level":2}}}'
    assert FeatureZNode.decode(off).features == {}


def test_transaction_version_default_is_capped_by_the_registered_brokers(
    tmp_path: Path,
) -> None:
    from pylog.metadata.finalized_feature_cache import FinalizedFeatureCache
    from pylog.metadata.json_store import JsonMetadataStore

    store = JsonMetadataStore(str(tmp_path))
    cache = FinalizedFeatureCache(store)
    assert cache.features() == ({"transaction.version": 2}, 0)  # a lone broker: 2
    store._feature_support = {"transaction.version": 0}  # a Kafka 3.9 broker registered
    assert cache.transaction_version() == 0
    store._feature_support = None
    store.update_finalized_features({"transaction.version": 1})
    assert cache.features() == ({"transaction.version": 1}, 1)
    # Durable: a reopened store has it.
    store.close()
    again = FinalizedFeatureCache(JsonMetadataStore(str(tmp_path)))
    assert again.features() == ({"transaction.version": 1}, 1)
