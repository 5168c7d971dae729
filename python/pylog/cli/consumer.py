"""The consumer under ``pylog consume``: Fetch at each partition's leader,
fetched batches decoded by the native core, and, with a group, membership
through the coordinator (JoinGroup, SyncGroup as leader with a range
assignment, Heartbeat, OffsetCommit, LeaveGroup)."""

from __future__ import annotations

import contextlib
import struct
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pylog import _native
from pylog.cli.client import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    Body,
    ClusterClient,
    check,
    error_for,
)
from pylog.coordinator.records import assigned_partitions, subscribed_topics
from pylog.errors import ErrorCode, KafkaError
from pylog.protocol import ApiKey

__all__ = ["ConsumedRecord", "Consumer", "ConsumerSettings", "GroupMember", "range_assign"]

TP = tuple[str, int]
# Fetch errors that mean "ask Metadata for the leader again".
_LEADER_MOVED = (
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH,
)


@dataclass(frozen=True)
class ConsumedRecord:
    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int  # 0 CreateTime, 1 LogAppendTime, -1 none (magic 0)
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


@dataclass
class ConsumerSettings:
    auto_offset_reset: str = "latest"
    fetch_max_wait_ms: int = 500
    fetch_min_bytes: int = 1
    fetch_max_bytes: int = 50 * 1024 * 1024
    max_partition_fetch_bytes: int = 1024 * 1024
    isolation_level: int = 0
    enable_auto_commit: bool = True
    auto_commit_interval_ms: int = 5000
    session_timeout_ms: int = 45_000
    rebalance_timeout_ms: int = 300_000
    heartbeat_interval_ms: int = 3000


def decode_fetched(
    topic: str,
    partition: int,
    data: Any,
    start: int,
    aborted: list[tuple[int, int]] | None = None,
) -> tuple[list[ConsumedRecord], int]:
    """The records at or after ``start`` in fetched record batches (a partial
    batch at the end is left), and the offset after the last whole batch.

    ``aborted``: the Fetch answer's aborted transactions (producer id, first
    offset) under read_committed; their records are left out, up to the
    producer's abort marker."""
    out, next_offset = [], start
    pending = sorted(aborted or [], key=lambda a: a[1])  # by first offset
    aborting: set[int] = set()  # producer ids inside an aborted transaction
    batches, _ = _native.decode_batches(data)  # one call per fetched buffer
    for batch, records in batches:
        last = batch.last_offset
        ts_type = batch.timestamp_type if batch.magic > 0 else -1
        if batch.magic >= 2:
            while pending and pending[0][1] <= last:
                aborting.add(pending.pop(0)[0])
            if batch.is_control:
                aborting.discard(batch.producer_id)  # the marker ends the transaction
                records = []
            elif batch.is_transactional and batch.producer_id in aborting:
                records = []
        for r in records:
            if r.offset >= start:
                out.append(
                    ConsumedRecord(
                        topic, partition, r.offset, r.timestamp, ts_type, r.key, r.value,
                        list(r.headers),
                    )
                )  # fmt: skip
            last = max(last, r.offset)
        next_offset = max(next_offset, last + 1)
    return out, next_offset


class Consumer:
    """Reads assigned partitions from their positions; ``poll`` hands back
    decoded records, ``consumed`` the offset after the last one handed out."""

    def __init__(self, client: ClusterClient, settings: ConsumerSettings) -> None:
        self.client = client
        self.settings = settings
        self.positions: dict[TP, int] = {}  # the next offset to fetch
        self.consumed: dict[TP, int] = {}  # the offset after the last record handed out
        self.committed_at: dict[TP, int] = {}  # what the group has committed (with a group)
        self._buffer: deque[ConsumedRecord] = deque()

    def assign(self, positions: dict[TP, int | str]) -> None:
        """Read these partitions from an offset, or from "earliest"/"latest"."""
        self._buffer.clear()
        self.positions, self.consumed = {}, {}
        named = {tp: p for tp, p in positions.items() if isinstance(p, str)}
        for tp, p in positions.items():
            if isinstance(p, int):
                self.positions[tp] = p
        self._reset(named)

    def _reset(self, named: dict[TP, str]) -> None:
        if not named:
            return
        query = {
            tp: EARLIEST_TIMESTAMP if where == "earliest" else LATEST_TIMESTAMP
            for tp, where in named.items()
        }
        self.positions.update(self.client.list_offsets(query))

    def poll(self, max_records: int | None, timeout_ms: int) -> list[ConsumedRecord]:
        if not self._buffer and self.positions:
            self._fetch(timeout_ms)
        n = len(self._buffer) if max_records is None else min(max_records, len(self._buffer))
        out = [self._buffer.popleft() for _ in range(n)]
        for r in out:
            self.consumed[(r.topic, r.partition)] = r.offset + 1
        return out

    def _fetch(self, timeout_ms: int) -> None:
        by_leader: dict[int, dict[str, list[dict[str, int]]]] = {}
        for (t, p), offset in sorted(self.positions.items()):
            try:
                leader = self.client.leader(t, p)
            except KafkaError as e:
                if e.code not in _LEADER_MOVED:
                    raise
                self.client.cluster = None  # no leader now: ask again next time
                continue
            by_leader.setdefault(leader, {}).setdefault(t, []).append(
                {
                    "partition": p,
                    "current_leader_epoch": -1,
                    "fetch_offset": offset,
                    "last_fetched_epoch": -1,
                    "log_start_offset": -1,
                    "partition_max_bytes": self.settings.max_partition_fetch_bytes,
                }
            )
        wait = min(self.settings.fetch_max_wait_ms, max(timeout_ms, 0))
        if not by_leader:
            time.sleep(wait / 1000)
            return
        sent = []
        for node_id, topics in by_leader.items():
            body = {
                "replica_id": -1,
                "max_wait_ms": wait,
                "min_bytes": self.settings.fetch_min_bytes,
                "max_bytes": self.settings.fetch_max_bytes,
                "isolation_level": self.settings.isolation_level,
                "session_id": 0,
                "session_epoch": -1,
                "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
                "forgotten_topics_data": [],
                "rack_id": "",
            }
            sent.append((node_id, self.client.send(ApiKey.FETCH, body, node_id)[1]))
        out_of_range: dict[TP, str] = {}
        stale = False
        for node_id, version in sent:
            resp = self.client.receive(node_id, ApiKey.FETCH, version)
            check(resp.error_code)
            for t in resp.responses:
                for p in t.partitions:
                    tp = (t.topic, p.partition_index)
                    if tp not in self.positions:
                        continue
                    if p.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                        out_of_range[tp] = self.settings.auto_offset_reset
                        continue
                    if p.error_code in _LEADER_MOVED:
                        stale = True
                        continue
                    check(p.error_code, f"{tp[0]}-{tp[1]}")
                    if p.records is None or len(p.records) == 0:
                        continue
                    aborted = None
                    if self.settings.isolation_level == 1:
                        aborted = [
                            (a.producer_id, a.first_offset) for a in p.aborted_transactions or []
                        ]
                    records, next_offset = decode_fetched(
                        tp[0], tp[1], p.records, self.positions[tp], aborted
                    )
                    self._buffer.extend(records)
                    self.positions[tp] = next_offset
        if stale:
            self.client.cluster = None
        if out_of_range:
            if "none" in out_of_range.values():
                raise error_for(ErrorCode.OFFSET_OUT_OF_RANGE, f"{sorted(out_of_range)}")
            self._reset(out_of_range)


# ---------------------------------------------------------------- groups


def encode_subscription(topics: Iterable[str]) -> bytes:
    """A ConsumerProtocolSubscription v0: the topics, no user data."""
    names = sorted(topics)
    out = bytearray(struct.pack(">hi", 0, len(names)))
    for t in names:
        raw = t.encode()
        out += struct.pack(">h", len(raw)) + raw
    return bytes(out + struct.pack(">i", -1))


def encode_assignment(partitions: dict[str, list[int]]) -> bytes:
    """A ConsumerProtocolAssignment v0: (topic, partitions) pairs, no user data."""
    out = bytearray(struct.pack(">hi", 0, len(partitions)))
    for t, ps in sorted(partitions.items()):
        raw = t.encode()
        out += struct.pack(">h", len(raw)) + raw + struct.pack(f">i{len(ps)}i", len(ps), *ps)
    return bytes(out + struct.pack(">i", -1))


def range_assign(
    subscriptions: dict[str, set[str]], partition_counts: dict[str, int]
) -> dict[str, dict[str, list[int]]]:
    """The range assignment: per topic, its subscribers (by member id) each get
    a contiguous run of partitions, the first ones one more when they don't
    divide evenly."""
    result: dict[str, dict[str, list[int]]] = {m: {} for m in subscriptions}
    for topic, count in sorted(partition_counts.items()):
        members = sorted(m for m, ts in subscriptions.items() if topic in ts)
        if not members:
            continue
        each, extra = divmod(count, len(members))
        start = 0
        for i, m in enumerate(members):
            n = each + (1 if i < extra else 0)
            if n:
                result[m][topic] = list(range(start, start + n))
            start += n
    return result


class RebalanceNeeded(Exception):
    pass


class GroupMember:
    """This consumer's membership of a group (the classic protocol)."""

    def __init__(
        self, client: ClusterClient, group: str, topics: list[str], settings: ConsumerSettings
    ) -> None:
        self.client = client
        self.group = group
        self.topics = topics
        self.settings = settings
        self.member_id = ""
        self.generation = -1
        self.assignment: list[TP] = []
        self._next_heartbeat = 0.0

    def join(self) -> list[TP]:
        """Join (again) and return the partitions the group assigned us."""
        while True:
            resp = self._join_request()
            if resp.error_code == ErrorCode.MEMBER_ID_REQUIRED:
                self.member_id = resp.member_id
                continue
            if resp.error_code == ErrorCode.UNKNOWN_MEMBER_ID:
                self.member_id = ""
                continue
            if resp.error_code == ErrorCode.REBALANCE_IN_PROGRESS:
                continue
            check(resp.error_code)
            self.member_id, self.generation = resp.member_id, resp.generation_id
            assignments: list[dict[str, Any]] = []
            if resp.leader == self.member_id:
                assignments = self._assign(resp.members)
            sync = self.client.group_request(
                self.group, ApiKey.SYNC_GROUP, self._sync_body(resp, assignments), code=""
            )
            if sync.error_code in (
                ErrorCode.REBALANCE_IN_PROGRESS,
                ErrorCode.ILLEGAL_GENERATION,
                ErrorCode.UNKNOWN_MEMBER_ID,
            ):
                if sync.error_code == ErrorCode.UNKNOWN_MEMBER_ID:
                    self.member_id = ""
                continue
            check(sync.error_code)
            decoded = assigned_partitions(bytes(sync.assignment or b"")) or []
            self.assignment = sorted((t, p) for t, ps in decoded for p in ps)
            self._next_heartbeat = time.monotonic() + self.settings.heartbeat_interval_ms / 1000
            return self.assignment

    def _sync_body(self, joined: Any, assignments: list[dict[str, Any]]) -> Body:
        def body(version: int) -> dict[str, Any]:
            out = {
                "group_id": self.group,
                "generation_id": self.generation,
                "member_id": self.member_id,
                "group_instance_id": None,
                "assignments": assignments,
            }
            if version >= 5:  # the protocol named since v5
                out.update(protocol_type="consumer", protocol_name=joined.protocol_name)
            return out

        return body

    def _join_request(self) -> Any:
        body = {
            "group_id": self.group,
            "session_timeout_ms": self.settings.session_timeout_ms,
            "rebalance_timeout_ms": self.settings.rebalance_timeout_ms,
            "member_id": self.member_id,
            "group_instance_id": None,
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": encode_subscription(self.topics)}],
        }
        # The coordinator answers a JoinGroup when the rebalance completes,
        # which may take up to the rebalance timeout.
        wait = self.settings.rebalance_timeout_ms / 1000 + self.client.timeout_s
        return self.client.group_request(
            self.group, ApiKey.JOIN_GROUP, body, code="", timeout_s=wait
        )

    def _assign(self, members: list[Any]) -> list[dict[str, Any]]:
        subscriptions = {
            m.member_id: subscribed_topics(bytes(m.metadata or b"")) or set() for m in members
        }
        counts: dict[str, int] = {}
        wanted = sorted(set().union(*subscriptions.values())) if subscriptions else []
        if wanted:
            for name, t in self.client.metadata(wanted).topics.items():
                if t.error_code == 0:
                    counts[name] = len(t.partitions)
        plan = range_assign(subscriptions, counts)
        return [{"member_id": m, "assignment": encode_assignment(a)} for m, a in plan.items()]

    def heartbeat_if_due(self) -> None:
        """A Heartbeat when one is due; RebalanceNeeded when the group moved on."""
        now = time.monotonic()
        if now < self._next_heartbeat:
            return
        self._next_heartbeat = now + self.settings.heartbeat_interval_ms / 1000
        resp = self.client.group_request(
            self.group,
            ApiKey.HEARTBEAT,
            {
                "group_id": self.group,
                "generation_id": self.generation,
                "member_id": self.member_id,
                "group_instance_id": None,
            },
        )
        if resp.error_code in (
            ErrorCode.REBALANCE_IN_PROGRESS,
            ErrorCode.ILLEGAL_GENERATION,
            ErrorCode.UNKNOWN_MEMBER_ID,
            ErrorCode.FENCED_INSTANCE_ID,
        ):
            if resp.error_code == ErrorCode.UNKNOWN_MEMBER_ID:
                self.member_id = ""
            raise RebalanceNeeded()
        check(resp.error_code)

    def commit(self, offsets: dict[TP, int]) -> None:
        if not offsets:
            return
        codes = self.client.commit(self.group, offsets, self.generation, self.member_id)
        failed = {tp: c for tp, c in codes.items() if c}
        if failed:
            tp, code = next(iter(sorted(failed.items())))
            if code in (ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.ILLEGAL_GENERATION):
                raise RebalanceNeeded()
            raise error_for(code, f"committing {tp[0]}-{tp[1]}")

    def leave(self) -> None:
        if not self.member_id:
            return

        def body(version: int) -> dict[str, Any]:
            if version >= 3:
                return {
                    "group_id": self.group,
                    "members": [{"member_id": self.member_id, "group_instance_id": None}],
                }
            return {"group_id": self.group, "member_id": self.member_id}

        # if this fails, the session timeout removes us anyway
        with contextlib.suppress(KafkaError, OSError):
            self.client.request(ApiKey.LEAVE_GROUP, body, self.client.coordinator(self.group))
        self.member_id = ""
