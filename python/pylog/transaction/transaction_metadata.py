"""TransactionMetadata: one transactional id's state at its coordinator, and
the state machine it moves through (Kafka's TransactionMetadata.scala).

A change is made in two steps, as Kafka does: ``prepare_*`` computes the next
state (a :class:`TxnTransitMetadata`) and marks the metadata as having a
transition pending; the transit is written to ``__transaction_state``, and
only once the write is acknowledged does :meth:`complete_transition_to`
apply it. A request meeting a pending transition is answered
CONCURRENT_TRANSACTIONS. The coordinator runs on the event loop, so no lock
is needed: nothing else runs between a check and its ``prepare_*``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from pylog.common.topic_partition import TopicPartition
from pylog.common.transaction_version import TransactionVersion
from pylog.errors import ErrorCode

__all__ = [
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "IllegalTransitionError",
    "TransactionMetadata",
    "TransactionState",
    "TxnTransitMetadata",
    "is_epoch_exhausted",
]

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
#: An epoch is never handed out at Short.MaxValue: the coordinator keeps that
#: last one to fence the producer with (Kafka's isEpochExhausted).
_MAX_EPOCH = 32767


def is_epoch_exhausted(epoch: int) -> bool:
    return epoch >= _MAX_EPOCH - 1


class TransactionState(IntEnum):
    """The states and their ids as ``__transaction_state`` stores them."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name DescribeTransactions and ListTransactions use."""
        return _NAMES[self]

    @classmethod
    def from_name(cls, name: str) -> TransactionState | None:
        return _BY_NAME.get(name)

    @property
    def expiration_allowed(self) -> bool:
        """Whether the id may be forgotten after transactional.id.expiration.ms."""
        return self in (
            TransactionState.EMPTY,
            TransactionState.COMPLETE_COMMIT,
            TransactionState.COMPLETE_ABORT,
        )


_S = TransactionState
_NAMES = {
    _S.EMPTY: "Empty",
    _S.ONGOING: "Ongoing",
    _S.PREPARE_COMMIT: "PrepareCommit",
    _S.PREPARE_ABORT: "PrepareAbort",
    _S.COMPLETE_COMMIT: "CompleteCommit",
    _S.COMPLETE_ABORT: "CompleteAbort",
    _S.DEAD: "Dead",
    _S.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {v: k for k, v in _NAMES.items()}

#: The states each state may be entered from (Kafka's validPreviousStates).
VALID_PREVIOUS: dict[TransactionState, frozenset[TransactionState]] = {
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    # Transactions v2: a producer unsure whether its transaction reached the
    # coordinator (adds are implicit) may abort from Empty or a completed one.
    _S.PREPARE_ABORT: frozenset(
        {_S.ONGOING, _S.PREPARE_EPOCH_FENCE, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}
    ),
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}


class IllegalTransitionError(Exception):
    """A transition the state machine forbids: a coordinator bug, never a
    client's doing (the coordinator checks requests before preparing)."""


@dataclass(frozen=True)
class TxnTransitMetadata:
    """The state a prepared transition leads to: what is written to the log."""

    producer_id: int
    previous_producer_id: int
    next_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    partitions: frozenset[TopicPartition]
    txn_start_ms: int
    txn_last_update_ms: int
    client_transaction_version: TransactionVersion = TransactionVersion.TV_0


class TransactionMetadata:
    """One transactional id's current state (what the last acknowledged write
    of ``__transaction_state`` says) and its pending transition."""

    __slots__ = (
        "client_transaction_version",
        "has_failed_epoch_fence",
        "last_producer_epoch",
        "next_producer_id",
        "partitions",
        "pending_state",
        "previous_producer_id",
        "producer_epoch",
        "producer_id",
        "state",
        "transactional_id",
        "txn_last_update_ms",
        "txn_start_ms",
        "txn_timeout_ms",
    )

    def __init__(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        txn_timeout_ms: int,
        state: TransactionState = TransactionState.EMPTY,
        *,
        previous_producer_id: int = NO_PRODUCER_ID,
        next_producer_id: int = NO_PRODUCER_ID,
        last_producer_epoch: int = NO_PRODUCER_EPOCH,
        partitions: set[TopicPartition] | None = None,
        txn_start_ms: int = -1,
        txn_last_update_ms: int = -1,
        client_transaction_version: TransactionVersion = TransactionVersion.TV_0,
    ) -> None:
        self.transactional_id = transactional_id
        self.producer_id = producer_id
        self.previous_producer_id = previous_producer_id
        self.next_producer_id = next_producer_id
        self.producer_epoch = producer_epoch
        self.last_producer_epoch = last_producer_epoch
        self.txn_timeout_ms = txn_timeout_ms
        self.state = state
        self.partitions: set[TopicPartition] = set(partitions or ())
        self.txn_start_ms = txn_start_ms
        self.txn_last_update_ms = txn_last_update_ms
        #: The transaction version of the client's last transaction (Kafka's
        #: clientTransactionVersion): 2 when it ran transactions v2, whose
        #: every EndTxn bumps the epoch.
        self.client_transaction_version = client_transaction_version
        self.pending_state: TransactionState | None = None
        #: An epoch fence whose write failed: the bumped epoch was never
        #: handed out, so the next fence reuses it instead of bumping again.
        self.has_failed_epoch_fence = False

    def __repr__(self) -> str:
        return (
            f"TransactionMetadata({self.transactional_id!r}, pid={self.producer_id}, "
            f"epoch={self.producer_epoch}, {self.state.kafka_name}, "
            f"pending={self.pending_state.kafka_name if self.pending_state else None}, "
            f"partitions={sorted(map(str, self.partitions))})"
        )

    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    @property
    def producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    def has_pending_transaction(self) -> bool:
        return self.state in (_S.ONGOING, _S.PREPARE_ABORT, _S.PREPARE_COMMIT)

    # ------------------------------------------------------------ preparing

    def _prepare(
        self,
        state: TransactionState,
        producer_id: int,
        producer_epoch: int,
        last_producer_epoch: int,
        txn_timeout_ms: int,
        partitions: frozenset[TopicPartition],
        txn_start_ms: int,
        update_ms: int,
        *,
        next_producer_id: int = NO_PRODUCER_ID,
        client_transaction_version: TransactionVersion | None = None,
    ) -> TxnTransitMetadata:
        if self.pending_state is not None:
            raise IllegalTransitionError(
                f"{self.transactional_id}: preparing {state.kafka_name} while "
                f"{self.pending_state.kafka_name} is pending"
            )
        if self.state not in VALID_PREVIOUS[state]:
            raise IllegalTransitionError(
                f"{self.transactional_id}: {self.state.kafka_name} -> {state.kafka_name}"
            )
        self.pending_state = state
        return TxnTransitMetadata(
            producer_id=producer_id,
            previous_producer_id=self.producer_id
            if producer_id != self.producer_id
            else self.previous_producer_id,
            next_producer_id=next_producer_id,
            producer_epoch=producer_epoch,
            last_producer_epoch=last_producer_epoch,
            txn_timeout_ms=txn_timeout_ms,
            state=state,
            partitions=partitions,
            txn_start_ms=txn_start_ms,
            txn_last_update_ms=update_ms,
            client_transaction_version=self.client_transaction_version
            if client_transaction_version is None
            else client_transaction_version,
        )

    def prepare_fence_producer_epoch(self) -> TxnTransitMetadata:
        """Ongoing -> PrepareEpochFence: the epoch goes up by one (unless a
        fence with it already failed) so the producer holding the old one is
        fenced; the ongoing transaction is then aborted under it. Never
        written as such: EndTxn(ABORT) turns it into PrepareAbort."""
        # At Short.MaxValue (an abort under transactions v2 took the last
        # one) the epoch stays: the abort below goes through without a bump.
        epoch = (
            self.producer_epoch
            if self.has_failed_epoch_fence or self.producer_epoch >= _MAX_EPOCH
            else self.producer_epoch + 1
        )
        return self._prepare(
            _S.PREPARE_EPOCH_FENCE,
            self.producer_id,
            epoch,
            NO_PRODUCER_EPOCH,
            self.txn_timeout_ms,
            frozenset(self.partitions),
            self.txn_start_ms,
            self.txn_last_update_ms,
        )

    def prepare_increment_producer_epoch(
        self, txn_timeout_ms: int, expected_epoch: int | None, now_ms: int
    ) -> TxnTransitMetadata | int:
        """InitProducerId on an idle id: the epoch goes up by one (a new id
        starts at 0). ``expected_epoch`` (KIP-360: the producer names the id
        and epoch it had) equal to the current epoch bumps it too; equal to
        the last one is a retry of a bump already made, answered with the
        current epoch; anything else is PRODUCER_FENCED (the error code)."""
        if self.producer_epoch_exhausted:
            raise IllegalTransitionError(f"{self.transactional_id}: epochs exhausted")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last = self.producer_epoch, self.last_producer_epoch
        else:
            return ErrorCode.PRODUCER_FENCED
        return self._prepare(
            _S.EMPTY, self.producer_id, epoch, last, txn_timeout_ms, frozenset(), -1, now_ms
        )

    def prepare_producer_id_rotation(
        self, new_producer_id: int, txn_timeout_ms: int, now_ms: int, record_last_epoch: bool
    ) -> TxnTransitMetadata:
        """The epochs of the current producer id are used up: a new id at epoch 0."""
        if self.has_pending_transaction():
            raise IllegalTransitionError(f"{self.transactional_id}: rotation mid-transaction")
        last = self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH
        return self._prepare(
            _S.EMPTY, new_producer_id, 0, last, txn_timeout_ms, frozenset(), -1, now_ms
        )

    def prepare_add_partitions(
        self,
        added: set[TopicPartition],
        now_ms: int,
        client_transaction_version: TransactionVersion = TransactionVersion.TV_0,
    ) -> TxnTransitMetadata:
        start = now_ms if self.state in VALID_PREVIOUS[_S.EMPTY] else self.txn_start_ms
        return self._prepare(
            _S.ONGOING,
            self.producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.txn_timeout_ms,
            frozenset(self.partitions | added),
            start,
            now_ms,
            client_transaction_version=client_transaction_version,
        )

    def prepare_abort_or_commit(
        self,
        state: TransactionState,
        now_ms: int,
        client_transaction_version: TransactionVersion | None = None,
        *,
        next_producer_id: int = NO_PRODUCER_ID,
        no_partition_added: bool = False,
    ) -> TxnTransitMetadata:
        """PrepareCommit / PrepareAbort. Under transactions v2 the epoch goes
        up by one (the markers carry it, so the producer's late batches of
        this transaction are refused), the last epoch remembers the old one,
        and ``next_producer_id`` is the id to go on with when that was the
        last epoch of this producer id. ``no_partition_added``: a v2 abort
        of a transaction the coordinator never saw (it starts now)."""
        tv = self.client_transaction_version
        if client_transaction_version is not None:
            tv = client_transaction_version
        epoch, last = self.producer_epoch, self.last_producer_epoch
        if tv.supports_epoch_bump:
            # An abort already at Short.MaxValue (a bug's doing) goes through
            # without overflowing, as Kafka lets it.
            if not (epoch >= _MAX_EPOCH and state == _S.PREPARE_ABORT):
                epoch += 1
            last = self.producer_epoch
        return self._prepare(
            state,
            self.producer_id,
            epoch,
            last,
            self.txn_timeout_ms,
            frozenset(self.partitions),
            now_ms if no_partition_added else self.txn_start_ms,
            now_ms,
            next_producer_id=next_producer_id,
            client_transaction_version=tv,
        )

    def prepare_complete(self, now_ms: int) -> TxnTransitMetadata:
        """PrepareCommit/PrepareAbort -> CompleteCommit/CompleteAbort, once
        every partition has its marker."""
        state = _S.COMPLETE_COMMIT if self.state == _S.PREPARE_COMMIT else _S.COMPLETE_ABORT
        self.has_failed_epoch_fence = False
        # Transactions v2 past the last epoch of its producer id: the id
        # prepared with the EndTxn takes over at epoch 0 (the last epoch
        # stays the one the producer last used).
        pid, epoch = self.producer_id, self.producer_epoch
        if (
            self.client_transaction_version.supports_epoch_bump
            and self.next_producer_id != NO_PRODUCER_ID
        ):
            pid, epoch = self.next_producer_id, 0
        return self._prepare(
            state,
            pid,
            epoch,
            self.last_producer_epoch,
            self.txn_timeout_ms,
            frozenset(),
            self.txn_start_ms,
            now_ms,
        )

    def prepare_dead(self) -> TxnTransitMetadata:
        """An idle id past transactional.id.expiration.ms: its tombstone."""
        return self._prepare(
            _S.DEAD,
            self.producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.txn_timeout_ms,
            frozenset(),
            self.txn_start_ms,
            self.txn_last_update_ms,
        )

    # ------------------------------------------------------------ completing

    def complete_transition_to(self, transit: TxnTransitMetadata) -> None:
        """The transit was written: it becomes the state (Kafka's
        completeTransitionTo, with its checks)."""
        to = transit.state
        if self.pending_state != to:
            raise IllegalTransitionError(
                f"{self.transactional_id}: completing {to.kafka_name}, pending "
                f"{self.pending_state.kafka_name if self.pending_state else None}"
            )
        if self.state not in VALID_PREVIOUS[to] or (
            transit.txn_last_update_ms < self.txn_last_update_ms and to != _S.DEAD
        ):
            self.pending_state = None
            raise IllegalTransitionError(
                f"{self.transactional_id}: {self.state.kafka_name} -> {to.kafka_name}"
            )
        if to == _S.ONGOING and (
            self.producer_id != transit.producer_id
            or self.producer_epoch != transit.producer_epoch
            or not self.partitions <= transit.partitions
        ):
            self.pending_state = None
            raise IllegalTransitionError(f"{self.transactional_id}: Ongoing changed its producer")
        self.producer_id = transit.producer_id
        self.previous_producer_id = transit.previous_producer_id
        self.next_producer_id = transit.next_producer_id
        self.producer_epoch = transit.producer_epoch
        self.last_producer_epoch = transit.last_producer_epoch
        self.txn_timeout_ms = transit.txn_timeout_ms
        self.partitions = set(transit.partitions)
        self.txn_start_ms = transit.txn_start_ms
        self.txn_last_update_ms = transit.txn_last_update_ms
        self.client_transaction_version = transit.client_transaction_version
        self.state = to
        self.pending_state = None

    def abort_pending(self) -> None:
        """The write of the pending transition failed: nothing changes."""
        self.pending_state = None
