"""Real admin clients against a pylog broker on a loopback port: confluent-kafka's
AdminClient (librdkafka) and kafka-python's KafkaAdminClient create, describe,
alter and delete topics, add partitions and delete records, unchanged."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from pylog.testing import EmbeddedBroker, broker

TIMEOUT = 15


@pytest.fixture
def admin_broker() -> Iterator[EmbeddedBroker]:
    with broker(num_partitions=2) as b:  # the broker as shipped: admin APIs wired in
        yield b


def _results(futures: dict[Any, Any]) -> dict[Any, Any]:
    return {k: f.result(TIMEOUT) for k, f in futures.items()}


def test_confluent_kafka_admin_client(admin_broker: EmbeddedBroker) -> None:
    from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ConfigSource,
        NewPartitions,
        NewTopic,
        ResourceType,
    )

    bootstrap = admin_broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})

    made = admin.create_topics(
        [NewTopic("ck", 3, 1, config={"retention.ms": "60000"}), NewTopic("ck-default")],
        operation_timeout=TIMEOUT,
    )
    assert _results(made) == {"ck": None, "ck-default": None}
    md = admin.list_topics(timeout=TIMEOUT)
    assert len(md.topics["ck"].partitions) == 3
    assert len(md.topics["ck-default"].partitions) == 2  # num.partitions

    with pytest.raises(KafkaException) as err:
        admin.create_topics([NewTopic("ck-rf", 1, 2)])["ck-rf"].result(TIMEOUT)
    assert err.value.args[0].code() == KafkaError.INVALID_REPLICATION_FACTOR
    with pytest.raises(KafkaException) as err:
        admin.create_topics([NewTopic("ck", 1, 1)])["ck"].result(TIMEOUT)
    assert err.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS
    with pytest.raises(KafkaException) as err:
        admin.create_topics([NewTopic("ck-cfg", 1, 1, config={"retention.ms": "x"})])[
            "ck-cfg"
        ].result(TIMEOUT)
    assert err.value.args[0].code() == KafkaError.INVALID_CONFIG

    (cfg,) = _results(admin.describe_configs([ConfigResource(ResourceType.TOPIC, "ck")])).values()
    assert cfg["retention.ms"].value == "60000"
    assert cfg["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert cfg["segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    (bcfg,) = _results(admin.describe_configs([ConfigResource(ResourceType.BROKER, "0")])).values()
    assert bcfg["num.partitions"].value == "2"
    assert bcfg["num.partitions"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert bcfg["num.partitions"].is_read_only

    append = ConfigEntry(
        "cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND
    )
    _results(
        admin.incremental_alter_configs(
            [ConfigResource(ResourceType.TOPIC, "ck", incremental_configs=[append])]
        )
    )
    (cfg,) = _results(admin.describe_configs([ConfigResource(ResourceType.TOPIC, "ck")])).values()
    assert cfg["cleanup.policy"].value == "delete,compact"
    assert cfg["retention.ms"].value == "60000"

    with pytest.raises(KafkaException) as err:
        _results(
            admin.incremental_alter_configs(
                [
                    ConfigResource(
                        ResourceType.BROKER,
                        "0",
                        incremental_configs=[
                            ConfigEntry(
                                "num.partitions",  # not a dynamic broker config
                                "3",
                                incremental_operation=AlterConfigOpType.SET,
                            )
                        ],
                    )
                ]
            )
        )
    assert err.value.args[0].code() == KafkaError.INVALID_CONFIG

    assert _results(admin.create_partitions([NewPartitions("ck", 5)])) == {"ck": None}
    assert len(admin.list_topics(timeout=TIMEOUT).topics["ck"].partitions) == 5

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    failed: list[Any] = []
    for i in range(10):
        # keyed: "ck" is compacted now, and a compacted log refuses null keys
        producer.produce(
            "ck",
            b"v%d" % i,
            key=b"k%d" % i,
            partition=0,
            on_delivery=lambda e, m: failed.append(e) if e else None,
        )
    assert producer.flush(TIMEOUT) == 0
    assert failed == []
    (deleted,) = _results(admin.delete_records([TopicPartition("ck", 0, 4)])).values()
    assert deleted.low_watermark == 4
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "wm"})
    assert consumer.get_watermark_offsets(TopicPartition("ck", 0), timeout=TIMEOUT) == (4, 10)
    consumer.close()

    cluster = admin.describe_cluster().result(TIMEOUT)
    assert cluster.controller.id == 0
    assert [n.id for n in cluster.nodes] == [0]
    assert cluster.cluster_id

    assert _results(admin.delete_topics(["ck", "ck-default"], operation_timeout=TIMEOUT)) == {
        "ck": None,
        "ck-default": None,
    }
    with pytest.raises(KafkaException) as err:
        admin.delete_topics(["ck"])["ck"].result(TIMEOUT)
    assert err.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_kafka_python_admin_client(admin_broker: EmbeddedBroker) -> None:
    from kafka import KafkaProducer, TopicPartition
    from kafka.admin import (
        ConfigResource,
        ConfigResourceType,
        KafkaAdminClient,
        NewPartitions,
        NewTopic,
    )
    from kafka.errors import InvalidPartitionsError, TopicAlreadyExistsError

    bootstrap = admin_broker.bootstrap_servers
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT * 1000)
    try:
        r = admin.create_topics([NewTopic("kp", 2, 1, topic_configs={"retention.ms": "60000"})])
        (t,) = r["topics"]
        assert (t["name"], t["error_code"], t["num_partitions"]) == ("kp", 0, 2)
        assert t["configs"]["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        with pytest.raises(TopicAlreadyExistsError):
            admin.create_topics([NewTopic("kp", 1, 1)])
        assert "kp" in admin.list_topics()

        r = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "kp")])
        assert r["topic"]["kp"]["retention.ms"]["value"] == "60000"

        # incremental (the default with this broker): the other override stays
        r = admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, "kp", configs={"segment.ms": "600000"})]
        )
        assert r["topic"]["kp"] == "OK"
        r = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "kp")])
        assert r["topic"]["kp"]["retention.ms"]["value"] == "60000"
        assert r["topic"]["kp"]["segment.ms"]["value"] == "600000"
        # AlterConfigs proper (kafka-python re-sends the other overrides itself,
        # since the request replaces the whole set)
        r = admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, "kp", configs={"cleanup.policy": "compact"})],
            incremental=False,
            raise_on_unknown=False,
        )
        assert r["topic"]["kp"] == "OK"
        r = admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, "kp")], config_filter="all"
        )
        cfg = r["topic"]["kp"]
        assert cfg["cleanup.policy"]["value"] == "compact"
        assert cfg["retention.ms"]["value"] == "60000"
        assert cfg["segment.bytes"]["config_source"] == "DEFAULT_CONFIG"

        r = admin.create_partitions({"kp": NewPartitions(4)})
        assert r.results[0].error_code == 0
        with pytest.raises(InvalidPartitionsError):
            admin.create_partitions({"kp": NewPartitions(3)})

        producer = KafkaProducer(bootstrap_servers=bootstrap)
        for i in range(6):  # keyed: "kp" is compacted
            producer.send("kp", b"v%d" % i, key=b"k%d" % i, partition=1).get(TIMEOUT)
        producer.flush(TIMEOUT)
        producer.close()
        r = admin.delete_records({TopicPartition("kp", 1): 3})
        assert r[TopicPartition("kp", 1)]["low_watermark"] == 3
        r = admin.delete_records({TopicPartition("kp", 1): -1})
        assert r[TopicPartition("kp", 1)]["low_watermark"] == 6

        cluster = admin.describe_cluster()
        assert cluster["controller_id"] == 0
        assert [b["broker_id"] for b in cluster["brokers"]] == [0]

        (dirs,) = admin.describe_log_dirs()
        (log_dir,) = dirs["log_dirs"]
        sizes = {
            (t["name"], p["partition_index"]): p["partition_size"]
            for t in log_dir["topics"]
            for p in t["partitions"]
        }
        assert set(sizes) == {("kp", i) for i in range(4)}
        assert sizes[("kp", 1)] > 0

        r = admin.delete_topics(["kp"])
        assert [(t["name"], t["error_code"]) for t in r["topics"]] == [("kp", 0)]
        assert "kp" not in admin.list_topics()
    finally:
        admin.close()
