"""The admin APIs driven in-process with real request bytes (the protocol
codec's encode_request, and kafka-python's own request classes) against real
log files under tmp_path: create/delete topics, partitions, records, configs,
cluster and log dirs, and their Kafka error codes."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any

from conftest import build_batch
from kafka_apis_harness import Core

from pylog.broker.config_apis import ConfigSource, ResourceType
from pylog.common.topic_partition import TopicPartition
from pylog.errors import ErrorCode
from pylog.network import Request
from pylog.protocol import ZERO_UUID, ApiKey, parse_request_header

E = ErrorCode
K = ApiKey


def run(core_dir: str, body: Callable[[Core], Awaitable[None]], **props: Any) -> None:
    async def main() -> None:
        core = Core(core_dir, **props)  # KafkaApis' table holds the admin APIs
        try:
            await body(core)
        finally:
            core.close()

    asyncio.run(main())


def topic(name: str, partitions: int = -1, rf: int = -1, **configs: str | None) -> dict[str, Any]:
    return {
        "name": name,
        "num_partitions": partitions,
        "replication_factor": rf,
        "assignments": [],
        "configs": [{"name": k.replace("_", "."), "value": v} for k, v in configs.items()],
    }


async def create_topics(
    core: Core, *topics: dict[str, Any], version: int = 7, validate_only: bool = False
) -> Any:
    return await core.call(
        K.CREATE_TOPICS,
        version,
        {"topics": list(topics), "timeout_ms": 5000, "validate_only": validate_only},
    )


async def produce(core: Core, name: str, count: int, partition: int = 0) -> None:
    batch = build_batch([b"v%d" % i for i in range(count)])
    body = {
        "acks": 1,
        "timeout_ms": 5000,
        "topic_data": [{"name": name, "partition_data": [{"index": partition, "records": batch}]}],
    }
    r = await core.call(K.PRODUCE, 9, body)
    assert r.responses[0].partition_responses[0].error_code == 0


def log_dirs_of(core: Core, name: str) -> list[str]:
    return sorted(d for d in os.listdir(core.data_dir) if d.rsplit("-", 1)[0] == name)


def describe_topic(
    core: Core, name: str, keys: list[str] | None = None, version: int = 4, synonyms: bool = True
) -> Awaitable[Any]:
    return core.call(
        K.DESCRIBE_CONFIGS,
        version,
        {
            "resources": [
                {
                    "resource_type": ResourceType.TOPIC,
                    "resource_name": name,
                    "configuration_keys": keys,
                }
            ],
            "include_synonyms": synonyms,
            **({"include_documentation": True} if version >= 3 else {}),
        },
    )


def configs_of(result: Any) -> dict[str, Any]:
    return {c.name: c for c in result.configs}


# ---------------------------------------------------------------- ApiVersions


def test_admin_apis_are_advertised(tmp_path: Any) -> None:
    async def body(core: Core) -> None:
        r = await core.call(K.API_VERSIONS, 3, {"client_software_name": "t",
                                                "client_software_version": "1"})  # fmt: skip
        keys = {k.api_key for k in r.api_keys}
        assert {17, 19, 20, 21, 32, 33, 35, 37, 44, 60} <= keys

    run(str(tmp_path), body)


# ---------------------------------------------------------------- CreateTopics


def test_create_topics_defaults_ids_configs_and_logs(tmp_path: Any) -> None:
    async def body(core: Core) -> None:
        r = await create_topics(core, topic("orders", retention_ms="3600000"))
        t = r.topics[0]
        assert (t.name, t.error_code, t.error_message) == ("orders", 0, None)
        assert t.num_partitions == 3  # num.partitions below
        assert t.replication_factor == 1
        assert t.topic_id != ZERO_UUID
        assert t.topic_id == core.store.topic("orders").topic_id  # type: ignore[union-attr]
        cfg = configs_of(t)
        assert cfg["retention.ms"].value == "3600000"
        assert cfg["retention.ms"].config_source == ConfigSource.TOPIC_CONFIG
        assert cfg["segment.bytes"].config_source == ConfigSource.DEFAULT_CONFIG
        assert cfg["cleanup.policy"].value == "delete"
        # log.retention.check... no: message.max.bytes is set on this broker
        assert cfg["max.message.bytes"].value == "2000000"
        assert cfg["max.message.bytes"].config_source == ConfigSource.STATIC_BROKER_CONFIG
        assert not any(c.read_only for c in t.configs)
        assert log_dirs_of(core, "orders") == ["orders-0", "orders-1", "orders-2"]
        assert core.log_manager.config_for("orders").retention_ms == 3_600_000

        # v4: no ids or configs in the answer, but the topic is made
        r = await create_topics(core, topic("v4", 2), version=4)
        assert r.topics[0].error_code == 0
        assert core.store.topic("v4").partitions == 2  # type: ignore[union-attr]

    run(str(tmp_path), body, num_partitions=3, message_max_bytes=2_000_000)


def test_create_topics_validate_only_creates_nothing(tmp_path: Any) -> None:
    async def body(core: Core) -> None:
        r = await create_topics(core, topic("dry", 4, 1), validate_only=True)
        t = r.topics[0]
        assert (t.error_code, t.num_partitions, t.replication_factor) == (0, 4, 1)
        assert core.store.topic("dry") is None
        assert log_dirs_of(core, "dry") == []
        r = await create_topics(core, topic("dry", 4, 1, retention_ms="x"), validate_only=True)
        assert r.topics[0].error_code == E.INVALID_CONFIG

    run(str(tmp_path), body)


def test_create_topics_errors(tmp_path: Any) -> None:
    async def body(core: Core) -> None:
        await create_topics(core, topic("exists", 1))
        cases: list[tuple[dict[str, Any], int]] = [
            (topic("exists", 1), E.TOPIC_ALREADY_EXISTS),
            (topic(""), E.INVALID_TOPIC_EXCEPTION),
            (topic("."), E.INVALID_TOPIC_EXCEPTION),
            (topic(".."), E.INVALID_TOPIC_EXCEPTION),
            (topic("has space"), E.INVALID_TOPIC_EXCEPTION),
            (topic("slash/no"), E.INVALID_TOPIC_EXCEPTION),
            (topic("x" * 250), E.INVALID_TOPIC_EXCEPTION),
            (topic("rf2", 1, 2), E.INVALID_REPLICATION_FACTOR),
            (topic("rf0", 1, 0), E.INVALID_REPLICATION_FACTOR),
            (topic("p0", 0, 1), E.INVALID_PARTITIONS),
            (topic("badcfg", 1, 1, retention_ms="soon"), E.INVALID_CONFIG),
            (topic("lowseg", 1, 1, segment_bytes="10"), E.INVALID_CONFIG),
            (topic("unknown", 1, 1, no_such_key="1"), E.INVALID_CONFIG),
            (topic("nullcfg", 1, 1, retention_ms=None), E.INVALID_CONFIG),
            (topic("bad_policy", 1, 1, cleanup_policy="compact,shred"), E.INVALID_CONFIG),
        ]
        r = await create_topics(core, *(c for c, _ in cases))
        got = {t.name: (t.error_code, t.error_message) for t in r.topics}
        for c, code in cases:
            err, msg = got[c["name"]]
            assert err == code, (c["name"], err, msg)
            assert msg, c["name"]
            assert r.topics[[t.name for t in r.topics].index(c["name"])].topic_id == ZERO_UUID
        assert "segment.bytes" in got["lowseg"][1]
        assert "no.such.key" in got["unknown"][1]
        ok = await create_topics(core, topic("x" * 249, 1))
        assert ok.topics[0].error_code == 0
        # a collision of '.' and '_' (metric names) is an invalid topic, as in Kafka
        await create_topics(core, topic("a.b", 1))
        r = await create_topics(core, topic("a_b", 1))
        assert r.topics[0].error_code == E.INVALID_TOPIC_EXCEPTION
        # one name twice in a request: INVALID_REQUEST, once, and nothing is made
        r = await create_topics(core, topic("twice", 1), topic("twice", 2))
        assert [(t.name, t.error_code) for t in r.topics] == [("twice", E.INVALID_REQUEST)]
        assert core.store.topic("twice") is None

    run(str(tmp_path), body)


def test_create_topics_with_replica_assignment(tmp_path: Any) -> None:
    async def body(core: Core) -> None:
        t = topic("assigned")
        t["assignments"] = [
            {"partition_index": 0, "broker_ids": [0]},
            {"partition_index": 1, "broker_ids": [0]},
        ]
        r = await create_topics(core, t)
        assert (r.topics[0].error_code, r.topics[0].num_partitions) == (0, 2)
        t = topic("elsewhere")
        t["assignments"] = [{"partition_index": 0, "broker_ids": [0, 1]}]
        r = await create_topics(core, t)
        assert r.topics[0].error_code == E.INVALID_REPLICA_ASSIGNMENT
        t = topic("both", 2, 1)
        t["assignments"] = [{"partition_index": 0, "broker_ids": [0]}]
        r = await create_topics(core, t)
        assert r.topics[0].error_code == E.INVALID_REQUEST

    run(str(tmp_path), body)


# ---------------------------------------------------------------- DeleteTopics


def test_delete_topics_by_name_and_by_id(tmp_path: Any) -> None:
    async def body(core: Core) -> None:
        r = await create_topics(core, topic("a", 2), topic("b", 1), topic("c", 1))
        ids = {t.name: t.topic_id for t in r.topics}
        await produce(core, "a", 5)
        r = await core.call(K.DELETE_TOPICS, 5, {"topic_names": ["a", "nope"], "timeout_ms": 1000})
        got = {t.name: t.error_code for t in r.responses}
        assert got == {"a": 0, "nope": E.UNKNOWN_TOPIC_OR_PARTITION}
        assert core.store.topic("a") is None
        assert core.rm.partition(TopicPartition("a", 0)) is None
        assert core.log_manager.get_log(("a", 0)) is None
        assert log_dirs_of(core, "a") == []  # renamed to *-delete for the async delete

        unknown_id = "AAAAAAAAAAAAAAAAAAAAAQ"
        r = await core.call(
            K.DELETE_TOPICS,
            6,
            {
                "topics": [
                    {"name": None, "topic_id": ids["b"]},
                    {"name": None, "topic_id": unknown_id},
                    {"name": "c", "topic_id": ZERO_UUID},
                    {"name": "c", "topic_id": ids["c"]},
                ],
                "timeout_ms": 1000,
            },
        )
        res = [(t.name, t.topic_id, t.error_code) for t in r.responses]
        assert res[0] == ("b", ids["b"], 0)
        assert res[1] == (None, unknown_id, E.UNKNOWN_TOPIC_ID)
        assert res[2] == ("c", ids["c"], 0)
        assert res[3][2] == E.INVALID_REQUEST  # name and id both given
        assert core.store.topics() == []

    run(str(tmp_path), body)


def test_delete_topics_disabled(tmp_path: Any) -> None:
    async def body(core: Core) -> None:
        await create_topics(core, topic("keep", 1))
        r = await core.call(K.DELETE_TOPICS, 4, {"topic_names": ["keep"], "timeout_ms": 1000})
        assert r.responses[0].error_code == 73  # TOPIC_DELETION_DISABLED
        assert core.store.topic("keep") is not None

    run(str(tmp_path), body, delete_topic_enable="false")


# ---------------------------------------------------------------- CreatePartitions


def test_create_partitions(tmp_path: Any) -> None:
    async def body(core: Core) -> None:
        await create_topics(core, topic("grow", 1))

        async def grow(count: int, name: str = "grow", validate: bool = False) -> Any:
            r = await core.call(
                K.CREATE_PARTITIONS,
                3,
                {
                    "topics": [{"name": name, "count": count, "assignments": None}],
                    "timeout_ms": 1000,
                    "validate_only": validate,
                },
            )
            return r.results[0]

        assert (await grow(4, validate=True)).error_code == 0
        assert core.store.topic("grow").partitions == 1  # type: ignore[union-attr]
        assert (await grow(3)).error_code == 0
        assert log_dirs_of(core, "grow") == ["grow-0", "grow-1", "grow-2"]
        assert core.rm.partition(TopicPartition("grow", 2)) is not None
        await produce(core, "grow", 3, partition=2)
        same = await grow(3)
        assert same.error_code == E.INVALID_PARTITIONS and same.error_message
        assert (await grow(2)).error_code == E.INVALID_PARTITIONS
        assert (await grow(5, "nope")).error_code == E.UNKNOWN_TOPIC_OR_PARTITION
        r = await core.call(
            K.CREATE_PARTITIONS,
            1,
            {
                "topics": [{"name": "grow", "count": 5, "assignments": [{"broker_ids": [1]}]}],
                "timeout_ms": 1000,
                "validate_only": False,
            },
        )
        assert r.results[0].error_code == E.INVALID_REPLICA_ASSIGNMENT

    run(str(tmp_path), body)


# ---------------------------------------------------------------- DeleteRecords


def test_delete_records_moves_the_log_start_offset(tmp_path: Any) -> None:
    async def body(core: Core) -> None:
        await create_topics(core, topic("recs", 2))
        await produce(core, "recs", 10)
        await produce(core, "recs", 4, partition=1)

        async def delete(parts: list[tuple[int, int]], name: str = "recs") -> list[Any]:
            r = await core.call(
                K.DELETE_RECORDS,
                2,
                {
                    "topics": [
                        {
                            "name": name,
                            "partitions": [{"partition_index": p, "offset": o} for p, o in parts],
                        }
                    ],
                    "timeout_ms": 1000,
                },
            )
            return [(p.partition_index, p.low_watermark, p.error_code)
                    for p in r.topics[0].partitions]  # fmt: skip

        assert await delete([(0, 5), (1, -1)]) == [(0, 5, 0), (1, 4, 0)]
        log = core.log_manager.get_log(("recs", 0))
        assert log is not None and log.log_start_offset == 5
        earliest = await core.call(
            K.LIST_OFFSETS,
            5,
            {
                "replica_id": -1,
                "isolation_level": 0,
                "topics": [{"name": "recs", "partitions": [{"partition_index": 0,
                                                            "timestamp": -2}]}],
            },
        )  # fmt: skip
        assert earliest.topics[0].partitions[0].offset == 5
        assert await delete([(0, 11)]) == [(0, -1, E.OFFSET_OUT_OF_RANGE)]
        assert await delete([(0, 3)]) == [(0, 5, 0)]  # never moves back
        assert await delete([(9, 1)]) == [(9, -1, E.UNKNOWN_TOPIC_OR_PARTITION)]
        assert await delete([(0, 1)], "nope") == [(0, -1, E.UNKNOWN_TOPIC_OR_PARTITION)]

    run(str(tmp_path), body)


# ---------------------------------------------------------------- DescribeConfigs


def test_describe_topic_configs_sources_and_synonyms(tmp_path: Any) -> None:
    async def body(core: Core) -> None:
        await create_topics(core, topic("t", 1, cleanup_policy="compact"))
        r = await describe_topic(core, "t")
        res = r.results[0]
        assert (res.error_code, res.resource_type, res.resource_name) == (0, 2, "t")
        cfg = configs_of(res)
        assert "internal.segment.bytes" not in cfg
        policy = cfg["cleanup.policy"]
        assert (policy.value, policy.config_source, policy.read_only) == ("compact", 1, False)
        assert [(s.name, s.value, s.source) for s in policy.synonyms] == [
            ("cleanup.policy", "compact", ConfigSource.TOPIC_CONFIG),
            ("log.cleanup.policy", "delete", ConfigSource.DEFAULT_CONFIG),
        ]
        assert policy.config_type == 7  # LIST
        assert policy.documentation
        # retention.ms: the broker sets log.retention.minutes, not log.retention.ms;
        # Kafka's synonyms start at the primary key's (log.retention.ms) first
        # entry, so none are listed and the source reads DEFAULT_CONFIG
        ret = cfg["retention.ms"]
        assert ret.value == str(90 * 60_000)
        assert ret.config_source == ConfigSource.DEFAULT_CONFIG
        assert ret.synonyms == []
        assert ret.config_type == 5  # LONG
        seg = cfg["segment.ms"]
        assert (seg.value, seg.config_source) == (str(168 * 3_600_000), ConfigSource.DEFAULT_CONFIG)
        assert seg.synonyms == []  # log.roll.ms has no default
        seg_bytes = cfg["segment.bytes"]
        assert [(s.name, s.source) for s in seg_bytes.synonyms] == [
            ("log.segment.bytes", ConfigSource.DEFAULT_CONFIG)
        ]

        r = await describe_topic(core, "t", ["retention.ms", "no.such", "min.insync.replicas"])
        assert sorted(configs_of(r.results[0])) == ["min.insync.replicas", "retention.ms"]
        r = await describe_topic(core, "t", version=1, synonyms=False)
        assert all(c.synonyms == [] for c in r.results[0].configs)

        r = await describe_topic(core, "missing")
        assert r.results[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION
        r = await describe_topic(core, "bad name")
        assert r.results[0].error_code == E.INVALID_TOPIC_EXCEPTION

    run(str(tmp_path), body, log_retention_minutes="90")


def test_describe_broker_configs(tmp_path: Any) -> None:
    async def body(core: Core) -> None:
        def res(name: str, keys: list[str] | None = None) -> dict[str, Any]:
            return {
                "resource_type": ResourceType.BROKER,
                "resource_name": name,
                "configuration_keys": keys,
            }

        r = await core.call(
            K.DESCRIBE_CONFIGS,
            4,
            {
                "resources": [res("0"), res(""), res("7"), res("x"), res("0", ["num.partitions"])],
                "include_synonyms": True,
                "include_documentation": False,
            },
        )
        mine, default, other, junk, one = r.results
        assert mine.error_code == 0
        cfg = configs_of(mine)
        assert cfg["num.partitions"].value == "4"
        assert cfg["num.partitions"].config_source == ConfigSource.STATIC_BROKER_CONFIG
        assert cfg["num.partitions"].read_only
        assert [(s.name, s.source) for s in cfg["num.partitions"].synonyms] == [
            ("num.partitions", ConfigSource.STATIC_BROKER_CONFIG),
            ("num.partitions", ConfigSource.DEFAULT_CONFIG),
        ]
        assert cfg["log.segment.bytes"].config_source == ConfigSource.DEFAULT_CONFIG
        assert cfg["log.retention.ms"].value is None  # unset, no default: Kafka shows null
        assert (default.error_code, default.configs) == (0, [])
        assert other.error_code == E.INVALID_REQUEST
        assert junk.error_code == E.INVALID_REQUEST
        assert [c.name for c in one.configs] == ["num.partitions"]
        r = await core.call(
            K.DESCRIBE_CONFIGS,
            1,
            {"resources": [{"resource_type": 8, "resource_name": "0",
                            "configuration_keys": None}], "include_synonyms": False},
        )  # fmt: skip
        assert r.results[0].error_code == E.INVALID_REQUEST

    run(str(tmp_path), body, num_partitions="4")


# ---------------------------------------------------------------- AlterConfigs


def test_alter_configs_replaces_every_override(tmp_path: Any) -> None:
    async def body(core: Core) -> None:
        await create_topics(core, topic("t", 1, retention_ms="1000", segment_ms="60000"))

        async def alter(configs: dict[str, str | None], validate: bool = False) -> Any:
            r = await core.call(
                K.ALTER_CONFIGS,
                2,
                {
                    "resources": [
                        {
                            "resource_type": ResourceType.TOPIC,
                            "resource_name": "t",
                            "configs": [{"name": k, "value": v} for k, v in configs.items()],
                        }
                    ],
                    "validate_only": validate,
                },
            )
            return r.responses[0]

        assert (await alter({"cleanup.policy": "compact"}, validate=True)).error_code == 0
        assert core.store.topic("t").configs == {"retention.ms": "1000", "segment.ms": "60000"}  # type: ignore[union-attr]
        r = await alter({"cleanup.policy": "compact", "retention.ms": None})
        assert (r.error_code, r.resource_type, r.resource_name) == (0, 2, "t")
        assert core.store.topic("t").configs == {"cleanup.policy": "compact"}  # type: ignore[union-attr]
        cfg = core.log_manager.config_for("t")
        assert cfg.compact and cfg.retention_ms == 7 * 24 * 3_600_000
        log = core.log_manager.get_log(("t", 0))
        assert log is not None and log.config.compact
        bad = await alter({"retention.ms": "-7"})
        assert bad.error_code == E.INVALID_CONFIG and "retention.ms" in bad.error_message
        assert (await alter({"nope": "1"})).error_code == E.INVALID_CONFIG
        assert core.store.topic("t").configs == {"cleanup.policy": "compact"}  # type: ignore[union-attr]

        r = await core.call(
            K.ALTER_CONFIGS,
            1,
            {
                "resources": [
                    {"resource_type": 2, "resource_name": "missing", "configs": []},
                    {"resource_type": 4, "resource_name": "0",
                     "configs": [{"name": "num.partitions", "value": "9"}]},
                    {"resource_type": 4, "resource_name": "3", "configs": []},
                    {"resource_type": 4, "resource_name": "0", "configs": []},
                ],
                "validate_only": False,
            },
        )  # fmt: skip
        codes = [x.error_code for x in r.responses]
        assert codes == [
            E.UNKNOWN_TOPIC_OR_PARTITION,
            E.INVALID_REQUEST,  # the broker resource appears twice
            E.INVALID_REQUEST,  # another broker's id
            E.INVALID_REQUEST,
        ]
        r = await core.call(
            K.ALTER_CONFIGS,
            0,
            {"resources": [{"resource_type": 4, "resource_name": "0",
                            "configs": [{"name": "num.partitions", "value": "9"}]}],
             "validate_only": False},
        )  # fmt: skip
        assert r.responses[0].error_code == E.INVALID_CONFIG
        assert "dynamically" in r.responses[0].error_message

    run(str(tmp_path), body)


def test_incremental_alter_configs(tmp_path: Any) -> None:
    async def body(core: Core) -> None:
        await create_topics(core, topic("t", 1, retention_ms="1000"))

        async def alter(*ops: tuple[str, int, str | None], validate: bool = False) -> Any:
            r = await core.call(
                K.INCREMENTAL_ALTER_CONFIGS,
                1,
                {
                    "resources": [
                        {
                            "resource_type": ResourceType.TOPIC,
                            "resource_name": "t",
                            "configs": [
                                {"name": n, "config_operation": op, "value": v} for n, op, v in ops
                            ],
                        }
                    ],
                    "validate_only": validate,
                },
            )
            return r.responses[0]

        def overrides() -> dict[str, str]:
            meta = core.store.topic("t")
            assert meta is not None
            return meta.configs

        assert (await alter(("segment.ms", 0, "5000"))).error_code == 0
        assert overrides() == {"retention.ms": "1000", "segment.ms": "5000"}
        assert (await alter(("retention.ms", 1, None))).error_code == 0
        assert overrides() == {"segment.ms": "5000"}
        assert (await alter(("cleanup.policy", 2, "compact"))).error_code == 0
        assert overrides()["cleanup.policy"] == "delete,compact"
        assert core.log_manager.config_for("t").compact
        assert (await alter(("cleanup.policy", 3, "delete"))).error_code == 0
        assert overrides()["cleanup.policy"] == "compact"
        assert (await alter(("segment.ms", 0, "1"), validate=True)).error_code == 0
        assert overrides()["segment.ms"] == "5000"

        r = await alter(("retention.ms", 2, "5"))
        assert r.error_code == E.INVALID_CONFIG and "append" in r.error_message
        assert (await alter(("retention.ms", 0, "abc"))).error_code == E.INVALID_CONFIG
        assert (await alter(("retention.ms", 0, None))).error_code == E.INVALID_CONFIG
        assert (await alter(("retention.ms", 9, "1"))).error_code == E.INVALID_REQUEST
        r = await alter(("retention.ms", 0, "1"), ("retention.ms", 1, None))
        assert r.error_code == E.INVALID_REQUEST
        assert (await alter(("no.such", 0, "1"))).error_code == E.INVALID_CONFIG
        assert overrides() == {"segment.ms": "5000", "cleanup.policy": "compact"}

    run(str(tmp_path), body)


# ---------------------------------------------------------------- cluster, log dirs, SASL


def test_describe_cluster(tmp_path: Any) -> None:
    async def body(core: Core) -> None:
        r = await core.call(K.DESCRIBE_CLUSTER, 0, {"include_cluster_authorized_operations": True})
        assert (r.error_code, r.cluster_id, r.controller_id) == (0, core.store.cluster_id, 0)
        assert [(b.broker_id, b.host, b.port, b.rack) for b in r.brokers] == [
            (0, "127.0.0.1", 9092, "r1")
        ]
        assert r.cluster_authorized_operations > 0
        r = await core.call(K.DESCRIBE_CLUSTER, 1, {"endpoint_type": 1})
        assert r.cluster_authorized_operations == -(2**31)
        assert r.endpoint_type == 1
        r = await core.call(K.DESCRIBE_CLUSTER, 1, {"endpoint_type": 2})
        assert r.error_code == 114  # MISMATCHED_ENDPOINT_TYPE: this is a broker

    run(str(tmp_path), body, broker_rack="r1")


def test_describe_log_dirs(tmp_path: Any) -> None:
    async def body(core: Core) -> None:
        await create_topics(core, topic("a", 2), topic("b", 1))
        await produce(core, "a", 20)
        r = await core.call(K.DESCRIBE_LOG_DIRS, 4, {"topics": None})
        assert r.error_code == 0
        (d,) = r.results
        assert d.error_code == 0 and d.log_dir == os.path.abspath(str(tmp_path))
        assert d.total_bytes > 0 and 0 <= d.usable_bytes <= d.total_bytes
        parts = {(t.name, p.partition_index): p for t in d.topics for p in t.partitions}
        assert set(parts) == {("a", 0), ("a", 1), ("b", 0)}
        log = core.log_manager.get_log(("a", 0))
        assert log is not None
        assert parts[("a", 0)].partition_size == log.size > 0
        assert parts[("a", 1)].partition_size == 0
        assert all(p.offset_lag == 0 and not p.is_future_key for p in parts.values())
        r = await core.call(
            K.DESCRIBE_LOG_DIRS, 1, {"topics": [{"topic": "a", "partitions": [1, 7]}]}
        )
        assert [
            (t.name, [p.partition_index for p in t.partitions]) for t in r.results[0].topics
        ] == [("a", [1])]

    run(str(tmp_path), body)


def test_sasl_requests_off_a_sasl_listener_are_illegal(tmp_path: Any) -> None:
    # Kafka's KafkaApis: on a listener that does not authenticate by SASL
    # (here PLAINTEXT) both SASL requests answer ILLEGAL_SASL_STATE.
    async def body(core: Core) -> None:
        for v in (0, 1):
            r = await core.call(K.SASL_HANDSHAKE, v, {"mechanism": "PLAIN"})
            assert (r.error_code, r.mechanisms) == (E.ILLEGAL_SASL_STATE, [])
        for v in (0, 1, 2):
            r = await core.call(K.SASL_AUTHENTICATE, v, {"auth_bytes": b"\0u\0p"})
            assert r.error_code == E.ILLEGAL_SASL_STATE
            assert r.error_message == (
                "SaslAuthenticate request received after successful authentication"
            )

    run(str(tmp_path), body)


# ---------------------------------------------------------------- kafka-python's bytes


async def kp_call(core: Core, req: Any, response_cls: Any) -> Any:
    """Send a request kafka-python encoded and read our answer with kafka-python."""
    req.with_header(correlation_id=77, client_id="kafka-python")
    raw = bytes(req.encode(header=True, framed=True))
    frame = memoryview(bytearray(raw[4:]))
    request = Request(parse_request_header(frame), frame, "c1", "127.0.0.1", "PLAINTEXT",
                      time.monotonic_ns())  # fmt: skip
    chunks = await core.apis.handle(request)
    assert chunks is not None
    data = b"".join(bytes(c) for c in chunks)
    resp = response_cls.decode(data, version=req.version, header=True, framed=True)
    assert resp.header.correlation_id == 77
    return resp


def test_requests_built_by_kafka_python(tmp_path: Any) -> None:
    from kafka.protocol.admin import (
        CreateTopicsRequest,
        CreateTopicsResponse,
        DeleteTopicsRequest,
        DeleteTopicsResponse,
        DescribeConfigsRequest,
        DescribeConfigsResponse,
        IncrementalAlterConfigsRequest,
        IncrementalAlterConfigsResponse,
    )

    async def body(core: Core) -> None:
        ct = CreateTopicsRequest[7](
            topics=[
                CreateTopicsRequest.CreatableTopic(
                    name="kp",
                    num_partitions=2,
                    replication_factor=1,
                    assignments=[],
                    configs=[
                        CreateTopicsRequest.CreatableTopic.CreatableTopicConfig(
                            name="retention.ms", value="60000"
                        )
                    ],
                )
            ],
            timeout_ms=5000,
            validate_only=False,
        )
        r = await kp_call(core, ct, CreateTopicsResponse)
        assert (r.topics[0].name, r.topics[0].error_code, r.topics[0].num_partitions) == (
            "kp",
            0,
            2,
        )
        assert core.store.topic("kp").configs == {"retention.ms": "60000"}  # type: ignore[union-attr]

        iac = IncrementalAlterConfigsRequest[1](
            resources=[
                IncrementalAlterConfigsRequest.AlterConfigsResource(
                    resource_type=2,
                    resource_name="kp",
                    configs=[
                        IncrementalAlterConfigsRequest.AlterConfigsResource.AlterableConfig(
                            name="retention.ms", config_operation=0, value="120000"
                        )
                    ],
                )
            ],
            validate_only=False,
        )
        r = await kp_call(core, iac, IncrementalAlterConfigsResponse)
        assert r.responses[0].error_code == 0

        dc = DescribeConfigsRequest[4](
            resources=[
                DescribeConfigsRequest.DescribeConfigsResource(
                    resource_type=2, resource_name="kp", configuration_keys=["retention.ms"]
                )
            ],
            include_synonyms=True,
            include_documentation=False,
        )
        r = await kp_call(core, dc, DescribeConfigsResponse)
        (entry,) = r.results[0].configs
        assert (entry.name, entry.value, entry.config_source) == ("retention.ms", "120000", 1)

        dt = DeleteTopicsRequest[6](
            topics=[DeleteTopicsRequest.DeleteTopicState(name="kp", topic_id=None)],
            timeout_ms=5000,
        )
        r = await kp_call(core, dt, DeleteTopicsResponse)
        assert (r.responses[0].name, r.responses[0].error_code) == ("kp", 0)
        assert core.store.topic("kp") is None

    run(str(tmp_path), body)


def test_dynamic_broker_configs(tmp_path: Any) -> None:
    """AlterConfigs / IncrementalAlterConfigs of this broker ("0") and of the
    cluster default (""): written to the embedded store, reported by
    DescribeConfigs with Kafka's layer order, refused whole for a key that is
    not dynamic or a value that does not parse."""

    async def body(core: Core) -> None:
        async def incremental(name: str, *ops: tuple[str, int, str | None]) -> Any:
            r = await core.call(
                K.INCREMENTAL_ALTER_CONFIGS,
                1,
                {"resources": [{"resource_type": ResourceType.BROKER, "resource_name": name,
                                "configs": [{"name": n, "config_operation": op, "value": v}
                                            for n, op, v in ops]}],
                 "validate_only": False},
            )  # fmt: skip
            return r.responses[0]

        async def describe(name: str) -> dict[str, Any]:
            r = await core.call(
                K.DESCRIBE_CONFIGS,
                4,
                {"resources": [{"resource_type": ResourceType.BROKER, "resource_name": name,
                                "configuration_keys": None}],
                 "include_synonyms": True, "include_documentation": False},
            )  # fmt: skip
            assert r.results[0].error_code == 0
            return configs_of(r.results[0])

        assert (await incremental("", ("log.retention.ms", 0, "3600000"))).error_code == 0
        assert (await incremental("0", ("message.max.bytes", 0, "5000"))).error_code == 0
        assert core.store.broker_config("<default>") == {"log.retention.ms": "3600000"}
        assert core.store.broker_config("0") == {"message.max.bytes": "5000"}

        mine = await describe("0")
        mmb = mine["message.max.bytes"]
        assert (mmb.value, mmb.config_source, mmb.read_only) == (
            "5000", ConfigSource.DYNAMIC_BROKER_CONFIG, False,
        )  # fmt: skip
        assert [(s.source, s.value) for s in mmb.synonyms] == [
            (ConfigSource.DYNAMIC_BROKER_CONFIG, "5000"),
            (ConfigSource.DEFAULT_CONFIG, "1048588"),
        ]
        assert mine["log.retention.ms"].value == "3600000"
        assert mine["log.retention.ms"].config_source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        assert mine["num.partitions"].read_only  # not a dynamic key
        default = await describe("")
        assert {n: (c.value, c.config_source) for n, c in default.items()} == {
            "log.retention.ms": ("3600000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
        }
        # A topic inherits the dynamic value: its entry names the layer.
        await create_topics(core, topic("t", 1))
        r = await core.call(
            K.DESCRIBE_CONFIGS,
            4,
            {"resources": [{"resource_type": ResourceType.TOPIC, "resource_name": "t",
                            "configuration_keys": ["max.message.bytes"]}],
             "include_synonyms": True, "include_documentation": False},
        )  # fmt: skip
        (entry,) = r.results[0].configs
        assert (entry.value, entry.config_source) == ("5000", ConfigSource.DYNAMIC_BROKER_CONFIG)

        # Refused whole, nothing stored: a key that is not dynamic, a bad value.
        bad = await incremental("0", ("num.partitions", 0, "3"), ("log.cleaner.threads", 0, "2"))
        assert bad.error_code == E.INVALID_CONFIG
        assert bad.error_message == "Cannot update these configs dynamically: Set(num.partitions)"
        bad = await incremental("0", ("log.cleaner.threads", 0, "two"))
        assert bad.error_code == E.INVALID_CONFIG
        assert "log.cleaner.threads" in bad.error_message
        assert core.store.broker_config("0") == {"message.max.bytes": "5000"}

        # DELETE goes back to the next layer down.
        assert (await incremental("0", ("message.max.bytes", 1, None))).error_code == 0
        mmb = (await describe("0"))["message.max.bytes"]
        assert (mmb.value, mmb.config_source) == ("1048588", ConfigSource.DEFAULT_CONFIG)

    run(str(tmp_path), body)
