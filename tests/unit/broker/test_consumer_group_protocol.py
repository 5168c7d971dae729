"""KIP-848 consumer groups at the protocol level, in-process: real KafkaApis,
ReplicaManager, logs and GroupCoordinator; requests encoded with pylog's
codec. What the heartbeat sees of the topics' metadata (a regex that comes to
match a new topic, a topic that grows), DeleteGroups, a group changing type
while empty (its offsets kept), and ApiVersions with and without
``group.coordinator.rebalance.protocols=consumer``."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from kafka_apis_harness import Core

from pylog.broker.kafka_apis import KafkaApis
from pylog.coordinator.group_coordinator import GroupCoordinator
from pylog.errors import ErrorCode as E
from pylog.protocol import ApiKey

HB, DESCRIBE = ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE
PROPS = {"offsets.topic.num.partitions": 2, "group.initial.rebalance.delay.ms": 0}


class Api:
    def __init__(self, core: Core) -> None:
        self.core = core

    async def call(self, key: int, version: int, body: dict[str, Any]) -> Any:
        return await self.core.call(key, version, body)

    async def hb(self, group: str, member: str, epoch: int, **fields: Any) -> Any:
        body = {"group_id": group, "member_id": member, "member_epoch": epoch, **fields}
        return await self.call(HB, 1, body)

    async def join(self, group: str, member: str, **fields: Any) -> Any:
        fields.setdefault("subscribed_topic_names", [])
        return await self.hb(group, member, 0, rebalance_timeout_ms=30000,
                             topic_partitions=[], **fields)  # fmt: skip

    async def describe(self, group: str) -> Any:
        r = await self.call(DESCRIBE, 0, {"group_ids": [group]})
        return r.groups[0]


def names(core: Core, response: Any) -> dict[str, list[int]]:
    """A heartbeat's assignment by topic name."""
    assert response.assignment is not None, response
    out = {}
    for t in response.assignment.topic_partitions:
        meta = core.store.topic_by_id(t.topic_id)
        assert meta is not None
        out[meta.name] = sorted(t.partitions)
    return out


def run(tmp_path: Any, body: Callable[[Api], Awaitable[None]], **props: Any) -> None:
    async def main() -> None:
        core = Core(str(tmp_path), **{**PROPS, **props})
        coordinator = GroupCoordinator(core.config, core.rm, core.store)
        core.apis = KafkaApis(core.config, core.rm, core.store, coordinator)
        coordinator.startup()
        api = Api(core)
        await api.call(ApiKey.FIND_COORDINATOR, 3, {"key": "x", "key_type": 0})
        try:
            await body(api)
        finally:
            await coordinator.shutdown()
            core.close()

    asyncio.run(main())


def test_regex_subscription_follows_the_topics(tmp_path: Any) -> None:
    async def body(api: Api) -> None:
        store = api.core.store
        store.create_topic("orders-eu", 2)
        store.create_topic("orders-us", 1)
        store.create_topic("payments", 1)
        m = str(uuid.uuid4())
        r = await api.join("g", m, subscribed_topic_regex="orders-.*")
        assert r.error_code == E.NONE and r.member_epoch == 1
        assert names(api.core, r) == {"orders-eu": [0, 1], "orders-us": [0]}
        # a topic the regex matches appears: the next heartbeat has it
        store.create_topic("orders-jp", 1)
        r = await api.hb("g", m, 1)
        assert r.member_epoch == 2 and names(api.core, r)["orders-jp"] == [0]
        # a full match only: "xorders-eu" is not "orders-.*"
        store.create_topic("xorders-eu", 1)
        r = await api.hb("g", m, 2)
        assert r.error_code == E.NONE and r.member_epoch == 2 and r.assignment is None
        g = await api.describe("g")
        assert g.members[0].subscribed_topic_regex == "orders-.*"
        # another subscription: the orders topics are revoked first, at epoch 2
        r = await api.hb("g", m, 2, subscribed_topic_regex="", subscribed_topic_names=["payments"])
        assert r.member_epoch == 2 and names(api.core, r) == {}
        r = await api.hb("g", m, 2, topic_partitions=[])
        assert r.member_epoch == 3 and names(api.core, r) == {"payments": [0]}
        tid = {t.name: t.topic_id for t in store.topics()}["payments"]
        # a topic that grows: its new partition is assigned at a new epoch
        store.add_partitions("payments", 2)
        r = await api.hb("g", m, 3, topic_partitions=[{"topic_id": tid, "partitions": [0]}])
        assert r.member_epoch == 4 and names(api.core, r) == {"payments": [0, 1]}

    run(tmp_path, body)


def test_delete_groups_and_changing_type_while_empty(tmp_path: Any) -> None:
    async def body(api: Api) -> None:
        api.core.store.create_topic("t", 2)
        m = str(uuid.uuid4())
        r = await api.join("g", m, subscribed_topic_names=["t"])
        commit = await api.call(ApiKey.OFFSET_COMMIT, 9, {
            "group_id": "g", "generation_id_or_member_epoch": r.member_epoch, "member_id": m,
            "topics": [{"name": "t", "partitions": [
                {"partition_index": 1, "committed_offset": 7, "committed_metadata": "x"}]}],
        })  # fmt: skip
        assert commit.topics[0].partitions[0].error_code == E.NONE
        deleted = await api.call(ApiKey.DELETE_GROUPS, 2, {"groups_names": ["g"]})
        assert deleted.results[0].error_code == E.NON_EMPTY_GROUP
        assert (await api.hb("g", m, -1)).error_code == E.NONE
        g = await api.describe("g")
        assert (g.error_code, g.group_state, g.members) == (E.NONE, "Empty", [])

        # empty: a classic member turns it into a classic group, offsets kept
        body = {
            "group_id": "g", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
            "member_id": "", "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}],
        }  # fmt: skip
        join = await api.call(ApiKey.JOIN_GROUP, 5, body)
        assert join.error_code == E.MEMBER_ID_REQUIRED
        join = await api.call(ApiKey.JOIN_GROUP, 5, {**body, "member_id": join.member_id})
        assert join.error_code == E.NONE
        g = await api.describe("g")
        assert g.error_code == E.GROUP_ID_NOT_FOUND and "not a consumer group" in g.error_message
        listed = await api.call(ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": []})
        assert [(x.group_id, x.group_type) for x in listed.groups] == [("g", "classic")]
        leave = await api.call(ApiKey.LEAVE_GROUP, 3, {
            "group_id": "g", "members": [{"member_id": join.member_id}]})  # fmt: skip
        assert leave.error_code == E.NONE
        # empty again: a KIP-848 member makes it a consumer group, offsets kept
        r = await api.join("g", str(uuid.uuid4()), subscribed_topic_names=["t"])
        assert r.error_code == E.NONE
        fetched = await api.call(ApiKey.OFFSET_FETCH, 8, {"groups": [
            {"group_id": "g", "topics": None}]})  # fmt: skip
        (p,) = fetched.groups[0].topics[0].partitions
        assert (p.partition_index, p.committed_offset, p.metadata) == (1, 7, "x")
        assert (await api.describe("g")).group_epoch == 1
        assert (await api.hb("g", r.member_id, -1)).error_code == E.NONE
        deleted = await api.call(ApiKey.DELETE_GROUPS, 2, {"groups_names": ["g"]})
        assert deleted.results[0].error_code == E.NONE
        g = await api.describe("g")
        assert g.error_code == E.GROUP_ID_NOT_FOUND

    run(tmp_path, body)


def test_a_deleted_group_stays_deleted_after_a_reload(tmp_path: Any) -> None:
    async def first(api: Api) -> None:
        api.core.store.create_topic("t", 1)
        m = str(uuid.uuid4())
        await api.join("kept", m, subscribed_topic_names=["t"])
        gone = str(uuid.uuid4())
        await api.join("gone", gone, subscribed_topic_names=["t"])
        assert (await api.hb("gone", gone, -1)).error_code == E.NONE
        deleted = await api.call(ApiKey.DELETE_GROUPS, 2, {"groups_names": ["gone"]})
        assert deleted.results[0].error_code == E.NONE

    async def second(api: Api) -> None:
        async def loaded(group: str) -> Any:
            deadline = time.monotonic() + 60  # loading runs in the background
            while True:
                g = await api.describe(group)
                if g.error_code != E.COORDINATOR_LOAD_IN_PROGRESS:
                    return g
                assert time.monotonic() < deadline, "never loaded"
                await asyncio.sleep(0.05)

        g = await loaded("kept")
        assert g.error_code == E.NONE and g.group_epoch == 1 and len(g.members) == 1
        assert (await loaded("gone")).error_code == E.GROUP_ID_NOT_FOUND

    run(tmp_path, first)
    run(tmp_path, second)


def test_api_versions_follow_the_rebalance_protocols(tmp_path: Any) -> None:
    def advertised(**props: Any) -> dict[int, tuple[int, int]]:
        out: dict[int, tuple[int, int]] = {}

        async def body(api: Api) -> None:
            r = await api.call(ApiKey.API_VERSIONS, 3, {
                "client_software_name": "t", "client_software_version": "1"})  # fmt: skip
            out.update({k.api_key: (k.min_version, k.max_version) for k in r.api_keys})

        run(tmp_path / str(len(props)), body, **props)
        return out

    served = advertised()
    assert served[HB] == (0, 1) and served[DESCRIBE] == (0, 1)
    classic_only = advertised(**{"group.coordinator.rebalance.protocols": "classic"})
    assert HB not in classic_only and DESCRIBE not in classic_only
    assert classic_only[ApiKey.JOIN_GROUP] == served[ApiKey.JOIN_GROUP]
