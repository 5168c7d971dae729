"""DelayedProduce: a Produce with acks=-1 waiting until every partition it wrote
is committed — the high watermark has reached the offset after its last
record — or until the request's timeout.

With one broker the ISR is the leader alone, so the HW reaches the append at
once and the operation completes on its first try; with followers it completes
when their fetches move the HW (the ReplicaManager checks the Produce purgatory
for the partition whenever its HW moves).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from pylog.common.topic_partition import TopicPartition
from pylog.errors import ErrorCode
from pylog.server.partition import Partition
from pylog.server.purgatory import DelayedOperation

__all__ = ["DelayedProduce", "ProducePartitionStatus", "ProduceResult"]


@dataclass
class ProduceResult:
    """One partition's answer to a Produce (the response's partition fields)."""

    error_code: int = ErrorCode.NONE
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    error_message: str | None = None
    #: KIP-467: (index in the batch, why) of each record the batch was refused for
    record_errors: list[tuple[int, str]] = field(default_factory=list)


@dataclass
class ProducePartitionStatus:
    """``required_offset``: the HW that commits the append (its last offset + 1)."""

    required_offset: int
    result: ProduceResult
    acks_pending: bool = True


class DelayedProduce(DelayedOperation):
    def __init__(
        self,
        delay_ms: int,
        statuses: dict[TopicPartition, ProducePartitionStatus],
        get_partition: Callable[[TopicPartition], Partition | None],
        callback: Callable[[dict[TopicPartition, ProduceResult]], None],
        not_hosted: Callable[[TopicPartition], int] | None = None,
    ) -> None:
        super().__init__(delay_ms)
        self.statuses = statuses
        self._get_partition = get_partition
        # The error for a partition gone while the acks were awaited (Kafka's
        # getPartitionOrError: KAFKA_STORAGE_ERROR when its directory failed,
        # NOT_LEADER_OR_FOLLOWER when moved away).
        self._not_hosted = not_hosted or (lambda _: int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
        self._callback = callback
        for status in statuses.values():
            # Partitions whose append failed have nothing to wait for.
            status.acks_pending = status.result.error_code == ErrorCode.NONE

    def try_complete(self) -> bool:
        for tp, status in self.statuses.items():
            if not status.acks_pending:
                continue
            partition = self._get_partition(tp)
            if partition is None:
                done, error = True, self._not_hosted(tp)
            else:
                done, error = partition.check_enough_replicas_reach_offset(status.required_offset)
            if done:
                status.acks_pending = False
                status.result.error_code = error
        if all(not s.acks_pending for s in self.statuses.values()):
            return self.force_complete()
        return False

    def on_expiration(self) -> None:
        pass  # on_complete answers the partitions still pending with REQUEST_TIMED_OUT

    def on_complete(self) -> None:
        for status in self.statuses.values():
            if status.acks_pending:
                status.acks_pending = False
                status.result.error_code = ErrorCode.REQUEST_TIMED_OUT
        self._callback({tp: s.result for tp, s in self.statuses.items()})
