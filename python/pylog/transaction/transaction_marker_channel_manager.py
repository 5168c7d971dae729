"""TransactionMarkerChannelManager: sends a finished transaction's COMMIT or
ABORT markers to the leader of each of its partitions, as WriteTxnMarkers
requests over the inter-broker listener (this broker's own partitions too,
as Kafka does), and completes the transaction once every partition has its
marker (Kafka's TransactionMarkerChannelManager and its
TransactionMarkerRequestCompletionHandler).

One queue and one sender task per destination broker. A sender takes
everything queued for its broker and sends it as one request (one marker
entry per transaction). Each partition's answer decides:

* NONE: that partition is done;
* NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS(_AFTER_APPEND),
  REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR, COORDINATOR_LOAD_IN_PROGRESS: sent
  again, to the leader the metadata then names (a leader move re-routes it);
* INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED: a newer
  coordinator or producer epoch owns the transaction: sending stops and this
  coordinator does not complete it;
* a partition of a deleted topic, UNSUPPORTED_FOR_MESSAGE_FORMAT: done (no
  data of the transaction can be there);
* anything else: logged, and sent again after a back-off.

A broker that cannot be reached has its request sent again after a back-off,
re-routed. When the last partition is done, ``complete`` is called (the
coordinator writes CompleteCommit / CompleteAbort). A coordinator that loses
its ``__transaction_state`` partition drops that partition's pending
markers (:meth:`remove_markers_for_txn_topic_partition`): the new
coordinator resends them from the PrepareCommit / PrepareAbort it loads.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from pylog.common.topic_partition import TopicPartition
from pylog.errors import ErrorCode
from pylog.protocol import ApiKey
from pylog.protocol.client import KafkaConnection
from pylog.protocol.messages import WriteTxnMarkersRequest, WriteTxnMarkersResponse
from pylog.protocol.messages.write_txn_markers_request import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
)
from pylog.transaction.transaction_metadata import TransactionMetadata, TxnTransitMetadata

__all__ = ["BrokerAddress", "PendingTxnMarkers", "TransactionMarkerChannelManager"]

_log = logging.getLogger("pylog.transaction.markers")

#: Kafka 4's WriteTxnMarkers (v0 was removed by KIP-896).
WRITE_TXN_MARKERS_VERSION = 1

_RETRY = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    }
)
# Kafka's codes without a name in pylog.errors yet.
_TRANSACTION_COORDINATOR_FENCED = 52
_UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
_FENCED = frozenset({ErrorCode.INVALID_PRODUCER_EPOCH, _TRANSACTION_COORDINATOR_FENCED})


@dataclass(frozen=True)
class BrokerAddress:
    broker_id: int
    host: str
    port: int


@dataclass(eq=False)
class PendingTxnMarkers:
    """One transaction's markers still to be written."""

    transactional_id: str
    txn_partition: int  # its __transaction_state partition
    coordinator_epoch: int
    producer_id: int
    producer_epoch: int
    commit: bool
    remaining: set[TopicPartition]
    #: The CompleteCommit / CompleteAbort written once every marker is.
    complete: TxnTransitMetadata
    aborted: bool = False  # fenced or unloaded: never completed here


@dataclass
class _Destination:
    address: BrokerAddress
    queue: list[tuple[PendingTxnMarkers, list[TopicPartition]]] = field(default_factory=list)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    conn: KafkaConnection | None = None


class TransactionMarkerChannelManager:
    def __init__(
        self,
        broker_id: int,
        locate: Callable[[TopicPartition], BrokerAddress | None],
        topic_exists: Callable[[str], bool],
        complete: Callable[[PendingTxnMarkers], Awaitable[None]],
        *,
        socket_timeout_s: float = 30.0,
        backoff_s: float = 0.1,
    ) -> None:
        self.broker_id = broker_id
        #: The partition's leader as the metadata names it now (None: none).
        self.locate = locate
        self.topic_exists = topic_exists
        self.complete = complete
        self.socket_timeout_s = socket_timeout_s
        self.backoff_s = backoff_s
        #: Extra KafkaConnection arguments (the inter-broker listener's TLS
        #: context and SASL login), set by the broker.
        self.connection_options: dict[str, Any] = {}
        self._destinations: dict[BrokerAddress, _Destination] = {}
        self._pending: dict[str, PendingTxnMarkers] = {}
        self._unroutable: list[tuple[PendingTxnMarkers, TopicPartition]] = []
        self._retry_task: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False

    # ------------------------------------------------------------ queueing

    def pending_for(self, transactional_id: str) -> PendingTxnMarkers | None:
        return self._pending.get(transactional_id)

    def add_txn_markers_to_send(
        self,
        coordinator_epoch: int,
        commit: bool,
        metadata: TransactionMetadata,
        complete: TxnTransitMetadata,
        txn_partition: int,
    ) -> None:
        """Send the markers of ``metadata`` (in PrepareCommit / PrepareAbort,
        just written or loaded); ``complete`` is written once they all are."""
        old = self._pending.pop(metadata.transactional_id, None)
        if old is not None:
            old.aborted = True
        entry = PendingTxnMarkers(
            metadata.transactional_id,
            txn_partition,
            coordinator_epoch,
            metadata.producer_id,
            metadata.producer_epoch,
            commit,
            set(metadata.partitions),
            complete,
        )
        self._pending[entry.transactional_id] = entry
        if not entry.remaining:
            self._spawn(self._finish(entry))
            return
        for tp in sorted(entry.remaining):
            self._route(entry, tp)

    def remove_markers_for_txn_topic_partition(self, txn_partition: int) -> None:
        for txn_id, entry in list(self._pending.items()):
            if entry.txn_partition == txn_partition:
                entry.aborted = True
                del self._pending[txn_id]

    def _route(self, entry: PendingTxnMarkers, tp: TopicPartition) -> None:
        if entry.aborted or tp not in entry.remaining:
            return
        address = self.locate(tp)
        if address is None:
            if not self.topic_exists(tp.topic):
                self._done(entry, tp)  # deleted: nothing to mark
                return
            self._unroutable.append((entry, tp))
            self._schedule_retry()
            return
        dest = self._destinations.get(address)
        if dest is None:
            dest = self._destinations[address] = _Destination(address)
            dest.task = asyncio.get_running_loop().create_task(
                self._send_loop(dest), name=f"txn-markers-to-{address.broker_id}"
            )
        for queued, tps in dest.queue:
            if queued is entry:
                tps.append(tp)
                break
        else:
            dest.queue.append((entry, [tp]))
        dest.wake.set()

    def _schedule_retry(self) -> None:
        if self._retry_task is None or self._retry_task.done():
            self._retry_task = asyncio.get_running_loop().create_task(self._retry_unroutable())

    async def _retry_unroutable(self) -> None:
        await asyncio.sleep(self.backoff_s)
        # Done before routing: a partition still without a leader schedules
        # the next retry, which a running retry task would have swallowed
        # (the transaction then hung in PrepareCommit until its coordinator moved).
        self._retry_task = None
        waiting, self._unroutable = self._unroutable, []
        for entry, tp in waiting:
            self._route(entry, tp)

    def _done(self, entry: PendingTxnMarkers, tp: TopicPartition) -> None:
        entry.remaining.discard(tp)
        if not entry.remaining and not entry.aborted:
            self._spawn(self._finish(entry))

    async def _finish(self, entry: PendingTxnMarkers) -> None:
        if self._pending.get(entry.transactional_id) is entry:
            del self._pending[entry.transactional_id]
        if entry.aborted:
            return
        await self.complete(entry)

    def _spawn(self, coro: Awaitable[None]) -> None:
        async def run() -> None:
            try:
                await coro
            except Exception:
                _log.exception("completing a transaction failed")

        task = asyncio.get_running_loop().create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ------------------------------------------------------------ sending

    def _request(
        self, batch: list[tuple[PendingTxnMarkers, list[TopicPartition]]]
    ) -> WriteTxnMarkersRequest:
        markers = []
        for entry, tps in batch:
            by_topic: dict[str, list[int]] = {}
            for tp in tps:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            markers.append(
                WritableTxnMarker(
                    producer_id=entry.producer_id,
                    producer_epoch=entry.producer_epoch,
                    transaction_result=entry.commit,
                    topics=[
                        WritableTxnMarkerTopic(name=t, partition_indexes=ps)
                        for t, ps in by_topic.items()
                    ],
                    coordinator_epoch=entry.coordinator_epoch,
                )
            )
        return WriteTxnMarkersRequest(markers=markers)

    async def _send_loop(self, dest: _Destination) -> None:
        while not self._closed:
            await dest.wake.wait()
            dest.wake.clear()
            batch = [(e, tps) for e, tps in dest.queue if not e.aborted]
            dest.queue.clear()
            if not batch:
                continue
            try:
                response = await self._send(dest, self._request(batch))
            except asyncio.CancelledError:
                self._close(dest)
                raise
            except Exception as e:
                _log.info(
                    "sending transaction markers to broker %d failed (%s); retrying",
                    dest.address.broker_id,
                    e,
                )
                self._close(dest)
                await asyncio.sleep(self.backoff_s)
                for entry, tps in batch:  # re-routed: the leader may have moved
                    for tp in tps:
                        self._route(entry, tp)
                continue
            self._handle_response(batch, response)

    async def _send(
        self, dest: _Destination, request: WriteTxnMarkersRequest
    ) -> WriteTxnMarkersResponse:
        if dest.conn is None:
            a = dest.address
            dest.conn = await asyncio.to_thread(
                KafkaConnection,
                f"{a.host}:{a.port}",
                timeout=self.socket_timeout_s,
                client_id=f"broker-{self.broker_id}-txn-marker-sender",
                **self.connection_options,
            )
        conn = dest.conn
        return await asyncio.to_thread(
            conn.request,
            ApiKey.WRITE_TXN_MARKERS,
            WRITE_TXN_MARKERS_VERSION,
            request,
            WriteTxnMarkersResponse,
        )

    def _handle_response(
        self,
        batch: list[tuple[PendingTxnMarkers, list[TopicPartition]]],
        response: WriteTxnMarkersResponse,
    ) -> None:
        # Each marker entry is answered under its producer id; one request
        # holds at most one entry per transaction, whose producer ids differ.
        codes: dict[int, dict[TopicPartition, int]] = {}
        for m in response.markers:
            per = codes.setdefault(m.producer_id, {})
            for t in m.topics:
                for p in t.partitions:
                    per[TopicPartition(t.name, p.partition_index)] = p.error_code
        retry: list[tuple[PendingTxnMarkers, TopicPartition]] = []
        for entry, tps in batch:
            if entry.aborted:
                continue
            answered = codes.get(entry.producer_id, {})
            for tp in tps:
                code = answered.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR)
                if code == ErrorCode.NONE or code == _UNSUPPORTED_FOR_MESSAGE_FORMAT:
                    self._done(entry, tp)
                elif code in _FENCED:
                    _log.info(
                        "markers of %s (producer %d epoch %d) fenced at %s: %s; "
                        "not completing it here",
                        entry.transactional_id,
                        entry.producer_id,
                        entry.producer_epoch,
                        tp,
                        ErrorCode(code).name,
                    )
                    entry.aborted = True
                    if self._pending.get(entry.transactional_id) is entry:
                        del self._pending[entry.transactional_id]
                    break
                else:
                    if code not in _RETRY:
                        _log.warning(
                            "marker for %s at %s answered %s; retrying",
                            entry.transactional_id,
                            tp,
                            _name(code),
                        )
                    retry.append((entry, tp))
        if retry:
            self._spawn(self._retry_later(retry))

    async def _retry_later(self, retry: list[tuple[PendingTxnMarkers, TopicPartition]]) -> None:
        await asyncio.sleep(self.backoff_s)
        for entry, tp in retry:
            self._route(entry, tp)

    @staticmethod
    def _close(dest: _Destination) -> None:
        conn, dest.conn = dest.conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(Exception):
                conn.close()

    async def shutdown(self) -> None:
        self._closed = True
        for dest in self._destinations.values():
            if dest.task is not None:
                dest.task.cancel()
            self._close(dest)
        if self._retry_task is not None:
            self._retry_task.cancel()
        for t in list(self._tasks):
            t.cancel()
        self._destinations.clear()


def _name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)
