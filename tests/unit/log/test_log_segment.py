"""LogSegment on real files: append/read, index intervals, recovery, truncation,
roll conditions, suffix renames and disk errors."""

from __future__ import annotations

import contextlib
import os
import resource
import signal
from collections.abc import Iterator

import pytest
from conftest import build_batch
from support.clock import ManualClock

from pylog import _native
from pylog.errors import KafkaStorageError, LogSegmentOffsetOverflowError
from pylog.log.config import LogConfig
from pylog.log.files import (
    log_file_name,
    offset_from_file_name,
    offset_index_file_name,
    time_index_file_name,
)
from pylog.log.segment import LogSegment

T0 = 1_700_000_000_000


def config(**overrides: object) -> LogConfig:
    props: dict[str, object] = {
        "internal.segment.bytes": 1 << 20,
        "segment.index.bytes": 4096,
        "index.interval.bytes": 1,
    }
    props.update(overrides)
    return LogConfig.from_props(props)


def append(seg: LogSegment, base: int, n: int = 1, ts: int = T0, value: bytes = b"v") -> bytes:
    b = build_batch([value + str(i).encode() for i in range(n)], base_offset=base, timestamp=ts)
    seg.append(base + n - 1, ts, base + n - 1, b)
    return b


@pytest.fixture
def segment(tmp_path: os.PathLike[str]) -> Iterator[LogSegment]:
    seg = LogSegment.open(str(tmp_path), 40, config())
    yield seg
    seg.close()


def test_file_names_are_kafkas(tmp_path: os.PathLike[str]) -> None:
    d = str(tmp_path)
    assert log_file_name(d, 42) == os.path.join(d, "00000000000000000042.log")
    assert offset_index_file_name(d, 0, ".swap") == os.path.join(
        d, "00000000000000000000.index.swap"
    )
    assert time_index_file_name(d, 7).endswith("00000000000000000007.timeindex")
    assert offset_from_file_name("/x/00000000000000000042.log.deleted") == 42
    with pytest.raises(ValueError):
        offset_from_file_name("leader-epoch-checkpoint")


def test_append_then_read_each_offset(segment: LogSegment) -> None:
    b1 = append(segment, 40, 3)
    b2 = append(segment, 43, 2)
    assert segment.size == len(b1) + len(b2)
    with open(segment.log_path, "rb") as f:
        assert f.read() == b1 + b2
    for offset in (40, 41, 42):
        got = segment.read(offset, 1 << 20)
        assert got is not None
        assert got.fetch_offset_metadata.relative_position_in_segment == 0
        assert got.fetch_offset_metadata.segment_base_offset == 40
        assert got.records.read_bytes() == b1 + b2
    got = segment.read(44, 1 << 20)
    assert got is not None and got.records.read_bytes() == b2
    assert segment.read(45, 1 << 20) is None
    assert segment.read_next_offset() == 45


def test_read_bounds_max_size_and_min_one_message(segment: LogSegment) -> None:
    b1 = append(segment, 40, 3)
    append(segment, 43, 2)
    small = segment.read(40, 10)
    assert small is not None and small.records.size == 10 and small.first_entry_incomplete
    whole = segment.read(40, 10, min_one_message=True)
    assert whole is not None and whole.records.read_bytes() == b1
    assert not whole.first_entry_incomplete
    bounded = segment.read(40, 1 << 20, max_position=len(b1))
    assert bounded is not None and bounded.records.read_bytes() == b1
    at_bound = segment.read(43, 1 << 20, max_position=len(b1))
    assert at_bound is not None and at_bound.records.size == 0
    zero = segment.read(40, 0)
    assert zero is not None and zero.records.size == 0


def test_index_entries_every_interval(tmp_path: os.PathLike[str]) -> None:
    seg = LogSegment.open(str(tmp_path), 0, config(**{"index.interval.bytes": 200}))
    sizes = []
    for i in range(20):
        sizes.append(len(append(seg, i * 2, 2, ts=T0 + i, value=b"x" * 40)))
    # An entry lands once more than 200 bytes went by since the last one.
    assert 0 < seg.offset_index.entries < 20
    for n in range(seg.offset_index.entries):
        offset, position = seg.offset_index.entry(n)
        assert position == sum(sizes[: offset // 2])
    for offset in range(40):
        got = seg.read(offset, 1)
        assert got is not None
        assert got.fetch_offset_metadata.relative_position_in_segment == sum(sizes[: offset // 2])
    seg.close()


def test_index_entries_per_batch_boundary(tmp_path: os.PathLike[str]) -> None:
    seg = LogSegment.open(str(tmp_path), 0, config(**{"index.interval.bytes": 1}))
    parts = [build_batch([b"a", b"b"], base_offset=i * 2, timestamp=T0 + i) for i in range(4)]
    records = b"".join(parts)
    infos, _ = _scan(tmp_path, records)
    seg.append(7, T0 + 3, 7, records, infos)
    # Each batch after the first starts more than 1 byte after the last entry.
    assert seg.offset_index.entries == 3
    assert seg.offset_index.entry(0) == (3, len(parts[0]))
    got = seg.read(6, 1 << 20)
    assert got is not None and got.records.read_bytes() == parts[3]
    seg.close()


def _scan(tmp_path: os.PathLike[str], records: bytes) -> tuple[list[_native.BatchInfo], int]:
    p = os.path.join(str(tmp_path), "scratch")
    with open(p, "wb") as f:
        f.write(records)
    return _native.read_batch_infos(p, 0, 1000, None)


def test_recover_truncates_torn_tail_and_rebuilds_indexes(tmp_path: os.PathLike[str]) -> None:
    d = str(tmp_path)
    seg = LogSegment.open(d, 0, config(**{"index.interval.bytes": 1}))
    total = 0
    for i in range(5):
        total += len(append(seg, i * 3, 3, ts=T0 + i * 10))
    seg.close()
    with open(log_file_name(d, 0), "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x0f\x00\x00\x01\x00garbage")
    os.unlink(offset_index_file_name(d, 0))
    seg = LogSegment.open(d, 0, config(), create=False)
    assert seg.size == total + 19
    assert seg.recover() == 19
    assert seg.size == total == os.path.getsize(log_file_name(d, 0))
    assert seg.offset_index.entries >= 1
    assert seg.read_next_offset() == 15
    assert seg.max_timestamp_so_far == T0 + 40
    assert seg.find_offset_by_timestamp(T0 + 15) == (T0 + 20, 6)
    seg.close()


def test_recover_stops_at_corrupt_crc(tmp_path: os.PathLike[str]) -> None:
    d = str(tmp_path)
    seg = LogSegment.open(d, 0, config())
    good = len(append(seg, 0, 2)) + len(append(seg, 2, 2))
    append(seg, 4, 2)
    append(seg, 6, 2)
    seg.close()
    with open(log_file_name(d, 0), "r+b") as f:
        f.seek(good + 70)
        byte = f.read(1)
        f.seek(good + 70)
        f.write(bytes([byte[0] ^ 0xFF]))
    seg = LogSegment.open(d, 0, config(), create=False)
    assert seg.recover() > 0
    assert seg.size == good
    assert seg.read_next_offset() == 4
    seg.close()


def test_recover_feeds_producer_state_and_epochs(tmp_path: os.PathLike[str]) -> None:
    d = str(tmp_path)
    seg = LogSegment.open(d, 0, config())
    b1 = build_batch([b"a"], base_offset=0, partition_leader_epoch=3)
    b2 = build_batch(
        [b"b", b"c"],
        base_offset=1,
        partition_leader_epoch=5,
        producer_id=9,
        producer_epoch=1,
        base_sequence=0,
    )
    seg.append(0, T0, 0, b1)
    seg.append(2, T0, 2, b2)

    class Epochs:
        def __init__(self) -> None:
            self.entries: list[tuple[int, int]] = []

        @property
        def latest_epoch(self) -> int | None:
            return self.entries[-1][0] if self.entries else None

        def assign(self, epoch: int, start_offset: int) -> None:
            self.entries.append((epoch, start_offset))

    class Producers:
        def __init__(self) -> None:
            self.batches: list[tuple[int, int, int]] = []

        def update(self, batch: _native.BatchInfo, append_time_ms: int) -> None:
            self.batches.append((batch.producer_id, batch.base_sequence, batch.last_offset))

    epochs, producers = Epochs(), Producers()
    assert seg.recover(producers, epochs) == 0
    assert epochs.entries == [(3, 0), (5, 1)]
    assert producers.batches == [(9, 0, 2)]
    seg.close()


def test_truncate_to(segment: LogSegment) -> None:
    b1 = append(segment, 40, 3)
    append(segment, 43, 2, ts=T0 + 5)
    assert segment.max_timestamp_so_far == T0 + 5
    before = segment.size
    assert segment.truncate_to(43) == before - len(b1)
    assert segment.size == len(b1)
    assert segment.read_next_offset() == 43
    assert segment.max_timestamp_so_far == T0
    # Truncating into a batch removes the whole batch.
    segment.truncate_to(41)
    assert segment.size == 0
    assert segment.read_next_offset() == 40
    assert segment.truncate_to(40) == 0


def test_reopen_keeps_contents_and_timestamps(tmp_path: os.PathLike[str]) -> None:
    d = str(tmp_path)
    seg = LogSegment.open(d, 100, config())
    append(seg, 100, 4, ts=T0 + 7)
    append(seg, 104, 1, ts=T0 + 3)
    size = seg.size
    seg.close()
    assert os.path.getsize(offset_index_file_name(d, 100)) == seg_entries_bytes(d, 100)
    seg = LogSegment.open(d, 100, config(), create=False)
    seg.sanity_check(time_index_exists=True)
    assert seg.size == size
    assert seg.read_next_offset() == 105
    assert seg.largest_timestamp == T0 + 7
    seg.close()


def seg_entries_bytes(d: str, base: int) -> int:
    idx = _native.OffsetIndex(offset_index_file_name(d, base), base, 4096)
    try:
        return int(idx.entries * 8)
    finally:
        idx.close()


def test_open_missing_without_create(tmp_path: os.PathLike[str]) -> None:
    with pytest.raises(FileNotFoundError):
        LogSegment.open(str(tmp_path), 5, config(), create=False)


def test_sanity_check_missing_index(tmp_path: os.PathLike[str]) -> None:
    d = str(tmp_path)
    seg = LogSegment.open(d, 0, config())
    append(seg, 0)
    seg.close()
    os.unlink(offset_index_file_name(d, 0))
    seg = LogSegment.open(d, 0, config(), create=False)
    with pytest.raises(FileNotFoundError):
        seg.sanity_check(time_index_exists=True)
    seg.close()


def test_should_roll_on_size_time_and_offset_overflow(tmp_path: os.PathLike[str]) -> None:
    clock = ManualClock(T0)
    cfg = config(**{"segment.ms": 1000})
    seg = LogSegment.open(str(tmp_path), 0, cfg, clock=clock)

    def roll(size: int = 10, ts: int = T0, offset: int = 1) -> bool:
        return seg.should_roll(
            max_segment_ms=1000,
            max_segment_bytes=1000,
            max_timestamp_in_messages=ts,
            max_offset_in_messages=offset,
            messages_size=size,
            now_ms=clock(),
        )

    assert not roll()
    clock.advance(5000)
    assert not roll()  # an empty segment never rolls on time
    append(seg, 0, 1, ts=T0)
    assert roll(ts=T0 + 1001)  # record time, not wall time, once batches carry it
    assert not roll(ts=T0 + 999)
    assert roll(size=1000 - seg.size + 1)
    assert roll(offset=2**31)
    with pytest.raises(LogSegmentOffsetOverflowError):
        seg.append(2**31, T0, 2**31, build_batch([b"x"], base_offset=2**31))
    seg.close()


def test_roll_time_uses_wall_clock_without_timestamps(tmp_path: os.PathLike[str]) -> None:
    clock = ManualClock(T0)
    seg = LogSegment.open(str(tmp_path), 0, config(), clock=clock)
    b = build_batch([b"x"], timestamp=-1)
    seg.append(0, -1, 0, b)
    kw = dict(max_segment_bytes=1 << 20, max_offset_in_messages=1, messages_size=1)
    assert not seg.should_roll(max_segment_ms=1000, max_timestamp_in_messages=-1, now_ms=T0, **kw)
    assert seg.should_roll(
        max_segment_ms=1000, max_timestamp_in_messages=-1, now_ms=T0 + 1001, **kw
    )
    seg.close()


def test_change_suffixes_and_delete(tmp_path: os.PathLike[str]) -> None:
    d = str(tmp_path)
    seg = LogSegment.open(d, 7, config())
    append(seg, 7, 2)
    _ = seg.offset_index, seg.time_index
    seg.change_file_suffixes("", ".deleted")
    assert seg.has_suffix(".deleted")
    assert sorted(os.listdir(d)) == [
        "00000000000000000007.index.deleted",
        "00000000000000000007.log.deleted",
        "00000000000000000007.timeindex.deleted",
    ]
    # Reads still work through the open descriptor.
    got = seg.read(7, 1 << 20)
    assert got is not None and got.records.size == seg.size
    seg.delete_if_exists()
    assert os.listdir(d) == []


def test_preallocate_reserves_and_close_trims(tmp_path: os.PathLike[str]) -> None:
    d = str(tmp_path)
    seg = LogSegment.open(d, 0, config(), preallocate=True)
    assert os.path.getsize(seg.log_path) == 1 << 20
    assert seg.size == 0
    b = append(seg, 0, 2)
    seg.close()
    assert os.path.getsize(log_file_name(d, 0)) == len(b)


@contextlib.contextmanager
def file_size_limit(n: int) -> Iterator[None]:
    """Cap the size files may grow to (RLIMIT_FSIZE) inside the block: writes
    past it fail with EFBIG. Restored before the block ends, not in a fixture
    teardown, because pytest writes the test's report (possibly to a file) first."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    old_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (n, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, old_handler)


def test_failed_write_leaves_segment_unchanged(
    tmp_path: os.PathLike[str],
) -> None:
    d = str(tmp_path)
    seg = LogSegment.open(d, 0, config())
    _ = seg.offset_index, seg.time_index  # mapped before the limit applies
    first = append(seg, 0, 2)
    with file_size_limit(len(first) + 30), pytest.raises(KafkaStorageError) as e:
        append(seg, 2, 50)
    assert e.value.errno is not None
    assert seg.size == len(first)
    assert os.path.getsize(seg.log_path) == len(first)
    assert seg.read_next_offset() == 2
    seg.close()
