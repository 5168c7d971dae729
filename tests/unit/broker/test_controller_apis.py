"""The controller's requests through KafkaApis, at the layouts of their
versions: LeaderAndIsr v0/v2/v5+, UpdateMetadata v0/v3/v7, StopReplica
v0/v1/v3."""

from __future__ import annotations

import asyncio
from typing import Any

from kafka_apis_harness import Core

from pylog.common.topic_partition import TopicPartition
from pylog.errors import ErrorCode
from pylog.protocol import ApiKey

TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"


def run(path: str, body: Any) -> None:
    async def main() -> None:
        core = Core(path)
        try:
            await body(core)
        finally:
            await core.rm.shutdown_replica_fetchers()
            core.close()

    asyncio.run(main())


def pstate(index: int, leader: int, epoch: int, **extra: Any) -> dict[str, Any]:
    return {
        "partition_index": index,
        "controller_epoch": 1,
        "leader": leader,
        "leader_epoch": epoch,
        "isr": [0, 1],
        "partition_epoch": 0,
        "replicas": [0, 1],
        **extra,
    }


def test_leader_and_isr_versions(tmp_path: Any) -> None:
    async def body(core: Core) -> None:
        v0 = await core.call(ApiKey.LEADER_AND_ISR, 0, {
            "controller_id": 5, "controller_epoch": 1,
            "ungrouped_partition_states": [{"topic_name": "a", **pstate(0, 0, 0)}],
            "live_leaders": [{"broker_id": 0, "host_name": "127.0.0.1", "port": 9092}],
        })  # fmt: skip
        assert v0.error_code == 0
        assert [(e.topic_name, e.partition_index, e.error_code) for e in v0.partition_errors] == [
            ("a", 0, 0)
        ]
        assert core.rm.partition(TopicPartition("a", 0)).is_leader  # type: ignore[union-attr]
        v2 = await core.call(ApiKey.LEADER_AND_ISR, 2, {
            "controller_id": 5, "controller_epoch": 1, "broker_epoch": -1,
            "topic_states": [{"topic_name": "b", "partition_states": [pstate(1, 0, 2)]}],
            "live_leaders": [],
        })  # fmt: skip
        assert [(e.topic_name, e.error_code) for e in v2.partition_errors] == [("b", 0)]
        v6 = await core.call(ApiKey.LEADER_AND_ISR, 6, {
            "controller_id": 5, "controller_epoch": 1, "broker_epoch": -1, "type": 0,
            "topic_states": [{"topic_name": "c", "topic_id": TOPIC_ID,
                              "partition_states": [pstate(0, 1, 3)]}],
            "live_leaders": [{"broker_id": 1, "host_name": "127.0.0.1", "port": 1}],
        })  # fmt: skip
        assert v6.error_code == 0
        assert [(t.topic_id, [e.error_code for e in t.partition_errors]) for t in v6.topics] == [
            (TOPIC_ID, [0])
        ]
        c0 = core.rm.partition(TopicPartition("c", 0))
        assert c0 is not None and not c0.is_leader and c0.leader_epoch == 3
        assert core.store.topic("c").topic_id == TOPIC_ID  # type: ignore[union-attr]
        # An older controller is refused whole.
        stale = await core.call(ApiKey.LEADER_AND_ISR, 6, {
            "controller_id": 5, "controller_epoch": 0, "broker_epoch": -1, "type": 0,
            "topic_states": [{"topic_name": "c", "topic_id": TOPIC_ID,
                              "partition_states": [pstate(0, 0, 9)]}],
            "live_leaders": [],
        })  # fmt: skip
        assert stale.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
        assert c0.leader_epoch == 3

    run(str(tmp_path), body)


def test_update_metadata_versions(tmp_path: Any) -> None:
    async def body(core: Core) -> None:
        cache = core.rm.metadata_cache
        r = await core.call(ApiKey.UPDATE_METADATA, 0, {
            "controller_id": 5, "controller_epoch": 1,
            "ungrouped_partition_states": [{"topic_name": "a", "partition_index": 0,
                "controller_epoch": 1, "leader": 1, "leader_epoch": 2, "isr": [1],
                "zk_version": 4, "replicas": [0, 1]}],
            "live_brokers": [{"id": 1, "v0_host": "h1", "v0_port": 9093}],
        })  # fmt: skip
        assert r.error_code == 0
        assert cache.controller_id == 5 and cache.leader_of("a", 0) == 1
        assert cache.broker_endpoint(1, "PLAINTEXT").port == 9093  # type: ignore[union-attr]
        r = await core.call(ApiKey.UPDATE_METADATA, 3, {
            "controller_id": 6, "controller_epoch": 1, "broker_epoch": -1,
            "ungrouped_partition_states": [],
            "live_brokers": [{"id": 2, "endpoints": [{"port": 1, "host": "h2",
                              "listener": "INTERNAL", "security_protocol": 0}], "rack": "r2"}],
        })  # fmt: skip
        assert r.error_code == 0
        assert [b.id for b in cache.alive_brokers()] == [2]
        assert cache.alive_broker(2).rack == "r2"  # type: ignore[union-attr]
        assert cache.broker_endpoint(2, "INTERNAL") is not None
        r = await core.call(ApiKey.UPDATE_METADATA, 7, {
            "controller_id": 6, "controller_epoch": 2, "broker_epoch": -1,
            "topic_states": [{"topic_name": "b", "topic_id": TOPIC_ID, "partition_states": [
                {"partition_index": 3, "controller_epoch": 2, "leader": 2, "leader_epoch": 1,
                 "isr": [2], "zk_version": 1, "replicas": [2, 0], "offline_replicas": [0]}]}],
            "live_brokers": [],
        })  # fmt: skip
        assert r.error_code == 0
        info = cache.partition_info("b", 3)
        assert info is not None and info.offline_replicas == (0,)
        assert cache.topic_id("b") == TOPIC_ID
        r = await core.call(ApiKey.UPDATE_METADATA, 7, {
            "controller_id": 6, "controller_epoch": 1, "broker_epoch": -1,
            "topic_states": [], "live_brokers": [],
        })  # fmt: skip
        assert r.error_code == ErrorCode.STALE_CONTROLLER_EPOCH

    run(str(tmp_path), body)


def test_stop_replica_versions(tmp_path: Any) -> None:
    async def body(core: Core) -> None:
        for name in ("a", "b", "c"):
            await core.call(ApiKey.LEADER_AND_ISR, 2, {
                "controller_id": 5, "controller_epoch": 1, "broker_epoch": -1,
                "topic_states": [{"topic_name": name, "partition_states": [pstate(0, 0, 4)]}],
                "live_leaders": [],
            })  # fmt: skip
        rm = core.rm
        r = await core.call(ApiKey.STOP_REPLICA, 0, {
            "controller_id": 5, "controller_epoch": 1, "delete_partitions": True,
            "ungrouped_partitions": [{"topic_name": "a", "partition_index": 0}],
        })  # fmt: skip
        assert [(e.topic_name, e.error_code) for e in r.partition_errors] == [("a", 0)]
        assert rm.partition(TopicPartition("a", 0)) is None
        r = await core.call(ApiKey.STOP_REPLICA, 1, {
            "controller_id": 5, "controller_epoch": 1, "broker_epoch": -1,
            "delete_partitions": False, "topics": [{"name": "b", "partition_indexes": [0]}],
        })  # fmt: skip
        assert r.error_code == 0 and rm.partition(TopicPartition("b", 0)) is not None
        r = await core.call(ApiKey.STOP_REPLICA, 3, {
            "controller_id": 5, "controller_epoch": 1, "broker_epoch": -1,
            "topic_states": [{"topic_name": "c", "partition_states": [
                {"partition_index": 0, "leader_epoch": 3, "delete_partition": True}]}],
        })  # fmt: skip
        assert [e.error_code for e in r.partition_errors] == [ErrorCode.FENCED_LEADER_EPOCH]
        r = await core.call(ApiKey.STOP_REPLICA, 3, {
            "controller_id": 5, "controller_epoch": 1, "broker_epoch": -1,
            "topic_states": [{"topic_name": "c", "partition_states": [
                {"partition_index": 0, "leader_epoch": -2, "delete_partition": True}]}],
        })  # fmt: skip
        assert [e.error_code for e in r.partition_errors] == [0]
        assert rm.partition(TopicPartition("c", 0)) is None

    run(str(tmp_path), body)
