"""The share group's SimpleAssignor (KIP-932) and the ``__share_group_state``
record codec (Kafka's ShareSnapshot / ShareUpdate keys and values)."""

from __future__ import annotations

import struct

from pylog.coordinator.share_coordinator_records import (
    SHARE_SNAPSHOT,
    SHARE_UPDATE,
    decode_key,
    decode_value,
    snapshot_key,
    snapshot_value,
)
from pylog.coordinator.simple_assignor import SimpleAssignor
from pylog.server.share.persister import PersistedState, StateBatch


def test_members_share_a_single_partition() -> None:
    out = SimpleAssignor().assign({"a": frozenset({"t"}), "b": frozenset({"t"})}, {"t": 1})
    assert out == {"a": {"t": frozenset({0})}, "b": {"t": frozenset({0})}}


def test_partitions_spread_when_members_are_fewer() -> None:
    out = SimpleAssignor().assign({"a": frozenset({"t"}), "b": frozenset({"t"})}, {"t": 5})
    assert out["a"]["t"] | out["b"]["t"] == frozenset(range(5))
    assert not out["a"]["t"] & out["b"]["t"]


def test_more_members_than_partitions_every_member_gets_one() -> None:
    subs = {m: frozenset({"t"}) for m in "abcde"}
    out = SimpleAssignor().assign(subs, {"t": 2})
    assert all(len(a["t"]) == 1 for a in out.values())
    assert {p for a in out.values() for p in a["t"]} == {0, 1}


def test_only_subscribers_get_a_topic() -> None:
    out = SimpleAssignor().assign({"a": frozenset({"t"}), "b": frozenset({"u"})}, {"t": 1, "u": 1})
    assert out == {"a": {"t": frozenset({0})}, "b": {"u": frozenset({0})}}


def test_snapshot_record_round_trip() -> None:
    tid = "klRHXEgmSkaFdhkPBI_0oQ"
    key = snapshot_key("grp", tid, 7)
    assert key[:2] == struct.pack(">h", SHARE_SNAPSHOT)
    k = decode_key(key)
    assert k is not None and (k.group_id, k.topic_id, k.partition) == ("grp", tid, 7)
    st = PersistedState(12, 3, 5, [StateBatch(12, 12, 0, 1), StateBatch(13, 20, 4, 2)])
    value = snapshot_value(st, snapshot_epoch=9, now_ms=1000)
    assert decode_value(SHARE_SNAPSHOT, value) == st


def test_update_value_decodes() -> None:
    # ShareUpdateValue v0: SnapshotEpoch, LeaderEpoch, StartOffset, one batch, tags
    value = (
        struct.pack(">hiiq", 0, 1, 4, 30)
        + b"\x02"
        + struct.pack(">qqbh", 30, 31, 2, 1)
        + b"\x00\x00"
    )
    st = decode_value(SHARE_UPDATE, value)
    assert st.start_offset == 30 and st.batches == [StateBatch(30, 31, 2, 1)]


def test_foreign_keys_are_not_share_records() -> None:
    assert decode_key(struct.pack(">h", 3) + b"xx") is None
    assert decode_key(b"") is None


def test_share_group_records_rebuild_the_group() -> None:
    """Kafka's ShareGroup* records (types 10-15) written for a group and read
    back in log order give the group its members, epochs, assignments and
    initialized share partitions; tombstones forget a member, then the group."""
    from pylog.coordinator.share_group import ShareGroupMember
    from pylog.coordinator.share_group_records import (
        ShareGroupRecords,
        current_assignment_record,
        decode_share_key,
        group_epoch_record,
        member_metadata_record,
        member_tombstones,
        share_group_tombstones,
        state_partition_record,
        target_epoch_record,
        target_member_record,
    )

    tid = "klRHXEgmSkaFdhkPBI_0oQ"
    a = ShareGroupMember(
        "m-a", 3, 2, rack_id=None, client_id="c1", client_host="/127.0.0.1",
        subscribed_topic_names=("t",), assignment={tid: frozenset({0, 1})},
    )  # fmt: skip
    b = ShareGroupMember("m-b", 3, 0, "r1", "c2", "/127.0.0.2", ("t", "u"), {tid: frozenset({1})})
    log = [
        member_metadata_record("g", a),
        member_metadata_record("g", b),
        group_epoch_record("g", 3),
        target_member_record("g", "m-a", a.assignment),
        target_member_record("g", "m-b", b.assignment),
        target_epoch_record("g", 3),
        current_assignment_record("g", a),
        current_assignment_record("g", b),
        state_partition_record("g", {tid: ("t", {0, 1})}),
    ]
    assert [int.from_bytes(k[:2], "big") for k, _ in log] == [10, 10, 11, 13, 13, 12, 14, 14, 15]
    recs = ShareGroupRecords()
    for k, v in log:
        key = decode_share_key(k)
        assert key is not None and key.group_id == "g"
        recs.apply(key, v)
    [g] = recs.build(1000)
    assert (g.group_epoch, g.assignment_epoch) == (3, 3)
    assert g.initialized == {(tid, 0), (tid, 1)} and g.initialized_names == {tid: "t"}
    got = g.share_members["m-b"]
    assert (got.member_epoch, got.previous_epoch, got.rack_id, got.client_id) == (3, 0, "r1", "c2")
    assert got.subscribed_topic_names == ("t", "u") and got.assignment == {tid: frozenset({1})}
    assert g.targets["m-a"] == {tid: frozenset({0, 1})}
    assert g.share_state.value == "Stable"
    for k, v in member_tombstones("g", "m-a"):
        key = decode_share_key(k)
        assert key is not None
        recs.apply(key, v)
    [g] = recs.build(1000)
    assert list(g.share_members) == ["m-b"]
    for k, v in share_group_tombstones(g):
        key = decode_share_key(k)
        assert key is not None
        recs.apply(key, v)
    assert recs.build(1000) == []
    # Not a share-group record: an offset commit's key (type 1).
    assert decode_share_key(b"\x00\x01\x00\x01g") is None
