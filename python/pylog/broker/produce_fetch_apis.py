"""The data-path handlers: Produce, Fetch, ListOffsets, OffsetForLeaderEpoch
and InitProducerId, answered through the ReplicaManager (and the
ProducerIdManager for InitProducerId).

Produce and Fetch answer with dicts typed by ``response_dicts`` rather than the
response classes: the classes cost 1.7-3x the time to build and encode, which
that module measures; the others answer with their response classes.

A handler that must wait (acks=-1, a Fetch below min_bytes) calls
``request.mark_local_complete()`` first, so the connection's next request may
start while this one waits in the purgatory.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from pylog import _native
from pylog.broker.auth_helper import AuthHelper
from pylog.broker.request_helpers import Pacer
from pylog.broker.response_dicts import (
    FetchableTopicResponseDict,
    FetchResponseDict,
    LeaderIdAndEpochDict,
    NodeEndpointDict,
    PartitionDataDict,
    PartitionProduceResponseDict,
    ProduceResponseDict,
    TopicProduceResponseDict,
)
from pylog.common.topic_partition import TopicPartition
from pylog.errors import CloseConnection, CorruptRecordError, ErrorCode, KafkaError
from pylog.log.log import FetchIsolation
from pylog.metadata.store import MetadataStore
from pylog.network import Request
from pylog.protocol import ZERO_UUID
from pylog.protocol.messages import (
    FetchRequest,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    ProduceRequest,
)
from pylog.protocol.messages.fetch_response import AbortedTransaction
from pylog.protocol.messages.list_offsets_response import (
    ListOffsetsPartitionResponse,
    ListOffsetsTopicResponse,
)
from pylog.protocol.messages.offset_for_leader_epoch_response import (
    EpochEndOffset,
    OffsetForLeaderTopicResult,
)
from pylog.protocol.messages.produce_response import BatchIndexAndErrorMessage
from pylog.security.acl_operation import AclOperation
from pylog.security.resource_type import ResourceType
from pylog.server.config import KafkaConfig
from pylog.server.delayed_fetch import FetchParams, FetchPartitionRequest, FetchPartitionResult
from pylog.server.producer_id_manager import ProducerIdManager
from pylog.server.replica_manager import ReplicaManager

__all__ = ["ProduceFetchApis"]

_FETCH_SESSION_ID_NOT_FOUND = 70
_INVALID_FETCH_SESSION_EPOCH = 71


#: Prefixes an unknown topic id to key its partitions apart from every topic
#: name (a NUL is in no valid name).
_UNKNOWN_ID_KEY = "\x00"


def _uuid_out(topic_id: str | None) -> str:
    return topic_id or ZERO_UUID


_ZSTD = 4
_ZSTD_PRODUCE_VERSION = 7


def _refused_records(version: int, records: memoryview | None) -> int | None:
    """Kafka's ProduceRequest.validateRecords for Produce v3+: exactly one
    whole batch, of magic 2, and zstd only from v7 (KIP-110: an older client
    could not read it back). The error code, or None when the records pass."""
    if records is None:
        return None
    try:
        batches, _ = _native.batch_infos(records, 2)  # the header of two at most
    except CorruptRecordError:
        return None  # not a batch at all: the validator answers CORRUPT_MESSAGE where
    if len(batches) != 1 or batches[0].magic != 2:
        return ErrorCode.INVALID_RECORD  # none whole, a second one, or legacy
    if version < _ZSTD_PRODUCE_VERSION and batches[0].compression == _ZSTD:
        return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    return None


_UNREAD_ERRORS = frozenset({ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID})


def _aborted(r: FetchPartitionResult) -> list[AbortedTransaction]:
    txns = r.aborted_transactions
    if not txns:
        return []
    return [AbortedTransaction(t.producer_id, t.first_offset) for t in txns]


class ProduceFetchApis:
    """Produce, Fetch, ListOffsets, OffsetForLeaderEpoch, InitProducerId."""

    #: Who may do what (KafkaApis sets the broker's; none: everything allowed).
    auth: AuthHelper = AuthHelper()

    def __init__(
        self,
        config: KafkaConfig,
        replica_manager: ReplicaManager,
        metadata_store: MetadataStore,
        producer_ids: ProducerIdManager,
    ) -> None:
        self.config = config
        self.replica_manager = replica_manager
        self.metadata_store = metadata_store
        self.producer_ids = producer_ids
        self.broker_id = config.broker_id

    # ------------------------------------------------------------------ Produce

    async def handle_produce_request(
        self, request: Request, body: ProduceRequest
    ) -> ProduceResponseDict | None:
        acks = body.acks
        version = request.header.api_version
        by_id = version >= 13
        entries: dict[TopicPartition, memoryview | None] = {}
        # (key, topic id, partitions): the key is the topic's name, or, for an
        # id this broker does not know, a string no topic name can be
        order: list[tuple[str, str, list[int]]] = []
        # v13 names topics by id (KIP-516): an unknown one is answered
        # UNKNOWN_TOPIC_ID before any authorization, as KafkaApis does
        unknown: dict[TopicPartition, PartitionProduceResponseDict] = {}
        pace = Pacer()
        for t in body.topic_data:
            indexes = []
            if by_id:
                meta = self.metadata_store.topic_by_id(t.topic_id)
                name = meta.name if meta is not None else _UNKNOWN_ID_KEY + t.topic_id
            else:
                name = t.name
            for p in t.partition_data:
                await pace()
                tp = TopicPartition(name, p.index)
                if by_id and meta is None:
                    unknown[tp] = {"error_code": ErrorCode.UNKNOWN_TOPIC_ID}
                else:
                    entries[tp] = p.records
                indexes.append(p.index)
            order.append((name, t.topic_id, indexes))
        if unknown and acks == 0:
            raise CloseConnection("acks=0 produce to an unknown topic id")
        denied: dict[TopicPartition, PartitionProduceResponseDict] = unknown
        if self.auth.enabled:
            if body.transactional_id is not None and not self.auth.authorize(
                request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id
            ):
                if acks == 0:
                    raise CloseConnection("produce refused: transactional id not authorized")
                code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
                return await self._produce_response(
                    order, {tp: {"error_code": code} for tp in (*entries, *unknown)}
                )
            allowed = self.auth.filter_by_authorized(
                request,
                AclOperation.WRITE,
                ResourceType.TOPIC,
                (n for n, _, _ in order if not n.startswith(_UNKNOWN_ID_KEY)),
            )
            for tp in [tp for tp in entries if tp.topic not in allowed]:
                del entries[tp]
                denied[tp] = {"error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
            if denied and acks == 0:
                raise CloseConnection("acks=0 produce to topics it may not write")
        refused: dict[TopicPartition, PartitionProduceResponseDict] = {}
        if version >= 3:
            # Checked once the partition is known to exist, as Kafka does.
            for tp, records in list(entries.items()):
                if self.replica_manager.partition(tp) is None:
                    continue
                bad = _refused_records(version, records)
                if bad is not None:
                    refused[tp] = {"error_code": bad}
                    del entries[tp]
        # Transactional batches append as any other (the partition opens the
        # producer's transaction at its first one, once the coordinator
        # confirms it: KIP-890 part 1 in the ReplicaManager); the
        # coordinator's WriteTxnMarkers ends it (txn_marker_apis).
        appended = await self.replica_manager.append_records(
            body.timeout_ms,
            acks,
            entries,
            before_wait=request.mark_local_complete,
            inline=not request.others_active,
            transactional_id=body.transactional_id,
            # Produce v12 is a transactions-v2 producer's: its first batch to
            # a partition in a transaction adds the partition (KIP-890 part 2).
            add_to_transaction=request.header.api_version >= 12,
        )
        if acks == 0:
            # Kafka closes the connection when an acks=0 produce fails: the
            # client gets no response, and the closed socket tells it to refresh
            # its metadata.
            if refused:
                raise CloseConnection(f"acks=0 produce refused: {sorted(map(str, refused))}")
            for tp, r in appended.items():
                if r.error_code != ErrorCode.NONE:
                    raise CloseConnection(f"acks=0 produce to {tp} failed with {r.error_code}")
            return None
        # One pass over the request's order builds the answer from the append
        # results (and the partitions refused before it).
        responses: list[TopicProduceResponseDict] = []
        leaders: set[int] = set()  # KIP-951: where the refused partitions went
        for name, topic_id, indexes in order:
            parts: list[PartitionProduceResponseDict] = []
            for i in indexes:
                await pace()
                tp = TopicPartition(name, i)
                got = appended.get(tp)
                if got is None:
                    out: PartitionProduceResponseDict = {
                        "index": i,
                        "base_offset": -1,
                        "log_append_time_ms": -1,
                        "log_start_offset": -1,
                        "record_errors": [],
                    }
                    out.update(refused.get(tp) or denied[tp])
                    parts.append(out)
                    continue
                produced: PartitionProduceResponseDict = {
                    "index": i,
                    "error_code": got.error_code,
                    "base_offset": got.base_offset,
                    "log_append_time_ms": got.log_append_time_ms,
                    "log_start_offset": got.log_start_offset,
                    "error_message": got.error_message if got.error_code else None,
                    "record_errors": [
                        BatchIndexAndErrorMessage(batch_index=b, batch_index_error_message=m)
                        for b, m in got.record_errors
                    ]
                    if got.record_errors
                    else [],
                }
                if version >= 10 and got.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
                    produced["current_leader"] = self._current_leader(tp, leaders)
                parts.append(produced)
            responses.append({"name": name, "topic_id": topic_id, "partition_responses": parts})
        answer: ProduceResponseDict = {"responses": responses, "throttle_time_ms": 0}
        if leaders:
            answer["node_endpoints"] = self._node_endpoints(leaders, request.listener)
        return answer

    # ------------------------------------------------------------------ KIP-951

    def _current_leader(self, tp: TopicPartition, leaders: set[int]) -> LeaderIdAndEpochDict:
        """Where a client that sent ``tp``'s produce or fetch to a broker not
        its leader should go (KIP-951): the leader this broker's replica
        follows, else the MetadataCache's; -1s when neither knows. The leader
        is added to ``leaders`` for the response's NodeEndpoints."""
        partition = self.replica_manager.partition(tp)
        if partition is not None and partition.leader_id is not None:
            leader, epoch = partition.leader_id, partition.leader_epoch
        else:
            info = self.replica_manager.metadata_cache.partition_info(tp.topic, tp.partition)
            if info is None or info.leader < 0:
                return {"leader_id": -1, "leader_epoch": -1}
            leader, epoch = info.leader, info.leader_epoch
        leaders.add(leader)
        return {"leader_id": leader, "leader_epoch": epoch}

    def _node_endpoints(self, ids: set[int], listener: str) -> list[NodeEndpointDict]:
        """The live brokers among ``ids`` on the request's listener."""
        out: list[NodeEndpointDict] = []
        cache = self.replica_manager.metadata_cache
        for i in sorted(ids):
            b = cache.alive_broker(i)
            ep = b.endpoint(listener) if b is not None else None
            if b is not None and ep is not None:
                out.append({"node_id": i, "host": ep.host, "port": ep.port, "rack": b.rack})
        return out

    @staticmethod
    async def _produce_response(
        order: list[tuple[str, str, list[int]]],
        results: Mapping[TopicPartition, PartitionProduceResponseDict],
    ) -> ProduceResponseDict:
        responses: list[TopicProduceResponseDict] = []
        pace = Pacer()
        for name, topic_id, indexes in order:
            parts: list[PartitionProduceResponseDict] = []
            for i in indexes:
                await pace()
                r: PartitionProduceResponseDict = {
                    "index": i,
                    "base_offset": -1,
                    "log_append_time_ms": -1,
                    "log_start_offset": -1,
                    "record_errors": [],
                }
                r.update(results[TopicPartition(name, i)])
                parts.append(r)
            responses.append({"name": name, "topic_id": topic_id, "partition_responses": parts})
        return {"responses": responses, "throttle_time_ms": 0}

    # ------------------------------------------------------------------ Fetch

    async def handle_fetch_request(self, request: Request, body: FetchRequest) -> FetchResponseDict:
        version = request.header.api_version
        if version >= 15:
            state = body.replica_state
            replica_id = state.replica_id if state is not None else -1
        else:
            replica_id = body.replica_id
        request.quota_exempt = replica_id >= 0  # replication is not a client's usage
        session_id = body.session_id
        session_epoch = body.session_epoch
        if session_id != 0:
            return {"error_code": _FETCH_SESSION_ID_NOT_FOUND, "session_id": 0, "responses": []}
        if session_epoch not in (-1, 0):
            return {"error_code": _INVALID_FETCH_SESSION_EPOCH, "session_id": 0, "responses": []}
        if replica_id >= 0:
            isolation = FetchIsolation.LOG_END
        elif body.isolation_level == 1:
            isolation = FetchIsolation.TXN_COMMITTED
        else:
            isolation = FetchIsolation.HIGH_WATERMARK
        # max_bytes is v3+; before, only each partition's limit holds.
        max_bytes = min(body.max_bytes, self.config.fetch_max_bytes) if version >= 3 else 0x7FFFFFFF
        params = FetchParams(
            replica_id=replica_id,
            max_wait_ms=body.max_wait_ms,
            min_bytes=body.min_bytes,
            max_bytes=max_bytes,
            isolation=isolation,
            hard_max_bytes_limit=version <= 2,
        )
        store = self.metadata_store
        by_id = version >= 13
        readable: set[str] | None = None  # None: every topic
        if self.auth.enabled:
            if replica_id >= 0:
                # a follower: the broker's own principal, allowed all or nothing
                if not self.auth.authorize_cluster(request, AclOperation.CLUSTER_ACTION):
                    readable = set()
            else:
                metas = (store.topic_by_id(t.topic_id) for t in body.topics)
                names = (
                    [m.name for m in metas if m is not None]
                    if by_id
                    else [t.topic for t in body.topics]
                )
                readable = self.auth.filter_by_authorized(
                    request, AclOperation.READ, ResourceType.TOPIC, names
                )
        # (topic key, topic id, [(partition, index into reqs or an error code)])
        layout: list[tuple[str | None, str | None, list[tuple[int, int, bool]]]] = []
        reqs: list[FetchPartitionRequest] = []
        pace = Pacer()
        for t in body.topics:
            topic_id: str | None
            name: str | None
            if by_id:
                topic_id = t.topic_id
                meta = store.topic_by_id(topic_id)
                name = meta.name if meta is not None else None
            else:
                name, topic_id = t.topic, None
            slots: list[tuple[int, int, bool]] = []
            for p in t.partitions:
                await pace()
                if name is None:
                    slots.append((p.partition, ErrorCode.UNKNOWN_TOPIC_ID, False))
                    continue
                if readable is not None and name not in readable:
                    slots.append((p.partition, ErrorCode.TOPIC_AUTHORIZATION_FAILED, False))
                    continue
                slots.append((p.partition, len(reqs), True))
                reqs.append(
                    FetchPartitionRequest(
                        TopicPartition(name, p.partition),
                        p.fetch_offset,
                        p.partition_max_bytes,
                        current_leader_epoch=p.current_leader_epoch,
                        last_fetched_epoch=p.last_fetched_epoch,
                        log_start_offset=p.log_start_offset,
                    )
                )
            layout.append((name, topic_id, slots))
        results = await self.replica_manager.fetch_messages(
            params, reqs, before_wait=request.mark_local_complete
        )
        committed = isolation is FetchIsolation.TXN_COMMITTED
        responses: list[FetchableTopicResponseDict] = []
        # KIP-951 (v16+): the leaders of partitions refused as not led here
        leaders: set[int] | None = set() if version >= 16 else None
        for topic_name, topic_uuid, slots in layout:
            parts = []
            for index, ref, ok in slots:
                await pace()
                r = results[ref] if ok else FetchPartitionResult(ref)
                out = self._fetch_partition(index, r, committed)
                if (
                    leaders is not None
                    and topic_name is not None
                    and r.error_code
                    in (ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.NOT_LEADER_OR_FOLLOWER)
                ):
                    out["current_leader"] = self._current_leader(
                        TopicPartition(topic_name, index), leaders
                    )
                parts.append(out)
            entry: FetchableTopicResponseDict = {"partitions": parts}
            if by_id:
                entry["topic_id"] = _uuid_out(topic_uuid)
            else:
                assert topic_name is not None  # by name: the request's own name
                entry["topic"] = topic_name
            responses.append(entry)
        answer: FetchResponseDict = {
            "throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": responses
        }  # fmt: skip
        if leaders:
            answer["node_endpoints"] = self._node_endpoints(leaders, request.listener)
        return answer

    def _fetch_partition(
        self, index: int, r: FetchPartitionResult, committed: bool
    ) -> PartitionDataDict:
        out: PartitionDataDict = {
            "partition_index": index,
            "error_code": r.error_code,
            "high_watermark": r.high_watermark,
            "last_stable_offset": r.last_stable_offset,
            "log_start_offset": r.log_start_offset,
            # Kafka: a read-committed read lists the aborted transactions of
            # the range it read (from the .txnindex files), a failed read none
            # (null); a partition refused before reading (unknown to the
            # metadata) has the empty list its message class starts with.
            "aborted_transactions": _aborted(r)
            if (committed and r.error_code == ErrorCode.NONE) or r.error_code in _UNREAD_ERRORS
            else None,
            "preferred_read_replica": -1,
            "records": r.records,
        }
        if r.diverging_epoch is not None:
            out["diverging_epoch"] = {
                "epoch": r.diverging_epoch[0],
                "end_offset": r.diverging_epoch[1],
            }
        return out

    # ------------------------------------------------------------------ ListOffsets

    async def handle_list_offset_request(
        self, request: Request, body: ListOffsetsRequest
    ) -> ListOffsetsResponse:
        version = request.header.api_version
        isolation: FetchIsolation | None
        if body.replica_id >= 0:
            isolation = None
        elif body.isolation_level == 1:
            isolation = FetchIsolation.TXN_COMMITTED
        else:
            isolation = FetchIsolation.HIGH_WATERMARK
        rm = self.replica_manager
        topics = []
        pace = Pacer()
        describable = self.auth.filter_by_authorized(
            request, AclOperation.DESCRIBE, ResourceType.TOPIC, (t.name for t in body.topics)
        )
        for t in body.topics:
            parts = []
            if t.name not in describable:
                code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                parts = [
                    ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=code)
                    for p in t.partitions
                ]
                topics.append(ListOffsetsTopicResponse(name=t.name, partitions=parts))
                continue
            for p in t.partitions:
                await pace()
                tp = TopicPartition(t.name, p.partition_index)
                out = ListOffsetsPartitionResponse(
                    partition_index=p.partition_index, error_code=ErrorCode.NONE
                )
                try:
                    found = rm.fetch_offset_for_timestamp(
                        tp,
                        p.timestamp,
                        isolation=isolation,
                        current_leader_epoch=p.current_leader_epoch,
                    )
                except KafkaError as e:
                    out.error_code = e.code
                    found = None
                # Each version carries only its own fields (none is ignorable):
                # the others keep their defaults.
                if version == 0:
                    offset = found.offset if found is not None else -1
                    out.old_style_offsets = [offset] if offset >= 0 else []
                elif found is not None:
                    out.timestamp = found.timestamp
                    out.offset = found.offset
                    if version >= 4:
                        out.leader_epoch = found.leader_epoch
                parts.append(out)
            topics.append(ListOffsetsTopicResponse(name=t.name, partitions=parts))
        return ListOffsetsResponse(throttle_time_ms=0, topics=topics)

    # ------------------------------------------------------------------ OffsetForLeaderEpoch

    async def handle_offset_for_leader_epoch_request(
        self, request: Request, body: OffsetForLeaderEpochRequest
    ) -> OffsetForLeaderEpochResponse:
        rm = self.replica_manager
        topics = []
        pace = Pacer()
        names = (t.topic for t in body.topics)
        if self.auth.authorize(
            request, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, log_if_denied=False
        ):
            describable = set(names)
        else:
            describable = self.auth.filter_by_authorized(
                request, AclOperation.DESCRIBE, ResourceType.TOPIC, names
            )
        for t in body.topics:
            parts = []
            if t.topic not in describable:
                code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                parts = [
                    EpochEndOffset(error_code=code, partition=p.partition) for p in t.partitions
                ]
                topics.append(OffsetForLeaderTopicResult(topic=t.topic, partitions=parts))
                continue
            for p in t.partitions:
                await pace()
                r = rm.last_offset_for_leader_epoch(
                    TopicPartition(t.topic, p.partition),
                    p.current_leader_epoch,
                    p.leader_epoch,
                )
                parts.append(
                    EpochEndOffset(
                        error_code=r.error_code,
                        partition=p.partition,
                        leader_epoch=r.leader_epoch,
                        end_offset=r.end_offset,
                    )
                )
            topics.append(OffsetForLeaderTopicResult(topic=t.topic, partitions=parts))
        return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)

    # ------------------------------------------------------------------ InitProducerId

    async def handle_init_producer_id_request(
        self, request: Request, body: InitProducerIdRequest
    ) -> InitProducerIdResponse:
        txn_id = body.transactional_id
        refused = None
        if txn_id is not None:
            if not self.auth.authorize(
                request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id
            ):
                refused = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        elif not self.auth.authorize(
            request, AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, log_if_denied=False
        ) and not self.auth.authorize_by_resource_type(
            request, AclOperation.WRITE, ResourceType.TOPIC
        ):
            # KIP-679: WRITE on any topic is enough for an idempotent producer
            refused = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        if refused is not None:
            return InitProducerIdResponse(
                throttle_time_ms=0, error_code=refused, producer_id=-1, producer_epoch=-1
            )
        if txn_id is None:
            # Idempotent producer: always a fresh id at epoch 0 (a producer that
            # names its old id and epoch gets a new id too, as from Kafka).
            return InitProducerIdResponse(
                throttle_time_ms=0,
                error_code=ErrorCode.NONE,
                # Now and then a new block is reserved in the store (an fsync, or
                # a ZooKeeper write): on a worker thread.
                producer_id=await asyncio.to_thread(self.producer_ids.generate_producer_id),
                producer_epoch=0,
            )
        # No transaction coordinator runs here: a transactional id is answered
        # as by a Kafka whose transaction coordinator is unavailable.
        code = ErrorCode.INVALID_REQUEST if txn_id == "" else ErrorCode.COORDINATOR_NOT_AVAILABLE
        return InitProducerIdResponse(
            throttle_time_ms=0, error_code=code, producer_id=-1, producer_epoch=-1
        )
