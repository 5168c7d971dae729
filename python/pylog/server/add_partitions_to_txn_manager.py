"""AddPartitionsToTxnManager: a partition leader's questions to transaction
coordinators before it appends a transactional batch (KIP-890 part 1,
Kafka's ``kafka.server.AddPartitionsToTxnManager``).

When ``transaction.partition.verification.enable`` is on and a producer
with no open transaction on a partition sends it a transactional batch, the
ReplicaManager asks the producer's transaction coordinator whether the
partition was added to the transaction (AddPartitionsToTxn v4+ with
``verify_only``) and appends only if it was. A producer whose transaction
was aborted (a timeout, a fence) can then no longer open a transaction on a
partition that no marker will ever close: the hanging transaction KIP-890
is about.

Questions are batched per coordinator broker, as Kafka does: one request in
flight per broker, and what arrives meanwhile goes in the next one, one
entry per transactional id. A second question for an id already waiting
answers the older one at once (Kafka's rules): a newer epoch fences it
(INVALID_PRODUCER_EPOCH), the same epoch is a client retry
(NETWORK_EXCEPTION, retriable); an older epoch is itself fenced.

Transactions v2 (KIP-890 part 2): for a producer's Produce v12 or
TxnOffsetCommit v5 the question is an add (``add=True``: ``verify_only``
false), and the coordinator adds the partition to the transaction instead of
only checking it (Kafka's ``addPartition`` supported operation).

A coordinator on this broker is asked in-process (``local`` /
``local_add``): the same question, without a connection to oneself.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from pylog.common.topic_partition import TopicPartition
from pylog.errors import ErrorCode
from pylog.protocol import ApiKey
from pylog.protocol.client import KafkaConnection
from pylog.protocol.messages import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse
from pylog.protocol.messages.add_partitions_to_txn_request import (
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)

__all__ = [
    "TRANSACTION_ABORTABLE",
    "AddPartitionsToTxnManager",
    "CoordinatorNode",
    "LocalAdd",
    "LocalVerify",
]

_log = logging.getLogger("pylog.server.add_partitions_to_txn")

#: The brokers' form of AddPartitionsToTxn (v4 brought verify_only and
#: batching, v5 the TRANSACTION_ABORTABLE answer).
ADD_PARTITIONS_TO_TXN_VERSION = 5
#: Kafka's TRANSACTION_ABORTABLE (KIP-890): the partition is not in the
#: transaction.
TRANSACTION_ABORTABLE = 120

#: What the coordinator on this broker answers in-process: an error code
#: per partition (NONE: in the transaction).
LocalVerify = Callable[[str, int, int, list[TopicPartition]], dict[TopicPartition, int]]
#: The in-process add of transactions v2: one error code for the partitions.
LocalAdd = Callable[[str, int, int, list[TopicPartition]], Awaitable[int]]


@dataclass(frozen=True)
class CoordinatorNode:
    broker_id: int
    host: str
    port: int


@dataclass(eq=False)
class _Question:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: list[TopicPartition]
    answer: asyncio.Future[dict[TopicPartition, int]]
    add: bool = False


@dataclass(eq=False)
class _Node:
    address: CoordinatorNode
    waiting: dict[str, _Question] = field(default_factory=dict)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    conn: KafkaConnection | None = None


def _settle(q: _Question, codes: dict[TopicPartition, int]) -> None:
    if not q.answer.done():
        q.answer.set_result(codes)


def _all(q: _Question, code: int) -> dict[TopicPartition, int]:
    return dict.fromkeys(q.partitions, code)


class AddPartitionsToTxnManager:
    def __init__(
        self,
        broker_id: int,
        locate: Callable[[str], CoordinatorNode | None],
        *,
        local: LocalVerify | None = None,
        local_add: LocalAdd | None = None,
        request_timeout_s: float = 30.0,
    ) -> None:
        self.broker_id = broker_id
        #: The coordinator of a transactional id now (None: none known).
        self.locate = locate
        self.local = local
        self.local_add = local_add
        self.request_timeout_s = request_timeout_s
        #: Extra KafkaConnection arguments (the inter-broker listener's TLS
        #: context and SASL login), set by the broker.
        self.connection_options: dict[str, Any] = {}
        self._nodes: dict[CoordinatorNode, _Node] = {}
        self._closed = False
        #: Counters (Kafka's VerificationFailureRate and VerificationTimeMs
        #: meters, as totals).
        self.verifications = 0
        self.failed_partitions = 0

    async def verify_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        *,
        add: bool = False,
    ) -> dict[TopicPartition, int]:
        """Ask whether ``partitions`` are in the transaction (``add``: have
        them added, transactions v2); returns the error
        code of each one that is not (empty: all verified). The codes are the
        coordinator's, translated as Kafka's manager does: PRODUCER_FENCED
        becomes INVALID_PRODUCER_EPOCH (what producers expect here),
        TRANSACTION_ABORTABLE becomes INVALID_TXN_STATE (clients of
        transactions v1 know no other), a refused cluster action
        INVALID_TXN_STATE."""
        parts = list(partitions)
        self.verifications += 1
        node = self.locate(transactional_id)
        if node is None:
            return self._failed(dict.fromkeys(parts, ErrorCode.COORDINATOR_NOT_AVAILABLE))
        if node.broker_id == self.broker_id and add and self.local_add is not None:
            code = await self.local_add(transactional_id, producer_id, producer_epoch, parts)
            if code == ErrorCode.NONE:
                return {}
            return self._failed(dict.fromkeys(parts, _translate(code)))
        if node.broker_id == self.broker_id and not add and self.local is not None:
            codes = self.local(transactional_id, producer_id, producer_epoch, parts)
            return self._failed(
                {tp: _translate(c) for tp, c in codes.items() if c != ErrorCode.NONE}
            )
        if self._closed:
            return self._failed(dict.fromkeys(parts, ErrorCode.NETWORK_EXCEPTION))
        q = _Question(
            transactional_id,
            producer_id,
            producer_epoch,
            parts,
            asyncio.get_running_loop().create_future(),
            add,
        )
        dest = self._nodes.get(node)
        if dest is None:
            dest = self._nodes[node] = _Node(node)
        old = dest.waiting.get(transactional_id)
        if old is not None:
            if old.producer_epoch > producer_epoch:
                return self._failed(_all(q, ErrorCode.INVALID_PRODUCER_EPOCH))
            newer = old.producer_epoch < producer_epoch
            _settle(
                old,
                self._failed(
                    _all(
                        old,
                        ErrorCode.INVALID_PRODUCER_EPOCH if newer else ErrorCode.NETWORK_EXCEPTION,
                    )
                ),
            )
        dest.waiting[transactional_id] = q
        if dest.task is None or dest.task.done():
            dest.task = asyncio.get_running_loop().create_task(self._send_loop(dest))
        dest.wake.set()
        return await q.answer

    def _failed(self, codes: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        self.failed_partitions += len(codes)
        return codes

    # ------------------------------------------------------------ sending

    async def _send_loop(self, dest: _Node) -> None:
        try:
            while not self._closed:
                await dest.wake.wait()
                dest.wake.clear()
                batch = dest.waiting
                if not batch:
                    continue
                dest.waiting = {}
                request = AddPartitionsToTxnRequest(
                    transactions=[_entry(q) for q in batch.values()]
                )
                try:
                    response = await self._send(dest, request)
                except asyncio.CancelledError:
                    for q in batch.values():
                        _settle(q, _all(q, ErrorCode.NETWORK_EXCEPTION))
                    raise
                except Exception as e:
                    _log.warning(
                        "AddPartitionsToTxn to broker %d failed: %s",
                        dest.address.broker_id,
                        e,
                    )
                    self._close(dest)
                    for q in batch.values():
                        _settle(q, self._failed(_all(q, ErrorCode.NETWORK_EXCEPTION)))
                    continue
                self._handle_response(dest, batch, response)
        finally:
            self._close(dest)
            for q in dest.waiting.values():
                _settle(q, _all(q, ErrorCode.NETWORK_EXCEPTION))

    async def _send(
        self, dest: _Node, request: AddPartitionsToTxnRequest
    ) -> AddPartitionsToTxnResponse:
        if dest.conn is None:
            a = dest.address
            dest.conn = await asyncio.to_thread(
                KafkaConnection,
                f"{a.host}:{a.port}",
                timeout=self.request_timeout_s,
                client_id=f"broker-{self.broker_id}-add-partitions-to-txn",
                **self.connection_options,
            )
        conn = dest.conn
        return await asyncio.to_thread(
            conn.request,
            ApiKey.ADD_PARTITIONS_TO_TXN,
            ADD_PARTITIONS_TO_TXN_VERSION,
            request,
            AddPartitionsToTxnResponse,
        )

    def _handle_response(
        self, dest: _Node, batch: dict[str, _Question], response: AddPartitionsToTxnResponse
    ) -> None:
        if response.error_code != ErrorCode.NONE:
            _log.error(
                "AddPartitionsToTxn to broker %d answered %s",
                dest.address.broker_id,
                _name(response.error_code),
            )
            # A producer is never shown CLUSTER_AUTHORIZATION_FAILED: the
            # verification simply did not happen.
            code = (
                ErrorCode.INVALID_TXN_STATE
                if response.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                else response.error_code
            )
            for q in batch.values():
                _settle(q, self._failed(_all(q, code)))
            return
        answered: dict[str, dict[TopicPartition, int]] = {}
        for result in response.results_by_transaction:
            codes = answered.setdefault(result.transactional_id, {})
            for t in result.topic_results:
                for p in t.results_by_partition:
                    if p.partition_error_code != ErrorCode.NONE:
                        codes[TopicPartition(t.name, p.partition_index)] = _translate(
                            p.partition_error_code
                        )
        for txn_id, q in batch.items():
            got = answered.get(txn_id)
            if got is None:  # the coordinator left it out: not verified
                _settle(q, self._failed(_all(q, ErrorCode.UNKNOWN_SERVER_ERROR)))
            else:
                _settle(q, self._failed(got))

    @staticmethod
    def _close(dest: _Node) -> None:
        conn, dest.conn = dest.conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(Exception):
                conn.close()

    async def shutdown(self) -> None:
        self._closed = True
        for dest in self._nodes.values():
            if dest.task is not None:
                dest.task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await dest.task
            self._close(dest)
        self._nodes.clear()


def _entry(q: _Question) -> AddPartitionsToTxnTransaction:
    by_topic: dict[str, list[int]] = {}
    for tp in q.partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return AddPartitionsToTxnTransaction(
        transactional_id=q.transactional_id,
        producer_id=q.producer_id,
        producer_epoch=q.producer_epoch,
        verify_only=not q.add,
        topics=[AddPartitionsToTxnTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
    )


def _translate(code: int) -> int:
    """A coordinator's partition code as the producer is to see it, for
    clients of transactions v1 (Kafka's AddPartitionsToTxnManager)."""
    if code == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if code == TRANSACTION_ABORTABLE:
        return ErrorCode.INVALID_TXN_STATE
    return code


def _name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)
