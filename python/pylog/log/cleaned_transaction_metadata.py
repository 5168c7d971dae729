"""CleanedTransactionMetadata: what compaction keeps of transactions.

Kafka's ``CleanedTransactionMetadata`` (LogCleaner). The cleaner reads a
range of batches in offset order, knowing the aborted transactions that
overlap it (from the ``.txnindex`` files). This decides, batch by batch:

* a transactional data batch of a transaction that was aborted is dropped
  whole (its records were never visible to read_committed consumers); the
  offset map skips it too, so an aborted record never hides a committed one
  of the same key;
* an ABORT marker stays while some batch of its transaction was still met in
  this pass (its ``.txnindex`` entry then goes to the cleaned segment); a
  COMMIT marker stays while a batch of its transaction was met; once no batch
  of the transaction remains, the marker may go once its delete horizon has
  passed (the caller decides the horizon).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from pylog.log.transaction_index import AbortedTxn

__all__ = ["CleanedTransactionMetadata"]


class _OngoingAborted:
    __slots__ = ("met_batch", "txn")

    def __init__(self, txn: AbortedTxn) -> None:
        self.txn = txn
        self.met_batch = False


class CleanedTransactionMetadata:
    """Per clean of a range: feed it every batch in offset order."""

    def __init__(self, aborted: Iterable[AbortedTxn] = ()) -> None:
        self._pending: deque[AbortedTxn] = deque()
        self._ongoing_aborted: dict[int, _OngoingAborted] = {}
        self._ongoing_committed: set[int] = set()
        self._seen: set[tuple[int, int]] = set()  # (producer id, first offset) added
        #: The aborted transactions whose markers stay: the cleaned segment's
        #: ``.txnindex`` entries, in marker order.
        self.cleaned_index: list[AbortedTxn] = []
        self.add_aborted_transactions(aborted)

    def add_aborted_transactions(self, aborted: Iterable[AbortedTxn]) -> None:
        # The ranges of neighbouring segments overlap: each transaction once.
        fresh = [t for t in aborted if (t.producer_id, t.first_offset) not in self._seen]
        self._seen.update((t.producer_id, t.first_offset) for t in fresh)
        if fresh:
            merged = sorted([*self._pending, *fresh], key=lambda t: t.first_offset)
            self._pending = deque(merged)

    def _consume_up_to(self, offset: int) -> None:
        while self._pending and self._pending[0].first_offset <= offset:
            t = self._pending.popleft()
            self._ongoing_aborted[t.producer_id] = _OngoingAborted(t)

    def on_batch_read(self, producer_id: int, last_offset: int, is_transactional: bool) -> bool:
        """A data batch: True when it belongs to an aborted transaction (drop it)."""
        self._consume_up_to(last_offset)
        if not is_transactional:
            return False
        ongoing = self._ongoing_aborted.get(producer_id)
        if ongoing is not None:
            ongoing.met_batch = True
            return True
        self._ongoing_committed.add(producer_id)
        return False

    def on_control_batch_read(
        self, producer_id: int, last_offset: int, is_abort: bool | None
    ) -> bool:
        """A control batch (``is_abort`` None: not an end marker): True when no
        batch of its transaction remains, so the marker may go after its
        delete horizon."""
        self._consume_up_to(last_offset)
        if is_abort is None:
            return False
        if is_abort:
            ongoing = self._ongoing_aborted.pop(producer_id, None)
            if ongoing is not None and ongoing.met_batch:
                self.cleaned_index.append(ongoing.txn)
                return False
            return True
        if producer_id in self._ongoing_committed:
            self._ongoing_committed.discard(producer_id)
            return False
        return True
