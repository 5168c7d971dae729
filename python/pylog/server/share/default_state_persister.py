"""DefaultStatePersister: a share-partition leader's way to its share
coordinator (KIP-932; Kafka's ``DefaultStatePersister`` and
``PersisterStateManager``).

Each (group, topic id, partition) has one share coordinator: the broker
leading its ``__share_group_state`` partition, found in the metadata cache
as Kafka's ShareCoordinatorMetadataCacheHelper finds it (``locate``). The
persister sends it ReadShareGroupState, WriteShareGroupState,
InitializeShareGroupState or DeleteShareGroupState on the inter-broker
listener — or, when that broker is this one, asks the coordinator
in-process (``local``). NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
COORDINATOR_NOT_AVAILABLE and a lost connection are retried with a growing
back-off, the coordinator looked up again each time, until
``retry_timeout_s`` has passed (the state partition's leader moved: the
controller names the next one within the ZooKeeper session timeout).

The requests of one share partition go one at a time and in the order they
were made: a write retried after a failure can never land after, and
overwrite, a later write of the same partition. Every write carries the
whole state, so one that fails for good is made good by the next.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

from pylog.errors import ErrorCode, KafkaError
from pylog.protocol import ApiKey
from pylog.protocol.client import KafkaConnection
from pylog.protocol.messages import (
    DeleteShareGroupStateResponse,
    InitializeShareGroupStateResponse,
    ReadShareGroupStateResponse,
    WriteShareGroupStateResponse,
)
from pylog.server.add_partitions_to_txn_manager import CoordinatorNode
from pylog.server.share.persister import PersistedState, PersisterError, StateBatch

__all__ = ["DefaultStatePersister", "LocalShareCoordinator"]

_log = logging.getLogger("pylog.server.share.persister")

_T = TypeVar("_T")

_RETRIABLE = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.REQUEST_TIMED_OUT,
    }
)

#: WriteShareGroupState v1 carries DeliveryCompleteCount (left -1: unknown).
_WRITE_VERSION = 1

_Key = tuple[str, str, int]


class LocalShareCoordinator(Protocol):
    """The share coordinator on this broker, asked without a connection."""

    async def read(
        self, group_id: str, topic_id: str, partition: int, leader_epoch: int = -1
    ) -> tuple[int, PersistedState | None]: ...

    async def write(
        self, group_id: str, topic_id: str, partition: int, state: PersistedState
    ) -> int: ...

    async def initialize(
        self, group_id: str, topic_id: str, partition: int, state_epoch: int, start_offset: int
    ) -> int: ...

    async def delete(self, group_id: str, topic_id: str, partition: int) -> int: ...


class _Node:
    def __init__(self) -> None:
        self.conn: KafkaConnection | None = None
        self.lock = asyncio.Lock()


class DefaultStatePersister:
    def __init__(
        self,
        broker_id: int,
        locate: Callable[[str, str, int], CoordinatorNode | None],
        local: LocalShareCoordinator,
        *,
        ensure_topic: Callable[[], None] = lambda: None,
        request_timeout_s: float = 30.0,
        retry_timeout_s: float = 30.0,
        backoff_s: float = 0.1,
        max_backoff_s: float = 1.0,
    ) -> None:
        self.broker_id = broker_id
        self.locate = locate
        self.local = local
        self.ensure_topic = ensure_topic
        self.request_timeout_s = request_timeout_s
        self.retry_timeout_s = retry_timeout_s
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        #: Extra KafkaConnection arguments: the inter-broker listener's TLS
        #: context and SASL login, set by the broker.
        self.connection_options: dict[str, Any] = {}
        self._nodes: dict[CoordinatorNode, _Node] = {}
        self._key_locks: dict[_Key, asyncio.Lock] = {}

    # ------------------------------------------------------------ the Persister

    async def read_state(
        self, group_id: str, topic_id: str, partition: int
    ) -> PersistedState | None:
        k = (group_id, topic_id, partition)

        async def local() -> tuple[int, PersistedState | None]:
            return await self.local.read(group_id, topic_id, partition)

        async def remote(conn: KafkaConnection) -> tuple[int, PersistedState | None]:
            r = await asyncio.to_thread(
                conn.request,
                ApiKey.READ_SHARE_GROUP_STATE,
                0,
                {
                    "group_id": group_id,
                    "topics": [
                        {
                            "topic_id": topic_id,
                            "partitions": [{"partition": partition, "leader_epoch": -1}],
                        }
                    ],
                },
                ReadShareGroupStateResponse,
            )
            p = _only(r.results)
            if p is None:
                return ErrorCode.UNKNOWN_SERVER_ERROR, None
            if p.error_code:
                return p.error_code, None
            if p.start_offset < 0:  # never initialized
                return ErrorCode.NONE, None
            return ErrorCode.NONE, PersistedState(
                p.start_offset,
                p.state_epoch,
                -1,
                [
                    StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                    for b in p.state_batches
                ],
            )

        failed: tuple[int, PersistedState | None] = (ErrorCode.UNKNOWN_SERVER_ERROR, None)
        code, st = await self._call(k, "ReadShareGroupState", local, remote, failed)
        if code == ErrorCode.INVALID_REQUEST:
            return None  # never initialized (Kafka 4.3's answer): the leader initializes it
        if code:
            raise PersisterError(code)
        return st

    async def write_state(
        self, group_id: str, topic_id: str, partition: int, state: PersistedState
    ) -> int:
        k = (group_id, topic_id, partition)

        async def local() -> int:
            return await self.local.write(group_id, topic_id, partition, state)

        async def remote(conn: KafkaConnection) -> int:
            r = await asyncio.to_thread(
                conn.request,
                ApiKey.WRITE_SHARE_GROUP_STATE,
                _WRITE_VERSION,
                {
                    "group_id": group_id,
                    "topics": [
                        {
                            "topic_id": topic_id,
                            "partitions": [
                                {
                                    "partition": partition,
                                    "state_epoch": state.state_epoch,
                                    "leader_epoch": state.leader_epoch,
                                    "start_offset": state.start_offset,
                                    "delivery_complete_count": -1,
                                    "state_batches": [
                                        {
                                            "first_offset": b.first_offset,
                                            "last_offset": b.last_offset,
                                            "delivery_state": b.delivery_state,
                                            "delivery_count": b.delivery_count,
                                        }
                                        for b in state.batches
                                    ],
                                }
                            ],
                        }
                    ],
                },
                WriteShareGroupStateResponse,
            )
            return _code(_only(r.results))

        return await self._call(
            k, "WriteShareGroupState", local, remote, ErrorCode.UNKNOWN_SERVER_ERROR
        )

    async def initialize_state(
        self, group_id: str, topic_id: str, partition: int, state_epoch: int, start_offset: int
    ) -> int:
        k = (group_id, topic_id, partition)

        async def local() -> int:
            return await self.local.initialize(
                group_id, topic_id, partition, state_epoch, start_offset
            )

        async def remote(conn: KafkaConnection) -> int:
            r = await asyncio.to_thread(
                conn.request,
                ApiKey.INITIALIZE_SHARE_GROUP_STATE,
                0,
                {
                    "group_id": group_id,
                    "topics": [
                        {
                            "topic_id": topic_id,
                            "partitions": [
                                {
                                    "partition": partition,
                                    "state_epoch": state_epoch,
                                    "start_offset": start_offset,
                                }
                            ],
                        }
                    ],
                },
                InitializeShareGroupStateResponse,
            )
            return _code(_only(r.results))

        return await self._call(
            k, "InitializeShareGroupState", local, remote, ErrorCode.UNKNOWN_SERVER_ERROR
        )

    async def delete_state(self, group_id: str, topic_id: str, partition: int) -> int:
        k = (group_id, topic_id, partition)

        async def local() -> int:
            return await self.local.delete(group_id, topic_id, partition)

        async def remote(conn: KafkaConnection) -> int:
            r = await asyncio.to_thread(
                conn.request,
                ApiKey.DELETE_SHARE_GROUP_STATE,
                0,
                {
                    "group_id": group_id,
                    "topics": [{"topic_id": topic_id, "partitions": [{"partition": partition}]}],
                },
                DeleteShareGroupStateResponse,
            )
            return _code(_only(r.results))

        return await self._call(
            k, "DeleteShareGroupState", local, remote, ErrorCode.UNKNOWN_SERVER_ERROR
        )

    # ------------------------------------------------------------ sending

    async def _call(
        self,
        k: _Key,
        api: str,
        local: Callable[[], Awaitable[_T]],
        remote: Callable[[KafkaConnection], Awaitable[_T]],
        failed: _T,
    ) -> _T:
        lock = self._key_locks.get(k)
        if lock is None:
            lock = self._key_locks[k] = asyncio.Lock()
        try:
            async with lock:
                return await self._send(k, api, local, remote, failed)
        finally:
            if not lock.locked() and self._key_locks.get(k) is lock:
                del self._key_locks[k]  # bounded by the share partitions in use

    async def _send(
        self,
        k: _Key,
        api: str,
        local: Callable[[], Awaitable[_T]],
        remote: Callable[[KafkaConnection], Awaitable[_T]],
        failed: _T,
    ) -> _T:
        deadline = time.monotonic() + self.retry_timeout_s
        backoff = self.backoff_s
        logged = False
        while True:
            node = self.locate(*k)
            result: _T
            if node is None:
                with contextlib.suppress(KafkaError, OSError):
                    await asyncio.to_thread(self.ensure_topic)
                result, code = failed, int(ErrorCode.COORDINATOR_NOT_AVAILABLE)
            elif node.broker_id == self.broker_id:
                result = await local()
                code = _code_of(result)
            else:
                result, code = await self._remote(node, api, remote, failed)
            if code not in _RETRIABLE:
                return result
            if time.monotonic() + backoff > deadline:
                _log.warning("%s of %s failed: %s", api, k, ErrorCode(code).name)
                return _with_code(result, code)
            if not logged:
                logged = True
                _log.info("%s of %s: %s, retrying", api, k, ErrorCode(code).name)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, self.max_backoff_s)

    async def _remote(
        self,
        node: CoordinatorNode,
        api: str,
        remote: Callable[[KafkaConnection], Awaitable[_T]],
        failed: _T,
    ) -> tuple[_T, int]:
        n = self._nodes.get(node)
        if n is None:
            n = self._nodes[node] = _Node()
        async with n.lock:
            try:
                if n.conn is None:
                    n.conn = await asyncio.to_thread(
                        KafkaConnection,
                        f"{node.host}:{node.port}",
                        timeout=self.request_timeout_s,
                        client_id=f"broker-{self.broker_id}-share-persister",
                        **self.connection_options,
                    )
                result = await remote(n.conn)
            except (KafkaError, OSError, EOFError, ValueError) as e:
                _log.info("%s to broker %d failed: %s", api, node.broker_id, e)
                self._close(n)
                return failed, int(ErrorCode.NETWORK_EXCEPTION)
        return result, _code_of(result)

    @staticmethod
    def _close(n: _Node) -> None:
        conn, n.conn = n.conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(Exception):
                conn.close()

    def shutdown(self) -> None:
        for n in self._nodes.values():
            self._close(n)
        self._nodes.clear()


def _only(results: list[Any]) -> Any:
    """The one partition's result of a one-partition answer (None: missing)."""
    for t in results:
        for p in t.partitions:
            return p
    return None


def _code(p: Any) -> int:
    return ErrorCode.UNKNOWN_SERVER_ERROR if p is None else int(p.error_code)


def _code_of(result: object) -> int:
    if isinstance(result, tuple):
        return int(result[0])
    assert isinstance(result, int)
    return result


def _with_code(result: _T, code: int) -> _T:
    if isinstance(result, tuple):
        return (code, *result[1:])  # type: ignore[return-value]
    return code  # type: ignore[return-value]
