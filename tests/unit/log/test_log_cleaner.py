"""Log compaction on real files: the native offset map and copy loop, the
cleaner manager's choices and states, and the swap's crash recovery (a real
child process SIGKILLed at each phase)."""

from __future__ import annotations

import io
import os
import signal
import struct
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.clock import ManualClock

from pylog import _native
from pylog.cli.dump_log import dump_log_file
from pylog.common.topic_partition import TopicPartition
from pylog.errors import InvalidRecordError
from pylog.log.checkpoint import CLEANER_OFFSET_CHECKPOINT, OffsetCheckpointFile
from pylog.log.cleaner import (
    CRASH_ENV,
    LogCleaningAbortedError,
    LogCleaningState,
    Throttler,
)
from pylog.log.log import Log
from pylog.log.manager import LogManager

TOPIC = "compacted"
TP = TopicPartition(TOPIC, 0)
SEG = 16 * 1024

COMPACT: dict[str, Any] = {
    "cleanup.policy": "compact",
    "internal.segment.bytes": SEG,
    "segment.index.bytes": 4096,
    "index.interval.bytes": 512,
    "min.cleanable.dirty.ratio": 0.01,
    "file.delete.delay.ms": 0,
}


def props(d: Path, **extra: Any) -> dict[str, Any]:
    p: dict[str, Any] = {
        "log.dirs": [str(d)],
        "log.cleaner.enable": False,
        "log.cleaner.dedupe.buffer.size": 1 << 20,
        "log.cleaner.io.buffer.size": 64 * 1024,
    }
    p.update(extra)
    return p


@pytest.fixture
def manager(tmp_path: Path) -> Iterator[LogManager]:
    m = LogManager(props(tmp_path), topic_configs={TOPIC: COMPACT})
    yield m
    m.shutdown()


def batch(
    pairs: list[tuple[bytes, bytes | None]], ts: int | None = None, codec: int = 0, **kw: Any
) -> bytearray:
    now = int(time.time() * 1000) if ts is None else ts
    return bytearray(
        _native.build_batch([(k, v, [], now) for k, v in pairs], compression=codec, **kw)
    )


def fill(log: Log, rounds: int, keys: int, codec: int = 0, tag: bytes = b"") -> dict[bytes, bytes]:
    """``rounds`` updates of each of ``keys`` keys; returns the latest values."""
    latest: dict[bytes, bytes] = {}
    for r in range(rounds):
        pairs = []
        for k in range(keys):
            key, value = b"key-%d" % k, b"%s-round-%d-" % (tag, r) + b"x" * 40
            pairs.append((key, value))
            latest[key] = value
        for i in range(0, len(pairs), 10):
            log.append_as_leader(batch(pairs[i : i + 10], codec=codec), 0)
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    return latest


def records(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record from the log start, read like a consumer."""
    return [(o, k, v) for o, k, v, _ in timed_records(log)]


def timed_records(log: Log) -> list[tuple[int, bytes | None, bytes | None, int]]:
    """(offset, key, value, timestamp) of every record from the log start."""
    out = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read_bytes(offset, 1 << 20)
        if not data:
            break
        pos = 0
        last = offset
        while pos + 12 <= len(data):
            size = 12 + int.from_bytes(data[pos + 8 : pos + 12], "big")
            if pos + size > len(data):
                break
            b = data[pos : pos + size]
            last = int.from_bytes(b[0:8], "big") + int.from_bytes(b[23:27], "big")
            for r in _native.decode_records(b):  # checks the CRC too
                out.append((r.offset, r.key, r.value, r.timestamp))
            pos += size
        offset = last + 1
    return out


def latest_view(log: Log) -> dict[bytes, bytes | None]:
    view: dict[bytes, bytes | None] = {}
    for _, k, v in records(log):
        assert k is not None
        view[k] = v
    return view


def checkpoint(d: Path) -> dict[TopicPartition, int]:
    return OffsetCheckpointFile(d / CLEANER_OFFSET_CHECKPOINT).read()


# ------------------------------------------------------------------ native


def test_offset_map_native() -> None:
    m = _native.OffsetMap(24 * 1000, 0.5)
    assert m.slots == 1000 and m.max_entries == 500 and m.memory == 24_000
    assert m.get(b"a") == -1
    for i in range(500):
        assert m.put(b"k%d" % i, i)
    assert m.is_full and not m.put(b"new", 1000)
    assert m.put(b"k1", 999) and m.get(b"k1") == 999 and m.latest_offset == 999
    m.clear()
    assert (m.size, m.get(b"k1"), m.latest_offset) == (0, -1, -1)


# ------------------------------------------------------------------ cleaning


@pytest.mark.parametrize("codec", [0, 2, 4])
def test_clean_keeps_latest_value_per_key(manager: LogManager, tmp_path: Path, codec: int) -> None:
    log = manager.get_or_create_log(TP)
    latest = fill(log, rounds=20, keys=50, codec=codec)
    segments_before = log.num_segments
    size_before = log.size
    assert manager.cleaner.clean_once()
    got = records(log)
    assert {k: v for _, k, v in got} == latest
    assert len(got) == 50, "one record per key"
    offsets = [o for o, _, _ in got]
    assert offsets == sorted(offsets) and offsets[-1] == log.log_end_offset - 1
    # groups are sized by their sources (full segments: one each), so the
    # count shrinks only at the next clean, which merges the small outputs
    assert log.num_segments == segments_before and log.size < size_before / 5
    assert all(s.size <= SEG for s in log.segments)
    assert checkpoint(tmp_path)[TP] == log.active_segment.base_offset
    # compression kept
    first = log.read_bytes(log.log_start_offset, 1 << 20)
    assert first[22] & 0x07 == codec  # attributes: i16 at 21
    m = manager.cleaner.metrics()
    assert m["bytes_cleaned"] > 0 and 0 < m["cleaner_recopy_percent"] < 30
    # nothing more to clean now
    assert not manager.cleaner.clean_once()
    fill(log, rounds=1, keys=5, tag=b"more")
    assert manager.cleaner.clean_once()
    assert log.num_segments == 2 and len(records(log)) == 50
    # no leftovers
    assert not [n for n in os.listdir(log.dir) if n.endswith((".cleaned", ".swap"))]


def test_reopen_after_clean_and_dirty_tail(tmp_path: Path) -> None:
    m = LogManager(props(tmp_path), topic_configs={TOPIC: COMPACT})
    log = m.get_or_create_log(TP)
    latest = fill(log, rounds=5, keys=30)
    assert m.cleaner.clean_once()
    latest.update(fill(log, rounds=3, keys=10, tag=b"late"))
    assert m.cleaner.clean_once()
    assert latest_view(log) == latest
    m.shutdown()
    m2 = LogManager(props(tmp_path), topic_configs={TOPIC: COMPACT})
    try:
        log2 = m2.get_or_create_log(TP)
        assert latest_view(log2) == latest
        assert len(records(log2)) == 30
    finally:
        m2.shutdown()


def test_grouping_respects_segment_bytes(manager: LogManager) -> None:
    log = manager.get_or_create_log(TP)
    # unique keys: nothing is removed, so groups must split at segment.bytes
    for i in range(400):
        log.append_as_leader(batch([(b"u-%d" % i, b"y" * 200)]), 0)
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    n = log.num_segments
    assert manager.cleaner.clean_once()
    assert all(s.size <= SEG for s in log.segments)
    assert 1 < log.num_segments <= n
    assert len(records(log)) == 400


def horizons(log: Log) -> dict[int, int]:
    """Base offset -> delete horizon of each batch that holds one."""
    out = {}
    for seg in log.segments:
        infos, _ = _native.read_batch_infos(seg.log_path, 0, 1_000_000)
        out.update({b.base_offset: b.delete_horizon_ms for b in infos if b.delete_horizon_ms >= 0})
    return out


def test_tombstones_expire_at_the_delete_horizon_in_their_batch(tmp_path: Path) -> None:
    """KIP-534: the first clean keeping a tombstone writes now +
    delete.retention.ms into its batch; cleans before that keep it, the first
    at or after it drops it — however young the segments are."""
    clock = ManualClock()
    config = {**COMPACT, "delete.retention.ms": 1000}
    manager = LogManager(props(tmp_path), topic_configs={TOPIC: config}, clock=clock)
    try:
        log = manager.get_or_create_log(TP)

        def round_of(n: int, extra: list[tuple[bytes, bytes | None]]) -> None:
            for i in range(60):
                log.append_as_leader(batch([(b"filler-%d-%d" % (n, i), b"f" * 200)]), 0)
            if extra:
                log.append_as_leader(batch(extra), 0)
            log.roll()
            log.update_high_watermark(log.log_end_offset)

        before = int(time.time() * 1000)
        round_of(1, [(b"a", b"1"), (b"b", b"1"), (b"a", None)])
        after = int(time.time() * 1000)
        assert horizons(log) == {}
        first = clock()
        assert manager.cleaner.clean_once()
        assert latest_view(log)[b"a"] is None
        # the tombstone's batch (offsets 60..62, now 61..62) holds the horizon
        assert list(horizons(log).values()) == [first + 1000]
        dumped = io.StringIO()
        for seg in log.segments:
            dump_log_file(seg.log_path, dumped, True, False, 1 << 30)
        assert f"deleteHorizonMs: OptionalLong[{first + 1000}]" in dumped.getvalue()
        assert "deleteHorizonMs: OptionalLong.empty" in dumped.getvalue()  # the filler
        # the records keep their own timestamps (rebased on the horizon)
        stamps = [ts for _, k, _, ts in timed_records(log) if k in (b"a", b"b")]
        assert len(stamps) == 2 and all(before <= ts <= after for ts in stamps), stamps
        # and so does the Spark reader's columnar decode of the same bytes
        want = {o: ts for o, _, _, ts in timed_records(log)}
        got: dict[int, int] = {}
        for seg in log.segments:
            cols, _, _, _ = _native.read_segment_columns(seg.log_path, 0, None, 0, 1 << 62)
            n, offsets, micros = cols[0], cols[1], cols[2]
            o = struct.unpack(f"<{n}q", offsets)
            t = struct.unpack(f"<{n}q", micros)
            got.update({o[i]: t[i] // 1000 for i in range(n)})
        assert got == want

        clock.advance(999)
        round_of(2, [])
        assert manager.cleaner.clean_once()
        assert latest_view(log)[b"a"] is None  # a millisecond before the horizon
        assert list(horizons(log).values()) == [first + 1000]  # not moved by a later clean

        clock.advance(1)
        round_of(3, [])
        assert manager.cleaner.clean_once()
        view = latest_view(log)
        assert b"a" not in view and view[b"b"] == b"1" and len(view) == 181
    finally:
        manager.shutdown()


def test_min_compaction_lag_holds_recent_segments(manager: LogManager) -> None:
    log = manager.get_or_create_log(TP)
    manager.update_topic_config(TOPIC, {**COMPACT, "min.compaction.lag.ms": 3_600_000})
    fill(log, rounds=5, keys=10)
    assert not manager.cleaner.clean_once(), "records younger than the lag stay"
    log2 = manager.get_or_create_log(TopicPartition(TOPIC, 1))
    old = int(time.time() * 1000) - 7_200_000
    for r in range(5):
        log2.append_as_leader(batch([(b"k%d" % k, b"%d" % r) for k in range(10)], ts=old), 0)
    log2.roll()
    log2.update_high_watermark(log2.log_end_offset)
    assert manager.cleaner.clean_once()
    assert len(records(log2)) == 10


def test_max_compaction_lag_forces_a_clean_below_the_ratio(manager: LogManager) -> None:
    log = manager.get_or_create_log(TP)
    manager.update_topic_config(TOPIC, {**COMPACT, "min.cleanable.dirty.ratio": 0.99})
    old = int(time.time() * 1000) - 600_000
    for r in range(3):
        log.append_as_leader(batch([(b"k%d" % k, b"%d" % r) for k in range(10)], ts=old), 0)
    log.roll()
    log.append_as_leader(batch([(b"z", b"tail")], ts=old), 0)
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    assert manager.cleaner.clean_once()  # first clean: everything is dirty (ratio 1)
    for r in range(3):
        log.append_as_leader(batch([(b"k%d" % k, b"n%d" % r) for k in range(10)], ts=old), 0)
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    assert not manager.cleaner.clean_once(), "below the ratio, no lag: not due"
    manager.update_topic_config(
        TOPIC, {**COMPACT, "min.cleanable.dirty.ratio": 0.99, "max.compaction.lag.ms": 60_000}
    )
    assert manager.cleaner.clean_once()
    assert len(records(log)) == 11


def test_active_segment_and_high_watermark_bound_the_clean(manager: LogManager) -> None:
    log = manager.get_or_create_log(TP)
    for r in range(5):
        log.append_as_leader(batch([(b"k", b"%d" % r)]), 0)
    assert not manager.cleaner.clean_once(), "only the active segment: never cleaned"
    log.roll()
    assert not manager.cleaner.clean_once(), "above the high watermark"
    log.update_high_watermark(log.log_end_offset)
    assert manager.cleaner.clean_once()
    assert records(log) == [(4, b"k", b"4")]


def test_keyless_records_refused_on_compacted_log(manager: LogManager) -> None:
    log = manager.get_or_create_log(TP)
    for codec in (0, 1, 4):
        with pytest.raises(InvalidRecordError):
            log.append_as_leader(batch([(b"k", b"v"), (None, b"v")], codec=codec), 0)  # type: ignore[list-item]
    assert log.log_end_offset == 0
    log.append_as_leader(batch([(b"k", b"v")]), 0)
    assert log.log_end_offset == 1


def test_idempotent_producer_last_batch_survives_as_empty_header(
    tmp_path: Path, manager: LogManager
) -> None:
    log = manager.get_or_create_log(TP)
    log.append_as_leader(
        batch([(b"a", b"1"), (b"b", b"1")], producer_id=42, producer_epoch=3, base_sequence=0), 0
    )
    log.append_as_leader(batch([(b"a", b"2"), (b"b", b"2")]), 0)
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    assert manager.cleaner.clean_once()
    assert latest_view(log) == {b"a": b"2", b"b": b"2"}
    infos = log.segments[0].batch_infos()
    assert infos[0].producer_id == 42 and infos[0].records_count == 0
    assert (infos[0].base_offset, infos[0].last_offset, infos[0].last_sequence) == (0, 1, 1)
    # the producer's next sequence is still accepted, a duplicate recognised
    info = log.append_as_leader(
        batch([(b"c", b"1")], producer_id=42, producer_epoch=3, base_sequence=2), 0
    )
    assert info.first_offset == 4


def test_pause_abort_and_resume(manager: LogManager) -> None:
    log = manager.get_or_create_log(TP)
    fill(log, rounds=3, keys=10)
    cleaner = manager.cleaner
    cleaner.abort_and_pause_cleaning(TP)
    assert cleaner.manager.state(TP) is LogCleaningState.PAUSED
    assert not cleaner.clean_once()
    cleaner.resume_cleaning([TP])
    assert cleaner.manager.state(TP) is None
    # abort while in progress: the aborter waits for the cleaner to notice
    to_clean = cleaner.manager.grab_filthiest_compacted_log()
    assert to_clean is not None and cleaner.manager.state(TP) is LogCleaningState.IN_PROGRESS
    done = threading.Event()

    def abort() -> None:
        cleaner.abort_and_pause_cleaning(TP)
        done.set()

    t = threading.Thread(target=abort)
    t.start()
    deadline = time.monotonic() + 5
    while cleaner.manager.state(TP) is not LogCleaningState.ABORTED:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert not done.is_set()
    with pytest.raises(LogCleaningAbortedError):
        cleaner.manager.check_cleaning_aborted(TP)
    cleaner.manager.done_cleaning(TP, to_clean.log_dir, None)
    t.join(5)
    assert done.is_set() and cleaner.manager.state(TP) is LogCleaningState.PAUSED
    cleaner.resume_cleaning([TP])
    assert cleaner.clean_once()


def test_truncate_and_delete_update_the_checkpoint(manager: LogManager, tmp_path: Path) -> None:
    log = manager.get_or_create_log(TP)
    fill(log, rounds=3, keys=10)
    assert manager.cleaner.clean_once()
    end = checkpoint(tmp_path)[TP]
    assert end == log.log_end_offset
    manager.truncate_to({TP: 25})
    assert checkpoint(tmp_path)[TP] <= 25
    assert manager.cleaner.manager.state(TP) is None, "resumed after the truncation"
    manager.async_delete(TP)
    assert TP not in checkpoint(tmp_path)


def test_throttler_limits_the_rate() -> None:
    t = Throttler(1_000_000, check_interval_s=0.01)
    start = time.monotonic()
    for _ in range(30):
        t.maybe_throttle(10_000)
    assert time.monotonic() - start >= 0.2  # 300 kB at 1 MB/s


def test_cleaner_threads_start_and_stop(tmp_path: Path) -> None:
    m = LogManager(
        props(tmp_path, **{"log.cleaner.enable": True, "log.cleaner.backoff.ms": 50}),
        topic_configs={TOPIC: COMPACT},
    )
    m.startup()
    try:
        log = m.get_or_create_log(TP)
        latest = fill(log, rounds=10, keys=20)
        deadline = time.monotonic() + 20
        while len(records(log)) != 20:
            assert time.monotonic() < deadline, "the cleaner thread did not clean"
            time.sleep(0.05)
        assert latest_view(log) == latest
        assert m.cleaner.running
    finally:
        m.shutdown()
    assert not m.cleaner.running


# ------------------------------------------------------------------ crash recovery

_CHILD = textwrap.dedent(
    """
    import sys
    from pylog.log.manager import LogManager
    from pylog.common.topic_partition import TopicPartition
    d, topic = sys.argv[1], sys.argv[2]
    import json
    m = LogManager({"log.dirs": [d], "log.cleaner.enable": False,
                    "log.cleaner.dedupe.buffer.size": 1 << 20},
                   topic_configs={topic: json.loads(sys.argv[3])})
    log = m.get_log(TopicPartition(topic, 0))
    log.update_high_watermark(log.log_end_offset)  # the replica manager's job in a broker
    m.cleaner.clean_once()
    print("no crash")
    """
)


@pytest.mark.parametrize("phase", ["map", "cleaned", "swap", "deleted", "done", "checkpointed"])
def test_kill_during_each_phase_of_a_clean_loses_nothing(tmp_path: Path, phase: str) -> None:
    import json

    m = LogManager(props(tmp_path), topic_configs={TOPIC: COMPACT})
    log = m.get_or_create_log(TP)
    latest = fill(log, rounds=12, keys=40, codec=2)
    m.shutdown()
    env = {**os.environ, CRASH_ENV: phase}
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, str(tmp_path), TOPIC, json.dumps(COMPACT)],
        env=env,
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    names = os.listdir(tmp_path / f"{TOPIC}-0")
    if phase == "cleaned":
        assert any(n.endswith(".cleaned") for n in names)
    if phase in ("swap", "deleted"):
        assert any(n.endswith(".swap") for n in names)
    assert not (tmp_path / ".kafka_cleanshutdown").exists()
    m2 = LogManager(props(tmp_path), topic_configs={TOPIC: COMPACT})
    try:
        log2 = m2.get_or_create_log(TP)
        assert latest_view(log2) == latest, "every key keeps its latest value"
        assert not [n for n in os.listdir(log2.dir) if n.endswith((".cleaned", ".swap"))]
        # the log still cleans, and stays right
        log2.update_high_watermark(log2.log_end_offset)
        m2.cleaner.clean_once()
        assert latest_view(log2) == latest
        assert len(records(log2)) == 40
    finally:
        m2.shutdown()


def test_replace_segments_refuses_segments_that_left_the_log(manager: LogManager) -> None:
    from pylog.errors import KafkaError
    from pylog.log.segment import LogSegment

    log = manager.get_or_create_log(TP)
    fill(log, rounds=2, keys=5)
    stranger = LogSegment.open(log.dir, 10_000, log.config, file_suffix=".cleaned")
    before = [s.base_offset for s in log.segments]
    with pytest.raises(KafkaError):
        log.replace_segments([stranger], [stranger])
    with pytest.raises(KafkaError):
        log.replace_segments([stranger], [log.active_segment])
    assert [s.base_offset for s in log.segments] == before
    stranger.delete_if_exists()


def test_broker_wide_policy_and_compact_delete(tmp_path: Path) -> None:
    small = {k: v for k, v in COMPACT.items() if k != "cleanup.policy"}
    m = LogManager(
        props(tmp_path, **{"log.cleanup.policy": "compact"}),
        topic_configs={TOPIC: small, "both": {**COMPACT, "cleanup.policy": "compact,delete"}},
    )
    try:
        log = m.get_or_create_log(TP)
        assert log.config.compact
        latest = fill(log, rounds=5, keys=10)
        assert m.cleaner.clean_once()
        assert latest_view(log) == latest and len(records(log)) == 10
        both = m.get_or_create_log(TopicPartition("both", 0))
        assert both.config.compact and both.config.delete
        latest = fill(both, rounds=5, keys=10)
        assert m.cleaner.clean_once()
        assert latest_view(both) == latest and len(records(both)) == 10
    finally:
        m.shutdown()


@pytest.mark.parametrize("seed", range(4))
def test_random_histories_match_a_model(manager: LogManager, seed: int) -> None:
    import random

    rng = random.Random(seed)
    log = manager.get_or_create_log(TP)
    model: dict[bytes, bytes | None] = {}
    for rnd in range(4):
        for _ in range(rng.randrange(20, 60)):
            pairs: list[tuple[bytes, bytes | None]] = []
            for _ in range(rng.randrange(1, 12)):
                key = b"k%d" % rng.randrange(40)
                value = None if rng.random() < 0.1 else b"%d-" % rnd + b"z" * rng.randrange(0, 300)
                pairs.append((key, value))
                model[key] = value
            log.append_as_leader(batch(pairs, codec=rng.choice([0, 1, 3, 4])), 0)
        log.roll()
        log.update_high_watermark(log.log_end_offset)
        assert manager.cleaner.clean_once()
        # tombstones are young (delete.retention.ms is a day): all kept
        assert latest_view(log) == model
        assert len(records(log)) == len(model)


def test_io_max_bytes_per_second_throttles_a_clean(tmp_path: Path) -> None:
    m = LogManager(
        props(tmp_path, **{"log.cleaner.io.max.bytes.per.second": 1_000_000}),
        topic_configs={TOPIC: COMPACT},
    )
    try:
        log = m.get_or_create_log(TP)
        fill(log, rounds=40, keys=50)  # ~200 KB read twice (map, copy)
        read = log.size * 2
        start = time.monotonic()
        assert m.cleaner.clean_once()
        assert time.monotonic() - start >= 0.8 * (read / 1_000_000) - 0.1
    finally:
        m.shutdown()


def test_appends_while_cleaner_threads_run(tmp_path: Path) -> None:
    m = LogManager(
        props(tmp_path, **{"log.cleaner.enable": True, "log.cleaner.backoff.ms": 5}),
        topic_configs={TOPIC: COMPACT},
    )
    m.startup()
    try:
        log = m.get_or_create_log(TP)
        model: dict[bytes, bytes] = {}
        for r in range(300):
            pairs = [
                (b"k%d" % ((r * 7 + i) % 30), b"%d-%d" % (r, i) + b"q" * 80) for i in range(10)
            ]
            model.update(pairs)
            log.append_as_leader(batch(list(pairs)), 0)
            log.update_high_watermark(log.log_end_offset)
            if r % 50 == 0:
                assert latest_view(log) == model  # a reader mid-way sees every key's latest
        log.roll()
        log.update_high_watermark(log.log_end_offset)
        deadline = time.monotonic() + 20
        while len(records(log)) != 30:
            assert time.monotonic() < deadline, "not compacted"
            time.sleep(0.05)
        assert latest_view(log) == model
        assert m.cleaner.cleans >= 2
    finally:
        m.shutdown()


def test_transactions_aborted_batches_dropped_markers_kept_until_gone(tmp_path: Path) -> None:
    """Kafka's LogCleaner with transactions: an aborted record neither
    survives nor hides the committed value of its key; a marker stays while
    a batch of its transaction remains (its .txnindex entry moves to the
    cleaned segment); the first clean after that writes its delete horizon
    (now + delete.retention.ms) into its batch and keeps it, and a clean past
    the horizon drops it (KIP-534), however old its segment."""
    from pylog.log.end_transaction_marker import (
        ABORT,
        COMMIT,
        EndTransactionMarker,
        build_marker_batch,
    )
    from pylog.log.log import AppendOrigin
    from pylog.log.transaction_index import AbortedTxn

    clock = ManualClock()
    config = {**COMPACT, "delete.retention.ms": 1000}
    manager = LogManager(props(tmp_path), topic_configs={TOPIC: config}, clock=clock)
    seq: dict[int, int] = {}

    def txn(pid: int, pairs: list[tuple[bytes, bytes | None]]) -> None:
        s = seq.get(pid, 0)
        log.append_as_leader(
            batch(pairs, producer_id=pid, producer_epoch=0, base_sequence=s, is_transactional=True),
            0,
        )
        seq[pid] = s + len(pairs)

    def end(pid: int, kind: int) -> None:
        m = build_marker_batch(pid, 0, EndTransactionMarker(kind, 1), timestamp_ms=clock())
        log.append_as_leader(bytearray(m), 0, origin=AppendOrigin.COORDINATOR)

    def data() -> list[tuple[int, bytes | None, bytes | None]]:
        """(offset, key, value) of every data record (control batches left out)."""
        out = []
        for s in log.segments:
            batches, _ = _native.decode_batches(Path(s.log_path).read_bytes())
            for info, recs in batches:
                if not info.is_control:
                    out += [(r.offset, r.key, r.value) for r in recs]
        return out

    def view() -> dict[bytes | None, bytes | None]:
        return {k: v for _, k, v in data()}

    def markers() -> list[tuple[int, int]]:
        return [
            (b.producer_id, b.base_offset)
            for s in log.segments
            for b in s.batch_infos()
            if b.is_control
        ]

    def horizons() -> dict[int, int]:
        return {
            b.base_offset: b.delete_horizon_ms
            for s in log.segments
            for b in s.batch_infos()
            if b.is_control
        }

    def dirty_again() -> None:
        for i in range(30):
            log.append_as_leader(batch([(b"filler-%d" % i, b"f" * 100)]), 0)
        log.roll()
        log.update_high_watermark(log.log_end_offset)

    try:
        log = manager.get_or_create_log(TP)
        txn(1, [(b"k1", b"a1"), (b"k2", b"a2")])  # 0-1, committed
        txn(2, [(b"k1", b"b1")])  # 2, aborted
        end(1, COMMIT)  # 3
        end(2, ABORT)  # 4
        txn(3, [(b"k3", b"c1")])  # 5
        end(3, COMMIT)  # 6
        log.append_as_leader(batch([(b"k2", b"p2")]), 0)  # 7
        txn(2, [(b"k4", b"b2")])  # 8: producer 2's last batch now
        end(2, COMMIT)  # 9
        log.roll()
        log.update_high_watermark(log.log_end_offset)
        assert log.last_stable_offset == 10
        assert log.segments[0].txn_index.entries == [AbortedTxn(2, 2, 4, 5)]

        assert manager.cleaner.clean_once()
        assert view() == {b"k1": b"a1", b"k2": b"p2", b"k3": b"c1", b"k4": b"b2"}
        assert [o for o, _, _ in data()] == [0, 5, 7, 8]  # the aborted batch is gone
        # every marker stays: a batch of each transaction was met in this pass
        assert markers() == [(1, 3), (2, 4), (3, 6), (2, 9)]
        assert log.segments[0].txn_index.entries == [AbortedTxn(2, 2, 4, 5)]
        assert os.path.getsize(log.segments[0].txn_index_path) == 34

        assert set(horizons().values()) == {-1}

        # Later: B's aborted transaction has no batch left. Its segment's age
        # does not count: this clean writes the ABORT's delete horizon and
        # keeps it (a read_committed consumer may still be reading that
        # range); its index entry goes. The commits whose data remains stay
        # as they were.
        clock.advance(5000)
        dirty_again()
        assert manager.cleaner.clean_once()
        assert markers() == [(1, 3), (2, 4), (3, 6), (2, 9)]
        assert horizons() == {3: -1, 4: clock() + 1000, 6: -1, 9: -1}
        assert log.segments[0].txn_index.entries == []
        (abort,) = [
            r
            for s in log.segments
            for info, recs in _native.decode_batches(Path(s.log_path).read_bytes())[0]
            if info.base_offset == 4
            for r in recs
        ]
        assert EndTransactionMarker.from_record(abort.key, abort.value) == EndTransactionMarker(
            ABORT, 1
        )
        # Before the horizon a clean keeps it; past it, a clean drops it.
        clock.advance(500)
        dirty_again()
        assert manager.cleaner.clean_once()
        assert (2, 4) in markers()
        clock.advance(1000)
        dirty_again()
        assert manager.cleaner.clean_once()
        assert markers() == [(1, 3), (3, 6), (2, 9)]
        assert view()[b"k1"] == b"a1"
    finally:
        manager.shutdown()
