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
