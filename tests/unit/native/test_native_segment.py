"""Segment scans of ``pylog._native`` on real ``.log`` files: recovery (and the
indexes it rebuilds), torn / corrupt / garbage tails, verification scans,
header walks, and the offset and timestamp searches a read starts with."""

from __future__ import annotations

import os
import random
import struct
from dataclasses import dataclass
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from pylog import _native
from pylog.errors import IndexOffsetOverflowError, KafkaStorageError

BASE = 5000
TS0 = 1_700_000_000_000
INTERVAL = 4096
# segment.index.bytes at Kafka's default, and a batch size without a limit
# (the most a batch's i32 length field allows).
INDEX_BYTES = 10 * 1024 * 1024
NO_LIMIT = 2**31 - 1


@dataclass
class Written:
    position: int
    size: int
    base_offset: int
    last_offset: int
    max_timestamp: int


def make_batch(
    base_offset: int,
    count: int,
    *,
    value_size: int = 100,
    timestamps: list[int] | None = None,
    epoch: int = 0,
    producer_id: int = -1,
    compression: int = 0,
) -> bytes:
    ts = timestamps or [TS0 + 10 * (base_offset + i) for i in range(count)]
    records = [
        (f"k{base_offset + i}".encode(), bytes([65 + i % 26]) * value_size, [], ts[i])
        for i in range(count)
    ]
    return _native.build_batch(
        records,
        base_offset=base_offset,
        partition_leader_epoch=epoch,
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=base_offset if producer_id >= 0 else -1,
        compression=compression,
    )


def header(batch: bytes) -> tuple[int, int, int]:
    """(base offset, last offset, max timestamp) from a v2 header."""
    base = struct.unpack_from(">q", batch, 0)[0]
    delta = struct.unpack_from(">i", batch, 23)[0]
    return base, base + delta, struct.unpack_from(">q", batch, 35)[0]


def sample_batches() -> list[bytes]:
    """~120 batches of varied sizes and codecs; epoch 3 then 4; a producer on
    some; batch 40's timestamps jump ahead (max timestamp not at the end)."""
    rng = random.Random(7)
    out = []
    offset = BASE
    for b in range(120):
        count = rng.choice([1, 2, 5, 20])
        ts = [TS0 + 10 * (offset + i) for i in range(count)]
        if b == 40:
            ts[0] = TS0 + 10_000_000
        out.append(
            make_batch(
                offset,
                count,
                value_size=rng.choice([10, 200, 900]),
                timestamps=ts,
                epoch=3 if b < 70 else 4,
                producer_id=42 if b % 9 == 0 else -1,
                compression=[0, 0, 1, 3, 4][b % 5],
            )
        )
        offset += count
    return out


def write_segment(
    directory: Path, batches: list[bytes], base: int = BASE, interval: int = INTERVAL
) -> tuple[Path, list[Written]]:
    """Append ``batches`` to a fresh segment the way Kafka's LogSegment.append
    does, maintaining its indexes as it goes, then close it cleanly."""
    stem = directory / f"{base:020d}"
    log = stem.with_suffix(".log")
    oi = _native.OffsetIndex(str(stem.with_suffix(".index")), base, INDEX_BYTES)
    ti = _native.TimeIndex(str(stem.with_suffix(".timeindex")), base, INDEX_BYTES)
    written = []
    position = since = 0
    max_ts, offset_of_max = -1, -1
    with open(log, "wb") as f:
        for batch in batches:
            first, last, batch_max = header(batch)
            if batch_max > max_ts:
                max_ts, offset_of_max = batch_max, last
            if since > interval:
                oi.append(last, position)
                ti.maybe_append(max_ts, offset_of_max)
                since = 0
            f.write(batch)
            written.append(Written(position, len(batch), first, last, batch_max))
            position += len(batch)
            since += len(batch)
    ti.maybe_append(max_ts, offset_of_max, skip_full_check=True)
    oi.close()
    ti.close()
    return log, written


def fresh_indexes(
    directory: Path, base: int = BASE
) -> tuple[_native.OffsetIndex, _native.TimeIndex]:
    directory.mkdir(exist_ok=True)
    return (
        _native.OffsetIndex(str(directory / f"{base:020d}.index"), base, INDEX_BYTES),
        _native.TimeIndex(str(directory / f"{base:020d}.timeindex"), base, INDEX_BYTES),
    )


def recover(log: Path, directory: Path, interval: int = INTERVAL) -> _native.ScanResult:
    oi, ti = fresh_indexes(directory)
    try:
        return _native.recover_segment(
            str(log), oi, ti, index_interval_bytes=interval, max_batch_size=NO_LIMIT
        )
    finally:
        oi.close()
        ti.close()


@pytest.fixture
def segment(tmp_path: Path) -> tuple[Path, list[Written]]:
    return write_segment(tmp_path, sample_batches())


def test_recovery_rebuilds_the_indexes_written_while_appending(
    tmp_path: Path, segment: tuple[Path, list[Written]]
) -> None:
    log, written = segment
    result = recover(log, tmp_path / "rebuilt")
    assert result.error is None and result.error_position is None
    assert result.valid_bytes == os.path.getsize(log)
    assert result.batches == len(written)
    assert result.last_offset == written[-1].last_offset
    assert result.max_timestamp == TS0 + 10_000_000
    assert result.offset_of_max_timestamp == written[40].last_offset
    stem = f"{BASE:020d}"
    for suffix in (".index", ".timeindex"):
        original = (tmp_path / (stem + suffix)).read_bytes()
        rebuilt = (tmp_path / "rebuilt" / (stem + suffix)).read_bytes()
        assert len(original) > 0
        assert rebuilt == original, suffix


def test_recovery_reports_producer_batches_and_epochs(
    tmp_path: Path, segment: tuple[Path, list[Written]]
) -> None:
    log, written = segment
    result = recover(log, tmp_path / "r")
    assert result.epochs == [(3, BASE), (4, written[70].base_offset)]
    producers = result.producer_batches
    assert [b.base_offset for b in producers] == [w.base_offset for w in written[::9]]
    first = producers[1]
    assert (first.producer_id, first.producer_epoch) == (42, 0)
    assert first.base_sequence == written[9].base_offset
    assert first.position == written[9].position
    assert first.size == written[9].size


@pytest.mark.parametrize("where", ["mid-batch", "mid-header", "one-byte-short", "after-length"])
def test_recovery_of_a_segment_cut_mid_batch(
    tmp_path: Path, segment: tuple[Path, list[Written]], where: str
) -> None:
    log, written = segment
    victim = written[77]
    cut = {
        "mid-batch": victim.position + victim.size // 2,
        "mid-header": victim.position + 30,
        "one-byte-short": victim.position + victim.size - 1,
        "after-length": victim.position + 12,
    }[where]
    with open(log, "r+b") as f:
        f.truncate(cut)
    result = recover(log, tmp_path / "r")
    assert result.valid_bytes == victim.position
    assert result.batches == 77
    assert result.error_position == victim.position
    assert result.error
    assert result.last_offset == written[76].last_offset
    oi = _native.OffsetIndex(str(tmp_path / "r" / f"{BASE:020d}.index"), BASE, INDEX_BYTES)
    assert oi.last_offset <= written[76].last_offset
    oi.sanity_check()


@pytest.mark.parametrize("at", ["records", "attributes", "crc", "magic", "length"])
def test_recovery_stops_at_a_flipped_byte(
    tmp_path: Path, segment: tuple[Path, list[Written]], at: str
) -> None:
    log, written = segment
    victim = written[50]
    where = (
        victim.position
        + {
            "records": victim.size - 5,
            "attributes": 22,
            "crc": 18,
            "magic": 16,
            "length": 9,
        }[at]
    )
    data = bytearray(log.read_bytes())
    data[where] ^= 0x24
    log.write_bytes(bytes(data))
    result = recover(log, tmp_path / "r")
    assert result.valid_bytes == victim.position
    assert result.error_position == victim.position
    assert result.batches == 50


@pytest.mark.parametrize(
    "garbage",
    [b"\x00" * 8192, b"\xff" * 17, bytes(random.Random(1).randbytes(5000)), b"x"],
    ids=["zeros", "ones", "random", "one-byte"],
)
def test_recovery_with_garbage_appended(
    tmp_path: Path, segment: tuple[Path, list[Written]], garbage: bytes
) -> None:
    log, written = segment
    size = os.path.getsize(log)
    with open(log, "ab") as f:
        f.write(garbage)
    result = recover(log, tmp_path / "r")
    assert result.valid_bytes == size
    assert result.batches == len(written)
    assert result.error_position == size
    assert result.error


def test_recovery_stops_where_offsets_go_back(tmp_path: Path) -> None:
    batches = [make_batch(BASE, 5), make_batch(BASE + 5, 5), make_batch(BASE + 2, 5)]
    log, written = write_segment(tmp_path, batches[:2])
    with open(log, "ab") as f:
        f.write(batches[2])
    result = recover(log, tmp_path / "r")
    assert (result.batches, result.valid_bytes) == (2, written[1].position + written[1].size)
    assert "offset" in (result.error or "")


def test_recovery_of_offsets_beyond_the_segment_range_raises(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_bytes(make_batch(BASE + 2**31, 1))
    oi, ti = fresh_indexes(tmp_path / "r")
    with pytest.raises(IndexOffsetOverflowError):
        _native.recover_segment(
            str(log), oi, ti, index_interval_bytes=INTERVAL, max_batch_size=NO_LIMIT
        )


def test_recovery_of_an_empty_segment_and_a_missing_one(tmp_path: Path) -> None:
    log = tmp_path / "empty.log"
    log.write_bytes(b"")
    result = recover(log, tmp_path / "r")
    assert (result.valid_bytes, result.batches, result.last_offset, result.error) == (
        0,
        0,
        -1,
        None,
    )
    assert result.producer_batches == [] and result.epochs == []
    oi, ti = fresh_indexes(tmp_path / "r2")
    with pytest.raises(KafkaStorageError):
        _native.recover_segment(
            str(tmp_path / "missing.log"),
            oi,
            ti,
            index_interval_bytes=INTERVAL,
            max_batch_size=NO_LIMIT,
        )


def test_recovery_of_batches_written_by_kafka_python(tmp_path: Path) -> None:
    """kafka-python is an independent writer of the v2 format (it writes base
    offset 0; the base offset is outside the CRC, so it is patched in place)."""
    batches = []
    offset = BASE
    for n, codec in enumerate([0, 1, 2, 3, 4] * 4):
        builder = DefaultRecordBatchBuilder(
            magic=2,
            compression_type=codec,
            is_transactional=False,
            producer_id=-1,
            producer_epoch=-1,
            base_sequence=-1,
            batch_size=1 << 20,
        )
        for i in range(n + 1):
            builder.append(i, timestamp=TS0 + offset + i, key=None, value=b"v" * 300, headers=[])
        data = bytearray(builder.build())
        data[0:8] = struct.pack(">q", offset)
        batches.append(bytes(data))
        offset += n + 1
    log, _ = write_segment(tmp_path, batches, interval=1024)
    result = recover(log, tmp_path / "r", interval=1024)
    assert result.error is None
    assert (result.batches, result.last_offset) == (20, offset - 1)
    for suffix in (".index", ".timeindex"):
        stem = f"{BASE:020d}"
        assert (tmp_path / "r" / (stem + suffix)).read_bytes() == (
            tmp_path / (stem + suffix)
        ).read_bytes()
    assert _native.find_offset_by_timestamp(str(log), TS0 + BASE + 17, 0, os.path.getsize(log)) == (
        TS0 + BASE + 17,
        BASE + 17,
    )


def test_recovery_of_legacy_messages(tmp_path: Path) -> None:
    data = b""
    for magic, first in ((0, BASE), (1, BASE + 3)):
        builder = LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=1 << 20)
        for i in range(3):
            builder.append(first + i, timestamp=TS0 if magic else None, key=None, value=b"m")
        data += bytes(builder.build())
    log = tmp_path / f"{BASE:020d}.log"
    log.write_bytes(data + b"\x00" * 20)
    result = recover(log, tmp_path / "r")
    assert (result.batches, result.valid_bytes, result.last_offset) == (6, len(data), BASE + 5)
    assert result.max_timestamp == TS0
    infos, nxt = _native.read_batch_infos(str(log))
    assert [i.magic for i in infos] == [0, 0, 0, 1, 1, 1]
    assert nxt == len(data)


def test_scan_segment_validates_ranges(segment: tuple[Path, list[Written]]) -> None:
    log, written = segment
    full = _native.scan_segment(str(log), deep=True, max_batch_size=NO_LIMIT)
    assert (full.batches, full.valid_bytes, full.error) == (
        len(written),
        os.path.getsize(log),
        None,
    )
    start, end = written[10].position, written[20].position
    part = _native.scan_segment(
        str(log), start_position=start, end_position=end, max_batch_size=NO_LIMIT
    )
    assert (part.batches, part.valid_bytes, part.last_offset) == (
        10,
        end - start,
        written[19].last_offset,
    )
    torn = _native.scan_segment(
        str(log), start_position=start, end_position=end + 3, max_batch_size=NO_LIMIT
    )
    assert (torn.batches, torn.error_position) == (10, end)
    too_large = _native.scan_segment(str(log), max_batch_size=64)
    assert too_large.batches == 0 and too_large.error_position == 0


def test_read_batch_infos_in_chunks(segment: tuple[Path, list[Written]]) -> None:
    log, written = segment
    with open(log, "r+b") as f:
        f.truncate(written[-1].position + 20)  # torn last batch
    position, seen = 0, []
    while True:
        infos, nxt = _native.read_batch_infos(str(log), position, 16)
        if not infos:
            assert nxt == position
            break
        seen.extend(infos)
        position = nxt
    assert len(seen) == len(written) - 1
    for info, w in zip(seen, written[:-1], strict=True):
        assert (info.position, info.size, info.base_offset, info.last_offset) == (
            w.position,
            w.size,
            w.base_offset,
            w.last_offset,
        )
        assert info.max_timestamp == w.max_timestamp
        assert info.magic == 2
    infos, nxt = _native.read_batch_infos(str(log), 0, 1000, end_position=written[5].position)
    assert (len(infos), nxt) == (5, written[5].position)


def test_translate_offset_through_the_index(
    tmp_path: Path, segment: tuple[Path, list[Written]]
) -> None:
    """Kafka's LogSegment.translateOffset: index floor, then a header walk."""
    log, written = segment
    size = os.path.getsize(log)
    oi = _native.OffsetIndex(str(tmp_path / f"{BASE:020d}.index"), BASE, 0, writable=False)
    for target in range(BASE, written[-1].last_offset + 1):
        _, start = oi.lookup(target)
        found = _native.translate_offset(str(log), target, start, size)
        w = next(w for w in written if w.last_offset >= target)
        assert found == (w.last_offset, w.position, w.size)
    assert _native.translate_offset(str(log), written[-1].last_offset + 1, 0, size) is None
    # The end position bounds the walk.
    assert (
        _native.translate_offset(str(log), written[9].last_offset, 0, written[9].position) is None
    )
    assert _native.translate_offset(str(log), BASE, size, size) is None


def test_find_offset_by_timestamp_through_the_time_index(
    tmp_path: Path, segment: tuple[Path, list[Written]]
) -> None:
    """Kafka's LogSegment.findOffsetByTimestamp: time index floor → offset →
    offset index → position, then the first record at or after the time."""
    log, written = segment
    size = os.path.getsize(log)
    stem = tmp_path / f"{BASE:020d}"
    ti = _native.TimeIndex(str(stem.with_suffix(".timeindex")), BASE, 0, writable=False)
    oi = _native.OffsetIndex(str(stem.with_suffix(".index")), BASE, 0, writable=False)
    last = written[-1].last_offset
    jump = written[40].base_offset  # its first record is stamped far ahead

    def expected(t: int) -> tuple[int, int] | None:
        for o in range(BASE, last + 1):
            ts = TS0 + 10_000_000 if o == jump else TS0 + 10 * o
            if ts >= t:
                return ts, o
        return None

    for t in [0, TS0 + 10 * BASE, TS0 + 10 * (BASE + 3) + 1, TS0 + 10 * jump - 5]:
        _, offset = ti.lookup(t)
        _, position = oi.lookup(offset)
        assert _native.find_offset_by_timestamp(str(log), t, position, size) == expected(t)
    assert _native.find_offset_by_timestamp(str(log), TS0 + 10_000_001, 0, size) is None
    # After the jump, later records are found from a later start.
    after = written[41].position
    t = TS0 + 10 * (written[60].base_offset)
    assert _native.find_offset_by_timestamp(str(log), t, after, size) == (
        t,
        written[60].base_offset,
    )
