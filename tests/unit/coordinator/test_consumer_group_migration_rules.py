"""The rules of KIP-848's online upgrade and downgrade on their own: the
consumer embedded protocol read and written, a classic group turned into a
consumer group and back, the member record with its ClassicMemberMetadata
(checked against pylog's independent reader of Kafka's record schemas, the
one behind ``kafka-dump-log``'s offsets decoder), the policy, and what a
consumer group asks of its classic members."""

from __future__ import annotations

import json
import struct

import pytest

from pylog.cli.coordinator_record_message_parser import offsets_message_parser
from pylog.coordinator.consumer_group import ConsumerGroup
from pylog.coordinator.consumer_group_member import (
    ClassicMemberMetadata,
    ConsumerGroupMember,
    MemberState,
)
from pylog.coordinator.consumer_group_migration import (
    classic_group_from_consumer_group,
    consumer_group_from_classic_group,
    consumer_group_records,
)
from pylog.coordinator.consumer_group_migration_policy import ConsumerGroupMigrationPolicy
from pylog.coordinator.consumer_group_records import (
    ConsumerGroupRecords,
    decode_consumer_key,
    member_metadata_record,
)
from pylog.coordinator.consumer_protocol import (
    deserialize_assignment,
    deserialize_subscription,
    deserialize_version,
    serialize_assignment,
)
from pylog.coordinator.group import GroupMetadata, GroupState, MemberMetadata, OffsetAndMetadata
from pylog.coordinator.partition_assignor import TopicInfo
from pylog.coordinator.records import RecordFormatError, decode_key
from pylog.errors import ErrorCode
from pylog.log.partition_metadata import new_topic_id

T1, T2 = new_topic_id(), new_topic_id()
TOPICS = {"orders": TopicInfo(T1, "orders", 4), "payments": TopicInfo(T2, "payments", 2)}
NAMES = {T1: "orders", T2: "payments"}


def _str(s: str) -> bytes:
    return struct.pack(">h", len(s)) + s.encode()


def subscription(version: int, topics: list[str], owned: dict[str, list[int]],
                 generation: int = -1, rack: str | None = None) -> bytes:  # fmt: skip
    """A ConsumerProtocolSubscription as Kafka's clients write it."""
    out = struct.pack(">hi", version, len(topics)) + b"".join(_str(t) for t in topics)
    out += struct.pack(">i", 3) + b"udt"  # user data
    if version >= 1:
        out += struct.pack(">i", len(owned))
        for t, ps in owned.items():
            out += _str(t) + struct.pack(">i", len(ps)) + b"".join(struct.pack(">i", p) for p in ps)
    if version >= 2:
        out += struct.pack(">i", generation)
    if version >= 3:
        out += struct.pack(">h", -1) if rack is None else _str(rack)
    return out


# ------------------------------------------------------------ the embedded protocol


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_subscriptions_of_every_version_are_read(version: int) -> None:
    data = subscription(version, ["orders", "payments"], {"orders": [1, 0]}, 7, "r1")
    s = deserialize_subscription(data)
    assert s.version == version and s.topics == ("orders", "payments")
    assert s.owned_partitions == ({"orders": [1, 0]} if version >= 1 else {})
    assert s.generation_id == (7 if version >= 2 else -1)
    assert s.rack_id == ("r1" if version >= 3 else None)


def test_a_newer_subscription_is_read_as_the_newest_known() -> None:
    data = subscription(3, ["orders"], {}, 1, None) + b"future fields"
    s = deserialize_subscription(struct.pack(">h", 9) + data[2:])
    assert s.version == 3 and s.topics == ("orders",)


@pytest.mark.parametrize(
    "data",
    [b"", b"\x00", b"\x00\x01\x00\x00\x00\x05\x00", b"\xff\xff", b"\x00\x00\x7f\xff\xff\xff"],
)
def test_malformed_subscriptions_are_refused(data: bytes) -> None:
    with pytest.raises(RecordFormatError):
        deserialize_subscription(data)


def test_assignments_round_trip_in_the_members_version() -> None:
    data = serialize_assignment({"orders": [3, 1], "payments": [], "x": [0]}, 3)
    assert deserialize_version(data) == 3
    a = deserialize_assignment(data)
    assert a.version == 3 and a.partitions == {"orders": [1, 3], "x": [0]}
    assert deserialize_assignment(b"").partitions == {}
    assert deserialize_version(serialize_assignment({}, 7)) == 3  # capped
    with pytest.raises(RecordFormatError):
        deserialize_assignment(b"\x00\x01\x00\x00\x00\x02")


# ------------------------------------------------------------ upgrade


def classic_group(generation: int = 5, protocol: str = "range") -> GroupMetadata:
    g = GroupMetadata("g", 1000, GroupState.STABLE)
    g.generation_id = generation
    g.protocol_type = "consumer"
    g.protocol_name = protocol
    g.offsets[("orders", 0)] = OffsetAndMetadata(42, -1, "", 1000)
    for mid, parts, inst in (("a", [0, 1], None), ("b", [2, 3], "inst-b")):
        m = MemberMetadata(
            mid, inst, f"client-{mid}", "/127.0.0.1", 30000, 10000, "consumer",
            [("range", subscription(1, ["orders", "gone"], {"orders": parts})),
             ("cooperative-sticky", subscription(3, ["orders", "gone"], {}, 5, "rack-" + mid))],
            assignment=serialize_assignment({"orders": parts, "gone": [0]}, 1),
        )  # fmt: skip
        g.add(m)
    return g


def test_a_classic_group_becomes_a_consumer_group_with_its_members() -> None:
    classic = classic_group()
    cg = consumer_group_from_classic_group(classic, TOPICS, 2000)
    assert cg.group_epoch == cg.assignment_epoch == 5
    assert cg.offsets is classic.offsets
    a, b = cg.member("a"), cg.member("b")
    assert a is not None and b is not None
    assert a.member_epoch == a.previous_member_epoch == 5 and a.state is MemberState.STABLE
    # the topic that no longer exists is dropped (Kafka's toTopicPartitionMap)
    assert a.assigned == {T1: frozenset({0, 1})} and cg.targets["b"] == {T1: frozenset({2, 3})}
    assert a.subscribed_topic_names == ("orders", "gone")
    assert b.instance_id == "inst-b" and cg.static_member("inst-b") is b
    assert a.classic is not None and a.classic.session_timeout_ms == 10000
    assert a.classic.protocol_name == "range" and len(a.classic.supported_protocols) == 2
    assert (a.client_id, a.rebalance_timeout_ms) == ("client-a", 30000)
    # the partitions are held at the generation: another member waits for them
    assert cg.partition_epoch(T1, 2) == 5 and cg.partition_epoch(T1, 9) == -1
    assert cg.num_classic_members == 2


def test_the_rack_comes_from_the_chosen_protocols_subscription() -> None:
    cg = consumer_group_from_classic_group(classic_group(protocol="cooperative-sticky"), TOPICS, 0)
    member = cg.member("a")
    assert member is not None and member.rack_id == "rack-a"


def test_a_malformed_subscription_stops_the_upgrade() -> None:
    classic = classic_group()
    classic.members["a"].protocols = [("range", b"\x00")]
    with pytest.raises(RecordFormatError):
        consumer_group_from_classic_group(classic, TOPICS, 0)


def test_the_upgrade_records_replay_into_the_same_group() -> None:
    cg = consumer_group_from_classic_group(classic_group(), TOPICS, 0)
    records = consumer_group_records(cg)
    # first the classic group's tombstone, as Kafka writes it
    key, value = records[0]
    assert value is None and decode_key(key) is not None
    replay = ConsumerGroupRecords()
    for k, v in records[1:]:
        found = decode_consumer_key(k)
        assert found is not None
        replay.apply(found, v)
    (loaded,) = replay.build(0)
    assert loaded.group_epoch == cg.group_epoch and loaded.assignment_epoch == cg.assignment_epoch
    assert loaded.consumer_members == cg.consumer_members
    assert loaded.targets == cg.targets


def test_the_classic_member_metadata_is_kafkas_tagged_field() -> None:
    m = ConsumerGroupMember(
        "m1", client_id="c", client_host="/h", subscribed_topic_names=("orders",),
        rebalance_timeout_ms=30000,
        classic=ClassicMemberMetadata(45000, (("range", b"\x00\x01meta"), ("rr", b""))),
    )  # fmt: skip
    key, value = member_metadata_record("g", m)
    assert value is not None
    _, text = offsets_message_parser.parse(0, key, value)
    assert text is not None
    parsed = json.loads(text)["data"]
    assert parsed["classicMemberMetadata"]["sessionTimeoutMs"] == 45000
    names = [p["name"] for p in parsed["classicMemberMetadata"]["supportedProtocols"]]
    assert names == ["range", "rr"]
    # a consumer-protocol member writes none
    plain = member_metadata_record("g", m.replace(classic=None))[1]
    assert plain is not None and len(plain) < len(value)
    _, text = offsets_message_parser.parse(0, key, plain)
    assert text is not None and "classicMemberMetadata" not in json.loads(text)["data"]


# ------------------------------------------------------------ downgrade


def test_a_consumer_group_becomes_classic_when_its_consumer_member_leaves() -> None:
    cg = consumer_group_from_classic_group(classic_group(), TOPICS, 0)
    cg.group_epoch = cg.assignment_epoch = 8
    leaving = ConsumerGroupMember("new", member_epoch=8, assigned={T2: frozenset({0})})
    cg.put_member(leaving, 0)
    cg.targets["new"] = {T2: frozenset({0})}
    cg.targets["a"] = {T1: frozenset({0, 1}), T2: frozenset({1})}
    assert cg.all_members_use_classic_except("new")
    assert not cg.all_members_use_classic_except("a")
    classic = classic_group_from_consumer_group(cg, "new", NAMES, 5000)
    assert classic.is_in(GroupState.STABLE) and classic.generation_id == 8
    assert sorted(classic.members) == ["a", "b"]
    assert classic.protocol_type == "consumer" and classic.protocol_name == "range"
    a = classic.members["a"]
    assert a.session_timeout_ms == 10000 and a.rebalance_timeout_ms == 30000
    # each member is assigned its target, in its subscription's version
    assert deserialize_version(a.assignment) == 1
    assert deserialize_assignment(a.assignment).partitions == {"orders": [0, 1], "payments": [1]}
    assert classic.static_member_id("inst-b") == "b"
    assert classic.offsets is cg.offsets


def test_classic_members_must_share_a_protocol_with_the_joiner() -> None:
    cg = consumer_group_from_classic_group(classic_group(), TOPICS, 0)
    assert cg.supports_classic_protocols("consumer", {"cooperative-sticky", "other"})
    assert not cg.supports_classic_protocols("consumer", {"roundrobin"})
    assert not cg.supports_classic_protocols("connect", {"range"})
    assert not cg.supports_classic_protocols("consumer", set())
    empty = ConsumerGroup("e", 0)
    empty.put_member(ConsumerGroupMember("x"), 0)  # consumer protocol only
    assert empty.supports_classic_protocols("consumer", {"anything"})


def test_unreleased_partitions_are_waited_for_until_free() -> None:
    cg = consumer_group_from_classic_group(classic_group(), TOPICS, 0)
    waiting = ConsumerGroupMember(
        "w", member_epoch=6, state=MemberState.UNRELEASED_PARTITIONS, assigned={T1: frozenset({0})}
    )
    cg.put_member(waiting, 0)
    cg.targets["w"] = {T1: frozenset({0, 2})}
    assert cg.waiting_on_unreleased_partition(waiting)  # b still holds 2
    b = cg.member("b")
    assert b is not None
    cg.put_member(b.replace(assigned={T1: frozenset({3})}), 0)
    assert not cg.waiting_on_unreleased_partition(waiting)


def test_a_classic_members_commit_carries_its_generation() -> None:
    cg = consumer_group_from_classic_group(classic_group(), TOPICS, 0)
    # any OffsetCommit version; the generation must be the member epoch
    assert cg.validate_offset_commit("a", None, 5, 2) == ErrorCode.NONE
    assert cg.validate_offset_commit("a", None, 4, 8) == ErrorCode.ILLEGAL_GENERATION
    assert cg.validate_offset_fetch("a", 6) == ErrorCode.ILLEGAL_GENERATION
    cg.put_member(ConsumerGroupMember("k", member_epoch=6), 0)
    assert cg.validate_offset_commit("k", None, 6, 8) == ErrorCode.UNSUPPORTED_VERSION
    assert cg.validate_offset_commit("k", None, 5, 9) == ErrorCode.STALE_MEMBER_EPOCH


# ------------------------------------------------------------ the policy


def test_the_policy_is_kafkas() -> None:
    parse = ConsumerGroupMigrationPolicy.parse
    assert parse("BiDirectional").upgrade_enabled and parse("bidirectional").downgrade_enabled
    assert parse("upgrade").upgrade_enabled and not parse("upgrade").downgrade_enabled
    assert parse("DOWNGRADE").downgrade_enabled and not parse("downgrade").upgrade_enabled
    assert not parse("disabled").upgrade_enabled and not parse("disabled").downgrade_enabled
    assert parse("nonsense") is ConsumerGroupMigrationPolicy.DISABLED


def test_the_broker_refuses_an_unknown_policy() -> None:
    from pylog.errors import InvalidConfigurationError
    from pylog.server.config import KafkaConfig

    assert str(KafkaConfig.from_props({}).get("group.consumer.migration.policy")) == "bidirectional"
    KafkaConfig.from_props({"group.consumer.migration.policy": "UPGRADE"})
    with pytest.raises(InvalidConfigurationError):
        KafkaConfig.from_props({"group.consumer.migration.policy": "sideways"})
