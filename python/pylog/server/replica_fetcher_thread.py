"""ReplicaFetcherThread: one follower-side fetcher for a set of partitions
that one leader leads (Kafka's AbstractFetcherThread and ReplicaFetcherThread,
as one asyncio task).

Each partition is either truncating or fetching:

* **Truncating** (its start, and after a diverging epoch): the follower asks
  the leader, by OffsetForLeaderEpoch, where its own latest leader epoch ends
  on the leader (KIP-101, KIP-279). The leader answers the greatest epoch it
  has up to ours, with its end: when the local log has that epoch too, the
  log is cut where the shorter of the two copies of the epoch ends; when it
  does not, the log is cut where the local epoch below it ends and the
  question is asked again, so the log converges epoch by epoch. Only a log
  without any epoch (or a leader answering none) falls back to the high
  watermark.
* **Fetching**: Fetch (v12: replica id, current leader epoch, last fetched
  epoch) from the LEO; the batches are appended as they are (offsets, leader
  epochs and bytes of the leader: ``Log.append_as_follower``; the records stay
  a memoryview into the response frame down to the native append); the
  follower's HW is the leader's, capped by the local LEO. A diverging epoch
  in the answer sends the partition back to truncating. OFFSET_OUT_OF_RANGE
  is resolved with ListOffsets against the leader: a leader shorter than the
  fetch offset truncates the follower to the leader's end; a follower behind
  the leader's log start restarts empty at it. Leader-epoch and leadership
  errors back the partition off for ``replica.fetch.backoff.ms`` (the
  controller's next LeaderAndIsr moves it).

The lag of each partition (leader HW minus the fetch offset) feeds the
``MaxLag`` metric.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pylog.common.topic_partition import TopicPartition
from pylog.errors import ErrorCode, KafkaError
from pylog.log.leader_epoch import LeaderEpochFileCache
from pylog.protocol import ApiKey
from pylog.protocol.messages import (
    FetchRequest,
    FetchResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from pylog.protocol.messages.fetch_request import FetchPartition, FetchTopic
from pylog.protocol.messages.fetch_response import PartitionData
from pylog.protocol.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic
from pylog.protocol.messages.offset_for_leader_epoch_request import (
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from pylog.security.sasl_client_authenticator import ClientSecurity
from pylog.server.replica_fetcher_blocking_send import (
    BrokerEndPoint,
    ReplicaFetcherBlockingSend,
)

if TYPE_CHECKING:
    from pylog.server.partition import Partition
    from pylog.server.replica_manager import ReplicaManager

__all__ = [
    "FETCH_VERSION",
    "InitialFetchState",
    "PartitionFetchState",
    "ReplicaFetcherConfig",
    "ReplicaFetcherThread",
]

_log = logging.getLogger("pylog.server.replica_fetcher")

FETCH_VERSION = 12  # by topic name, with last_fetched_epoch and diverging_epoch
OFFSET_FOR_LEADER_EPOCH_VERSION = 4
LIST_OFFSETS_VERSION = 4
_UNDEFINED = -1

# Errors answered by backing the partition off until a LeaderAndIsr moves it.
_BACK_OFF = frozenset(
    {
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.UNKNOWN_SERVER_ERROR,
    }
)


@dataclass(frozen=True, slots=True)
class ReplicaFetcherConfig:
    """The ``replica.*`` keys a fetcher works by (Kafka's names and defaults)."""

    broker_id: int
    num_fetchers: int = 1  # num.replica.fetchers
    fetch_max_bytes: int = 1_048_576  # replica.fetch.max.bytes (per partition)
    fetch_min_bytes: int = 1  # replica.fetch.min.bytes
    fetch_wait_max_ms: int = 500  # replica.fetch.wait.max.ms
    fetch_response_max_bytes: int = 10_485_760  # replica.fetch.response.max.bytes
    fetch_backoff_ms: int = 1_000  # replica.fetch.backoff.ms
    socket_timeout_ms: int = 30_000  # replica.socket.timeout.ms
    socket_receive_buffer_bytes: int = 64 * 1024  # replica.socket.receive.buffer.bytes
    #: How to reach the leader's inter-broker listener (TLS, SASL login).
    security: ClientSecurity = field(default_factory=ClientSecurity)


@dataclass(frozen=True, slots=True)
class InitialFetchState:
    leader: BrokerEndPoint
    current_leader_epoch: int
    init_offset: int


class FetchState(enum.Enum):
    TRUNCATING = "Truncating"
    FETCHING = "Fetching"


@dataclass(slots=True)
class PartitionFetchState:
    fetch_offset: int
    current_leader_epoch: int
    state: FetchState = FetchState.TRUNCATING
    delayed_until: float = 0.0  # time.monotonic() before which it is not fetched
    lag: int = 0
    # Why it last backed off, until a fetch succeeds: the same reason again is
    # logged at DEBUG (a leader gone for a minute is one INFO line, not sixty).
    backoff_reason: str | None = None

    def ready(self, now: float) -> bool:
        return now >= self.delayed_until


class ReplicaFetcherThread:
    """Fetches the partitions of one leader (``source``) into local follower logs."""

    def __init__(
        self,
        name: str,
        fetcher_id: int,
        source: BrokerEndPoint,
        config: ReplicaFetcherConfig,
        replica_manager: ReplicaManager,
    ) -> None:
        self.name = name
        self.fetcher_id = fetcher_id
        self.source = source
        self.config = config
        self.replica_manager = replica_manager
        self.states: dict[TopicPartition, PartitionFetchState] = {}
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._running = False
        self.send = ReplicaFetcherBlockingSend(
            source,
            client_id=f"broker-{config.broker_id}-fetcher-{fetcher_id}",
            socket_timeout_ms=max(config.socket_timeout_ms, config.fetch_wait_max_ms + 1000),
            receive_buffer_bytes=config.socket_receive_buffer_bytes,
            max_response_bytes=config.fetch_response_max_bytes + config.fetch_max_bytes + (1 << 20),
            security=config.security,
        )

    # ------------------------------------------------------------------ control

    def start(self) -> None:
        if self._task is None:
            self._running = True
            self._task = asyncio.get_running_loop().create_task(self._run(), name=self.name)
            self._task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task[None]) -> None:
        """A fetcher that stops while it should run would leave its partitions
        unfetched until a restart: log why and start it again."""
        if task is not self._task or not self._running or task.cancelled():
            return
        _log.error("%s stopped unexpectedly; starting it again", self.name,
                   exc_info=task.exception())  # fmt: skip
        self._task = None
        self.start()

    async def shutdown(self) -> None:
        self._running = False
        self._wakeup.set()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.send.close()

    def add_partitions(self, initial: Mapping[TopicPartition, InitialFetchState]) -> None:
        for tp, st in initial.items():
            cur = self.states.get(tp)
            if cur is not None and cur.current_leader_epoch == st.current_leader_epoch:
                continue
            self.states[tp] = PartitionFetchState(st.init_offset, st.current_leader_epoch)
        self._wakeup.set()

    def remove_partitions(self, tps: Iterable[TopicPartition]) -> None:
        for tp in tps:
            self.states.pop(tp, None)

    @property
    def partition_count(self) -> int:
        return len(self.states)

    @property
    def max_lag(self) -> int:
        return max((s.lag for s in self.states.values()), default=0)

    # ------------------------------------------------------------------ loop

    async def _run(self) -> None:
        while self._running:
            try:
                did_work = await self._do_work()
            except asyncio.CancelledError:
                raise
            except ConnectionError as e:
                _log.info("%s: connection to %s failed: %s", self.name, self.source, e)
                await self._sleep(self.config.fetch_backoff_ms / 1000)
                continue
            except Exception:
                _log.exception("%s: unexpected error; backing off", self.name)
                await self._sleep(self.config.fetch_backoff_ms / 1000)
                continue
            if not did_work:
                await self._sleep(self._idle_wait())

    def _idle_wait(self) -> float:
        now = time.monotonic()
        delays = [s.delayed_until - now for s in self.states.values() if s.delayed_until > now]
        return min(delays, default=self.config.fetch_backoff_ms / 1000)

    async def _sleep(self, seconds: float) -> None:
        self._wakeup.clear()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._wakeup.wait(), max(seconds, 0.001))

    async def _do_work(self) -> bool:
        now = time.monotonic()
        ready = {tp: s for tp, s in self.states.items() if s.ready(now)}
        truncating = {tp: s for tp, s in ready.items() if s.state is FetchState.TRUNCATING}
        if truncating:
            await self._truncate(truncating)
        fetching = {
            tp: s
            for tp, s in self.states.items()
            if s.state is FetchState.FETCHING and s.ready(time.monotonic())
        }
        if fetching:
            await self._fetch(fetching)
        return bool(truncating or fetching)

    def _delay(self, tp: TopicPartition, why: str) -> None:
        s = self.states.get(tp)
        if s is not None:
            level = logging.DEBUG if why == s.backoff_reason else logging.INFO
            _log.log(
                level, "%s: %s backs off %d ms: %s", self.name, tp, self.config.fetch_backoff_ms,
                why,
            )  # fmt: skip
            s.backoff_reason = why
            s.delayed_until = time.monotonic() + self.config.fetch_backoff_ms / 1000

    def _local(self, tp: TopicPartition, state: PartitionFetchState) -> Partition | None:
        """The local follower partition, if this fetcher still owns ``tp`` at
        the same epoch (a LeaderAndIsr may have moved it while a request was out)."""
        if self.states.get(tp) is not state:
            return None
        p = self.replica_manager.partition(tp)
        if p is None or p.is_leader:
            self.states.pop(tp, None)
            return None
        return p

    # ------------------------------------------------------------------ truncation

    async def _truncate(self, parts: dict[TopicPartition, PartitionFetchState]) -> None:
        ask: dict[TopicPartition, tuple[PartitionFetchState, int]] = {}
        quota = self.replica_manager.follower_quota
        throttled: set[TopicPartition] = set()
        for tp, s in parts.items():
            p = self._local(tp, s)
            if p is None:
                continue
            if self.replica_manager.follower_throttled(p):
                if quota.is_quota_exceeded():
                    continue  # over follower.replication.throttled.rate: not this round
                throttled.add(tp)
            latest = p.log.latest_epoch
            if latest is None:
                # No epoch on this log (empty, or pre-v2 data): the HW is all we know.
                self._truncate_local(tp, p, s, p.high_watermark)
                continue
            ask[tp] = (s, latest)
        if not ask:
            return
        by_topic: dict[str, list[OffsetForLeaderPartition]] = {}
        for tp, (s, latest) in ask.items():
            by_topic.setdefault(tp.topic, []).append(
                OffsetForLeaderPartition(
                    partition=tp.partition,
                    current_leader_epoch=s.current_leader_epoch,
                    leader_epoch=latest,
                )
            )
        request = OffsetForLeaderEpochRequest(
            replica_id=self.config.broker_id,
            topics=[OffsetForLeaderTopic(topic=t, partitions=ps) for t, ps in by_topic.items()],
        )
        response = await self.send.send_request(
            ApiKey.OFFSET_FOR_LEADER_EPOCH,
            OFFSET_FOR_LEADER_EPOCH_VERSION,
            request,
            OffsetForLeaderEpochResponse,
        )
        for t in response.topics:
            for r in t.partitions:
                tp = TopicPartition(t.topic, r.partition)
                entry = ask.get(tp)
                if entry is None:
                    continue
                s, _ = entry
                p = self._local(tp, s)
                if p is None:
                    continue
                if r.error_code != ErrorCode.NONE:
                    self._delay(tp, f"OffsetForLeaderEpoch: error {r.error_code}")
                    continue
                self._apply_epoch_end(tp, p, s, r.leader_epoch, r.end_offset)

    def _apply_epoch_end(
        self,
        tp: TopicPartition,
        p: Partition,
        s: PartitionFetchState,
        leader_epoch: int,
        leader_end: int,
    ) -> None:
        """Cut the log by the leader's answer for our latest epoch (KIP-279)."""
        leo = p.log_end_offset
        if leader_epoch == _UNDEFINED or leader_end == _UNDEFINED:
            self._truncate_local(tp, p, s, p.high_watermark)
            return
        cache = p.log.leader_epoch_cache
        local_epoch, local_end = (
            cache.end_offset_for(leader_epoch, leo)
            if isinstance(cache, LeaderEpochFileCache)
            else (_UNDEFINED, _UNDEFINED)
        )
        if local_epoch == leader_epoch:
            # Both have the epoch: it ends where the shorter copy of it ends.
            self._truncate_local(tp, p, s, min(local_end, leader_end, leo))
        elif local_end == _UNDEFINED:
            self._truncate_local(tp, p, s, p.high_watermark)
        else:
            # The leader does not know our latest epoch: go back to where our
            # copy of its epoch ends and ask again with the epoch now latest.
            target = min(local_end, leo)
            if target < leo:
                p.truncate_to(target)
                _log.info("%s: %s truncated to %d (epoch %d), asking again",
                          self.name, tp, target, leader_epoch)  # fmt: skip
            else:
                self._truncate_local(tp, p, s, target)

    def _truncate_local(
        self, tp: TopicPartition, p: Partition, s: PartitionFetchState, offset: int
    ) -> None:
        leo = p.log_end_offset
        if offset < leo:
            _log.info("%s: %s truncated from %d to %d", self.name, tp, leo, offset)
        # Even at the LEO: the log drops an epoch that starts there with no
        # record (Kafka's fetcher truncates whatever the offset).
        p.truncate_to(offset)
        s.fetch_offset = p.log_end_offset
        s.state = FetchState.FETCHING

    # ------------------------------------------------------------------ fetch

    async def _fetch(self, parts: dict[TopicPartition, PartitionFetchState]) -> None:
        cfg = self.config
        by_topic: dict[str, list[FetchPartition]] = {}
        asked: dict[TopicPartition, tuple[PartitionFetchState, int]] = {}
        quota = self.replica_manager.follower_quota
        throttled: set[TopicPartition] = set()
        for tp, s in parts.items():
            p = self._local(tp, s)
            if p is None:
                continue
            if self.replica_manager.follower_throttled(p):
                if quota.is_quota_exceeded():
                    continue  # over follower.replication.throttled.rate: not this round
                throttled.add(tp)
            latest = p.log.latest_epoch
            asked[tp] = (s, s.fetch_offset)
            by_topic.setdefault(tp.topic, []).append(
                FetchPartition(
                    partition=tp.partition,
                    current_leader_epoch=s.current_leader_epoch,
                    fetch_offset=s.fetch_offset,
                    last_fetched_epoch=latest if latest is not None else _UNDEFINED,
                    log_start_offset=p.log_start_offset,
                    partition_max_bytes=cfg.fetch_max_bytes,
                )
            )
        if not asked:
            # Everything held back by the throttle: look again shortly rather
            # than spin (the rate falls as its oldest sample expires).
            await self._sleep(min(0.1, cfg.fetch_backoff_ms / 1000))
            return
        request = FetchRequest(
            replica_id=cfg.broker_id,
            max_wait_ms=cfg.fetch_wait_max_ms,
            min_bytes=cfg.fetch_min_bytes,
            max_bytes=cfg.fetch_response_max_bytes,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=[FetchTopic(topic=t, partitions=ps) for t, ps in by_topic.items()],
        )
        response = await self.send.send_request(ApiKey.FETCH, FETCH_VERSION, request, FetchResponse)
        if response.error_code != ErrorCode.NONE:
            for tp in asked:
                self._delay(tp, f"Fetch: error {response.error_code}")
            return
        for t in response.responses:
            for r in t.partitions:
                tp = TopicPartition(t.topic, r.partition_index)
                entry = asked.get(tp)
                if entry is None:
                    continue
                s, offset = entry
                p = self._local(tp, s)
                if p is None or s.fetch_offset != offset:
                    continue
                if tp in throttled and r.records is not None:
                    quota.record(len(r.records))
                await self._process_partition(tp, p, s, r)

    async def _process_partition(
        self,
        tp: TopicPartition,
        p: Partition,
        s: PartitionFetchState,
        r: PartitionData,
    ) -> None:
        code = r.error_code
        if code == ErrorCode.NONE:
            diverging = r.diverging_epoch
            if diverging is not None and diverging.epoch >= 0:
                _log.info("%s: %s diverges from the leader at epoch %d (end %d)",
                          self.name, tp, diverging.epoch, diverging.end_offset)  # fmt: skip
                s.state = FetchState.TRUNCATING
                return
            records = r.records
            if records is not None and len(records) > 0:
                if isinstance(records, memoryview):
                    view = records
                elif isinstance(records, (bytes, bytearray)):
                    view = memoryview(records)
                else:  # a decoded response never holds a FileRecords
                    raise TypeError(f"unexpected records {type(records).__name__}")
                try:
                    await self.replica_manager.append_to_follower(p, view)
                except KafkaError as e:
                    _log.warning("%s: follower append to %s failed: %s", self.name, tp, e)
                    s.state = FetchState.TRUNCATING
                    self._delay(tp, str(e))
                    return
            s.fetch_offset = p.log_end_offset
            p.update_follower_high_watermark(r.high_watermark)
            p.update_follower_log_start_offset(r.log_start_offset)
            s.lag = max(0, r.high_watermark - s.fetch_offset)
            s.backoff_reason = None
            return
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            await self._handle_out_of_range(tp, p, s)
            return
        self._delay(tp, f"Fetch: error {code}")

    async def _list_offset(self, tp: TopicPartition, epoch: int, timestamp: int) -> int | None:
        request = ListOffsetsRequest(
            replica_id=self.config.broker_id,
            isolation_level=0,
            topics=[
                ListOffsetsTopic(
                    name=tp.topic,
                    partitions=[
                        ListOffsetsPartition(
                            partition_index=tp.partition,
                            current_leader_epoch=epoch,
                            timestamp=timestamp,
                        )
                    ],
                )
            ],
        )
        response = await self.send.send_request(
            ApiKey.LIST_OFFSETS, LIST_OFFSETS_VERSION, request, ListOffsetsResponse
        )
        for t in response.topics:
            for r in t.partitions:
                if r.error_code == ErrorCode.NONE:
                    return r.offset
                self._delay(tp, f"ListOffsets: error {r.error_code}")
        return None

    async def _handle_out_of_range(
        self, tp: TopicPartition, p: Partition, s: PartitionFetchState
    ) -> None:
        leader_end = await self._list_offset(tp, s.current_leader_epoch, -1)
        if leader_end is None or self._local(tp, s) is None:
            return
        leo = p.log_end_offset
        if leader_end < leo:
            # Should not happen with leader epochs; an unclean leader may cause it.
            _log.warning("%s: %s: the leader ends at %d, below our LEO %d: truncating",
                         self.name, tp, leader_end, leo)  # fmt: skip
            p.truncate_to(leader_end)
            s.fetch_offset = p.log_end_offset
            return
        leader_start = await self._list_offset(tp, s.current_leader_epoch, -2)
        if leader_start is None or self._local(tp, s) is None:
            return
        if leader_start > leo:
            _log.info("%s: %s: the leader starts at %d, past our LEO %d: restarting there",
                      self.name, tp, leader_start, leo)  # fmt: skip
            p.truncate_fully_and_start_at(leader_start)
        s.fetch_offset = max(leader_start, p.log_end_offset)
