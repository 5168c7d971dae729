"""TransactionMarkerChannelManager's routing when a partition has no leader."""

from __future__ import annotations

import asyncio

from pylog.common.topic_partition import TopicPartition
from pylog.transaction.transaction_marker_channel_manager import (
    BrokerAddress,
    PendingTxnMarkers,
    TransactionMarkerChannelManager,
)
from pylog.transaction.transaction_metadata import (
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
)

TP = TopicPartition("t", 0)


def test_a_partition_without_a_leader_is_retried_until_it_has_one() -> None:
    """A marker whose partition has no leader waits in the unroutable list and
    is routed again after each back-off for as long as it takes. Here the
    partition stays leaderless for five attempts, then its topic is gone (a
    deleted topic needs no marker) and the transaction completes. Before the
    fix the second attempt scheduled no third one and the transaction hung in
    PrepareCommit (the hour soak's txn producer, after a paused leader)."""
    asked: list[str] = []
    completed: list[PendingTxnMarkers] = []

    def locate(tp: TopicPartition) -> BrokerAddress | None:
        asked.append(tp.topic)
        return None

    def topic_exists(topic: str) -> bool:
        return len(asked) < 5

    async def complete(entry: PendingTxnMarkers) -> None:
        completed.append(entry)

    async def main() -> None:
        m = TransactionMetadata("tx", 7, 3, 60_000, TransactionState.PREPARE_COMMIT,
                                partitions={TP})  # fmt: skip
        done = TxnTransitMetadata(7, -1, -1, 3, -1, 60_000, TransactionState.COMPLETE_COMMIT,
                                  frozenset(), 0, 0)  # fmt: skip
        mgr = TransactionMarkerChannelManager(0, locate, topic_exists, complete, backoff_s=0.01)
        mgr.add_txn_markers_to_send(0, True, m, done, txn_partition=1)
        for _ in range(500):
            if completed:
                break
            await asyncio.sleep(0.01)
        await mgr.shutdown()

    asyncio.run(main())
    assert len(asked) == 5
    assert [(e.transactional_id, e.commit) for e in completed] == [("tx", True)]
