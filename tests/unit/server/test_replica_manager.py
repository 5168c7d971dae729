"""ReplicaManager and Partition against real logs: HW = LEO with a one-broker
ISR, leader epochs, ordered appends on the worker thread, store/log
reconciliation at start-up. With ``-s`` it prints the inline-vs-offloaded
append costs behind DEFAULT_APPEND_OFFLOAD_BYTES."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import threading
import time
from typing import Any

import pytest
from conftest import build_batch

from pylog.common.topic_partition import TopicPartition
from pylog.errors import ErrorCode as E
from pylog.log import LogManager
from pylog.log.checkpoint import REPLICATION_OFFSET_CHECKPOINT, OffsetCheckpointFile
from pylog.log.log import FetchIsolation
from pylog.metadata import JsonMetadataStore
from pylog.server.delayed_fetch import FetchParams, FetchPartitionRequest
from pylog.server.replica_manager import ReplicaManager


def make(path: str, **kw: Any) -> tuple[LogManager, JsonMetadataStore, ReplicaManager]:
    lm = LogManager({"log.dirs": path})
    store = JsonMetadataStore(path)
    rm = ReplicaManager(lm, store, **kw)
    rm.startup()
    return lm, store, rm


def close(lm: LogManager, rm: ReplicaManager) -> None:
    rm.shutdown()
    lm.shutdown()


def test_append_moves_hw_and_records_epoch(tmp_path: Any) -> None:
    lm, store, rm = make(str(tmp_path))
    store.create_topic("t", 2)
    tp = TopicPartition("t", 1)

    async def main() -> None:
        res = await rm.append_records(1000, -1, {tp: build_batch([b"a", b"b"])})
        assert res[tp].error_code == 0 and res[tp].base_offset == 0
        p = rm.partition(tp)
        assert p is not None
        assert p.high_watermark == p.log_end_offset == 2
        assert p.log.leader_epoch_cache.latest_epoch == 0  # type: ignore[union-attr]
        assert p.replica(0).log_end_offset == 2  # type: ignore[union-attr]
        out = rm.read_from_local_log(FetchParams(), [FetchPartitionRequest(tp, 0, 1 << 20)])
        assert out[0].high_watermark == 2 and out[0].size > 0

    asyncio.run(main())
    close(lm, rm)


def test_startup_adopts_logs_the_store_lacks(tmp_path: Any) -> None:
    lm, store, rm = make(str(tmp_path))
    store.create_topic("kept", 3)
    tid = store.topic("kept").topic_id  # type: ignore[union-attr]
    close(lm, rm)
    os.unlink(store.path)
    lm, store, rm = make(str(tmp_path))
    meta = store.topic("kept")
    assert meta is not None and meta.partitions == 3 and meta.topic_id == tid
    assert len(rm.partitions_of("kept")) == 3
    close(lm, rm)


def test_delete_records_moves_log_start(tmp_path: Any) -> None:
    lm, store, rm = make(str(tmp_path))
    store.create_topic("d", 1)
    tp = TopicPartition("d", 0)

    async def main() -> None:
        await rm.append_records(1000, 1, {tp: build_batch([b"1", b"2", b"3"])})

    asyncio.run(main())
    assert rm.delete_records({tp: 2})[tp] == (0, 2)
    assert rm.delete_records({tp: 9})[tp][0] == 1  # OFFSET_OUT_OF_RANGE
    p = rm.partition(tp)
    assert p is not None and p.log_start_offset == 2
    found = p.fetch_offset_for_timestamp(-2, isolation=FetchIsolation.HIGH_WATERMARK)
    assert found is not None and found.offset == 2
    close(lm, rm)


def test_offloaded_and_inline_appends_interleave_in_order(tmp_path: Any) -> None:
    lm, store, rm = make(str(tmp_path), append_offload_bytes=4096)
    store.create_topic("o", 1)
    tp = TopicPartition("o", 0)

    async def main() -> None:
        sizes = [100_000, 10, 50_000, 10, 10, 200_000]
        calls = [rm.append_records(1000, 1, {tp: build_batch([b"x" * n])}) for n in sizes]
        res = await asyncio.gather(*calls)
        assert [r[tp].base_offset for r in res] == list(range(len(sizes)))

    asyncio.run(main())
    close(lm, rm)


def test_a_lane_keeps_order_past_a_failed_append(tmp_path: Any) -> None:
    # Pipelined large appends to one partition queue behind the one on the
    # worker; a corrupt one in the middle fails alone, the rest follow in order.
    lm, store, rm = make(str(tmp_path), append_offload_bytes=4096)
    store.create_topic("l", 1)
    tp = TopicPartition("l", 0)

    async def main() -> None:
        corrupt = bytearray(build_batch([b"c" * 9_000]))
        corrupt[-1] ^= 0xFF
        sets = [build_batch([b"a" * 9_000])] * 3 + [bytes(corrupt)] + [build_batch([b"z"])] * 3
        calls = [rm.append_records(1000, 1, {tp: s}) for s in sets]
        res = [r[tp] for r in await asyncio.gather(*calls)]
        assert [r.error_code for r in res] == [0, 0, 0, E.CORRUPT_MESSAGE, 0, 0, 0]
        assert [r.base_offset for r in res if r.error_code == 0] == list(range(6))
        assert rm.partition(tp).log_end_offset == 6  # type: ignore[union-attr]

    asyncio.run(main())
    close(lm, rm)


class CountingExecutor(concurrent.futures.ThreadPoolExecutor):
    """A real thread pool that counts the jobs handed to it."""

    def __init__(self) -> None:
        super().__init__(max_workers=2, thread_name_prefix="test-append")
        self.jobs = 0

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        self.jobs += 1
        return super().submit(fn, *args, **kwargs)


def test_a_requests_large_appends_share_one_worker_job(tmp_path: Any) -> None:
    # Three large record sets (one corrupt), one small: the large ones go to the
    # worker together — one job — each with its own outcome; a second request to
    # one of them, sent while they are in flight, lands after it (in that job's
    # lane when the worker has not finished it yet, else in a job of its own).
    executor = CountingExecutor()
    lm, store, rm = make(str(tmp_path), append_offload_bytes=4096, executor=executor)
    store.create_topic("g", 4)
    tps = [TopicPartition("g", i) for i in range(4)]

    async def main() -> None:
        corrupt = bytearray(build_batch([b"c" * 9_000]))
        corrupt[-1] ^= 0xFF  # the CRC no longer matches
        first = rm.append_records(
            1000,
            1,
            {
                tps[0]: build_batch([b"a" * 9_000]),
                tps[1]: bytes(corrupt),
                tps[2]: build_batch([b"b" * 20_000, b"b"]),
                tps[3]: build_batch([b"small"]),
            },
        )
        second = rm.append_records(1000, 1, {tps[2]: build_batch([b"next" * 3_000])})
        r1, r2 = await asyncio.gather(first, second)
        assert [r1[tp].error_code for tp in tps] == [0, E.CORRUPT_MESSAGE, 0, 0]
        assert r1[tps[2]].base_offset == 0 and r2[tps[2]].base_offset == 2
        assert executor.jobs in (1, 2)  # never one per partition
        assert rm.partition(tps[2]).log_end_offset == 3  # type: ignore[union-attr]
        assert rm.partition(tps[1]).log_end_offset == 0  # type: ignore[union-attr]

    asyncio.run(main())
    close(lm, rm)
    executor.shutdown()


def test_measure_inline_vs_offloaded_append(tmp_path: Any) -> None:
    """Not a timed assertion: prints what an append costs inline and through
    the executor, the figures behind the default offload threshold."""
    lm, store, rm = make(str(tmp_path))
    store.create_topic("m", 1)
    tp = TopicPartition("m", 0)
    p = rm.partition(tp)
    assert p is not None
    ex = rm._executor

    async def main() -> None:
        loop = asyncio.get_running_loop()
        p.append_records_to_leader(build_batch([b"warm-up"]), 1)
        for size in (1024, 16 * 1024, 128 * 1024, 900 * 1024):
            batches = [build_batch([b"v" * 100] * (size // 100)) for _ in range(20)]
            t0 = time.perf_counter()
            for b in batches[:10]:
                p.append_records_to_leader(b, 1)
            inline = (time.perf_counter() - t0) / 10
            t0 = time.perf_counter()
            for b in batches[10:]:
                await loop.run_in_executor(ex, p.append_records_to_leader, b, 1)
            offloaded = (time.perf_counter() - t0) / 10
            print(
                f"append {size >> 10:5d} KiB: inline {inline * 1e6:8.1f} µs, "
                f"via executor {offloaded * 1e6:8.1f} µs"
            )

    asyncio.run(main())
    close(lm, rm)


def test_concurrent_high_watermark_checkpoints_never_clash(
    tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The scheduler's periodic checkpoint and the shutdown's can run at once
    (found by Spark's Kafka connector tests, 50 ms interval): they share one
    ``.tmp`` name, so they must be ordered by one lock per log dir, as Kafka's
    checkpoint files are — else one's rename finds no file, or a mix of both
    lands."""
    lm, store, rm = make(str(tmp_path))
    store.create_topic("t", 8)

    raised: list[BaseException] = []

    def checkpoint_often() -> None:
        try:
            for _ in range(150):
                rm.checkpoint_high_watermarks()
        except BaseException as e:
            raised.append(e)

    with caplog.at_level(logging.ERROR, logger="pylog.server.replica_manager"):
        threads = [threading.Thread(target=checkpoint_often) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        close(lm, rm)
    assert raised == []
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
    saved = OffsetCheckpointFile(os.path.join(str(tmp_path), REPLICATION_OFFSET_CHECKPOINT)).read()
    assert sorted(saved) == [TopicPartition("t", p) for p in range(8)]


def test_inline_appends_of_any_size_skip_the_worker_but_not_a_busy_lane(tmp_path: Any) -> None:
    # inline (the request's connection is the only one sending): large record
    # sets are appended on the loop, no worker job; one behind an append still
    # on the worker joins that partition's lane and lands after it.
    executor = CountingExecutor()
    lm, store, rm = make(str(tmp_path), append_offload_bytes=4096, executor=executor)
    store.create_topic("i", 2)
    tp, other = TopicPartition("i", 0), TopicPartition("i", 1)

    async def main() -> None:
        big = build_batch([b"i" * 50_000])
        res = await rm.append_records(1000, 1, {tp: big, other: big}, inline=True)
        assert executor.jobs == 0
        assert res[tp].error_code == res[other].error_code == 0
        offloaded = rm.append_records(1000, 1, {tp: build_batch([b"w" * 200_000])})
        behind = rm.append_records(1000, 1, {tp: big}, inline=True)
        r1, r2 = await asyncio.gather(offloaded, behind)
        assert executor.jobs >= 1
        assert (r1[tp].base_offset, r2[tp].base_offset) == (1, 2)
        assert rm.partition(tp).log_end_offset == 3  # type: ignore[union-attr]

    asyncio.run(main())
    close(lm, rm)
    executor.shutdown()
