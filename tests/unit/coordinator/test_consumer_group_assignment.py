"""KIP-848's assignment pieces on their own: the server-side assignors, a
member's reconciliation (CurrentAssignmentBuilder) and the group's records
in ``__consumer_offsets`` read back as they were written."""

from __future__ import annotations

from pylog.coordinator.consumer_group_member import ConsumerGroupMember, MemberState
from pylog.coordinator.consumer_group_records import (
    ConsumerGroupRecords,
    consumer_group_tombstones,
    current_assignment_record,
    decode_consumer_key,
    group_epoch_record,
    member_metadata_record,
    member_tombstones,
    target_epoch_record,
    target_member_record,
)
from pylog.coordinator.current_assignment_builder import CurrentAssignmentBuilder
from pylog.coordinator.partition_assignor import AssignmentMember, TopicInfo
from pylog.coordinator.range_assignor import RangeAssignor
from pylog.coordinator.uniform_assignor import UniformAssignor
from pylog.log.partition_metadata import new_topic_id

T1, T2 = new_topic_id(), new_topic_id()
TOPICS = {T1: TopicInfo(T1, "t1", 6), T2: TopicInfo(T2, "t2", 6)}


def member(mid: str, subscribed: set[str], current: dict[str, set[int]] | None = None,
           instance: str | None = None) -> AssignmentMember:  # fmt: skip
    cur = {t: frozenset(p) for t, p in (current or {}).items()}
    return AssignmentMember(mid, instance, None, frozenset(subscribed), cur)


def flat(a: dict[str, dict[str, frozenset[int]]]) -> list[tuple[str, int]]:
    return sorted((t, p) for parts in a.values() for t, ps in parts.items() for p in ps)


def test_uniform_spreads_evenly_and_covers_every_partition_once() -> None:
    out = UniformAssignor().assign([member("a", {T1, T2}), member("b", {T1, T2}),
                                    member("c", {T1, T2})], TOPICS)  # fmt: skip
    assert flat(out) == sorted((t, p) for t in (T1, T2) for p in range(6))
    assert sorted(sum(len(ps) for ps in a.values()) for a in out.values()) == [4, 4, 4]


def test_uniform_is_sticky_when_a_member_joins() -> None:
    before = UniformAssignor().assign([member("a", {T1}), member("b", {T1})], {T1: TOPICS[T1]})
    cur = {m: {t: set(ps) for t, ps in a.items()} for m, a in before.items()}
    after = UniformAssignor().assign(
        [member("a", {T1}, cur["a"]), member("b", {T1}, cur["b"]), member("c", {T1})],
        {T1: TOPICS[T1]},
    )
    assert [len(after[m][T1]) for m in "abc"] == [2, 2, 2]
    # a and b each keep two of the three they had: only two partitions move
    assert after["a"][T1] <= before["a"][T1] and after["b"][T1] <= before["b"][T1]


def test_uniform_heterogeneous_subscriptions_stay_within_topics() -> None:
    out = UniformAssignor().assign([member("a", {T1}), member("b", {T1, T2})], TOPICS)
    assert T2 not in out["a"]
    assert flat(out) == sorted((t, p) for t in (T1, T2) for p in range(6))
    # b holds all of t2, so t1 goes mostly to a
    assert len(out["a"][T1]) + len(out["b"].get(T1, frozenset())) == 6
    assert abs(len(out["a"][T1]) - (len(out["b"][T2]) + len(out["b"].get(T1, frozenset())))) <= 1


def test_range_co_partitions_topics_in_member_order() -> None:
    out = RangeAssignor().assign([member("b", {T1, T2}), member("a", {T1, T2})], TOPICS)
    assert out["a"] == {T1: frozenset({0, 1, 2}), T2: frozenset({0, 1, 2})}
    assert out["b"] == {T1: frozenset({3, 4, 5}), T2: frozenset({3, 4, 5})}
    uneven = RangeAssignor().assign(
        [member("x", {T1}), member("y", {T1}), member("z", {T1}), member("w", {T1})],
        {T1: TOPICS[T1]},
    )
    assert [sorted(uneven[m][T1]) for m in ("w", "x", "y", "z")] == [[0, 1], [2, 3], [4], [5]]


def test_range_orders_static_members_by_instance_id() -> None:
    out = RangeAssignor().assign(
        [member("m1", {T1}, instance="i2"), member("m2", {T1}, instance="i1")], {T1: TOPICS[T1]}
    )
    assert out["m2"][T1] == frozenset({0, 1, 2})


def fs(*ps: int) -> frozenset[int]:
    return frozenset(ps)


def test_reconciliation_revokes_before_the_epoch_moves_on() -> None:
    a = ConsumerGroupMember("a", member_epoch=1, assigned={T1: fs(0, 1, 2, 3)})
    held = {(T1, p): 1 for p in range(4)}
    epoch = lambda t, p: held.get((t, p), -1)  # noqa: E731
    step = CurrentAssignmentBuilder(a, 2, {T1: fs(0, 1)}, {T1}, epoch, None).build()
    assert step.state is MemberState.UNREVOKED_PARTITIONS
    assert step.member_epoch == 1 and step.assigned == {T1: fs(0, 1)}
    assert step.pending_revocation == {T1: fs(2, 3)}
    # still reporting 2 and 3: nothing moves
    again = CurrentAssignmentBuilder(step, 2, {T1: fs(0, 1)}, {T1}, epoch,
                                     {T1: fs(0, 1, 2, 3)}).build()  # fmt: skip
    assert again is step
    done = CurrentAssignmentBuilder(step, 2, {T1: fs(0, 1)}, {T1}, epoch, {T1: fs(0, 1)}).build()
    assert done.state is MemberState.STABLE and done.member_epoch == 2
    assert done.previous_member_epoch == 1 and done.pending_revocation == {}


def test_reconciliation_waits_for_partitions_another_member_holds() -> None:
    b = ConsumerGroupMember("b", member_epoch=0)
    held = {(T1, 2): 1, (T1, 3): 1}
    epoch = lambda t, p: held.get((t, p), -1)  # noqa: E731
    step = CurrentAssignmentBuilder(b, 2, {T1: fs(2, 3, 4)}, {T1}, epoch, {}).build()
    assert step.state is MemberState.UNRELEASED_PARTITIONS
    assert step.member_epoch == 2 and step.assigned == {T1: fs(4)}
    held.clear()
    done = CurrentAssignmentBuilder(step, 2, {T1: fs(2, 3, 4)}, {T1}, epoch, {T1: fs(4)}).build()
    assert done.state is MemberState.STABLE and done.assigned == {T1: fs(2, 3, 4)}


def test_unsubscribed_topic_is_revoked() -> None:
    a = ConsumerGroupMember("a", member_epoch=3, assigned={T1: fs(0), T2: fs(0)})
    step = CurrentAssignmentBuilder(
        a, 4, {T1: fs(0), T2: fs(0)}, {T1}, lambda t, p: -1, None
    ).build()
    assert step.pending_revocation == {T2: fs(0)} and step.assigned == {T1: fs(0)}


def test_records_read_back_as_written() -> None:
    m = ConsumerGroupMember(
        "m-1", member_epoch=5, previous_member_epoch=4, state=MemberState.UNREVOKED_PARTITIONS,
        instance_id="i", rack_id=None, client_id="c", client_host="/127.0.0.1",
        rebalance_timeout_ms=30000, subscribed_topic_names=("t1", "t2"),
        subscribed_topic_regex="t.*", server_assignor="range",
        assigned={T1: fs(0, 1)}, pending_revocation={T2: fs(3)},
    )  # fmt: skip
    other = ConsumerGroupMember(
        "m-2", member_epoch=5, client_id="d", subscribed_topic_names=("t1",)
    )
    records = [
        group_epoch_record("g", 5),
        member_metadata_record("g", m),
        target_member_record("g", "m-1", {T1: fs(0, 1, 2)}),
        target_epoch_record("g", 5),
        current_assignment_record("g", m),
        member_metadata_record("g", other),
        current_assignment_record("g", other),
        *member_tombstones("g", "m-2"),
    ]
    loaded = ConsumerGroupRecords()
    for k, v in records:
        key = decode_consumer_key(k)
        assert key is not None and key.group_id == "g"
        loaded.apply(key, v)
    (group,) = loaded.build(0)
    assert (group.group_epoch, group.assignment_epoch) == (5, 5)
    assert list(group.consumer_members) == ["m-1"]
    assert group.consumer_members["m-1"] == m
    assert group.targets["m-1"] == {T1: fs(0, 1, 2)}
    assert group.static_member("i") == m
    assert group.partition_epoch(T1, 1) == 5 and group.partition_epoch(T1, 2) == -1
    # a deleted group leaves nothing behind
    for k, v in consumer_group_tombstones(group):
        key = decode_consumer_key(k)
        assert key is not None and v is None
        loaded.apply(key, v)
    assert loaded.build(0) == []


def test_keys_are_kafkas_record_types() -> None:
    key, value = group_epoch_record("g", 7)
    assert key == b"\x00\x03\x00\x01g"
    assert value == b"\x00\x00\x00\x00\x00\x07\x00"
    assert decode_consumer_key(b"\x00\x02\x00\x01g") is None  # a classic group's key
    k, _ = current_assignment_record("g", ConsumerGroupMember("m"))
    assert k[:2] == b"\x00\x08"
