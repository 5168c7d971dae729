"""Log configuration: one table of Kafka's keys, from which everything else comes.

Two tables, both in Kafka's names, types and (4.x) defaults:

* ``TOPIC_CONFIG`` — the per-topic keys (``segment.bytes``, ``retention.ms``, …),
  each naming the broker key that supplies its default;
* ``BROKER_LOG_CONFIG`` — the broker's ``log.*`` keys (and the few others the
  storage layer reads: ``message.max.bytes``, ``num.recovery.threads.per.data.dir``…).

Validation, :func:`config_docs` and :func:`cli_help` all read these tables, so a
key is described once; a key is a :class:`pylog.config.ConfigKey` (its type,
validator and parsing are there). Values come from strings (a ``server.properties`` file,
``--config k=v``) or Python values; a bad one raises InvalidConfigurationError
naming the key and the value.

``LogConfig.from_broker(props)`` resolves a broker's properties into the topic
defaults (``log.roll.ms`` over ``log.roll.hours``, ``log.retention.ms`` over
minutes over hours, …); ``.with_overrides(topic_props)`` applies a topic's own
settings on top. ``BrokerLogConfig`` carries what the LogManager needs.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from pylog.config import (
    LONG_MAX,
    AtLeast,
    Between,
    ConfigKey,
    ConfigType,
    IntOrDefault,
    ListOf,
    OneOf,
    Validator,
    config_table,
    show_value,
    validate_props,
)
from pylog.errors import InvalidConfigurationError


class ThrottledReplicas(Validator):
    """Kafka's ThrottledReplicaListValidator: ``*``, or ``partition:broker`` pairs."""

    def check(self, value: Any) -> str | None:
        items = [str(v).strip() for v in value or ()]
        if items == ["*"]:
            return None
        for item in items:
            partition, sep, broker = item.partition(":")
            if not sep or not partition.strip().isdigit() or not broker.strip().isdigit():
                return (
                    "must be the literal '*' or a list of replicas in the following format: "
                    "[partitionId]:[brokerId],[partitionId]:[brokerId],..."
                )
        return None

    def __str__(self) -> str:
        return "[partitionId]:[brokerId],[partitionId]:[brokerId],..."


__all__ = [
    "BROKER_LOG_CONFIG",
    "TOPIC_CONFIG",
    "BrokerLogConfig",
    "LogConfig",
    "cli_help",
    "config_docs",
]

_HOUR_MS = 3_600_000
_MINUTE_MS = 60_000

B, I, L, D, S, LS = (  # noqa: E741  (short type names keep the tables one key per line)
    ConfigType.BOOLEAN,
    ConfigType.INT,
    ConfigType.LONG,
    ConfigType.DOUBLE,
    ConfigType.STRING,
    ConfigType.LIST,
)
_CODECS = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
_TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
_POLICIES = ("compact", "delete")
_MIB = 1024 * 1024

# fmt: off
TOPIC_CONFIG: dict[str, ConfigKey] = config_table(
    ConfigKey("segment.bytes", I, 1024 * _MIB, "Size at which a segment is rolled.",
              AtLeast(_MIB), "medium", "log.segment.bytes"),
    ConfigKey("internal.segment.bytes", I, None,
              "Overrides segment.bytes without its 1 MiB minimum (tests only).",
              AtLeast(14), "low", None, internal=True),
    ConfigKey("segment.ms", L, 7 * 24 * _HOUR_MS,
              "Age at which a non-empty segment is rolled even if not full.",
              AtLeast(1), "medium", "log.roll.ms"),
    ConfigKey("segment.jitter.ms", L, 0,
              "Largest random amount subtracted from segment.ms per segment, so "
              "partitions do not all roll together.",
              AtLeast(0), "medium", "log.roll.jitter.ms"),
    ConfigKey("segment.index.bytes", I, 10 * _MIB,
              "Size of a segment's offset and time index files.",
              AtLeast(4), "medium", "log.index.size.max.bytes"),
    ConfigKey("index.interval.bytes", I, 4096,
              "Bytes appended between two offset index entries.",
              AtLeast(0), "medium", "log.index.interval.bytes"),
    ConfigKey("retention.ms", L, 7 * 24 * _HOUR_MS,
              "Age of a segment's newest record after which the segment is deleted "
              "(delete policy); -1 keeps segments forever.",
              AtLeast(-1), "medium", "log.retention.ms"),
    ConfigKey("retention.bytes", L, -1,
              "Size a partition may grow to before its oldest segments are deleted; "
              "-1 for no limit.",
              None, "medium", "log.retention.bytes"),
    ConfigKey("cleanup.policy", LS, ("delete",),
              "delete (retention removes old segments), compact (keep the latest "
              "record per key) or both.",
              ListOf(*_POLICIES), "medium", "log.cleanup.policy"),
    ConfigKey("max.message.bytes", I, _MIB + 12,
              "Largest record batch the log accepts.",
              AtLeast(0), "medium", "message.max.bytes"),
    ConfigKey("message.timestamp.type", S, "CreateTime",
              "Whether record timestamps are the producer's (CreateTime) or the "
              "broker's append time (LogAppendTime).",
              OneOf(*_TIMESTAMP_TYPES), "medium", "log.message.timestamp.type"),
    ConfigKey("message.timestamp.before.max.ms", L, LONG_MAX,
              "How far in the past a CreateTime timestamp may be.",
              AtLeast(0), "medium", "log.message.timestamp.before.max.ms"),
    ConfigKey("message.timestamp.after.max.ms", L, _HOUR_MS,
              "How far in the future a CreateTime timestamp may be.",
              AtLeast(0), "medium", "log.message.timestamp.after.max.ms"),
    ConfigKey("min.insync.replicas", I, 1,
              "Replicas that must acknowledge an acks=all produce.",
              AtLeast(1), "medium", "min.insync.replicas"),
    ConfigKey("compression.type", S, "producer",
              "Codec batches are stored with; producer keeps the producer's.",
              OneOf(*_CODECS), "medium", "compression.type"),
    ConfigKey("compression.gzip.level", I, -1, "gzip level when compression.type=gzip.",
              IntOrDefault(1, 9), "medium", "compression.gzip.level"),
    ConfigKey("compression.lz4.level", I, 9, "lz4 level when compression.type=lz4.",
              Between(1, 17), "medium", "compression.lz4.level"),
    ConfigKey("compression.zstd.level", I, 3, "zstd level when compression.type=zstd.",
              Between(-131072, 22), "medium", "compression.zstd.level"),
    ConfigKey("file.delete.delay.ms", L, 60_000,
              "Time between a segment being removed from the log and its files "
              "being deleted.",
              AtLeast(0), "medium", "log.segment.delete.delay.ms"),
    ConfigKey("flush.messages", L, LONG_MAX,
              "Messages appended between two forced fsyncs.",
              AtLeast(1), "medium", "log.flush.interval.messages"),
    ConfigKey("flush.ms", L, LONG_MAX, "Longest time between two forced fsyncs.",
              AtLeast(0), "medium", "log.flush.interval.ms"),
    ConfigKey("min.cleanable.dirty.ratio", D, 0.5,
              "Share of the log not yet compacted that triggers compaction.",
              Between(0, 1), "medium", "log.cleaner.min.cleanable.ratio"),
    ConfigKey("min.compaction.lag.ms", L, 0,
              "Minimum age of a record before compaction may remove it.",
              AtLeast(0), "medium", "log.cleaner.min.compaction.lag.ms"),
    ConfigKey("max.compaction.lag.ms", L, LONG_MAX,
              "Maximum age of a record before it becomes eligible for compaction.",
              AtLeast(1), "medium", "log.cleaner.max.compaction.lag.ms"),
    ConfigKey("delete.retention.ms", L, 24 * _HOUR_MS,
              "How long compaction keeps delete tombstones.",
              AtLeast(0), "medium", "log.cleaner.delete.retention.ms"),
    ConfigKey("preallocate", B, False, "Reserve segment.bytes on disk for a new segment.",
              None, "medium", "log.preallocate"),
    ConfigKey("unclean.leader.election.enable", B, False,
              "Allow a replica outside the ISR to become leader (data loss).",
              None, "medium", "unclean.leader.election.enable"),
    ConfigKey("leader.replication.throttled.replicas", LS, (),
              "Replicas whose replication the leader paces at "
              "leader.replication.throttled.rate: partition:broker pairs, or * for all.",
              ThrottledReplicas(), "medium"),
    ConfigKey("follower.replication.throttled.replicas", LS, (),
              "Replicas whose replication the follower paces at "
              "follower.replication.throttled.rate: partition:broker pairs, or * for all.",
              ThrottledReplicas(), "medium"),
)

BROKER_LOG_CONFIG: dict[str, ConfigKey] = config_table(
    ConfigKey("log.dirs", LS, None, "Directories the partitions are stored in; "
              "log.dir when unset.", None, "high"),
    ConfigKey("log.dir", S, "/tmp/kafka-logs", "The log directory when log.dirs is unset.",
              None, "high"),
    ConfigKey("log.segment.bytes", I, 1024 * _MIB, "Default segment.bytes.", AtLeast(_MIB),
              "high"),
    ConfigKey("log.roll.ms", L, None, "Default segment.ms; log.roll.hours when unset.",
              AtLeast(1), "high"),
    ConfigKey("log.roll.hours", I, 168, "Default segment.ms in hours.", AtLeast(1), "high"),
    ConfigKey("log.roll.jitter.ms", L, None, "Default segment.jitter.ms; "
              "log.roll.jitter.hours when unset.", AtLeast(0), "high"),
    ConfigKey("log.roll.jitter.hours", I, 0, "Default segment.jitter.ms in hours.",
              AtLeast(0), "high"),
    ConfigKey("log.retention.ms", L, None, "Default retention.ms; log.retention.minutes "
              "when unset. -1 keeps logs forever.", None, "high"),
    ConfigKey("log.retention.minutes", I, None, "Default retention.ms in minutes; "
              "log.retention.hours when unset.", None, "high"),
    ConfigKey("log.retention.hours", I, 168, "Default retention.ms in hours.", None, "high"),
    ConfigKey("log.retention.bytes", L, -1, "Default retention.bytes.", None, "high"),
    ConfigKey("log.cleanup.policy", LS, ("delete",), "Default cleanup.policy.",
              ListOf(*_POLICIES), "medium"),
    ConfigKey("log.index.size.max.bytes", I, 10 * _MIB, "Default segment.index.bytes.",
              AtLeast(4), "medium"),
    ConfigKey("log.index.interval.bytes", I, 4096, "Default index.interval.bytes.",
              AtLeast(0), "medium"),
    ConfigKey("log.flush.interval.messages", L, LONG_MAX, "Default flush.messages.",
              AtLeast(1), "high"),
    ConfigKey("log.flush.interval.ms", L, None, "Default flush.ms; "
              "log.flush.scheduler.interval.ms when unset.", None, "high"),
    ConfigKey("log.flush.scheduler.interval.ms", L, LONG_MAX,
              "How often the flusher checks whether a log is due for a flush.", None, "high"),
    ConfigKey("log.flush.offset.checkpoint.interval.ms", I, 60_000,
              "How often recovery points are written to their checkpoint.", AtLeast(0), "high"),
    ConfigKey("log.flush.start.offset.checkpoint.interval.ms", I, 60_000,
              "How often log start offsets are written to their checkpoint.", AtLeast(0),
              "high"),
    ConfigKey("log.retention.check.interval.ms", L, 300_000,
              "How often retention deletes eligible segments.", AtLeast(1), "medium"),
    ConfigKey("log.segment.delete.delay.ms", L, 60_000, "Default file.delete.delay.ms.",
              AtLeast(0), "high"),
    ConfigKey("log.initial.task.delay.ms", L, 30_000,
              "Delay before the first retention/flush/checkpoint task runs.", AtLeast(0),
              "low"),
    ConfigKey("log.message.timestamp.type", S, "CreateTime",
              "Default message.timestamp.type.", OneOf(*_TIMESTAMP_TYPES), "medium"),
    ConfigKey("log.message.timestamp.before.max.ms", L, LONG_MAX,
              "Default message.timestamp.before.max.ms.", AtLeast(0), "medium"),
    ConfigKey("log.message.timestamp.after.max.ms", L, _HOUR_MS,
              "Default message.timestamp.after.max.ms.", AtLeast(0), "medium"),
    ConfigKey("log.preallocate", B, False, "Default preallocate.", None, "medium"),
    ConfigKey("message.max.bytes", I, _MIB + 12, "Default max.message.bytes.", AtLeast(0),
              "high"),
    ConfigKey("min.insync.replicas", I, 1, "Default min.insync.replicas.", AtLeast(1), "high"),
    ConfigKey("compression.type", S, "producer", "Default compression.type.",
              OneOf(*_CODECS), "high"),
    ConfigKey("compression.gzip.level", I, -1, "Default compression.gzip.level.",
              IntOrDefault(1, 9), "medium"),
    ConfigKey("compression.lz4.level", I, 9, "Default compression.lz4.level.",
              Between(1, 17), "medium"),
    ConfigKey("compression.zstd.level", I, 3, "Default compression.zstd.level.",
              Between(-131072, 22), "medium"),
    ConfigKey("unclean.leader.election.enable", B, False,
              "Default unclean.leader.election.enable.", None, "high"),
    ConfigKey("num.recovery.threads.per.data.dir", I, 2,
              "Threads per log dir that load logs at start-up and flush them at shutdown.",
              AtLeast(1), "high"),
    ConfigKey("log.cleaner.enable", B, True, "Run the log cleaner (compaction).", None,
              "medium"),
    ConfigKey("log.cleaner.threads", I, 1, "Compaction threads.", AtLeast(0), "medium"),
    ConfigKey("log.cleaner.dedupe.buffer.size", L, 128 * _MIB,
              "Memory for compaction's offset maps, over all cleaner threads.", None,
              "medium"),
    ConfigKey("log.cleaner.io.buffer.size", I, 512 * 1024,
              "I/O buffer memory for compaction, over all cleaner threads.", AtLeast(0),
              "medium"),
    ConfigKey("log.cleaner.io.buffer.load.factor", D, 0.9,
              "How full compaction's offset map may get.", None, "medium"),
    ConfigKey("log.cleaner.io.max.bytes.per.second", D, 1.7976931348623157e308,
              "Throttle on compaction's reads plus writes.", None, "medium"),
    ConfigKey("log.cleaner.backoff.ms", L, 15_000,
              "Sleep of a cleaner thread with nothing to clean.", AtLeast(0), "medium"),
    ConfigKey("log.cleaner.min.cleanable.ratio", D, 0.5, "Default min.cleanable.dirty.ratio.",
              Between(0, 1), "medium"),
    ConfigKey("log.cleaner.delete.retention.ms", L, 24 * _HOUR_MS,
              "Default delete.retention.ms.", AtLeast(0), "medium"),
    ConfigKey("log.cleaner.min.compaction.lag.ms", L, 0, "Default min.compaction.lag.ms.",
              AtLeast(0), "medium"),
    ConfigKey("log.cleaner.max.compaction.lag.ms", L, LONG_MAX,
              "Default max.compaction.lag.ms.", AtLeast(1), "medium"),
    ConfigKey("producer.id.expiration.ms", I, 24 * _HOUR_MS,
              "How long a producer id's state is kept after its last write.", AtLeast(1),
              "low"),
    ConfigKey("producer.id.expiration.check.interval.ms", I, 600_000,
              "How often expired producer ids are removed.", AtLeast(1), "low"),
    ConfigKey("transaction.max.timeout.ms", I, 900_000,
              "Longest transaction timeout a producer may ask for.", AtLeast(1), "high"),
)


# ---------------------------------------------------------------- LogConfig


@dataclass(frozen=True)
class LogConfig:
    """A topic's effective log settings (snake_case of the topic keys).

    Build with :meth:`from_broker` / :meth:`with_overrides` / :meth:`from_props`;
    the constructor takes already-valid values.
    """

    segment_bytes: int = 1024 * _MIB
    segment_ms: int = 7 * 24 * _HOUR_MS
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10 * _MIB
    index_interval_bytes: int = 4096
    retention_ms: int = 7 * 24 * _HOUR_MS
    retention_bytes: int = -1
    cleanup_policy: tuple[str, ...] = ("delete",)
    max_message_bytes: int = _MIB + 12
    message_timestamp_type: str = "CreateTime"
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = _HOUR_MS
    min_insync_replicas: int = 1
    compression_type: str = "producer"
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
    file_delete_delay_ms: int = 60_000
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    delete_retention_ms: int = 24 * _HOUR_MS
    preallocate: bool = False
    unclean_leader_election_enable: bool = False
    leader_replication_throttled_replicas: tuple[str, ...] = ()
    follower_replication_throttled_replicas: tuple[str, ...] = ()
    # Topic keys set explicitly (by the topic, not inherited from the broker).
    overridden: frozenset[str] = field(default=frozenset(), compare=False)

    # -- construction

    @classmethod
    def from_props(
        cls, props: Mapping[str, Any], *, defaults: LogConfig | None = None, strict: bool = True
    ) -> LogConfig:
        """Topic keys from ``props`` over ``defaults`` (Kafka's when None).

        ``strict`` rejects names that are not topic keys, as topic creation does.
        """
        if strict:
            unknown = sorted(k for k in props if k not in TOPIC_CONFIG)
            if unknown:
                raise InvalidConfigurationError(
                    f"Unknown topic config name: {', '.join(unknown)}"
                )
        parsed = validate_props(props, TOPIC_CONFIG)
        base = defaults if defaults is not None else cls()
        values = base._values()
        internal_segment = parsed.pop("internal.segment.bytes", None)
        for name, value in parsed.items():
            if value is not None:
                values[_attr(name)] = value
        if internal_segment is not None:
            values["segment_bytes"] = internal_segment
        overridden = base.overridden | frozenset(parsed) | (
            frozenset({"segment.bytes"}) if internal_segment is not None else frozenset()
        )
        config = cls(**values, overridden=overridden)
        config.validate()
        return config

    @classmethod
    def from_broker(cls, props: Mapping[str, Any]) -> LogConfig:
        """The topic defaults a broker with ``props`` gives every topic."""
        return BrokerLogConfig.from_props(props).default_log_config

    def with_overrides(self, topic_props: Mapping[str, Any]) -> LogConfig:
        """This config with a topic's own settings applied (unknown names rejected)."""
        return LogConfig.from_props(topic_props, defaults=self, strict=True)

    def validate(self) -> None:
        """Checks that involve more than one key."""
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms:
            raise InvalidConfigurationError(
                f"Invalid value {self.min_compaction_lag_ms} for configuration "
                f"min.compaction.lag.ms: conflicts with max.compaction.lag.ms="
                f"{self.max_compaction_lag_ms} (must not be greater)"
            )

    def _values(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "overridden"}

    def to_props(self) -> dict[str, str]:
        """Every topic key as a string, Kafka's spelling (DescribeConfigs, docs)."""
        return {
            name: show_value(getattr(self, _attr(name)))
            for name, key in TOPIC_CONFIG.items()
            if not key.internal
        }

    # -- derived facts

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def max_decompressed_bytes(self) -> int:
        """Most bytes one batch's records may decompress to (MESSAGE_TOO_LARGE
        beyond): 128 times ``max.message.bytes``, at least 64 MiB. The native core
        caps it at ``_native.MAX_DECOMPRESSED_SIZE`` (256 MiB) whatever is
        passed, so no batch can make the broker decode (or hold) more."""
        return max(128 * self.max_message_bytes, 64 * _MIB)

    @property
    def max_index_size(self) -> int:
        return self.segment_index_bytes

    @property
    def init_file_size(self) -> int:
        """Bytes reserved for a new segment file."""
        return self.segment_bytes if self.preallocate else 0

    def random_segment_jitter_ms(self) -> int:
        """A segment's share of the jitter, drawn in ``[0, min(jitter, segment.ms))``."""
        if self.segment_jitter_ms <= 0:
            return 0
        return random.randrange(min(self.segment_jitter_ms, self.segment_ms))


def _attr(name: str) -> str:
    return name.replace(".", "_")


def _first_set(values: Mapping[str, Any], *candidates: tuple[str, int]) -> Any:
    """The first key present (scaled by its factor), or the last one's default."""
    for name, factor in candidates:
        v = values.get(name)
        if v is not None:
            return v * factor
    name, factor = candidates[-1]
    default = BROKER_LOG_CONFIG[name].default
    return None if default is None else default * factor


# ---------------------------------------------------------------- broker


@dataclass(frozen=True)
class BrokerLogConfig:
    """The broker-level storage settings the LogManager consumes, plus the topic
    defaults they imply (``default_log_config``)."""

    log_dirs: tuple[str, ...] = ("/tmp/kafka-logs",)
    num_recovery_threads_per_data_dir: int = 2
    log_retention_check_interval_ms: int = 300_000
    log_flush_scheduler_interval_ms: int = LONG_MAX
    log_flush_offset_checkpoint_interval_ms: int = 60_000
    log_flush_start_offset_checkpoint_interval_ms: int = 60_000
    log_initial_task_delay_ms: int = 30_000
    log_cleaner_enable: bool = True
    log_cleaner_threads: int = 1
    log_cleaner_dedupe_buffer_size: int = 128 * _MIB
    log_cleaner_io_buffer_size: int = 512 * 1024
    log_cleaner_io_buffer_load_factor: float = 0.9
    log_cleaner_io_max_bytes_per_second: float = 1.7976931348623157e308
    log_cleaner_backoff_ms: int = 15_000
    producer_id_expiration_ms: int = 24 * _HOUR_MS
    producer_id_expiration_check_interval_ms: int = 600_000
    transaction_max_timeout_ms: int = 900_000
    default_log_config: LogConfig = field(default_factory=LogConfig)

    @classmethod
    def from_props(cls, props: Mapping[str, Any]) -> BrokerLogConfig:
        """Resolve a broker's properties; keys outside the storage layer are ignored."""
        v = validate_props(props, BROKER_LOG_CONFIG)

        def get(name: str) -> Any:
            value = v.get(name)
            return BROKER_LOG_CONFIG[name].default if value is None else value

        retention_ms = _first_set(
            v,
            ("log.retention.ms", 1),
            ("log.retention.minutes", _MINUTE_MS),
            ("log.retention.hours", _HOUR_MS),
        )
        flush_ms = v.get("log.flush.interval.ms")
        topic_defaults = {
            "segment.bytes": get("log.segment.bytes"),
            "segment.ms": _first_set(v, ("log.roll.ms", 1), ("log.roll.hours", _HOUR_MS)),
            "segment.jitter.ms": _first_set(
                v, ("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", _HOUR_MS)
            ),
            "segment.index.bytes": get("log.index.size.max.bytes"),
            "index.interval.bytes": get("log.index.interval.bytes"),
            "retention.ms": -1 if retention_ms < 0 else retention_ms,
            "retention.bytes": get("log.retention.bytes"),
            "cleanup.policy": get("log.cleanup.policy"),
            "max.message.bytes": get("message.max.bytes"),
            "message.timestamp.type": get("log.message.timestamp.type"),
            "message.timestamp.before.max.ms": get("log.message.timestamp.before.max.ms"),
            "message.timestamp.after.max.ms": get("log.message.timestamp.after.max.ms"),
            "min.insync.replicas": get("min.insync.replicas"),
            "compression.type": get("compression.type"),
            "compression.gzip.level": get("compression.gzip.level"),
            "compression.lz4.level": get("compression.lz4.level"),
            "compression.zstd.level": get("compression.zstd.level"),
            "file.delete.delay.ms": get("log.segment.delete.delay.ms"),
            "flush.messages": get("log.flush.interval.messages"),
            "flush.ms": get("log.flush.scheduler.interval.ms") if flush_ms is None else flush_ms,
            "min.cleanable.dirty.ratio": get("log.cleaner.min.cleanable.ratio"),
            "min.compaction.lag.ms": get("log.cleaner.min.compaction.lag.ms"),
            "max.compaction.lag.ms": get("log.cleaner.max.compaction.lag.ms"),
            "delete.retention.ms": get("log.cleaner.delete.retention.ms"),
            "preallocate": get("log.preallocate"),
            "unclean.leader.election.enable": get("unclean.leader.election.enable"),
        }
        default_log_config = LogConfig(**{_attr(k): val for k, val in topic_defaults.items()})
        default_log_config.validate()
        dirs = v.get("log.dirs")
        log_dirs = tuple(dirs) if dirs else (get("log.dir"),)
        return cls(
            log_dirs=log_dirs,
            num_recovery_threads_per_data_dir=get("num.recovery.threads.per.data.dir"),
            log_retention_check_interval_ms=get("log.retention.check.interval.ms"),
            log_flush_scheduler_interval_ms=get("log.flush.scheduler.interval.ms"),
            log_flush_offset_checkpoint_interval_ms=get("log.flush.offset.checkpoint.interval.ms"),
            log_flush_start_offset_checkpoint_interval_ms=get(
                "log.flush.start.offset.checkpoint.interval.ms"
            ),
            log_initial_task_delay_ms=get("log.initial.task.delay.ms"),
            log_cleaner_enable=get("log.cleaner.enable"),
            log_cleaner_threads=get("log.cleaner.threads"),
            log_cleaner_dedupe_buffer_size=get("log.cleaner.dedupe.buffer.size"),
            log_cleaner_io_buffer_size=get("log.cleaner.io.buffer.size"),
            log_cleaner_io_buffer_load_factor=get("log.cleaner.io.buffer.load.factor"),
            log_cleaner_io_max_bytes_per_second=get("log.cleaner.io.max.bytes.per.second"),
            log_cleaner_backoff_ms=get("log.cleaner.backoff.ms"),
            producer_id_expiration_ms=get("producer.id.expiration.ms"),
            producer_id_expiration_check_interval_ms=get(
                "producer.id.expiration.check.interval.ms"
            ),
            transaction_max_timeout_ms=get("transaction.max.timeout.ms"),
            default_log_config=default_log_config,
        )


# ---------------------------------------------------------------- docs, help


def config_docs(table: Mapping[str, ConfigKey] = TOPIC_CONFIG) -> str:
    """A Markdown table of ``table`` (name, type, default, valid values, server default, doc)."""
    lines = [
        "| name | type | default | valid values | server default | description |",
        "|---|---|---|---|---|---|",
    ]
    for key in table.values():
        if key.internal:
            continue
        valid = str(key.validator) if key.validator is not None else ""
        lines.append(
            f"| {key.name} | {key.type.value} | {show_value(key.default)} | {valid} | "
            f"{key.server_default or ''} | {key.doc} |"
        )
    return "\n".join(lines) + "\n"


def cli_help(table: Mapping[str, ConfigKey] = TOPIC_CONFIG) -> list[str]:
    """One ``--help`` line per key."""
    return [key.help() for key in table.values() if not key.internal]


def keys_with_server_default(names: Iterable[str]) -> dict[str, str]:
    """Topic key → broker key supplying its default, for ``names``."""
    return {n: k for n in names if (k := TOPIC_CONFIG[n].server_default) is not None}
