"""The group coordinator at the protocol level: real KafkaApis, ReplicaManager,
logs and GroupCoordinator in-process; requests encoded with pylog's codec,
answers decoded back. Error codes are Kafka's; a bad request disturbs nothing
else in the group; a new coordinator over the same logs loads what was
committed (answering COORDINATOR_LOAD_IN_PROGRESS until it has)."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from kafka_apis_harness import Core

from pylog import _native
from pylog.broker.kafka_apis import KafkaApis
from pylog.common.topic_partition import TopicPartition
from pylog.coordinator.group_coordinator import GroupCoordinator
from pylog.coordinator.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberRecord,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_group_value,
    decode_key,
    decode_offset_value,
    java_string_hash,
    partition_for,
)
from pylog.errors import ErrorCode as E
from pylog.protocol import GROUP_API_VERSIONS, ApiKey

JOIN, SYNC, HB, LEAVE = ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP, ApiKey.HEARTBEAT, ApiKey.LEAVE_GROUP
COMMIT, FETCH = ApiKey.OFFSET_COMMIT, ApiKey.OFFSET_FETCH
PROPS = {
    "offsets.topic.num.partitions": 4,
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 100,
}


def subscription(*topics: str) -> bytes:
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


def assignment(topic: str, parts: list[int]) -> bytes:
    out = struct.pack(">hi", 0, 1) + struct.pack(">h", len(topic)) + topic.encode()
    out += struct.pack(">i", len(parts)) + b"".join(struct.pack(">i", p) for p in parts)
    return out + struct.pack(">i", -1)


class Groups:
    def __init__(self, core: Core, coordinator: GroupCoordinator) -> None:
        self.core = core
        self.coordinator = coordinator

    async def call(self, key: int, version: int, body: dict[str, Any]) -> Any:
        return await self.core.call(key, version, body)

    async def find(self, group: str) -> Any:
        return await self.call(ApiKey.FIND_COORDINATOR, 3, {"key": group, "key_type": 0})

    async def join(
        self,
        group: str,
        member_id: str = "",
        *,
        protocols: list[tuple[str, bytes]] | None = None,
        session: int = 10_000,
        rebalance: int = 2_000,
        instance: str | None = None,
        version: int = 7,
    ) -> Any:
        body = {
            "group_id": group,
            "session_timeout_ms": session,
            "rebalance_timeout_ms": rebalance,
            "member_id": member_id,
            "group_instance_id": instance,
            "protocol_type": "consumer",
            "protocols": [
                {"name": n, "metadata": m} for n, m in (protocols or [("range", subscription("t"))])
            ],
        }
        return await self.call(JOIN, version, body)

    async def join_member(self, group: str, **kw: Any) -> Any:
        """The v4+ round trip: MEMBER_ID_REQUIRED, then the join with that id."""
        first = await self.join(group, **kw)
        if first.error_code != E.MEMBER_ID_REQUIRED:
            return first
        return await self.join(group, first.member_id, **kw)

    async def sync(
        self,
        group: str,
        gen: int,
        member: str,
        assignments: dict[str, bytes] | None = None,
        instance: str | None = None,
    ) -> Any:
        body = {
            "group_id": group,
            "generation_id": gen,
            "member_id": member,
            "group_instance_id": instance,
            "assignments": [
                {"member_id": m, "assignment": a} for m, a in (assignments or {}).items()
            ],
        }
        return await self.call(SYNC, 5, body)

    async def heartbeat(
        self, group: str, gen: int, member: str, instance: str | None = None
    ) -> int:
        r = await self.call(
            HB,
            4,
            {
                "group_id": group,
                "generation_id": gen,
                "member_id": member,
                "group_instance_id": instance,
            },
        )
        return int(r.error_code)

    async def commit(
        self,
        group: str,
        gen: int,
        member: str,
        offsets: dict[tuple[str, int], Any],
        version: int = 8,
    ) -> dict[tuple[str, int], int]:
        topics: dict[str, list[dict[str, Any]]] = {}
        for (t, p), o in offsets.items():
            off, meta = o if isinstance(o, tuple) else (o, "")
            topics.setdefault(t, []).append(
                {
                    "partition_index": p,
                    "committed_offset": off,
                    "committed_leader_epoch": 7,
                    "committed_metadata": meta,
                }
            )
        body = {
            "group_id": group,
            "generation_id_or_member_epoch": gen,
            "member_id": member,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
        }
        r = await self.call(COMMIT, version, body)
        return {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions}

    async def fetch(self, group: str, tps: list[tuple[str, int]] | None) -> dict[Any, Any]:
        topics = None
        if tps is not None:
            by: dict[str, list[int]] = {}
            for t, p in tps:
                by.setdefault(t, []).append(p)
            topics = [{"name": t, "partition_indexes": ps} for t, ps in by.items()]
        r = await self.call(FETCH, 7, {"group_id": group, "topics": topics})
        assert r.error_code == 0, r
        return {
            (t.name, p.partition_index): (p.committed_offset, p.committed_leader_epoch, p.metadata)
            for t in r.topics
            for p in t.partitions
        }

    async def one_member_group(self, group: str, **kw: Any) -> tuple[str, int]:
        await self.find(group)
        j = await self.join_member(group, **kw)
        assert j.error_code == 0, j
        assert j.leader == j.member_id
        s = await self.sync(
            group,
            j.generation_id,
            j.member_id,
            {j.member_id: assignment("t", [0, 1])},
            instance=kw.get("instance"),
        )
        assert s.error_code == 0
        return j.member_id, j.generation_id


def run(tmp_path: Any, body: Callable[[Groups], Awaitable[None]], **props: Any) -> None:
    async def main() -> None:
        core = Core(str(tmp_path), **{**PROPS, **props})
        for name in ("t", "u"):  # commits name partitions that exist, as on Kafka
            core.store.create_topic(name, 8)
        coordinator = GroupCoordinator(core.config, core.rm, core.store)
        core.apis = KafkaApis(core.config, core.rm, core.store, coordinator)
        coordinator.startup()
        try:
            await body(Groups(core, coordinator))
        finally:
            await coordinator.shutdown()
            core.close()

    asyncio.run(main())


# ---------------------------------------------------------------- records


def test_java_string_hash_and_partition_for_match_kafka() -> None:
    # Values of Java's String.hashCode().
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(2**31)  # Integer.MIN_VALUE
    assert partition_for("polygenelubricants", 50) == 0  # Utils.abs(MIN_VALUE) is 0
    assert (
        java_string_hash("\U0001f600") == 0xD83D * 31 + 0xDE00
    )  # a surrogate pair: two code units
    assert partition_for("hello", 50) == 99162322 % 50


def test_record_schemas_round_trip_with_kafka_layout() -> None:
    key = OffsetCommitKey("g", "t", 3).encode()
    assert key == b"\x00\x01" + b"\x00\x01g" + b"\x00\x01t" + b"\x00\x00\x00\x03"
    assert decode_key(key) == OffsetCommitKey("g", "t", 3)
    value = OffsetCommitValue(42, 5, "m", 1000).encode()
    assert value[:2] == b"\x00\x03" and len(value) == 2 + 8 + 4 + 3 + 8
    v = decode_offset_value(value)
    assert (v.offset, v.leader_epoch, v.metadata, v.commit_timestamp) == (42, 5, "m", 1000)
    gkey = GroupMetadataKey("g").encode()
    assert gkey == b"\x00\x02\x00\x01g" and decode_key(gkey) == GroupMetadataKey("g")
    member = MemberRecord("m-1", "i", "c", "/h", 300, 10, b"sub", b"asg")
    gv = GroupMetadataValue("consumer", 3, "range", "m-1", 77, [member])
    back = decode_group_value(gv.encode())
    assert back == gv and gv.encode()[:2] == b"\x00\x03"


# ---------------------------------------------------------------- the protocol


def test_api_versions_advertise_the_group_apis(tmp_path: Any) -> None:
    async def body(g: Groups) -> None:
        r = await g.call(
            ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
        )
        got = {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}
        for key, rng in GROUP_API_VERSIONS.items():
            assert got[key] == rng, key

    run(tmp_path, body)


def test_find_coordinator_creates_the_compacted_offsets_topic(tmp_path: Any) -> None:
    async def body(g: Groups) -> None:
        r = await g.find("g1")
        assert (r.error_code, r.node_id, r.port) == (0, 0, 9092)
        meta = g.core.store.topic("__consumer_offsets")
        assert meta is not None and meta.partitions == 4 and meta.is_internal
        assert meta.configs["cleanup.policy"] == "compact"
        assert meta.configs["compression.type"] == "producer"
        assert meta.configs["segment.bytes"] == "104857600"
        r4 = await g.call(
            ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["a", "b", ""]}
        )
        assert [(c.key, c.error_code, c.node_id) for c in r4.coordinators] == [
            ("a", 0, 0),
            ("b", 0, 0),
            ("", 0, 0),  # the empty group id is a group (old clients use it)
        ]
        txn = await g.call(ApiKey.FIND_COORDINATOR, 3, {"key": "tx", "key_type": 1})
        assert txn.error_code == E.COORDINATOR_NOT_AVAILABLE

    run(tmp_path, body)


def test_join_sync_heartbeat_leave_and_their_error_codes(tmp_path: Any) -> None:
    async def body(g: Groups) -> None:
        await g.find("g")
        assert (await g.join("")).error_code == E.INVALID_GROUP_ID
        assert (await g.join("g", session=50)).error_code == E.INVALID_SESSION_TIMEOUT
        assert (await g.join("g", session=2_000_000)).error_code == E.INVALID_SESSION_TIMEOUT
        assert (await g.join("g", "nobody")).error_code == E.UNKNOWN_MEMBER_ID
        first = await g.join("g")
        assert first.error_code == E.MEMBER_ID_REQUIRED and first.member_id
        j = await g.join("g", first.member_id)
        assert (j.error_code, j.generation_id, j.leader, j.protocol_name) == (
            0,
            1,
            first.member_id,
            "range",
        )
        assert [m.member_id for m in j.members] == [j.member_id]
        me, gen = j.member_id, j.generation_id
        assert (await g.sync("g", gen + 1, me)).error_code == E.ILLEGAL_GENERATION
        assert (await g.sync("g", gen, "ghost")).error_code == E.UNKNOWN_MEMBER_ID
        s = await g.sync("g", gen, me, {me: assignment("t", [0])})
        assert s.error_code == 0 and s.assignment == assignment("t", [0])
        assert (s.protocol_type, s.protocol_name) == ("consumer", "range")
        assert await g.heartbeat("g", gen, me) == 0
        assert await g.heartbeat("g", gen - 1, me) == E.ILLEGAL_GENERATION
        assert await g.heartbeat("g", gen, "ghost") == E.UNKNOWN_MEMBER_ID
        assert await g.heartbeat("", gen, me) == E.INVALID_GROUP_ID
        # No protocol in common: refused, and the group is untouched.
        bad = await g.join_member("g", protocols=[("roundrobin", subscription("t"))])
        assert bad.error_code == E.INCONSISTENT_GROUP_PROTOCOL
        assert await g.heartbeat("g", gen, me) == 0
        # A second member: a rebalance; the first sees it in its heartbeat.
        task = asyncio.ensure_future(g.join_member("g"))
        await asyncio.sleep(0.05)
        assert await g.heartbeat("g", gen, me) == E.REBALANCE_IN_PROGRESS
        j1 = await g.join("g", me)
        j2 = await task
        assert j1.generation_id == j2.generation_id == gen + 1
        assert j1.leader == me and len(j1.members) == 2 and j2.members == []
        follower = asyncio.ensure_future(g.sync("g", j2.generation_id, j2.member_id))
        await asyncio.sleep(0.02)
        assert not follower.done()  # waits for the leader's assignment
        lead = await g.sync(
            "g",
            j1.generation_id,
            me,
            {me: assignment("t", [0]), j2.member_id: assignment("t", [1])},
        )
        assert lead.assignment == assignment("t", [0])
        assert (await follower).assignment == assignment("t", [1])
        # LeaveGroup v3+: batched members, errors per member.
        r = await g.call(
            LEAVE,
            5,
            {
                "group_id": "g",
                "members": [
                    {"member_id": j2.member_id, "group_instance_id": None, "reason": "bye"},
                    {"member_id": "ghost", "group_instance_id": None},
                ],
            },
        )
        assert r.error_code == 0
        assert [m.error_code for m in r.members] == [0, E.UNKNOWN_MEMBER_ID]
        assert await g.heartbeat("g", j1.generation_id, me) == E.REBALANCE_IN_PROGRESS
        j3 = await g.join("g", me)
        assert j3.generation_id == j1.generation_id + 1 and len(j3.members) == 1
        r0 = await g.call(LEAVE, 1, {"group_id": "g", "member_id": "ghost"})
        assert r0.error_code == E.UNKNOWN_MEMBER_ID

    run(tmp_path, body)


def test_a_group_request_before_the_offsets_topic_exists(tmp_path: Any) -> None:
    """No FindCoordinator yet: this broker holds no partition of
    __consumer_offsets, so it is not the group's coordinator (NOT_COORDINATOR,
    as Kafka answers). OffsetFetch puts the group's error on each partition
    only before v2; from v2 on it lists none."""

    async def body(g: Groups) -> None:
        topics = [{"name": "t", "partition_indexes": [0, 1]}]
        v1 = await g.call(FETCH, 1, {"group_id": "g", "topics": topics})
        assert [(p.partition_index, p.error_code, p.committed_offset)
                for p in v1.topics[0].partitions] == [(0, E.NOT_COORDINATOR, -1),
                                                      (1, E.NOT_COORDINATOR, -1)]  # fmt: skip
        v5 = await g.call(FETCH, 5, {"group_id": "g", "topics": topics})
        assert (v5.error_code, v5.topics) == (E.NOT_COORDINATOR, [])
        v8 = await g.call(
            FETCH, 8, {"groups": [{"group_id": "g", "topics": topics}], "require_stable": False}
        )
        assert [(x.group_id, x.error_code, x.topics) for x in v8.groups] == [
            ("g", E.NOT_COORDINATOR, [])
        ]
        assert g.core.store.topic("__consumer_offsets") is None  # nothing created it

    run(tmp_path, body)


def test_commits_and_fetches_with_bad_input_rejected(tmp_path: Any) -> None:
    async def body(g: Groups) -> None:
        me, gen = await g.one_member_group("g")
        assert await g.commit("g", gen, me, {("t", 0): 10, ("t", 1): 20}) == {
            ("t", 0): 0,
            ("t", 1): 0,
        }
        assert set((await g.commit("g", gen, "ghost", {("t", 0): 99})).values()) == {
            E.UNKNOWN_MEMBER_ID
        }
        assert set((await g.commit("g", gen - 1, me, {("t", 0): 99})).values()) == {
            E.ILLEGAL_GENERATION
        }
        # Generation -1 into a group with members is not a "simple" commit.
        assert set((await g.commit("g", -1, "", {("t", 0): 99})).values()) == {E.UNKNOWN_MEMBER_ID}
        too_big = "x" * 4097
        codes = await g.commit("g", gen, me, {("t", 0): (11, too_big), ("t", 1): (21, "ok")})
        assert codes == {("t", 0): E.OFFSET_METADATA_TOO_LARGE, ("t", 1): 0}
        got = await g.fetch("g", [("t", 0), ("t", 1), ("t", 2)])
        assert got == {("t", 0): (10, 7, ""), ("t", 1): (21, 7, "ok"), ("t", 2): (-1, -1, "")}
        assert await g.fetch("g", None) == {("t", 0): (10, 7, ""), ("t", 1): (21, 7, "ok")}
        assert await g.heartbeat("g", gen, me) == 0  # the group did not notice
        # A group nobody manages: simple commits (generation -1), v8 multi-group fetch.
        assert await g.commit("simple", -1, "", {("u", 0): 5}) == {("u", 0): 0}
        # The empty group id: only the membership APIs refuse it (as Kafka).
        assert await g.commit("", -1, "", {("u", 0): 5}) == {("u", 0): 0}
        assert await g.fetch("", None) == {("u", 0): (5, 7, "")}
        assert set((await g.commit("nosuch", 3, "m", {("u", 0): 5})).values()) == {
            E.ILLEGAL_GENERATION
        }
        r = await g.call(
            FETCH,
            8,
            {
                "groups": [
                    {"group_id": "simple", "topics": None},
                    {"group_id": "g", "topics": [{"name": "t", "partition_indexes": [1]}]},
                    {"group_id": "none", "topics": None},
                ],
                "require_stable": True,
            },
        )
        by = {grp.group_id: grp for grp in r.groups}
        assert [
            (t.name, p.committed_offset) for t in by["simple"].topics for p in t.partitions
        ] == [("u", 5)]
        assert by["g"].topics[0].partitions[0].committed_offset == 21
        assert by["none"].topics == [] and by["none"].error_code == 0
        # OffsetDelete: refused for a topic the live group subscribes to.
        r = await g.call(
            ApiKey.OFFSET_DELETE,
            0,
            {"group_id": "g", "topics": [{"name": "t", "partitions": [{"partition_index": 0}]}]},
        )
        assert r.topics[0].partitions[0].error_code == E.GROUP_SUBSCRIBED_TO_TOPIC
        r = await g.call(
            ApiKey.OFFSET_DELETE,
            0,
            {
                "group_id": "simple",
                "topics": [{"name": "u", "partitions": [{"partition_index": 0}]}],
            },
        )
        assert r.error_code == 0 and r.topics[0].partitions[0].error_code == 0
        assert await g.fetch("simple", None) == {}
        r = await g.call(ApiKey.OFFSET_DELETE, 0, {"group_id": "nosuch", "topics": []})
        assert r.error_code == E.GROUP_ID_NOT_FOUND

    run(tmp_path, body)


def test_list_describe_delete_groups(tmp_path: Any) -> None:
    async def body(g: Groups) -> None:
        me, gen = await g.one_member_group("live")
        assert await g.commit("idle", -1, "", {("t", 0): 1}) == {("t", 0): 0}
        from pylog.network.metrics import MetricsRegistry

        registry = MetricsRegistry()
        g.coordinator.register_metrics(registry)
        text = registry.render()
        assert 'numgroups{state="Stable"} 1' in text
        assert 'numgroups{state="Empty"} 1' in text
        assert "groupmetadatamanager_numoffsets 1" in text
        r = await g.call(ApiKey.LIST_GROUPS, 4, {"states_filter": []})
        assert {(x.group_id, x.group_state) for x in r.groups} == {
            ("live", "Stable"),
            ("idle", "Empty"),
        }
        r = await g.call(ApiKey.LIST_GROUPS, 4, {"states_filter": ["stable"]})
        assert [x.group_id for x in r.groups] == ["live"]
        d = await g.call(
            ApiKey.DESCRIBE_GROUPS,
            5,
            {"groups": ["live", "gone"], "include_authorized_operations": False},
        )
        live, gone = d.groups
        assert (live.group_state, live.protocol_type, live.protocol_data) == (
            "Stable",
            "consumer",
            "range",
        )
        assert [m.member_id for m in live.members] == [me]
        assert live.members[0].member_assignment == assignment("t", [0, 1])
        assert live.members[0].client_id == "test-client"
        assert (gone.error_code, gone.group_state) == (0, "Dead")
        r = await g.call(ApiKey.DELETE_GROUPS, 2, {"groups_names": ["live", "idle", "gone", ""]})
        assert [(x.group_id, x.error_code) for x in r.results] == [
            ("live", E.NON_EMPTY_GROUP),
            ("idle", 0),
            ("gone", E.GROUP_ID_NOT_FOUND),
            ("", E.GROUP_ID_NOT_FOUND),
        ]
        assert await g.fetch("idle", None) == {}
        assert await g.heartbeat("live", gen, me) == 0

    run(tmp_path, body)


def test_static_member_rejoins_without_rebalance_and_old_id_is_fenced(tmp_path: Any) -> None:
    async def body(g: Groups) -> None:
        old, gen = await g.one_member_group("s", instance="inst-1")
        again = await g.join("s", instance="inst-1")  # a restart: no member id
        assert again.error_code == 0 and again.member_id != old
        assert again.generation_id == gen  # no rebalance
        s = await g.sync("s", gen, again.member_id, instance="inst-1")
        assert s.assignment == assignment("t", [0, 1])
        assert await g.heartbeat("s", gen, old, "inst-1") == E.FENCED_INSTANCE_ID
        assert await g.heartbeat("s", gen, again.member_id, "inst-1") == 0
        assert set((await g.commit("s", gen, old, {("t", 0): 1})).values()) == {E.UNKNOWN_MEMBER_ID}
        r = await g.call(
            LEAVE,
            4,
            {"group_id": "s", "members": [{"member_id": old, "group_instance_id": "inst-1"}]},
        )
        assert r.members[0].error_code == E.FENCED_INSTANCE_ID

    run(tmp_path, body)


def test_session_timeout_removes_member_and_max_size(tmp_path: Any) -> None:
    async def body(g: Groups) -> None:
        me, gen = await g.one_member_group("g", session=300)
        full = await g.join_member("g")
        assert full.error_code == E.GROUP_MAX_SIZE_REACHED
        # Kafka checks the size before the protocols: a full group is full
        odd = await g.join("g", protocols=[("no-such-assignor", b"")])
        assert odd.error_code == E.GROUP_MAX_SIZE_REACHED
        assert await g.heartbeat("g", gen, me) == E.NONE  # the member is untouched
        await asyncio.sleep(0.6)  # no heartbeat: the session runs out
        assert await g.heartbeat("g", gen, me) == E.UNKNOWN_MEMBER_ID
        d = await g.call(ApiKey.DESCRIBE_GROUPS, 5, {"groups": ["g"]})
        assert d.groups[0].group_state == "Empty" and d.groups[0].members == []

    run(tmp_path, body, **{"group.max.size": 1})


@pytest.mark.parametrize("codec", [0, 1, 4])  # offsets.topic.compression.codec: none, gzip, zstd
def test_a_new_coordinator_loads_groups_and_offsets(tmp_path: Any, codec: int) -> None:
    async def body(g: Groups) -> None:
        me, gen = await g.one_member_group("g", instance="i")
        assert await g.commit("g", gen, me, {("t", 0): 5, ("t", 1): 6}) == {
            ("t", 0): 0,
            ("t", 1): 0,
        }
        assert await g.commit("g", gen, me, {("t", 0): 8}) == {("t", 0): 0}
        assert await g.commit("gone", -1, "", {("t", 0): 1}) == {("t", 0): 0}
        r = await g.call(ApiKey.DELETE_GROUPS, 2, {"groups_names": ["gone"]})
        assert r.results[0].error_code == 0
        # What Kafka's tools would read: the group's records in its partition.
        p = partition_for("g", 4)
        log = g.core.rm.partition(TopicPartition("__consumer_offsets", p)).log
        data = log.read_bytes(0, 1 << 20)
        keys = []
        pos = 0
        while pos < len(data):
            size = 12 + struct.unpack_from(">i", data, pos + 8)[0]
            # attributes (offset 21 of a v2 batch): the low 3 bits are the codec
            assert struct.unpack_from(">h", data, pos + 21)[0] & 7 == codec
            keys += [decode_key(r.key) for r in _native.decode_records(data[pos : pos + size])]
            pos += size
        assert GroupMetadataKey("g") in keys and OffsetCommitKey("g", "t", 0) in keys

        # A second coordinator over the same logs (a restart of the coordinator).
        await g.coordinator.shutdown()
        fresh = GroupCoordinator(g.core.config, g.core.rm, g.core.store)
        g.core.apis = KafkaApis(g.core.config, g.core.rm, g.core.store, fresh)
        fresh.startup()
        try:
            codes = await g.commit("g", gen, me, {("t", 0): 9})
            busy = await g.call(FETCH, 7, {"group_id": "g", "topics": None})
            # The load runs on a worker thread once the loop gets to it;
            # until then the partition's groups answer LOAD_IN_PROGRESS.
            assert codes == {("t", 0): E.COORDINATOR_LOAD_IN_PROGRESS}
            assert busy.error_code == E.COORDINATOR_LOAD_IN_PROGRESS
            # As Kafka's: a heartbeat of a loading group is answered as if
            # all were well, a SyncGroup with REBALANCE_IN_PROGRESS (older
            # clients do not know LOAD_IN_PROGRESS there).
            assert await g.heartbeat("g", gen, me, "i") == E.NONE
            s = await g.sync("g", gen, me, instance="i")
            assert s.error_code == E.REBALANCE_IN_PROGRESS
            await fresh.wait_loaded()
            got = await g.fetch("g", None)
            assert got[("t", 1)] == (6, 7, "") and got[("t", 0)][0] == 8
            assert await g.fetch("gone", None) == {}
            d = await g.call(ApiKey.DESCRIBE_GROUPS, 5, {"groups": ["g"]})
            assert d.groups[0].group_state == "Stable"
            assert [m.member_id for m in d.groups[0].members] == [me]
            assert d.groups[0].members[0].member_assignment == assignment("t", [0, 1])
            # The restored member carries on in its generation.
            assert await g.heartbeat("g", gen, me, "i") == 0
        finally:
            await fresh.shutdown()

    run(tmp_path, body, **{"offsets.topic.compression.codec": codec})


@pytest.mark.parametrize("retention_minutes", [1])
def test_offsets_of_an_empty_group_expire_with_tombstones(
    tmp_path: Any, retention_minutes: int
) -> None:
    async def body(g: Groups) -> None:
        await g.find("x")
        clock = [10**12]
        g.coordinator.manager.clock = lambda: clock[0]
        g.coordinator.clock = g.coordinator.manager.clock
        assert await g.commit("old", -1, "", {("t", 0): 3}) == {("t", 0): 0}
        clock[0] += 30_000
        assert await g.coordinator.manager.expire_offsets() == 0
        clock[0] += 31_000
        assert await g.coordinator.manager.expire_offsets() == 1
        assert await g.fetch("old", None) == {}
        d = await g.call(ApiKey.LIST_GROUPS, 4, {"states_filter": []})
        assert "old" not in [x.group_id for x in d.groups]

    run(tmp_path, body, **{"offsets.retention.minutes": retention_minutes})


def test_resignation_and_election_move_a_partition_s_groups(tmp_path: Any) -> None:
    async def body(g: Groups) -> None:
        me, gen = await g.one_member_group("g")
        assert await g.commit("g", gen, me, {("t", 0): 4}) == {("t", 0): 0}
        p = g.coordinator.manager.partition_for("g")
        g.coordinator.on_resignation(p)  # the partition moved away
        assert await g.heartbeat("g", gen, me) == E.NOT_COORDINATOR
        r = await g.call(FETCH, 7, {"group_id": "g", "topics": None})
        assert r.error_code == E.NOT_COORDINATOR
        other = "other"
        assert g.coordinator.manager.partition_for(other) != p
        assert await g.commit(other, -1, "", {("t", 0): 1}) == {("t", 0): 0}
        await g.coordinator.on_election(p)  # and came back: read from its log
        assert await g.fetch("g", None) == {("t", 0): (4, 7, "")}
        assert await g.heartbeat("g", gen, me) == 0

    run(tmp_path, body)


def test_a_repeated_election_keeps_the_live_groups(tmp_path: Any) -> None:
    # A LeaderAndIsr that only shrinks or grows the ISR elects the leader
    # again: the partition it already holds is not read again (Kafka skips
    # owned partitions), so its groups, sessions and waiting members stay.
    async def body(g: Groups) -> None:
        me, gen = await g.one_member_group("g")
        p = g.coordinator.manager.partition_for("g")
        group = g.coordinator.manager.get_group("g")
        await g.coordinator.on_election(p)
        assert g.coordinator.manager.get_group("g") is group
        assert await g.heartbeat("g", gen, me) == 0
        assert await g.commit("g", gen, me, {("t", 0): 9}) == {("t", 0): 0}

    run(tmp_path, body)


def test_leader_and_isr_moves_coordination_with_leadership(tmp_path: Any) -> None:
    # The controller's LeaderAndIsr for __consumer_offsets drives the
    # coordinator: a follower drops the partition's groups, the new leader
    # loads them (members, generation, offsets) from its replica, and an
    # ISR-only change leaves the loaded groups alone.
    async def leader_and_isr(g: Groups, p: int, leader: int, epoch: int, pepoch: int,
                             isr: list[int]) -> None:  # fmt: skip
        meta = g.coordinator.manager.metadata_store.topic("__consumer_offsets")
        assert meta is not None
        r = await g.call(ApiKey.LEADER_AND_ISR, 5, {
            "controller_id": 1, "controller_epoch": 1, "broker_epoch": -1, "type": 0,
            "topic_states": [{"topic_name": "__consumer_offsets", "topic_id": meta.topic_id,
                              "partition_states": [{
                "partition_index": p, "controller_epoch": 1, "leader": leader,
                "leader_epoch": epoch, "isr": isr, "replicas": [0, 1],
                "partition_epoch": pepoch}]}],
            "live_leaders": [{"broker_id": 1, "host_name": "127.0.0.1", "port": 1}],
        })  # fmt: skip
        assert r.error_code == 0
        assert [e.error_code for t in r.topics for e in t.partition_errors] == [0]

    async def body(g: Groups) -> None:
        me, gen = await g.one_member_group("g")
        assert await g.commit("g", gen, me, {("t", 0): 4}) == {("t", 0): 0}
        p = g.coordinator.manager.partition_for("g")

        await leader_and_isr(g, p, 1, 1, 0, [1, 0])  # broker 1 leads: we follow
        assert await g.heartbeat("g", gen, me) == E.NOT_COORDINATOR
        r = await g.call(FETCH, 7, {"group_id": "g", "topics": None})
        assert r.error_code == E.NOT_COORDINATOR

        await leader_and_isr(g, p, 0, 2, 0, [0, 1])  # back to us: loaded from the log
        for _ in range(200):
            r = await g.call(FETCH, 7, {"group_id": "g", "topics": None})
            if r.error_code != E.COORDINATOR_LOAD_IN_PROGRESS:
                break
            await asyncio.sleep(0.01)
        assert r.error_code == 0
        assert await g.fetch("g", None) == {("t", 0): (4, 7, "")}
        assert await g.heartbeat("g", gen, me) == 0  # the member and its generation came back
        group = g.coordinator.manager.get_group("g")

        await leader_and_isr(g, p, 0, 2, 1, [0])  # the ISR shrinks: same leader, same groups
        await asyncio.sleep(0)
        assert g.coordinator.manager.get_group("g") is group
        assert await g.heartbeat("g", gen, me) == 0

    run(tmp_path, body)


def test_initial_rebalance_delay_gathers_members_into_one_generation(tmp_path: Any) -> None:
    async def body(g: Groups) -> None:
        await g.find("g")
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        first = asyncio.ensure_future(g.join_member("g"))
        await asyncio.sleep(0.1)
        second = asyncio.ensure_future(g.join_member("g"))
        j1, j2 = await first, await second
        took = loop.time() - t0
        # One generation for both; the wait was extended once for the second.
        assert j1.generation_id == j2.generation_id == 1
        assert j1.leader == j1.member_id and len(j1.members) == 2
        assert 0.55 <= took < 5.0, took  # lower bound is the behaviour; upper only catches a hang

    run(tmp_path, body, **{"group.initial.rebalance.delay.ms": 300})


def test_a_long_group_id_is_accepted_as_by_kafka(tmp_path: Any) -> None:
    """Kafka puts no limit on a group id's length beyond the protocol's int16
    string: a 20,000-character id joins, commits and fetches like any other."""

    async def body(g: Groups) -> None:
        long_id = "g" * 20_000
        me, gen = await g.one_member_group(long_id)
        assert await g.commit(long_id, gen, me, {("t", 0): 3}) == {("t", 0): 0}
        assert await g.fetch(long_id, None) == {("t", 0): (3, 7, "")}

    run(tmp_path, body)


def test_group_and_offsets_broker_keys_have_kafka_defaults() -> None:
    from pylog.errors import InvalidConfigurationError
    from pylog.server.config import KafkaConfig

    c = KafkaConfig.from_props({})
    assert c.get("offsets.topic.num.partitions") == 50
    assert c.get("offsets.topic.replication.factor") == 3
    assert c.get("offsets.topic.segment.bytes") == 104857600
    assert c.get("offsets.retention.minutes") == 10080
    assert c.get("offsets.retention.check.interval.ms") == 600000
    assert c.get("offset.metadata.max.bytes") == 4096
    assert c.get("offsets.load.buffer.size") == 5 * 1024 * 1024
    assert c.get("offsets.commit.timeout.ms") == 5000
    assert c.get("group.initial.rebalance.delay.ms") == 3000
    assert c.get("group.min.session.timeout.ms") == 6000
    assert c.get("group.max.session.timeout.ms") == 1800000
    assert c.get("group.max.size") == 2**31 - 1
    for bad in (
        {"group.min.session.timeout.ms": 10, "group.max.session.timeout.ms": 5},
        {"group.max.size": 0},
        {"offsets.topic.num.partitions": 0},
        {"group.initial.rebalance.delay.ms": -1},
    ):
        with pytest.raises(InvalidConfigurationError):
            KafkaConfig.from_props(bad)


def test_commit_retention_time_of_old_versions_sets_an_expiry(tmp_path: Any) -> None:
    async def body(g: Groups) -> None:
        await g.find("x")
        clock = [10**12]
        g.coordinator.manager.clock = lambda: clock[0]
        g.coordinator.clock = g.coordinator.manager.clock
        req = {"group_id": "kept", "generation_id_or_member_epoch": -1, "member_id": "",
               "retention_time_ms": 5_000, "topics": [{"name": "t", "partitions": [
                   {"partition_index": 0, "committed_offset": 9,
                    "committed_metadata": "m"}]}]}  # fmt: skip
        r = await g.call(COMMIT, 2, req)
        assert r.topics[0].partitions[0].error_code == 0
        value = OffsetCommitValue(9, -1, "m", clock[0], clock[0] + 5_000).encode()
        assert value[:2] == b"\x00\x01"  # v1: the version with an expire timestamp
        assert decode_offset_value(value).expire_timestamp == clock[0] + 5_000
        clock[0] += 4_000
        assert await g.coordinator.manager.expire_offsets() == 0
        clock[0] += 2_000
        assert await g.coordinator.manager.expire_offsets() == 1
        assert await g.fetch("kept", None) == {}

    run(tmp_path, body)


def test_every_advertised_version_of_the_group_apis_is_served(tmp_path: Any) -> None:
    """A join, sync, heartbeat, commit, fetch, list, describe, leave, delete at
    each version of GROUP_API_VERSIONS: answered, in that version's shape."""

    async def body(g: Groups) -> None:
        lo, hi = GROUP_API_VERSIONS[ApiKey.FIND_COORDINATOR]
        for v in range(lo, hi + 1):
            req = {"key": "g", "key_type": 0} if v < 4 else {"key_type": 0,
                                                             "coordinator_keys": ["g"]}  # fmt: skip
            r = await g.call(ApiKey.FIND_COORDINATOR, v, req)
            assert (r.error_code if v < 4 else r.coordinators[0].error_code) == 0
        lo, hi = GROUP_API_VERSIONS[JOIN]
        for v in range(lo, hi + 1):
            group = f"v{v}"
            j = await g.join_member(group, version=v)
            assert (j.error_code, j.generation_id) == (0, 1), v
            sv = min(v, GROUP_API_VERSIONS[SYNC][1])
            mine = [{"member_id": j.member_id, "assignment": b"a"}]
            req = {"group_id": group, "generation_id": 1, "member_id": j.member_id}
            s = await g.call(SYNC, sv, {**req, "assignments": mine})
            assert (s.error_code, s.assignment) == (0, b"a")
            hv = min(v, GROUP_API_VERSIONS[HB][1])
            assert (await g.call(HB, hv, {"group_id": group, "generation_id": 1,
                                          "member_id": j.member_id})).error_code == 0  # fmt: skip
        t_id = g.core.store.topic("t").topic_id  # type: ignore[union-attr]
        lo, hi = GROUP_API_VERSIONS[COMMIT]
        for v in range(lo, hi + 1):
            # v10 names the topic by its id (KIP-516), the older ones by name
            req = {"group_id": "c", "generation_id_or_member_epoch": -1, "member_id": "",
                   "topics": [{"name": "t", "topic_id": t_id, "partitions": [
                       {"partition_index": 0, "committed_offset": v,
                        "committed_metadata": ""}]}]}  # fmt: skip
            r = await g.call(COMMIT, v, req)
            assert r.topics[0].partitions[0].error_code == 0
        lo, hi = GROUP_API_VERSIONS[FETCH]
        for v in range(lo, hi + 1):
            topics = [{"name": "t", "topic_id": t_id, "partition_indexes": [0]}]
            if v < 8:
                r = await g.call(FETCH, v, {"group_id": "c", "topics": topics})
                got = r.topics[0].partitions[0].committed_offset
            else:
                r = await g.call(FETCH, v, {"groups": [{"group_id": "c", "topics": topics}]})
                got = r.groups[0].topics[0].partitions[0].committed_offset
            assert got == GROUP_API_VERSIONS[COMMIT][1]
        for v in range(GROUP_API_VERSIONS[ApiKey.LIST_GROUPS][1] + 1):
            r = await g.call(ApiKey.LIST_GROUPS, v, {})
            assert "c" in [x.group_id for x in r.groups]
        for v in range(GROUP_API_VERSIONS[ApiKey.DESCRIBE_GROUPS][1] + 1):
            r = await g.call(ApiKey.DESCRIBE_GROUPS, v, {"groups": ["v0"]})
            assert r.groups[0].group_state == "Stable" and len(r.groups[0].members) == 1
        lo, hi = GROUP_API_VERSIONS[LEAVE]
        for v in range(lo, hi + 1):
            group = f"v{v}"
            d = await g.call(ApiKey.DESCRIBE_GROUPS, 0, {"groups": [group]})
            member = d.groups[0].members[0].member_id
            req = {"group_id": group, "member_id": member} if v < 3 else {
                "group_id": group, "members": [{"member_id": member}]}  # fmt: skip
            assert (await g.call(LEAVE, v, req)).error_code == 0
        for v in range(GROUP_API_VERSIONS[ApiKey.DELETE_GROUPS][1] + 1):
            r = await g.call(ApiKey.DELETE_GROUPS, v, {"groups_names": [f"v{v}"]})
            assert r.results[0].error_code == 0

    run(tmp_path, body)


def test_a_member_that_never_syncs_is_removed_after_the_rebalance_timeout(tmp_path: Any) -> None:
    """Kafka's pending-sync timeout: a leader that joins, keeps heartbeating
    but never sends SyncGroup is removed after the rebalance timeout, and the
    follower it held back gets REBALANCE_IN_PROGRESS and rejoins alone."""

    async def body(g: Groups) -> None:
        leader_id, _ = await g.one_member_group("g", rebalance=400)
        # A second member joins (its MEMBER_ID_REQUIRED round trip first): the
        # rebalance waits for the old leader, which rejoins and leads generation 2.
        first = await g.join("g", rebalance=400)
        assert first.error_code == E.MEMBER_ID_REQUIRED
        follower_join = asyncio.ensure_future(g.join("g", first.member_id, rebalance=400))
        await asyncio.sleep(0.05)
        rejoin = await g.join("g", leader_id, rebalance=400)
        follower = await follower_join
        assert rejoin.error_code == 0 and follower.error_code == 0
        gen = follower.generation_id
        assert rejoin.leader == leader_id != follower.member_id
        # The follower syncs and waits; the leader only heartbeats.
        waiting = asyncio.ensure_future(g.sync("g", gen, follower.member_id))
        for _ in range(2):  # alive within the 400 ms rebalance timeout
            await asyncio.sleep(0.1)
            assert await g.heartbeat("g", gen, leader_id) in (0, E.REBALANCE_IN_PROGRESS)
        r = await asyncio.wait_for(waiting, 2)
        assert r.error_code == E.REBALANCE_IN_PROGRESS
        assert await g.heartbeat("g", gen, leader_id) == E.UNKNOWN_MEMBER_ID
        again = await g.join("g", follower.member_id, rebalance=400)
        assert again.error_code == 0 and again.leader == follower.member_id
        assert [m.member_id for m in again.members] == [follower.member_id]

    run(tmp_path, body)
