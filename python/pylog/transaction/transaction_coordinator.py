"""TransactionCoordinator: what a transactional producer asks of the broker
that coordinates its transactional id (Kafka's TransactionCoordinator.scala):
InitProducerId, AddPartitionsToTxn (and its broker-side verification,
KIP-890 part 1), AddOffsetsToTxn, EndTxn, DescribeTransactions and
ListTransactions, and the timeouts.

* InitProducerId: a new id gets a producer id (pylog's ProducerIdManager:
  cluster-wide blocks, Kafka's /latest_producer_id_block) at epoch 0; a
  known idle id gets its epoch bumped (a new producer id once the epochs are
  used up), which fences the producer that held the old one; an id with an
  Ongoing transaction has it aborted under a bumped epoch (PrepareEpochFence
  -> PrepareAbort) and the caller is answered CONCURRENT_TRANSACTIONS, to
  retry once the abort completed. KIP-360: a producer naming its producer id
  and epoch recovers from a fatal error without being fenced.
* EndTxn writes PrepareCommit / PrepareAbort, answers, and hands the
  transaction to the TransactionMarkerChannelManager; once every partition
  has its marker, CompleteCommit / CompleteAbort is written.
* Every ``transaction.abort.timed.out.transaction.cleanup.interval.ms`` the
  Ongoing transactions past their timeout are aborted under a bumped epoch
  (their producer is fenced); every
  ``transaction.remove.expired.transaction.cleanup.interval.ms`` the ids idle
  past ``transactional.id.expiration.ms`` are removed.

Transactions v2 (KIP-890 part 2), for producers that see ``transaction.version``
2 finalized: a partition leader adds the partition when the producer's
first batch of a transaction reaches it (AddPartitionsToTxn v5 without
``verify_only``), the group coordinator the offsets partition at
TxnOffsetCommit v5; every EndTxn (v5) bumps the producer epoch, the markers
carry the bumped epoch (a late batch of the old transaction is refused), and
the answer names the producer id and epoch to go on with: a new producer id
at epoch 0 when the old one's epochs ran out. The client's version is kept
per transactional id (``client_transaction_version``, written with the
state): a v1 producer beside a v2 one keeps the v1 rules.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from pylog.common.topic_partition import TopicPartition
from pylog.common.transaction_version import TransactionVersion
from pylog.common.utils.time import Clock, now_ms
from pylog.errors import ErrorCode
from pylog.logsafe import quoted
from pylog.transaction.transaction_marker_channel_manager import (
    PendingTxnMarkers,
    TransactionMarkerChannelManager,
)
from pylog.transaction.transaction_metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
)
from pylog.transaction.transaction_state_manager import (
    TRANSACTION_STATE_TOPIC,
    TransactionStateManager,
    TxnCoordinatorError,
)

__all__ = ["EndTxnResult", "InitProducerIdResult", "TransactionCoordinator", "TxnDescription"]

_log = logging.getLogger("pylog.transaction")

_S = TransactionState
#: The last epoch a producer may use (Short.MaxValue - 1): an EndTxn under
#: transactions v2 at it moves the producer to a new producer id.
_LAST_EPOCH = 32766
#: Kafka's TRANSACTION_ABORTABLE (KIP-890): a partition the verification
#: does not find in the transaction.
TRANSACTION_ABORTABLE = 120


@dataclass(frozen=True)
class InitProducerIdResult:
    error_code: int
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True)
class EndTxnResult:
    """EndTxn's answer: v5 names the producer id and epoch to go on with."""

    error_code: int
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True)
class TxnDescription:
    """One transactional id as DescribeTransactions / ListTransactions show it."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str
    timeout_ms: int
    start_ms: int
    partitions: tuple[TopicPartition, ...]


class TransactionCoordinator:
    def __init__(
        self,
        state_manager: TransactionStateManager,
        generate_producer_id: Callable[[], int],
        *,
        abort_interval_ms: int,
        expiration_interval_ms: int,
        clock: Clock = now_ms,
    ) -> None:
        self.txn_manager = state_manager
        #: A blocking call (a block of ids may be reserved in the store):
        #: run on a worker thread.
        self.generate_producer_id = generate_producer_id
        self.abort_interval_ms = abort_interval_ms
        self.expiration_interval_ms = expiration_interval_ms
        self.clock = clock
        self.markers: TransactionMarkerChannelManager | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self.active = False
        state_manager.on_loaded_prepared = self._resend_markers
        state_manager.on_unloaded = self._drop_markers

    def attach_marker_channel(self, markers: TransactionMarkerChannelManager) -> None:
        self.markers = markers

    # ------------------------------------------------------------ lifecycle

    def startup(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks.extend(self.txn_manager.start_loading())
        self._tasks.append(
            loop.create_task(self._every(self.abort_interval_ms, self.abort_timed_out_transactions))
        )
        self._tasks.append(
            loop.create_task(
                self._every(
                    self.expiration_interval_ms, self.txn_manager.remove_expired_transactional_ids
                )
            )
        )
        self.active = True

    async def _every(self, interval_ms: int, job: Callable[[], object]) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                result = job()
                if asyncio.iscoroutine(result):
                    await result
            except asyncio.CancelledError:
                raise
            except Exception:
                _log.exception("transaction coordinator task failed")

    async def shutdown(self) -> None:
        self.active = False
        for t in self._tasks:
            t.cancel()
        self._tasks.clear()
        if self.markers is not None:
            await self.markers.shutdown()

    def on_election(self, partition: int, coordinator_epoch: int) -> asyncio.Task[None]:
        """This broker leads ``__transaction_state``-``partition``: load it."""
        self._drop_markers(partition)
        return asyncio.get_running_loop().create_task(
            self.txn_manager.on_election(partition, coordinator_epoch)
        )

    def on_resignation(self, partition: int, coordinator_epoch: int | None = None) -> None:
        self.txn_manager.on_resignation(partition, coordinator_epoch)
        self._drop_markers(partition)

    def _drop_markers(self, partition: int) -> None:
        if self.markers is not None:
            self.markers.remove_markers_for_txn_topic_partition(partition)

    # ------------------------------------------------------------ InitProducerId

    async def _new_producer_id(self) -> int:
        return await asyncio.to_thread(self.generate_producer_id)

    async def handle_init_producer_id(
        self,
        transactional_id: str,
        timeout_ms: int,
        expected: tuple[int, int] | None = None,
    ) -> InitProducerIdResult:
        """``expected``: KIP-360's (producer id, epoch) the producer had."""
        if transactional_id == "":
            return InitProducerIdResult(ErrorCode.INVALID_REQUEST)
        if not self.txn_manager.validate_transaction_timeout(timeout_ms):
            return InitProducerIdResult(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        try:
            coordinator_epoch, metadata = self.txn_manager.get_transaction_state(transactional_id)
            if metadata is None:
                pid = await self._new_producer_id()
                coordinator_epoch, metadata = self.txn_manager.put_transaction_state_if_not_exists(
                    TransactionMetadata(
                        transactional_id,
                        pid,
                        NO_PRODUCER_EPOCH,
                        timeout_ms,
                        _S.EMPTY,
                        txn_last_update_ms=self.clock(),
                    )
                )
        except TxnCoordinatorError as e:
            return InitProducerIdResult(e.code)
        prepared = await self._prepare_init_producer_id(metadata, timeout_ms, expected)
        if isinstance(prepared, int):
            return InitProducerIdResult(prepared)
        if prepared.state == _S.PREPARE_EPOCH_FENCE:
            # The ongoing transaction is aborted first; the producer retries.
            ended = await self._end_transaction(
                transactional_id,
                prepared.producer_id,
                prepared.producer_epoch,
                False,
                from_client=False,
                client_version=self.txn_manager.transaction_version(),
            )
            return InitProducerIdResult(ended.error_code or ErrorCode.CONCURRENT_TRANSACTIONS)
        code = await self.txn_manager.append_transaction_to_log(
            transactional_id, coordinator_epoch, prepared
        )
        if code != ErrorCode.NONE:
            return InitProducerIdResult(code)
        _log.info(
            "initialized transactional id %s with producer id %d and epoch %d on %s-%d",
            quoted(transactional_id),
            prepared.producer_id,
            prepared.producer_epoch,
            TRANSACTION_STATE_TOPIC,
            self.txn_manager.partition_for(transactional_id),
        )
        return InitProducerIdResult(ErrorCode.NONE, prepared.producer_id, prepared.producer_epoch)

    async def _prepare_init_producer_id(
        self,
        m: TransactionMetadata,
        timeout_ms: int,
        expected: tuple[int, int] | None,
    ) -> TxnTransitMetadata | int:
        def valid_producer(pid: int, epoch: int) -> bool:
            # A producer naming its id and epoch is not fenced when the id was
            # just made, when it names the current producer id (its epoch is
            # checked by the bump), or when it names the previous one with an
            # exhausted epoch (a retry of a rotation it never heard of).
            return (
                m.producer_epoch == NO_PRODUCER_EPOCH
                or pid == m.producer_id
                or (pid == m.previous_producer_id and epoch >= 32766)
            )

        if m.pending_transition_in_progress:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if expected is not None and not valid_producer(*expected):
            return ErrorCode.PRODUCER_FENCED
        if m.state in (_S.PREPARE_ABORT, _S.PREPARE_COMMIT):
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if m.state in (_S.COMPLETE_ABORT, _S.COMPLETE_COMMIT, _S.EMPTY):
            if m.producer_epoch_exhausted and (expected is None or expected[1] == m.producer_epoch):
                pid = await self._new_producer_id()
                if m.pending_transition_in_progress:  # changed while the id was made
                    return ErrorCode.CONCURRENT_TRANSACTIONS
                return m.prepare_producer_id_rotation(
                    pid, timeout_ms, self.clock(), expected is not None
                )
            return m.prepare_increment_producer_epoch(
                timeout_ms, None if expected is None else expected[1], self.clock()
            )
        if m.state == _S.ONGOING:
            return m.prepare_fence_producer_epoch()
        _log.error(
            "transactional id %s found in state %s", quoted(m.transactional_id), m.state.kafka_name
        )
        return ErrorCode.UNKNOWN_SERVER_ERROR

    # ------------------------------------------------------------ AddPartitionsToTxn

    def _owned(self, transactional_id: str) -> tuple[int, TransactionMetadata] | int:
        try:
            epoch, m = self.txn_manager.get_transaction_state(transactional_id)
        except TxnCoordinatorError as e:
            return e.code
        if m is None:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        return epoch, m

    async def handle_add_partitions_to_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: set[TopicPartition],
        client_version: TransactionVersion = TransactionVersion.TV_0,
    ) -> int:
        """AddPartitionsToTxn / AddOffsetsToTxn of a v1 producer, or a
        partition leader's (or group coordinator's) add for a v2 one
        (``client_version`` 2: KIP-890 part 2's implicit add)."""
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        owned = self._owned(transactional_id)
        if isinstance(owned, int):
            return owned
        coordinator_epoch, m = owned
        # A transition in flight is answered first, whoever asks (Kafka 4's
        # handleAddPartitionsToTransaction): the asker backs off and retries.
        if m.pending_transition_in_progress:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if m.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if m.producer_epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED
        if m.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if m.state == _S.ONGOING and partitions <= m.partitions:
            return ErrorCode.NONE  # already there: nothing to write
        transit = m.prepare_add_partitions(partitions, self.clock(), client_version)
        return await self.txn_manager.append_transaction_to_log(
            transactional_id, coordinator_epoch, transit
        )

    def handle_verify_partitions_in_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> dict[TopicPartition, int]:
        """KIP-890 part 1: a leader asks, before appending a transactional
        batch, whether its partition is in the producer's transaction."""
        parts = list(partitions)
        if not transactional_id:
            return dict.fromkeys(parts, ErrorCode.INVALID_REQUEST)
        owned = self._owned(transactional_id)
        if isinstance(owned, int):
            return dict.fromkeys(parts, owned)
        _, m = owned
        if m.producer_id != producer_id:
            return dict.fromkeys(parts, ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if m.producer_epoch != producer_epoch:
            return dict.fromkeys(parts, ErrorCode.PRODUCER_FENCED)
        if m.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
            return dict.fromkeys(parts, ErrorCode.CONCURRENT_TRANSACTIONS)
        return {tp: ErrorCode.NONE if tp in m.partitions else TRANSACTION_ABORTABLE for tp in parts}

    # ------------------------------------------------------------ EndTxn

    async def handle_end_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        client_version: TransactionVersion = TransactionVersion.TV_0,
    ) -> EndTxnResult:
        """``client_version``: 2 for EndTxn v5 (Kafka's clientTransactionVersion)."""
        return await self._end_transaction(
            transactional_id,
            producer_id,
            producer_epoch,
            commit,
            from_client=True,
            client_version=client_version,
        )

    async def _end_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        *,
        from_client: bool,
        client_version: TransactionVersion,
    ) -> EndTxnResult:
        if not transactional_id:
            return EndTxnResult(ErrorCode.INVALID_REQUEST)
        owned = self._owned(transactional_id)
        if isinstance(owned, int):
            return EndTxnResult(owned)
        coordinator_epoch, m = owned
        fencing = m.pending_state == _S.PREPARE_EPOCH_FENCE
        # Under transactions v2 the epoch moved on at the last EndTxn, so the
        # same epoch no longer says "a retry": a retry names the epoch before
        # the bump (or, past the last epoch, the previous producer id).
        v2 = not fencing and m.client_transaction_version.supports_epoch_bump
        retry_on_bump = v2 and m.producer_epoch == producer_epoch + 1
        retry_on_overflow = (
            v2
            and m.previous_producer_id == producer_id
            and producer_epoch == _LAST_EPOCH
            and m.producer_epoch == 0
        )
        state = m.state
        # An EndTxn v5 that meets a transition in flight (the last EndTxn's
        # markers still being written) is CONCURRENT_TRANSACTIONS before its
        # producer id and epoch are looked at, as Kafka 4's endTransaction
        # answers: the producer retries and, once the transaction is
        # complete, its abort at the new epoch is valid. Judged by the epoch,
        # PrepareCommit would fence it (only a retry names an epoch there).
        if client_version.supports_epoch_bump and m.pending_transition_in_progress and not fencing:
            return EndTxnResult(ErrorCode.CONCURRENT_TRANSACTIONS)
        if v2:
            if state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
                valid_epoch = retry_on_bump
            elif state in (_S.COMPLETE_COMMIT, _S.COMPLETE_ABORT):
                valid_epoch = (
                    retry_on_bump or retry_on_overflow or producer_epoch == m.producer_epoch
                )
            else:
                valid_epoch = producer_epoch == m.producer_epoch
        else:
            valid_epoch = (not from_client or producer_epoch == m.producer_epoch) and (
                producer_epoch >= m.producer_epoch
            )
        if m.producer_id != producer_id and not retry_on_overflow:
            return EndTxnResult(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if not valid_epoch:
            return EndTxnResult(ErrorCode.PRODUCER_FENCED)
        if m.pending_transition_in_progress and not fencing:
            return EndTxnResult(ErrorCode.CONCURRENT_TRANSACTIONS)
        # A retry of an EndTxn that completed is answered with what it got.
        done = EndTxnResult(ErrorCode.NONE, m.producer_id, m.producer_epoch)
        empty_abort = (
            not commit
            and client_version.supports_epoch_bump
            and producer_epoch == m.producer_epoch
            and not fencing
        )
        if state == _S.ONGOING or (
            empty_abort and state in (_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT)
        ):
            if fencing:
                if commit:
                    m.abort_pending()
                    return EndTxnResult(ErrorCode.INVALID_TXN_STATE)
                # The fence's bumped epoch takes effect now: the old producer
                # is refused from here on, whatever becomes of the write.
                m.pending_state = None
                m.producer_epoch = producer_epoch
                m.last_producer_epoch = NO_PRODUCER_EPOCH
            next_pid = NO_PRODUCER_ID
            if client_version.supports_epoch_bump and not fencing and m.producer_epoch_exhausted:
                # The bump takes this producer id's last epoch: the next one
                # is made now and handed out with the answer.
                next_pid = await self._new_producer_id()
                if m.pending_transition_in_progress:
                    return EndTxnResult(ErrorCode.CONCURRENT_TRANSACTIONS)
            transit = m.prepare_abort_or_commit(
                _S.PREPARE_COMMIT if commit else _S.PREPARE_ABORT,
                self.clock(),
                client_version,
                next_producer_id=next_pid,
                no_partition_added=state != _S.ONGOING,
            )
        elif v2 and not (retry_on_bump or retry_on_overflow):
            # A completed transaction at the current epoch under v2: not a
            # retry but a commit of nothing (an abort of nothing went above).
            return EndTxnResult(ErrorCode.INVALID_TXN_STATE)
        elif state == _S.COMPLETE_COMMIT:
            return done if commit else EndTxnResult(ErrorCode.INVALID_TXN_STATE)
        elif state == _S.COMPLETE_ABORT:
            return done if not commit else EndTxnResult(ErrorCode.INVALID_TXN_STATE)
        elif state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
            same = commit == (state == _S.PREPARE_COMMIT)
            return EndTxnResult(
                ErrorCode.CONCURRENT_TRANSACTIONS if same else ErrorCode.INVALID_TXN_STATE
            )
        else:  # Empty (Dead and PrepareEpochFence are never a current state)
            if fencing:
                m.abort_pending()
            return EndTxnResult(ErrorCode.INVALID_TXN_STATE)
        code = await self.txn_manager.append_transaction_to_log(
            transactional_id, coordinator_epoch, transit
        )
        if code != ErrorCode.NONE:
            if fencing:
                m.has_failed_epoch_fence = True
            return EndTxnResult(code)
        # Written: the producer is answered now, the markers go out. Past the
        # last epoch the producer goes on with the next producer id at 0.
        if m.next_producer_id != NO_PRODUCER_ID:
            answer = EndTxnResult(ErrorCode.NONE, m.next_producer_id, 0)
        else:
            answer = EndTxnResult(ErrorCode.NONE, m.producer_id, m.producer_epoch)
        self._send_markers(coordinator_epoch, m)
        return answer

    def _send_markers(self, coordinator_epoch: int, m: TransactionMetadata) -> None:
        """``m`` is in PrepareCommit / PrepareAbort: its markers go out, and
        its completion is pending from now (requests meanwhile are answered
        CONCURRENT_TRANSACTIONS)."""
        complete = m.prepare_complete(self.clock())
        if self.markers is None:
            m.abort_pending()
            return
        self.markers.add_txn_markers_to_send(
            coordinator_epoch,
            m.state == _S.PREPARE_COMMIT,
            m,
            complete,
            self.txn_manager.partition_for(m.transactional_id),
        )

    def _resend_markers(self, coordinator_epoch: int, m: TransactionMetadata) -> None:
        """A failover's load found ``m`` prepared but not complete."""
        _log.info(
            "resending the %s markers of %s (producer %d epoch %d) to %d partition(s)",
            "COMMIT" if m.state == _S.PREPARE_COMMIT else "ABORT",
            quoted(m.transactional_id),
            m.producer_id,
            m.producer_epoch,
            len(m.partitions),
        )
        self._send_markers(coordinator_epoch, m)

    async def complete_transaction(self, entry: PendingTxnMarkers) -> None:
        """Every marker of ``entry`` is written: CompleteCommit / CompleteAbort
        (retried while the log is unavailable; dropped when this broker no
        longer coordinates the id at that epoch)."""
        while True:
            try:
                epoch, m = self.txn_manager.get_transaction_state(entry.transactional_id)
            except TxnCoordinatorError as e:
                _log.info(
                    "not completing %s: %s", quoted(entry.transactional_id), ErrorCode(e.code).name
                )
                return
            if m is None or epoch != entry.coordinator_epoch:
                return
            transit = entry.complete
            if m.pending_state != transit.state:
                if m.pending_state is not None:
                    return
                m.pending_state = transit.state
            code = await self.txn_manager.append_transaction_to_log(
                entry.transactional_id, epoch, transit
            )
            if code == ErrorCode.NONE:
                _log.debug(
                    "completed %s as %s", quoted(entry.transactional_id), transit.state.kafka_name
                )
                return
            if code != ErrorCode.COORDINATOR_NOT_AVAILABLE:
                _log.warning(
                    "completing %s failed: %s", quoted(entry.transactional_id), ErrorCode(code).name
                )
                return
            m.pending_state = transit.state  # held while waiting for the log
            await asyncio.sleep(0.1)

    # ------------------------------------------------------------ timeouts

    async def abort_timed_out_transactions(self) -> None:
        for txn_id, pid, _epoch in self.txn_manager.timed_out_transactions():
            owned = self._owned(txn_id)
            if isinstance(owned, int):
                continue
            _, m = owned
            if m.producer_id != pid or m.pending_transition_in_progress:
                continue
            transit = m.prepare_fence_producer_epoch()
            ended = await self._end_transaction(
                txn_id,
                transit.producer_id,
                transit.producer_epoch,
                False,
                from_client=False,
                client_version=self.txn_manager.transaction_version(),
            )
            if ended.error_code == ErrorCode.NONE:
                _log.info(
                    "aborting the transaction of %s: past its timeout of %d ms",
                    quoted(txn_id),
                    m.txn_timeout_ms,
                )

    # ------------------------------------------------------------ describing

    def handle_describe_transaction(
        self, transactional_id: str
    ) -> tuple[int, TxnDescription | None]:
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST, None
        try:
            _, m = self.txn_manager.get_transaction_state(transactional_id)
        except TxnCoordinatorError as e:
            return e.code, None
        if m is None or m.state == _S.DEAD:
            return ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, None
        return ErrorCode.NONE, _describe(m)

    def handle_list_transactions(
        self, producer_ids: set[int], states: set[str], duration_ms: int
    ) -> tuple[int, list[str], list[TxnDescription]]:
        """(error, unknown state filters, the transactions)."""
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, [], []
        unknown = sorted(s for s in states if TransactionState.from_name(s) is None)
        wanted = {TransactionState.from_name(s) for s in states} - {None}
        now = self.clock()
        out = []
        for m in self.txn_manager.all_transactions():
            if producer_ids and m.producer_id not in producer_ids:
                continue
            if states and m.state not in wanted:
                continue
            if duration_ms >= 0 and (m.txn_start_ms < 0 or now - m.txn_start_ms < duration_ms):
                continue
            if m.state == _S.DEAD:
                continue
            out.append(_describe(m))
        if states and not wanted:
            return ErrorCode.NONE, unknown, []
        return ErrorCode.NONE, unknown, out


def _describe(m: TransactionMetadata) -> TxnDescription:
    return TxnDescription(
        m.transactional_id,
        m.producer_id,
        m.producer_epoch,
        m.state.kafka_name,
        m.txn_timeout_ms,
        m.txn_start_ms,
        tuple(sorted(m.partitions)),
    )
