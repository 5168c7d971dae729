"""Transactions on a partition's log, on real files: transactional batches
open a producer's transaction, COMMIT/ABORT markers (appended as the
coordinator's) close it, the last stable offset follows, ABORTs go to the
segment's ``.txnindex`` in Kafka's 34-byte format, read_committed reads stop
at the LSO and list the aborted transactions, and recovery rebuilds it all."""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import build_batch
from support.clock import ManualClock
from support.scheduler import ManualScheduler

from pylog import _native
from pylog.errors import (
    CorruptIndexError,
    CorruptRecordError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    TransactionCoordinatorFencedError,
)
from pylog.log.config import LogConfig
from pylog.log.end_transaction_marker import (
    ABORT,
    COMMIT,
    EndTransactionMarker,
    build_marker_batch,
)
from pylog.log.log import AppendOrigin, FetchIsolation, Log
from pylog.log.producer_state import ProducerStateManager, read_snapshot
from pylog.log.transaction_index import (
    ABORTED_TXN_SIZE,
    AbortedTxn,
    TransactionIndex,
    decode_aborted_txns,
)
from pylog.log.verification_guard import SENTINEL, VerificationGuard

T0 = 1_700_000_000_000


def make_config(**overrides: Any) -> LogConfig:
    props: dict[str, Any] = {
        "internal.segment.bytes": 1 << 20,
        "segment.index.bytes": 4096,
        "index.interval.bytes": 1,
        "retention.ms": -1,
        "file.delete.delay.ms": 1000,
        "message.timestamp.after.max.ms": 2**63 - 1,
    }
    props.update(overrides)
    return LogConfig.from_props(props)


@pytest.fixture
def open_log(tmp_path: Path, clock: ManualClock, scheduler: ManualScheduler) -> Iterator[Any]:
    logs: list[Log] = []

    def opener(*, had_clean_shutdown: bool = True, **config: Any) -> Log:
        log = Log.open(
            str(tmp_path / "t-0"),
            make_config(**config),
            scheduler=scheduler,
            clock=clock,
            had_clean_shutdown=had_clean_shutdown,
        )
        logs.append(log)
        return log

    yield opener
    for log in logs:
        log.close()


class Producer:
    """A transactional producer's batches (id, epoch, next sequence)."""

    def __init__(self, pid: int, epoch: int = 0) -> None:
        self.pid, self.epoch, self.seq = pid, epoch, 0

    def batch(self, n: int, *, transactional: bool = True) -> bytearray:
        b = build_batch(
            [f"{self.pid}-{self.seq + i}".encode() for i in range(n)],
            producer_id=self.pid,
            producer_epoch=self.epoch,
            base_sequence=self.seq,
            is_transactional=transactional,
        )
        self.seq += n
        return bytearray(b)

    def marker(self, commit: bool, coordinator_epoch: int = 0) -> bytearray:
        m = EndTransactionMarker(COMMIT if commit else ABORT, coordinator_epoch)
        return bytearray(build_marker_batch(self.pid, self.epoch, m, timestamp_ms=T0))


def end(log: Log, p: Producer, commit: bool, coordinator_epoch: int = 0) -> int:
    info = log.append_as_leader(
        p.marker(commit, coordinator_epoch), 0, origin=AppendOrigin.COORDINATOR
    )
    log.update_high_watermark(log.log_end_offset)
    return info.first_offset


def produce(log: Log, p: Producer, n: int, **kw: Any) -> int:
    info = log.append_as_leader(p.batch(n, **kw), 0)
    log.update_high_watermark(log.log_end_offset)
    return info.first_offset


def committed_read(log: Log, start: int = 0) -> tuple[int, list[AbortedTxn] | None]:
    """(bytes read_committed returns from ``start``, aborted transactions)."""
    info = log.read(start, 1 << 20, FetchIsolation.TXN_COMMITTED)
    return info.records.size, info.aborted_transactions


# ---------------------------------------------------------------- the .txnindex file


def test_txnindex_entries_are_kafkas_34_bytes(tmp_path: Path) -> None:
    idx = TransactionIndex(100, str(tmp_path / "00000000000000000100.txnindex"))
    assert not os.path.exists(idx.path)  # made by the first entry, as Kafka's
    idx.append(AbortedTxn(7, 90, 105, 90))
    idx.append(AbortedTxn(8, 101, 110, 111))
    data = Path(idx.path).read_bytes()
    assert len(data) == 2 * ABORTED_TXN_SIZE == 68
    assert struct.unpack(">hqqqq", data[:34]) == (0, 7, 90, 105, 90)
    assert decode_aborted_txns(data) == [AbortedTxn(7, 90, 105, 90), AbortedTxn(8, 101, 110, 111)]
    with pytest.raises(ValueError):
        idx.append(AbortedTxn(9, 100, 110, 111))  # last offsets must increase

    # A second reader (reopened) sees the file's entries.
    again = TransactionIndex(100, idx.path)
    assert again.entries == idx.entries
    # Kafka's collectAbortedTxns: overlapping [fetch, upper); complete once an
    # entry's LSO reaches the upper bound.
    assert again.collect_aborted_txns(0, 95) == ([AbortedTxn(7, 90, 105, 90)], True)
    assert again.collect_aborted_txns(106, 200) == ([AbortedTxn(8, 101, 110, 111)], False)
    assert again.collect_aborted_txns(111, 200) == ([], False)

    again.truncate_to(110)
    assert os.path.getsize(idx.path) == 34
    again.truncate_to(0)
    assert not os.path.exists(idx.path)


def test_txnindex_of_a_torn_size_is_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.txnindex"
    path.write_bytes(AbortedTxn(1, 0, 3, 4).encode() + b"\x00" * 5)
    with pytest.raises(CorruptIndexError):
        len(TransactionIndex(0, str(path)))
    path.write_bytes(AbortedTxn(1, 0, 3, 4).encode())
    stale = TransactionIndex(10, str(path))  # an entry ending before the segment
    with pytest.raises(CorruptIndexError):
        stale.sanity_check()


# ---------------------------------------------------------------- producer state


def test_snapshot_carries_the_open_transaction_in_kafkas_v1_format(tmp_path: Path) -> None:
    m = ProducerStateManager(tmp_path)
    info = _native.analyze_records(
        _native.build_batch(
            [(None, b"a", [], T0), (None, b"b", [], T0)],
            base_offset=40,
            producer_id=5,
            producer_epoch=2,
            base_sequence=0,
            is_transactional=True,
        ),
        max_batch_size=1 << 20,
    )
    m.update(info.batches[0], T0)
    assert m.first_unstable_offset == 40
    path = m.take_snapshot(42)
    assert path is not None
    raw = Path(path).read_bytes()
    version, _crc, count = struct.unpack_from(">hIi", raw, 0)
    assert (version, count) == (1, 1)
    # producer id, epoch, last sequence, last offset, offset delta, timestamp,
    # coordinator epoch, current txn first offset
    assert struct.unpack_from(">qhiqiqiq", raw, 10) == (5, 2, 1, 41, 1, T0, -1, 40)
    (entry,) = read_snapshot(path)
    assert entry.current_txn_first_offset == 40

    fresh = ProducerStateManager(tmp_path)
    fresh.load_latest_snapshot(42)
    assert fresh.first_unstable_offset == 40
    assert fresh.ongoing_transactions() == {40: 5}


# ---------------------------------------------------------------- the log


def test_commit_moves_the_lso_and_abort_is_indexed(open_log: Any) -> None:
    log = open_log()
    a, b = Producer(1), Producer(2)
    produce(log, Producer(3), 2, transactional=False)  # 0-1, plain idempotent data
    assert log.last_stable_offset == 2
    first_a = produce(log, a, 3)  # 2-4
    first_b = produce(log, b, 2)  # 5-6
    produce(log, a, 1)  # 7
    assert (first_a, first_b) == (2, 5)
    assert log.high_watermark == 8
    assert log.last_stable_offset == 2  # a's transaction is open
    assert committed_read(log)[1] == []
    size_before = committed_read(log)[0]
    assert size_before > 0

    commit_at = end(log, a, commit=True)  # 8
    assert commit_at == 8
    assert log.last_stable_offset == 5  # now b's bounds it
    assert not os.path.exists(log.active_segment.txn_index_path)  # a commit is not indexed

    abort_at = end(log, b, commit=False)  # 9
    assert abort_at == 9
    assert log.last_stable_offset == 10 == log.high_watermark
    entries = log.active_segment.txn_index.entries
    # b's abort: first offset 5, marker 9, and no other transaction open: LSO 10
    assert entries == [AbortedTxn(2, 5, 9, 10)]
    assert os.path.getsize(log.active_segment.txn_index_path) == 34

    size, aborted = committed_read(log)
    assert aborted == [AbortedTxn(2, 5, 9, 10)]
    assert size > size_before
    # read_uncommitted lists nothing
    assert log.read(0, 1 << 20, FetchIsolation.HIGH_WATERMARK).aborted_transactions is None

    # The producer state knows the marker's coordinator epoch; the entries
    # have no open transaction.
    e = log.producer_state_manager.last_entry(2)
    assert e is not None and e.current_txn_first_offset is None and e.coordinator_epoch == 0


def test_lso_waits_for_the_marker_to_be_replicated(open_log: Any) -> None:
    log = open_log()
    a = Producer(1)
    produce(log, a, 2)  # 0-1
    log.append_as_leader(a.marker(commit=True), 0, origin=AppendOrigin.COORDINATOR)  # 2
    # The HW has not passed the marker: the transaction is decided here but
    # could still be lost with this leader, so the LSO stays at its start.
    assert log.high_watermark == 2
    assert log.last_stable_offset == 0
    log.update_high_watermark(3)
    assert log.last_stable_offset == 3


def test_marker_checks_coordinator_and_producer_epochs(open_log: Any) -> None:
    log = open_log()
    a = Producer(1, epoch=3)
    produce(log, a, 1)
    end(log, a, commit=True, coordinator_epoch=5)
    produce(log, a, 1)
    leo = log.log_end_offset
    with pytest.raises(TransactionCoordinatorFencedError):
        end(log, a, commit=False, coordinator_epoch=4)
    stale = Producer(1, epoch=2)
    with pytest.raises(InvalidProducerEpochError):
        end(log, stale, commit=False, coordinator_epoch=5)
    assert log.log_end_offset == leo  # nothing written
    end(log, a, commit=False, coordinator_epoch=6)
    assert log.last_stable_offset == log.log_end_offset


def test_transactions_v2_markers_need_the_bumped_epoch(open_log: Any) -> None:
    """WriteTxnMarkers v2 (KIP-1228): a TV2 marker's epoch is the one the
    coordinator bumped, newer than the transaction's; the same epoch passes
    only as a retry once the transaction is closed (KAFKA-19999). A TV0/1
    marker of the same epoch still closes the transaction."""
    log = open_log()
    a = Producer(1, epoch=3)
    produce(log, a, 1)

    def tv2_end(p: Producer) -> None:
        log.append_as_leader(
            p.marker(True), 0, origin=AppendOrigin.COORDINATOR, transaction_version=2
        )

    leo = log.log_end_offset
    with pytest.raises(InvalidProducerEpochError):
        tv2_end(a)  # the transaction's own epoch: not bumped
    assert log.log_end_offset == leo
    bumped = Producer(1, epoch=4)
    tv2_end(bumped)
    tv2_end(bumped)  # a retry of the marker written: no transaction open
    with pytest.raises(InvalidProducerEpochError):
        tv2_end(a)  # older
    legacy = Producer(2, epoch=0)
    produce(log, legacy, 1)
    end(log, legacy, commit=True)  # TV0/1: the same epoch
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == log.log_end_offset


def test_clients_may_not_write_markers_and_plain_writes_inside_a_txn_fail(open_log: Any) -> None:
    log = open_log()
    a = Producer(1)
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(a.marker(commit=True), 0)  # a client's control batch
    produce(log, a, 1)
    with pytest.raises(InvalidTxnStateError):
        produce(log, a, 1, transactional=False)
    # A coordinator's control batch that holds no end marker is corrupt.
    bogus = bytearray(build_batch_control(b"\x00\x00\x00\x07", b"\x00\x00\x00\x00\x00\x00", pid=1))
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(bogus, 0, origin=AppendOrigin.COORDINATOR)


def test_verification_guard_ties_the_coordinators_answer_to_the_append(
    open_log: Any, clock: ManualClock
) -> None:
    """KIP-890 part 1 on the log (Kafka's VerificationGuard): an append that
    would open a transaction passes only with the guard made when the
    coordinator was asked; a marker (or any transactional append of the
    producer) in between clears it; an open transaction needs none."""
    log = open_log()
    a = Producer(1)
    guard = log.maybe_start_transaction_verification(a.pid, 0, a.epoch)
    assert guard is not SENTINEL
    # A second question while the first is out shares its guard.
    assert log.maybe_start_transaction_verification(a.pid, 0, a.epoch) is guard
    with pytest.raises(InvalidTxnStateError):  # another request's guard
        log.append_as_leader(a.batch(1), 0, verification_guard=VerificationGuard())
    a.seq = 0
    with pytest.raises(InvalidTxnStateError):  # the sentinel verifies nothing
        log.append_as_leader(a.batch(1), 0, verification_guard=SENTINEL)
    a.seq = 0
    log.append_as_leader(a.batch(1), 0, verification_guard=guard)
    # Open now: the next batch needs no question and passes with the sentinel.
    assert log.maybe_start_transaction_verification(a.pid, 1, a.epoch) is SENTINEL
    log.append_as_leader(a.batch(1), 0, verification_guard=SENTINEL)
    end(log, a, commit=True)
    # Asked, then the transaction ends before the append: a stale guard.
    guard = log.maybe_start_transaction_verification(a.pid, 2, a.epoch)
    end(log, a, commit=False)
    with pytest.raises(InvalidTxnStateError):
        log.append_as_leader(a.batch(1), 0, verification_guard=guard)
    # A guard never used expires with producer.id.expiration.ms.
    b = Producer(2)
    stale = log.maybe_start_transaction_verification(b.pid, 0, b.epoch)
    clock.advance(86_400_000)
    log._producer_state.remove_expired_producers(clock())
    assert log.maybe_start_transaction_verification(b.pid, 0, b.epoch) is not stale


def build_batch_control(key: bytes, value: bytes, pid: int) -> bytes:
    return _native.build_batch(
        [(key, value, [], T0)],
        producer_id=pid,
        producer_epoch=0,
        is_transactional=True,
        is_control=True,
    )


def test_aborted_txn_spanning_segments_is_found_from_the_older_one(open_log: Any) -> None:
    log = open_log()
    a, b = Producer(1), Producer(2)
    produce(log, a, 2)  # 0-1
    produce(log, b, 2)  # 2-3
    log.roll()
    produce(log, b, 1)  # 4
    end(log, a, commit=False)  # 5: entry in the second segment
    end(log, b, commit=True)  # 6
    assert log.segments[0].txn_index.entries == []
    assert log.segments[1].txn_index.entries == [AbortedTxn(1, 0, 5, 2)]
    assert committed_read(log, 0)[1] == [AbortedTxn(1, 0, 5, 2)]
    assert committed_read(log, 6)[1] == []


def test_restart_keeps_lso_and_txnindex_and_recovery_rebuilds_them(
    open_log: Any, tmp_path: Path
) -> None:
    log = open_log()
    a, b, c = Producer(1), Producer(2), Producer(3)
    produce(log, a, 2)  # 0-1
    produce(log, b, 2)  # 2-3
    end(log, b, commit=False)  # 4
    produce(log, c, 1)  # 5
    end(log, c, commit=True)  # 6
    assert log.last_stable_offset == 0
    index_path = log.active_segment.txn_index_path
    assert decode_aborted_txns(Path(index_path).read_bytes()) == [AbortedTxn(2, 2, 4, 0)]
    log.close()

    # Clean restart: from the snapshot at the LEO.
    log = open_log()
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 0
    assert log.producer_state_manager.ongoing_transactions() == {0: 1}
    assert committed_read(log) == (0, None)  # nothing readable below the LSO yet
    end(log, a, commit=True)  # 7
    assert log.last_stable_offset == 8
    assert committed_read(log)[1] == [AbortedTxn(2, 2, 4, 0)]
    log.close()

    # Unclean restart with every snapshot and the .txnindex lost: replayed
    # from the log, the same entry comes back.
    for name in os.listdir(log.dir):
        if name.endswith((".snapshot", ".txnindex")):
            os.unlink(os.path.join(log.dir, name))
    log = open_log(had_clean_shutdown=False)
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 8
    assert log.active_segment.txn_index.entries == [AbortedTxn(2, 2, 4, 0)]
    assert decode_aborted_txns(Path(index_path).read_bytes()) == [AbortedTxn(2, 2, 4, 0)]


def test_truncation_reopens_the_transaction_and_drops_its_index_entry(open_log: Any) -> None:
    log = open_log()
    a = Producer(1)
    produce(log, a, 3)  # 0-2
    end(log, a, commit=False)  # 3
    assert log.active_segment.txn_index.entries == [AbortedTxn(1, 0, 3, 4)]
    log.truncate_to(3)
    assert log.active_segment.txn_index.entries == []
    assert not os.path.exists(log.active_segment.txn_index_path)
    assert log.producer_state_manager.ongoing_transactions() == {0: 1}
    log.update_high_watermark(3)
    assert log.last_stable_offset == 0


def test_follower_append_of_markers_updates_state_and_index(open_log: Any, tmp_path: Path) -> None:
    leader = open_log()
    a, b = Producer(1), Producer(2)
    produce(leader, a, 2)
    produce(leader, b, 1)
    end(leader, a, commit=False)
    data = leader.read_bytes(0, 1 << 20)

    follower = Log.open(str(tmp_path / "f-0"), make_config())
    try:
        follower.append_as_follower(data)
        follower.update_high_watermark(follower.log_end_offset)
        assert follower.last_stable_offset == 2  # b's transaction is open there too
        assert follower.active_segment.txn_index.entries == [AbortedTxn(1, 0, 3, 2)]
        e = follower.producer_state_manager.last_entry(1)
        assert e is not None and e.current_txn_first_offset is None
    finally:
        follower.close()


def test_a_small_read_lists_only_the_aborted_transactions_it_can_meet(open_log: Any) -> None:
    """Kafka bounds the search by an index entry past the slice read, so a
    consumer far behind is not sent every aborted transaction of the log."""
    log = open_log()
    for i in range(40):
        p = Producer(100 + i)
        produce(log, p, 5)
        end(log, p, commit=False)
    assert len(log.active_segment.txn_index) == 40
    one_batch = log.read(0, 1 << 20, FetchIsolation.HIGH_WATERMARK).records.size // 80
    info = log.read(0, one_batch, FetchIsolation.TXN_COMMITTED, min_one_message=True)
    assert info.aborted_transactions is not None
    assert 1 <= len(info.aborted_transactions) < 10
    assert info.aborted_transactions[0] == AbortedTxn(100, 0, 5, 6)
    whole = log.read(0, 1 << 20, FetchIsolation.TXN_COMMITTED).aborted_transactions
    assert whole is not None and len(whole) == 40
