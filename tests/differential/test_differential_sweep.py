"""Version sweeps: every API both brokers serve, at every version both
advertise, with requests on a topic and a group of known state — and the
APIs the hand-written scenarios leave out (OffsetForLeaderEpoch,
DescribeLogDirs, AlterReplicaLogDirs, ElectLeaders, the reassignment APIs, OffsetDelete,
DescribeUserScramCredentials, SaslHandshake, ListGroups)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pylog.protocol import ApiKey

from .conftest import Brokers
from .diff_harness import Oracle, Pair, Rule, batch, name, versions
from .test_differential_data import produce_body


@pytest.fixture
def oracle(pair: Pair) -> Oracle:
    return Oracle(pair)


T = name("sweep")
G = name("sweep-group")
SHARE_TOPIC_ID = "c2hhcmUtc3dlZXAtdG9waQ"  # no topic's id

# What each API's sweep sends, by version. The APIs with scenarios of their own
# (test_differential_admin / _data / _groups) are swept there; this table holds
# the rest, and the test below checks the two together cover every API both
# brokers serve.
SWEEPS: dict[ApiKey, Callable[[int], dict[str, Any]]] = {
    ApiKey.OFFSET_FOR_LEADER_EPOCH: lambda v: {
        "replica_id": -1,
        "topics": [
            {
                "topic": T,
                "partitions": [
                    {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0},
                    {"partition": 1, "current_leader_epoch": -1, "leader_epoch": 5},
                    {"partition": 7, "current_leader_epoch": -1, "leader_epoch": 0},
                ],
            },
            {
                "topic": name("sweep-absent"),
                "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}],
            },
        ],
    },
    # A directory neither broker has: LOG_DIR_NOT_FOUND from both, before
    # the partition is looked at (Kafka's alterReplicaLogDirs order).
    ApiKey.ALTER_REPLICA_LOG_DIRS: lambda v: {
        "dirs": [
            {"path": "/sweep-no-such-dir", "topics": [{"name": T, "partitions": [0, 9]}]},
        ]
    },
    ApiKey.DESCRIBE_LOG_DIRS: lambda v: {
        "topics": [
            {"topic": T, "partitions": [0, 1, 9]},
            {"topic": name("nope"), "partitions": [0]},
        ]
    },
    ApiKey.ELECT_LEADERS: lambda v: {
        "election_type": 0,
        "topic_partitions": [
            {"topic": T, "partitions": [0, 1, 9]},
            {"topic": name("sweep-absent"), "partitions": [0]},
        ],
        "timeout_ms": 30000,
    },
    ApiKey.LIST_PARTITION_REASSIGNMENTS: lambda v: {
        "timeout_ms": 30000,
        "topics": [{"name": T, "partition_indexes": [0, 1, 9]}],
    },
    # v1 (KIP-860) refuses a change of replication factor, after the target's
    # brokers are checked: partition 1 to two replicas, one of no broker
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: lambda v: {
        "timeout_ms": 30000,
        "allow_replication_factor_change": v < 1,
        "topics": [
            {
                "name": T,
                "partitions": [
                    {"partition_index": 0, "replicas": None},
                    {"partition_index": 9, "replicas": [1]},
                    *([{"partition_index": 1, "replicas": [1, 2]}] if v >= 1 else []),
                ],
            },
        ],
    },
    ApiKey.OFFSET_DELETE: lambda v: {
        "group_id": G,
        "topics": [{"name": T, "partitions": [{"partition_index": 0}, {"partition_index": 9}]}],
    },
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: lambda v: {"users": [{"name": "nobody"}]},
    ApiKey.SASL_HANDSHAKE: lambda v: {"mechanism": "PLAIN"},
    ApiKey.LIST_GROUPS: lambda v: {"states_filter": ["Dead"], "types_filter": ["classic"]},
    # KIP-848: a group nobody created, and a heartbeat Kafka's checks refuse
    # before the group is touched (an epoch past 0 without a member id).
    ApiKey.CONSUMER_GROUP_DESCRIBE: lambda v: {
        "group_ids": [name("sweep-no-group")],
        "include_authorized_operations": False,
    },
    ApiKey.CONSUMER_GROUP_HEARTBEAT: lambda v: {
        "group_id": name("sweep-848"),
        "member_id": "",
        "member_epoch": 3,
        "instance_id": None,
        "rack_id": None,
        "rebalance_timeout_ms": -1,
        "subscribed_topic_names": None,
        "server_assignor": None,
        "topic_partitions": None,
    },
    # Swept once pylog serves them (the quotas branch): a validate-only change
    # of a user's and a client id's quota, a bad key, then a describe.
    ApiKey.ALTER_CLIENT_QUOTAS: lambda v: {
        "entries": [
            {
                "entity": [{"entity_type": "user", "entity_name": "sweep-user"}],
                "ops": [{"key": "producer_byte_rate", "value": 1024.0, "remove": False}],
            },
            {
                "entity": [{"entity_type": "client-id", "entity_name": None}],
                "ops": [{"key": "consumer_byte_rate", "value": 2048.0, "remove": False}],
            },
            {
                "entity": [{"entity_type": "client-id", "entity_name": "c"}],
                "ops": [{"key": "no_such_quota", "value": 1.0, "remove": False}],
            },
        ],
        "validate_only": True,
    },
    # The transaction coordinator's APIs, for a transactional id no broker
    # coordinates (no __transaction_state yet: NOT_COORDINATOR everywhere),
    # TxnOffsetCommit of a topic neither has (nothing written).
    ApiKey.ADD_PARTITIONS_TO_TXN: lambda v: (
        {
            "v3_and_below_transactional_id": "sweep-txn",
            "v3_and_below_producer_id": 1000,
            "v3_and_below_producer_epoch": 0,
            "v3_and_below_topics": [{"name": T, "partitions": [0, 1]}],
        }
        if v < 4
        else {
            "transactions": [
                {
                    "transactional_id": "sweep-txn",
                    "producer_id": 1000,
                    "producer_epoch": 0,
                    "verify_only": verify,
                    "topics": [{"name": T, "partitions": [0]}],
                }
                for verify in (False, True)
            ]
        }
    ),
    ApiKey.ADD_OFFSETS_TO_TXN: lambda v: {
        "transactional_id": "sweep-txn",
        "producer_id": 1000,
        "producer_epoch": 0,
        "group_id": G,
    },
    ApiKey.END_TXN: lambda v: {
        "transactional_id": "sweep-txn",
        "producer_id": 1000,
        "producer_epoch": 0,
        "committed": True,
    },
    ApiKey.TXN_OFFSET_COMMIT: lambda v: {
        "transactional_id": "sweep-txn",
        "group_id": G,
        "producer_id": 1000,
        "producer_epoch": 0,
        "generation_id": -1,
        "member_id": "",
        "group_instance_id": None,
        "topics": [
            {
                "name": name("sweep-absent"),
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": 1,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "",
                    }
                ],
            }
        ],
    },
    ApiKey.DESCRIBE_TRANSACTIONS: lambda v: {"transactional_ids": ["sweep-txn"]},
    ApiKey.LIST_TRANSACTIONS: lambda v: {
        "state_filters": ["Ongoing", "NoSuchState"],
        "producer_id_filters": [],
        "duration_filter": -1,
    },
    # Swept once pylog serves them (the acls branch). Neither broker of the
    # differential session runs an authorizer: both answer SECURITY_DISABLED.
    ApiKey.DESCRIBE_ACLS: lambda v: {
        "resource_type_filter": 2,
        "resource_name_filter": None,
        "pattern_type_filter": 1,
        "principal_filter": None,
        "host_filter": None,
        "operation": 1,
        "permission_type": 1,
    },
    ApiKey.CREATE_ACLS: lambda v: {
        "creations": [
            {
                "resource_type": 2,
                "resource_name": T,
                "resource_pattern_type": 3,
                "principal": "User:sweep",
                "host": "*",
                "operation": 3,
                "permission_type": 3,
            },
        ]
    },
    ApiKey.DELETE_ACLS: lambda v: {
        "filters": [
            {
                "resource_type_filter": 2,
                "resource_name_filter": T,
                "pattern_type_filter": 3,
                "principal_filter": "User:sweep",
                "host_filter": None,
                "operation": 1,
                "permission_type": 1,
            },
        ]
    },
    ApiKey.DESCRIBE_CLIENT_QUOTAS: lambda v: {
        "components": [{"entity_type": "user", "match_type": 2, "match": None}],
        "strict": False,
    },
    # KIP-966's paged description: a limit of one partition, so the answer
    # stops inside the two-partition topic with a cursor; a topic neither has.
    # The producers of both partitions (the sweep's idempotent-free produce
    # leaves none) and of a partition neither has.
    ApiKey.DESCRIBE_PRODUCERS: lambda v: {
        "topics": [{"name": T, "partition_indexes": [0, 1, 7]}],
    },
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: lambda v: {
        "topics": [{"name": T}, {"name": "sweep-missing"}],
        "response_partition_limit": 1,
        "cursor": None,
    },
    # The share coordinator's inter-broker APIs, on a key never used (a topic
    # id no topic has): what a share-partition leader's persister would send.
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: lambda v: {
        "group_id": G,
        "topics": [
            {
                "topic_id": SHARE_TOPIC_ID,
                "partitions": [{"partition": 0, "state_epoch": 0, "start_offset": 5}],
            }
        ],
    },
    ApiKey.READ_SHARE_GROUP_STATE: lambda v: {
        "group_id": G,
        "topics": [
            {
                "topic_id": SHARE_TOPIC_ID,
                "partitions": [
                    {"partition": 0, "leader_epoch": 0},
                    {"partition": 1, "leader_epoch": 0},
                ],
            }
        ],
    },
    ApiKey.WRITE_SHARE_GROUP_STATE: lambda v: {
        "group_id": G,
        "topics": [
            {
                "topic_id": SHARE_TOPIC_ID,
                "partitions": [
                    {
                        "partition": 0,
                        "state_epoch": 0,
                        "leader_epoch": 0,
                        "start_offset": 7,
                        "delivery_complete_count": -1,
                        "state_batches": [
                            {
                                "first_offset": 7,
                                "last_offset": 9,
                                "delivery_state": 0,
                                "delivery_count": 1,
                            }
                        ],
                    }
                ],
            }
        ],
    },
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: lambda v: {
        "group_id": G,
        "topics": [
            {"topic_id": SHARE_TOPIC_ID, "partitions": [{"partition": 0, "leader_epoch": 0}]}
        ],
    },
    ApiKey.DELETE_SHARE_GROUP_STATE: lambda v: {
        "group_id": G,
        "topics": [{"topic_id": SHARE_TOPIC_ID, "partitions": [{"partition": 0}]}],
    },
}

# Swept by the scenario files (every version both serve).
SWEPT_ELSEWHERE = {
    ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.LIST_OFFSETS, ApiKey.METADATA,
    ApiKey.OFFSET_COMMIT, ApiKey.OFFSET_FETCH, ApiKey.FIND_COORDINATOR, ApiKey.JOIN_GROUP,
    ApiKey.HEARTBEAT, ApiKey.LEAVE_GROUP, ApiKey.SYNC_GROUP, ApiKey.DESCRIBE_GROUPS,
    ApiKey.API_VERSIONS, ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS, ApiKey.DELETE_RECORDS,
    ApiKey.INIT_PRODUCER_ID, ApiKey.DESCRIBE_CONFIGS, ApiKey.ALTER_CONFIGS,
    ApiKey.CREATE_PARTITIONS, ApiKey.DELETE_GROUPS, ApiKey.INCREMENTAL_ALTER_CONFIGS,
    ApiKey.DESCRIBE_CLUSTER,
    # test_differential_share_groups.py: one share group's life, each exchange
    ApiKey.SHARE_GROUP_HEARTBEAT, ApiKey.SHARE_GROUP_DESCRIBE, ApiKey.SHARE_FETCH,
    ApiKey.SHARE_ACKNOWLEDGE, ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
    ApiKey.ALTER_SHARE_GROUP_OFFSETS, ApiKey.DELETE_SHARE_GROUP_OFFSETS,
    # test_differential_client_metrics.py: subscriptions listed and described
    ApiKey.LIST_CONFIG_RESOURCES,
}  # fmt: skip
# Served by both but not sent: authentication needs a SASL listener (the
# security tests drive it with real clients); WriteTxnMarkers is the
# transaction coordinator's request to partition leaders, and a marker sent
# here would be written (test_transactions_partition.py drives it, and the
# transaction scenario compares what it leaves with Kafka's).
NOT_SWEPT = {
    ApiKey.UPDATE_FEATURES,  # changes the cluster's finalized levels (test_transactions_v2.py)
    ApiKey.SASL_AUTHENTICATE,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
    ApiKey.WRITE_TXN_MARKERS,
}

ALLOW: dict[ApiKey, list[Rule]] = {
    ApiKey.DESCRIBE_LOG_DIRS: [
        Rule("results[*].log_dir", "each broker's own data directory"),
        Rule("results[*].topics[*].partitions[*].partition_size", "segment files differ "
             "in size until both brokers have rolled the same way"),
        Rule("results[*].total_bytes", "the disk's size, as the OS reports it"),
        Rule("results[*].usable_bytes", "the disk's free space, which moves"),
    ],
}  # fmt: skip


def test_every_common_api_is_swept(brokers: Brokers) -> None:
    common = {ApiKey(k) for k in brokers.kafka_versions.keys() & brokers.pylog_versions.keys()}
    missing = common - SWEEPS.keys() - SWEPT_ELSEWHERE - NOT_SWEPT
    assert not missing, f"served by both, swept nowhere: {sorted(k.name for k in missing)}"


def test_sweep(brokers: Brokers, oracle: Oracle) -> None:
    oracle.create({T: 2})
    for p in range(2):
        oracle.send(ApiKey.PRODUCE, 9, produce_body(T, batch([b"s1", b"s2"]), partition=p))
    # The share coordinator of the swept key (both make __share_group_state
    # on this first FindCoordinator of a share-partition key).
    oracle.until(
        ApiKey.FIND_COORDINATOR, 6,
        {"key_type": 2, "coordinator_keys": [f"{G}:{SHARE_TOPIC_ID}:0", f"{G}:{SHARE_TOPIC_ID}:1"]},
        lambda r: all(c.error_code == 0 for c in r.coordinators), timeout=60,
    )  # fmt: skip
    for key, body in SWEEPS.items():
        for v in versions(brokers.kafka_versions, brokers.pylog_versions, key):
            oracle.send(key, v, body(v), allow=ALLOW.get(key, ()))
    oracle.verify()
