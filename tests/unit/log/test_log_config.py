"""LogConfig / BrokerLogConfig: Kafka's defaults, precedence of broker keys,
parsing from strings, and error messages that name the key and the value."""

from __future__ import annotations

import pytest

from pylog.config import parse_properties
from pylog.errors import InvalidConfigurationError
from pylog.log.config import (
    BROKER_LOG_CONFIG,
    TOPIC_CONFIG,
    BrokerLogConfig,
    LogConfig,
    cli_help,
    config_docs,
)

LONG_MAX = 2**63 - 1


def test_kafka_4_defaults() -> None:
    c = LogConfig()
    assert c.segment_bytes == 1073741824
    assert c.segment_ms == 604800000
    assert c.segment_jitter_ms == 0
    assert c.segment_index_bytes == 10485760
    assert c.index_interval_bytes == 4096
    assert c.retention_ms == 604800000
    assert c.retention_bytes == -1
    assert c.cleanup_policy == ("delete",)
    assert c.max_message_bytes == 1048588
    assert c.message_timestamp_type == "CreateTime"
    assert c.message_timestamp_before_max_ms == LONG_MAX
    assert c.message_timestamp_after_max_ms == 3600000  # KIP-1030, Kafka 4.0
    assert c.min_insync_replicas == 1
    assert c.compression_type == "producer"
    assert c.file_delete_delay_ms == 60000
    assert c.flush_messages == LONG_MAX and c.flush_ms == LONG_MAX
    assert c.min_cleanable_dirty_ratio == 0.5
    assert c.min_compaction_lag_ms == 0 and c.max_compaction_lag_ms == LONG_MAX
    assert c.delete_retention_ms == 86400000
    assert c.preallocate is False and c.unclean_leader_election_enable is False
    b = BrokerLogConfig()
    assert b.num_recovery_threads_per_data_dir == 2  # KIP-1030
    assert b.log_retention_check_interval_ms == 300000
    assert b.log_flush_offset_checkpoint_interval_ms == 60000


def test_table_defaults_match_dataclass_defaults() -> None:
    c = LogConfig()
    for name, key in TOPIC_CONFIG.items():
        if key.internal:
            continue
        assert getattr(c, name.replace(".", "_")) == key.default, name
        if name.endswith(".replication.throttled.replicas"):
            assert key.server_default is None  # Kafka has no broker key behind them
            continue
        assert key.server_default in BROKER_LOG_CONFIG, name
    assert LogConfig.from_broker({}) == c


def test_broker_precedence() -> None:
    c = LogConfig.from_broker({"log.retention.hours": "1"})
    assert c.retention_ms == 3600000
    c = LogConfig.from_broker({"log.retention.hours": "1", "log.retention.minutes": "2"})
    assert c.retention_ms == 120000
    c = LogConfig.from_broker(
        {"log.retention.hours": 1, "log.retention.minutes": 2, "log.retention.ms": 5}
    )
    assert c.retention_ms == 5
    assert LogConfig.from_broker({"log.retention.ms": "-5"}).retention_ms == -1
    assert LogConfig.from_broker({"log.roll.hours": "2"}).segment_ms == 7200000
    assert LogConfig.from_broker({"log.roll.hours": 2, "log.roll.ms": 9}).segment_ms == 9
    assert LogConfig.from_broker({"log.roll.jitter.hours": 1}).segment_jitter_ms == 3600000
    assert LogConfig.from_broker({"log.flush.scheduler.interval.ms": 7}).flush_ms == 7
    assert (
        LogConfig.from_broker(
            {"log.flush.scheduler.interval.ms": 7, "log.flush.interval.ms": 3}
        ).flush_ms
        == 3
    )
    c = LogConfig.from_broker(
        {
            "log.segment.bytes": str(2 << 20),
            "message.max.bytes": "5000",
            "log.cleanup.policy": "compact, delete",
            "log.segment.delete.delay.ms": "10",
            "log.message.timestamp.type": "LogAppendTime",
            "log.preallocate": "TRUE",
            "zookeeper.connect": "ignored:2181",
        }
    )
    assert c.segment_bytes == 2 << 20 and c.max_message_bytes == 5000
    assert c.compact and c.delete and c.file_delete_delay_ms == 10
    assert c.log_append_time and c.preallocate


def test_broker_log_config() -> None:
    b = BrokerLogConfig.from_props({"log.dir": "/a"})
    assert b.log_dirs == ("/a",)
    b = BrokerLogConfig.from_props({"log.dir": "/a", "log.dirs": "/b,/c"})
    assert b.log_dirs == ("/b", "/c")
    b = BrokerLogConfig.from_props({"num.recovery.threads.per.data.dir": "4"})
    assert b.num_recovery_threads_per_data_dir == 4
    assert b.default_log_config == LogConfig()


def test_topic_overrides() -> None:
    base = LogConfig.from_broker({"log.retention.hours": 1})
    c = base.with_overrides({"retention.ms": "100", "cleanup.policy": ["compact"]})
    assert c.retention_ms == 100 and c.compact and not c.delete
    assert c.overridden == {"retention.ms", "cleanup.policy"}
    assert c.segment_ms == base.segment_ms
    assert base.with_overrides({"internal.segment.bytes": 100}).segment_bytes == 100
    props = c.to_props()
    assert props["retention.ms"] == "100" and props["cleanup.policy"] == "compact"
    assert "internal.segment.bytes" not in props


@pytest.mark.parametrize(
    ("key", "value", "why"),
    [
        ("segment.bytes", "1000", "at least 1048576"),
        ("segment.bytes", "big", "32-bit integer"),
        ("segment.bytes", 2**31, "32-bit integer"),
        ("segment.ms", 0, "at least 1"),
        ("retention.ms", -2, "at least -1"),
        ("index.interval.bytes", -1, "at least 0"),
        ("cleanup.policy", "compact,erase", "'erase'"),
        ("message.timestamp.type", "createtime", "CreateTime, LogAppendTime"),
        ("compression.type", "brotli", "one of"),
        ("min.cleanable.dirty.ratio", "1.5", "between 0 and 1"),
        ("min.cleanable.dirty.ratio", "half", "a number"),
        ("preallocate", "yes", "true or false"),
        ("preallocate", 1, "true or false"),
        ("min.insync.replicas", True, "32-bit integer"),
        ("flush.messages", 0, "at least 1"),
        ("compression.gzip.level", 10, "-1 or between 1 and 9"),
    ],
)
def test_bad_values_name_key_and_value(key: str, value: object, why: str) -> None:
    with pytest.raises(InvalidConfigurationError) as e:
        LogConfig().with_overrides({key: value})
    message = str(e.value)
    assert key in message and repr(value) in message and why in message
    assert e.value.code == 40


def test_unknown_topic_key_and_conflicts() -> None:
    with pytest.raises(InvalidConfigurationError, match=r"retention\.hours"):
        LogConfig().with_overrides({"retention.hours": 1})
    with pytest.raises(InvalidConfigurationError, match=r"min\.compaction\.lag\.ms"):
        LogConfig().with_overrides({"min.compaction.lag.ms": 10, "max.compaction.lag.ms": 5})
    with pytest.raises(InvalidConfigurationError, match=r"log\.segment\.bytes"):
        LogConfig.from_broker({"log.segment.bytes": "12"})


def test_docs_and_help_come_from_the_table() -> None:
    docs = config_docs()
    assert "| segment.bytes | int | 1073741824 | [1048576,...] | log.segment.bytes |" in docs
    assert "internal.segment.bytes" not in docs
    lines = cli_help(BROKER_LOG_CONFIG)
    assert len(lines) == len(BROKER_LOG_CONFIG)
    assert any(line.startswith("log.retention.hours (int, default: 168") for line in lines)


def test_parse_properties() -> None:
    text = """
    # a comment
    ! another
    log.dirs=/data/a,/data/b
    log.retention.hours : 24
    message.max.bytes = 2000000
    log.cleanup.policy=compact,\\
      delete
    """
    props = parse_properties(text)
    assert props == {
        "log.dirs": "/data/a,/data/b",
        "log.retention.hours": "24",
        "message.max.bytes": "2000000",
        "log.cleanup.policy": "compact,delete",
    }
    b = BrokerLogConfig.from_props(props)
    assert b.log_dirs == ("/data/a", "/data/b")
    assert b.default_log_config.retention_ms == 24 * 3600000
    assert b.default_log_config.cleanup_policy == ("compact", "delete")
