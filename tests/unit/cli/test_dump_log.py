"""`pylog dump-log` on real segment files, including ones written by another
implementation of Kafka's format (kafka-python's record builders)."""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from pylog import _native

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def kafka_python_batch(
    base_offset: int, values: list[bytes], codec: int = 0, producer_id: int = -1
) -> bytes:
    """One v2 batch written by kafka-python, moved to ``base_offset``.

    The base offset is outside the CRC32C's range, so patching it keeps the batch valid.
    """
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=False,
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=base_offset if producer_id >= 0 else -1,
        batch_size=1 << 24,
    )
    for i, value in enumerate(values):
        key = f"key-{base_offset + i}".encode()
        builder.append(
            i,
            timestamp=1_700_000_000_000 + base_offset + i,
            key=key,
            value=value,
            headers=[("h", b"v")],
        )
    data = bytearray(builder.build())
    data[0:8] = struct.pack(">q", base_offset)
    return bytes(data)


def kafka_python_legacy(base_offset: int, values: list[bytes], magic: int) -> bytes:
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=1 << 24)
    for i, value in enumerate(values):
        builder.append(
            base_offset + i, timestamp=1_700_000_000_000 if magic else None, key=None, value=value
        )
    return bytes(builder.build())


def run_dump(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pylog.cli", "dump-log", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def segment(tmp_path: Path) -> Path:
    """A segment of kafka-python batches, one per codec, 3 records each."""
    path = tmp_path / "00000000000000000000.log"
    offset = 0
    with open(path, "wb") as f:
        for codec in CODECS.values():
            # repetitive enough that kafka-python keeps the codec (it stores a
            # batch uncompressed when compression would not shrink it)
            values = [f"value-{offset + i}-{codec}-".encode() * 20 for i in range(3)]
            f.write(kafka_python_batch(offset, values, codec))
            offset += 3
    return path


def test_dumps_batches_written_by_kafka_python(segment: Path) -> None:
    result = run_dump("--files", str(segment))
    assert result.returncode == 0, result.stderr
    lines = [ln for ln in result.stdout.splitlines() if ln.startswith("baseOffset:")]
    assert len(lines) == len(CODECS)
    for n, (name, line) in enumerate(zip(CODECS, lines, strict=True)):
        assert f"baseOffset: {3 * n} lastOffset: {3 * n + 2} count: 3" in line
        assert f"compresscodec: {name}" in line
        assert "isvalid: true" in line
    assert "Log starting offset: 0" in result.stdout


def test_print_data_log_shows_every_record(segment: Path) -> None:
    result = run_dump("--files", str(segment), "--print-data-log")
    assert result.returncode == 0, result.stderr
    records = [ln for ln in result.stdout.splitlines() if ln.startswith("| offset:")]
    assert len(records) == 3 * len(CODECS)
    for offset, line in enumerate(records):
        codec = offset // 3
        assert line.startswith(f"| offset: {offset} CreateTime: {1_700_000_000_000 + offset} ")
        assert f"key: key-{offset}" in line
        assert f"payload: value-{offset}-{codec}-value-{offset}-{codec}-" in line
        assert "headerKeys: [h]" in line


def test_legacy_message_sets_are_dumped(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(
        kafka_python_legacy(0, [b"m0-a", b"m0-b"], magic=0)
        + kafka_python_legacy(2, [b"m1-a"], magic=1)
    )
    result = run_dump("--files", str(path), "--print-data-log")
    assert result.returncode == 0, result.stderr
    assert "magic: 0" in result.stdout and "magic: 1" in result.stdout
    assert "payload: m0-b" in result.stdout and "payload: m1-a" in result.stdout


def test_corrupt_batch_names_file_position_and_reason(segment: Path) -> None:
    data = bytearray(segment.read_bytes())
    first_size = 12 + struct.unpack(">i", data[8:12])[0]
    second_size = 12 + struct.unpack(">i", data[first_size + 8 : first_size + 12])[0]
    bad_position = first_size + second_size
    data[bad_position + 70] ^= 0xFF  # inside the third batch's checksummed bytes
    segment.write_bytes(bytes(data))

    result = run_dump("--files", str(segment))
    assert result.returncode != 0
    assert str(segment) in result.stderr
    assert f"position {bad_position}" in result.stderr
    assert "CRC" in result.stderr
    # the valid batches before it are still printed
    assert result.stdout.count("baseOffset:") == 2


def test_truncated_file_fails_naming_position(segment: Path) -> None:
    data = segment.read_bytes()
    segment.write_bytes(data[:-5])
    result = run_dump("--files", str(segment))
    assert result.returncode != 0
    assert str(segment) in result.stderr


def test_missing_file_fails(tmp_path: Path) -> None:
    result = run_dump("--files", str(tmp_path / "00000000000000000000.log"))
    assert result.returncode != 0
    assert "00000000000000000000.log" in result.stderr


def _write_indexes(segment: Path) -> tuple[Path, Path]:
    """Index every batch of ``segment`` with the native index classes."""
    index_path = segment.with_suffix(".index")
    time_path = segment.with_suffix(".timeindex")
    oi = _native.OffsetIndex(str(index_path), 0, max_index_size=4096)
    ti = _native.TimeIndex(str(time_path), 0, max_index_size=4096)
    infos, _ = _native.read_batch_infos(str(segment), 0, 100)
    for info in infos:
        oi.append(info.last_offset, info.position)
        ti.maybe_append(info.max_timestamp, info.last_offset)
    oi.close()
    ti.close()
    return index_path, time_path


def test_dump_and_verify_indexes(segment: Path) -> None:
    index_path, time_path = _write_indexes(segment)
    result = run_dump("--files", str(index_path), "--files", str(time_path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("offset: ") >= 2 * len(CODECS)
    assert "offset: 2 position: 0" in result.stdout

    verify = run_dump("--files", str(index_path), "--verify-index-only")
    assert verify.returncode == 0, verify.stderr
    assert "position:" not in verify.stdout


def test_verify_index_reports_mismatch(segment: Path) -> None:
    index_path, _ = _write_indexes(segment)
    raw = bytearray(index_path.read_bytes())
    # point the second entry at the first batch's position's neighbour: a
    # position where no batch starts
    raw[12:16] = struct.pack(">I", 7)
    index_path.write_bytes(bytes(raw))
    result = run_dump("--files", str(index_path), "--verify-index-only")
    assert result.returncode != 0
    assert "Mismatches in" in result.stdout
    assert str(index_path) in result.stderr


def test_large_file_shows_progress(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.log"
    value = os.urandom(1 << 20)
    with open(path, "wb") as f:
        for n in range(70):
            f.write(kafka_python_batch(n, [value]))
    result = run_dump("--files", str(path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("baseOffset:") == 70
    assert "00000000000000000000.log" in result.stderr  # the progress bar's label


def test_configs_lists_kafka_keys_and_defaults() -> None:
    topic = subprocess.run(
        [sys.executable, "-m", "pylog.cli", "configs", "keys", "--markdown"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert topic.returncode == 0, topic.stderr
    assert "| segment.bytes | int | 1073741824 |" in topic.stdout
    assert "| retention.ms | long | 604800000 |" in topic.stdout
    broker = subprocess.run(
        [sys.executable, "-m", "pylog.cli", "configs", "keys", "--broker"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert broker.returncode == 0, broker.stderr
    assert "log.retention.check.interval.ms" in broker.stdout


def test_truncation_while_dumping_is_an_error_never_sigbus(tmp_path: Path) -> None:
    """A live broker may truncate a segment while dump-log reads it (a follower
    truncating to its leader, the cleaner, retention). The tool reads with
    pread, so a file cut under it ends the dump with an error naming where it
    ends now (or, cut after the read, a whole dump) — never SIGBUS, which a
    memory-mapped scan of the same file delivers (pylog before issue 21 did)."""
    path = tmp_path / "00000000000000000000.log"
    one = bytearray(_native.build_batch([(None, os.urandom(256 << 10), [], 1_700_000_000_000)]))
    count = 256  # 64 MiB: the verification scan is still running when the cuts come

    def write() -> None:
        with open(path, "wb") as f:
            for n in range(count):
                one[0:8] = struct.pack(">q", n)  # outside the CRC's range
                f.write(one)

    # The cuts land at different points of the read: before the headers are
    # walked, during the scan, after it (when exactly varies run to run).
    for delay in (0.0, 0.005, 0.01, 0.02, 0.05):
        write()
        proc = subprocess.Popen(
            [sys.executable, "-m", "pylog.cli", "dump-log", "--files", str(path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("Dumping")  # it has started reading
        time.sleep(delay)
        # At batch boundaries, then inside a batch (a torn tail).
        for batches, extra in ((count // 2, 0), (count // 4, 0), (3, 7)):
            os.truncate(path, batches * len(one) + extra)
            time.sleep(0.005)
        # Read the rest through the same buffered reader: communicate()
        # reads the pipe itself and would lose lines readline() buffered.
        out = proc.stdout.read()
        err = proc.stderr.read() if proc.stderr is not None else ""
        proc.wait(timeout=120)
        assert proc.returncode != -signal.SIGBUS, f"SIGBUS at delay {delay}"
        assert proc.returncode in (0, 1), (delay, proc.returncode, err)
        printed = [
            int(line.split()[1]) for line in out.splitlines() if line.startswith("baseOffset:")
        ]
        # What is shown is what was there: the batches in order, from the first.
        assert printed == list(range(len(printed))), delay
        if proc.returncode == 1:
            assert "Error:" in err and "position" in err, err
        else:  # read whole before a cut, or after one at a batch boundary
            assert len(printed) in (count, count // 2, count // 4), (delay, err)


def test_transactions_control_records_txnindex_and_snapshot(tmp_path: Path) -> None:
    """A log written by the storage layer with one committed and one aborted
    transaction: the markers print as Kafka's tool prints them, the batches
    carry the transactional flag, the .txnindex and .snapshot decode."""
    from pylog.log.end_transaction_marker import (
        ABORT,
        COMMIT,
        EndTransactionMarker,
        build_marker_batch,
    )
    from pylog.log.log import AppendOrigin, Log

    log = Log.open(str(tmp_path / "t-0"))
    now = int(time.time() * 1000)  # an old timestamp would roll the segment (segment.ms)
    try:
        for pid in (7, 8):
            data = _native.build_batch(
                [(None, f"v{pid}".encode(), [], now)],
                producer_id=pid,
                producer_epoch=1,
                base_sequence=0,
                is_transactional=True,
            )
            log.append_as_leader(bytearray(data), 0)
        for pid, kind in ((7, COMMIT), (8, ABORT)):
            marker = build_marker_batch(pid, 1, EndTransactionMarker(kind, 4), timestamp_ms=now)
            log.append_as_leader(bytearray(marker), 0, origin=AppendOrigin.COORDINATOR)
        log.update_high_watermark(log.log_end_offset)
        log.roll()  # a snapshot at offset 4
    finally:
        log.close()
    d = tmp_path / "t-0"
    result = run_dump("--files", str(d / "00000000000000000000.log"), "--print-data-log")
    assert result.returncode == 0, result.stderr
    batches = [ln for ln in result.stdout.splitlines() if ln.startswith("baseOffset:")]
    assert len(batches) == 4
    assert all("isTransactional: true" in b for b in batches)
    assert ["isControl: true" in b for b in batches] == [False, False, True, True]
    records = [ln for ln in result.stdout.splitlines() if ln.startswith("| offset:")]
    assert records[2].endswith(" endTxnMarker: COMMIT coordinatorEpoch: 4")
    assert records[3].endswith(" endTxnMarker: ABORT coordinatorEpoch: 4")
    assert "payload" not in records[2] + records[3]

    result = run_dump("--files", str(d / "00000000000000000000.txnindex"))
    assert result.returncode == 0, result.stderr
    assert (
        "version: 0 producerId: 8 firstOffset: 1 lastOffset: 3 lastStableOffset: 4"
        in result.stdout.splitlines()
    )
    result = run_dump("--files", str(d / "00000000000000000004.snapshot"))
    assert result.returncode == 0, result.stderr
    lines = [ln for ln in result.stdout.splitlines() if ln.startswith("producerId:")]
    assert len(lines) == 2
    assert lines[1].startswith(
        "producerId: 8 producerEpoch: 1 coordinatorEpoch: 4 "
        "currentTxnFirstOffset: OptionalLong.empty"
    )
