"""SharePartition's record states (KIP-932): acquisition a whole batch at a
time, ACCEPT / RELEASE / REJECT / GAP, acquisition locks running out, the
delivery-count limit, the in-flight limit, the start offset moving past what
is done, and the persisted form read back."""

from __future__ import annotations

from pylog.common.topic_partition import TopicPartition
from pylog.errors import ErrorCode
from pylog.server.share.share_partition import AcknowledgeType, RecordState, SharePartition

ACCEPT, RELEASE, REJECT, GAP = (
    AcknowledgeType.ACCEPT,
    AcknowledgeType.RELEASE,
    AcknowledgeType.REJECT,
    AcknowledgeType.GAP,
)


def sp(start: int = 0, limit: int = 3, in_flight: int = 100) -> SharePartition:
    return SharePartition(
        "g",
        "tid",
        TopicPartition("t", 0),
        start,
        delivery_count_limit=limit,
        max_in_flight=in_flight,
    )


def test_acquires_whole_batches_up_to_max_records() -> None:
    p = sp()
    got, _, used = p.acquire("a", [(0, 4), (5, 9), (10, 14)], max_records=6)
    # the second batch is taken whole: max_records is met at a batch boundary
    assert got == [(0, 9, 1)] and used == 2
    assert p.next_fetch_offset() == 10
    got_b, _, _ = p.acquire("b", [(10, 14)], max_records=100)
    assert got_b == [(10, 14, 1)]


def test_accept_moves_the_start_and_release_redelivers() -> None:
    p = sp()
    p.acquire("a", [(0, 4)], 100)
    assert p.acknowledge("a", [(0, 1, [ACCEPT]), (2, 2, [RELEASE]), (3, 4, [ACCEPT])]) == 0
    assert p.start_offset == 2  # offset 2 is available again
    assert p.next_fetch_offset() == 2
    got, _, _ = p.acquire("b", [(0, 4)], 100)
    assert got == [(2, 2, 2)]  # only the released record, its second delivery
    assert p.acknowledge("b", [(2, 2, [REJECT])]) == 0
    assert p.start_offset == 5 and not p.in_flight


def test_per_offset_types_and_gaps() -> None:
    p = sp()
    p.acquire("a", [(0, 3)], 100)
    assert p.acknowledge("a", [(0, 3, [ACCEPT, GAP, RELEASE, REJECT])]) == 0
    assert p.in_flight[2].state is RecordState.AVAILABLE
    assert p.start_offset == 2


def test_only_the_holder_may_acknowledge() -> None:
    p = sp()
    p.acquire("a", [(0, 1)], 100)
    assert p.acknowledge("b", [(0, 1, [ACCEPT])]) == ErrorCode.INVALID_RECORD_STATE
    assert p.acknowledge("a", [(0, 5, [ACCEPT])]) == ErrorCode.INVALID_RECORD_STATE
    assert p.acknowledge("a", [(0, 1, [ACCEPT, ACCEPT, ACCEPT])]) == ErrorCode.INVALID_REQUEST
    assert p.in_flight[0].state is RecordState.ACQUIRED  # nothing changed
    assert p.acknowledge("a", [(0, 1, [ACCEPT])]) == 0


def test_lock_expiry_and_delivery_count_limit() -> None:
    p = sp(limit=2)
    _, lock1, _ = p.acquire("a", [(0, 0)], 100)
    assert p.expire_lock([0], lock1 + 1) == 0  # another lock's timer: nothing
    assert p.expire_lock([0], lock1) == 1
    assert p.in_flight[0].state is RecordState.AVAILABLE
    got, lock2, _ = p.acquire("b", [(0, 0)], 100)
    assert got == [(0, 0, 2)]
    assert p.expire_lock([0], lock2) == 1  # second delivery was the last: archived
    assert p.start_offset == 1 and not p.in_flight


def test_release_member() -> None:
    p = sp()
    p.acquire("a", [(0, 1)], 100)
    p.acquire("b", [(2, 3)], 100)
    assert p.release_member("a") == 2
    assert p.next_fetch_offset() == 0
    assert p.in_flight[2].member_id == "b"


def test_in_flight_limit_holds_new_records_back() -> None:
    p = sp(in_flight=3)
    got, _, _ = p.acquire("a", [(0, 9)], 100)
    assert got == [(0, 2, 1)]
    assert not p.can_acquire()
    p.acknowledge("a", [(0, 0, [ACCEPT])])
    assert p.can_acquire()
    got, _, _ = p.acquire("a", [(3, 9)], 100)
    assert got == [(3, 3, 1)]


def test_log_start_moving_past_the_start() -> None:
    p = sp()
    p.acquire("a", [(0, 4)], 100)
    p.move_start(3)
    assert p.start_offset == 3 and sorted(p.in_flight) == [3, 4]


def test_persisted_state_reads_back() -> None:
    p = sp(start=10)
    p.acquire("a", [(10, 19)], 100)
    p.acknowledge("a", [(10, 11, [ACCEPT]), (13, 13, [REJECT]), (14, 14, [RELEASE])])
    st = p.persisted()
    assert st.start_offset == 12
    assert [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
            for b in st.batches] == [(12, 12, 0, 1), (13, 13, 4, 1), (14, 19, 0, 1)]  # fmt: skip
    q = SharePartition.from_persisted(
        "g", "tid", TopicPartition("t", 0), st, delivery_count_limit=3, max_in_flight=100
    )
    assert q.start_offset == 12 and q.next_fetch_offset() == 12
    got, _, _ = q.acquire("b", [(10, 24)], 100)
    # 12 and 14-19 a second time, 13 never (archived), 20-24 for the first time
    assert got == [(12, 12, 2), (14, 19, 2), (20, 24, 1)]


def test_acknowledging_past_what_was_delivered_is_refused_at_once() -> None:
    p = sp()
    p.acquire("a", [(0, 1)], 100)
    # a hostile range: refused without walking it
    assert p.acknowledge("a", [(0, 2**62, [GAP])]) == ErrorCode.INVALID_RECORD_STATE
    assert p.acknowledge("a", [(-(2**62), 1, [ACCEPT])]) == 0  # below the start: ignored
    assert p.start_offset == 2


def test_record_limit_acquires_no_more_than_max_records() -> None:
    """KIP-1206's RECORD_LIMIT: the last batch is split, its rest stays
    available for the next acquisition (at the next delivery count 1)."""
    p = sp()
    got, _, used = p.acquire("a", [(0, 4), (5, 9)], max_records=7, record_limit=True)
    assert got == [(0, 6, 1)] and used == 2
    assert p.next_fetch_offset() == 7
    got_b, _, _ = p.acquire("b", [(5, 9)], max_records=100, record_limit=True)
    assert got_b == [(7, 9, 1)]
    assert p.in_flight[5].member_id == "a" and p.in_flight[8].member_id == "b"


def test_aborted_batches_are_archived_not_delivered() -> None:
    """share.isolation.level=read_committed: an aborted transaction's batch
    is archived as it is reached; the start offset moves past it when it is
    at the head, and later batches are delivered."""
    p = sp()
    got, _, used = p.acquire("a", [(0, 2), (3, 5), (6, 6)], 100, aborted=frozenset({0}))
    assert got == [(3, 6, 1)] and used == 3
    assert p.start_offset == 3 and 0 not in p.in_flight
    assert p.acknowledge("a", [(3, 6, [ACCEPT])]) == 0
    assert p.start_offset == 7 and not p.in_flight
