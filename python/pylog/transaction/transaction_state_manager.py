"""TransactionStateManager: every transactional id's metadata, in memory and
in the compacted internal topic ``__transaction_state`` (Kafka's class of
that name).

A transactional id lives on partition ``abs(hash(id)) % partitions`` of the
topic (Kafka's partitionFor: Java's String.hashCode). The topic is made on
first use, by FindCoordinator or InitProducerId, with Kafka's
``transaction.state.log.*`` keys: 50 partitions, replication factor 3
(a lone broker, the only replica there can be, uses 1 unless the key is set;
a cluster waits, COORDINATOR_NOT_AVAILABLE, until that many brokers are
alive, as pylog does for ``__consumer_offsets``), ``min.insync.replicas``
2 (never above the replication factor), compacted, uncompressed.

State is sharded by partition. :meth:`on_election` (this broker became the
partition's leader: the controller's LeaderAndIsr, or every partition on a
lone broker) reads the partition's log into a shard whose coordinator epoch
is the partition's leader epoch; requests meanwhile get
COORDINATOR_LOAD_IN_PROGRESS. Transactions found in PrepareCommit or
PrepareAbort are handed to ``on_loaded_prepared`` (the marker channel
manager resends their markers). :meth:`on_resignation` drops the shard;
requests for it then get NOT_COORDINATOR.

A transition is written with acks=-1 and applied to the cache only once
acknowledged, and only if the shard still has the coordinator epoch the
transition was prepared under (Kafka's appendTransactionToLog).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from pylog import _native
from pylog.common.topic_partition import TopicPartition
from pylog.common.transaction_version import TransactionVersion
from pylog.common.utils.time import Clock, now_ms
from pylog.coordinator.records import partition_for
from pylog.errors import (
    ErrorCode,
    InvalidReplicationFactorError,
    KafkaError,
    TopicAlreadyExistsError,
)
from pylog.log.log import AppendOrigin, FetchIsolation
from pylog.logsafe import quoted
from pylog.metadata.store import MetadataStore
from pylog.server.config import KafkaConfig
from pylog.server.replica_manager import ReplicaManager
from pylog.transaction.transaction_log import (
    TransactionLogFormatError,
    key_to_bytes,
    read_key,
    read_value,
    value_to_bytes,
)
from pylog.transaction.transaction_metadata import (
    IllegalTransitionError,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
)

__all__ = [
    "TRANSACTION_STATE_TOPIC",
    "TransactionStateManager",
    "TxnCoordinatorError",
    "TxnShard",
]

_log = logging.getLogger("pylog.transaction")

TRANSACTION_STATE_TOPIC = "__transaction_state"


class TxnCoordinatorError(Exception):
    """A request-level answer: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
    COORDINATOR_NOT_AVAILABLE."""

    def __init__(self, code: int) -> None:
        super().__init__(ErrorCode(code).name)
        self.code = code


@dataclass
class TxnShard:
    """The transactional ids of one ``__transaction_state`` partition."""

    partition: int
    coordinator_epoch: int
    loaded: bool = False
    txns: dict[str, TransactionMetadata] = field(default_factory=dict)


def _append_error(code: int) -> int:
    """What the coordinator answers when its write failed (Kafka's mapping in
    appendTransactionToLog)."""
    if code in (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.REQUEST_TIMED_OUT,
    ):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    return ErrorCode.UNKNOWN_SERVER_ERROR if code else ErrorCode.NONE


class TransactionStateManager:
    def __init__(
        self,
        config: KafkaConfig,
        replica_manager: ReplicaManager,
        metadata_store: MetadataStore,
        *,
        clock: Clock = now_ms,
        transaction_version: Callable[[], TransactionVersion] = lambda: TransactionVersion.TV_0,
    ) -> None:
        self.config = config
        #: The cluster's finalized transaction.version: the version of the
        #: values written (Kafka's transactionVersionLevel), and the level of
        #: the coordinator's own aborts (timeouts, fences).
        self.transaction_version = transaction_version
        self.replica_manager = replica_manager
        self.metadata_store = metadata_store
        self.clock = clock
        self.max_timeout_ms = int(config.get("transaction.max.timeout.ms"))
        self.expiration_ms = int(config.get("transactional.id.expiration.ms"))
        self.load_buffer_size = int(config.get("transaction.state.log.load.buffer.size"))
        # Kafka writes with the request timeout of the producer's request; a
        # bounded wait of its own here (the replicas answer or the write fails).
        self.append_timeout_ms = int(config.get("offsets.commit.timeout.ms"))
        self.shards: dict[int, TxnShard] = {}
        self._loading: dict[int, TxnShard] = {}
        self._warned_brokers = -1
        #: Called with (coordinator epoch, metadata) for each transaction a
        #: load finds in PrepareCommit / PrepareAbort: its markers are resent.
        self.on_loaded_prepared: Callable[[int, TransactionMetadata], None] | None = None
        #: Called with a partition this broker stops coordinating.
        self.on_unloaded: Callable[[int], None] | None = None

    # ------------------------------------------------------------ the topic

    @property
    def controller_managed(self) -> bool:
        return self.replica_manager.controller_managed

    @property
    def num_partitions(self) -> int:
        meta = self.metadata_store.topic(TRANSACTION_STATE_TOPIC)
        if meta is not None:
            return int(meta.partitions)
        placed = self.replica_manager.metadata_cache.partitions_of(TRANSACTION_STATE_TOPIC)
        if placed:
            return len(placed)
        return int(self.config.get("transaction.state.log.num.partitions"))

    @property
    def replication_factor(self) -> int:
        key = "transaction.state.log.replication.factor"
        if self.controller_managed or self.config.is_set(key):
            return int(self.config.get(key))
        return 1

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions)

    def topic_exists(self) -> bool:
        if self.metadata_store.topic(TRANSACTION_STATE_TOPIC) is not None:
            return True
        return self.replica_manager.metadata_cache.contains_topic(TRANSACTION_STATE_TOPIC)

    def ensure_topic(self) -> None:
        """Create ``__transaction_state`` if missing (blocks on the store: run
        it off the event loop). A lone broker then coordinates every
        partition at once (empty); on a cluster the controller places them
        and LeaderAndIsr elects. TxnCoordinatorError(COORDINATOR_NOT_AVAILABLE)
        while fewer brokers are alive than the replication factor."""
        if self.metadata_store.topic(TRANSACTION_STATE_TOPIC) is not None:
            return
        c = self.config
        factor = self.replication_factor
        if self.controller_managed:
            alive = len(self.replica_manager.metadata_cache.alive_brokers())
            if alive < factor:
                if alive != self._warned_brokers:
                    self._warned_brokers = alive
                    _log.error(
                        "%s not created: %d live broker(s), fewer than its replication factor "
                        "%d (transaction.state.log.replication.factor); transactions have no "
                        "coordinator until enough brokers are up",
                        TRANSACTION_STATE_TOPIC,
                        alive,
                        factor,
                    )
                raise TxnCoordinatorError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        min_isr = min(int(c.get("transaction.state.log.min.isr")), factor)
        configs = {
            "cleanup.policy": "compact",
            "compression.type": "uncompressed",
            "min.insync.replicas": str(min_isr),
            "unclean.leader.election.enable": "false",
            "segment.bytes": str(c.get("transaction.state.log.segment.bytes")),
        }
        try:
            meta = self.metadata_store.create_topic(
                TRANSACTION_STATE_TOPIC,
                int(c.get("transaction.state.log.num.partitions")),
                factor,
                configs,
            )
        except TopicAlreadyExistsError:
            return
        except InvalidReplicationFactorError as e:
            _log.error("%s not created: %s", TRANSACTION_STATE_TOPIC, e)
            raise TxnCoordinatorError(ErrorCode.COORDINATOR_NOT_AVAILABLE) from e
        _log.info(
            "created %s: %d partitions, replication factor %d, min.insync.replicas %d",
            TRANSACTION_STATE_TOPIC,
            meta.partitions,
            factor,
            min_isr,
        )
        if self.controller_managed:
            return
        for p in range(meta.partitions):
            self.shards.setdefault(p, TxnShard(p, self._leader_epoch(p), loaded=True))

    def _leader_epoch(self, partition: int) -> int:
        p = self.replica_manager.partition(TopicPartition(TRANSACTION_STATE_TOPIC, partition))
        return p.leader_epoch if p is not None else 0

    # ------------------------------------------------------------ election

    def start_loading(self) -> list[asyncio.Task[None]]:
        """A lone broker with an existing topic: every partition is elected."""
        meta = self.metadata_store.topic(TRANSACTION_STATE_TOPIC)
        if meta is None or self.controller_managed:
            return []
        loop = asyncio.get_running_loop()
        return [
            loop.create_task(self.on_election(p, self._leader_epoch(p)))
            for p in range(meta.partitions)
        ]

    async def on_election(self, partition: int, coordinator_epoch: int) -> None:
        """This broker leads ``partition`` at ``coordinator_epoch``: read its
        log into a new shard. A shard already held at that epoch stays (a
        LeaderAndIsr that only changed the ISR)."""
        shard = self.shards.get(partition)
        if (
            shard is not None
            and shard.coordinator_epoch == coordinator_epoch
            and (shard.loaded or self._loading.get(partition) is shard)
        ):
            return
        if shard is not None and self.on_unloaded is not None:
            self.on_unloaded(partition)  # an older epoch's markers stop
        shard = TxnShard(partition, coordinator_epoch)
        self.shards[partition] = shard
        self._loading[partition] = shard
        t0 = time.perf_counter()
        try:
            loaded, records = await asyncio.to_thread(self._read_partition, partition)
        except Exception:
            _log.exception("loading %s-%d failed", TRANSACTION_STATE_TOPIC, partition)
            loaded, records = {}, 0
        finally:
            if self._loading.get(partition) is shard:
                del self._loading[partition]
        if self.shards.get(partition) is not shard:
            return  # resigned (or re-elected) meanwhile
        shard.txns = loaded
        shard.loaded = True
        prepared = [
            m
            for m in loaded.values()
            if m.state in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT)
        ]
        if loaded:
            _log.info(
                "coordinating %d transactional id(s) of %s-%d at epoch %d "
                "(%d records, %.0f ms; %d transaction(s) to complete)",
                len(loaded),
                TRANSACTION_STATE_TOPIC,
                partition,
                coordinator_epoch,
                records,
                (time.perf_counter() - t0) * 1000,
                len(prepared),
            )
        if self.on_loaded_prepared is not None:
            for m in prepared:
                self.on_loaded_prepared(coordinator_epoch, m)

    def on_resignation(self, partition: int, coordinator_epoch: int | None = None) -> None:
        """This broker no longer leads ``partition`` (or leads it at a newer
        epoch than ``coordinator_epoch``): its transactional ids go."""
        shard = self.shards.get(partition)
        if shard is None:
            return
        if coordinator_epoch is not None and shard.coordinator_epoch > coordinator_epoch:
            return
        del self.shards[partition]
        self._loading.pop(partition, None)
        if self.on_unloaded is not None:
            self.on_unloaded(partition)
        if shard.txns:
            _log.info(
                "no longer coordinating %s-%d (%d transactional ids)",
                TRANSACTION_STATE_TOPIC,
                partition,
                len(shard.txns),
            )

    def _read_partition(self, partition: int) -> tuple[dict[str, TransactionMetadata], int]:
        """Every record of the partition, the last one of each id winning."""
        out: dict[str, TransactionMetadata] = {}
        records = 0
        p = self.replica_manager.partition(TopicPartition(TRANSACTION_STATE_TOPIC, partition))
        if p is None:
            return out, 0
        log = p.log
        offset, end = log.log_start_offset, log.log_end_offset
        while offset < end:
            data = log.read_bytes(offset, self.load_buffer_size, FetchIsolation.LOG_END, True)
            if not data:
                break
            next_offset = offset
            batches, _ = _native.decode_batches(data)
            for batch, recs in batches:
                for rec in recs:
                    records += 1
                    if rec.key is None:
                        continue
                    try:
                        txn_id = read_key(rec.key)
                        if rec.value is None:
                            out.pop(txn_id, None)
                        else:
                            out[txn_id] = read_value(rec.value).to_metadata(txn_id)
                    except (TransactionLogFormatError, UnicodeDecodeError) as e:
                        _log.warning(
                            "skipping an unreadable %s record: %s", TRANSACTION_STATE_TOPIC, e
                        )
                next_offset = max(next_offset, batch.last_offset + 1)
            if next_offset <= offset:
                break
            offset = next_offset
        return out, records

    # ------------------------------------------------------------ lookup

    def shard_for(self, transactional_id: str) -> TxnShard:
        """The id's shard, or TxnCoordinatorError: NOT_COORDINATOR for a
        partition this broker does not hold (the topic not made yet too, as
        Kafka answers), COORDINATOR_LOAD_IN_PROGRESS while it loads."""
        shard = self.shards.get(self.partition_for(transactional_id))
        if shard is None:
            raise TxnCoordinatorError(ErrorCode.NOT_COORDINATOR)
        if not shard.loaded:
            raise TxnCoordinatorError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        return shard

    def get_transaction_state(
        self, transactional_id: str
    ) -> tuple[int, TransactionMetadata | None]:
        """(coordinator epoch, the id's metadata or None)."""
        shard = self.shard_for(transactional_id)
        return shard.coordinator_epoch, shard.txns.get(transactional_id)

    def put_transaction_state_if_not_exists(
        self, metadata: TransactionMetadata
    ) -> tuple[int, TransactionMetadata]:
        shard = self.shard_for(metadata.transactional_id)
        return shard.coordinator_epoch, shard.txns.setdefault(metadata.transactional_id, metadata)

    def all_transactions(self) -> Iterator[TransactionMetadata]:
        for shard in list(self.shards.values()):
            if shard.loaded:
                yield from list(shard.txns.values())

    def loading(self) -> bool:
        return any(not s.loaded for s in self.shards.values())

    def validate_transaction_timeout(self, timeout_ms: int) -> bool:
        return 0 < timeout_ms <= self.max_timeout_ms

    # ------------------------------------------------------------ writing

    async def append_transaction_to_log(
        self, transactional_id: str, coordinator_epoch: int, transit: TxnTransitMetadata
    ) -> int:
        """Write ``transit`` (acks=-1); on success apply it to the id's
        metadata. Returns the error code the request is answered with; on
        any error the pending transition is dropped."""
        partition = self.partition_for(transactional_id)
        tp = TopicPartition(TRANSACTION_STATE_TOPIC, partition)
        value = value_to_bytes(transit, self.transaction_version().transaction_log_value_version)
        batch = _native.build_batch([(key_to_bytes(transactional_id), value, [], self.clock())])
        try:
            results = await self.replica_manager.append_records(
                self.append_timeout_ms,
                -1,
                {tp: bytearray(batch)},
                internal_topics_allowed=True,
                origin=AppendOrigin.COORDINATOR,
            )
            code = _append_error(results[tp].error_code)
            raw = results[tp].error_code
        except KafkaError as e:
            code, raw = _append_error(e.code), e.code
        shard = self.shards.get(partition)
        metadata = shard.txns.get(transactional_id) if shard is not None else None
        if shard is None or shard.coordinator_epoch != coordinator_epoch or metadata is None:
            # Resigned, or re-elected, while the write was under way: the new
            # coordinator (maybe this broker, later) owns the id now.
            return ErrorCode.NOT_COORDINATOR
        if code != ErrorCode.NONE:
            _log.warning(
                "writing %s of %s to %s failed: %s",
                transit.state.kafka_name,
                quoted(transactional_id),
                tp,
                ErrorCode(raw).name,
            )
            metadata.abort_pending()
            return code
        try:
            metadata.complete_transition_to(transit)
        except IllegalTransitionError as e:
            _log.error("%s", e)
            return ErrorCode.UNKNOWN_SERVER_ERROR
        if transit.state == TransactionState.DEAD:
            shard.txns.pop(transactional_id, None)
        return ErrorCode.NONE

    # ------------------------------------------------------------ timeouts

    def timed_out_transactions(self) -> list[tuple[str, int, int]]:
        """(id, producer id, epoch) of each Ongoing transaction past its timeout."""
        now = self.clock()
        return [
            (m.transactional_id, m.producer_id, m.producer_epoch)
            for m in self.all_transactions()
            if m.state == TransactionState.ONGOING
            and m.pending_state is None
            and m.txn_start_ms + m.txn_timeout_ms < now
        ]

    async def remove_expired_transactional_ids(self) -> int:
        """Tombstones for ids idle past transactional.id.expiration.ms (Kafka
        keeps an id while a producer id of it may still be in a partition's
        producer state; pylog counts from the id's last update alone)."""
        now = self.clock()
        removed = 0
        for shard in list(self.shards.values()):
            if not shard.loaded:
                continue
            for m in list(shard.txns.values()):
                if (
                    m.state.expiration_allowed
                    and m.pending_state is None
                    and m.txn_last_update_ms + self.expiration_ms <= now
                ):
                    transit = m.prepare_dead()
                    code = await self.append_transaction_to_log(
                        m.transactional_id, shard.coordinator_epoch, transit
                    )
                    if code == ErrorCode.NONE:
                        removed += 1
        if removed:
            _log.info("removed %d expired transactional id(s)", removed)
        return removed
