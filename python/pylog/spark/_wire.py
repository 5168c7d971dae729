"""A minimal Kafka client over a plain socket, on pylog's own protocol codec:
Metadata and ListOffsets for planning on the driver, Fetch in executors (the
``kafka.bootstrap.servers`` option). Fetched record batches go to the native
columnar decoder as they are.
"""

from __future__ import annotations

from collections.abc import Iterator

from pylog import _native
from pylog.errors import (
    KafkaError,
    OffsetOutOfRangeError,
    UnknownTopicOrPartitionError,
)
from pylog.protocol import ApiKey
from pylog.protocol.client import KafkaConnection
from pylog.protocol.messages import FetchResponse, ListOffsetsResponse, MetadataResponse

__all__ = ["BrokerClient", "fetch_partition"]

# Versions every pylog broker serves (and every Kafka broker since 1.0).
_METADATA_V = 1
_LIST_OFFSETS_V = 1
_FETCH_V = 4
FETCH_MAX_BYTES = 8 << 20
EARLIEST, LATEST = -2, -1


def _check(code: int, what: str) -> None:
    if code == 0:
        return
    if code == 3:
        raise UnknownTopicOrPartitionError(f"{what}: unknown topic or partition")
    if code == 1:
        raise OffsetOutOfRangeError(f"{what}: offset out of range")
    raise KafkaError(f"{what}: broker error code {code}")


class BrokerClient(KafkaConnection):
    """One connection to one broker; requests are sent one at a time."""

    def __init__(self, servers: str, timeout: float = 30.0, client_id: str = "pylog-spark"):
        try:
            super().__init__(servers, timeout=timeout, client_id=client_id)
        except KafkaError as e:
            raise KafkaError(f"kafka.bootstrap.servers: {e}") from None

    def topics(self, names: list[str] | None = None) -> dict[str, dict[int, tuple[str, int]]]:
        """topic -> partition -> leader (host, port), for ``names`` or every topic."""
        body = {"topics": None if names is None else [{"name": n} for n in names]}
        resp = self.request(ApiKey.METADATA, _METADATA_V, body, MetadataResponse)
        brokers = {b.node_id: (b.host, b.port) for b in resp.brokers}
        out: dict[str, dict[int, tuple[str, int]]] = {}
        for t in resp.topics:
            if t.error_code == 3:
                continue
            _check(t.error_code, f"topic {t.name}")
            if t.is_internal or t.name is None:  # the name is nullable from v12 only
                continue
            out[t.name] = {
                p.partition_index: brokers.get(p.leader_id, ("", -1)) for p in t.partitions
            }
        return out

    def list_offsets(self, query: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        """ListOffsets: tp -> timestamp (-2 earliest, -1 latest) gives tp -> offset (-1 none)."""
        by_topic: dict[str, list[dict[str, int]]] = {}
        for (name, index), ts in query.items():
            by_topic.setdefault(name, []).append({"partition_index": index, "timestamp": ts})
        body = {
            "replica_id": -1,
            "topics": [{"name": name, "partitions": ps} for name, ps in by_topic.items()],
        }
        resp = self.request(ApiKey.LIST_OFFSETS, _LIST_OFFSETS_V, body, ListOffsetsResponse)
        out = {}
        for t in resp.topics:
            for p in t.partitions:
                _check(p.error_code, f"{t.name}-{p.partition_index}")
                out[(t.name, p.partition_index)] = p.offset
        return out

    def fetch(
        self, topic: str, partition: int, offset: int, max_bytes: int
    ) -> tuple[memoryview | None, int]:
        """The raw records at ``offset`` (a view into the response frame) and the
        high watermark."""
        body = {
            "replica_id": -1,
            "max_wait_ms": 0,
            "min_bytes": 0,
            "max_bytes": max_bytes,
            "isolation_level": 0,
            "topics": [
                {
                    "topic": topic,
                    "partitions": [
                        {
                            "partition": partition,
                            "fetch_offset": offset,
                            "partition_max_bytes": max_bytes,
                        }
                    ],
                }
            ],
        }
        resp = self.request(ApiKey.FETCH, _FETCH_V, body, FetchResponse)
        p = resp.responses[0].partitions[0]
        _check(p.error_code, f"{topic}-{partition} at offset {offset}")
        records = p.records
        # A decoded response holds a memoryview (``Records`` is what an encoder takes).
        assert records is None or isinstance(records, memoryview)
        return records, p.high_watermark


def fetch_partition(
    servers: str,
    topic: str,
    partition: int,
    start: int,
    end: int,
    include_headers: bool,
    fail_on_data_loss: bool,
) -> Iterator[tuple[object, ...]]:
    """Native column tuples for ``[start, end)`` of a partition, fetched from the broker."""
    with BrokerClient(servers) as client:
        cur = start
        while cur < end:
            try:
                records, hw = client.fetch(topic, partition, cur, FETCH_MAX_BYTES)
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
            if records is None or len(records) == 0:
                if hw <= cur and fail_on_data_loss:
                    raise OffsetOutOfRangeError(
                        f"{topic}-{partition}: offsets up to {end} were planned but the "
                        f"broker's high watermark is {hw}; set failOnDataLoss=false to skip"
                    )
                return
            cols, _consumed, next_offset, _done = _native.decode_columns(
                records, cur, end, include_headers=include_headers
            )
            if next_offset <= cur:
                # records came back but not one whole batch: never skip silently
                raise KafkaError(
                    f"{topic}-{partition}: the fetch at offset {cur} returned {len(records)} "
                    "bytes holding no complete record batch"
                )
            cur = next_offset
            if cols[0]:
                yield cols
