"""The KIP-848 broker keys: Kafka's defaults, its bounds checks, and the
names ``group.consumer.assignors`` accepts (GroupCoordinatorConfig)."""

from __future__ import annotations

import pytest

from pylog.coordinator.consumer_group_heartbeat import assignor_names
from pylog.errors import InvalidConfigurationError
from pylog.server.config import KafkaConfig


def test_defaults_are_kafkas() -> None:
    c = KafkaConfig.from_props({})
    # Kafka 4.x gates share groups by its share.version feature, which pylog has
    # no KRaft metadata to finalize: here "share" is in the list by default.
    assert list(c.get("group.coordinator.rebalance.protocols")) == ["classic", "consumer", "share"]
    assert c.get("group.consumer.heartbeat.interval.ms") == 5000
    assert c.get("group.consumer.session.timeout.ms") == 45000
    assert (c.get("group.consumer.min.session.timeout.ms"),
            c.get("group.consumer.max.session.timeout.ms")) == (45000, 60000)  # fmt: skip
    assert (c.get("group.consumer.min.heartbeat.interval.ms"),
            c.get("group.consumer.max.heartbeat.interval.ms")) == (5000, 15000)  # fmt: skip
    assert c.get("group.consumer.max.size") == 2**31 - 1
    assert assignor_names(list(c.get("group.consumer.assignors"))) == ["uniform", "range"]


def test_short_names_are_accepted() -> None:
    c = KafkaConfig.from_props({"group.consumer.assignors": "range,uniform"})
    assert assignor_names(list(c.get("group.consumer.assignors"))) == ["range", "uniform"]


@pytest.mark.parametrize(
    "bad",
    [
        {"group.consumer.assignors": "sticky"},
        {"group.coordinator.rebalance.protocols": "consumer"},
        {"group.coordinator.rebalance.protocols": "classic,streams"},
        {"group.consumer.session.timeout.ms": 30000},  # below the minimum
        {"group.consumer.heartbeat.interval.ms": 20000},  # above the maximum
        {"group.consumer.min.session.timeout.ms": 70000},  # above the maximum
        # the heartbeat interval at or above the session timeout
        {
            "group.consumer.min.session.timeout.ms": 1000,
            "group.consumer.session.timeout.ms": 4000,
            "group.consumer.heartbeat.interval.ms": 5000,
        },
        {"group.consumer.max.size": 0},
    ],
)
def test_kafkas_checks(bad: dict[str, object]) -> None:
    with pytest.raises(InvalidConfigurationError):
        KafkaConfig.from_props(bad)
