"""KafkaApis driven in-process with real request bytes: produce, fetch (long
poll through the purgatory), list offsets, leader epochs, idempotence,
auto-creation and errors. Real files under tmp_path; nothing mocked."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from conftest import build_batch
from kafka_apis_harness import Core, expect_close

from pylog import _native
from pylog.errors import ErrorCode
from pylog.metadata import JsonMetadataStore
from pylog.protocol import decode_response, encode_request, parse_request_header

E = ErrorCode


def run(core_dir: str, body: Callable[[Core], Awaitable[None]], **props: Any) -> None:
    async def main() -> None:
        core = Core(core_dir, **props)
        try:
            await body(core)
        finally:
            core.close()

    asyncio.run(main())


def produce_body(topic: str, records: bytes, acks: int = 1, partition: int = 0) -> dict[str, Any]:
    return {
        "acks": acks,
        "timeout_ms": 5000,
        "topic_data": [
            {"name": topic, "partition_data": [{"index": partition, "records": records}]}
        ],
    }


def fetch_body(
    topic: str,
    offset: int,
    *,
    max_wait: int = 0,
    min_bytes: int = 1,
    partition_max: int = 1 << 20,
    epoch: int = -1,
    isolation: int = 0,
) -> dict[str, Any]:
    return {
        "max_wait_ms": max_wait,
        "min_bytes": min_bytes,
        "isolation_level": isolation,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": 0,
                        "fetch_offset": offset,
                        "partition_max_bytes": partition_max,
                        "current_leader_epoch": epoch,
                    }
                ],
            }
        ],
    }


async def create(core: Core, topic: str, partitions: int = 1, **configs: str) -> None:
    core.store.create_topic(topic, partitions, 1, configs)


def values(records: Any) -> list[bytes | None]:
    data = bytes(records)
    out: list[bytes | None] = []
    pos = 0
    while pos + 12 <= len(data):
        size = int.from_bytes(data[pos + 8 : pos + 12], "big") + 12
        if pos + size > len(data):
            break  # a partial batch at the end (response max_bytes), skipped as clients do
        out += [r.value for r in _native.decode_records(data[pos : pos + size])]
        pos += size
    return out


def part(resp: Any) -> Any:
    return resp.responses[0].partition_responses[0]


def fpart(resp: Any) -> Any:
    return resp.responses[0].partitions[0]


# ---------------------------------------------------------------- ApiVersions


def test_api_versions_lists_registered_apis_and_answers_too_high_with_v0(tmp_path: Any) -> None:
    async def body(core: Core) -> None:
        r = await core.call(18, 3, {"client_software_name": "t", "client_software_version": "1"})
        assert r.error_code == 0
        keys = {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}
        assert {0, 1, 2, 3, 18, 22, 23} <= set(keys)
        assert 11 not in keys  # JoinGroup: no coordinator given
        assert set(keys) == set(core.apis.handlers)  # exactly the table's keys

        r = await core.call(18, 0, {})  # SaslHandshake is in the table
        assert 17 in {k.api_key for k in r.api_keys}

        frame_bytes = bytearray(encode_request(18, 3, 7, "t", {})[4:])
        frame_bytes[2:4] = (99).to_bytes(2, "big")  # a version from the future
        frame = memoryview(frame_bytes)
        from pylog.network import Request

        req = Request(parse_request_header(frame), frame, "c", "h", "PLAINTEXT", 0)
        chunks = await core.apis.handle(req)
        assert chunks is not None
        resp = decode_response(18, 0, b"".join(bytes(c) for c in chunks), framed=True)
        assert resp.error_code == E.UNSUPPORTED_VERSION
        assert any(k.api_key == 0 for k in resp.api_keys)

        r = await core.call(18, 3, {"client_software_name": "-bad", "client_software_version": "1"})
        assert r.error_code == E.INVALID_REQUEST

    run(str(tmp_path), body)


# ---------------------------------------------------------------- Metadata


def test_metadata_auto_creates_and_reports_ids_epochs(tmp_path: Any) -> None:
    async def body(core: Core) -> None:
        r = await core.call(3, 12, {"topics": [{"name": "auto", "topic_id": None}]})
        t = r.topics[0]
        assert t.error_code == 0 and t.name == "auto"
        assert len(t.topic_id) == 22 and t.topic_id != "A" * 22
        assert [p.leader_epoch for p in t.partitions] == [0, 0, 0]
        assert r.brokers[0].node_id == 0 and r.brokers[0].port == 9092
        assert r.controller_id == 0 and r.cluster_id == core.store.cluster_id
        assert core.rm.partition(("auto", 0)) is not None  # type: ignore[arg-type]

        # allow_auto_topic_creation=false (v4+): unknown
        r = await core.call(
            3, 9, {"topics": [{"name": "nope"}], "allow_auto_topic_creation": False}
        )
        assert r.topics[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION
        r = await core.call(3, 9, {"topics": [{"name": "bad name!"}]})
        assert r.topics[0].error_code == E.INVALID_TOPIC_EXCEPTION

        # null topics = all; v0 empty list = all
        r = await core.call(3, 9, {"topics": None})
        assert [t.name for t in r.topics] == ["auto"]
        r = await core.call(3, 0, {"topics": []})
        assert [t.name for t in r.topics] == ["auto"]

        # by topic id (v12)
        tid = core.store.topic("auto").topic_id  # type: ignore[union-attr]
        r = await core.call(3, 12, {"topics": [{"name": None, "topic_id": tid}]})
        assert r.topics[0].name == "auto"

    run(str(tmp_path), body, num_partitions=3)


def test_metadata_auto_create_disabled(tmp_path: Any) -> None:
    async def body(core: Core) -> None:
        r = await core.call(3, 1, {"topics": [{"name": "x"}]})
        assert r.topics[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION
        assert core.store.topic("x") is None

    run(str(tmp_path), body, auto_create_topics_enable="false")


def test_auto_created_topic_uses_num_partitions(tmp_path: Any) -> None:
    async def body(core: Core) -> None:
        r = await core.call(3, 7, {"topics": [{"name": "p3"}], "allow_auto_topic_creation": True})
        assert sorted(p.partition_index for p in r.topics[0].partitions) == [0, 1, 2]

    run(str(tmp_path), body, num_partitions=3)


# ---------------------------------------------------------------- Produce / Fetch


def test_produce_then_fetch_round_trip_all_acks(tmp_path: Any) -> None:
    async def body(core: Core) -> None:
        await create(core, "t")
        r = await core.call(0, 9, produce_body("t", build_batch([b"a", b"b"]), acks=1))
        assert part(r).error_code == 0 and part(r).base_offset == 0
        assert part(r).log_start_offset == 0 and part(r).log_append_time_ms == -1
        r = await core.call(0, 9, produce_body("t", build_batch([b"c"]), acks=-1))
        assert part(r).error_code == 0 and part(r).base_offset == 2
        assert await core.raw_call(0, 9, produce_body("t", build_batch([b"d"]), acks=0)) is None
        r = await core.call(0, 3, produce_body("t", build_batch([b"e"]), acks=1))
        assert part(r).base_offset == 4

        f = await core.call(1, 12, fetch_body("t", 0))
        p = fpart(f)
        assert p.error_code == 0 and p.high_watermark == 5 and p.last_stable_offset == 5
        assert p.log_start_offset == 0
        assert values(p.records) == [b"a", b"b", b"c", b"d", b"e"]
        # read_committed is bounded by the LSO (= HW without transactions)
        f = await core.call(1, 12, fetch_body("t", 2, isolation=1))
        assert values(fpart(f).records) == [b"c", b"d", b"e"]
        assert fpart(f).aborted_transactions == []
        # partition_max_bytes still returns the first whole batch (KIP-74)
        f = await core.call(1, 12, fetch_body("t", 0, partition_max=1))
        assert values(fpart(f).records) == [b"a", b"b"]
        # at the HW: empty, no error
        f = await core.call(1, 12, fetch_body("t", 5))
        assert fpart(f).error_code == 0 and bytes(fpart(f).records) == b""

    run(str(tmp_path), body)


def test_fetch_response_max_bytes_and_every_partition_present(tmp_path: Any) -> None:
    async def body(core: Core) -> None:
        await create(core, "m", 3)
        for i in range(3):
            r = await core.call(0, 9, produce_body("m", build_batch([b"x" * 1000]), partition=i))
            assert part(r).error_code == 0
        req = {
            "max_wait_ms": 0,
            "min_bytes": 1,
            "max_bytes": 1500,
            "topics": [
                {
                    "topic": "m",
                    "partitions": [
                        {"partition": i, "fetch_offset": 0, "partition_max_bytes": 1 << 20}
                        for i in (0, 1, 2, 7)
                    ],
                }
            ],
        }
        f = await core.call(1, 11, req)
        parts = f.responses[0].partitions
        assert [p.partition_index for p in parts] == [0, 1, 2, 7]
        assert len(values(parts[0].records)) == 1
        # what the response limit left: a partial batch for 1 (as Kafka sends), nothing for 2
        assert values(parts[1].records) == [] and bytes(parts[2].records) == b""
        assert len(parts[0].records) + len(parts[1].records) <= 1500
        assert [p.error_code for p in parts] == [0, 0, 0, E.UNKNOWN_TOPIC_OR_PARTITION]

    run(str(tmp_path), body)


def test_fetch_by_topic_id_v13(tmp_path: Any) -> None:
    async def body(core: Core) -> None:
        await create(core, "ids")
        tid = core.store.topic("ids").topic_id  # type: ignore[union-attr]
        await core.call(0, 9, produce_body("ids", build_batch([b"v"])))
        req = {
            "max_wait_ms": 0,
            "min_bytes": 1,
            "topics": [
                {
                    "topic_id": tid,
                    "partitions": [
                        {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1000}
                    ],
                },
                {
                    "topic_id": "B" * 22,
                    "partitions": [
                        {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1000}
                    ],
                },
            ],
        }
        f = await core.call(1, 16, req)
        assert f.responses[0].topic_id == tid
        assert values(f.responses[0].partitions[0].records) == [b"v"]
        assert f.responses[1].partitions[0].error_code == E.UNKNOWN_TOPIC_ID

    run(str(tmp_path), body)


def test_fetch_errors_out_of_range_and_leader_epoch(tmp_path: Any) -> None:
    async def body(core: Core) -> None:
        await create(core, "e")
        await core.call(0, 9, produce_body("e", build_batch([b"1"])))
        f = await core.call(1, 12, fetch_body("e", 5))
        assert fpart(f).error_code == E.OFFSET_OUT_OF_RANGE
        f = await core.call(1, 12, fetch_body("e", 0, epoch=0))
        assert fpart(f).error_code == 0
        f = await core.call(1, 12, fetch_body("e", 0, epoch=3))
        assert fpart(f).error_code == E.UNKNOWN_LEADER_EPOCH
        core.rm.partition(("e", 0)).leader_epoch = 2  # type: ignore[arg-type, union-attr]
        f = await core.call(1, 12, fetch_body("e", 0, epoch=1))
        assert fpart(f).error_code == E.FENCED_LEADER_EPOCH
        f = await core.call(1, 12, fetch_body("nope", 0))
        assert fpart(f).error_code == E.UNKNOWN_TOPIC_OR_PARTITION
        # a fetch session the broker never created
        f = await core.call(1, 12, {**fetch_body("e", 0), "session_id": 5, "session_epoch": 1})
        assert f.error_code == 70

    run(str(tmp_path), body)


def test_long_poll_fetch_completed_by_produce(tmp_path: Any) -> None:
    async def body(core: Core) -> None:
        await create(core, "lp")
        start = time.monotonic()
        fetch = asyncio.ensure_future(core.call(1, 12, fetch_body("lp", 0, max_wait=5000)))
        await asyncio.sleep(0.05)
        assert not fetch.done()
        assert core.rm.delayed_fetch_purgatory.delayed() == 1
        await core.call(0, 9, produce_body("lp", build_batch([b"wake"])))
        f = await asyncio.wait_for(fetch, 2)
        assert time.monotonic() - start < 4.0  # well before max_wait (5 s)
        assert values(fpart(f).records) == [b"wake"]
        assert core.rm.delayed_fetch_purgatory.delayed() == 0

    run(str(tmp_path), body)


def test_fetch_min_bytes_waits_for_enough_then_max_wait_expires(tmp_path: Any) -> None:
    async def body(core: Core) -> None:
        await create(core, "mb")
        fetch = asyncio.ensure_future(
            core.call(1, 12, fetch_body("mb", 0, max_wait=5000, min_bytes=2000))
        )
        await asyncio.sleep(0.02)
        await core.call(0, 9, produce_body("mb", build_batch([b"small"])))
        await asyncio.sleep(0.05)
        assert not fetch.done()  # ~70 bytes < 2000
        await core.call(0, 9, produce_body("mb", build_batch([b"y" * 3000])))
        f = await asyncio.wait_for(fetch, 2)
        assert values(fpart(f).records)[0] == b"small"

        start = time.monotonic()
        f = await core.call(1, 12, fetch_body("mb", 2, max_wait=300, min_bytes=1))
        waited = time.monotonic() - start
        assert 0.28 <= waited < 3.0, waited  # never early; the upper bound only catches a hang
        assert fpart(f).error_code == 0 and bytes(fpart(f).records) == b""

    run(str(tmp_path), body)


def test_produce_errors(tmp_path: Any) -> None:
    async def body(core: Core) -> None:
        await create(core, "small", 1, **{"max.message.bytes": "200"})
        r = await core.call(0, 9, produce_body("small", build_batch([b"z" * 500])))
        assert part(r).error_code == E.MESSAGE_TOO_LARGE
        r = await core.call(0, 9, produce_body("missing", build_batch([b"z"])))
        assert part(r).error_code == E.UNKNOWN_TOPIC_OR_PARTITION
        r = await core.call(0, 9, produce_body("small", build_batch([b"z"]), acks=2))
        assert part(r).error_code == E.INVALID_REQUIRED_ACKS
        corrupt = bytearray(build_batch([b"z"]))
        corrupt[-1] ^= 0xFF
        r = await core.call(0, 9, produce_body("small", bytes(corrupt)))
        assert part(r).error_code == E.CORRUPT_MESSAGE
        # acks=0 with an error: the connection is closed instead of answered
        await expect_close(core, 0, 9, produce_body("missing", build_batch([b"z"]), acks=0))

    run(str(tmp_path), body)


def test_min_insync_replicas(tmp_path: Any) -> None:
    async def body(core: Core) -> None:
        # Capped at the replica count (Kafka's effectiveMinIsr): one replica,
        # min.insync.replicas=2, and acks=-1 is answered.
        await create(core, "isr", 1, **{"min.insync.replicas": "2"})
        r = await core.call(0, 9, produce_body("isr", build_batch([b"a"]), acks=-1))
        assert part(r).error_code == 0
        r = await core.call(0, 9, produce_body("isr", build_batch([b"a"]), acks=1))
        assert part(r).error_code == 0 and part(r).base_offset == 1

    run(str(tmp_path), body)


def test_log_append_time(tmp_path: Any) -> None:
    async def body(core: Core) -> None:
        await create(core, "lat", 1, **{"message.timestamp.type": "LogAppendTime"})
        before = int(time.time() * 1000)
        r = await core.call(0, 9, produce_body("lat", build_batch([b"a"], timestamp=5)))
        assert part(r).log_append_time_ms >= before

    run(str(tmp_path), body)


# ---------------------------------------------------------------- idempotence


def test_idempotent_producer_duplicates_gaps_and_fencing(tmp_path: Any) -> None:
    async def body(core: Core) -> None:
        await create(core, "idem")
        r = await core.call(22, 4, {"transactional_id": None, "transaction_timeout_ms": 60000})
        assert r.error_code == 0 and r.producer_epoch == 0
        pid = r.producer_id
        r2 = await core.call(22, 4, {"transactional_id": None, "transaction_timeout_ms": 1})
        assert r2.producer_id != pid

        def batch(seq: int, n: int = 2, epoch: int = 0) -> bytes:
            return build_batch(
                [b"%d" % (seq + i) for i in range(n)],
                producer_id=pid,
                producer_epoch=epoch,
                base_sequence=seq,
            )

        r = await core.call(0, 9, produce_body("idem", batch(0), acks=-1))
        assert part(r).base_offset == 0
        r = await core.call(0, 9, produce_body("idem", batch(2), acks=-1))
        assert part(r).base_offset == 2
        # a retry of the first batch: the original offsets, nothing written
        r = await core.call(0, 9, produce_body("idem", batch(0), acks=-1))
        assert part(r).error_code == 0 and part(r).base_offset == 0
        assert core.rm.partition(("idem", 0)).log_end_offset == 4  # type: ignore[arg-type, union-attr]
        r = await core.call(0, 9, produce_body("idem", batch(9), acks=-1))
        assert part(r).error_code == E.OUT_OF_ORDER_SEQUENCE_NUMBER
        r = await core.call(0, 9, produce_body("idem", batch(0, epoch=1), acks=-1))
        assert part(r).error_code == 0 and part(r).base_offset == 4
        r = await core.call(0, 9, produce_body("idem", batch(4, epoch=0), acks=-1))
        assert part(r).error_code == E.INVALID_PRODUCER_EPOCH

        r = await core.call(22, 4, {"transactional_id": "tx", "transaction_timeout_ms": 1})
        assert r.error_code == E.COORDINATOR_NOT_AVAILABLE

    run(str(tmp_path), body)


def test_producer_ids_never_repeat_across_restarts(tmp_path: Any) -> None:
    seen: list[int] = []

    async def body(core: Core) -> None:
        for _ in range(3):
            r = await core.call(22, 0, {"transactional_id": None, "transaction_timeout_ms": 1})
            seen.append(r.producer_id)

    run(str(tmp_path), body)
    run(str(tmp_path), body)
    assert len(set(seen)) == 6
    assert min(seen[3:]) > max(seen[:3])


# ---------------------------------------------------------------- offsets


def test_list_offsets_earliest_latest_time_and_max(tmp_path: Any) -> None:
    async def body(core: Core) -> None:
        await create(core, "lo")
        for ts in (1000, 3000, 2000):
            await core.call(0, 9, produce_body("lo", build_batch([b"v"], timestamp=ts)))

        async def lo(ts: int, version: int = 7, isolation: int = 0) -> Any:
            r = await core.call(
                2,
                version,
                {
                    "replica_id": -1,
                    "isolation_level": isolation,
                    "topics": [
                        {
                            "name": "lo",
                            "partitions": [
                                {"partition_index": 0, "timestamp": ts, "current_leader_epoch": -1}
                            ],
                        }
                    ],
                },
            )
            return r.topics[0].partitions[0]

        assert (await lo(-2)).offset == 0
        latest = await lo(-1)
        assert latest.offset == 3 and latest.leader_epoch == 0
        assert (await lo(-1, isolation=1)).offset == 3
        mx = await lo(-3)
        assert (mx.offset, mx.timestamp) == (1, 3000)
        t = await lo(1500)
        assert (t.offset, t.timestamp, t.leader_epoch) == (1, 3000, 0)
        assert (await lo(2500)).offset == 1
        none = await lo(99999)
        assert (none.offset, none.timestamp) == (-1, -1)
        r = await lo(-1, version=1)
        assert r.offset == 3

    run(str(tmp_path), body)


def test_offset_for_leader_epoch(tmp_path: Any) -> None:
    async def body(core: Core) -> None:
        await create(core, "ep")
        await core.call(0, 9, produce_body("ep", build_batch([b"a", b"b"])))
        p = core.rm.partition(("ep", 0))  # type: ignore[arg-type]
        assert p is not None
        p.leader_epoch = 1
        await core.call(0, 9, produce_body("ep", build_batch([b"c"])))

        async def ofl(epoch: int, current: int = -1) -> Any:
            r = await core.call(
                23,
                4,
                {
                    "replica_id": -1,
                    "topics": [
                        {
                            "topic": "ep",
                            "partitions": [
                                {
                                    "partition": 0,
                                    "current_leader_epoch": current,
                                    "leader_epoch": epoch,
                                }
                            ],
                        }
                    ],
                },
            )
            return r.topics[0].partitions[0]

        r = await ofl(0)
        assert (r.error_code, r.leader_epoch, r.end_offset) == (0, 0, 2)
        r = await ofl(1)
        assert (r.leader_epoch, r.end_offset) == (1, 3)
        r = await ofl(0, current=0)
        assert r.error_code == E.FENCED_LEADER_EPOCH

    run(str(tmp_path), body)


# ---------------------------------------------------------------- persistence


def test_topics_and_data_survive_restart(tmp_path: Any) -> None:
    async def first(core: Core) -> None:
        await create(core, "keep", 2, **{"retention.ms": "12345"})
        await core.call(0, 9, produce_body("keep", build_batch([b"x"]), partition=1))

    async def second(core: Core) -> None:
        meta = core.store.topic("keep")
        assert meta is not None and meta.partitions == 2
        assert meta.configs == {"retention.ms": "12345"}
        p = core.rm.partition(("keep", 1))  # type: ignore[arg-type]
        assert p is not None and p.log.config.retention_ms == 12345
        assert p.high_watermark == 1
        f = await core.call(
            1,
            12,
            {
                "max_wait_ms": 0,
                "min_bytes": 1,
                "topics": [
                    {
                        "topic": "keep",
                        "partitions": [
                            {"partition": 1, "fetch_offset": 0, "partition_max_bytes": 1000}
                        ],
                    }
                ],
            },
        )
        assert values(fpart(f).records) == [b"x"]

    run(str(tmp_path), first)
    run(str(tmp_path), second)
    assert JsonMetadataStore(str(tmp_path)).topic("keep") is not None


def test_delete_topic_removes_partitions(tmp_path: Any) -> None:
    async def body(core: Core) -> None:
        await create(core, "gone", 2)
        fetch = asyncio.ensure_future(core.call(1, 12, fetch_body("gone", 0, max_wait=5000)))
        await asyncio.sleep(0.02)
        core.store.delete_topic("gone")
        f = await asyncio.wait_for(fetch, 2)
        assert fpart(f).error_code == E.UNKNOWN_TOPIC_OR_PARTITION
        assert core.rm.partitions_of("gone") == []
        core.store.create_topic("gone", 1)
        r = await core.call(0, 9, produce_body("gone", build_batch([b"new"])))
        assert part(r).base_offset == 0

    run(str(tmp_path), body)


@pytest.mark.parametrize("size", [1000, 600_000])
def test_pipelined_appends_keep_order(tmp_path: Any, size: int) -> None:
    """A large append runs on a worker thread; appends queued behind it for the
    same partition still land in arrival order (idempotent sequences hold)."""

    async def body(core: Core) -> None:
        await create(core, "ord")
        pid = (await core.call(22, 4, {"transactional_id": None})).producer_id
        calls = [
            core.call(
                0,
                9,
                produce_body(
                    "ord",
                    build_batch(
                        [b"v" * (size if i % 2 == 0 else 10)],
                        producer_id=pid,
                        producer_epoch=0,
                        base_sequence=i,
                    ),
                    acks=-1,
                ),
            )
            for i in range(6)
        ]
        results = await asyncio.gather(*calls)
        assert [part(r).error_code for r in results] == [0] * 6
        assert [part(r).base_offset for r in results] == list(range(6))

    run(str(tmp_path), body)


# ---------------------------------------------------------------- large requests


def test_metadata_answers_each_named_topic_once(tmp_path: Any) -> None:
    async def body(core: Core) -> None:
        await create(core, "once")
        names = [{"name": n} for n in ("once", "once", "!bad", "!bad", "once")]
        resp = await core.call(3, 1, {"topics": names})
        assert [(t.name, t.error_code) for t in resp.topics] == [
            ("once", E.NONE),
            ("!bad", E.INVALID_TOPIC_EXCEPTION),
        ]

    run(str(tmp_path), body)


def test_metadata_topic_without_name_or_id(tmp_path: Any) -> None:
    # v10 and v11 carry ids but their response names are not nullable (from v12 they are)
    async def body(core: Core) -> None:
        for version, name in ((10, ""), (11, ""), (12, None)):
            resp = await core.call(3, version, {"topics": [{"name": None}]})
            assert [(t.name, t.error_code) for t in resp.topics] == [(name, E.INVALID_REQUEST)]

    run(str(tmp_path), body)


def test_a_large_request_leaves_the_event_loop_turns(tmp_path: Any) -> None:
    # 30,000 topic entries (a 200 KB frame): decoded and answered on the codec thread,
    # the handler's loop paced; another task keeps getting turns all along.
    async def body(core: Core) -> None:
        await create(core, "t")
        turns = 0
        done = False

        async def other() -> None:
            nonlocal turns
            while not done:
                turns += 1
                await asyncio.sleep(0)

        task = asyncio.create_task(other())
        await asyncio.sleep(0)
        names = [{"name": f"!x{i}"} for i in range(30_000)]
        start = turns
        resp = await core.call(3, 4, {"topics": names, "allow_auto_topic_creation": False})
        done = True
        await task
        assert len(resp.topics) == 30_000
        assert turns - start >= 30  # at least one turn every 1,000 entries

    run(str(tmp_path), body)


def test_a_large_produce_with_few_partitions_is_decoded_on_the_loop(tmp_path: Any) -> None:
    # A 600 KB batch: decoded and answered without the codec thread (its decode
    # costs per partition, not per byte); a Produce of 1,500 partition entries
    # (over INLINE_PRODUCE_ELEMENTS) still goes to that thread. Both are answered
    # in full, the batch appended.
    async def body(core: Core) -> None:
        await create(core, "big")
        batch = build_batch([b"v" * 600_000])
        r = await core.call(0, 9, produce_body("big", batch))
        assert part(r).error_code == 0 and part(r).base_offset == 0
        assert core.apis._codec_executor is None  # no worker thread was needed

        many = produce_body("big", batch)
        many["topic_data"][0]["partition_data"] += [
            {"index": i, "records": None} for i in range(1, 1_501)
        ]
        r = await core.call(0, 9, many)
        codes = [p.error_code for p in r.responses[0].partition_responses]
        assert len(codes) == 1_501 and codes[0] == 0 and part(r).base_offset == 1
        assert set(codes[1:]) == {E.UNKNOWN_TOPIC_OR_PARTITION}
        assert core.apis._codec_executor is not None

    run(str(tmp_path), body)
