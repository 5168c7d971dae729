"""Metadata, DescribeCluster and FindCoordinator once the controller's
UpdateMetadata has filled the MetadataCache: the cluster's brokers, its
controller and each partition's leader come from the cache; before, a lone
broker answers with itself."""

from __future__ import annotations

import asyncio
from typing import Any

from kafka_apis_harness import Core

from pylog.broker.group_apis import GroupApis
from pylog.coordinator.group_metadata_manager import GROUP_METADATA_TOPIC
from pylog.errors import ErrorCode
from pylog.metadata.metadata_cache import MetadataCache, PartitionInfo
from pylog.protocol import ApiKey, decode_response

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


def broker(i: int, rack: str | None = None) -> dict[str, Any]:
    return {"id": i, "rack": rack, "endpoints": [
        {"port": 9090 + i, "host": f"h{i}", "listener": "PLAINTEXT", "security_protocol": 0},
        {"port": 19090 + i, "host": f"i{i}", "listener": "INTERNAL", "security_protocol": 0},
    ]}  # fmt: skip


def pstate(index: int, leader: int, epoch: int, replicas: list[int], isr: list[int],
           **extra: Any) -> dict[str, Any]:  # fmt: skip
    return {"partition_index": index, "controller_epoch": 1, "leader": leader,
            "leader_epoch": epoch, "isr": isr, "replicas": replicas, **extra}  # fmt: skip


async def make_cluster(core: Core) -> None:
    """Broker 0 follows t-0 (led by 1) and leads t-1; broker 2 is dead and led t-2."""
    r = await core.call(ApiKey.LEADER_AND_ISR, 5, {
        "controller_id": 1, "controller_epoch": 1, "broker_epoch": -1, "type": 0,
        "topic_states": [{"topic_name": "t", "topic_id": TOPIC_ID, "partition_states": [
            {**pstate(0, 1, 3, [1, 0], [1, 0]), "partition_epoch": 2},
            {**pstate(1, 0, 4, [0, 1], [0, 1]), "partition_epoch": 0},
        ]}],
        "live_leaders": [{"broker_id": 1, "host_name": "127.0.0.1", "port": 1}],
    })  # fmt: skip
    assert r.error_code == 0
    r = await core.call(ApiKey.UPDATE_METADATA, 7, {
        "controller_id": 1, "controller_epoch": 1, "broker_epoch": -1,
        "topic_states": [{"topic_name": "t", "topic_id": TOPIC_ID, "partition_states": [
            {**pstate(0, 1, 3, [1, 0], [1, 0]), "zk_version": 2},
            {**pstate(1, 0, 4, [0, 1], [0, 1]), "zk_version": 0},
            {**pstate(2, 2, 1, [2, 1], [2]), "zk_version": 5, "offline_replicas": [2]},
        ]}],
        "live_brokers": [broker(0, "r0"), broker(1, "r1")],
    })  # fmt: skip
    assert r.error_code == 0


def metadata_body(topics: list[str] | None) -> dict[str, Any]:
    return {
        "topics": None if topics is None else [{"name": t, "topic_id": None} for t in topics],
        "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False,
    }


def test_lone_broker_answers_with_itself(tmp_path: Any) -> None:
    async def body(core: Core) -> None:
        r = await core.call(ApiKey.METADATA, 12, metadata_body(None))
        assert [(b.node_id, b.port) for b in r.brokers] == [(0, 9092)]
        assert r.controller_id == 0
        d = await core.call(ApiKey.DESCRIBE_CLUSTER, 0, {})
        assert d.controller_id == 0 and [b.broker_id for b in d.brokers] == [0]

    run(str(tmp_path), body)


def test_metadata_from_the_cache(tmp_path: Any) -> None:
    async def body(core: Core) -> None:
        await make_cluster(core)
        for topics in (None, ["t"]):
            r = await core.call(ApiKey.METADATA, 12, metadata_body(topics))
            assert [(b.node_id, b.host, b.port, b.rack) for b in r.brokers] == [
                (0, "h0", 9090, "r0"),
                (1, "h1", 9091, "r1"),
            ]
            assert r.controller_id == 1
            (t,) = r.topics
            assert t.name == "t" and t.error_code == 0 and t.topic_id == TOPIC_ID
            got = [
                (p.partition_index, p.error_code, p.leader_id, p.leader_epoch,
                 list(p.replica_nodes), list(p.isr_nodes), list(p.offline_replicas))
                for p in t.partitions
            ]  # fmt: skip
            assert got == [
                (0, 0, 1, 3, [1, 0], [1, 0], []),
                (1, 0, 0, 4, [0, 1], [0, 1], []),
                # the leader is not a live broker: no leader to name
                (2, ErrorCode.LEADER_NOT_AVAILABLE, -1, 1, [2, 1], [2], [2]),
            ]
        # Old versions take the same view.
        r0 = await core.call(ApiKey.METADATA, 1, {"topics": [{"name": "t"}]})
        assert [b.node_id for b in r0.brokers] == [0, 1] and r0.controller_id == 1
        assert [p.leader_id for p in r0.topics[0].partitions] == [1, 0, -1]

    run(str(tmp_path), body)


def test_metadata_listener_endpoints(tmp_path: Any) -> None:
    async def body(core: Core) -> None:
        await make_cluster(core)
        req, _ = core.request(ApiKey.METADATA, 12, metadata_body(["t"]))
        req.listener = "INTERNAL"
        chunks = await core.apis.handle(req)
        assert chunks is not None
        r = decode_response(ApiKey.METADATA, 12, b"".join(bytes(c) for c in chunks), framed=True)  # type: ignore[arg-type]
        assert [(b.node_id, b.host, b.port) for b in r.brokers] == [
            (0, "i0", 19090),
            (1, "i1", 19091),
        ]

    run(str(tmp_path), body)


def test_describe_cluster_from_the_cache(tmp_path: Any) -> None:
    async def body(core: Core) -> None:
        await make_cluster(core)
        d = await core.call(ApiKey.DESCRIBE_CLUSTER, 0, {})
        assert d.error_code == 0 and d.controller_id == 1
        assert [(b.broker_id, b.host, b.port, b.rack) for b in d.brokers] == [
            (0, "h0", 9090, "r0"),
            (1, "h1", 9091, "r1"),
        ]

    run(str(tmp_path), body)


def test_produce_fetch_against_the_cluster(tmp_path: Any) -> None:
    async def body(core: Core) -> None:
        await make_cluster(core)
        # t-0 is led by broker 1: this broker (a follower) refuses the client.
        fetch = {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": "t", "partitions": [
                {"partition": 0, "current_leader_epoch": 3, "fetch_offset": 0,
                 "log_start_offset": -1, "partition_max_bytes": 1 << 20},
                {"partition": 1, "current_leader_epoch": 2, "fetch_offset": 0,
                 "log_start_offset": -1, "partition_max_bytes": 1 << 20},
                {"partition": 1, "current_leader_epoch": 4, "fetch_offset": 0,
                 "log_start_offset": -1, "partition_max_bytes": 1 << 20},
            ]}],
            "forgotten_topics_data": [], "rack_id": "",
        }  # fmt: skip
        r = await core.call(ApiKey.FETCH, 11, fetch)
        codes = [p.error_code for t in r.responses for p in t.partitions]
        # a follower, a stale epoch at the leader, the current one
        assert codes[0] == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert ErrorCode.FENCED_LEADER_EPOCH in codes[1:]
        assert ErrorCode.NONE in codes[1:]

    run(str(tmp_path), body)


class _Manager:
    def __init__(self, partition: int, controller_managed: bool = True) -> None:
        self.partition = partition
        self.metadata_store = None
        self.controller_managed = controller_managed

    def partition_for(self, group_id: str) -> int:
        return self.partition


class _Coordinator:
    def __init__(self, partition: int, controller_managed: bool = True) -> None:
        self.manager = _Manager(partition, controller_managed)

    def find_coordinator(self, group_id: str) -> int:
        return ErrorCode.NONE


def test_find_coordinator_is_the_offsets_partition_leader(tmp_path: Any) -> None:
    async def body(core: Core) -> None:
        await make_cluster(core)
        cache = core.rm.metadata_cache
        cache.update(
            controller_id=1,
            brokers=list(cache.alive_brokers()),
            partitions=[
                PartitionInfo(GROUP_METADATA_TOPIC, 0, 1, 0, (1, 0), (1, 0)),
                PartitionInfo(GROUP_METADATA_TOPIC, 1, 2, 0, (2,), (2,)),  # 2 is dead
                PartitionInfo(GROUP_METADATA_TOPIC, 2, 0, 0, (0,), (0,)),
            ],
        )
        req, _ = core.request(ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": []})
        expected = {
            0: (1, "h1", 9091, 0),
            1: (-1, "", -1, ErrorCode.COORDINATOR_NOT_AVAILABLE),
            2: (0, "h0", 9090, 0),
            7: (-1, "", -1, ErrorCode.COORDINATOR_NOT_AVAILABLE),  # not in the cache
        }
        for partition, want in expected.items():
            apis = GroupApis(
                _Coordinator(partition),  # type: ignore[arg-type]
                0,
                lambda _listener: ("lone", 1),
                metadata_cache=cache,
            )
            c = apis._coordinator_for(req, "g", 0, True)
            assert (c.node_id, c.host, c.port, c.error_code) == want, partition
        # A cluster member answers from the cache even before its first
        # UpdateMetadata: no coordinator yet, never itself by default.
        empty = GroupApis(
            _Coordinator(0),  # type: ignore[arg-type]
            0,
            lambda _listener: ("lone", 1),
            metadata_cache=MetadataCache(0),
        )
        c = empty._coordinator_for(req, "g", 0, True)
        assert (c.node_id, c.error_code) == (-1, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        # A lone broker (no controller) is the coordinator itself.
        lone = GroupApis(
            _Coordinator(0, controller_managed=False),  # type: ignore[arg-type]
            0,
            lambda _listener: ("lone", 1),
            metadata_cache=MetadataCache(0),
        )
        c = lone._coordinator_for(req, "g", 0, True)
        assert (c.node_id, c.host, c.port, c.error_code) == (0, "lone", 1, 0)

    run(str(tmp_path), body)
