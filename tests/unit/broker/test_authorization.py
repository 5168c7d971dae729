"""Every API's authorization check, in-process (the KafkaApis harness with an
AclAuthorizer): a principal with no ACL is refused with the error code Kafka's
KafkaApis gives and nothing changes; a super user passes the same requests."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from conftest import build_batch
from kafka_apis_harness import Core

from pylog.broker.auth_helper import authorizer_from_config
from pylog.broker.kafka_apis import KafkaApis
from pylog.common.topic_partition import TopicPartition
from pylog.errors import ErrorCode
from pylog.protocol import ApiKey, decode_response
from pylog.records import FileRecords
from pylog.security.kafka_principal import KafkaPrincipal

E = ErrorCode
K = ApiKey
TAF, CAF = E.TOPIC_AUTHORIZATION_FAILED, E.CLUSTER_AUTHORIZATION_FAILED
MALLORY, ADMIN = KafkaPrincipal.user("mallory"), KafkaPrincipal.user("admin")


def run(tmp: str, body: Callable[[Core, Callable[..., Awaitable[Any]]], Awaitable[None]]) -> None:
    async def main() -> None:
        core = Core(
            tmp,
            authorizer_class_name="kafka.security.authorizer.AclAuthorizer",
            super_users="User:admin",
        )
        authorizer = authorizer_from_config(core.config, core.store)
        assert authorizer is not None
        core.apis = KafkaApis(core.config, core.rm, core.store, authorizer=authorizer)

        async def call(
            principal: KafkaPrincipal, key: int, version: int, req: dict[str, Any]
        ) -> Any:
            request, _ = core.request(key, version, req)
            request.principal = principal
            chunks = await core.apis.handle(request)
            assert chunks is not None
            raw = b"".join(
                c.read_bytes() if isinstance(c, FileRecords) else bytes(c) for c in chunks
            )
            return decode_response(key, version, raw, framed=True)

        try:
            await body(core, call)
        finally:
            core.close()

    asyncio.run(main())


def test_every_api_refuses_a_principal_without_acls(tmp_path: Any) -> None:
    async def body(core: Core, call: Callable[..., Awaitable[Any]]) -> None:
        created = await call(
            ADMIN,
            K.CREATE_TOPICS,
            7,
            {
                "topics": [
                    {
                        "name": "t",
                        "num_partitions": 1,
                        "replication_factor": 1,
                        "assignments": [],
                        "configs": [],
                    }
                ],
                "timeout_ms": 5000,
                "validate_only": False,
            },
        )
        assert created.topics[0].error_code == 0
        batch = build_batch([b"a", b"b", b"c"])
        produce = {
            "transactional_id": None,
            "acks": 1,
            "timeout_ms": 5000,
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": batch}]}],
        }
        r = await call(MALLORY, K.PRODUCE, 9, produce)
        assert r.responses[0].partition_responses[0].error_code == TAF
        r = await call(ADMIN, K.PRODUCE, 9, produce)
        assert r.responses[0].partition_responses[0].error_code == 0
        log = core.log_manager.get_log(("t", 0))
        assert log is not None and log.log_end_offset == 3

        fetch = {
            "replica_id": -1,
            "max_wait_ms": 0,
            "min_bytes": 0,
            "max_bytes": 1 << 20,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [
                {
                    "topic": "t",
                    "partitions": [
                        {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}
                    ],
                }
            ],
            "forgotten_topics_data": [],
            "rack_id": "",
        }
        r = await call(MALLORY, K.FETCH, 11, fetch)
        assert r.responses[0].partitions[0].error_code == TAF
        assert not r.responses[0].partitions[0].records
        r = await call(MALLORY, K.FETCH, 11, {**fetch, "replica_id": 1})  # a "follower"
        assert r.responses[0].partitions[0].error_code == TAF

        r = await call(
            MALLORY,
            K.LIST_OFFSETS,
            5,
            {
                "replica_id": -1,
                "isolation_level": 0,
                "topics": [{"name": "t", "partitions": [{"partition_index": 0, "timestamp": -1}]}],
            },
        )
        assert r.topics[0].partitions[0].error_code == TAF
        r = await call(
            MALLORY,
            K.OFFSET_FOR_LEADER_EPOCH,
            3,
            {
                "replica_id": -1,
                "topics": [
                    {
                        "topic": "t",
                        "partitions": [
                            {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}
                        ],
                    }
                ],
            },
        )
        assert r.topics[0].partitions[0].error_code == TAF

        r = await call(
            MALLORY,
            K.DELETE_RECORDS,
            2,
            {
                "timeout_ms": 1000,
                "topics": [{"name": "t", "partitions": [{"partition_index": 0, "offset": 2}]}],
            },
        )
        assert r.topics[0].partitions[0].error_code == TAF
        assert log.log_start_offset == 0
        r = await call(
            MALLORY,
            K.CREATE_PARTITIONS,
            3,
            {
                "topics": [{"name": "t", "count": 3, "assignments": None}],
                "timeout_ms": 1000,
                "validate_only": False,
            },
        )
        assert r.results[0].error_code == TAF
        assert core.store.topic("t").partitions == 1  # type: ignore[union-attr]
        r = await call(MALLORY, K.DELETE_TOPICS, 5, {"topic_names": ["t"], "timeout_ms": 1000})
        assert r.responses[0].error_code == TAF
        r = await call(
            MALLORY,
            K.CREATE_TOPICS,
            7,
            {
                "topics": [
                    {
                        "name": "u",
                        "num_partitions": 1,
                        "replication_factor": 1,
                        "assignments": [],
                        "configs": [],
                    }
                ],
                "timeout_ms": 5000,
                "validate_only": False,
            },
        )
        assert r.topics[0].error_code == TAF
        assert "t" in core.store and "u" not in core.store

        r = await call(
            MALLORY,
            K.DESCRIBE_CONFIGS,
            4,
            {
                "resources": [
                    {"resource_type": 2, "resource_name": "t", "configuration_keys": None},
                    {"resource_type": 4, "resource_name": "0", "configuration_keys": None},
                ],
                "include_synonyms": False,
                "include_documentation": False,
            },
        )
        assert [x.error_code for x in r.results] == [TAF, CAF]
        r = await call(
            MALLORY,
            K.INCREMENTAL_ALTER_CONFIGS,
            1,
            {
                "resources": [
                    {
                        "resource_type": 2,
                        "resource_name": "t",
                        "configs": [{"name": "retention.ms", "config_operation": 0, "value": "1"}],
                    }
                ],
                "validate_only": False,
            },
        )
        assert r.responses[0].error_code == TAF
        r = await call(
            MALLORY,
            K.ALTER_CONFIGS,
            2,
            {
                "resources": [
                    {
                        "resource_type": 2,
                        "resource_name": "t",
                        "configs": [{"name": "retention.ms", "value": "1"}],
                    }
                ],
                "validate_only": False,
            },
        )
        assert r.responses[0].error_code == TAF
        assert core.store.topic("t").configs == {}  # type: ignore[union-attr]

        r = await call(
            MALLORY,
            K.METADATA,
            12,
            {
                "topics": None,
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False,
            },
        )
        assert r.topics == []
        r = await call(
            MALLORY,
            K.METADATA,
            12,
            {
                "topics": [{"name": "t", "topic_id": None}],
                "allow_auto_topic_creation": True,
                "include_topic_authorized_operations": True,
            },
        )
        assert [(t.name, t.error_code, t.partitions) for t in r.topics] == [("t", TAF, [])]
        r = await call(
            ADMIN,
            K.METADATA,
            12,
            {
                "topics": None,
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": True,
            },
        )
        assert [t.name for t in r.topics] == ["t"]
        assert r.topics[0].topic_authorized_operations == sum(
            1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11)
        )

        # the cluster APIs
        r = await call(MALLORY, K.DESCRIBE_LOG_DIRS, 4, {"topics": None})
        assert r.error_code == CAF and r.results == []
        r = await call(
            MALLORY,
            K.LEADER_AND_ISR,
            6,
            {
                "controller_id": 5,
                "controller_epoch": 1,
                "broker_epoch": -1,
                "type": 0,
                "topic_states": [],
                "live_leaders": [],
            },
        )
        assert r.error_code == CAF
        r = await call(
            MALLORY,
            K.STOP_REPLICA,
            4,
            {
                "controller_id": 5,
                "controller_epoch": 1,
                "broker_epoch": -1,
                "topic_states": [
                    {
                        "topic_name": "t",
                        "partition_states": [
                            {"partition_index": 0, "leader_epoch": -2, "delete_partition": True}
                        ],
                    }
                ],
            },
        )
        assert r.error_code == CAF
        assert core.rm.partition(TopicPartition("t", 0)) is not None
        r = await call(
            MALLORY,
            K.UPDATE_METADATA,
            8,
            {
                "controller_id": 5,
                "controller_epoch": 1,
                "broker_epoch": -1,
                "topic_states": [],
                "live_brokers": [],
            },
        )
        assert r.error_code == CAF
        r = await call(MALLORY, K.CONTROLLED_SHUTDOWN, 3, {"broker_id": 0, "broker_epoch": -1})
        assert r.error_code == CAF
        r = await call(
            MALLORY,
            K.ELECT_LEADERS,
            2,
            {
                "election_type": 0,
                "topic_partitions": [{"topic": "t", "partitions": [0]}],
                "timeout_ms": 1000,
            },
        )
        assert r.error_code == CAF
        assert r.replica_election_results[0].partition_result[0].error_code == CAF
        r = await call(
            MALLORY, K.LIST_PARTITION_REASSIGNMENTS, 0, {"timeout_ms": 1000, "topics": None}
        )
        assert r.error_code == CAF
        r = await call(MALLORY, K.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {"users": None})
        assert r.error_code == CAF
        r = await call(
            MALLORY,
            K.ALTER_USER_SCRAM_CREDENTIALS,
            0,
            {
                "deletions": [],
                "upsertions": [
                    {
                        "name": "mallory",
                        "mechanism": 2,
                        "iterations": 8192,
                        "salt": b"s" * 32,
                        "salted_password": b"p" * 64,
                    }
                ],
            },
        )
        assert [(x.user, x.error_code) for x in r.results] == [("mallory", CAF)]
        assert core.store.scram_credentials.users() == []
        r = await call(MALLORY, K.DESCRIBE_CLIENT_QUOTAS, 1, {"components": [], "strict": False})
        assert r.error_code == CAF
        r = await call(
            MALLORY,
            K.ALTER_CLIENT_QUOTAS,
            1,
            {
                "entries": [
                    {
                        "entity": [{"entity_type": "user", "entity_name": "mallory"}],
                        "ops": [{"key": "producer_byte_rate", "value": 1.0, "remove": False}],
                    }
                ],
                "validate_only": False,
            },
        )
        assert [e.error_code for e in r.entries] == [CAF]
        assert core.store.client_quotas == {}
        r = await call(
            MALLORY,
            K.DESCRIBE_CLUSTER,
            1,
            {"include_cluster_authorized_operations": True, "endpoint_type": 1},
        )
        assert r.error_code == 0 and r.cluster_authorized_operations == 0
        r = await call(
            ADMIN,
            K.DESCRIBE_CLUSTER,
            1,
            {"include_cluster_authorized_operations": True, "endpoint_type": 1},
        )
        assert r.cluster_authorized_operations == sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))

        # the ACL APIs
        acl = {
            "resource_type": 2,
            "resource_name": "t",
            "resource_pattern_type": 3,
            "principal": "User:mallory",
            "host": "*",
            "operation": 4,
            "permission_type": 3,
        }
        r = await call(MALLORY, K.CREATE_ACLS, 3, {"creations": [acl]})
        assert [x.error_code for x in r.results] == [CAF]
        any_filter = {
            "resource_type_filter": 1,
            "resource_name_filter": None,
            "pattern_type_filter": 1,
            "principal_filter": None,
            "host_filter": None,
            "operation": 1,
            "permission_type": 1,
        }
        r = await call(MALLORY, K.DESCRIBE_ACLS, 3, any_filter)
        assert r.error_code == CAF
        r = await call(MALLORY, K.DELETE_ACLS, 3, {"filters": [any_filter]})
        assert [x.error_code for x in r.filter_results] == [CAF]

        # once an ACL lets mallory write t, the same produce goes through
        r = await call(ADMIN, K.CREATE_ACLS, 3, {"creations": [acl]})
        assert [x.error_code for x in r.results] == [0]
        r = await call(MALLORY, K.PRODUCE, 9, produce)
        assert r.responses[0].partition_responses[0].error_code == 0
        assert log.log_end_offset == 6
        r = await call(ADMIN, K.DESCRIBE_ACLS, 3, any_filter)
        assert [
            (x.resource_name, [(a.principal, a.operation) for a in x.acls]) for x in r.resources
        ] == [("t", [("User:mallory", 4)])]
        r = await call(ADMIN, K.DELETE_ACLS, 3, {"filters": [any_filter]})
        assert [len(x.matching_acls) for x in r.filter_results] == [1]
        r = await call(MALLORY, K.PRODUCE, 9, produce)
        assert r.responses[0].partition_responses[0].error_code == TAF

    run(str(tmp_path), body)


def test_write_txn_markers_needs_cluster_action_and_describe_producers_read(
    tmp_path: Any,
) -> None:
    """Kafka's handleWriteTxnMarkersRequest: without ALTER or CLUSTER_ACTION on
    the cluster every partition of every marker is CLUSTER_AUTHORIZATION_FAILED
    and nothing is written; DescribeProducers needs READ on the topic."""

    async def body(core: Core, call: Callable[..., Awaitable[Any]]) -> None:
        topic = {"name": "t", "num_partitions": 1, "replication_factor": 1}
        created = await call(ADMIN, K.CREATE_TOPICS, 5, {"topics": [topic], "timeout_ms": 5000})
        assert created.topics[0].error_code == 0
        markers = {
            "markers": [
                {
                    "producer_id": 7,
                    "producer_epoch": 0,
                    "transaction_result": True,
                    "coordinator_epoch": 1,
                    "topics": [{"name": "t", "partition_indexes": [0]}],
                }
            ]
        }
        r = await call(MALLORY, K.WRITE_TXN_MARKERS, 1, markers)
        assert r.markers[0].topics[0].partitions[0].error_code == CAF
        log = core.log_manager.get_log(("t", 0))
        assert log is not None and log.log_end_offset == 0
        r = await call(ADMIN, K.WRITE_TXN_MARKERS, 1, markers)
        assert r.markers[0].topics[0].partitions[0].error_code == 0
        assert log.log_end_offset == 1  # the marker

        describe = {"topics": [{"name": "t", "partition_indexes": [0]}]}
        r = await call(MALLORY, K.DESCRIBE_PRODUCERS, 0, describe)
        assert r.topics[0].partitions[0].error_code == TAF
        r = await call(ADMIN, K.DESCRIBE_PRODUCERS, 0, describe)
        p = r.topics[0].partitions[0]
        assert p.error_code == 0
        states = [
            (s.producer_id, s.coordinator_epoch, s.current_txn_start_offset)
            for s in p.active_producers
        ]
        assert states == [(7, 1, -1)]
        unknown = {"topics": [{"name": "nope", "partition_indexes": [0]}]}
        r = await call(ADMIN, K.DESCRIBE_PRODUCERS, 0, unknown)
        assert r.topics[0].partitions[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION

    run(str(tmp_path), body)
