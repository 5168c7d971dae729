"""The zookeeper.* keys: Kafka's names and defaults, and broker.id with
zookeeper.connect: found at start-up when unset (broker.id.generation.enable),
required when generation is off, at most reserved.broker.max.id when on."""

from __future__ import annotations

import pytest

from pylog.errors import InvalidConfigurationError
from pylog.server.config import KafkaConfig


def test_defaults_are_kafkas() -> None:
    c = KafkaConfig.from_props({})
    assert c.get("zookeeper.connect") is None
    assert c.get("zookeeper.session.timeout.ms") == 18000
    assert c.get("zookeeper.connection.timeout.ms") is None  # the session timeout then
    assert c.get("zookeeper.max.in.flight.requests") == 10
    assert c.broker_id == 0  # a lone broker without an id is broker 0, as before


def test_zookeeper_connect_and_the_broker_id() -> None:
    # unset: -1 until start-up finds it (meta.properties, or generated)
    assert KafkaConfig.from_props({"zookeeper.connect": "127.0.0.1:2181"}).broker_id == -1
    assert (
        KafkaConfig.from_props({"zookeeper.connect": "zk:2181"}).get("reserved.broker.max.id")
        == 1000
    )
    off = {"zookeeper.connect": "127.0.0.1:2181", "broker.id.generation.enable": "false"}
    with pytest.raises(InvalidConfigurationError, match=r"broker\.id must be set"):
        KafkaConfig.from_props(off)
    with pytest.raises(InvalidConfigurationError, match=r"broker\.id must be set"):
        KafkaConfig.from_props({**off, "broker.id": "-1"})
    assert KafkaConfig.from_props({**off, "broker.id": "5000"}).broker_id == 5000
    with pytest.raises(InvalidConfigurationError, match=r"reserved\.broker\.max\.id"):
        KafkaConfig.from_props({"zookeeper.connect": "zk:2181", "broker.id": "1001"})
    c = KafkaConfig.from_props(
        {
            "zookeeper.connect": "zk1:2181,zk2:2181/kafka",
            "broker.id": "4",
            "zookeeper.session.timeout.ms": "6000",
        }
    )
    assert c.broker_id == 4 and c.get("zookeeper.session.timeout.ms") == 6000
    assert c.unknown == ()
    assert KafkaConfig.from_props({"zookeeper.connect": "zk:2181", "node.id": "2"}).broker_id == 2
    with pytest.raises(InvalidConfigurationError):
        KafkaConfig.from_props({"zookeeper.max.in.flight.requests": "0"})
