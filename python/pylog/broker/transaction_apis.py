"""The transaction APIs over the TransactionCoordinator (Kafka's KafkaApis
handlers of the same names): InitProducerId with a transactional id (the
idempotent path stays ProduceFetchApis'), AddPartitionsToTxn (v0-3 from
producers; v4-5 batched, from brokers, with KIP-890's verify-only form),
AddOffsetsToTxn, EndTxn, TxnOffsetCommit (to the group coordinator),
DescribeTransactions, ListTransactions; and FindCoordinator's answer for key
type TRANSACTION (GroupApis asks :meth:`coordinator_for`).

ACLs as Kafka checks them: WRITE on the TransactionalId for every producer
request, WRITE on each topic added, READ on the group for AddOffsetsToTxn and
TxnOffsetCommit (and READ on its topics), CLUSTER_ACTION for
AddPartitionsToTxn v4+, DESCRIBE on the TransactionalId for FindCoordinator,
DescribeTransactions and ListTransactions. Clients too old to know
PRODUCER_FENCED get INVALID_PRODUCER_EPOCH, as from Kafka.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Awaitable, Callable

from pylog.broker.auth_helper import AuthHelper
from pylog.common.topic_partition import TopicPartition
from pylog.common.transaction_version import TransactionVersion
from pylog.coordinator.group_coordinator import GroupCoordinator
from pylog.coordinator.group_metadata_manager import GROUP_METADATA_TOPIC
from pylog.errors import ErrorCode
from pylog.metadata.metadata_cache import MetadataCache
from pylog.metadata.store import INTERNAL_TOPICS, MetadataStore
from pylog.network import Request
from pylog.protocol.messages import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)
from pylog.protocol.messages.add_partitions_to_txn_request import AddPartitionsToTxnTopic
from pylog.protocol.messages.add_partitions_to_txn_response import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnResult,
    AddPartitionsToTxnTopicResult,
)
from pylog.protocol.messages.describe_transactions_response import (
    TopicData,
)
from pylog.protocol.messages.describe_transactions_response import (
    TransactionState as DescribedState,
)
from pylog.protocol.messages.find_coordinator_response import Coordinator
from pylog.protocol.messages.list_transactions_response import (
    TransactionState as ListedState,
)
from pylog.protocol.messages.txn_offset_commit_response import (
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)
from pylog.security.acl_operation import AclOperation
from pylog.security.resource_type import ResourceType
from pylog.server.replica_manager import ReplicaManager
from pylog.transaction.transaction_coordinator import TransactionCoordinator
from pylog.transaction.transaction_state_manager import TRANSACTION_STATE_TOPIC

__all__ = ["TransactionApis"]

_OPERATION_NOT_ATTEMPTED = 55  # Kafka's code, not yet named in pylog.errors
_NO_ID, _NO_EPOCH = -1, -1


def _fenced_for(version: int, first_with_fenced: int, code: int) -> int:
    """PRODUCER_FENCED (KIP-588) only for versions that know it."""
    if code == ErrorCode.PRODUCER_FENCED and version < first_with_fenced:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return code


def _partitions(topics: list[AddPartitionsToTxnTopic]) -> list[TopicPartition]:
    return [TopicPartition(t.name, p) for t in topics for p in t.partitions]


def _topic_results(codes: dict[TopicPartition, int]) -> list[AddPartitionsToTxnTopicResult]:
    by_topic: dict[str, list[AddPartitionsToTxnPartitionResult]] = {}
    for tp, code in codes.items():
        by_topic.setdefault(tp.topic, []).append(
            AddPartitionsToTxnPartitionResult(
                partition_index=tp.partition, partition_error_code=code
            )
        )
    return [
        AddPartitionsToTxnTopicResult(name=t, results_by_partition=r) for t, r in by_topic.items()
    ]


class TransactionApis:
    #: Who may do what (KafkaApis sets the broker's; none: everything allowed).
    auth: AuthHelper = AuthHelper()

    def __init__(
        self,
        coordinator: TransactionCoordinator,
        group_coordinator: GroupCoordinator | None,
        replica_manager: ReplicaManager,
        metadata_store: MetadataStore,
        metadata_cache: MetadataCache,
        broker_id: int,
        broker_endpoint: Callable[[str], tuple[str, int]],
        idempotent_init: Callable[
            [Request, InitProducerIdRequest], Awaitable[InitProducerIdResponse]
        ],
    ) -> None:
        self.coordinator = coordinator
        self.group_coordinator = group_coordinator
        self.replica_manager = replica_manager
        self.metadata_store = metadata_store
        self.metadata_cache = metadata_cache
        self.broker_id = broker_id
        self.broker_endpoint = broker_endpoint
        self.idempotent_init = idempotent_init
        self._creating: asyncio.Future[None] | None = None

    @property
    def _on_cluster(self) -> bool:
        return self.replica_manager.controller_managed

    def _may_write_txn(self, request: Request, txn_id: str) -> bool:
        return self.auth.authorize(
            request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id
        )

    def _partition_exists(self, tp: TopicPartition) -> bool:
        if self._on_cluster:
            return self.metadata_cache.partition_info(tp.topic, tp.partition) is not None
        meta = self.metadata_store.topic(tp.topic)
        return meta is not None and 0 <= tp.partition < meta.partitions

    def _topic_exists(self, topic: str) -> bool:
        if self._on_cluster:
            return self.metadata_cache.contains_topic(topic)
        return self.metadata_store.topic(topic) is not None

    # ------------------------------------------------------------ FindCoordinator

    async def ensure_topic(self) -> None:
        """Create ``__transaction_state`` on first use (one creation at a
        time; a failure is the caller's COORDINATOR_NOT_AVAILABLE)."""
        manager = self.coordinator.txn_manager
        if self._on_cluster and self.metadata_cache.contains_topic(TRANSACTION_STATE_TOPIC):
            return
        if self.metadata_store.topic(TRANSACTION_STATE_TOPIC) is not None:
            return
        task = self._creating
        if task is None or task.done():
            task = self._creating = asyncio.get_running_loop().create_task(
                asyncio.to_thread(manager.ensure_topic)
            )
            task.add_done_callback(lambda t: t.cancelled() or t.exception())
        with contextlib.suppress(Exception):
            await asyncio.shield(task)

    def coordinator_for(self, request: Request, key: str) -> Coordinator:
        """The broker leading the id's ``__transaction_state`` partition."""
        manager = self.coordinator.txn_manager
        unavailable = ErrorCode.COORDINATOR_NOT_AVAILABLE
        if not key:
            code = ErrorCode.INVALID_REQUEST
            return Coordinator(
                key=key, node_id=-1, host="", port=-1, error_code=code, error_message=code.name
            )
        partition = manager.partition_for(key)
        if self._on_cluster:
            leader = self.metadata_cache.leader_of(TRANSACTION_STATE_TOPIC, partition)
            ep = (
                self.metadata_cache.broker_endpoint(leader, request.listener)
                if leader is not None and leader >= 0
                else None
            )
            if leader is None or ep is None:
                return Coordinator(
                    key=key,
                    node_id=-1,
                    host="",
                    port=-1,
                    error_code=unavailable,
                    error_message=unavailable.name,
                )
            return Coordinator(
                key=key, node_id=leader, host=ep.host, port=ep.port, error_code=0, error_message=""
            )
        if partition not in manager.shards:
            return Coordinator(
                key=key,
                node_id=-1,
                host="",
                port=-1,
                error_code=unavailable,
                error_message=unavailable.name,
            )
        host, port = self.broker_endpoint(request.listener)
        return Coordinator(
            key=key, node_id=self.broker_id, host=host, port=port, error_code=0, error_message=""
        )

    # ------------------------------------------------------------ InitProducerId

    async def handle_init_producer_id_request(
        self, request: Request, body: InitProducerIdRequest
    ) -> InitProducerIdResponse:
        txn_id = body.transactional_id
        if txn_id is None:
            return await self.idempotent_init(request, body)
        version = request.header.api_version

        def answer(code: int, pid: int = _NO_ID, epoch: int = _NO_EPOCH) -> InitProducerIdResponse:
            return InitProducerIdResponse(
                throttle_time_ms=0,
                error_code=_fenced_for(version, 4, code),
                producer_id=pid,
                producer_epoch=epoch,
            )

        if not self._may_write_txn(request, txn_id):
            return answer(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        pid, epoch = (body.producer_id, body.producer_epoch) if version >= 3 else (-1, -1)
        if (pid == _NO_ID) != (epoch == _NO_EPOCH):
            return answer(ErrorCode.INVALID_REQUEST)
        expected = None if pid == _NO_ID else (pid, epoch)
        result = await self.coordinator.handle_init_producer_id(
            txn_id, body.transaction_timeout_ms, expected
        )
        return answer(result.error_code, result.producer_id, result.producer_epoch)

    # ------------------------------------------------------------ AddPartitionsToTxn

    async def handle_add_partitions_to_txn_request(
        self, request: Request, body: AddPartitionsToTxnRequest
    ) -> AddPartitionsToTxnResponse:
        version = request.header.api_version
        if version < 4:
            result = await self._add_partitions(
                request,
                version,
                body.v3_and_below_transactional_id,
                body.v3_and_below_producer_id,
                body.v3_and_below_producer_epoch,
                _partitions(body.v3_and_below_topics),
                verify_only=False,
            )
            return AddPartitionsToTxnResponse(
                throttle_time_ms=0, results_by_topic_v3_and_below=_topic_results(result)
            )
        # v4+: batches from brokers (KIP-890), CLUSTER_ACTION for all of it.
        if not self.auth.authorize_cluster(request, AclOperation.CLUSTER_ACTION):
            return AddPartitionsToTxnResponse(
                throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            )
        results = []
        for txn in body.transactions:
            codes = await self._add_partitions(
                request,
                version,
                txn.transactional_id,
                txn.producer_id,
                txn.producer_epoch,
                _partitions(txn.topics),
                verify_only=txn.verify_only,
            )
            results.append(
                AddPartitionsToTxnResult(
                    transactional_id=txn.transactional_id, topic_results=_topic_results(codes)
                )
            )
        return AddPartitionsToTxnResponse(
            throttle_time_ms=0, error_code=ErrorCode.NONE, results_by_transaction=results
        )

    async def _add_partitions(
        self,
        request: Request,
        version: int,
        txn_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: list[TopicPartition],
        *,
        verify_only: bool,
    ) -> dict[TopicPartition, int]:
        if version < 4 and not self._may_write_txn(request, txn_id):
            return dict.fromkeys(partitions, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        if version < 4:
            allowed = self.auth.filter_by_authorized(
                request,
                AclOperation.WRITE,
                ResourceType.TOPIC,
                {tp.topic for tp in partitions if tp.topic not in INTERNAL_TOPICS},
            )
        else:
            allowed = {tp.topic for tp in partitions}
        errors: dict[TopicPartition, int] = {}
        ok: list[TopicPartition] = []
        for tp in partitions:
            if tp.topic not in allowed:
                errors[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif not self._partition_exists(tp):
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                ok.append(tp)
        if errors:
            # One refused partition fails the whole request; the others
            # were not added (Kafka's OPERATION_NOT_ATTEMPTED).
            errors.update(dict.fromkeys(ok, _OPERATION_NOT_ATTEMPTED))
            return {tp: errors[tp] for tp in partitions}
        if verify_only:
            return self.coordinator.handle_verify_partitions_in_transaction(
                txn_id, producer_id, producer_epoch, ok
            )
        # v4+ without verify_only is a partition leader adding the partition
        # of a transactions-v2 producer's first batch (KIP-890 part 2).
        code = await self.coordinator.handle_add_partitions_to_transaction(
            txn_id,
            producer_id,
            producer_epoch,
            set(ok),
            TransactionVersion.TV_2 if version >= 4 else TransactionVersion.TV_0,
        )
        return dict.fromkeys(partitions, _fenced_for(version, 2, code))

    # ------------------------------------------------------------ AddOffsetsToTxn

    async def handle_add_offsets_to_txn_request(
        self, request: Request, body: AddOffsetsToTxnRequest
    ) -> AddOffsetsToTxnResponse:
        version = request.header.api_version
        if not self._may_write_txn(request, body.transactional_id):
            code: int = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        elif not self.auth.authorize(request, AclOperation.READ, ResourceType.GROUP, body.group_id):
            code = ErrorCode.GROUP_AUTHORIZATION_FAILED
        elif self.group_coordinator is None:
            code = ErrorCode.COORDINATOR_NOT_AVAILABLE
        else:
            partition = self.group_coordinator.manager.partition_for(body.group_id)
            code = await self.coordinator.handle_add_partitions_to_transaction(
                body.transactional_id,
                body.producer_id,
                body.producer_epoch,
                {TopicPartition(GROUP_METADATA_TOPIC, partition)},
            )
        return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=_fenced_for(version, 2, code))

    # ------------------------------------------------------------ EndTxn

    async def handle_end_txn_request(self, request: Request, body: EndTxnRequest) -> EndTxnResponse:
        version = request.header.api_version
        if not self._may_write_txn(request, body.transactional_id):
            return EndTxnResponse(
                throttle_time_ms=0,
                error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                producer_id=_NO_ID,
                producer_epoch=_NO_EPOCH,
            )
        # v5 is a transactions-v2 producer's: the epoch is bumped and the
        # answer names the producer id and epoch to go on with.
        result = await self.coordinator.handle_end_transaction(
            body.transactional_id,
            body.producer_id,
            body.producer_epoch,
            body.committed,
            TransactionVersion.TV_2 if version >= 5 else TransactionVersion.TV_0,
        )
        return EndTxnResponse(
            throttle_time_ms=0,
            error_code=_fenced_for(version, 2, result.error_code),
            producer_id=result.producer_id,
            producer_epoch=result.producer_epoch,
        )

    # ------------------------------------------------------------ TxnOffsetCommit

    async def handle_txn_offset_commit_request(
        self, request: Request, body: TxnOffsetCommitRequest
    ) -> TxnOffsetCommitResponse:
        version = request.header.api_version
        everything = [(t.name, p.partition_index) for t in body.topics for p in t.partitions]

        def answer(codes: dict[tuple[str, int], int]) -> TxnOffsetCommitResponse:
            by_topic: dict[str, list[TxnOffsetCommitResponsePartition]] = {}
            for (topic, p), code in codes.items():
                if version < 2 and code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                    code = ErrorCode.COORDINATOR_NOT_AVAILABLE  # KAFKA-7296's old clients
                by_topic.setdefault(topic, []).append(
                    TxnOffsetCommitResponsePartition(partition_index=p, error_code=code)
                )
            return TxnOffsetCommitResponse(
                throttle_time_ms=0,
                topics=[
                    TxnOffsetCommitResponseTopic(name=t, partitions=ps)
                    for t, ps in by_topic.items()
                ],
            )

        if not self._may_write_txn(request, body.transactional_id):
            return answer(
                dict.fromkeys(everything, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
            )
        if not self.auth.authorize(request, AclOperation.READ, ResourceType.GROUP, body.group_id):
            return answer(dict.fromkeys(everything, ErrorCode.GROUP_AUTHORIZATION_FAILED))
        if self.group_coordinator is None:
            return answer(dict.fromkeys(everything, ErrorCode.COORDINATOR_NOT_AVAILABLE))
        readable = self.auth.filter_by_authorized(
            request, AclOperation.READ, ResourceType.TOPIC, {t.name for t in body.topics}
        )
        codes: dict[tuple[str, int], int] = {}
        offsets: dict[tuple[str, int], tuple[int, int, str | None]] = {}
        for t in body.topics:
            known = self._topic_exists(t.name)
            for p in t.partitions:
                key = (t.name, p.partition_index)
                if t.name not in readable:
                    codes[key] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                elif not known or not self._partition_exists(TopicPartition(*key)):
                    codes[key] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    epoch = p.committed_leader_epoch if version >= 2 else -1
                    offsets[key] = (p.committed_offset, epoch, p.committed_metadata)
        if offsets:
            member = body.member_id if version >= 3 else ""
            generation = body.generation_id if version >= 3 else -1
            instance = body.group_instance_id if version >= 3 else None
            codes.update(
                await self.group_coordinator.commit_txn_offsets(
                    body.group_id,
                    body.producer_id,
                    body.producer_epoch,
                    member,
                    instance,
                    generation,
                    offsets,
                    transactional_id=body.transactional_id,
                    # v5: a transactions-v2 producer, whose offsets partition
                    # the group coordinator adds to the transaction itself.
                    add_to_transaction=version >= 5,
                )
            )
        return answer({k: codes[k] for k in everything if k in codes})

    # ------------------------------------------------------------ Describe / List

    async def handle_describe_transactions_request(
        self, request: Request, body: DescribeTransactionsRequest
    ) -> DescribeTransactionsResponse:
        states = []
        for txn_id in body.transactional_ids:
            if not self.auth.authorize(
                request, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, txn_id
            ):
                states.append(
                    DescribedState(
                        error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                        transactional_id=txn_id,
                    )
                )
                continue
            code, d = self.coordinator.handle_describe_transaction(txn_id)
            if d is None:
                # Kafka leaves an error entry's other fields at their defaults.
                states.append(DescribedState(error_code=code, transactional_id=txn_id))
                continue
            # Only the topics the caller may describe are named (Kafka's filter).
            topics: dict[str, list[int]] = {}
            visible = self.auth.filter_by_authorized(
                request,
                AclOperation.DESCRIBE,
                ResourceType.TOPIC,
                {tp.topic for tp in d.partitions},
            )
            for tp in d.partitions:
                if tp.topic in visible:
                    topics.setdefault(tp.topic, []).append(tp.partition)
            states.append(
                DescribedState(
                    error_code=ErrorCode.NONE,
                    transactional_id=txn_id,
                    transaction_state=d.state,
                    transaction_timeout_ms=d.timeout_ms,
                    transaction_start_time_ms=d.start_ms,
                    producer_id=d.producer_id,
                    producer_epoch=d.producer_epoch,
                    topics=[TopicData(topic=t, partitions=ps) for t, ps in topics.items()],
                )
            )
        return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=states)

    async def handle_list_transactions_request(
        self, request: Request, body: ListTransactionsRequest
    ) -> ListTransactionsResponse:
        duration = body.duration_filter if request.header.api_version >= 1 else -1
        # v2 (KIP-1152): only the ids the pattern matches (null or "": all)
        pattern: re.Pattern[str] | None = None
        if request.header.api_version >= 2 and body.transactional_id_pattern:
            try:
                pattern = re.compile(body.transactional_id_pattern)
            except re.error:
                return ListTransactionsResponse(
                    throttle_time_ms=0,
                    error_code=ErrorCode.INVALID_REGULAR_EXPRESSION,
                    unknown_state_filters=[],
                    transaction_states=[],
                )
        code, unknown, found = self.coordinator.handle_list_transactions(
            set(body.producer_id_filters), set(body.state_filters), duration
        )
        if pattern is not None:
            found = [d for d in found if pattern.fullmatch(d.transactional_id)]
        listed = [
            ListedState(
                transactional_id=d.transactional_id,
                producer_id=d.producer_id,
                transaction_state=d.state,
            )
            for d in found
            if self.auth.authorize(
                request,
                AclOperation.DESCRIBE,
                ResourceType.TRANSACTIONAL_ID,
                d.transactional_id,
                log_if_denied=False,
            )
        ]
        return ListTransactionsResponse(
            throttle_time_ms=0,
            error_code=code,
            unknown_state_filters=unknown,
            transaction_states=listed,
        )
