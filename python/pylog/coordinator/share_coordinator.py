"""ShareCoordinator: share-partition state on the compacted
``__share_group_state`` topic (KIP-932; Kafka's share coordinator and its
DefaultStatePersister, here in-process: the SharePartitionManager's
Persister).

A (group, topic id, partition)'s state lives in partition
``abs(hash("group:topicId:partition")) % share.coordinator.state.topic.num.partitions``
(Kafka's SharePartitionKey), as a ShareSnapshot record written whole at each
change; compaction keeps the last. The topic is made on first use with
``share.coordinator.state.topic.*``'s partitions, replication (a lone broker:
1 unless set) and segment size. At startup the partitions this broker leads
are read back, so a restarted broker neither redelivers what was
acknowledged nor forgets delivery counts.

Not Kafka's: Kafka writes ShareUpdate deltas between snapshots
(``share.coordinator.snapshot.update.records.per.snapshot``) and the share
partition's leader reaches the coordinator by ReadShareGroupState /
WriteShareGroupState requests. Here a state whose partition this broker
does not lead (a cluster) is kept in memory only, with one warning.
"""

from __future__ import annotations

import logging

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
from pylog.server.share.persister import PersistedState

__all__ = ["SHARE_GROUP_STATE_TOPIC", "ShareCoordinator"]

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
        self._warned = False
        self.write_timeout_ms = int(config.get("offsets.commit.timeout.ms"))

    # ------------------------------------------------------------ the topic

    @property
    def num_partitions(self) -> int:
        meta = self.metadata_store.topic(SHARE_GROUP_STATE_TOPIC)
        if meta is not None:
            return int(meta.partitions)
        return int(self.config.get("share.coordinator.state.topic.num.partitions"))

    def partition_for(self, group_id: str, topic_id: str, partition: int) -> int:
        return partition_for(f"{group_id}:{topic_id}:{partition}", self.num_partitions)

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
        """Read back every state of the partitions this broker leads (at
        startup, before a ShareFetch is served); how many keys."""
        meta = self.metadata_store.topic(SHARE_GROUP_STATE_TOPIC)
        if meta is None:
            return 0
        for p in range(meta.partitions):
            part = self.replica_manager.partition(TopicPartition(SHARE_GROUP_STATE_TOPIC, p))
            if part is None or not part.is_leader:
                continue
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
                            self._apply(
                                bytes(rec.key), None if rec.value is None else bytes(rec.value)
                            )
                    nxt = max(nxt, batch.last_offset + 1)
                if nxt <= offset:
                    break
                offset = nxt
        return len(self.states)

    def _apply(self, key_bytes: bytes, value: bytes | None) -> None:
        try:
            key = decode_key(key_bytes)
            if key is None:
                return
            k = (key.group_id, key.topic_id, key.partition)
            if value is None:
                self.states.pop(k, None)
                return
            st = decode_value(key.record_type, value)
        except (ValueError, IndexError, UnicodeDecodeError) as e:
            _log.warning("unreadable record in %s skipped: %s", SHARE_GROUP_STATE_TOPIC, e)
            return
        if key.record_type == SHARE_SNAPSHOT:
            self.states[k] = st
            return
        # ShareUpdate (Kafka writes them): its batches over the snapshot's.
        base = self.states.get(k)
        if base is None:
            self.states[k] = st
            return
        kept = [b for b in base.batches if b.last_offset >= st.start_offset]
        covered = {(b.first_offset, b.last_offset) for b in st.batches}
        merged = [b for b in kept if (b.first_offset, b.last_offset) not in covered] + st.batches
        merged.sort(key=lambda b: b.first_offset)
        self.states[k] = PersistedState(st.start_offset, base.state_epoch, st.leader_epoch, merged)

    # ------------------------------------------------------------ the Persister

    async def read_state(
        self, group_id: str, topic_id: str, partition: int
    ) -> PersistedState | None:
        return self.states.get((group_id, topic_id, partition))

    async def write_state(
        self, group_id: str, topic_id: str, partition: int, state: PersistedState
    ) -> int:
        k = (group_id, topic_id, partition)
        self.states[k] = state
        self.ensure_topic()
        tp = TopicPartition(
            SHARE_GROUP_STATE_TOPIC, self.partition_for(group_id, topic_id, partition)
        )
        part = self.replica_manager.partition(tp)
        if part is None or not part.is_leader:
            if not self._warned:
                self._warned = True
                _log.warning("%s is led by another broker: share-partition state is kept in "
                             "memory only", tp)  # fmt: skip
            return ErrorCode.NONE
        epoch = self._snapshot_epochs[k] = self._snapshot_epochs.get(k, -1) + 1
        now = self.clock()
        batch = _native.build_batch(
            [
                (
                    snapshot_key(group_id, topic_id, partition),
                    snapshot_value(state, epoch, now),
                    [],
                    now,
                )
            ]
        )
        try:
            results = await self.replica_manager.append_records(
                self.write_timeout_ms,
                -1,
                {tp: bytearray(batch)},
                internal_topics_allowed=True,
                origin=AppendOrigin.COORDINATOR,
            )
        except KafkaError as e:
            return e.code
        return int(results[tp].error_code)
