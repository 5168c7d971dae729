"""Kafka as the oracle for the admin APIs: Metadata, CreateTopics,
DeleteTopics, CreatePartitions, DescribeConfigs, AlterConfigs,
IncrementalAlterConfigs, DeleteRecords, DescribeCluster — hand-written
scenarios, each at every version both brokers serve."""

from __future__ import annotations

from typing import Any

import pytest

from pylog.protocol import ApiKey

from .conftest import Brokers
from .diff_harness import Oracle, Pair, Rule, fit, name, versions


@pytest.fixture
def oracle(pair: Pair) -> Oracle:
    return Oracle(pair)


def vr(brokers: Brokers, key: ApiKey) -> range:
    r = versions(brokers.kafka_versions, brokers.pylog_versions, key)
    assert len(r) > 0, f"{key.name}: no version both serve"
    return r


# ---------------------------------------------------------------- Metadata


def test_metadata_unknown_topics_and_no_auto_create(brokers: Brokers, oracle: Oracle) -> None:
    oracle.sweep(
        ApiKey.METADATA,
        vr(brokers, ApiKey.METADATA),
        lambda v: {
            "topics": [{"name": name("absent")}, {"name": "bad/name"}],
            "allow_auto_topic_creation": False,
        },
    )
    # an empty list (v1+) is "no topics", not "all"
    oracle.sweep(
        ApiKey.METADATA,
        range(max(1, vr(brokers, ApiKey.METADATA).start), vr(brokers, ApiKey.METADATA).stop),
        lambda v: {"topics": [], "allow_auto_topic_creation": False},
    )
    oracle.verify()


def test_metadata_of_topics_at_every_version(brokers: Brokers, oracle: Oracle) -> None:
    t1, t3 = name("md-one"), name("md-three")
    oracle.create({t1: 1, t3: 3})
    oracle.sweep(
        ApiKey.METADATA,
        vr(brokers, ApiKey.METADATA),
        lambda v: {
            "topics": [{"name": t1}, {"name": t3}, {"name": name("md-absent")}],
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": v >= 8,
        },
    )
    oracle.verify()


def test_metadata_cluster_authorized_operations(brokers: Brokers, oracle: Oracle) -> None:
    oracle.sweep(
        ApiKey.METADATA,
        range(8, 11),
        lambda v: {
            "topics": [],
            "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": True,
        },
    )
    oracle.verify()


# ---------------------------------------------------------------- CreateTopics


def _create_body(tag: str, validate_only: bool) -> dict[str, Any]:
    def t(base: str) -> str:
        return name(f"ct{tag}-{base}")

    def topic(n: str, p: int = 1, rf: int = 1, **kw: Any) -> dict[str, Any]:
        return {"name": n, "num_partitions": p, "replication_factor": rf, **kw}

    return {
        "topics": [
            topic(t("ok"), 2, configs=[{"name": "retention.ms", "value": "1000000"}]),
            topic(t("dflt"), -1, -1),
            topic(t("rf3"), 1, 3),
            topic(t("rf0"), 1, 0),
            topic(t("p0"), 0, 1),
            topic("bad/name-" + t(""), 1, 1),
            topic("a" * 250, 1, 1),
            topic(".", 1, 1),
            topic(t("badcfg"), configs=[{"name": "no.such.config", "value": "1"}]),
            topic(t("badval"), configs=[{"name": "retention.ms", "value": "abc"}]),
            topic(t("badpolicy"), configs=[{"name": "cleanup.policy", "value": "sometimes"}]),
            topic(
                t("asg"),
                -1,
                -1,
                assignments=[
                    {"partition_index": 0, "broker_ids": [1]},
                    {"partition_index": 1, "broker_ids": [1]},
                ],
            ),
            topic(t("asgbad"), -1, -1, assignments=[{"partition_index": 0, "broker_ids": [7]}]),
            topic(t("asgboth"), 2, -1, assignments=[{"partition_index": 0, "broker_ids": [1]}]),
            topic("__consumer_offsets"),
        ],
        "timeout_ms": 30000,
        "validate_only": validate_only,
    }


# What CreateTopics v5+ describes of a new topic: the configs both brokers have
# are compared, the ones only KRaft Kafka 4.3 has are not (and min.insync.replicas'
# source, which KRaft sets as a cluster-wide dynamic default: docs/compatibility.md).
KAFKA_ONLY_TOPIC_CONFIGS = (
    "local.retention.bytes",
    "local.retention.ms",
    "remote.log.copy.disable",
    "remote.log.delete.on.disable",
    "remote.storage.enable",
)
TOPIC_CONFIG_RULES = (
    *(
        Rule(
            f"topics[*].configs[name={c}]",
            "a topic config of tiered storage, which pylog does not have",
            presence=False,
        )
        for c in KAFKA_ONLY_TOPIC_CONFIGS
    ),
    Rule(
        "topics[*].configs[name=min.insync.replicas].config_source",
        "KRaft Kafka 4 sets min.insync.replicas as a cluster-wide dynamic default (ELR)",
    ),
)


MIN_ISR = "results[*].configs[name=min.insync.replicas]"
MIN_ISR_RULES = (
    Rule(f"{MIN_ISR}.config_source", TOPIC_CONFIG_RULES[-1].why),
    Rule(f"{MIN_ISR}.synonyms[*]", TOPIC_CONFIG_RULES[-1].why, presence=False),
)


@pytest.mark.parametrize("validate_only", [False, True], ids=["create", "validate-only"])
def test_create_topics_errors_at_every_version(
    brokers: Brokers, oracle: Oracle, validate_only: bool
) -> None:
    tag = "v" if validate_only else "c"
    for v in vr(brokers, ApiKey.CREATE_TOPICS):
        body = _create_body(f"{tag}{v}", validate_only)
        oracle.send(ApiKey.CREATE_TOPICS, v, body, allow=TOPIC_CONFIG_RULES)
        # the same again: TOPIC_ALREADY_EXISTS where the first one created it
        oracle.send(ApiKey.CREATE_TOPICS, v, body, allow=TOPIC_CONFIG_RULES)
    oracle.verify()


# ---------------------------------------------------------------- DeleteTopics


def test_delete_topics(brokers: Brokers, oracle: Oracle) -> None:
    for v in vr(brokers, ApiKey.DELETE_TOPICS):
        t = name(f"del{v}")
        oracle.create({t: 2})
        body: dict[str, Any] = {"timeout_ms": 30000}
        names = [t, name(f"del{v}-absent"), "__consumer_offsets"]
        if v >= 6:
            body["topics"] = [{"name": n} for n in names]
            body["topics"].append({"name": None, "topic_id": "AAAAAAAAAAAAAAAAAAAAAQ"})
        else:
            body["topic_names"] = names
        oracle.send(ApiKey.DELETE_TOPICS, v, body)
    oracle.verify()


# ---------------------------------------------------------------- CreatePartitions


# ZooKeeper-era Kafka (3.x ZkAdminManager) says why a topic is unknown; KRaft's
# controller answers UNKNOWN_TOPIC_OR_PARTITION with no message. pylog keeps the message.
UNKNOWN_TOPIC_MESSAGE = Rule(
    "results[*].error_message",
    "CreatePartitions of an unknown topic: KRaft gives no message, ZooKeeper-era Kafka one",
    presence=False,
)


def test_create_partitions(brokers: Brokers, oracle: Oracle) -> None:
    for v in vr(brokers, ApiKey.CREATE_PARTITIONS):
        grow, same, absent = name(f"cp{v}-grow"), name(f"cp{v}-same"), name(f"cp{v}-absent")
        oracle.create({grow: 1, same: 2})
        for validate_only in (True, False):
            oracle.send(
                ApiKey.CREATE_PARTITIONS,
                v,
                {
                    "topics": [
                        {"name": grow, "count": 3, "assignments": None},
                        {"name": same, "count": 2, "assignments": None},
                        {"name": absent, "count": 2, "assignments": None},
                    ],
                    "timeout_ms": 30000,
                    "validate_only": validate_only,
                },
                allow=[UNKNOWN_TOPIC_MESSAGE],
            )
        oracle.send(
            ApiKey.CREATE_PARTITIONS,
            v,
            {
                "topics": [
                    {"name": same, "count": 1, "assignments": None},
                    {"name": grow, "count": 4, "assignments": [{"broker_ids": [9]}]},
                ],
                "timeout_ms": 30000,
                "validate_only": False,
            },
        )
    oracle.verify()


# ---------------------------------------------------------------- configs


def test_describe_configs_of_a_topic(brokers: Brokers, oracle: Oracle) -> None:
    t = name("dc")
    oracle.create({t: 1}, {"retention.ms": "3600000", "cleanup.policy": "compact"})
    for v in vr(brokers, ApiKey.DESCRIBE_CONFIGS):
        oracle.send(
            ApiKey.DESCRIBE_CONFIGS,
            v,
            {
                "resources": [
                    {
                        "resource_type": 2,
                        "resource_name": t,
                        "configuration_keys": ["retention.ms", "cleanup.policy", "segment.bytes"],
                    },
                    {"resource_type": 2, "resource_name": name("dc-absent"),
                     "configuration_keys": None},
                ],
                "include_synonyms": True,
                "include_documentation": False,
            },
        )  # fmt: skip
    oracle.verify()


def test_alter_configs_and_incremental(brokers: Brokers, oracle: Oracle) -> None:
    """AlterConfigs (replaces every override) and IncrementalAlterConfigs (SET,
    DELETE, APPEND, SUBTRACT), valid and invalid, validate-only, on unknown
    topics and on the broker; each followed by a DescribeConfigs of the result."""
    t = name("ac")
    oracle.create({t: 1}, {"retention.ms": "3600000"})

    def describe() -> None:
        body = {
            "resources": [{"resource_type": 2, "resource_name": t,
                           "configuration_keys": ["retention.ms", "cleanup.policy",
                                                  "segment.bytes", "max.message.bytes"]}],
            "include_synonyms": True,
        }  # fmt: skip
        oracle.settle(ApiKey.DESCRIBE_CONFIGS, 4, fit(ApiKey.DESCRIBE_CONFIGS, 4, body))
        oracle.send(ApiKey.DESCRIBE_CONFIGS, 4, body)

    def res(name_: str, configs: list[dict[str, Any]], rtype: int = 2) -> dict[str, Any]:
        return {"resource_type": rtype, "resource_name": name_, "configs": configs}

    # KRaft checks the configs before the topic exists; ZooKeeper-era Kafka
    # (AdminZkClient.validateTopicConfig), which pylog follows, the topic first.
    def kraft_order(topic: str) -> Rule:
        return Rule(
            f"responses[resource_type=2,resource_name={topic}].error_code",
            "an unknown topic with a bad config: KRaft answers INVALID_CONFIG, ZooKeeper-era "
            "Kafka UNKNOWN_TOPIC_OR_PARTITION",
        )

    for v in vr(brokers, ApiKey.ALTER_CONFIGS):
        for validate_only in (True, False):
            oracle.send(
                ApiKey.ALTER_CONFIGS,
                v,
                {
                    "resources": [
                        res(t, [{"name": "segment.bytes", "value": str(1 << 20)},
                                {"name": "max.message.bytes", "value": "2000000"}]),
                        res(name("ac-absent"), [{"name": "segment.bytes", "value": "1048576"}]),
                        res(t + "x", [{"name": "no.such.config", "value": "1"}]),
                    ],
                    "validate_only": validate_only,
                },
                allow=[kraft_order(t + "x")],
            )  # fmt: skip
        oracle.send(
            ApiKey.ALTER_CONFIGS,
            v,
            {"resources": [res(t, [{"name": "segment.bytes", "value": "-5"}])],
             "validate_only": False},
        )  # fmt: skip
        describe()
    for v in vr(brokers, ApiKey.INCREMENTAL_ALTER_CONFIGS):
        ops = [
            [{"name": "retention.ms", "config_operation": 0, "value": "7200000"}],
            [{"name": "retention.ms", "config_operation": 1, "value": None}],
            [{"name": "cleanup.policy", "config_operation": 2, "value": "compact"}],
            [{"name": "cleanup.policy", "config_operation": 3, "value": "delete"}],
            [{"name": "segment.bytes", "config_operation": 2, "value": "5"}],
            [{"name": "retention.ms", "config_operation": 0, "value": "soon"}],
        ]
        for op in ops:
            # Not sent: an unknown config operation (9). Kafka 4.3's controller
            # fails on it with a NullPointerException and renounces its
            # leadership, which leaves the oracle without a coordinator for a while.
            allow = [kraft_order(name("iac-absent"))]
            oracle.send(
                ApiKey.INCREMENTAL_ALTER_CONFIGS,
                v,
                {"resources": [res(t, op), res(name("iac-absent"), op)],
                 "validate_only": False},
                allow=allow,
            )  # fmt: skip
            describe()
    oracle.verify()


def test_describe_cluster(brokers: Brokers, oracle: Oracle) -> None:
    for v in vr(brokers, ApiKey.DESCRIBE_CLUSTER):
        for ops in (False, True):
            oracle.send(
                ApiKey.DESCRIBE_CLUSTER,
                v,
                {"include_cluster_authorized_operations": ops, "endpoint_type": 1,
                 "include_fenced_brokers": v >= 2},  # KIP-1073: none is fenced
                allow=[Rule("cluster_authorized_operations",
                            "fixed on acls (cluster operations: 7, no WRITE)")],
            )  # fmt: skip
    oracle.verify()


def test_api_versions(brokers: Brokers, oracle: Oracle) -> None:
    """Everything but the table of API keys and the KRaft feature levels, which
    docs/compatibility.md lists (test_differential_compatibility_doc.py)."""
    for v in vr(brokers, ApiKey.API_VERSIONS):
        oracle.send(
            ApiKey.API_VERSIONS,
            v,
            {"client_software_name": "pylog-differential", "client_software_version": "1.0"},
            allow=[
                Rule("api_keys[*]", "docs/compatibility.md's table", presence=False),
                Rule("supported_features[*]", "KRaft feature levels", presence=False),
                Rule("finalized_features[*]", "KRaft feature levels", presence=False),
                Rule("finalized_features_epoch", "KRaft feature levels", presence=False),
            ],
        )
    # a name ApiVersions v3+ refuses: INVALID_REQUEST
    oracle.send(
        ApiKey.API_VERSIONS,
        3,
        {"client_software_name": "bad name!", "client_software_version": "1.0"},
        allow=[Rule("api_keys[*]", "docs/compatibility.md's table", presence=False)],
    )
    oracle.verify()
