"""Partition and Replica: one topic partition as the ReplicaManager sees it.

A Partition has a Replica per assigned broker, each with its log end offset
(LEO) and the last time it was caught up; the local replica's LEO is its Log's.
The partition's leader keeps the high watermark at the minimum LEO over the
in-sync replicas (ISR). Today the ISR is this broker alone, so the HW follows
the LEO on every append; the shape is the one followers will plug into
(``update_follower_fetch_state`` moves a follower's LEO and may move the HW).

Leader epochs start at 0 when a topic is created and are recorded in the log's
leader-epoch cache on the first append of each epoch (the Log does that), so
OffsetForLeaderEpoch and the fetch truncation checks have their answers.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from pylog.clock import now_ms
from pylog.errors import (
    ErrorCode,
    KafkaError,
    NotEnoughReplicasError,
    OffsetOutOfRangeError,
)
from pylog.log.checkpoint import TopicPartition
from pylog.log.fetch import FetchDataInfo
from pylog.log.leader_epoch import LeaderEpochFileCache
from pylog.log.log import AppendOrigin, FetchIsolation, Log, LogAppendInfo
from pylog.log.offset_metadata import LogOffsetMetadata
from pylog.metadata.store import INTERNAL_TOPICS

__all__ = [
    "EpochEndOffset",
    "LogReadInfo",
    "Partition",
    "Replica",
    "TimestampAndOffset",
]

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


class FencedLeaderEpochError(KafkaError):
    code, error_name, retriable = 74, "FENCED_LEADER_EPOCH", True


class UnknownLeaderEpochError(KafkaError):
    code, error_name, retriable = 75, "UNKNOWN_LEADER_EPOCH", True


class NotEnoughReplicasAfterAppendError(KafkaError):
    code, error_name, retriable = 20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND", True


@dataclass
class Replica:
    """A replica of the partition on broker ``broker_id`` as the leader tracks it."""

    broker_id: int
    log_end_offset: int = UNDEFINED_OFFSET
    last_caught_up_time_ms: int = 0
    log_start_offset: int = UNDEFINED_OFFSET


@dataclass(frozen=True, slots=True)
class LogReadInfo:
    """A read with the partition's offsets taken at the same moment."""

    fetched: FetchDataInfo
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    log_end_offset: int
    diverging_epoch: tuple[int, int] | None = None  # (epoch, end offset)


@dataclass(frozen=True, slots=True)
class TimestampAndOffset:
    timestamp: int
    offset: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class EpochEndOffset:
    error_code: int
    leader_epoch: int
    end_offset: int


class Partition:
    """One partition; this broker leads it (the single-broker case)."""

    def __init__(
        self,
        tp: TopicPartition,
        log: Log,
        *,
        topic_id: str,
        local_broker_id: int,
        replicas: list[int] | None = None,
        leader_epoch: int = 0,
        min_insync_replicas: int | None = None,
    ) -> None:
        self.tp = tp
        self.topic_id = topic_id
        self.log = log
        self.local_broker_id = local_broker_id
        assigned = replicas if replicas is not None else [local_broker_id]
        self._replicas = {b: Replica(b) for b in assigned}
        # Never behind the epochs the log already holds (a restart keeps them).
        latest = log.latest_epoch
        self.leader_epoch = max(leader_epoch, latest if latest is not None else 0)
        self.partition_epoch = 0
        self.leader_id: int | None = local_broker_id
        self.isr: set[int] = {local_broker_id}
        self._min_isr_override = min_insync_replicas
        self._lock = threading.RLock()
        local = self._replicas[local_broker_id]
        local.log_end_offset = log.log_end_offset
        local.last_caught_up_time_ms = now_ms()
        # The ISR is just this broker, so everything on its log is committed.
        self._maybe_increment_leader_hw()

    # ------------------------------------------------------------------ state

    @property
    def topic(self) -> str:
        return self.tp.topic

    @property
    def partition(self) -> int:
        return self.tp.partition

    @property
    def topic_is_internal(self) -> bool:
        return self.tp.topic in INTERNAL_TOPICS

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_broker_id

    @property
    def assigned_replicas(self) -> list[int]:
        return sorted(self._replicas)

    @property
    def in_sync_replicas(self) -> list[int]:
        return sorted(self.isr)

    def replica(self, broker_id: int) -> Replica | None:
        return self._replicas.get(broker_id)

    @property
    def min_insync_replicas(self) -> int:
        if self._min_isr_override is not None:
            return self._min_isr_override
        return self.log.config.min_insync_replicas

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def last_stable_offset(self) -> int:
        # No transactions yet: nothing is pending, so the LSO is the HW.
        return self.log.high_watermark

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    def _maybe_increment_leader_hw(self) -> bool:
        """HW = min LEO over the ISR. True if it moved (delayed operations may
        now complete)."""
        with self._lock:
            leos: list[LogOffsetMetadata] = []
            for b in self.isr:
                if b == self.local_broker_id:
                    leos.append(self.log.log_end_offset_metadata)
                else:
                    r = self._replicas.get(b)
                    leos.append(LogOffsetMetadata(r.log_end_offset if r else 0))
            new_hw = min(leos, key=lambda m: m.message_offset)
            return self.log.maybe_increment_high_watermark(new_hw) is not None

    def check_current_leader_epoch(self, current_leader_epoch: int) -> None:
        """FENCED_LEADER_EPOCH for an older epoch, UNKNOWN_LEADER_EPOCH for a newer
        one; -1 (the client does not know) always passes."""
        if current_leader_epoch == UNDEFINED_EPOCH:
            return
        if current_leader_epoch < self.leader_epoch:
            raise FencedLeaderEpochError(
                f"{self.tp}: leader epoch {current_leader_epoch} is older than "
                f"the current {self.leader_epoch}"
            )
        if current_leader_epoch > self.leader_epoch:
            raise UnknownLeaderEpochError(
                f"{self.tp}: leader epoch {current_leader_epoch} is newer than "
                f"the current {self.leader_epoch}"
            )

    # ------------------------------------------------------------------ append

    def append_records_to_leader(
        self,
        records: bytes | bytearray | memoryview,
        required_acks: int,
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> tuple[LogAppendInfo, bool]:
        """Append as the leader; returns the append info and whether the HW moved.
        NOT_ENOUGH_REPLICAS when acks=-1 and the ISR is smaller than
        min.insync.replicas (checked before writing, as Kafka does)."""
        with self._lock:
            isr_size = len(self.isr)
            min_isr = self.min_insync_replicas
            if required_acks == -1 and isr_size < min_isr:
                raise NotEnoughReplicasError(
                    f"the ISR of {self.tp} has {isr_size} replica(s), fewer than "
                    f"min.insync.replicas={min_isr}"
                )
            info = self.log.append_as_leader(records, self.leader_epoch, origin=origin)
            local = self._replicas[self.local_broker_id]
            local.log_end_offset = self.log.log_end_offset
            local.last_caught_up_time_ms = now_ms()
            moved = self._maybe_increment_leader_hw()
            return info, moved

    def check_enough_replicas_reach_offset(self, required_offset: int) -> tuple[bool, int]:
        """For acks=-1: (done, error code). Done once the HW reaches
        ``required_offset``; then NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR
        shrank below min.insync.replicas meanwhile."""
        if not self.is_leader:
            return True, ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self.log.high_watermark >= required_offset:
            if len(self.isr) < self.min_insync_replicas:
                return True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
            return True, ErrorCode.NONE
        return False, ErrorCode.NONE

    def update_follower_fetch_state(
        self, broker_id: int, log_end_offset: int, log_start_offset: int
    ) -> bool:
        """A follower fetched from ``log_end_offset``: record it as the follower's
        LEO; True if the HW moved. (Used once brokers replicate.)"""
        with self._lock:
            r = self._replicas.get(broker_id)
            if r is None:
                return False
            r.log_end_offset = log_end_offset
            r.log_start_offset = log_start_offset
            if log_end_offset >= self.log.log_end_offset:
                r.last_caught_up_time_ms = now_ms()
            return self._maybe_increment_leader_hw()

    # ------------------------------------------------------------------ read

    def read_records(
        self,
        fetch_offset: int,
        max_bytes: int,
        *,
        isolation: FetchIsolation,
        current_leader_epoch: int = UNDEFINED_EPOCH,
        last_fetched_epoch: int = UNDEFINED_EPOCH,
        min_one_message: bool = True,
    ) -> LogReadInfo:
        """Read from ``fetch_offset``. OffsetOutOfRangeError outside
        [log start, LEO]; leader-epoch errors as check_current_leader_epoch."""
        self.check_current_leader_epoch(current_leader_epoch)
        log = self.log
        hw = log.high_watermark
        log_start = log.log_start_offset
        leo = log.log_end_offset
        if last_fetched_epoch != UNDEFINED_EPOCH:
            diverging = self._diverging_epoch(fetch_offset, last_fetched_epoch, leo)
            if diverging is not None:
                return LogReadInfo(FetchDataInfo(LogOffsetMetadata(fetch_offset)), hw, hw,
                                   log_start, leo, diverging)  # fmt: skip
        fetched = log.read(fetch_offset, max_bytes, isolation, min_one_message)
        return LogReadInfo(fetched, hw, self.last_stable_offset, log_start, leo)

    def _diverging_epoch(
        self, fetch_offset: int, last_fetched_epoch: int, leo: int
    ) -> tuple[int, int] | None:
        cache = self.log.leader_epoch_cache
        if not isinstance(cache, LeaderEpochFileCache):
            return None
        epoch, end = cache.end_offset_for(last_fetched_epoch, leo)
        if epoch < last_fetched_epoch or end < fetch_offset:
            return epoch, end
        return None

    def fetch_offset_for_timestamp(
        self,
        timestamp: int,
        *,
        isolation: FetchIsolation | None,
        current_leader_epoch: int = UNDEFINED_EPOCH,
    ) -> TimestampAndOffset | None:
        """ListOffsets: -2 earliest (and -4 earliest local), -1 latest, -3 the
        record with the largest timestamp, else the first offset whose timestamp
        is at least ``timestamp``. ``isolation`` None (a replica asking) bounds
        by the LEO, else by the HW."""
        self.check_current_leader_epoch(current_leader_epoch)
        log = self.log
        if isolation is None:
            last_fetchable = log.log_end_offset
        elif isolation is FetchIsolation.TXN_COMMITTED:
            last_fetchable = self.last_stable_offset
        else:
            last_fetchable = log.high_watermark
        if timestamp in (-2, -4):
            start = log.log_start_offset
            return TimestampAndOffset(-1, start, self._epoch_for(start))
        if timestamp == -1:
            return TimestampAndOffset(-1, last_fetchable, self._epoch_for_end(last_fetchable))
        if timestamp == -3:
            return self._max_timestamp(last_fetchable)
        if timestamp < 0:
            return None
        found = log.fetch_offset_by_timestamp(timestamp)
        if found is None or found[1] >= last_fetchable:
            return None
        ts, offset = found
        return TimestampAndOffset(ts, offset, self._epoch_for(offset))

    def _max_timestamp(self, last_fetchable: int) -> TimestampAndOffset | None:
        best: tuple[int, int] | None = None
        start = self.log.log_start_offset
        for segment in self.log.segments:
            ts = segment.max_timestamp_so_far
            off = segment.offset_of_max_timestamp_so_far
            if ts < 0 or off < start or off >= last_fetchable:
                continue
            if best is None or ts > best[0]:
                best = (ts, off)
        if best is None:
            return TimestampAndOffset(-1, -1, -1)
        return TimestampAndOffset(best[0], best[1], self._epoch_for(best[1]))

    def _epoch_for(self, offset: int) -> int:
        cache = self.log.leader_epoch_cache
        if isinstance(cache, LeaderEpochFileCache):
            e = cache.epoch_for_offset(offset)
            if e is not None:
                return e
        return self.leader_epoch if offset >= self.log.log_end_offset else UNDEFINED_EPOCH

    def _epoch_for_end(self, offset: int) -> int:
        if offset >= self.log.log_end_offset:
            latest = self.log.latest_epoch
            return latest if latest is not None else self.leader_epoch
        return self._epoch_for(offset)

    def last_offset_for_leader_epoch(
        self, current_leader_epoch: int, leader_epoch: int
    ) -> EpochEndOffset:
        """OffsetForLeaderEpoch: the end offset of ``leader_epoch`` (the start of
        the next higher epoch; the LEO for the latest)."""
        try:
            self.check_current_leader_epoch(current_leader_epoch)
        except KafkaError as e:
            return EpochEndOffset(e.code, UNDEFINED_EPOCH, UNDEFINED_OFFSET)
        cache = self.log.leader_epoch_cache
        leo = self.log.log_end_offset
        if not isinstance(cache, LeaderEpochFileCache) or len(cache) == 0:
            if leader_epoch == self.leader_epoch:
                return EpochEndOffset(ErrorCode.NONE, leader_epoch, leo)
            return EpochEndOffset(ErrorCode.NONE, UNDEFINED_EPOCH, UNDEFINED_OFFSET)
        if leader_epoch == self.leader_epoch and (cache.latest_epoch or 0) < leader_epoch:
            # The epoch has no append yet: it ends at the LEO.
            return EpochEndOffset(ErrorCode.NONE, leader_epoch, leo)
        epoch, end = cache.end_offset_for(leader_epoch, leo)
        return EpochEndOffset(ErrorCode.NONE, epoch, end)

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start offset to ``offset`` (-1 = the HW);
        returns the new low watermark."""
        target = self.log.high_watermark if offset == -1 else offset
        if target < 0 or target > self.log.high_watermark:
            raise OffsetOutOfRangeError(
                f"cannot delete {self.tp} before {offset}: the high watermark is "
                f"{self.log.high_watermark}"
            )
        self.log.maybe_increment_log_start_offset(target)
        return self.log.log_start_offset

    def __repr__(self) -> str:
        return (
            f"Partition({self.tp}, epoch={self.leader_epoch}, isr={sorted(self.isr)}, "
            f"leo={self.log_end_offset}, hw={self.high_watermark})"
        )
