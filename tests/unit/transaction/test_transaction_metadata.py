"""The transaction state machine (Kafka's TransactionMetadata): legal and
illegal transitions, epoch bumps, fencing, KIP-360's expected epoch."""

from __future__ import annotations

import pytest

from pylog.common.topic_partition import TopicPartition
from pylog.common.transaction_version import TransactionVersion
from pylog.errors import ErrorCode
from pylog.transaction.transaction_metadata import (
    VALID_PREVIOUS,
    IllegalTransitionError,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
)

S = TransactionState
TP = TopicPartition("t", 0)


def fresh() -> TransactionMetadata:
    return TransactionMetadata("id", 10, -1, 60000, S.EMPTY, txn_last_update_ms=0)


def apply(m: TransactionMetadata, t: TxnTransitMetadata | int) -> None:
    assert isinstance(t, TxnTransitMetadata), t
    m.complete_transition_to(t)


def test_valid_previous_states_are_kafkas() -> None:
    # Transactions v2 may abort from Empty and the completed states too.
    assert VALID_PREVIOUS[S.PREPARE_ABORT] == {
        S.ONGOING, S.PREPARE_EPOCH_FENCE, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT,
    }  # fmt: skip
    assert VALID_PREVIOUS[S.COMPLETE_COMMIT] == {S.PREPARE_COMMIT}
    assert VALID_PREVIOUS[S.DEAD] == {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}
    assert [s.kafka_name for s in S] == [
        "Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit",
        "CompleteAbort", "Dead", "PrepareEpochFence",
    ]  # fmt: skip


def test_a_whole_transaction() -> None:
    m = fresh()
    apply(m, m.prepare_increment_producer_epoch(60000, None, 1))
    assert (m.producer_epoch, m.state) == (0, S.EMPTY)
    apply(m, m.prepare_add_partitions({TP}, 2))
    assert (m.state, m.partitions, m.txn_start_ms) == (S.ONGOING, {TP}, 2)
    apply(m, m.prepare_add_partitions({TopicPartition("t", 1)}, 3))
    assert m.txn_start_ms == 2  # the transaction's start stays
    apply(m, m.prepare_abort_or_commit(S.PREPARE_COMMIT, 4))
    apply(m, m.prepare_complete(5))
    assert (m.state, m.partitions) == (S.COMPLETE_COMMIT, set())
    apply(m, m.prepare_add_partitions({TP}, 6))
    assert m.txn_start_ms == 6  # a new transaction


def test_a_pending_transition_blocks_another() -> None:
    m = fresh()
    m.prepare_add_partitions({TP}, 1)
    assert m.pending_transition_in_progress
    with pytest.raises(IllegalTransitionError):
        m.prepare_add_partitions({TP}, 2)
    m.abort_pending()
    assert not m.pending_transition_in_progress and m.state == S.EMPTY


def test_illegal_transitions() -> None:
    m = fresh()
    with pytest.raises(IllegalTransitionError):
        m.prepare_abort_or_commit(S.PREPARE_COMMIT, 1)  # Empty -> PrepareCommit
    with pytest.raises(IllegalTransitionError):
        m.prepare_fence_producer_epoch()  # only an Ongoing transaction is fenced
    t = m.prepare_add_partitions({TP}, 1)
    m.abort_pending()
    with pytest.raises(IllegalTransitionError):
        m.complete_transition_to(t)  # not pending any more


def test_fence_bumps_the_epoch_once() -> None:
    m = fresh()
    apply(m, m.prepare_increment_producer_epoch(60000, None, 1))
    apply(m, m.prepare_add_partitions({TP}, 2))
    t = m.prepare_fence_producer_epoch()
    assert (t.state, t.producer_epoch) == (S.PREPARE_EPOCH_FENCE, 1)
    m.abort_pending()
    m.has_failed_epoch_fence = True
    assert m.prepare_fence_producer_epoch().producer_epoch == 0  # the failed fence's epoch kept


def test_kip_360_expected_epoch() -> None:
    m = fresh()
    apply(m, m.prepare_increment_producer_epoch(60000, None, 1))  # epoch 0
    apply(m, m.prepare_increment_producer_epoch(60000, 0, 2))  # the producer had 0: bumped
    assert (m.producer_epoch, m.last_producer_epoch) == (1, 0)
    # A retry naming the previous epoch gets the current one back, unbumped.
    t = m.prepare_increment_producer_epoch(60000, 0, 3)
    assert isinstance(t, TxnTransitMetadata) and t.producer_epoch == 1
    m.abort_pending()
    assert m.prepare_increment_producer_epoch(60000, 7, 4) == ErrorCode.PRODUCER_FENCED


def test_rotation_to_a_new_producer_id() -> None:
    m = TransactionMetadata("id", 10, 32766, 60000, S.EMPTY, txn_last_update_ms=0)
    assert m.producer_epoch_exhausted
    with pytest.raises(IllegalTransitionError):
        m.prepare_increment_producer_epoch(60000, None, 1)
    apply(m, m.prepare_producer_id_rotation(11, 60000, 1, record_last_epoch=True))
    assert (m.producer_id, m.previous_producer_id, m.producer_epoch) == (11, 10, 0)


def test_transactions_v2_bumps_the_epoch_at_every_end_and_rotates_past_the_last() -> None:
    tv2 = TransactionVersion.TV_2
    m = fresh()
    apply(m, m.prepare_increment_producer_epoch(60000, None, 1))
    apply(m, m.prepare_add_partitions({TP}, 2, tv2))
    assert m.client_transaction_version == tv2
    t = m.prepare_abort_or_commit(S.PREPARE_COMMIT, 3)
    # The markers carry the bumped epoch; the last epoch is the one the
    # producer wrote its batches with.
    assert (t.producer_epoch, t.last_producer_epoch) == (1, 0)
    apply(m, t)
    apply(m, m.prepare_complete(4))
    assert (m.state, m.producer_id, m.producer_epoch) == (S.COMPLETE_COMMIT, 10, 1)
    # Past the last epoch: PrepareCommit at Short.MaxValue names the next
    # producer id, which takes over at epoch 0 when the markers are done.
    m.producer_epoch = 32766
    apply(m, m.prepare_add_partitions({TP}, 5, tv2))
    t = m.prepare_abort_or_commit(S.PREPARE_COMMIT, 6, next_producer_id=11)
    assert (t.producer_epoch, t.next_producer_id) == (32767, 11)
    apply(m, t)
    apply(m, m.prepare_complete(7))
    assert (m.producer_id, m.producer_epoch, m.previous_producer_id) == (11, 0, 10)
    # A v2 abort of a transaction the coordinator never saw: from Empty.
    apply(m, m.prepare_increment_producer_epoch(60000, None, 8))
    t = m.prepare_abort_or_commit(S.PREPARE_ABORT, 9, tv2, no_partition_added=True)
    assert (t.partitions, t.txn_start_ms, t.producer_epoch) == (frozenset(), 9, 2)


def test_transactions_v1_keeps_the_epoch() -> None:
    m = fresh()
    apply(m, m.prepare_increment_producer_epoch(60000, None, 1))
    apply(m, m.prepare_add_partitions({TP}, 2))
    t = m.prepare_abort_or_commit(S.PREPARE_ABORT, 3)
    assert (t.producer_epoch, t.client_transaction_version) == (0, TransactionVersion.TV_0)
