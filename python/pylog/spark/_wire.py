"""The readers' Kafka client (``kafka.bootstrap.servers``), on the CLI's
cluster client (:class:`pylog.cli.client.ClusterClient`): Metadata and
ListOffsets for planning on the driver, Fetch in executors, OffsetCommit for
a streaming query's group. Fetched record batches go to the native columnar
decoder as they are.

As Spark's Kafka source does through its consumer: every request goes to
the partition's leader, named with the leader epoch of the last metadata
(KIP-320), and a leader that moved (NOT_LEADER_OR_FOLLOWER), a stale or
unknown epoch (FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH), no leader yet or
a broker that stopped answering refreshes the metadata and tries again
until the request timeout. ``read_committed`` fetches with isolation level
1: the broker stops at the last stable offset and lists the aborted
transactions overlapping the answer, whose batches are dropped here
(Kafka's consumer, ``CompletedFetch``) before decoding.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TypeVar

from pylog import _native
from pylog.cli.client import BrokerUnreachableError, ClusterClient, check
from pylog.errors import (
    ErrorCode,
    KafkaError,
    OffsetOutOfRangeError,
    RequestTimedOutError,
)
from pylog.protocol import ApiKey

from ._aborted import aborted_ranges, kept_ranges
from ._security import client_security

__all__ = [
    "READ_COMMITTED",
    "READ_UNCOMMITTED",
    "BrokerClient",
    "fetch_partition",
]

FETCH_MAX_BYTES = 8 << 20
# How long a partition may answer below the planned end before the records
# are called lost: a new leader's high watermark catches up within a fetch
# round of its followers.
LEADER_HW_WAIT_S = 3.0
EARLIEST, LATEST = -2, -1
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
RETRY_BACKOFF_S = 0.1
# Spark's Kafka source waits default.api.timeout.ms (60 s) for its consumer
DEFAULT_TIMEOUT_MS = 60_000

# What a Kafka consumer retries after a metadata refresh.
_LEADERSHIP = {
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.REPLICA_NOT_AVAILABLE,
    ErrorCode.OFFSET_NOT_AVAILABLE,
    ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.NETWORK_EXCEPTION,
}
_T = TypeVar("_T")

TP = tuple[str, int]


@dataclass(frozen=True)
class Fetched:
    """One partition of a Fetch answer: its records (a view into the
    response frame), high watermark, last stable offset and, under
    read_committed, the aborted transactions as (producer id, first offset)."""

    records: memoryview | None
    high_watermark: int
    last_stable_offset: int
    aborted: list[tuple[int, int]]


class BrokerClient:
    """A cluster seen from the bootstrap servers, connections opened to the
    leaders as requests need them."""

    def __init__(
        self,
        servers: str,
        conf: Mapping[str, str] | None = None,
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
        client_id: str = "pylog-spark",
    ) -> None:
        self.timeout_s = timeout_ms / 1000
        try:
            self.client = ClusterClient(
                servers,
                timeout_ms=min(timeout_ms, 30_000),
                client_id=client_id,
                security=client_security(conf or {}),
            )
        except KafkaError as e:
            raise KafkaError(f"kafka.bootstrap.servers: {e}") from None

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> BrokerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _retrying(self, what: Callable[[], _T]) -> _T:
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                return what()
            except (BrokerUnreachableError, RequestTimedOutError, KafkaError) as e:
                retriable = isinstance(e, (BrokerUnreachableError, RequestTimedOutError))
                if not retriable and getattr(e, "code", None) not in _LEADERSHIP:
                    raise
                if time.monotonic() >= deadline:
                    raise
            self.client.cluster = None  # the next leader() asks Metadata again
            time.sleep(RETRY_BACKOFF_S)

    def _leader(self, topic: str, partition: int) -> tuple[int, int]:
        """(leader node id, leader epoch) from the metadata, fetched when missing."""
        node = self.client.leader(topic, partition)
        assert self.client.cluster is not None
        return node, self.client.cluster.topics[topic].partitions[partition].leader_epoch

    def topics(self) -> dict[str, list[int]]:
        """topic -> partitions, every topic but internal ones."""
        cluster = self.client.metadata(None)
        out = {}
        for name, t in cluster.topics.items():
            if t.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION or t.is_internal:
                continue
            check(t.error_code, f"topic {name}")
            out[name] = sorted(t.partitions)
        return out

    def list_offsets(
        self, query: Mapping[TP, int], isolation: int = 0, skip_unknown: bool = False
    ) -> dict[TP, int]:
        """ListOffsets at each leader: tp -> timestamp (-2 earliest, -1 latest:
        the high watermark, or the last stable offset under read_committed)
        gives tp -> offset (-1 none). ``skip_unknown``: a partition that does
        not exist (any more) is left out of the answer instead of failing."""

        def attempt() -> dict[TP, int]:
            by_leader: dict[int, dict[str, list[dict[str, int]]]] = {}
            for (t, p), ts in query.items():
                try:
                    node, epoch = self._leader(t, p)
                except KafkaError as e:
                    if skip_unknown and e.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                        continue
                    raise
                by_leader.setdefault(node, {}).setdefault(t, []).append(
                    {"partition_index": p, "timestamp": ts, "current_leader_epoch": epoch}
                )
            out: dict[TP, int] = {}
            for node, topics in by_leader.items():
                body = {
                    "replica_id": -1,
                    "isolation_level": isolation,
                    "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
                }
                resp = self.client.request(ApiKey.LIST_OFFSETS, body, node)
                for t in resp.topics:
                    for p in t.partitions:
                        if skip_unknown and p.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                            continue
                        check(p.error_code, f"{t.name}-{p.partition_index}")
                        out[(t.name, p.partition_index)] = p.offset
            return out

        return self._retrying(attempt)

    def fetch(
        self, topic: str, partition: int, offset: int, max_bytes: int, isolation: int = 0
    ) -> Fetched:
        """One Fetch of one partition at its leader."""

        def attempt() -> Fetched:
            node, epoch = self._leader(topic, partition)
            body = {
                "replica_id": -1,
                "max_wait_ms": 0,
                "min_bytes": 0,
                "max_bytes": max_bytes,
                "isolation_level": isolation,
                "session_id": 0,
                "session_epoch": -1,
                "topics": [
                    {
                        "topic": topic,
                        "partitions": [
                            {
                                "partition": partition,
                                "current_leader_epoch": epoch,
                                "fetch_offset": offset,
                                "last_fetched_epoch": -1,
                                "log_start_offset": -1,
                                "partition_max_bytes": max_bytes,
                            }
                        ],
                    }
                ],
                "forgotten_topics_data": [],
                "rack_id": "",
            }
            resp = self.client.request(ApiKey.FETCH, body, node)
            check(resp.get("error_code", 0) or 0)
            p = resp.responses[0].partitions[0]
            if p.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                raise OffsetOutOfRangeError(f"{topic}-{partition} at offset {offset}")
            check(p.error_code, f"{topic}-{partition} at offset {offset}")
            records = p.records
            # A decoded response holds a memoryview (``Records`` is what an encoder takes).
            assert records is None or isinstance(records, memoryview)
            aborted = [(a.producer_id, a.first_offset) for a in p.get("aborted_transactions") or []]
            return Fetched(records, p.high_watermark, p.get("last_stable_offset", -1), aborted)

        return self._retrying(attempt)

    def commit(self, group: str, offsets: Mapping[TP, int]) -> None:
        """OffsetCommit as a simple consumer (generation -1, no member): the
        group's lag then shows in ``pylog groups`` and kafka-consumer-groups."""
        result = self.client.commit(group, offsets)
        for (t, p), code in sorted(result.items()):
            check(code, f"committing {t}-{p} for group {group}")


def fetch_partition(
    servers: str,
    topic: str,
    partition: int,
    start: int,
    end: int,
    include_headers: bool,
    fail_on_data_loss: bool,
    conf: Mapping[str, str] | None = None,
    isolation: int = READ_UNCOMMITTED,
) -> Iterator[tuple[object, ...]]:
    """Native column tuples for ``[start, end)`` of a partition, fetched from its leader."""
    with BrokerClient(servers, conf) as client:
        cur = start
        behind_since: float | None = None
        while cur < end:
            try:
                got = client.fetch(topic, partition, cur, FETCH_MAX_BYTES, isolation)
            except OffsetOutOfRangeError:
                tp = (topic, partition)
                earliest = client.list_offsets({tp: EARLIEST})[tp]
                latest = client.list_offsets({tp: LATEST})[tp]
                if fail_on_data_loss:
                    raise OffsetOutOfRangeError(
                        f"{topic}-{partition}: offset {cur} is out of range: the broker holds "
                        f"[{earliest}, {latest}); set failOnDataLoss=false to skip lost records"
                    ) from None
                # the log moved past ``cur`` (retention): go on from its start
                if earliest <= cur:
                    return
                cur = earliest
                continue
            records = got.records
            if records is None or len(records) == 0:
                # under read_committed the answer stops at the last stable offset
                stable = (
                    got.high_watermark
                    if isolation == READ_UNCOMMITTED
                    else (got.last_stable_offset)
                )
                if stable <= cur:
                    # A leader just elected answers with its own high
                    # watermark until its in-sync followers fetch again
                    # (Kafka's Partition.makeLeader): wait that out before
                    # calling the planned records lost.
                    now = time.monotonic()
                    behind_since = now if behind_since is None else behind_since
                    if now - behind_since < LEADER_HW_WAIT_S:
                        time.sleep(0.1)
                        continue
                if stable <= cur and fail_on_data_loss:
                    raise OffsetOutOfRangeError(
                        f"{topic}-{partition}: offsets up to {end} were planned but the "
                        f"broker's {'high watermark' if isolation == 0 else 'last stable offset'}"
                        f" is {stable}; set failOnDataLoss=false to skip"
                    )
                return
            behind_since = None
            holes: list[tuple[int, int]] = []
            if got.aborted:
                infos, _ = _native.batch_infos(records)
                holes = aborted_ranges(infos, got.aborted)
            progressed = cur
            for a, b in kept_ranges(cur, end, holes):
                cols, _consumed, next_offset, _done = _native.decode_columns(
                    records, a, b, include_headers=include_headers
                )
                if cols[0]:
                    yield cols
                progressed = max(progressed, next_offset)
                if next_offset < b:
                    break  # the answer ends here: fetch the rest
                progressed = max(progressed, b)
            # an aborted batch at the end of the answer is passed over too
            for base, last in holes:
                if base <= progressed <= last:
                    progressed = last + 1
            if progressed <= cur:
                # records came back but not one whole batch: never skip silently
                raise KafkaError(
                    f"{topic}-{partition}: the fetch at offset {cur} returned {len(records)} "
                    "bytes holding no complete record batch"
                )
            cur = progressed
