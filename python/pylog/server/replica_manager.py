"""ReplicaManager: the broker's partitions and the data path through them.

* Partitions follow the metadata store: it listens for topic creations,
  partition additions, config changes and deletions, and makes or removes the
  logs (through the LogManager) and Partition objects to match.
* ``append_records`` writes a Produce's record sets to the partition leaders,
  answers acks=-1 through a DelayedProduce, and retries the waiting fetches of
  every partition it wrote.
* ``fetch_messages`` reads (zero-copy slices) and, when fewer than min_bytes
  are there, waits in the Fetch purgatory.

Appends run on the event loop when small. A record set of at least
``append_offload_bytes`` is appended on a worker thread so that validating,
decompressing and writing it (the native code drops the GIL for that) does not
stall the loop — the large appends of one request together, one worker job
for all its partitions with nothing in flight (one thread hand-off per
request). Appends to one partition happen in the order requests arrived: a
partition with an append on a worker has a lane, a queue that worker drains;
any later append to it (small ones too) joins the lane, so a pipelining
producer's next append starts on the worker as soon as the previous one ends,
with no round trip through the loop and no new hand-off. A request with no
other connection's prompt request (anything but a bulk Produce) in the last
100 ms (``inline``, from Request.others_active) appends large record sets on
the loop too: only producers wait behind the stall, each on its own append
anyway, and the hand-off cost 10-17% more broker CPU per byte
(docs/internals/performance.md, "Large appends inline when only producers
send").

In a cluster the controller places partitions (``become_leader_or_follower``,
Kafka's ReplicaManager.becomeLeaderOrFollower, for LeaderAndIsr;
``stop_replicas`` for StopReplica; ``maybe_update_metadata_cache`` for
UpdateMetadata), each request fenced by the controller epoch and this broker's
registration epoch. From the first LeaderAndIsr on, the metadata store no
longer makes partitions: the controller does. Followers fetch through the
ReplicaFetcherManager; leaders shrink the ISR of followers that stopped
catching up (``replica.lag.time.max.ms``, checked every half of it) and
expand it when they catch up, through the AlterIsrManager.

A log dir that runs out of space is logged once per episode: one WARNING when
appends to it start failing for lack of space (answered KAFKA_STORAGE_ERROR),
one INFO when an append to it succeeds again.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import errno
import logging
import os
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from pylog.common.topic_partition import TopicPartition
from pylog.errors import (
    ErrorCode,
    InvalidRequiredAcksError,
    InvalidTopicError,
    KafkaError,
    KafkaStorageError,
    NotLeaderOrFollowerError,
    RecordErrorsMixin,
    UnknownTopicOrPartitionError,
)
from pylog.log.checkpoint import REPLICATION_OFFSET_CHECKPOINT, OffsetCheckpointFile
from pylog.log.log import AppendOrigin, FetchIsolation, LogAppendInfo
from pylog.log.manager import LogManager
from pylog.log.verification_guard import SENTINEL, VerificationGuard
from pylog.logsafe import quoted
from pylog.metadata.metadata_cache import MetadataBroker, MetadataCache, PartitionInfo
from pylog.metadata.store import MetadataEvent, MetadataStore, TopicMetadata
from pylog.network.eager_future import EagerFuture
from pylog.network.metrics import MetricsRegistry
from pylog.server.add_partitions_to_txn_manager import AddPartitionsToTxnManager
from pylog.server.alter_isr_manager import (
    AlterIsrManager,
    InProcessAlterIsrManager,
    LeaderAndIsr,
)
from pylog.server.broker_topic_stats import BROKER_TOPIC_METERS, BrokerTopicStats
from pylog.server.delayed_fetch import (
    DelayedFetch,
    FetchParams,
    FetchPartitionRequest,
    FetchPartitionResult,
)
from pylog.server.delayed_produce import DelayedProduce, ProducePartitionStatus, ProduceResult
from pylog.server.partition import (
    EpochEndOffset,
    Partition,
    PartitionState,
    TimestampAndOffset,
)
from pylog.server.purgatory import DelayedOperationPurgatory
from pylog.server.replica_alter_log_dirs_manager import ReplicaAlterLogDirsManager
from pylog.server.replica_fetcher_blocking_send import BrokerEndPoint
from pylog.server.replica_fetcher_manager import ReplicaFetcherManager
from pylog.server.replica_fetcher_thread import InitialFetchState, ReplicaFetcherConfig
from pylog.server.replication_quota_manager import QuotaType, ReplicationQuotaManager

__all__ = [
    "DEFAULT_APPEND_OFFLOAD_BYTES",
    "ControllerResult",
    "ReplicaManager",
    "StopReplicaState",
    "UpdateMetadataResult",
]

_log = logging.getLogger("pylog.server.replica_manager")

_NO_SPACE = (errno.ENOSPC, errno.EDQUOT)

# Measured on the 2-core dev box (tests/unit/server/test_replica_manager.py prints it with -s):
# appending uncompressed batches inline costs ~35 µs at 16 KiB, ~100 µs at
# 128 KiB and 2-3 ms at 900 KiB; a hop through the executor adds 0.1-0.5 ms of
# latency. Below 128 KiB the loop stall is smaller than the hop; above it the
# stall would delay every other connection, so the append moves to a thread.
DEFAULT_APPEND_OFFLOAD_BYTES = 128 * 1024


# Kafka's ReplicaManager answers these append errors with no log start offset;
# any other error that reached the partition carries the partition's.
_NO_LOG_START_ERRORS = frozenset(
    {
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.MESSAGE_TOO_LARGE,
        ErrorCode.RECORD_LIST_TOO_LARGE,
        ErrorCode.CORRUPT_MESSAGE,
        ErrorCode.KAFKA_STORAGE_ERROR,
    }
)
# Only a record validation error (KIP-467) has its message in the response;
# Kafka sends every other error's message as null.
_MESSAGE_ERRORS = frozenset({ErrorCode.INVALID_RECORD, ErrorCode.INVALID_TIMESTAMP})


def _error_result(e: BaseException, partition: Partition | None = None) -> ProduceResult:
    code = e.code if isinstance(e, KafkaError) else ErrorCode.UNKNOWN_SERVER_ERROR
    log_start = -1
    if partition is not None and code not in _NO_LOG_START_ERRORS:
        try:
            log_start = partition.log_start_offset
        except Exception:  # no local log any more: as Kafka, -1
            log_start = -1
    message = (str(e) or None) if code in _MESSAGE_ERRORS else None
    named = e.record_errors if isinstance(e, RecordErrorsMixin) else []
    return ProduceResult(
        error_code=code, log_start_offset=log_start, error_message=message, record_errors=named
    )


def _as_storage_error(e: BaseException) -> BaseException:
    """A disk error as the client hears it: KAFKA_STORAGE_ERROR."""
    if isinstance(e, KafkaError):
        return e
    return KafkaStorageError(str(e), getattr(e, "errno", None))


# One append's outcome off the loop: its info and whether the log rolled, or the error.
_Outcome = tuple[LogAppendInfo, bool] | BaseException


@dataclass(frozen=True, slots=True)
class _LaneAppend:
    """An append waiting in its partition's lane for a worker thread."""

    partition: Partition
    data: bytes | bytearray | memoryview
    required_acks: int
    origin: AppendOrigin
    outcome: asyncio.Future[_Outcome]  # on the loop, settled once appended
    verification_guard: VerificationGuard | None = None
    transaction_version: int = 0


# A v2 batch header: magic at byte 16, attributes (int16) at 21, then
# producer id (int64) at 43, producer epoch (int16) at 51, base sequence
# (int32) at 53 (Kafka's DefaultRecordBatch layout).
_MAGIC_AT = 16
_ATTRIBUTES_AT = 21
_PRODUCER_AT = 43
_HEADER_END = 61
_TRANSACTIONAL = 0x10
_CONTROL = 0x20
_PRODUCER = struct.Struct(">qhi")

#: Coordinator answers that only mean "not verified yet": a client of
#: transactions v1 might not retry them properly, so the produce gets the
#: retriable NOT_ENOUGH_REPLICAS, which triggers no metadata refresh
#: (Kafka's ReplicaManager).
_VERIFY_RETRIABLE = frozenset(
    {
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.CONCURRENT_TRANSACTIONS,
    }
)


def _transactional_producer(data: bytes | bytearray | memoryview) -> tuple[int, int, int] | None:
    """(producer id, epoch, base sequence) of the first batch when it is a
    transactional data batch of magic 2; None otherwise (what else the
    bytes hold, the append validates)."""
    if len(data) < _HEADER_END or data[_MAGIC_AT] != 2:
        return None
    if data[_ATTRIBUTES_AT + 1] & (_TRANSACTIONAL | _CONTROL) != _TRANSACTIONAL:
        return None
    pid, epoch, seq = _PRODUCER.unpack_from(data, _PRODUCER_AT)
    return (pid, epoch, seq) if pid >= 0 else None


def _verification_failed(code: int) -> ProduceResult:
    if code in _VERIFY_RETRIABLE:
        return ProduceResult(
            error_code=ErrorCode.NOT_ENOUGH_REPLICAS,
            error_message="Unable to verify the partition has been added to the "
            f"transaction. Underlying error: {_error_name(code)}",
        )
    if code == ErrorCode.INVALID_TXN_STATE:
        return ProduceResult(
            error_code=code, error_message="Partition was not added to the transaction"
        )
    return ProduceResult(error_code=code)


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


def _settle(outcome: asyncio.Future[_Outcome], value: _Outcome) -> None:
    if not outcome.done():
        outcome.set_result(value)


@dataclass(frozen=True, slots=True)
class StopReplicaState:
    """One partition of a StopReplica: the leader epoch the controller knew
    (-2: the topic is being deleted, -1: none) and whether to delete the log."""

    leader_epoch: int = -1
    delete: bool = False


@dataclass(slots=True)
class ControllerResult:
    """The answer to a controller request: a request-level error code, and a
    code per partition (empty when the whole request was refused)."""

    error_code: int = ErrorCode.NONE
    partition_errors: dict[TopicPartition, int] | None = None


@dataclass(slots=True)
class UpdateMetadataResult:
    """The answer to an UpdateMetadata, and the partitions it deleted from the
    MetadataCache (those of topics being deleted: their groups' offsets go)."""

    error_code: int = ErrorCode.NONE
    deleted_partitions: list[TopicPartition] = field(default_factory=list)


_EPOCH_DURING_DELETE = -2
_NO_EPOCH = -1


class ReplicaManager:
    def __init__(
        self,
        log_manager: LogManager,
        metadata_store: MetadataStore,
        *,
        broker_id: int = 0,
        append_offload_bytes: int = DEFAULT_APPEND_OFFLOAD_BYTES,
        executor: concurrent.futures.Executor | None = None,
        hw_checkpoint_interval_ms: int = 5_000,
        max_partitions: int | None = None,
        metadata_cache: MetadataCache | None = None,
        alter_isr_manager: AlterIsrManager | None = None,
        fetcher_config: ReplicaFetcherConfig | None = None,
        replica_lag_time_max_ms: int = 30_000,
        alter_log_dirs_threads: int | None = None,
        broker_epoch: Callable[[], int] | None = None,
        inter_broker_listener: str = "PLAINTEXT",
        isr_expiration_interval_ms: int | None = None,
        controller_managed: bool = False,
    ) -> None:
        self.log_manager = log_manager
        self.max_partitions = max_partitions
        self.hw_checkpoint_interval_ms = hw_checkpoint_interval_ms
        # One checkpoint file object per log dir, as Kafka keeps: its lock orders the
        # scheduler's periodic write and the shutdown's, which share one .tmp name.
        self._hw_checkpoints: dict[str, OffsetCheckpointFile] = {}
        self.metadata_store = metadata_store
        self.broker_id = broker_id
        self.append_offload_bytes = append_offload_bytes
        self._own_executor = executor is None
        self._executor = executor or concurrent.futures.ThreadPoolExecutor(
            max_workers=2, thread_name_prefix="pylog-append"
        )
        self._partitions: dict[TopicPartition, Partition] = {}
        # Partitions whose log directory failed (Kafka's HostedPartition.Offline):
        # they answer KAFKA_STORAGE_ERROR until the broker restarts.
        self._offline_partitions: frozenset[TopicPartition] = frozenset()
        #: Called on the loop with a log directory just taken offline, once its
        #: partitions are: the broker tells the controller (or stops).
        self.log_dir_failure_hook: Callable[[str], None] | None = None
        # Partitions with an append on a worker: the appends queued behind it.
        # A lane exists from the first append handed to a worker until the
        # worker finds it empty (both under _lanes_lock).
        self._lanes: dict[TopicPartition, deque[_LaneAppend]] = {}
        self._lanes_lock = threading.Lock()
        # Log dirs whose appends fail for lack of space (logged once per episode).
        self._dirs_out_of_space: set[str] = set()
        self.delayed_produce_purgatory: DelayedOperationPurgatory[DelayedProduce] = (
            DelayedOperationPurgatory("Produce")
        )
        # Replication throttles (kafka-reassign-partitions --throttle); the
        # broker sets their bounds from its (dynamic) configuration.
        self.leader_quota = ReplicationQuotaManager(broker_id)
        self.follower_quota = ReplicationQuotaManager(
            broker_id, quota_type=QuotaType.FOLLOWER_REPLICATION
        )
        # replica.alter.log.dirs.io.max.bytes.per.second: every move between dirs.
        self.alter_log_dirs_quota = ReplicationQuotaManager(
            broker_id, quota_type=QuotaType.ALTER_LOG_DIRS_REPLICATION
        )
        self.delayed_fetch_purgatory: DelayedOperationPurgatory[DelayedFetch] = (
            DelayedOperationPurgatory("Fetch")
        )
        self._started = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = False
        # --- replication (the cluster)
        self.metadata_cache = metadata_cache or MetadataCache(broker_id)
        self.alter_isr_manager: AlterIsrManager = alter_isr_manager or InProcessAlterIsrManager()
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        # Kafka checks every half of replica.lag.time.max.ms.
        self.isr_expiration_interval_ms = isr_expiration_interval_ms
        self.inter_broker_listener = inter_broker_listener
        #: This broker's registration epoch (the czxid of its /brokers/ids znode,
        #: set by KafkaServer once registered); -1: unknown, requests are not checked.
        self._broker_epoch = broker_epoch or (lambda: -1)
        #: The newest controller epoch seen in an accepted request.
        self.controller_epoch = 0
        #: True in a cluster (ZooKeeper mode: set from the start, so a restarted
        #: broker leads nothing until the controller says so), or once a
        #: controller placed partitions: then the store no longer makes them.
        self.controller_managed = controller_managed
        self.replica_fetcher_manager = ReplicaFetcherManager(
            fetcher_config or ReplicaFetcherConfig(broker_id=broker_id), self
        )
        #: moves replicas between this broker's log dirs (AlterReplicaLogDirs), on
        #: num.replica.alter.log.dirs.threads tasks (unset: one per log dir)
        self.alter_log_dirs_manager = ReplicaAlterLogDirsManager(
            self, alter_log_dirs_threads or len(log_manager.log_dirs)
        )
        self.isr_shrinks = 0
        self.isr_expands = 0
        #: Kafka's BrokerTopicMetrics: bytes and records in and out, per topic
        self.broker_topic_stats = BrokerTopicStats()
        self._isr_task: asyncio.Task[None] | None = None
        #: KIP-890 part 1: the coordinators' verification of transactional
        #: appends (set by the broker; None: never verified), asked while
        #: ``verification_enabled()`` (transaction.partition.verification.enable,
        #: dynamic) holds.
        self.add_partitions_to_txn_manager: AddPartitionsToTxnManager | None = None
        self.verification_enabled: Callable[[], bool] = lambda: True
        #: Transactions v2's retries of an add meeting CONCURRENT_TRANSACTIONS
        #: (set by the broker from add.partitions.to.txn.*).
        self.add_partitions_max_timeout_ms = 100
        self.add_partitions_retry_backoff_ms = 20
        metadata_store.add_listener(self._on_metadata_event)
        log_manager.log_dir_failure_channel.add_listener(self._on_log_dir_failure)

    # ------------------------------------------------------------------ lifecycle

    def startup(self) -> None:
        """Bring the partitions in line with the store: adopt logs on disk the
        store does not know (a lost or pre-store data dir), apply topic config
        overrides, and open or create every partition of every topic."""
        if self._started:
            return
        self._started = True
        with contextlib.suppress(RuntimeError):
            self._loop = asyncio.get_running_loop()
        store = self.metadata_store
        on_disk: dict[str, int] = {}
        for tp in self.log_manager.all_logs():
            on_disk[tp.topic] = max(on_disk.get(tp.topic, 0), tp.partition + 1)
        for topic, count in sorted(on_disk.items()):
            meta = store.topic(topic)
            if meta is None:
                _log.warning(
                    "adopting topic %s (%d partitions) found on disk", quoted(topic), count
                )
                try:
                    store.create_topic(topic, count, 1, topic_id=self.log_manager.topic_id(topic))
                except KafkaError as e:
                    _log.error("cannot adopt %s found on disk: %s", quoted(topic), e)
            elif meta.partitions < count:
                store.add_partitions(topic, count)
        self._restore_high_watermarks()
        opened = 0
        # In a cluster, partitions come only from the controller's LeaderAndIsr.
        for meta in [] if self.controller_managed else store.topics():
            limit = self.max_partitions
            if limit is not None and opened + meta.partitions > limit:
                # A store written before the limit existed (one CreateTopics
                # once asked for 2^31-1 partitions): start without it.
                _log.error(
                    "not opening topic %s: its %d partitions would take this broker past "
                    "max.broker.partitions=%d (%d open); delete the topic or raise the limit",
                    quoted(meta.name),
                    meta.partitions,
                    limit,
                    opened,
                )
                continue
            self._ensure_partitions(meta)
            opened += meta.partitions
        # A lone broker's partitions exist now: moves left by the last stop go on.
        self._maybe_add_log_dir_fetchers(self.log_manager.all_future_logs())
        self.log_manager.scheduler.schedule(
            "highwatermark-checkpoint",
            self.checkpoint_high_watermarks,
            self.hw_checkpoint_interval_ms,
            self.hw_checkpoint_interval_ms,
        )

    def stop_creating(self) -> None:
        """The broker is stopping: a topic creation under way on a worker
        thread stops at its next partition (and is undone), so the shutdown
        does not wait for thousands of logs to be made."""
        self._stopping = True

    def shutdown(self) -> None:
        self._stopping = True
        self.alter_log_dirs_manager.shutdown()
        if self._isr_task is not None:
            self._isr_task.cancel()
            self._isr_task = None
        self.log_manager.scheduler.cancel("highwatermark-checkpoint")
        self.delayed_fetch_purgatory.shutdown()
        self.delayed_produce_purgatory.shutdown()
        if self._started:
            self.checkpoint_high_watermarks()
        if self._own_executor:
            self._executor.shutdown(wait=True)

    # ------------------------------------------------------------------ HW checkpoint

    def _restore_high_watermarks(self) -> None:
        """Start each log's high watermark from ``replication-offset-checkpoint``
        (a leader then moves it on; a follower must not expose more)."""
        for d in self.log_manager.log_dirs:
            cp = self._hw_checkpoint(d)
            try:
                saved = cp.read()
            except (OSError, KafkaError) as e:
                _log.warning("ignoring %s: %s", cp.path, e)
                continue
            for tp, hw in saved.items():
                log = self.log_manager.get_log(tp)
                if log is not None and self.log_manager.log_dir_of(tp) == d:
                    log.update_high_watermark(min(hw, log.log_end_offset))

    def checkpoint_high_watermarks(self) -> None:
        """Write every partition's high watermark to ``replication-offset-checkpoint``
        in its log dir (Kafka's file; readers of the segments, such as the Spark
        source, take it as the end of committed data)."""
        by_dir: dict[str, dict[TopicPartition, int]] = {
            d: {} for d in self.log_manager.live_log_dirs
        }
        for tp, partition in list(self._partitions.items()):
            d = self.log_manager.log_dir_of(tp)
            if d is not None and d in by_dir and not partition.log.closed:
                by_dir[d][tp] = partition.high_watermark
        for d, offsets in by_dir.items():
            try:
                self._hw_checkpoint(d).write(offsets)
            except (OSError, KafkaStorageError) as e:
                if not self.log_manager.maybe_handle_io_error(d, "writing the high watermarks", e):
                    _log.error("cannot write the high-watermark checkpoint in %s: %s", d, e)

    def _hw_checkpoint(self, log_dir: str) -> OffsetCheckpointFile:
        cp = self._hw_checkpoints.get(log_dir)
        if cp is None:
            cp = OffsetCheckpointFile(os.path.join(log_dir, REPLICATION_OFFSET_CHECKPOINT))
            cp = self._hw_checkpoints.setdefault(log_dir, cp)
        return cp

    # ------------------------------------------------------------------ partitions

    def _on_metadata_event(self, event: MetadataEvent) -> None:
        if not self._started:
            return
        meta = event.topic
        if event.kind in ("create", "partitions"):
            if not self.controller_managed:
                self._ensure_partitions(meta)
            elif meta.configs:
                # The controller makes the partitions; the topic's overrides
                # (min.insync.replicas, max.message.bytes, ...) still apply to them.
                self.log_manager.update_topic_config(meta.name, meta.configs)
        elif event.kind == "config":
            self.log_manager.update_topic_config(meta.name, meta.configs)
        elif event.kind == "delete":
            self._remove_topic(meta)

    # The partition map is replaced, never changed in place: topics are
    # created and deleted on worker threads (thousands of logs take seconds)
    # while the event loop iterates the map.

    def _ensure_partitions(self, meta: TopicMetadata) -> None:
        if meta.configs:
            self.log_manager.update_topic_config(meta.name, meta.configs)
        made: dict[TopicPartition, Partition] = {}
        try:
            for i in range(meta.partitions):
                if self._stopping:
                    raise KafkaStorageError(
                        f"the broker is shutting down: partitions of {meta.name!r} not made"
                    )
                tp = TopicPartition(meta.name, i)
                if tp in self._partitions:
                    continue
                log = self.log_manager.get_or_create_log(
                    tp, topic_id=meta.topic_id, config=self.log_manager.config_for(meta.name)
                )
                made[tp] = self._wire(
                    Partition(tp, log, topic_id=meta.topic_id, local_broker_id=self.broker_id)
                )
        finally:
            if made:  # those made before a failure too, so a removal finds them
                self._partitions = {**self._partitions, **made}

    def _wire(self, partition: Partition) -> Partition:
        partition.alter_isr_manager = self.alter_isr_manager
        partition.isr_listener = self._on_isr_change
        partition.truncation_listener = self._on_truncation
        return partition

    def _on_truncation(self, tp: TopicPartition, offset: int, full: bool) -> None:
        """A follower's log was truncated (any thread): a move of it in
        flight must drop what its copy took beyond (Kafka's
        ReplicaFetcherThread marking the alter-log-dirs fetcher)."""
        if self.log_manager.future_log(tp) is not None:
            self.alter_log_dirs_manager.mark_partitions_for_truncation(tp, offset, full=full)

    def _maybe_add_log_dir_fetchers(self, tps: Iterable[TopicPartition]) -> None:
        """Resume the moves of partitions whose future log was loaded at
        start-up (a move in flight when the broker stopped), once the
        partition exists (Kafka's ReplicaManager does it on LeaderAndIsr)."""
        lm = self.log_manager
        moving = [tp for tp in tps if tp in self._partitions and lm.future_log(tp) is not None]
        fresh = [tp for tp in moving if tp not in self.alter_log_dirs_manager.partitions]
        if not fresh:
            return
        for tp in fresh:
            _log.info("resuming the move of %s to %s", tp, lm.future_log_dir_of(tp))
        self.alter_log_dirs_manager.add_partitions(fresh)

    def _remove_topic(self, meta: TopicMetadata) -> None:
        doomed = [tp for tp in self._partitions if tp.topic == meta.name]
        if not doomed:
            return
        gone = set(doomed)
        self._partitions = {tp: p for tp, p in self._partitions.items() if tp not in gone}
        self._on_loop(self._complete_waiting, doomed)
        self.broker_topic_stats.remove(meta.name)  # a pop: safe from a worker thread
        for tp in doomed:
            self.log_manager.async_delete(tp)

    def _complete_waiting(self, tps: list[TopicPartition]) -> None:
        """Answer the fetches and produces waiting on partitions now gone."""
        for tp in tps:
            for op in self.delayed_fetch_purgatory.cancel_for_key(tp):
                op.force_complete()
            self.delayed_produce_purgatory.check_and_complete(tp)

    def _on_loop(
        self, fn: Callable[[list[TopicPartition]], None], arg: list[TopicPartition]
    ) -> None:
        """Run ``fn(arg)`` on the event loop (where the purgatories live): now
        when called there or when there is no loop, else as soon as it can."""
        loop = self._loop
        if loop is None or loop.is_closed():
            fn(arg)
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            fn(arg)
        else:
            loop.call_soon_threadsafe(fn, arg)

    # ------------------------------------------------------------------ failed log dirs

    def _on_log_dir_failure(self, log_dir: str) -> None:
        """The LogDirFailureChannel's listener (any thread): the partitions
        go offline on the loop (Kafka's LogDirFailureHandler)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            self.handle_log_dir_failure(log_dir)
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self.handle_log_dir_failure(log_dir)
        else:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self.handle_log_dir_failure, log_dir)

    def handle_log_dir_failure(self, log_dir: str) -> None:
        """Kafka's ReplicaManager.handleLogDirFailure: stop fetching the
        partitions of ``log_dir``, mark them offline (KAFKA_STORAGE_ERROR to
        produce, fetch and LeaderAndIsr), answer what waits on them, drop
        their logs, then tell the hook (the controller hears of it there)."""
        lm = self.log_manager
        tps = sorted(
            tp for tp, p in self._partitions.items() if lm.log_dir_for_path(p.log.dir) == log_dir
        )
        if tps:
            self.replica_fetcher_manager.remove_fetcher_for_partitions(tps)
            gone = set(tps)
            self._partitions = {tp: p for tp, p in self._partitions.items() if tp not in gone}
            self._offline_partitions = self._offline_partitions | gone
        lm.handle_log_dir_failure(log_dir)
        self._complete_waiting(tps)
        _log.error("partitions offline with log directory %s: %s", log_dir,
                   ", ".join(map(str, tps)) or "none")  # fmt: skip
        hook = self.log_dir_failure_hook
        if hook is not None:
            hook(log_dir)

    def alter_replica_log_dirs(
        self, dirs: Mapping[TopicPartition, str]
    ) -> dict[TopicPartition, int]:
        """AlterReplicaLogDirs (Kafka's ReplicaManager.alterReplicaLogDirs), per
        partition: LOG_DIR_NOT_FOUND for a directory not in ``log.dirs``,
        KAFKA_STORAGE_ERROR for an offline one (or while any directory is
        offline, so no future log is made twice), REPLICA_NOT_AVAILABLE for a
        replica this broker does not hold yet (it is made in that directory
        when it comes); otherwise a move starts (none when the replica is
        there already; a move elsewhere in flight is dropped first)."""
        lm = self.log_manager
        out: dict[TopicPartition, int] = {}
        started: list[TopicPartition] = []
        for tp, wanted in dirs.items():
            dest = lm.log_dir_path(wanted)
            if dest is None:
                out[tp] = ErrorCode.LOG_DIR_NOT_FOUND
                continue
            if lm.is_offline(dest):
                out[tp] = ErrorCode.KAFKA_STORAGE_ERROR
                continue
            if tp in self._offline_partitions:
                out[tp] = ErrorCode.KAFKA_STORAGE_ERROR
                continue
            in_flight = lm.future_log_dir_of(tp)
            if in_flight is not None and in_flight != dest:
                self.alter_log_dirs_manager.remove_partitions([tp])
                lm.abort_future_log(tp)
            lm.maybe_update_preferred_log_dir(tp, dest)
            partition = self._partitions.get(tp)
            if partition is None:
                out[tp] = ErrorCode.REPLICA_NOT_AVAILABLE
                continue
            if lm.log_dir_of(tp) == dest:
                out[tp] = ErrorCode.NONE
                continue
            if lm.offline_log_dirs:
                out[tp] = ErrorCode.KAFKA_STORAGE_ERROR
                continue
            try:
                lm.create_future_log(tp, dest, partition.topic_id)
            except KafkaError as e:
                out[tp] = e.code
                continue
            started.append(tp)
            out[tp] = ErrorCode.NONE
        if started:
            self.alter_log_dirs_manager.add_partitions(started)
        return out

    def is_offline(self, tp: TopicPartition) -> bool:
        return tp in self._offline_partitions

    def _maybe_offline(self, partition: Partition | None, what: str, e: BaseException) -> bool:
        """An error met on ``partition``'s log: its directory goes offline when
        the disk gave it. True when it is offline."""
        if partition is None:
            return False
        return self.log_manager.maybe_handle_io_error(
            partition.log.dir, f"{what} {partition.tp}", e
        )

    def partition(self, tp: TopicPartition) -> Partition | None:
        return self._partitions.get(tp)

    def partitions(self) -> dict[TopicPartition, Partition]:
        return dict(self._partitions)

    def partitions_of(self, topic: str) -> list[Partition]:
        parts = [p for tp, p in self._partitions.items() if tp.topic == topic]
        return sorted(parts, key=lambda p: p.partition)

    def get_partition_or_error(self, tp: TopicPartition) -> Partition:
        p = self._partitions.get(tp)
        if p is None:
            raise self.not_hosted(tp)
        return p

    def not_hosted(self, tp: TopicPartition) -> KafkaError:
        """The error for a partition this broker holds no replica of: as
        Kafka's ReplicaManager.getPartitionOrError, NOT_LEADER_OR_FOLLOWER when
        the cluster's metadata has it (the client's metadata is stale, e.g.
        after a reassignment moved it away), else UNKNOWN_TOPIC_OR_PARTITION;
        KAFKA_STORAGE_ERROR for one whose log directory failed."""
        if tp in self._offline_partitions:  # its log directory failed
            return KafkaStorageError(f"the log directory of {tp} is offline")
        if self.metadata_cache.partition_info(tp.topic, tp.partition) is not None:
            return NotLeaderOrFollowerError(f"this broker holds no replica of {tp}")
        return UnknownTopicOrPartitionError(f"this broker has no partition {tp}")

    # ------------------------------------------------------------------ append

    async def append_records(
        self,
        timeout_ms: int,
        required_acks: int,
        entries: Mapping[TopicPartition, bytes | bytearray | memoryview | None],
        *,
        internal_topics_allowed: bool = False,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        before_wait: Callable[[], None] | None = None,
        inline: bool = False,
        transactional_id: str | None = None,
        add_to_transaction: bool = False,
        transaction_version: int = 0,
    ) -> dict[TopicPartition, ProduceResult]:
        """Append each partition's records as its leader; for acks=-1 wait until
        they are committed (or ``timeout_ms``). Returns a result per partition.

        ``inline``: append here whatever the size, unless a partition's lane is
        busy (only producers are sending: a worker thread would keep nobody
        waiting served, and it costs more CPU per byte).

        ``before_wait`` runs once every append is ordered, before the first wait
        (an append on a worker thread, the purgatory): the network layer then
        lets the connection's next request start.

        ``transactional_id`` (a transactional producer's request): with
        verification on, a partition where the producer has no open
        transaction is appended to only once its coordinator says the
        partition is in the transaction (KIP-890 part 1).
        ``add_to_transaction`` (a transactions-v2 producer's Produce v12, a
        TxnOffsetCommit v5): the coordinator is asked to add the partition
        instead, whatever the verification setting (KIP-890 part 2).
        ``transaction_version``: a coordinator's marker's (WriteTxnMarkers v2,
        KIP-1228), which decides how its producer epoch is checked."""
        if required_acks not in (0, 1, -1):
            err = InvalidRequiredAcksError(f"acks must be -1, 0 or 1, not {required_acks}")
            return {tp: _error_result(err) for tp in entries}
        results: dict[TopicPartition, ProduceResult] = {}
        guards: dict[TopicPartition, VerificationGuard] = {}
        if (
            transactional_id is not None
            and self.add_partitions_to_txn_manager is not None
            and (add_to_transaction or self.verification_enabled())
        ):
            guards = await self._verify_transactional(
                transactional_id, entries, results, add_to_transaction
            )
        infos: dict[TopicPartition, LogAppendInfo] = {}
        queued: list[tuple[TopicPartition, asyncio.Future[_Outcome]]] = []
        # Lanes this request opens: one worker job drains them all.
        opened: list[TopicPartition] = []
        lanes = self._lanes
        for tp, records in entries.items():
            if tp in results:  # refused by the verification
                continue
            partition = self._partitions.get(tp)
            if partition is None:
                results[tp] = _error_result(self.not_hosted(tp))
                continue
            if partition.topic_is_internal and not internal_topics_allowed:
                results[tp] = _error_result(
                    InvalidTopicError(f"cannot append to internal topic {tp.topic}")
                )
                continue
            data: bytes | bytearray | memoryview = records if records is not None else b""
            # No lane (read without the lock): every append handed off for this
            # partition is done, so this one may run here, after them.
            if tp not in lanes and (inline or len(data) < self.append_offload_bytes):
                try:
                    info, moved = partition.append_records_to_leader(
                        data, required_acks, origin, guards.get(tp), transaction_version
                    )
                except Exception as e:
                    self._log_unexpected(tp, e)
                    self._note_space(tp, partition, e)
                    failed: BaseException = e
                    if self._maybe_offline(partition, "appending to", e):
                        failed = _as_storage_error(e)
                    results[tp] = _error_result(failed, partition)
                    continue
                self._note_space(tp, partition, None)
                infos[tp] = info
                self._after_append(tp, moved)
                continue
            outcome: asyncio.Future[_Outcome] = asyncio.get_running_loop().create_future()
            item = _LaneAppend(
                partition, data, required_acks, origin, outcome, guards.get(tp),
                transaction_version,
            )  # fmt: skip
            with self._lanes_lock:
                lane = lanes.get(tp)
                if lane is None:
                    lanes[tp] = deque((item,))
                    opened.append(tp)
                else:
                    lane.append(item)  # its worker takes it after those before it
            queued.append((tp, outcome))
        if queued:
            if opened:
                self._start_lanes(opened)
            if before_wait is not None:
                before_wait()
            for tp, outcome in queued:
                value = await outcome
                if isinstance(value, BaseException):
                    self._log_unexpected(tp, value)
                    self._note_space(tp, self._partitions.get(tp), value)
                    if self._maybe_offline(self._partitions.get(tp), "appending to", value):
                        value = _as_storage_error(value)
                    results[tp] = _error_result(value, self._partitions.get(tp))
                else:
                    self._note_space(tp, self._partitions.get(tp), None)
                    infos[tp] = value[0]
                    self._after_append(tp, value[1])
        for tp, info in infos.items():
            results[tp] = ProduceResult(
                error_code=ErrorCode.NONE,
                base_offset=info.first_offset,
                log_append_time_ms=info.log_append_time,
                log_start_offset=info.log_start_offset,
            )
        ordered = {tp: results[tp] for tp in entries}
        stats = self.broker_topic_stats
        for tp in ordered:
            appended = infos.get(tp)
            if appended is None or appended.duplicate:
                stats.produced(tp.topic, failed=appended is None)
            else:
                stats.produced(tp.topic, failed=False, size=appended.valid_bytes,
                               records=appended.num_records)  # fmt: skip
        if required_acks != -1 or not infos or self._committed_now(infos, ordered):
            return ordered
        statuses = {
            tp: ProducePartitionStatus(
                required_offset=(infos[tp].last_offset + 1) if tp in infos else 0,
                result=r,
            )
            for tp, r in ordered.items()
        }
        fut: EagerFuture[dict[TopicPartition, ProduceResult]] = EagerFuture()

        def respond(res: dict[TopicPartition, ProduceResult]) -> None:
            if not fut.done():
                fut.set_result(res)

        op = DelayedProduce(
            timeout_ms, statuses, self.partition, respond, lambda tp: self.not_hosted(tp).code
        )
        waiting = not self.delayed_produce_purgatory.try_complete_else_watch(op, list(infos))
        if waiting and before_wait is not None:
            before_wait()
        return await fut

    async def _verify_transactional(
        self,
        transactional_id: str,
        entries: Mapping[TopicPartition, bytes | bytearray | memoryview | None],
        results: dict[TopicPartition, ProduceResult],
        add: bool = False,
    ) -> dict[TopicPartition, VerificationGuard]:
        """Kafka's appendRecordsWithTransactionVerification: the guard of each
        partition holding a transactional batch (SENTINEL where the
        producer's transaction is open already), after asking the coordinator
        about the others in one question. A partition the coordinator does
        not confirm gets its result in ``results`` and no guard."""
        manager = self.add_partitions_to_txn_manager
        assert manager is not None
        guards: dict[TopicPartition, VerificationGuard] = {}
        ask: list[TopicPartition] = []
        producer: tuple[int, int, int] | None = None
        for tp, records in entries.items():
            if records is None:
                continue
            found = _transactional_producer(records)
            if found is None:
                continue
            partition = self._partitions.get(tp)
            if partition is None:
                continue  # the append answers it
            try:
                guard = partition.maybe_start_transaction_verification(found[0], found[2], found[1])
            except KafkaError:
                continue  # not the leader: the append answers it
            guards[tp] = guard
            if guard is not SENTINEL:
                ask.append(tp)
                producer = found
        if not ask or producer is None:
            return guards
        # One transactional id has one producer: the first batch asked for
        # names it (a request mixing producers fails their sequence checks).
        codes = await manager.verify_transaction(
            transactional_id, producer[0], producer[1], ask, add=add
        )
        # Transactions v2: the producer's next transaction starts as soon as
        # EndTxn answers, while the coordinator may still be writing the last
        # one's markers (CONCURRENT_TRANSACTIONS). The leader asks again for a
        # while before answering the producer (Kafka 4's
        # add.partitions.to.txn.max.timeout.ms / .retry.backoff.ms).
        deadline = time.monotonic() + self.add_partitions_max_timeout_ms / 1000
        while (
            add
            and codes
            and all(c == ErrorCode.CONCURRENT_TRANSACTIONS for c in codes.values())
            and time.monotonic() + self.add_partitions_retry_backoff_ms / 1000 < deadline
        ):
            await asyncio.sleep(self.add_partitions_retry_backoff_ms / 1000)
            retry = [tp for tp in ask if tp in codes]
            for tp in retry:
                partition = self._partitions.get(tp)
                if partition is None:
                    break
                try:
                    guards[tp] = partition.maybe_start_transaction_verification(
                        producer[0], producer[2], producer[1]
                    )
                except KafkaError:
                    break
            else:
                codes = await manager.verify_transaction(
                    transactional_id, producer[0], producer[1], retry, add=True
                )
                continue
            break
        for tp, code in codes.items():
            results[tp] = _verification_failed(code)
            guards.pop(tp, None)
        return guards

    def _committed_now(
        self,
        infos: Mapping[TopicPartition, LogAppendInfo],
        results: Mapping[TopicPartition, ProduceResult],
    ) -> bool:
        """acks=-1: when the high watermark already covers every partition's
        append (a leader alone in its ISR moves it as it appends), set each
        result's code as DelayedProduce would and say so: the request is
        answered without a DelayedProduce, the purgatory or a future (Kafka
        also tries to complete before it watches). False leaves every result
        untouched."""
        codes: list[tuple[ProduceResult, int]] = []
        for tp, info in infos.items():
            partition = self._partitions.get(tp)
            if partition is None:
                return False  # gone meanwhile: DelayedProduce answers it
            done, code = partition.check_enough_replicas_reach_offset(info.last_offset + 1)
            if not done:
                return False
            codes.append((results[tp], code))
        for result, code in codes:
            result.error_code = code
        return True

    def _start_lanes(self, tps: list[TopicPartition]) -> None:
        """Hand the lanes ``tps`` (just opened) to one worker job."""
        loop = asyncio.get_running_loop()
        try:
            self._executor.submit(self._drain_lanes, tps, loop)
        except RuntimeError as e:  # the executor is shut down: fail what waits
            with self._lanes_lock:
                items = [item for tp in tps for item in self._lanes.pop(tp, ())]
            for item in items:
                _settle(item.outcome, e)

    def _drain_lanes(self, tps: list[TopicPartition], loop: asyncio.AbstractEventLoop) -> None:
        """On a worker thread: the appends of the lanes ``tps``, each lane in
        order, one append of each in turn, until every lane is empty; each
        outcome (an error included) goes to the loop as soon as it is known."""
        lanes, lock = self._lanes, self._lanes_lock
        active = tps
        while active:
            still: list[TopicPartition] = []
            for tp in active:
                with lock:
                    lane = lanes[tp]
                    if not lane:
                        del lanes[tp]  # later appends to tp may run on the loop
                        continue
                    item = lane.popleft()
                try:
                    value: _Outcome = item.partition.append_records_to_leader(
                        item.data,
                        item.required_acks,
                        item.origin,
                        item.verification_guard,
                        item.transaction_version,
                    )
                except Exception as e:
                    value = e
                with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits
                    loop.call_soon_threadsafe(_settle, item.outcome, value)
                still.append(tp)
            active = still

    def _after_append(self, tp: TopicPartition, hw_moved: bool) -> None:
        # New data may satisfy waiting fetches (followers read to the LEO,
        # consumers to the HW); a moved HW may complete acks=-1 produces.
        self.delayed_fetch_purgatory.check_and_complete(tp)
        if hw_moved:
            self.delayed_produce_purgatory.check_and_complete(tp)

    def _note_space(
        self, tp: TopicPartition, partition: Partition | None, error: BaseException | None
    ) -> None:
        """Log a log dir running out of space, and getting it back, once each."""
        if partition is None:
            return
        if error is None:
            if self._dirs_out_of_space:
                log_dir = os.path.dirname(partition.log.dir)
                if log_dir in self._dirs_out_of_space:
                    self._dirs_out_of_space.discard(log_dir)
                    _log.info("log dir %s has space again: appends to it succeed", log_dir)
            return
        if isinstance(error, (KafkaStorageError, OSError)) and error.errno in _NO_SPACE:
            log_dir = os.path.dirname(partition.log.dir)
            if log_dir not in self._dirs_out_of_space:
                self._dirs_out_of_space.add(log_dir)
                _log.warning(
                    "log dir %s is out of space: appends to it fail with "
                    "KAFKA_STORAGE_ERROR until space is freed (first: %s: %s)",
                    log_dir,
                    tp,
                    error,
                )

    @staticmethod
    def _log_unexpected(tp: TopicPartition, e: BaseException) -> None:
        if not isinstance(e, KafkaError) or e.code == ErrorCode.UNKNOWN_SERVER_ERROR:
            _log.error("append to %s failed", tp, exc_info=e)

    # ------------------------------------------------------------------ fetch

    def read_from_local_log(
        self, params: FetchParams, requests: Sequence[FetchPartitionRequest]
    ) -> list[FetchPartitionResult]:
        """Read every requested partition, within the partition and response
        byte limits; the first batch found is returned whole even over the
        limits (KIP-74) unless the request version forbids it."""
        limit = params.max_bytes
        min_one = not params.hard_max_bytes_limit
        out: list[FetchPartitionResult] = []
        for req in requests:
            partition = self._partitions.get(req.tp)
            if partition is None:
                out.append(FetchPartitionResult(self.not_hosted(req.tp).code))
                continue
            max_bytes = max(0, min(req.partition_max_bytes, limit))
            throttled = params.is_from_follower and self._leader_throttled(
                partition, params.replica_id
            )
            held = throttled and self.leader_quota.is_quota_exceeded()
            if held:
                max_bytes = 0  # no data this time: positions and the HW still move
            try:
                read = partition.read_records(
                    req.fetch_offset,
                    max_bytes,
                    isolation=params.isolation,
                    current_leader_epoch=req.current_leader_epoch,
                    last_fetched_epoch=req.last_fetched_epoch,
                    min_one_message=min_one and not held,
                )
            except KafkaError as e:
                self._maybe_offline(partition, "reading", e)
                out.append(FetchPartitionResult(e.code))
                continue
            except Exception as e:
                if self._maybe_offline(partition, "reading", e):
                    out.append(FetchPartitionResult(ErrorCode.KAFKA_STORAGE_ERROR))
                    continue
                _log.error("fetch of %s failed", req.tp, exc_info=e)
                out.append(FetchPartitionResult(ErrorCode.UNKNOWN_SERVER_ERROR))
                continue
            records = read.fetched.records
            size = records.size
            if size > 0:
                min_one = False
                limit = max(0, limit - size)
                if throttled:
                    self.leader_quota.record(size)
            # A follower whose log diverges is told where to truncate; its
            # fetch offset is not a position of the leader's log, so it moves
            # neither its LEO here, the ISR nor the HW (as Kafka's fetchRecords).
            if (
                params.is_from_follower
                and read.diverging_epoch is None
                and partition.update_follower_fetch_state(
                    params.replica_id, req.fetch_offset, req.log_start_offset
                )
            ):
                self._hw_moved(req.tp)
            out.append(
                FetchPartitionResult(
                    error_code=ErrorCode.NONE,
                    high_watermark=read.high_watermark,
                    last_stable_offset=read.last_stable_offset,
                    log_start_offset=read.log_start_offset,
                    records=records,
                    diverging_epoch=read.diverging_epoch,
                    fetch_offset_metadata=read.fetched.fetch_offset_metadata,
                    leader_epoch=partition.leader_epoch,
                    aborted_transactions=read.fetched.aborted_transactions,
                )
            )
        return out

    def _leader_throttled(self, partition: Partition, replica_id: int) -> bool:
        """Kafka's shouldLeaderThrottle: an out-of-sync follower of a replica
        the topic's leader.replication.throttled.replicas names here."""
        return replica_id not in partition.isr and self.leader_quota.is_throttled(
            partition.tp, partition.log.config.leader_replication_throttled_replicas
        )

    def leader_held(self, partition: Partition, replica_id: int) -> bool:
        """A throttled follower's partition while the leader's rate is over its bound."""
        return (
            self._leader_throttled(partition, replica_id) and self.leader_quota.is_quota_exceeded()
        )

    def follower_throttled(self, partition: Partition) -> bool:
        """Kafka's shouldFollowerThrottle, for this broker's fetchers."""
        return self.broker_id not in partition.isr and self.follower_quota.is_throttled(
            partition.tp, partition.log.config.follower_replication_throttled_replicas
        )

    async def fetch_messages(
        self,
        params: FetchParams,
        requests: Sequence[FetchPartitionRequest],
        *,
        before_wait: Callable[[], None] | None = None,
    ) -> list[FetchPartitionResult]:
        """Answer at once when the wait is 0, nothing is asked, min_bytes are
        there, or a partition errs or diverges; else wait in the purgatory."""
        results = self.read_from_local_log(params, requests)
        stats = self.broker_topic_stats

        def sent(res: list[FetchPartitionResult]) -> list[FetchPartitionResult]:
            for req, r in zip(requests, res, strict=True):
                if r.error_code == ErrorCode.NONE:
                    stats.fetched(req.tp.topic, from_follower=params.is_from_follower, size=r.size)
            return res

        readable = 0
        must_answer = params.max_wait_ms <= 0 or not requests
        for r in results:
            readable += r.size
            if r.error_code != ErrorCode.NONE or r.diverging_epoch is not None:
                must_answer = True
        if must_answer or readable >= params.min_bytes:
            return sent(results)
        # Woken by an append, the Fetch's handler resumes and answers inside
        # it (see EagerFuture), before the appending request's own answer.
        fut: EagerFuture[list[FetchPartitionResult]] = EagerFuture()

        def respond(res: list[FetchPartitionResult]) -> None:
            if not fut.done():
                fut.set_result(sent(res))

        op = DelayedFetch(
            params.max_wait_ms,
            params,
            [(req, r.fetch_offset_metadata) for req, r in zip(requests, results, strict=True)],
            self,
            respond,
        )
        if (
            not self.delayed_fetch_purgatory.try_complete_else_watch(
                op, [req.tp for req in requests]
            )
            and before_wait is not None
        ):
            before_wait()
        return await fut

    # ------------------------------------------------------------------ offsets

    def fetch_offset_for_timestamp(
        self,
        tp: TopicPartition,
        timestamp: int,
        *,
        isolation: FetchIsolation | None,
        current_leader_epoch: int = -1,
    ) -> TimestampAndOffset | None:
        return self.get_partition_or_error(tp).fetch_offset_for_timestamp(
            timestamp, isolation=isolation, current_leader_epoch=current_leader_epoch
        )

    def last_offset_for_leader_epoch(
        self, tp: TopicPartition, current_leader_epoch: int, leader_epoch: int
    ) -> EpochEndOffset:
        partition = self._partitions.get(tp)
        if partition is None:
            return EpochEndOffset(self.not_hosted(tp).code, -1, -1)
        return partition.last_offset_for_leader_epoch(current_leader_epoch, leader_epoch)

    def delete_records(
        self, offsets: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, tuple[int, int]]:
        """DeleteRecords: {tp: (error code, low watermark)}; -1 means the HW."""
        out: dict[TopicPartition, tuple[int, int]] = {}
        for tp, offset in offsets.items():
            try:
                low = self.get_partition_or_error(tp).delete_records_before(offset)
                out[tp] = (ErrorCode.NONE, low)
            except KafkaError as e:
                out[tp] = (e.code, -1)
        return out

    def topic_partitions(self, topics: Iterable[str]) -> list[TopicPartition]:
        wanted = set(topics)
        return sorted(tp for tp in self._partitions if tp.topic in wanted)

    # ------------------------------------------------------------------ replication

    @property
    def broker_epoch(self) -> int:
        return self._broker_epoch()

    def _hw_moved(self, tp: TopicPartition) -> None:
        # acks=-1 produces wait for the HW, consumers' fetches read up to it.
        self.delayed_produce_purgatory.check_and_complete(tp)
        self.delayed_fetch_purgatory.check_and_complete(tp)

    def _on_isr_change(self, partition: Partition, kind: str) -> None:
        if kind == "shrink":
            self.isr_shrinks += 1
        else:
            self.isr_expands += 1
        _log.info("ISR of %s %ss to %s (partition epoch %d)", partition.tp, kind,
                  partition.in_sync_replicas, partition.partition_epoch)  # fmt: skip
        # A shrink may move the HW (waiting produces and consumer fetches), or
        # leave fewer replicas than min.insync.replicas. The purgatories live
        # on the event loop, and a ZooKeeper-mode ISR change lands on the
        # AlterIsr worker thread: completing a DelayedProduce there answered
        # its request from that thread, racing the loop's writes on the same
        # connection (a response lost, a request unanswered until the client
        # gave up, or the response queue popped twice).
        self._on_loop(self._hw_moved_all, [partition.tp])

    def _hw_moved_all(self, tps: list[TopicPartition]) -> None:
        for tp in tps:
            self._hw_moved(tp)

    def _fence(self, controller_epoch: int, broker_epoch: int, what: str) -> int:
        """STALE_BROKER_EPOCH when the request was meant for an older
        registration of this broker, STALE_CONTROLLER_EPOCH when it comes
        from an older controller; NONE otherwise (and the epoch is noted)."""
        mine = self.broker_epoch
        if broker_epoch != -1 and mine != -1 and broker_epoch < mine:
            _log.warning("ignoring %s for broker epoch %d: this broker's is %d",
                         what, broker_epoch, mine)  # fmt: skip
            return ErrorCode.STALE_BROKER_EPOCH
        if controller_epoch < self.controller_epoch:
            _log.warning("ignoring %s from controller epoch %d: the latest is %d",
                         what, controller_epoch, self.controller_epoch)  # fmt: skip
            return ErrorCode.STALE_CONTROLLER_EPOCH
        self.controller_epoch = controller_epoch
        return ErrorCode.NONE

    def maybe_update_metadata_cache(
        self,
        *,
        controller_id: int,
        controller_epoch: int,
        broker_epoch: int,
        brokers: list[MetadataBroker],
        partitions: list[PartitionInfo],
        topic_ids: Mapping[str, str] | None = None,
    ) -> UpdateMetadataResult:
        """UpdateMetadata: the error code to answer, and the partitions the
        update deleted (Kafka's maybeUpdateMetadataCache)."""
        code = self._fence(controller_epoch, broker_epoch, "UpdateMetadata")
        if code != ErrorCode.NONE:
            return UpdateMetadataResult(code)
        deleted = self.metadata_cache.update(
            controller_id=controller_id,
            brokers=brokers,
            partitions=partitions,
            topic_ids=dict(topic_ids or {}),
        )
        return UpdateMetadataResult(deleted_partitions=[TopicPartition(t, p) for t, p in deleted])

    def _leader_endpoint(
        self, leader: int, live_leaders: Mapping[int, BrokerEndPoint]
    ) -> BrokerEndPoint | None:
        ep = live_leaders.get(leader)
        if ep is not None:
            return ep
        found = self.metadata_cache.broker_endpoint(leader, self.inter_broker_listener)
        return BrokerEndPoint(leader, found.host, found.port) if found is not None else None

    def _partition_for_controller(
        self, tp: TopicPartition, topic_id: str | None, state: PartitionState
    ) -> Partition:
        """The partition, made (log included) for a LeaderAndIsr if new. The
        topic is registered in the metadata store when it lacks it (a store of
        one broker; a ZooKeeper store already has it), under the controller's id."""
        partition = self._partitions.get(tp)
        if partition is not None:
            return partition
        store = self.metadata_store
        meta = store.topic(tp.topic)
        if meta is None or meta.partitions <= tp.partition:
            meta = store.reload_topic(tp.topic)
        if meta is None:
            # The one-broker store places nothing on other brokers (RF 1 is its
            # only value); the replicas are the controller's, in the Partition.
            meta = store.create_topic(tp.topic, tp.partition + 1, 1, topic_id=topic_id)
        elif meta.partitions <= tp.partition:
            meta = store.add_partitions(tp.topic, tp.partition + 1)
        if meta.configs:  # the log starts with the topic's overrides
            self.log_manager.update_topic_config(tp.topic, meta.configs)
        offline = self.log_manager.offline_log_dirs
        if offline and not state.is_new and self.log_manager.get_log(tp) is None:
            # Kafka's getOrCreateLog: a replica that existed before may be on
            # the failed directory; an empty one elsewhere would hide that.
            raise KafkaStorageError(
                f"cannot create the log of {tp}: log directories {', '.join(offline)} are offline"
            )
        log = self.log_manager.get_or_create_log(
            tp, topic_id=meta.topic_id, config=self.log_manager.config_for(tp.topic)
        )
        partition = self._wire(
            Partition(
                tp,
                log,
                topic_id=meta.topic_id,
                local_broker_id=self.broker_id,
                replicas=list(state.replicas),
                leader_epoch=-1,
                as_leader=False,
            )
        )
        # Copy on write, as everywhere: readers on other threads see a whole map.
        self._partitions = {**self._partitions, tp: partition}
        return partition

    def become_leader_or_follower(
        self,
        *,
        controller_id: int,
        controller_epoch: int,
        broker_epoch: int,
        partition_states: Mapping[TopicPartition, PartitionState],
        topic_ids: Mapping[str, str] | None = None,
        live_leaders: Mapping[int, BrokerEndPoint] | None = None,
    ) -> ControllerResult:
        """LeaderAndIsr: make this broker leader or follower of each partition
        whose leader epoch is newer than the one it has (or equal with a newer
        partition epoch: an ISR or assignment change). Per partition:
        STALE_CONTROLLER_EPOCH for an older leader epoch (or a repeated one),
        INCONSISTENT_TOPIC_ID when the topic id differs from the local log's,
        UNKNOWN_TOPIC_OR_PARTITION when this broker is not a replica."""
        code = self._fence(controller_epoch, broker_epoch, "LeaderAndIsr")
        if code != ErrorCode.NONE:
            return ControllerResult(code, {tp: code for tp in partition_states})
        self.controller_managed = True
        ids = dict(topic_ids or {})
        leaders = dict(live_leaders or {})
        errors: dict[TopicPartition, int] = {}
        to_lead: dict[Partition, PartitionState] = {}
        to_follow: dict[Partition, PartitionState] = {}
        for tp, state in partition_states.items():
            if tp in self._offline_partitions:
                # Kafka: the controller learns from this that the replica is offline.
                errors[tp] = ErrorCode.KAFKA_STORAGE_ERROR
                continue
            if self.broker_id not in state.replicas:
                _log.warning("LeaderAndIsr for %s leaves this broker out of %s",
                             tp, list(state.replicas))  # fmt: skip
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            topic_id = ids.get(tp.topic)
            existing = self._partitions.get(tp)
            if existing is not None and topic_id and existing.topic_id != topic_id:
                errors[tp] = ErrorCode.INCONSISTENT_TOPIC_ID
                continue
            if existing is not None and existing.from_controller:
                stale = state.leader_epoch < existing.leader_epoch or (
                    state.leader_epoch == existing.leader_epoch
                    and state.partition_epoch <= existing.partition_epoch
                )
                if stale:
                    _log.info("ignoring LeaderAndIsr for %s at leader epoch %d (partition "
                              "epoch %d): it has %d (%d)", tp, state.leader_epoch,
                              state.partition_epoch, existing.leader_epoch,
                              existing.partition_epoch)  # fmt: skip
                    errors[tp] = ErrorCode.STALE_CONTROLLER_EPOCH
                    continue
            elif existing is not None and state.leader_epoch < existing.leader_epoch:
                errors[tp] = ErrorCode.STALE_CONTROLLER_EPOCH
                continue
            try:
                partition = self._partition_for_controller(tp, topic_id, state)
            except KafkaError as e:
                _log.error("cannot make %s for LeaderAndIsr: %s", tp, e)
                errors[tp] = e.code
                continue
            errors[tp] = ErrorCode.NONE
            if state.leader == self.broker_id:
                to_lead[partition] = state
            else:
                to_follow[partition] = state
        self._make_leaders(to_lead)
        self._make_followers(to_follow, leaders)
        self._maybe_add_log_dir_fetchers(p.tp for p in [*to_lead, *to_follow])
        self.replica_fetcher_manager.shutdown_idle_fetcher_threads()
        self._ensure_isr_expiration()
        return ControllerResult(ErrorCode.NONE, errors)

    def _seed_isr_state(self, partition: Partition, state: PartitionState) -> None:
        manager = self.alter_isr_manager
        if isinstance(manager, InProcessAlterIsrManager):
            manager.seed(
                partition.tp,
                LeaderAndIsr(state.leader, state.leader_epoch, state.isr, state.partition_epoch),
            )

    def _make_leaders(self, states: Mapping[Partition, PartitionState]) -> None:
        if not states:
            return
        self.replica_fetcher_manager.remove_fetcher_for_partitions(p.tp for p in states)
        for partition, state in states.items():
            self._seed_isr_state(partition, state)
            if partition.make_leader(state):
                _log.info("leading %s at epoch %d, ISR %s", partition.tp, state.leader_epoch,
                          list(state.isr))  # fmt: skip
            self._hw_moved(partition.tp)

    def _make_followers(
        self, states: Mapping[Partition, PartitionState], live_leaders: Mapping[int, BrokerEndPoint]
    ) -> None:
        if not states:
            return
        restart: dict[TopicPartition, InitialFetchState] = {}
        stop: list[TopicPartition] = []
        for partition, state in states.items():
            self._seed_isr_state(partition, state)
            changed = partition.make_follower(state)
            tp = partition.tp
            # Waiting produces and fetches answer NOT_LEADER_OR_FOLLOWER now.
            self.delayed_produce_purgatory.check_and_complete(tp)
            for op in self.delayed_fetch_purgatory.cancel_for_key(tp):
                op.force_complete()
            leader = self._leader_endpoint(state.leader, live_leaders)
            if leader is None:
                # Kafka: a follower of an unavailable leader waits for the next LeaderAndIsr.
                _log.warning("%s: leader %d is unknown; not fetching", tp, state.leader)
                stop.append(tp)
                continue
            fetching = self.replica_fetcher_manager.partition_fetcher(tp)
            if changed or fetching is None or fetching.source != leader:
                restart[tp] = InitialFetchState(
                    leader, state.leader_epoch, partition.log_end_offset
                )
                _log.info("following broker %d for %s at epoch %d", state.leader, tp,
                          state.leader_epoch)  # fmt: skip
        self.replica_fetcher_manager.remove_fetcher_for_partitions(stop)
        if restart:
            self.replica_fetcher_manager.add_fetcher_for_partitions(restart)

    def stop_replicas(
        self,
        *,
        controller_id: int,
        controller_epoch: int,
        broker_epoch: int,
        partitions: Mapping[TopicPartition, StopReplicaState],
    ) -> ControllerResult:
        """StopReplica: stop fetching each partition and, with ``delete``,
        drop it and delete its log. FENCED_LEADER_EPOCH for a partition whose
        leader epoch moved past the request's."""
        code = self._fence(controller_epoch, broker_epoch, "StopReplica")
        if code != ErrorCode.NONE:
            return ControllerResult(code, {tp: code for tp in partitions})
        errors: dict[TopicPartition, int] = {}
        stopping: list[TopicPartition] = []
        for tp, st in partitions.items():
            partition = self._partitions.get(tp)
            if (
                partition is not None
                and st.leader_epoch not in (_EPOCH_DURING_DELETE, _NO_EPOCH)
                and st.leader_epoch < partition.leader_epoch
            ):
                errors[tp] = ErrorCode.FENCED_LEADER_EPOCH
                continue
            errors[tp] = ErrorCode.NONE
            stopping.append(tp)
        self.replica_fetcher_manager.remove_fetcher_for_partitions(stopping)
        # Kafka stops the moves too; a future log kept goes on at the next LeaderAndIsr.
        self.alter_log_dirs_manager.remove_partitions(stopping)
        for tp in stopping:
            if not partitions[tp].delete:
                continue
            # Deleted: a partition of that name made later is a new one.
            self._offline_partitions = self._offline_partitions - {tp}
            partition = self._partitions.get(tp)
            if partition is not None:
                self._partitions = {k: v for k, v in self._partitions.items() if k != tp}
                partition.leader_id = None
            for op in self.delayed_fetch_purgatory.cancel_for_key(tp):
                op.force_complete()
            self.delayed_produce_purgatory.check_and_complete(tp)
            if self.log_manager.get_log(tp) is not None:
                self.log_manager.async_delete(tp)
        hosted = {tp.topic for tp in self._partitions}
        for topic in {tp.topic for tp in stopping if partitions[tp].delete} - hosted:
            self.broker_topic_stats.remove(topic)  # its per-topic series go with it
        self.replica_fetcher_manager.shutdown_idle_fetcher_threads()
        return ControllerResult(ErrorCode.NONE, errors)

    async def append_to_follower(self, partition: Partition, records: memoryview) -> None:
        """A fetcher's append; large ones on the append executor (the native
        append drops the GIL), so the loop keeps serving."""
        try:
            if len(records) < self.append_offload_bytes:
                partition.append_records_to_follower(records)
            else:
                loop = asyncio.get_running_loop()
                await loop.run_in_executor(
                    self._executor, partition.append_records_to_follower, records
                )
        except Exception as e:
            self._maybe_offline(partition, "appending to follower", e)
            raise

    # ------------------------------------------------------------------ ISR expiration

    def _ensure_isr_expiration(self) -> None:
        if self._isr_task is None or self._isr_task.done():
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # called off the loop (a test): the caller shrinks
                return
            self._isr_task = loop.create_task(self._isr_expiration(), name="isr-expiration")

    async def _isr_expiration(self) -> None:
        """Kafka's isr-expiration task: every half of replica.lag.time.max.ms."""
        interval = self.isr_expiration_interval_ms
        if interval is None:
            interval = self.replica_lag_time_max_ms // 2
        period = max(interval, 10) / 1000
        while True:
            await asyncio.sleep(period)
            self.maybe_shrink_isr()

    def maybe_shrink_isr(self) -> None:
        for tp, partition in list(self._partitions.items()):
            if partition.is_leader and len(partition.isr) > 1:
                try:
                    if partition.maybe_shrink_isr(self.replica_lag_time_max_ms):
                        self._hw_moved(tp)
                except Exception:
                    _log.exception("ISR expiration of %s failed", tp)

    async def shutdown_replica_fetchers(self) -> None:
        if self._isr_task is not None:
            self._isr_task.cancel()
            self._isr_task = None
        await self.replica_fetcher_manager.shutdown()

    # ------------------------------------------------------------------ metrics

    def register_metrics(self, metrics: MetricsRegistry) -> None:
        """Kafka's ReplicaManager and ReplicaFetcherManager metrics."""

        # The map is replaced, never changed in place: read the current one.
        def parts() -> list[Partition]:
            return list(self._partitions.values())

        metrics.gauge(
            "kafka_server_replicamanager_leadercount",
            "Partitions this broker leads (Kafka's LeaderCount).",
            lambda: float(sum(1 for p in parts() if p.is_leader)),
        )
        stats = self.broker_topic_stats
        for meter, doc in BROKER_TOPIC_METERS.items():
            metrics.gauge(
                f"kafka_server_brokertopicmetrics_{meter.lower()}_total",
                doc + " No topic label: all topics.",
                lambda meter=meter: list(stats.series(meter)),  # type: ignore[misc]
                kind="counter",
            )
        metrics.gauge(
            "kafka_server_replicamanager_underreplicatedpartitions",
            "Partitions this broker leads whose ISR is smaller than their replicas.",
            lambda: float(sum(1 for p in parts() if p.is_under_replicated)),
        )
        metrics.gauge(
            "kafka_server_replicamanager_underminisrpartitioncount",
            "Partitions this broker leads whose ISR is below min.insync.replicas.",
            lambda: float(sum(1 for p in parts() if p.is_under_min_isr)),
        )
        metrics.gauge(
            "kafka_server_replicamanager_isrshrinks_total",
            "ISR shrinks of partitions this broker leads (Kafka's IsrShrinksPerSec).",
            lambda: float(self.isr_shrinks),
            kind="counter",
        )
        metrics.gauge(
            "kafka_server_replicamanager_isrexpands_total",
            "ISR expansions of partitions this broker leads (Kafka's IsrExpandsPerSec).",
            lambda: float(self.isr_expands),
            kind="counter",
        )
        purgatories = (self.delayed_produce_purgatory, self.delayed_fetch_purgatory)
        metrics.gauge(
            "kafka_server_delayedoperationpurgatory_purgatorysize",
            "Operations watched in each purgatory, once per key (Kafka's PurgatorySize).",
            lambda: [({"delayedOperation": p.name}, float(p.watched())) for p in purgatories],
        )
        metrics.gauge(
            "kafka_server_delayedoperationpurgatory_numdelayedoperations",
            "Operations waiting in each purgatory for their deadline (Kafka's "
            "NumDelayedOperations).",
            lambda: [({"delayedOperation": p.name}, float(p.delayed())) for p in purgatories],
        )
        metrics.gauge(
            "pylog_server_delayedoperationpurgatory_operations_total",
            "Operations handed to each purgatory, completed at once or not (an acks=-1 "
            "Produce whose appends are already committed never is).",
            lambda: [
                ({"delayedOperation": p.name}, float(p.operations_total)) for p in purgatories
            ],
            kind="counter",
        )
        metrics.gauge(
            "kafka_server_replicafetchermanager_maxlag",
            "Largest lag, in messages, of a partition this broker follows.",
            lambda: [({"clientId": "Replica"}, float(self.replica_fetcher_manager.max_lag))],
        )
