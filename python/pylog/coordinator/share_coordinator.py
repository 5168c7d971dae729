"""ShareCoordinator: share-partition state on the compacted
``__share_group_state`` topic (KIP-932; Kafka's ShareCoordinatorService and
ShareCoordinatorShard).

A (group, topic id, partition)'s state lives in partition
``abs(hash("group:topicId:partition")) % share.coordinator.state.topic.num.partitions``
(Kafka's SharePartitionKey), as a ShareSnapshot record written whole at each
change; compaction keeps the last. The broker leading that partition is the
key's share coordinator (FindCoordinator key type 2). It serves the
inter-broker APIs the share-partition leaders' persister sends
(``pylog.server.share.default_state_persister``): InitializeShareGroupState,
ReadShareGroupState, WriteShareGroupState, DeleteShareGroupState and
ReadShareGroupStateSummary, with Kafka's answers — NOT_COORDINATOR where
this broker does not lead the key's partition, COORDINATOR_LOAD_IN_PROGRESS
while it reads the partition back, FENCED_STATE_EPOCH / FENCED_LEADER_EPOCH
for a writer behind the last one, and a read of a key never initialized
answers start offset -1.

On a cluster a partition is read back when the controller makes this broker
its leader (:meth:`on_election`, from LeaderAndIsr) and dropped when it
stops leading it (:meth:`on_resignation`); a lone broker reads back all of
them before the first use (:meth:`load`) and is its own persister. The
topic is made on first use with ``share.coordinator.state.topic.*``'s
partitions, replication (a lone broker: 1 unless set) and segment size.
The in-memory state changes only once its record is appended (acks=all).

Not Kafka's: Kafka writes ShareUpdate deltas between snapshots
(``share.coordinator.snapshot.update.records.per.snapshot``); here every
write is a snapshot (ShareUpdate records Kafka wrote are read).
"""

from __future__ import annotations

import asyncio
import logging
import struct

from pylog import _native
from pylog.common.topic_partition import TopicPartition
from pylog.common.utils.time import Clock, now_ms
from pylog.coordinator.records import partition_for
from pylog.coordinator.share_coordinator_records import (
    SHARE_SNAPSHOT,
    decode_key,
    decode_value,
    snapshot_key,
    snapshot_value,
)
from pylog.errors import ErrorCode, KafkaError, TopicAlreadyExistsError
from pylog.log.log import AppendOrigin, FetchIsolation
from pylog.metadata.store import MetadataStore
from pylog.server.config import KafkaConfig
from pylog.server.replica_manager import ReplicaManager
from pylog.server.share.persister import PersistedState, PersisterError

__all__ = ["SHARE_GROUP_STATE_TOPIC", "ShareCoordinator", "share_key"]

_log = logging.getLogger("pylog.coordinator.share_coordinator")

SHARE_GROUP_STATE_TOPIC = "__share_group_state"

_Key = tuple[str, str, int]


class ShareCoordinator:
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
        self.states: dict[_Key, PersistedState] = {}
        self._snapshot_epochs: dict[_Key, int] = {}
        #: partitions of __share_group_state read back here (a cluster's shards)
        self.loaded: set[int] = set()
        self._loading: set[int] = set()
        self._tasks: set[asyncio.Future[None]] = set()
        self.write_timeout_ms = int(config.get("share.coordinator.write.timeout.ms"))

    # ------------------------------------------------------------ the topic

    @property
    def num_partitions(self) -> int:
        meta = self.metadata_store.topic(SHARE_GROUP_STATE_TOPIC)
        if meta is not None:
            return int(meta.partitions)
        return int(self.config.get("share.coordinator.state.topic.num.partitions"))

    def partition_for(self, group_id: str, topic_id: str, partition: int) -> int:
        return partition_for(share_key(group_id, topic_id, partition), self.num_partitions)

    def ensure_topic(self) -> None:
        if self.metadata_store.topic(SHARE_GROUP_STATE_TOPIC) is not None:
            return
        key = "share.coordinator.state.topic.replication.factor"
        factor = 1
        if self.replica_manager.controller_managed or self.config.is_set(key):
            factor = int(self.config.get(key))
        configs = {
            "cleanup.policy": "compact",
            "compression.type": "producer",
            "segment.bytes": str(self.config.get("share.coordinator.state.topic.segment.bytes")),
            "min.insync.replicas": str(
                self.config.get("share.coordinator.state.topic.min.isr") if factor > 1 else 1
            ),
        }
        try:
            self.metadata_store.create_topic(
                SHARE_GROUP_STATE_TOPIC,
                int(self.config.get("share.coordinator.state.topic.num.partitions")),
                factor,
                configs,
            )
        except TopicAlreadyExistsError:
            return
        except KafkaError as e:
            _log.error("%s not created: %s", SHARE_GROUP_STATE_TOPIC, e)
            return
        _log.info("created %s", SHARE_GROUP_STATE_TOPIC)

    # ------------------------------------------------------------ loading

    def load(self) -> int:
        """A lone broker: read back every partition it leads (before a
        ShareFetch is served); how many keys."""
        meta = self.metadata_store.topic(SHARE_GROUP_STATE_TOPIC)
        if meta is None:
            return 0
        for p in range(meta.partitions):
            if self._leads(p) and p not in self.loaded:
                self._load_partition(p)
        return len(self.states)

    async def on_election(self, partition: int) -> None:
        """This broker now leads ``partition`` (LeaderAndIsr): read its
        records back; meanwhile its keys answer COORDINATOR_LOAD_IN_PROGRESS."""
        if partition in self.loaded or partition in self._loading:
            return
        self._loading.add(partition)
        try:
            n = await asyncio.to_thread(self._read_partition, partition)
        finally:
            self._loading.discard(partition)
        if not self._leads(partition):
            return
        for k, st in n.items():
            self.states[k] = st
        self.loaded.add(partition)
        _log.info("share coordinator: %s-%d loaded (%d share partitions)",
                  SHARE_GROUP_STATE_TOPIC, partition, len(n))  # fmt: skip

    def on_resignation(self, partition: int) -> None:
        """Another broker leads ``partition`` now: its keys are no longer ours."""
        self.loaded.discard(partition)
        for k in [k for k in self.states if self.partition_for(*k) == partition]:
            del self.states[k]
            self._snapshot_epochs.pop(k, None)

    def _leads(self, partition: int) -> bool:
        part = self.replica_manager.partition(TopicPartition(SHARE_GROUP_STATE_TOPIC, partition))
        return part is not None and part.is_leader

    def _load_partition(self, partition: int) -> None:
        self.states.update(self._read_partition(partition))
        self.loaded.add(partition)

    def _read_partition(self, partition: int) -> dict[_Key, PersistedState]:
        out: dict[_Key, PersistedState] = {}
        part = self.replica_manager.partition(TopicPartition(SHARE_GROUP_STATE_TOPIC, partition))
        if part is None:
            return out
        log = part.log
        offset, end = log.log_start_offset, log.log_end_offset
        while offset < end:
            data = log.read_bytes(offset, 1 << 20, FetchIsolation.LOG_END, True)
            if not data:
                break
            nxt = offset
            batches, _ = _native.decode_batches(data)
            for batch, records in batches:
                for rec in records:
                    if rec.key is not None:
                        _apply(out, bytes(rec.key), None if rec.value is None else bytes(rec.value))
                nxt = max(nxt, batch.last_offset + 1)
            if nxt <= offset:
                break
            offset = nxt
        return out

    # ------------------------------------------------------------ the RPCs

    def _status(self, partition: int) -> int:
        """NONE where this broker is the coordinator of ``partition``'s keys."""
        if partition in self._loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if not self._leads(partition):
            return ErrorCode.NOT_COORDINATOR
        if partition not in self.loaded:
            if self.replica_manager.controller_managed:
                # This broker leads it but its load has not begun (its
                # LeaderAndIsr is being handled): begin it here.
                task = asyncio.ensure_future(self.on_election(partition))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
                return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
            self._load_partition(partition)
        return ErrorCode.NONE

    async def read(
        self, group_id: str, topic_id: str, partition: int, leader_epoch: int = -1
    ) -> tuple[int, PersistedState | None]:
        """ReadShareGroupState: (error, the state or None when never
        initialized). Kafka 4.3's checks, in its order: a key never
        initialized is INVALID_REQUEST, a leader epoch older than the last
        writer's FENCED_LEADER_EPOCH, a topic-partition the metadata does not
        hold UNKNOWN_TOPIC_OR_PARTITION."""
        self.ensure_topic()
        code = self._status(self.partition_for(group_id, topic_id, partition))
        if code:
            return code, None
        st = self.states.get((group_id, topic_id, partition))
        if partition < 0 or st is None:
            return ErrorCode.INVALID_REQUEST, None
        if 0 <= leader_epoch < st.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH, None
        if not self._exists(topic_id, partition):
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
        return ErrorCode.NONE, st

    async def summary(
        self, group_id: str, topic_id: str, partition: int
    ) -> tuple[int, PersistedState | None]:
        """ReadShareGroupStateSummary: the state (None: never initialized)."""
        code = self._status(self.partition_for(group_id, topic_id, partition))
        if code:
            return code, None
        if partition < 0:
            return ErrorCode.INVALID_REQUEST, None
        if not self._exists(topic_id, partition):
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
        return ErrorCode.NONE, self.states.get((group_id, topic_id, partition))

    def _exists(self, topic_id: str, partition: int) -> bool:
        meta = self.metadata_store.topic_by_id(topic_id)
        return meta is not None and 0 <= partition < meta.partitions

    async def write(
        self, group_id: str, topic_id: str, partition: int, state: PersistedState
    ) -> int:
        """WriteShareGroupState: the whole state of a share partition."""
        k = (group_id, topic_id, partition)
        self.ensure_topic()
        code = self._status(self.partition_for(*k))
        if code:
            return code
        old = self.states.get(k)
        if partition < 0 or old is None:
            return ErrorCode.INVALID_REQUEST  # never initialized (Kafka 4.3)
        if old is not None:
            if state.state_epoch < old.state_epoch:
                return ErrorCode.FENCED_STATE_EPOCH
            if 0 <= state.leader_epoch < old.leader_epoch:
                return ErrorCode.FENCED_LEADER_EPOCH
            if state.start_offset < 0:  # -1: the start offset is not being written
                state = PersistedState(
                    old.start_offset, state.state_epoch, state.leader_epoch, state.batches
                )
            if state.leader_epoch < 0:
                state = PersistedState(
                    state.start_offset, state.state_epoch, old.leader_epoch, state.batches
                )
        elif state.start_offset < 0:
            return ErrorCode.INVALID_REQUEST
        return await self._append(k, state)

    async def initialize(
        self, group_id: str, topic_id: str, partition: int, state_epoch: int, start_offset: int
    ) -> int:
        """InitializeShareGroupState: a new start (a group's first use of the
        partition, or offsets altered), with a state epoch above the last."""
        k = (group_id, topic_id, partition)
        self.ensure_topic()
        code = self._status(self.partition_for(*k))
        if code:
            return code
        if partition < 0:
            return ErrorCode.INVALID_REQUEST
        if not self._exists(topic_id, partition):
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        old = self.states.get(k)
        if old is not None and state_epoch <= old.state_epoch:
            return ErrorCode.FENCED_STATE_EPOCH
        if start_offset < 0:
            if old is None:
                return ErrorCode.INVALID_REQUEST
            start_offset = old.start_offset
        return await self._append(k, PersistedState(start_offset, state_epoch, -1, []))

    async def delete(self, group_id: str, topic_id: str, partition: int) -> int:
        """DeleteShareGroupState: a tombstone for the key."""
        k = (group_id, topic_id, partition)
        code = self._status(self.partition_for(*k))
        if code:
            return code
        if partition < 0:
            return ErrorCode.INVALID_REQUEST
        if not self._exists(topic_id, partition):
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if k not in self.states:
            return ErrorCode.NONE
        return await self._append(k, None)

    async def _append(self, k: _Key, state: PersistedState | None) -> int:
        tp = TopicPartition(SHARE_GROUP_STATE_TOPIC, self.partition_for(*k))
        now = self.clock()
        key = snapshot_key(*k)
        if state is None:
            value: bytes | None = None
        else:
            epoch = self._snapshot_epochs.get(k, -1) + 1
            value = snapshot_value(state, epoch, now)
        batch = _native.build_batch([(key, value, [], now)])
        try:
            results = await self.replica_manager.append_records(
                self.write_timeout_ms,
                -1,
                {tp: bytearray(batch)},
                internal_topics_allowed=True,
                origin=AppendOrigin.COORDINATOR,
            )
        except KafkaError as e:
            return _coordinator_error(e.code)
        code = int(results[tp].error_code)
        if code:
            return _coordinator_error(code)
        if state is None:
            self.states.pop(k, None)
            self._snapshot_epochs.pop(k, None)
        else:
            self.states[k] = state
            self._snapshot_epochs[k] = self._snapshot_epochs.get(k, -1) + 1
        return ErrorCode.NONE

    # ------------------------------------------------------------ the Persister (a lone broker)

    async def read_state(
        self, group_id: str, topic_id: str, partition: int
    ) -> PersistedState | None:
        code, st = await self.read(group_id, topic_id, partition)
        if code == ErrorCode.INVALID_REQUEST:
            return None  # never initialized: the leader initializes it
        if code:
            raise PersisterError(code)
        return st

    async def write_state(
        self, group_id: str, topic_id: str, partition: int, state: PersistedState
    ) -> int:
        return await self.write(group_id, topic_id, partition, state)

    async def initialize_state(
        self, group_id: str, topic_id: str, partition: int, state_epoch: int, start_offset: int
    ) -> int:
        return await self.initialize(group_id, topic_id, partition, state_epoch, start_offset)

    async def delete_state(self, group_id: str, topic_id: str, partition: int) -> int:
        return await self.delete(group_id, topic_id, partition)


def share_key(group_id: str, topic_id: str, partition: int) -> str:
    """Kafka's SharePartitionKey as a coordinator key (FindCoordinator type 2)."""
    return f"{group_id}:{topic_id}:{partition}"


def _coordinator_error(code: int) -> int:
    """An append's failure as the share coordinator answers it (Kafka's
    coordinator runtime: a lost leadership is NOT_COORDINATOR)."""
    if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
        return ErrorCode.NOT_COORDINATOR
    if code in (ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                ErrorCode.REQUEST_TIMED_OUT):  # fmt: skip
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    return code


def _apply(states: dict[_Key, PersistedState], key_bytes: bytes, value: bytes | None) -> None:
    try:
        key = decode_key(key_bytes)
        if key is None:
            return
        k = (key.group_id, key.topic_id, key.partition)
        if value is None:
            states.pop(k, None)
            return
        st = decode_value(key.record_type, value)
    except (ValueError, IndexError, UnicodeDecodeError, struct.error) as e:
        _log.warning("unreadable record in %s skipped: %s", SHARE_GROUP_STATE_TOPIC, e)
        return
    if key.record_type == SHARE_SNAPSHOT:
        states[k] = st
        return
    # ShareUpdate (Kafka writes them): its batches over the snapshot's.
    base = states.get(k)
    if base is None:
        states[k] = st
        return
    kept = [b for b in base.batches if b.last_offset >= st.start_offset]
    covered = {(b.first_offset, b.last_offset) for b in st.batches}
    merged = [b for b in kept if (b.first_offset, b.last_offset) not in covered] + st.batches
    merged.sort(key=lambda b: b.first_offset)
    states[k] = PersistedState(st.start_offset, base.state_epoch, st.leader_epoch, merged)
