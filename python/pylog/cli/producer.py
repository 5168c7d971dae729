"""The producer under ``pylog produce``: records gathered per partition into
batches the native core builds (and compresses), sent to each partition's
leader when a batch is full, when it has waited ``linger.ms``, or on flush."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from pylog import _native
from pylog.cli.client import ClusterClient, error_for
from pylog.errors import ErrorCode, KafkaError, UnknownTopicOrPartitionError
from pylog.protocol import ApiKey

__all__ = ["COMPRESSION_CODECS", "Producer", "ProducerSettings", "murmur2"]

COMPRESSION_CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
# Per-record bytes on top of key and value in the estimate of a batch's size.
_RECORD_OVERHEAD = 24
_BATCH_OVERHEAD = 61
_RETRIABLE = {
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ErrorCode.KAFKA_STORAGE_ERROR,
}


def murmur2(data: bytes) -> int:
    """The 32-bit murmur2 hash Kafka's default partitioner applies to keys
    (seed 0x9747b28c), as a signed int like Java's."""
    m, seed = 0x5BD1E995, 0x9747B28C
    length = len(data)
    h = (seed ^ length) & 0xFFFFFFFF
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> 24
        k = (k * m) & 0xFFFFFFFF
        h = ((h * m) & 0xFFFFFFFF) ^ k
    tail = length % 4
    if tail == 3:
        h ^= data[whole + 2] << 16
    if tail >= 2:
        h ^= data[whole + 1] << 8
    if tail >= 1:
        h ^= data[whole]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


@dataclass
class ProducerSettings:
    acks: int = -1
    compression: int = 0
    linger_ms: int = 5
    batch_size: int = 16384
    request_timeout_ms: int = 30_000
    delivery_timeout_ms: int = 120_000
    max_block_ms: int = 30_000  # how long to wait for the topic's metadata


@dataclass
class _Batch:
    records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]] = field(
        default_factory=list
    )
    tags: list[Any] = field(default_factory=list)  # what a failure is reported against
    size: int = _BATCH_OVERHEAD
    created: float = field(default_factory=time.monotonic)


class Producer:
    """Sends records of one topic; failures (tag, error) are collected in
    ``failures`` rather than raised, as a producer's callbacks would see them."""

    def __init__(self, client: ClusterClient, topic: str, settings: ProducerSettings) -> None:
        self.client = client
        self.topic = topic
        self.settings = settings
        # As a Kafka producer does: a broker that creates topics on first use
        # gets to create this one, and a topic being created is waited for.
        partitions = client.partitions(topic, auto_create=True, wait_s=settings.max_block_ms / 1000)
        if partitions is None:
            raise UnknownTopicOrPartitionError(f"topic '{topic}' does not exist")
        self.partition_count = len(partitions)
        self._sticky = 0
        self._batches: dict[int, _Batch] = {}
        self.failures: list[tuple[Any, KafkaError]] = []

    def partition_for(self, key: bytes | None) -> int:
        if key is not None:
            return (murmur2(key) & 0x7FFFFFFF) % self.partition_count
        return self._sticky

    def send(
        self,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes | None]],
        *,
        partition: int | None = None,
        tag: Any = None,
    ) -> None:
        p = self.partition_for(key) if partition is None else partition
        batch = self._batches.get(p)
        size = (
            _RECORD_OVERHEAD
            + len(key or b"")
            + len(value or b"")
            + sum(len(k) + len(v or b"") for k, v in headers)
        )
        if batch is not None and batch.records and batch.size + size > self.settings.batch_size:
            self.flush([p])
            batch = None
        if batch is None:
            batch = self._batches[p] = _Batch()
        batch.records.append((key, value, headers, int(time.time() * 1000)))
        batch.tags.append(tag)
        batch.size += size
        if batch.size >= self.settings.batch_size:
            self.flush([p])

    def linger_left(self) -> float | None:
        """Seconds until the oldest batch is due (None: nothing waits)."""
        if not self._batches:
            return None
        oldest = min(b.created for b in self._batches.values())
        return max(0.0, oldest + self.settings.linger_ms / 1000 - time.monotonic())

    def flush_due(self) -> None:
        left = self.linger_left()
        if left is not None and left <= 0:
            self.flush()

    def flush(self, partitions: list[int] | None = None) -> None:
        """Send the waiting batches (of ``partitions``, default all) and wait
        for the answers; retriable errors are retried until delivery.timeout.ms."""
        chosen = sorted(self._batches) if partitions is None else partitions
        pending = {p: self._batches.pop(p) for p in chosen if p in self._batches}
        if not pending:
            return
        if partitions is None or self._sticky in pending:
            self._sticky = (self._sticky + 1) % self.partition_count
        built = {
            p: _native.build_batch(b.records, compression=self.settings.compression)
            for p, b in pending.items()
        }
        deadline = time.monotonic() + self.settings.delivery_timeout_ms / 1000
        while pending:
            retry = self._send_once(pending, built)
            if not retry:
                return
            if time.monotonic() >= deadline:
                for p, code in retry.items():
                    self._fail(pending[p], error_for(code))
                return
            pending = {p: pending[p] for p in retry}
            self.client.cluster = None  # new leaders
            time.sleep(0.1)

    def _fail(self, batch: _Batch, error: KafkaError) -> None:
        self.failures.extend((tag, error) for tag in batch.tags)

    def _send_once(self, pending: dict[int, _Batch], built: dict[int, bytes]) -> dict[int, int]:
        """One Produce per leader, pipelined; the partitions to retry and why."""
        by_leader: dict[int, list[int]] = {}
        retry: dict[int, int] = {}
        for p in pending:
            try:
                by_leader.setdefault(self.client.leader(self.topic, p), []).append(p)
            except KafkaError as e:
                if e.code in _RETRIABLE:
                    retry[p] = e.code
                else:
                    self._fail(pending[p], e)
        sent = []
        for node_id, parts in by_leader.items():
            body = {
                "transactional_id": None,
                "acks": self.settings.acks,
                "timeout_ms": self.settings.request_timeout_ms,
                "topic_data": [
                    {
                        "name": self.topic,
                        "partition_data": [{"index": p, "records": built[p]} for p in parts],
                    }
                ],
            }
            sent.append((node_id, parts, self.client.send(ApiKey.PRODUCE, body, node_id)[1]))
        if self.settings.acks == 0:
            return retry
        for node_id, parts, version in sent:
            try:
                resp = self.client.receive(node_id, ApiKey.PRODUCE, version)
            except KafkaError as e:
                for p in parts:
                    self._fail(pending[p], e)
                continue
            for t in resp.responses:
                for r in t.partition_responses:
                    if r.error_code == 0 or r.index not in pending:
                        continue
                    if r.error_code in _RETRIABLE:
                        retry[r.index] = r.error_code
                    else:
                        self._fail(pending[r.index], error_for(r.error_code, r.error_message))
        return retry
