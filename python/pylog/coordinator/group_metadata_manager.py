"""GroupMetadataManager: groups and committed offsets, kept in memory and
persisted as records of the compacted internal topic ``__consumer_offsets``.

State is sharded by ``__consumer_offsets`` partition: a group lives in the
:class:`CoordinatorShard` of ``partition_for(group_id)``. A shard is made by
:meth:`GroupMetadataManager.on_election` (the broker leads that partition:
its log is read from the start, on a worker thread, into the shard) and
dropped by :meth:`on_resignation`; requests for a group whose shard is still
loading get COORDINATOR_LOAD_IN_PROGRESS, for a shard this broker does not
hold NOT_COORDINATOR. A lone broker elects every partition at start-up. On
a cluster (a controller-managed replica manager) the topic is placed by the
controller like any other, and the broker coordinates only the partitions it
leads: the controller's LeaderAndIsr calls the same two hooks (Kafka's
onLeadershipChange), and a partition it already holds is not read again when
only its ISR changed.

Writes go through ``ReplicaManager.append_records`` (internal topics allowed;
acks ``offsets.commit.required.acks``, -1 by default; batches compressed with
``offsets.topic.compression.codec``) and only change the cache once appended,
so the cache never holds what a restart would not find.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass, field

from pylog import _native
from pylog.common.topic_partition import TopicPartition
from pylog.common.utils.time import Clock, now_ms
from pylog.coordinator.consumer_group import ConsumerGroup
from pylog.coordinator.consumer_group_records import (
    ConsumerGroupRecords,
    consumer_group_tombstones,
    decode_consumer_key,
)
from pylog.coordinator.group import (
    GroupMetadata,
    GroupState,
    MemberMetadata,
    OffsetAndMetadata,
)
from pylog.coordinator.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberRecord,
    OffsetCommitKey,
    OffsetCommitValue,
    RecordFormatError,
    decode_group_value,
    decode_key,
    decode_offset_value,
    partition_for,
)
from pylog.coordinator.share_group import ShareGroup
from pylog.coordinator.share_group_records import (
    ShareGroupRecords,
    decode_share_key,
    share_group_tombstones,
)
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

__all__ = ["GROUP_METADATA_TOPIC", "CoordinatorShard", "GroupMetadataManager"]

_log = logging.getLogger("pylog.coordinator")

GROUP_METADATA_TOPIC = "__consumer_offsets"


class CoordinatorError(Exception):
    """A request-level coordinator answer (NOT_COORDINATOR, LOAD_IN_PROGRESS…)."""

    def __init__(self, code: int) -> None:
        super().__init__(ErrorCode(code).name)
        self.code = code


@dataclass
class CoordinatorShard:
    """The groups of one ``__consumer_offsets`` partition."""

    partition: int
    loaded: bool = False
    groups: dict[str, GroupMetadata] = field(default_factory=dict)
    load_ms: float = 0.0


@dataclass
class _Loaded:
    offsets: dict[str, dict[tuple[str, int], OffsetAndMetadata]] = field(default_factory=dict)
    groups: dict[str, GroupMetadataValue | None] = field(default_factory=dict)
    records: int = 0
    consumer: ConsumerGroupRecords = field(default_factory=ConsumerGroupRecords)
    share: ShareGroupRecords = field(default_factory=ShareGroupRecords)
    #: Records of transactions whose marker was not read yet, by producer id.
    open_txns: dict[int, list[tuple[bytes, bytes | None]]] = field(default_factory=dict)


#: The control record's key: version int16, type int16 (0 ABORT, 1 COMMIT).
_CONTROL_KEY = struct.Struct(">hh")
_CONTROL_COMMIT = 1


def _control_type(key: bytes | None) -> int | None:
    if key is None or len(key) < _CONTROL_KEY.size:
        return None
    return int(_CONTROL_KEY.unpack_from(key)[1])


async def _held() -> None:
    """The election of a partition already held: nothing to load."""


def _append_error(code: int) -> int:
    """What a coordinator answers when its append failed (as Kafka maps it)."""
    if code in (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.REQUEST_TIMED_OUT,
    ):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
        return ErrorCode.NOT_COORDINATOR
    if code in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE):
        return ErrorCode.INVALID_COMMIT_OFFSET_SIZE
    return ErrorCode.UNKNOWN_SERVER_ERROR if code else ErrorCode.NONE


#: What a transactional offset commit's verification answers that reaches the
#: producer as it is (Kafka's maybeConvertOffsetCommitError keeps them).
_TXN_REFUSALS = frozenset(
    {
        ErrorCode.INVALID_TXN_STATE,
        ErrorCode.INVALID_PRODUCER_EPOCH,
        ErrorCode.PRODUCER_FENCED,
        ErrorCode.INVALID_PRODUCER_ID_MAPPING,
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    }
)


class GroupMetadataManager:
    def __init__(
        self,
        config: KafkaConfig,
        replica_manager: ReplicaManager,
        metadata_store: MetadataStore,
        *,
        clock: Clock = now_ms,
    ) -> None:
        self.config = config
        self.replica_manager = replica_manager
        self.metadata_store = metadata_store
        self.clock = clock
        # Kafka's codec ids (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd) are the
        # batch attribute's: group records are written with this codec
        self.compression = int(config.get("offsets.topic.compression.codec"))
        self.required_acks = int(config.get("offsets.commit.required.acks"))
        self.shards: dict[int, CoordinatorShard] = {}
        self.commit_timeout_ms = int(config.get("offsets.commit.timeout.ms"))
        self.retention_ms = int(config.get("offsets.retention.minutes")) * 60_000
        self.load_buffer_size = int(config.get("offsets.load.buffer.size"))
        self._loads: list[asyncio.Task[None]] = []
        # The shard each partition's log is being read into (one read at a time).
        self._loading: dict[int, CoordinatorShard] = {}
        self._warned_brokers = -1
        self.last_load_ms = 0.0
        self._partition_cache: dict[str, int] = {}  # the hash is per UTF-16 unit in Python
        self._cache_partitions = 0
        # The coordinator starts the sessions of members loaded from the log.
        self.on_group_loaded: Callable[[GroupMetadata], None] | None = None

    # ------------------------------------------------------------ the topic

    @property
    def controller_managed(self) -> bool:
        """A cluster member: the controller places ``__consumer_offsets`` and
        says (LeaderAndIsr) which of its partitions this broker leads."""
        return self.replica_manager.controller_managed

    @property
    def num_partitions(self) -> int:
        meta = self.metadata_store.topic(GROUP_METADATA_TOPIC)
        if meta is not None:
            return int(meta.partitions)
        # The controller's view can be ahead of the store's watch.
        placed = self.replica_manager.metadata_cache.partitions_of(GROUP_METADATA_TOPIC)
        if placed:
            return len(placed)
        return int(self.config.get("offsets.topic.num.partitions"))

    @property
    def replication_factor(self) -> int:
        """``offsets.topic.replication.factor`` (Kafka's 3 by default) on a
        cluster; a lone broker, the only replica there can be, uses 1 unless
        the key is set."""
        key = "offsets.topic.replication.factor"
        if self.controller_managed or self.config.is_set(key):
            return int(self.config.get(key))
        return 1

    def partition_for(self, group_id: str) -> int:
        n = self.num_partitions
        if n != self._cache_partitions:
            self._partition_cache.clear()
            self._cache_partitions = n
        p = self._partition_cache.get(group_id)
        if p is None:
            if len(self._partition_cache) > 100_000:
                self._partition_cache.clear()
            p = self._partition_cache[group_id] = partition_for(group_id, n)
        return p

    def ensure_topic(self) -> None:
        """Create ``__consumer_offsets`` on first use (as Kafka's FindCoordinator
        does). A lone broker elects its fresh partitions at once, empty; on a
        cluster the controller places them over the live brokers and their
        leaders load them. CoordinatorError(COORDINATOR_NOT_AVAILABLE) while
        fewer brokers are alive than the replication factor (Kafka: creation
        waits until the cluster has grown to it). Blocks on the store: call
        it off the event loop on a cluster."""
        if self.metadata_store.topic(GROUP_METADATA_TOPIC) is not None:
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
                        "%d (offsets.topic.replication.factor); groups have no coordinator "
                        "until enough brokers are up (expected while the cluster starts)",
                        GROUP_METADATA_TOPIC,
                        alive,
                        factor,
                    )
                raise CoordinatorError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        configs = {
            "cleanup.policy": "compact",
            "compression.type": "producer",
            "segment.bytes": str(c.get("offsets.topic.segment.bytes")),
        }
        try:
            meta = self.metadata_store.create_topic(
                GROUP_METADATA_TOPIC,
                int(c.get("offsets.topic.num.partitions")),
                factor,
                configs,
            )
        except TopicAlreadyExistsError:
            return
        except InvalidReplicationFactorError as e:
            # The registered brokers (ZooKeeper's view) are fewer than the cache's.
            _log.error("%s not created: %s", GROUP_METADATA_TOPIC, e)
            raise CoordinatorError(ErrorCode.COORDINATOR_NOT_AVAILABLE) from e
        _log.info("created %s: %d partitions, replication factor %d",
                  GROUP_METADATA_TOPIC, meta.partitions, factor)  # fmt: skip
        if self.controller_managed:
            return  # its leaders are the controller's to name
        for p in range(meta.partitions):
            self.shards[p] = CoordinatorShard(p, loaded=True)

    # ------------------------------------------------------------ election

    async def startup(self) -> None:
        """Elect every partition of an existing ``__consumer_offsets``."""
        meta = self.metadata_store.topic(GROUP_METADATA_TOPIC)
        if meta is None:
            return
        t0 = time.perf_counter()
        await asyncio.gather(*(self.on_election(p) for p in range(meta.partitions)))
        self.last_load_ms = (time.perf_counter() - t0) * 1000
        groups = sum(len(s.groups) for s in self.shards.values())
        _log.info(
            "loaded %d groups from %d partitions of %s in %.0f ms",
            groups,
            meta.partitions,
            GROUP_METADATA_TOPIC,
            self.last_load_ms,
        )

    def start_loading(self) -> None:
        """Load in the background: requests are answered LOAD_IN_PROGRESS
        meanwhile (the broker is serving while the coordinator loads). On a
        cluster nothing is elected here: LeaderAndIsr names the partitions."""
        meta = self.metadata_store.topic(GROUP_METADATA_TOPIC)
        if meta is None or self.controller_managed:
            return
        for p in range(meta.partitions):
            self.shards[p] = CoordinatorShard(p)
        self._loads.append(asyncio.get_running_loop().create_task(self.startup()))

    def on_election(self, partition: int) -> Coroutine[object, object, None]:
        """This broker now leads ``partition``: its shard is registered at
        once (the group's requests answer COORDINATOR_LOAD_IN_PROGRESS from
        now on, not NOT_COORDINATOR) and the returned coroutine reads the
        log into it. A shard already held (loaded or loading) stays as it
        is: a LeaderAndIsr that only changed the ISR must not throw away the
        live groups (Kafka skips partitions it already owns)."""
        shard = self.shards.get(partition)
        if shard is not None and (shard.loaded or self._loading.get(partition) is shard):
            return _held()
        if shard is None:
            shard = CoordinatorShard(partition)
            self.shards[partition] = shard
        self._loading[partition] = shard
        return self._load(partition, shard)

    async def _load(self, partition: int, shard: CoordinatorShard) -> None:
        t0 = time.perf_counter()
        try:
            loaded = await asyncio.to_thread(self._read_partition, partition)
        except Exception:
            _log.exception("loading %s-%d failed", GROUP_METADATA_TOPIC, partition)
            loaded = _Loaded()
        finally:
            if self._loading.get(partition) is shard:
                del self._loading[partition]
        if self.shards.get(partition) is not shard:
            return  # resigned meanwhile
        self._install(shard, loaded)
        shard.load_ms = (time.perf_counter() - t0) * 1000
        shard.loaded = True
        if self.controller_managed:
            _log.info("coordinating the %d group(s) of %s-%d (loaded %d records in %.0f ms)",
                      len(shard.groups), GROUP_METADATA_TOPIC, partition, loaded.records,
                      shard.load_ms)  # fmt: skip

    def on_resignation(self, partition: int) -> list[GroupMetadata]:
        """This broker no longer leads ``partition``: its groups go Dead here
        (their members find the new coordinator); returns them."""
        shard = self.shards.pop(partition, None)
        if shard is None:
            return []
        groups = list(shard.groups.values())
        for g in groups:
            g.transition_to(GroupState.DEAD, self.clock())
        return groups

    async def shutdown(self) -> None:
        for t in self._loads:
            t.cancel()
        self._loads.clear()

    def _read_partition(self, partition: int) -> _Loaded:
        """Every record of the partition from its log start (a worker thread)."""
        out = _Loaded()
        p = self.replica_manager.partition(TopicPartition(GROUP_METADATA_TOPIC, partition))
        if p is None:
            return out
        log = p.log
        offset = log.log_start_offset
        end = log.log_end_offset
        while offset < end:
            data = log.read_bytes(offset, self.load_buffer_size, FetchIsolation.LOG_END, True)
            if not data:
                break
            next_offset = offset
            batches, _ = _native.decode_batches(data)  # one call per read, not per batch
            for batch, records in batches:
                if batch.is_transactional:
                    # TxnOffsetCommit's records count once their COMMIT
                    # marker is read; an ABORT drops them (Kafka's loader).
                    pid = batch.producer_id
                    if batch.is_control:
                        held = out.open_txns.pop(pid, [])
                        if records and _control_type(records[0].key) == _CONTROL_COMMIT:
                            for key, value in held:
                                self._apply(out, key, value)
                    else:
                        held = out.open_txns.setdefault(pid, [])
                        held.extend((r.key, r.value) for r in records if r.key is not None)
                        out.records += len(records)
                    next_offset = max(next_offset, batch.last_offset + 1)
                    continue
                for rec in records:
                    out.records += 1
                    if rec.key is not None:
                        self._apply(out, rec.key, rec.value)
                # A batch's last offset may be past its last record (compaction).
                next_offset = max(next_offset, batch.last_offset + 1)
            if next_offset <= offset:
                break
            offset = next_offset
        return out

    @staticmethod
    def _apply(out: _Loaded, key_bytes: bytes, value: bytes | None) -> None:
        try:
            consumer_key = decode_consumer_key(key_bytes)  # KIP-848's records
            if consumer_key is not None:
                out.consumer.apply(consumer_key, value)
                return
            share_key = decode_share_key(key_bytes)  # KIP-932's records
            if share_key is not None:
                out.share.apply(share_key, value)
                return
            key = decode_key(key_bytes)
            if isinstance(key, OffsetCommitKey):
                offsets = out.offsets.setdefault(key.group, {})
                tp = (key.topic, key.partition)
                if value is None:
                    offsets.pop(tp, None)
                else:
                    v = decode_offset_value(value)
                    offsets[tp] = OffsetAndMetadata(
                        v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, v.expire_timestamp
                    )
            elif isinstance(key, GroupMetadataKey):
                out.groups[key.group] = None if value is None else decode_group_value(value)
        except (RecordFormatError, UnicodeDecodeError, struct.error) as e:
            _log.warning("skipping an unreadable %s record: %s", GROUP_METADATA_TOPIC, e)

    def _install(self, shard: CoordinatorShard, loaded: _Loaded) -> None:
        now = self.clock()
        # Transactions still open at the end of the log: their offsets wait
        # for the marker, in the group's pending commits.
        open_offsets: dict[str, dict[int, dict[tuple[str, int], OffsetAndMetadata]]] = {}
        for pid, held in loaded.open_txns.items():
            found = _Loaded()
            for k, v in held:
                self._apply(found, k, v)
            for group_id, offsets in found.offsets.items():
                open_offsets.setdefault(group_id, {})[pid] = offsets
                loaded.offsets.setdefault(group_id, {})
        names = set(loaded.offsets) | {g for g, v in loaded.groups.items() if v is not None}
        for name in names:
            value = loaded.groups.get(name)
            group = GroupMetadata(name, now)
            if value is not None:
                group.protocol_type = value.protocol_type or None
                group.generation_id = value.generation
                group.protocol_name = value.protocol
                group.leader_id = value.leader
                if value.current_state_timestamp >= 0:
                    group.state_timestamp = value.current_state_timestamp
                for m in value.members:
                    member = MemberMetadata(
                        m.member_id,
                        m.group_instance_id,
                        m.client_id,
                        m.client_host,
                        m.rebalance_timeout,
                        m.session_timeout,
                        value.protocol_type,
                        [(value.protocol or "", m.subscription)],
                        assignment=m.assignment,
                    )
                    group.members[m.member_id] = member
                    if m.group_instance_id is not None:
                        group.static_members[m.group_instance_id] = m.member_id
                if group.members:
                    # Members from before the restart: Stable until their
                    # sessions (started now) say otherwise.
                    group.state = GroupState.STABLE
            group.offsets = loaded.offsets.get(name, {})
            group.pending_txn_offsets = open_offsets.get(name, {})
            shard.groups[name] = group
            if group.members and self.on_group_loaded is not None:
                self.on_group_loaded(group)
        for cg in loaded.consumer.build(now):
            cg.offsets = loaded.offsets.get(cg.group_id, {})
            cg.pending_txn_offsets = open_offsets.get(cg.group_id, {})
            shard.groups[cg.group_id] = cg
            if self.on_group_loaded is not None:
                self.on_group_loaded(cg)
        for sg in loaded.share.build(now):
            shard.groups[sg.group_id] = sg
            if self.on_group_loaded is not None:
                self.on_group_loaded(sg)

    # ------------------------------------------------------------ lookup

    def shard_for(self, group_id: str) -> CoordinatorShard:
        """The group's shard, or CoordinatorError(NOT_COORDINATOR / LOAD_IN_PROGRESS)."""
        if self.metadata_store.topic(GROUP_METADATA_TOPIC) is None:
            # The topic is created by FindCoordinator; a client that skipped
            # it is told to look for the coordinator. Kafka answers
            # NOT_COORDINATOR here: no partition of the topic is this broker's.
            raise CoordinatorError(ErrorCode.NOT_COORDINATOR)
        shard = self.shards.get(self.partition_for(group_id))
        if shard is None:
            raise CoordinatorError(ErrorCode.NOT_COORDINATOR)
        if not shard.loaded:
            raise CoordinatorError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        return shard

    def get_group(self, group_id: str) -> GroupMetadata | None:
        return self.shard_for(group_id).groups.get(group_id)

    def get_or_create_group(self, group_id: str) -> GroupMetadata:
        shard = self.shard_for(group_id)
        group = shard.groups.get(group_id)
        if group is None:
            group = GroupMetadata(group_id, self.clock())
            shard.groups[group_id] = group
        return group

    def remove_group(self, group: GroupMetadata) -> None:
        shard = self.shards.get(self.partition_for(group.group_id))
        if shard is not None and shard.groups.get(group.group_id) is group:
            del shard.groups[group.group_id]

    def all_groups(self) -> Iterable[GroupMetadata]:
        for shard in list(self.shards.values()):
            if shard.loaded:
                yield from list(shard.groups.values())

    def loading(self) -> bool:
        return any(not s.loaded for s in self.shards.values())

    # ------------------------------------------------------------ writing

    async def _append(
        self,
        group_id: str,
        records: list[tuple[bytes, bytes | None]],
        required_acks: int | None = None,
        *,
        producer: tuple[int, int] | None = None,
        transactional_id: str | None = None,
        add_to_transaction: bool = False,
    ) -> int:
        """Append key/value records to the group's partition (with
        ``offsets.commit.required.acks`` unless told); an error code.
        ``producer``: (producer id, epoch) of a transaction the records
        belong to (a transactional batch, as Kafka's coordinator writes
        TxnOffsetCommit)."""
        if not records:
            return ErrorCode.NONE
        tp = TopicPartition(GROUP_METADATA_TOPIC, self.partition_for(group_id))
        ts = self.clock()
        if producer is None:
            batch = _native.build_batch(
                [(k, v, [], ts) for k, v in records], compression=self.compression
            )
        else:
            batch = _native.build_batch(
                [(k, v, [], ts) for k, v in records],
                compression=self.compression,
                producer_id=producer[0],
                producer_epoch=producer[1],
                # Kafka's coordinator writes sequence 0; a coordinator's
                # append is not checked against the producer's sequences.
                base_sequence=0,
                is_transactional=True,
            )
        try:
            results = await self.replica_manager.append_records(
                self.commit_timeout_ms,
                self.required_acks if required_acks is None else required_acks,
                {tp: bytearray(batch)},
                internal_topics_allowed=True,
                origin=AppendOrigin.COORDINATOR,
                transactional_id=transactional_id,
                add_to_transaction=add_to_transaction,
            )
        except KafkaError as e:
            return _append_error(e.code)
        code = results[tp].error_code
        if transactional_id is not None and code in _TXN_REFUSALS:
            return code  # the coordinator's refusal, as the producer is to see it
        code = _append_error(code)
        if code:
            _log.warning("append to %s for group %s failed: %s", tp, quoted(group_id),
                         ErrorCode(results[tp].error_code).name)  # fmt: skip
        return code

    async def store_offsets(
        self, group: GroupMetadata, offsets: dict[tuple[str, int], OffsetAndMetadata]
    ) -> int:
        records: list[tuple[bytes, bytes | None]] = [
            (
                OffsetCommitKey(group.group_id, topic, partition).encode(),
                OffsetCommitValue(
                    o.offset, o.leader_epoch, o.metadata, o.commit_timestamp, o.expire_timestamp
                ).encode(),
            )
            for (topic, partition), o in offsets.items()
        ]
        code = await self._append(group.group_id, records)
        if code == ErrorCode.NONE:
            group.offsets.update(offsets)
        return code

    async def store_txn_offsets(
        self,
        group: GroupMetadata,
        producer_id: int,
        producer_epoch: int,
        offsets: dict[tuple[str, int], OffsetAndMetadata],
        *,
        transactional_id: str | None = None,
        add_to_transaction: bool = False,
    ) -> int:
        """TxnOffsetCommit: the offsets written in the producer's transaction
        and held pending until its marker (Kafka's prepareTxnOffsetCommit).
        ``transactional_id``: the append is verified with (or, with
        ``add_to_transaction``, added by) the transaction coordinator first,
        KIP-890; its refusals are answered as they are (Kafka's
        maybeConvertOffsetCommitError passes them through)."""
        records: list[tuple[bytes, bytes | None]] = [
            (
                OffsetCommitKey(group.group_id, topic, partition).encode(),
                OffsetCommitValue(
                    o.offset, o.leader_epoch, o.metadata, o.commit_timestamp, o.expire_timestamp
                ).encode(),
            )
            for (topic, partition), o in offsets.items()
        ]
        code = await self._append(
            group.group_id,
            records,
            producer=(producer_id, producer_epoch),
            transactional_id=transactional_id,
            add_to_transaction=add_to_transaction,
        )
        if code == ErrorCode.NONE:
            group.prepare_txn_offset_commit(producer_id, offsets)
        return code

    def handle_txn_completion(
        self, producer_id: int, partitions: Iterable[int], is_commit: bool
    ) -> int:
        """A COMMIT or ABORT marker of ``producer_id`` was written to these
        ``__consumer_offsets`` partitions: the pending offsets of its groups
        there are made committed, or dropped (Kafka's
        handleTxnCompletion). Returns how many offsets became committed."""
        moved = 0
        for p in set(partitions):
            shard = self.shards.get(p)
            if shard is None:
                continue
            for group in list(shard.groups.values()):
                if producer_id in group.pending_txn_offsets:
                    moved += group.complete_pending_txn_offset_commit(producer_id, is_commit)
        return moved

    async def store_group(self, group: GroupMetadata, assignments: dict[str, bytes]) -> int:
        """The group's members, protocol and the assignment being handed out."""
        return await self._append(group.group_id, [self.group_record(group, assignments)])

    def group_record(
        self, group: GroupMetadata, assignments: dict[str, bytes]
    ) -> tuple[bytes, bytes | None]:
        """The classic group's GroupMetadata record (key, value)."""
        members = [
            MemberRecord(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                self._subscription(m, group.protocol_name),
                assignments.get(m.member_id, b""),
            )
            for m in group.members.values()
        ]
        value = GroupMetadataValue(
            group.protocol_type or "",
            group.generation_id,
            group.protocol_name,
            group.leader_id,
            group.state_timestamp,
            members,
        )
        return GroupMetadataKey(group.group_id).encode(), value.encode()

    @staticmethod
    def _subscription(member: MemberMetadata, protocol: str | None) -> bytes:
        try:
            return bytes(member.metadata(protocol)) if protocol else b""
        except KeyError:
            return b""

    async def delete_offsets(self, group: GroupMetadata, tps: Iterable[tuple[str, int]]) -> int:
        tps = [tp for tp in tps if tp in group.offsets]
        records: list[tuple[bytes, bytes | None]] = [
            (OffsetCommitKey(group.group_id, t, p).encode(), None) for t, p in tps
        ]
        code = await self._append(group.group_id, records)
        if code == ErrorCode.NONE:
            for tp in tps:
                group.offsets.pop(tp, None)
        return code

    async def remove_deleted_offsets(
        self, group: GroupMetadata, tps: Iterable[tuple[str, int]]
    ) -> int:
        """Offsets of deleted partitions (Kafka's cleanupGroupMetadata): out
        of the group at once, whatever becomes of the tombstones — the
        partitions are gone, so no answer may show them — then tombstones
        appended to the leader's log without waiting for the followers (a
        deletion must not hang on a slow replica); an Empty group left with
        no offset goes. Returns how many offsets were removed."""
        removed = [tp for tp in tps if group.offsets.pop(tp, None) is not None]
        if not removed:
            return 0
        records: list[tuple[bytes, bytes | None]] = [
            (OffsetCommitKey(group.group_id, t, p).encode(), None) for t, p in removed
        ]
        await self._append(group.group_id, records, required_acks=1)
        if group.is_in(GroupState.EMPTY) and not group.offsets and not group.members:
            await self.delete_group(group)
        return len(removed)

    async def delete_group(self, group: GroupMetadata) -> int:
        """Tombstones for every offset and the group itself; the group goes Dead."""
        records: list[tuple[bytes, bytes | None]] = [
            (OffsetCommitKey(group.group_id, t, p).encode(), None) for t, p in group.offsets
        ]
        if isinstance(group, ConsumerGroup):
            records.extend(consumer_group_tombstones(group))
        elif isinstance(group, ShareGroup):
            records.extend(share_group_tombstones(group))
        records.append((GroupMetadataKey(group.group_id).encode(), None))
        code = await self._append(group.group_id, records)
        if code == ErrorCode.NONE:
            group.offsets.clear()
            group.transition_to(GroupState.DEAD, self.clock())
            self.remove_group(group)
        return code

    # ------------------------------------------------------------ expiration

    async def expire_offsets(self) -> int:
        """Drop offsets past ``offsets.retention.minutes`` (tombstones): of an
        Empty group, counted from when it became Empty or from the commit,
        whichever is later; of an active consumer group, only those of topics
        no member subscribes to. Empty groups left with no offset are
        deleted. Returns how many offsets expired."""
        now = self.clock()
        expired = 0
        for group in list(self.all_groups()):
            if group.is_in(GroupState.DEAD):
                continue
            subscribed: set[str] = set()
            if not group.is_in(GroupState.EMPTY):
                found = group.subscribed_topics()
                if found is None:
                    continue
                subscribed = found
            doomed = []
            for (topic, p), o in group.offsets.items():
                if topic in subscribed:
                    continue
                if o.expire_timestamp >= 0:
                    deadline = o.expire_timestamp
                else:
                    base = o.commit_timestamp
                    if group.is_in(GroupState.EMPTY):
                        base = max(base, group.state_timestamp)
                    deadline = base + self.retention_ms
                if deadline <= now:
                    doomed.append((topic, p))
            if doomed and await self.delete_offsets(group, doomed) == ErrorCode.NONE:
                expired += len(doomed)
            if group.is_in(GroupState.EMPTY) and not group.offsets and not group.members:
                await self.delete_group(group)
        if expired:
            _log.info("expired %d committed offsets", expired)
        return expired
