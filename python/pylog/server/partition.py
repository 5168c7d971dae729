"""Partition and Replica: one topic partition as the ReplicaManager sees it.

A Partition has a Replica per assigned broker, each with its log end offset
(LEO) and the last time it was caught up; the local replica's LEO is its Log's.
The partition's leader keeps the high watermark at the minimum LEO over the
in-sync replicas (ISR).

Roles come from the controller's LeaderAndIsr (``make_leader`` /
``make_follower``, Kafka's Partition.makeLeader / makeFollower); a partition
made from the metadata store alone (the single broker) leads with an ISR of
itself. As leader, each follower Fetch moves that follower's LEO
(``update_follower_fetch_state``), may expand the ISR (the follower reached
the HW and the current leader epoch's start) and may move the HW; the
ReplicaManager's ISR-expiration task shrinks the ISR of followers not caught
up within ``replica.lag.time.max.ms`` (``maybe_shrink_isr``). An ISR change
goes through the AlterIsrManager (a conditional write of the partition state
in ZooKeeper) and is applied only once written. Only the leader takes
appends and answers reads: a follower answers NOT_LEADER_OR_FOLLOWER, and its
log grows by ``append_records_to_follower`` (the leader's batches, byte for
byte).

Leader epochs start at 0 when a topic is created and are recorded in the
log's leader-epoch cache when a broker becomes leader and on the first append
of each epoch, so OffsetForLeaderEpoch and the fetch truncation checks have
their answers.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from pylog.common.topic_partition import TopicPartition
from pylog.common.utils.time import now_ms
from pylog.errors import (
    ErrorCode,
    KafkaError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    UnexpectedAppendOffsetError,
)
from pylog.log.fetch import FetchDataInfo
from pylog.log.leader_epoch import LeaderEpochFileCache
from pylog.log.log import AppendOrigin, FetchIsolation, Log, LogAppendInfo
from pylog.log.offset_metadata import LogOffsetMetadata
from pylog.log.verification_guard import VerificationGuard
from pylog.metadata.store import INTERNAL_TOPICS
from pylog.server.alter_isr_manager import AlterIsrManager, LeaderAndIsr

__all__ = [
    "EpochEndOffset",
    "LogReadInfo",
    "Partition",
    "PartitionState",
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
    # The leader's LEO and the time at this follower's previous fetch: a fetch
    # reaching that LEO shows the follower was caught up then (Kafka's
    # lastFetchLeaderLogEndOffset / lastFetchTimeMs).
    last_fetch_leader_leo: int = UNDEFINED_OFFSET
    last_fetch_time_ms: int = 0


@dataclass(frozen=True, slots=True)
class PartitionState:
    """One partition of a LeaderAndIsr request (Kafka's LeaderAndIsrPartitionState)."""

    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int
    replicas: tuple[int, ...]
    is_new: bool = False


#: ISR changes a partition reports to its owner: "shrink" or "expand".
IsrListener = Callable[["Partition", str], None]
#: Hears that a follower's log was truncated: (partition, offset, emptied and
#: restarted there); a move of the log to another directory follows it.
TruncationListener = Callable[[TopicPartition, int, bool], None]


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
        as_leader: bool = True,
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
        self.controller_epoch = 0
        # Set by the ReplicaManager: where ISR changes are written, who hears of them.
        self.alter_isr_manager: AlterIsrManager | None = None
        self.isr_listener: IsrListener | None = None
        self.truncation_listener: TruncationListener | None = None
        self._isr_pending = False
        #: While an ISR change is being written: the current ISR and the
        #: proposed one together (Kafka's maximal ISR, KIP-497). The HW waits
        #: for all of them, because the store may already name a replica the
        #: leader does not count yet, and the controller elects from the store.
        self._maximal_isr: frozenset[int] | None = None
        # Where the current leader epoch began on this leader's log.
        self.leader_epoch_start_offset: int | None = log.log_end_offset
        self.from_controller = False  # set once a LeaderAndIsr placed it
        local = self._replicas[local_broker_id]
        local.log_end_offset = log.log_end_offset
        local.last_caught_up_time_ms = now_ms()
        if not as_leader:
            # Made for a LeaderAndIsr, which sets the role: the HW stays as restored.
            self.leader_id = None
            self.isr = set()
            return
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
        """The effective minimum: min.insync.replicas capped at the replica
        count (Kafka's Partition.effectiveMinIsr), so a topic whose replication
        factor is below the broker's or topic's setting still takes acks=all
        once every replica is in sync."""
        configured = (
            self._min_isr_override
            if self._min_isr_override is not None
            else self.log.config.min_insync_replicas
        )
        return min(configured, max(1, len(self._replicas)))

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def last_stable_offset(self) -> int:
        return self.log.last_stable_offset

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
            for b in self._maximal_isr or self.isr:
                if b == self.local_broker_id:
                    leos.append(self.log.log_end_offset_metadata)
                else:
                    r = self._replicas.get(b)
                    leos.append(LogOffsetMetadata(r.log_end_offset if r else 0))
            new_hw = min(leos, key=lambda m: m.message_offset)
            return self.log.maybe_increment_high_watermark(new_hw) is not None

    # ------------------------------------------------------------------ roles

    def _set_assignment(self, state: PartitionState) -> None:
        self.from_controller = True
        replicas = {b: self._replicas.get(b) or Replica(b) for b in state.replicas}
        replicas.setdefault(self.local_broker_id, self._replicas[self.local_broker_id])
        self._replicas = replicas
        self.controller_epoch = state.controller_epoch
        self.partition_epoch = state.partition_epoch

    def make_leader(self, state: PartitionState) -> bool:
        """Lead the partition as ``state`` says. True when this is a new
        leadership (a newer leader epoch, or this broker was not leading):
        the epoch starts at the LEO in the epoch cache and every follower's
        fetch state starts over."""
        with self._lock:
            now = now_ms()
            new = not self.is_leader or state.leader_epoch != self.leader_epoch
            self._set_assignment(state)
            self.isr = set(state.isr)
            self._isr_pending = False
            self._maximal_isr = None
            self.leader_id = self.local_broker_id
            if new:
                self.leader_epoch = state.leader_epoch
                leo = self.log.log_end_offset
                self.leader_epoch_start_offset = leo
                cache = self.log.leader_epoch_cache
                latest = cache.latest_epoch if cache is not None else None
                if cache is not None and (latest is None or latest < state.leader_epoch):
                    cache.assign(state.leader_epoch, leo)
                for b, r in self._replicas.items():
                    if b == self.local_broker_id:
                        continue
                    r.log_end_offset = UNDEFINED_OFFSET
                    r.last_fetch_leader_leo = UNDEFINED_OFFSET
                    r.last_fetch_time_ms = 0
                    r.last_caught_up_time_ms = now if b in self.isr else 0
            local = self._replicas[self.local_broker_id]
            local.log_end_offset = self.log.log_end_offset
            local.last_caught_up_time_ms = now
            self._maybe_increment_leader_hw()
            return new

    def make_follower(self, state: PartitionState) -> bool:
        """Follow ``state.leader``. True when the leader or the leader epoch
        changed (the fetcher must start over: truncate, then fetch)."""
        with self._lock:
            changed = self.leader_id != state.leader or self.leader_epoch != state.leader_epoch
            self._set_assignment(state)
            self.isr = set(state.isr)
            self._isr_pending = False
            self._maximal_isr = None
            self.leader_id = state.leader if state.leader >= 0 else None
            self.leader_epoch = state.leader_epoch
            self.leader_epoch_start_offset = None
            for b, r in self._replicas.items():
                if b != self.local_broker_id:
                    r.log_end_offset = UNDEFINED_OFFSET
            return changed

    def maybe_replace_current_with_future_replica(
        self, catch_up: Callable[[Log], bool], replace: Callable[[], Log]
    ) -> bool:
        """Kafka's maybeReplaceCurrentWithFutureReplica: under the partition's
        lock (no append runs meanwhile), ``catch_up(current)`` copies what the
        future log still lacks and says whether it is level; if so
        ``replace()`` swaps the logs on disk and the partition serves the new
        one. False when the future log is not level."""
        with self._lock:
            if not catch_up(self.log):
                return False
            self.log = replace()
            return True

    def append_records_to_follower(self, records: memoryview) -> LogAppendInfo:
        """Append batches fetched from the leader, offsets and bytes as they are.

        Under the partition's lock, as Kafka appends under leaderIsrUpdateLock:
        a large append runs on a worker thread, and a LeaderAndIsr making this
        broker the leader must not land in the middle of it — the new epoch
        starts at the LEO it finds, and the old leader's batches must not
        follow it."""
        with self._lock:
            if self.is_leader:
                raise NotLeaderOrFollowerError(
                    f"{self.tp}: this broker leads; it takes no fetched data"
                )
            log = self.log
            try:
                info = log.append_as_follower(records)
            except UnexpectedAppendOffsetError as e:
                leo = log.log_end_offset
                if not (leo == log.log_start_offset and e.first_offset < leo <= e.last_offset):
                    raise
                # An empty log restarted at the leader's log start, which DeleteRecords
                # put inside a batch: the log starts over at the batch's first offset.
                # (The leader's log start comes back with the next fetch response.)
                log.truncate_fully_and_start_at(e.first_offset)
                self._truncated(e.first_offset, True)
                info = log.append_as_follower(records)
            self._replicas[self.local_broker_id].log_end_offset = log.log_end_offset
            return info

    def update_follower_high_watermark(self, leader_hw: int) -> None:
        """A follower's HW: the leader's, never past the local LEO."""
        self.log.update_high_watermark(min(leader_hw, self.log.log_end_offset))

    def update_follower_log_start_offset(self, leader_log_start: int) -> None:
        """A follower's log start follows the leader's (DeleteRecords), up to its HW."""
        target = min(leader_log_start, self.log.high_watermark)
        if target > self.log.log_start_offset:
            self.log.maybe_increment_log_start_offset(target)

    def truncate_to(self, offset: int) -> None:
        """Follower truncation (the leader-epoch protocol decided the offset).
        Under the partition's lock, as Kafka truncates under
        leaderIsrUpdateLock: a future log being swapped in meanwhile would
        bring the cut batches back."""
        with self._lock:
            self.log.truncate_to(offset)
            self._truncated(offset, False)
            self._replicas[self.local_broker_id].log_end_offset = self.log.log_end_offset

    def truncate_fully_and_start_at(self, offset: int) -> None:
        with self._lock:
            self.log.truncate_fully_and_start_at(offset)
            self._truncated(offset, True)
            self._replicas[self.local_broker_id].log_end_offset = self.log.log_end_offset

    def _truncated(self, offset: int, full: bool) -> None:
        listener = self.truncation_listener
        if listener is not None:
            listener(self.tp, offset, full)

    def _check_leader(self) -> None:
        if not self.is_leader:
            raise NotLeaderOrFollowerError(
                f"broker {self.local_broker_id} is not the leader of {self.tp} "
                f"(leader: {self.leader_id})"
            )

    # ------------------------------------------------------------------ ISR

    @property
    def is_under_replicated(self) -> bool:
        return self.is_leader and len(self.isr) < len(self._replicas)

    @property
    def is_under_min_isr(self) -> bool:
        return self.is_leader and len(self.isr) < self.min_insync_replicas

    def _is_follower_in_sync(self, r: Replica) -> bool:
        start = self.leader_epoch_start_offset
        leo = r.log_end_offset
        return leo >= self.log.high_watermark and start is not None and leo >= start

    def _maybe_expand_isr(self, r: Replica) -> None:
        if r.broker_id in self.isr or not self._is_follower_in_sync(r):
            return
        self._alter_isr(self.isr | {r.broker_id}, "expand")

    def maybe_shrink_isr(self, lag_time_max_ms: int, now: int | None = None) -> bool:
        """Leave out of the ISR each follower not caught up within
        ``lag_time_max_ms``. True if the HW moved (after a synchronous write)."""
        with self._lock:
            if not self.is_leader or self._isr_pending:
                return False
            t = now_ms() if now is None else now
            leo = self.log.log_end_offset
            # Out of sync: not caught up within the lag time, unless it holds
            # everything (no new data since: Kafka's Replica.isCaughtUp).
            out = {
                b
                for b in self.isr
                if b != self.local_broker_id
                and (r := self._replicas.get(b)) is not None
                and r.log_end_offset != leo
                and t - r.last_caught_up_time_ms > lag_time_max_ms
            }
            if not out:
                return False
            hw = self.log.high_watermark
            self._alter_isr(self.isr - out, "shrink")
            return self.log.high_watermark != hw

    def _alter_isr(self, new_isr: set[int], kind: str) -> None:
        """Propose ``new_isr``; apply it once the AlterIsrManager wrote it.
        Without a manager (the single broker) it applies at once."""
        proposed = LeaderAndIsr(
            self.local_broker_id, self.leader_epoch, tuple(sorted(new_isr)), self.partition_epoch
        )
        manager = self.alter_isr_manager
        if manager is None:
            self._apply_isr(proposed, kind)
            return
        self._isr_pending = True
        self._maximal_isr = frozenset(self.isr | new_isr)
        epoch = self.leader_epoch

        def written(result: LeaderAndIsr | int) -> None:
            with self._lock:
                self._isr_pending = False
                self._maximal_isr = None
                if isinstance(result, int) or not self.is_leader or self.leader_epoch != epoch:
                    return
                self._apply_isr(result, kind)

        try:
            manager.submit(self.tp, proposed, self.controller_epoch, written)
        except Exception:
            # Not submitted: the next fetch or expiration check proposes again.
            self._isr_pending = False
            self._maximal_isr = None
            raise

    def _apply_isr(self, state: LeaderAndIsr, kind: str) -> None:
        with self._lock:
            self.isr = set(state.isr)
            self.partition_epoch = state.partition_epoch
            self._maybe_increment_leader_hw()
        listener = self.isr_listener
        if listener is not None:
            listener(self, kind)

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
        verification_guard: VerificationGuard | None = None,
        transaction_version: int = 0,
    ) -> tuple[LogAppendInfo, bool]:
        """Append as the leader; returns the append info and whether the HW moved.
        NOT_ENOUGH_REPLICAS when acks=-1 and the ISR is smaller than
        min.insync.replicas (checked before writing, as Kafka does);
        ``verification_guard``: see Log.append_as_leader."""
        with self._lock:
            self._check_leader()
            isr_size = len(self.isr)
            min_isr = self.min_insync_replicas
            if required_acks == -1 and isr_size < min_isr:
                raise NotEnoughReplicasError(
                    f"the ISR of {self.tp} has {isr_size} replica(s), fewer than "
                    f"min.insync.replicas={min_isr}"
                )
            info = self.log.append_as_leader(
                records,
                self.leader_epoch,
                origin=origin,
                verification_guard=verification_guard,
                transaction_version=transaction_version,
            )
            local = self._replicas[self.local_broker_id]
            local.log_end_offset = self.log.log_end_offset
            local.last_caught_up_time_ms = now_ms()
            moved = self._maybe_increment_leader_hw()
            return info, moved

    def maybe_start_transaction_verification(
        self, producer_id: int, sequence: int, epoch: int
    ) -> VerificationGuard:
        """KIP-890 part 1, as the leader: SENTINEL when the producer's
        transaction is open here, else the guard of a verification to ask
        the transaction coordinator for (Kafka's
        Partition.maybeStartTransactionVerification)."""
        with self._lock:
            self._check_leader()
            return self.log.maybe_start_transaction_verification(producer_id, sequence, epoch)

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
        """A follower fetched from ``log_end_offset``: record it as the
        follower's LEO, note whether it was caught up (with the leader's LEO
        now, or with the LEO of its previous fetch), maybe expand the ISR.
        True if the HW moved."""
        with self._lock:
            r = self._replicas.get(broker_id)
            if r is None or not self.is_leader:
                return False
            now = now_ms()
            leader_leo = self.log.log_end_offset
            if log_end_offset >= leader_leo:
                r.last_caught_up_time_ms = max(r.last_caught_up_time_ms, now)
            elif log_end_offset >= r.last_fetch_leader_leo >= 0:
                r.last_caught_up_time_ms = max(r.last_caught_up_time_ms, r.last_fetch_time_ms)
            r.last_fetch_leader_leo = leader_leo
            r.last_fetch_time_ms = now
            r.log_end_offset = log_end_offset
            r.log_start_offset = log_start_offset
            hw = self.log.high_watermark
            if not self._isr_pending:
                self._maybe_expand_isr(r)
            moved = self._maybe_increment_leader_hw()
            return moved or self.log.high_watermark != hw

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
        [log start, LEO]; leader-epoch errors as check_current_leader_epoch;
        NOT_LEADER_OR_FOLLOWER on a follower (no fetching from followers)."""
        self.check_current_leader_epoch(current_leader_epoch)
        self._check_leader()
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
        self._check_leader()
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
        """Kafka's MAX_TIMESTAMP: the first record holding the largest
        timestamp (the first of the first segment that has it, KAFKA-16310),
        or none when that record is past what may be fetched."""
        best: tuple[int, int] | None = None
        start = self.log.log_start_offset
        for segment in self.log.segments:
            ts = segment.max_timestamp_so_far
            off = segment.offset_of_max_timestamp_so_far
            if ts < 0 or off < start:
                continue
            if best is None or ts > best[0]:
                best = (ts, off)
        if best is None:
            return TimestampAndOffset(-1, -1, -1)
        # The segments know the batch holding the largest timestamp (its last
        # offset, as the time index does); the answer is the record within it.
        found = self.log.fetch_offset_by_timestamp(best[0])
        if found is not None and found[0] == best[0] and start <= found[1] <= best[1]:
            best = found
        if best[1] >= last_fetchable:
            return None
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
            self._check_leader()
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
