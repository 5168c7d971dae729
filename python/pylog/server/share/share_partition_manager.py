"""SharePartitionManager: ShareFetch and ShareAcknowledge over the share
partitions this broker leads (KIP-932; Kafka's
``kafka.server.share.SharePartitionManager`` with DelayedShareFetch).

A share partition is made on first use — by the group coordinator when it
first assigns the partition to the group (Kafka's InitializeShareGroupState),
or by a ShareFetch — from its persisted state, else at the start offset
``share.auto.offset.reset`` names (``latest``, Kafka's default: the high
watermark then; ``earliest``: the log start).

A ShareFetch reads each partition of the member's share session from the
first offset it may acquire, as a Fetch reads (a zero-copy slice of the
segment file, up to the high watermark), acquires the available records of
the batches read — a whole batch at a time, until ``max_records`` — and
returns the slice cut after the last batch used, with the acquired runs as
``acquired_records``; the client delivers only those. Each acquisition has
a timer of ``group.share.record.lock.duration.ms``: records still held when
it runs out go back (or are archived at the delivery-count limit). With
nothing to acquire a ShareFetch waits up to its ``max_wait_ms`` like a
Fetch: woken by an append to one of its partitions (the Fetch purgatory) or
by records released, acknowledged back or expired.

Every change a member causes (acknowledgements, a release, an expired lock)
is written through the Persister before the request is answered.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass, field

from pylog import _native
from pylog.common.topic_partition import TopicPartition
from pylog.common.utils.time import Clock, now_ms
from pylog.errors import ErrorCode, KafkaError
from pylog.log.log import FetchIsolation
from pylog.log.transaction_index import AbortedTxn
from pylog.logsafe import quoted
from pylog.records import FileRecords
from pylog.server.config import KafkaConfig
from pylog.server.delayed_fetch import FetchParams, FetchPartitionRequest
from pylog.server.replica_manager import ReplicaManager
from pylog.server.share.persister import InMemoryPersister, Persister, PersisterError
from pylog.server.share.share_partition import AcknowledgeType, SharePartition
from pylog.server.share.share_session_cache import ShareSessionCache

__all__ = ["ShareFetchPartitionResult", "SharePartitionManager"]

_log = logging.getLogger("pylog.server.share")

_Key = tuple[str, str, int]  # group id, topic id, partition


@dataclass(slots=True)
class ShareFetchPartitionResult:
    error_code: int = ErrorCode.NONE
    records: FileRecords | bytes = b""
    acquired: list[tuple[int, int, int]] = field(default_factory=list)
    leader_epoch: int = -1


class SharePartitionManager:
    def __init__(
        self,
        config: KafkaConfig,
        replica_manager: ReplicaManager,
        persister: Persister | None = None,
        *,
        clock: Clock = now_ms,
    ) -> None:
        self.replica_manager = replica_manager
        self.persister: Persister = persister or InMemoryPersister()
        self.clock = clock
        self.record_lock_duration_ms = int(config.get("group.share.record.lock.duration.ms"))
        self.delivery_count_limit = int(config.get("group.share.delivery.count.limit"))
        self.max_in_flight = int(config.get("group.share.partition.max.record.locks"))
        self.sessions = ShareSessionCache(int(config.get("group.share.max.share.sessions")))
        self.partitions: dict[_Key, SharePartition] = {}
        self._loading: dict[_Key, asyncio.Future[SharePartition]] = {}
        self._released = asyncio.Event()
        self._tasks: set[asyncio.Future[object]] = set()
        self._timers: set[asyncio.TimerHandle] = set()
        #: share partitions whose last write failed (their memory is ahead)
        self._dirty: set[_Key] = set()
        #: A group's overrides (Kafka's GroupConfig: share.auto.offset.reset,
        #: share.record.lock.duration.ms, share.delivery.count.limit); none by default.
        self.group_config: Callable[[str], Mapping[str, str]] = lambda group_id: {}

    def lock_duration_ms(self, group_id: str) -> int:
        """The group's acquisition lock (share.record.lock.duration.ms)."""
        return int(
            self.group_config(group_id).get(
                "share.record.lock.duration.ms", self.record_lock_duration_ms
            )
        )

    def shutdown(self) -> None:
        for t in list(self._timers):
            t.cancel()
        self._timers.clear()
        for f in list(self._tasks):
            f.cancel()

    def _spawn(self, coro: Coroutine[object, object, object]) -> None:
        task: asyncio.Future[object] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ------------------------------------------------------------ share partitions

    def initialize(self, group_id: str, partitions: list[tuple[str, str, int]]) -> None:
        """The coordinator assigned these (topic id, topic name, partition) to
        the group for the first time: fix their start offsets now, where this
        broker leads them (else their leader does at the first ShareFetch)."""
        for topic_id, name, p in partitions:
            tp = TopicPartition(name, p)
            part = self.replica_manager.partition(tp)
            if part is not None and part.is_leader:
                self._spawn(self.share_partition(group_id, topic_id, tp))

    async def share_partition(
        self, group_id: str, topic_id: str, tp: TopicPartition
    ) -> SharePartition:
        key = (group_id, topic_id, tp.partition)
        sp = self.partitions.get(key)
        if sp is not None:
            return sp
        loading = self._loading.get(key)
        if loading is not None:
            return await asyncio.shield(loading)
        fut: asyncio.Future[SharePartition] = asyncio.get_running_loop().create_future()
        self._loading[key] = fut
        try:
            sp = await self._load(group_id, topic_id, tp)
            self.partitions[key] = sp
            fut.set_result(sp)
            return sp
        except BaseException as e:
            fut.set_exception(e)
            fut.exception()  # retrieved: the waiters re-raise it
            raise
        finally:
            self._loading.pop(key, None)

    async def _load(self, group_id: str, topic_id: str, tp: TopicPartition) -> SharePartition:
        sp = await self._read_or_initialize(group_id, topic_id, tp)
        part = self.replica_manager.partition(tp)
        if part is not None:
            sp.leader_epoch = part.leader_epoch
        return sp

    async def _read_or_initialize(
        self, group_id: str, topic_id: str, tp: TopicPartition
    ) -> SharePartition:
        try:
            st = await self.persister.read_state(group_id, topic_id, tp.partition)
        except PersisterError as e:
            raise _Failed(e.code) from e
        limits = {
            "delivery_count_limit": int(
                self.group_config(group_id).get(
                    "share.delivery.count.limit", self.delivery_count_limit
                )
            ),
            "max_in_flight": self.max_in_flight,
        }
        if st is not None:
            return SharePartition.from_persisted(group_id, topic_id, tp, st, **limits)
        part = self.replica_manager.get_partition_or_error(tp)
        reset = self.group_config(group_id).get("share.auto.offset.reset", "latest")
        start = part.log_start_offset if reset == "earliest" else part.high_watermark
        sp = SharePartition(group_id, topic_id, tp, start, **limits)
        code = await self.persister.initialize_state(
            group_id, topic_id, tp.partition, sp.state_epoch, start
        )
        if code:
            raise _Failed(code)
        _log.info("share group %s: %s starts at offset %d (%s)", quoted(group_id), tp, start, reset)
        return sp

    # ------------------------------------------------------------ acknowledging

    async def acknowledge(
        self,
        group_id: str,
        member_id: str,
        topic_id: str,
        tp: TopicPartition,
        batches: list[tuple[int, int, list[int]]],
    ) -> int:
        try:
            sp = await self.share_partition(group_id, topic_id, tp)
        except KafkaError as e:
            return e.code
        except _Failed as e:
            return e.code
        code = sp.acknowledge(member_id, batches)
        if code:
            return code
        renewed = [
            o
            for first, last, types in batches
            if AcknowledgeType.RENEW in types
            for o in range(max(first, sp.start_offset), last + 1)
            if (types[0] if len(types) == 1 else types[o - first]) == AcknowledgeType.RENEW
        ]
        if renewed:
            lock_id = sp.new_lock_id()
            sp.renew(member_id, renewed, lock_id)
            self._lock_timer(sp, renewed, lock_id)
        self._wake()
        return await self._persist(sp)

    async def _persist(self, sp: SharePartition) -> int:
        code = await self.persister.write_state(
            sp.group_id, sp.topic_id, sp.tp.partition, sp.persisted()
        )
        key = (sp.group_id, sp.topic_id, sp.tp.partition)
        if code in (ErrorCode.FENCED_STATE_EPOCH, ErrorCode.INVALID_REQUEST):
            # The group's offsets were altered (a newer state epoch) or its
            # state deleted (no longer initialized): this copy is stale, the
            # next use reads it again.
            _log.info("share group %s: state of %s fenced: read again at next use",
                      quoted(sp.group_id), sp.tp)  # fmt: skip
            if self.partitions.get(key) is sp:
                del self.partitions[key]
            self._dirty.discard(key)
            return code
        if code:
            self._dirty.add(key)
            _log.warning("share group %s: state of %s not written: %s",
                         quoted(sp.group_id), sp.tp, ErrorCode(code).name)  # fmt: skip
        else:
            self._dirty.discard(key)
        return code

    def release_member(self, group_id: str, member_id: str) -> None:
        """The member's session closed or it left: what it holds goes back."""
        for sp in list(self.partitions.values()):
            if sp.group_id == group_id and sp.release_member(member_id):
                self._spawn(self._persist(sp))
                self._wake()

    def forget_idle(
        self, group_id: str, topic_id: str | None = None, *, group_empty: bool = False
    ) -> None:
        """Drop the group's share partitions (of ``topic_id``, else all) that
        hold nothing in flight for a member and were saved: with no session
        of the group left here, the next use reads the persisted state again
        — which AlterShareGroupOffsets or DeleteShareGroupOffsets may have
        changed meanwhile. ``group_empty``: the group's coordinator knows it
        has no member, so sessions left here are stale and go too."""
        if group_empty:
            self.sessions.remove_group(group_id)
        elif self.sessions.has_group(group_id):
            return
        for key, sp in list(self.partitions.items()):
            if key[0] != group_id or (topic_id is not None and key[1] != topic_id):
                continue
            if key in self._dirty or sp.counts()["ACQUIRED"]:
                continue
            del self.partitions[key]

    # ------------------------------------------------------------ locks

    def _lock_timer(self, sp: SharePartition, offsets: list[int], lock_id: int) -> None:
        loop = asyncio.get_running_loop()
        handle: asyncio.TimerHandle | None = None

        def expired() -> None:
            if handle is not None:
                self._timers.discard(handle)
            if self.partitions.get((sp.group_id, sp.topic_id, sp.tp.partition)) is not sp:
                return
            n = sp.expire_lock(offsets, lock_id)
            if n:
                _log.info("share group %s: acquisition lock of %d record(s) of %s expired",
                          quoted(sp.group_id), n, sp.tp)  # fmt: skip
                self._spawn(self._persist(sp))
                self._wake()

        handle = loop.call_later(self.lock_duration_ms(sp.group_id) / 1000, expired)
        self._timers.add(handle)

    def _wake(self) -> None:
        ev, self._released = self._released, asyncio.Event()
        ev.set()

    # ------------------------------------------------------------ fetching

    async def fetch(
        self,
        group_id: str,
        member_id: str,
        parts: Iterable[tuple[str, TopicPartition]],
        *,
        max_wait_ms: int,
        max_bytes: int,
        max_records: int,
        record_limit: bool = False,
    ) -> dict[tuple[str, int], ShareFetchPartitionResult]:
        """``record_limit``: KIP-1206's ShareAcquireMode RECORD_LIMIT, no
        more than ``max_records`` acquired even within a batch."""
        wanted = list(parts)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0, max_wait_ms) / 1000
        while True:
            released = self._released
            results, waits = await self._fetch_once(
                group_id, member_id, wanted, max_bytes, max_records, record_limit
            )
            got = any(r.acquired for r in results.values())
            remaining = deadline - loop.time()
            if got or remaining <= 0 or any(r.error_code for r in results.values()):
                return results
            await self._wait(waits, released, remaining)
            if loop.time() >= deadline:
                results, _ = await self._fetch_once(
                    group_id, member_id, wanted, max_bytes, max_records, record_limit
                )
                return results

    async def _wait(
        self, waits: list[FetchPartitionRequest], released: asyncio.Event, remaining: float
    ) -> None:
        """Until one of ``waits`` has a record past its offset, records are
        released, or ``remaining`` seconds pass."""
        woken: asyncio.Future[object] = asyncio.ensure_future(released.wait())
        pending: set[asyncio.Future[object]] = {woken}
        appended: asyncio.Future[object] | None = None
        if waits:  # else every partition is at its in-flight limit: only a release helps
            params = FetchParams(max_wait_ms=max(1, int(remaining * 1000)), min_bytes=1)
            fetching: asyncio.Future[object] = asyncio.ensure_future(
                self.replica_manager.fetch_messages(params, waits)
            )
            appended = fetching
            pending.add(fetching)
        try:
            await asyncio.wait(pending, timeout=remaining, return_when="FIRST_COMPLETED")
        finally:
            woken.cancel()
            if appended is not None and not appended.done():
                # Its DelayedFetch answers at its own deadline; keep it referenced.
                self._tasks.add(appended)
                appended.add_done_callback(self._tasks.discard)

    async def _fetch_once(
        self,
        group_id: str,
        member_id: str,
        wanted: list[tuple[str, TopicPartition]],
        max_bytes: int,
        max_records: int,
        record_limit: bool = False,
    ) -> tuple[dict[tuple[str, int], ShareFetchPartitionResult], list[FetchPartitionRequest]]:
        out: dict[tuple[str, int], ShareFetchPartitionResult] = {}
        # share.isolation.level (a group config): read_committed reads up to
        # the last stable offset and never delivers an aborted transaction's
        # records.
        committed = (
            self.group_config(group_id).get("share.isolation.level", "read_uncommitted")
            == "read_committed"
        )
        isolation = FetchIsolation.TXN_COMMITTED if committed else FetchIsolation.HIGH_WATERMARK
        waits: list[FetchPartitionRequest] = []
        bytes_left = max_bytes
        records_left = max_records
        for topic_id, tp in wanted:
            res = out[(topic_id, tp.partition)] = ShareFetchPartitionResult()
            part = self.replica_manager.partition(tp)
            if part is None:
                res.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            res.leader_epoch = part.leader_epoch
            if not part.is_leader:
                res.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
                continue
            try:
                sp = await self.share_partition(group_id, topic_id, tp)
            except KafkaError as e:
                res.error_code = e.code
                continue
            except _Failed as e:
                res.error_code = e.code
                continue
            sp.move_start(part.log_start_offset)
            if records_left <= 0 or bytes_left <= 0 or not sp.can_acquire():
                continue
            offset = sp.next_fetch_offset()
            req = FetchPartitionRequest(tp, offset, bytes_left)
            params = FetchParams(max_bytes=bytes_left, isolation=isolation)
            read = self.replica_manager.read_from_local_log(params, [req])[0]
            if read.error_code:
                res.error_code = read.error_code
                continue
            records = read.records
            if len(records) == 0:
                waits.append(FetchPartitionRequest(tp, offset, 1))
                continue
            infos = _batch_infos(records)
            aborted = _aborted_batches(infos, read.aborted_transactions or [])
            acquired, lock_id, used = sp.acquire(
                member_id,
                [(i.base_offset, i.last_offset) for i in infos],
                records_left,
                record_limit=record_limit,
                aborted=aborted,
            )
            if not acquired:
                waits.append(FetchPartitionRequest(tp, max(sp.end_offset, offset), 1))
                continue
            first, last = infos[0], infos[used - 1]
            size = last.position + last.size - first.position
            if isinstance(records, FileRecords):
                records = dataclasses.replace(records, size=size)
            else:
                records = records[:size]
            res.records = records
            res.acquired = acquired
            taken = sum(b - a + 1 for a, b, _ in acquired)
            records_left -= taken
            bytes_left -= size
            self._lock_timer(sp, [o for a, b, _ in acquired for o in range(a, b + 1)], lock_id)
        return out, waits


def _aborted_batches(infos: list[_native.BatchInfo], aborted: list[AbortedTxn]) -> frozenset[int]:
    """Base offsets of the data batches of aborted transactions: a
    transactional batch of a producer with an aborted transaction whose range
    (first offset to its ABORT marker) holds the batch."""
    if not aborted:
        return frozenset()
    by_producer: dict[int, list[AbortedTxn]] = {}
    for t in aborted:
        by_producer.setdefault(t.producer_id, []).append(t)
    return frozenset(
        i.base_offset
        for i in infos
        if i.is_transactional
        and not i.is_control
        and any(
            t.first_offset <= i.base_offset <= t.last_offset
            for t in by_producer.get(i.producer_id, ())
        )
    )


def _batch_infos(records: FileRecords | bytes) -> list[_native.BatchInfo]:
    """The headers of the whole batches of a read (one native call)."""
    if isinstance(records, FileRecords):
        infos, _ = _native.read_batch_infos(
            records.path, records.position, 100_000, records.position + records.size
        )
        return infos
    infos, _ = _native.batch_infos(records)
    return infos


class _Failed(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code
