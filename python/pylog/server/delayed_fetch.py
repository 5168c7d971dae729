"""DelayedFetch: a Fetch that found fewer than ``min_bytes`` waits here until
enough bytes arrive or ``max_wait_ms`` passes, then reads again and answers.

It completes early when, for a partition it reads (Kafka's cases):
* the partition is gone, or this broker no longer leads it, or its leader epoch
  moved past the one the request names;
* the readable end (HW for consumers, LEO for followers) moved to an older
  segment than the fetch position (the log was truncated) or the fetch
  position is on an older segment than the end (a roll happened: the bytes
  between are not cheaply counted, so the fetch is answered);
* the readable end is the last stable offset for a read_committed fetch: a
  marker that completes a transaction and reaches the HW moves it;
* the bytes between each fetch position and the readable end, each capped by
  the partition's max bytes, add up to ``min_bytes``.

The ReplicaManager retries the Fetch purgatory for a partition after every
append to it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from pylog.common.topic_partition import TopicPartition
from pylog.errors import ErrorCode, KafkaError
from pylog.log.log import FetchIsolation
from pylog.log.offset_metadata import LogOffsetMetadata
from pylog.log.transaction_index import AbortedTxn
from pylog.records import FileRecords
from pylog.server.purgatory import DelayedOperation

if TYPE_CHECKING:
    from pylog.server.replica_manager import ReplicaManager

__all__ = [
    "DelayedFetch",
    "FetchParams",
    "FetchPartitionRequest",
    "FetchPartitionResult",
]


# The request-side records are NamedTuples, not frozen dataclasses: as
# immutable, and built in a fifth of the time (one per Fetch and per partition).
class FetchParams(NamedTuple):
    """What a Fetch request asks as a whole. ``replica_id`` >= 0 is a follower."""

    replica_id: int = -1
    max_wait_ms: int = 0
    min_bytes: int = 1
    max_bytes: int = 0x7FFFFFFF
    isolation: FetchIsolation = FetchIsolation.HIGH_WATERMARK
    hard_max_bytes_limit: bool = False  # Fetch v0-2: no oversized first batch

    @property
    def is_from_follower(self) -> bool:
        return self.replica_id >= 0


class FetchPartitionRequest(NamedTuple):
    tp: TopicPartition
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    log_start_offset: int = -1  # a follower's


@dataclass(slots=True)
class FetchPartitionResult:
    """One partition's answer; ``records`` is a zero-copy segment slice."""

    error_code: int = ErrorCode.NONE
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: FileRecords | bytes = b""
    diverging_epoch: tuple[int, int] | None = None
    fetch_offset_metadata: LogOffsetMetadata | None = None
    leader_epoch: int = -1
    aborted_transactions: list[AbortedTxn] | None = None  # read_committed reads

    @property
    def size(self) -> int:
        return len(self.records)


class DelayedFetch(DelayedOperation):
    def __init__(
        self,
        delay_ms: int,
        params: FetchParams,
        requests: Sequence[tuple[FetchPartitionRequest, LogOffsetMetadata | None]],
        replica_manager: ReplicaManager,
        callback: Callable[[list[FetchPartitionResult]], None],
    ) -> None:
        super().__init__(delay_ms)
        self.params = params
        self.requests = list(requests)
        self._rm = replica_manager
        self._callback = callback

    def try_complete(self) -> bool:
        accumulated = 0
        for req, start in self.requests:
            if start is None:
                continue
            partition = self._rm.partition(req.tp)
            if partition is None or not partition.is_leader:
                return self.force_complete()
            try:
                partition.check_current_leader_epoch(req.current_leader_epoch)
            except KafkaError:
                return self.force_complete()
            log = partition.log
            if self.params.isolation is FetchIsolation.LOG_END:
                end = log.log_end_offset_metadata
            elif self.params.isolation is FetchIsolation.TXN_COMMITTED:
                end = log.last_stable_offset_metadata  # a marker below the HW moves it
            else:
                end = log.high_watermark_metadata
            if end.message_offset == start.message_offset:
                continue
            if start.message_offset_only or end.message_offset_only:
                if end.message_offset > start.message_offset:
                    return self.force_complete()
                continue
            if end.on_older_segment(start):
                return self.force_complete()  # truncated under the fetch position
            if start.on_older_segment(end):
                return self.force_complete()  # a new segment since the read
            if start.message_offset < end.message_offset:
                accumulated += min(end.position_diff(start), req.partition_max_bytes)
        if accumulated >= self.params.min_bytes:
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        results = self._rm.read_from_local_log(self.params, [r for r, _ in self.requests])
        self._callback(results)
