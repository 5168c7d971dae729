"""Kafka as the oracle for the classic consumer-group APIs: FindCoordinator,
JoinGroup, SyncGroup, Heartbeat, OffsetCommit, OffsetFetch, DescribeGroups,
ListGroups, LeaveGroup and DeleteGroups — a member's life with stale
generations and unknown members, at several versions."""

from __future__ import annotations

import struct
from typing import Any

import pytest

from pylog.protocol import ApiKey

from .conftest import Brokers
from .diff_harness import Oracle, Pair, Rule, name, versions


def _str(s: str) -> bytes:
    return struct.pack(">h", len(s)) + s.encode()


# A ConsumerProtocolSubscription (v0) of one topic and an assignment of its
# partition 0: Kafka 4's coordinator parses a "consumer" group's metadata (a
# member whose metadata does not parse was left waiting), so both are real.
META = struct.pack(">hi", 0, 1) + _str("subscribed") + struct.pack(">i", -1)
ASSIGNMENT = (
    struct.pack(">hi", 0, 1) + _str("subscribed") + struct.pack(">ii", 1, 0) + struct.pack(">i", -1)
)


@pytest.fixture
def oracle(pair: Pair) -> Oracle:
    return Oracle(pair)


class Member:
    """One member of a group on each broker: its member id is each broker's own."""

    def __init__(self, oracle: Oracle, group: str, version: int) -> None:
        self.oracle = oracle
        self.group = group
        self.version = version
        self.ids = {"kafka": "", "pylog": ""}
        self.generation = {"kafka": -1, "pylog": -1}

    def join(self, **over: Any) -> Any:
        def body(side: str) -> dict[str, Any]:
            return {
                "group_id": self.group,
                "session_timeout_ms": 30000,
                "rebalance_timeout_ms": 30000,
                "member_id": self.ids[side],
                "group_instance_id": None,
                "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": META}],
                "reason": "differential",
                **over,
            }

        x = self.oracle.send(ApiKey.JOIN_GROUP, self.version, body)
        for side, r in (("kafka", x.kafka), ("pylog", x.pylog)):
            if r.member_id:
                self.ids[side] = r.member_id
            if r.error_code == 0:
                self.generation[side] = r.generation_id
        return x

    def body(
        self, side: str, generation_delta: int = 0, member: str | None = None
    ) -> dict[str, Any]:
        return {
            "group_id": self.group,
            "generation_id": self.generation[side] + generation_delta,
            "member_id": self.ids[side] if member is None else member,
            "group_instance_id": None,
        }


def test_find_coordinator_at_every_version(brokers: Brokers, oracle: Oracle) -> None:
    g = name("fc")
    oracle.until(
        ApiKey.FIND_COORDINATOR,
        4,
        {"key_type": 0, "coordinator_keys": [g]},
        lambda r: r.coordinators[0].error_code == 0,
    )
    for v in versions(brokers.kafka_versions, brokers.pylog_versions, ApiKey.FIND_COORDINATOR):
        oracle.send(
            ApiKey.FIND_COORDINATOR,
            v,
            {"key": g, "key_type": 0, "coordinator_keys": [g, name("fc2")]},
        )
    oracle.verify()


@pytest.mark.parametrize("join_version", [1, 5, 9])
def test_a_members_life(brokers: Brokers, oracle: Oracle, join_version: int) -> None:
    """Join (MEMBER_ID_REQUIRED first from v4), sync, heartbeat, commit and
    fetch offsets, describe and list, stale generations and unknown members,
    leave, delete."""
    g, t = name(f"life{join_version}"), name(f"life{join_version}-t")
    oracle.create({t: 2})
    m = Member(oracle, g, join_version)
    m.join()
    if join_version >= 4:
        m.join()  # with the member id the first answer named
    sync_v = min(join_version, 5)
    hb_v = min(join_version, 4)
    oracle.send(
        ApiKey.SYNC_GROUP,
        sync_v,
        lambda side: {
            **m.body(side),
            "protocol_type": "consumer",
            "protocol_name": "range",
            "assignments": [{"member_id": m.ids[side], "assignment": ASSIGNMENT}],
        },
    )
    oracle.send(ApiKey.HEARTBEAT, hb_v, lambda side: m.body(side))
    oracle.send(ApiKey.HEARTBEAT, hb_v, lambda side: m.body(side, generation_delta=-1))
    oracle.send(ApiKey.HEARTBEAT, hb_v, lambda side: m.body(side, generation_delta=1))
    oracle.send(ApiKey.HEARTBEAT, hb_v, lambda side: m.body(side, member="nobody"))

    commit_v = min(max(join_version, 2), 9)

    def commit(side: str, delta: int = 0, member: str | None = None) -> dict[str, Any]:
        b = m.body(side, delta, member)
        b["generation_id_or_member_epoch"] = b.pop("generation_id")
        return {
            **b,
            "retention_time_ms": -1,
            "topics": [
                {
                    "name": t,
                    "partitions": [
                        {"partition_index": p, "committed_offset": 10 + p,
                         "committed_leader_epoch": -1, "committed_metadata": f"m{p}"}
                        for p in range(2)
                    ],
                }
            ],
        }  # fmt: skip

    oracle.send(ApiKey.OFFSET_COMMIT, commit_v, commit)
    oracle.send(ApiKey.OFFSET_COMMIT, commit_v, lambda s: commit(s, delta=-1))
    oracle.send(ApiKey.OFFSET_COMMIT, commit_v, lambda s: commit(s, member="nobody"))
    for fv in (1, 5, 7, 8):
        body: dict[str, Any] = {
            "group_id": g,
            "topics": [{"name": t, "partition_indexes": [0, 1, 5]}],
            "require_stable": True,
        }
        if fv >= 8:
            body = {
                "groups": [
                    {"group_id": g, "topics": [{"name": t, "partition_indexes": [0, 1]}]},
                    {"group_id": g, "topics": None},
                    {"group_id": name("no-such-group"), "topics": None},
                ],
                "require_stable": True,
            }
        oracle.send(ApiKey.OFFSET_FETCH, fv, body)
    for dv in versions(brokers.kafka_versions, brokers.pylog_versions, ApiKey.DESCRIBE_GROUPS):
        oracle.send(
            ApiKey.DESCRIBE_GROUPS,
            dv,
            {"groups": [g, name("no-such-group")], "include_authorized_operations": dv >= 3},
        )
    # Not compared: other sessions' groups are listed too; this one's entry is.
    lists = [
        c.request(ApiKey.LIST_GROUPS, 4, {"states_filter": []}) for c in (m.oracle.pair.kafka,
                                                                            m.oracle.pair.pylog)
    ]  # fmt: skip
    mine = [[gr for gr in r.groups if gr.group_id == g] for r in lists]
    assert [[(gr.protocol_type, gr.group_state) for gr in x] for x in mine] == [
        [("consumer", "Stable")],
        [("consumer", "Stable")],
    ]
    oracle.send(ApiKey.DELETE_GROUPS, 2, {"groups_names": [g, name("no-such-group")]})

    leave_v = min(join_version, 5)
    if leave_v >= 3:
        oracle.send(
            ApiKey.LEAVE_GROUP,
            leave_v,
            lambda side: {
                "group_id": g,
                "members": [
                    {"member_id": m.ids[side], "group_instance_id": None, "reason": "done"},
                    {"member_id": "nobody", "group_instance_id": None, "reason": None},
                ],
            },
        )
    else:
        oracle.send(
            ApiKey.LEAVE_GROUP, leave_v, lambda side: {"group_id": g, "member_id": m.ids[side]}
        )
    oracle.send(
        ApiKey.DESCRIBE_GROUPS,
        5,
        {"groups": [g], "include_authorized_operations": True},
    )
    oracle.send(ApiKey.OFFSET_FETCH, 7, {"group_id": g, "topics": None, "require_stable": False})
    oracle.send(ApiKey.DELETE_GROUPS, 2, {"groups_names": [g]})
    oracle.send(ApiKey.DESCRIBE_GROUPS, 5, {"groups": [g], "include_authorized_operations": False})
    oracle.verify()


def test_join_errors(brokers: Brokers, oracle: Oracle) -> None:
    """A join with an unknown member id, a session timeout out of range,
    no protocols, a protocol type other than the group's."""
    g = name("join-errors")
    for v in (1, 5, 9):
        m = Member(oracle, f"{g}-{v}", v)
        m.ids = {"kafka": "unknown-member", "pylog": "unknown-member"}
        m.join()
        m.ids = {"kafka": "", "pylog": ""}
        m.join(session_timeout_ms=1)
        m.join(session_timeout_ms=100_000_000)
        m.join(protocols=[])
        m.join(group_id="")
    oracle.verify()


def test_commit_checks_generation_before_rebalance_and_topics(
    brokers: Brokers, oracle: Oracle
) -> None:
    g = name("order")
    m = Member(oracle, g, 5)
    m.join()
    m.join()  # joined, not synced: CompletingRebalance
    for delta in (0, -1):
        oracle.send(
            ApiKey.OFFSET_COMMIT,
            8,
            lambda side, d=delta: {
                "group_id": g,
                "generation_id_or_member_epoch": m.generation[side] + d,
                "member_id": m.ids[side],
                "group_instance_id": None,
                "topics": [
                    {
                        "name": name("order-absent"),
                        "partitions": [{"partition_index": 0, "committed_offset": 1,
                                        "committed_leader_epoch": -1,
                                        "committed_metadata": None}],
                    }
                ],
            },
        )  # fmt: skip
    oracle.send(ApiKey.HEARTBEAT, 4, lambda side: m.body(side, generation_delta=-1))
    oracle.verify()


def test_offsets_by_topic_id(brokers: Brokers, oracle: Oracle, pair: Pair) -> None:
    """OffsetCommit and OffsetFetch v10 name topics by id (KIP-516): a simple
    group's commit and fetch, with an unknown partition and an id no topic has."""
    from .test_differential_data import topic_ids

    g, t = name("by-id"), name("by-id-t")
    oracle.create({t: 2})
    ids = {"kafka": topic_ids(pair.kafka, [t])[t], "pylog": topic_ids(pair.pylog, [t])[t]}
    stray = "AAAAAAAAAAAAAAAAAAAAAQ"  # an id neither broker gave a topic
    commit_v = versions(brokers.kafka_versions, brokers.pylog_versions, ApiKey.OFFSET_COMMIT)
    fetch_v = versions(brokers.kafka_versions, brokers.pylog_versions, ApiKey.OFFSET_FETCH)
    assert 10 in commit_v and 10 in fetch_v

    def part(p: int) -> dict[str, Any]:
        return {"partition_index": p, "committed_offset": 20 + p,
                "committed_leader_epoch": -1, "committed_metadata": f"id{p}"}  # fmt: skip

    oracle.send(
        ApiKey.OFFSET_COMMIT,
        10,
        lambda side: {
            "group_id": g,
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "group_instance_id": None,
            "topics": [
                {"topic_id": ids[side], "partitions": [part(0), part(1), part(5)]},
                {"topic_id": stray, "partitions": [part(0)]},
            ],
        },
    )
    oracle.send(
        ApiKey.OFFSET_FETCH,
        10,
        lambda side: {
            "groups": [
                {"group_id": g, "topics": [
                    {"topic_id": ids[side], "partition_indexes": [0, 1, 5]},
                    {"topic_id": stray, "partition_indexes": [0]},
                ]},
                {"group_id": g, "topics": None},
                {"group_id": name("no-such-group"), "topics": None},
            ],
            "require_stable": True,
        },
    )  # fmt: skip
    # the same offsets, by name
    oracle.send(
        ApiKey.OFFSET_FETCH,
        9,
        {"groups": [{"group_id": g, "topics": None}], "require_stable": False},
    )
    oracle.verify()


# A known difference of pylog's KIP-848 coordinator, not of these versions:
# Kafka 4.3 answers a new group's first member with epoch 2, pylog with 1.
EPOCHS_848 = [
    Rule("**.member_epoch", "known: Kafka 4.3 bumps a new group's epoch twice, pylog once"),
    Rule("groups[*].group_epoch", "known: as member_epoch"),
    Rule("groups[*].assignment_epoch", "known: as member_epoch"),
]


def test_describe_a_consumer_group(brokers: Brokers, oracle: Oracle) -> None:
    """A KIP-848 consumer group of one member: ConsumerGroupDescribe at every
    version (v1 adds each member's type, KIP-1099), and DescribeGroups, which
    from v6 answers GROUP_ID_NOT_FOUND for it, "not a classic group" (KIP-1043)."""
    g, t = name("cg848"), name("cg848-t")
    oracle.create({t: 2})
    member = "AAAAAAAAAAAAAAAAAAAAAw"  # KIP-1082: the client names its member
    oracle.send(
        ApiKey.CONSUMER_GROUP_HEARTBEAT,
        1,
        {
            "group_id": g,
            "member_id": member,
            "member_epoch": 0,
            "instance_id": None,
            "rack_id": None,
            "rebalance_timeout_ms": 30000,
            "subscribed_topic_names": [t],
            "subscribed_topic_regex": None,
            "server_assignor": "range",
            "topic_partitions": [],
        },
        allow=[
            Rule("assignment.topic_partitions[*].topic_id", "each broker's own topic id"),
            *EPOCHS_848[:1],
        ],
    )
    for v in versions(
        brokers.kafka_versions, brokers.pylog_versions, ApiKey.CONSUMER_GROUP_DESCRIBE
    ):
        oracle.send(
            ApiKey.CONSUMER_GROUP_DESCRIBE,
            v,
            {"group_ids": [g], "include_authorized_operations": False},
            allow=[
                Rule("groups[*].members[*].client_host", "each connection's own address"),
                Rule("groups[*].members[*].client_id", "each client's own id"),
                *EPOCHS_848,
            ],
        )
    for v in versions(brokers.kafka_versions, brokers.pylog_versions, ApiKey.DESCRIBE_GROUPS):
        oracle.send(
            ApiKey.DESCRIBE_GROUPS, v, {"groups": [g], "include_authorized_operations": False}
        )
    oracle.verify()
