"""ProducerStateManager: Kafka's sequence rules, snapshots in Kafka's binary format."""

from __future__ import annotations

import logging
import struct
from dataclasses import dataclass
from pathlib import Path

import pytest

from pylog import _native
from pylog.errors import InvalidProducerEpochError, OutOfOrderSequenceError
from pylog.log.producer_state import (
    INT32_MAX,
    BatchMetadata,
    ProducerStateManager,
    decrement_sequence,
)


@dataclass(frozen=True)
class Batch:
    producer_id: int
    producer_epoch: int
    base_sequence: int
    last_sequence: int
    base_offset: int
    last_offset: int
    max_timestamp: int = 1000
    is_transactional: bool = False
    is_control: bool = False


def batch(pid: int, epoch: int, seq: int, offset: int, n: int = 1, **kw: object) -> Batch:
    last_seq = (seq + n - 1) % (INT32_MAX + 1)
    return Batch(pid, epoch, seq, last_seq, offset, offset + n - 1, **kw)  # type: ignore[arg-type]


def append(m: ProducerStateManager, b: Batch) -> None:
    assert m.check_batch(b, verify_sequence=True) is None
    m.update(b, 1000)


def test_in_sequence_appends_and_last_entry(tmp_path: Path) -> None:
    m = ProducerStateManager(tmp_path)
    append(m, batch(7, 0, 0, 0, 3))
    append(m, batch(7, 0, 3, 3, 2))
    e = m.last_entry(7)
    assert e is not None
    assert (e.producer_epoch, e.first_seq, e.last_seq) == (0, 0, 4)
    assert (e.first_data_offset, e.last_data_offset) == (0, 4)
    assert m.map_end_offset == 5
    assert m.last_entry(8) is None


def test_duplicate_of_one_of_last_five_returns_its_metadata(tmp_path: Path) -> None:
    m = ProducerStateManager(tmp_path)
    for i in range(7):
        append(m, batch(1, 0, i * 2, 100 + i * 2, 2))
    # batches 2..6 retained; batch 3 (seq 6-7) is a duplicate
    dup = m.check_batch(batch(1, 0, 6, 999, 2), verify_sequence=True)
    assert dup == BatchMetadata(
        first_seq=6, last_seq=7, first_offset=106, last_offset=107, timestamp=1000
    )
    # batch 0 has fallen out of the window: not a duplicate, and out of order
    with pytest.raises(OutOfOrderSequenceError):
        m.check_batch(batch(1, 0, 0, 999, 2), verify_sequence=True)


def test_gap_is_out_of_order(tmp_path: Path) -> None:
    m = ProducerStateManager(tmp_path)
    append(m, batch(1, 0, 0, 0, 5))
    with pytest.raises(OutOfOrderSequenceError, match="does not follow"):
        m.check_batch(batch(1, 0, 6, 5), verify_sequence=True)
    # replication does not verify
    assert m.check_batch(batch(1, 0, 6, 5), verify_sequence=False) is None


def test_stale_epoch_is_fenced(tmp_path: Path) -> None:
    m = ProducerStateManager(tmp_path)
    append(m, batch(1, 3, 0, 0))
    with pytest.raises(InvalidProducerEpochError):
        m.check_batch(batch(1, 2, 1, 1), verify_sequence=True)
    assert m.check_batch(batch(1, 2, 1, 1), verify_sequence=False) is None


def test_epoch_bump_must_start_at_zero(tmp_path: Path) -> None:
    m = ProducerStateManager(tmp_path)
    append(m, batch(1, 0, 0, 0, 10))
    with pytest.raises(OutOfOrderSequenceError, match="not 0"):
        m.check_batch(batch(1, 1, 10, 10), verify_sequence=True)
    append(m, batch(1, 1, 0, 10))
    e = m.last_entry(1)
    assert e is not None and e.producer_epoch == 1 and len(e.batches) == 1


def test_unknown_producer_may_start_at_any_sequence(tmp_path: Path) -> None:
    # KIP-360: its state may have gone with retention, so Kafka accepts it
    m = ProducerStateManager(tmp_path)
    assert m.check_batch(batch(42, 0, 5, 0), verify_sequence=True) is None
    m.update(batch(42, 0, 5, 0))
    # ...and from then on the sequence must follow on
    with pytest.raises(OutOfOrderSequenceError):
        m.check_batch(batch(42, 0, 9, 1), verify_sequence=True)


def test_sequence_wraps_after_int32_max(tmp_path: Path) -> None:
    m = ProducerStateManager(tmp_path)
    m.update(batch(1, 0, INT32_MAX - 1, 0, 2))  # last seq = INT32_MAX
    e = m.last_entry(1)
    assert e is not None and e.last_seq == INT32_MAX
    append(m, batch(1, 0, 0, 2, 3))
    wrapped = batch(1, 0, INT32_MAX, 10, 3)  # spans the wrap: last seq 1
    assert wrapped.last_sequence == 1
    assert decrement_sequence(1, 2) == INT32_MAX


def test_transactions_track_first_offset(tmp_path: Path) -> None:
    m = ProducerStateManager(tmp_path)
    append(m, batch(5, 0, 0, 10, 2, is_transactional=True))
    append(m, batch(5, 0, 2, 12, 2, is_transactional=True))
    e = m.last_entry(5)
    assert e is not None and e.current_txn_first_offset == 10
    marker = Batch(5, 0, -1, -1, 14, 14, is_transactional=True, is_control=True)
    m.update(marker, 2000, coordinator_epoch=9)
    assert e.current_txn_first_offset is None and e.coordinator_epoch == 9


def test_snapshot_round_trip_in_kafkas_format(tmp_path: Path) -> None:
    m = ProducerStateManager(tmp_path)
    append(m, batch(1, 2, 0, 0, 3))
    append(m, batch(1, 2, 3, 3, 4))
    append(m, batch(9, 0, 0, 7, 1, is_transactional=True, max_timestamp=5000))
    path = m.take_snapshot()
    assert path == str(tmp_path / "00000000000000000008.snapshot")
    data = Path(path).read_bytes()
    version, crc, count = struct.unpack_from(">hIi", data)
    assert (version, count) == (1, 2)
    assert crc == _native.crc32c(data[6:])
    assert len(data) == 10 + 2 * 46
    first = struct.unpack_from(">qhiqiqiq", data, 10)
    assert first == (1, 2, 6, 6, 3, 1000, -1, -1)
    second = struct.unpack_from(">qhiqiqiq", data, 10 + 46)
    assert second == (9, 0, 0, 7, 0, 5000, -1, 7)

    fresh = ProducerStateManager(tmp_path)
    assert fresh.load_latest_snapshot(100) == 8
    assert fresh.map_end_offset == 8
    e = fresh.last_entry(1)
    assert e is not None
    assert list(e.batches) == [BatchMetadata(3, 6, 3, 6, 1000)]
    # the retained batch still answers a retry
    assert fresh.check_batch(batch(1, 2, 3, 50, 4), verify_sequence=True) is not None
    t = fresh.last_entry(9)
    assert t is not None and t.current_txn_first_offset == 7


def test_snapshot_skips_unchanged_state(tmp_path: Path) -> None:
    m = ProducerStateManager(tmp_path)
    append(m, batch(1, 0, 0, 0))
    assert m.take_snapshot() is not None
    assert m.take_snapshot() is None
    assert m.snapshot_offsets() == [1]


def test_corrupt_snapshot_is_deleted_and_older_one_used(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    m = ProducerStateManager(tmp_path)
    append(m, batch(1, 0, 0, 0))
    m.take_snapshot()
    append(m, batch(1, 0, 1, 1))
    newest = m.take_snapshot()
    assert newest is not None
    raw = bytearray(Path(newest).read_bytes())
    raw[20] ^= 0xFF
    Path(newest).write_bytes(bytes(raw))

    fresh = ProducerStateManager(tmp_path)
    with caplog.at_level(logging.WARNING, logger="pylog.log"):
        assert fresh.load_latest_snapshot(10) == 1
    assert not Path(newest).exists()
    lines = [r for r in caplog.records if "corrupt producer snapshot" in r.getMessage()]
    assert len(lines) == 1 and newest in lines[0].getMessage()
    e = fresh.last_entry(1)
    assert e is not None and e.last_seq == 0


def test_truncated_snapshot_is_corrupt(tmp_path: Path) -> None:
    m = ProducerStateManager(tmp_path)
    append(m, batch(1, 0, 0, 0))
    path = m.take_snapshot()
    assert path is not None
    Path(path).write_bytes(Path(path).read_bytes()[:-3])
    fresh = ProducerStateManager(tmp_path)
    assert fresh.load_latest_snapshot(10) is None
    assert fresh.snapshot_offsets() == []


def test_truncate_and_reload(tmp_path: Path) -> None:
    m = ProducerStateManager(tmp_path)
    append(m, batch(1, 0, 0, 0))
    m.take_snapshot()  # at 1
    append(m, batch(1, 0, 1, 1))
    m.take_snapshot()  # at 2
    append(m, batch(1, 0, 2, 2))
    m.take_snapshot()  # at 3
    m.truncate_and_reload(0, 2, now_ms=1000)
    assert m.snapshot_offsets() == [1, 2]
    assert m.map_end_offset == 2
    e = m.last_entry(1)
    assert e is not None and e.last_seq == 1
    m.truncate_and_reload(1, 2, now_ms=1000)  # log start moved to 1: snapshot 1 goes
    assert m.snapshot_offsets() == [2]


def test_delete_snapshots_before_and_truncate_fully(tmp_path: Path) -> None:
    m = ProducerStateManager(tmp_path)
    for i in range(4):
        append(m, batch(1, 0, i, i))
        m.take_snapshot()
    m.delete_snapshots_before(3)
    assert m.snapshot_offsets() == [3, 4]
    m.truncate_fully(50)
    assert m.snapshot_offsets() == [] and m.is_empty() and m.map_end_offset == 50
    assert not list(tmp_path.glob("*.snapshot"))


def test_expiration(tmp_path: Path) -> None:
    m = ProducerStateManager(tmp_path, producer_id_expiration_ms=1000)
    append(m, batch(1, 0, 0, 0, max_timestamp=100))
    append(m, batch(2, 0, 0, 1, max_timestamp=900))
    append(m, batch(3, 0, 0, 2, max_timestamp=100, is_transactional=True))
    assert m.remove_expired_producers(1100) == [1]
    assert m.last_entry(2) is not None and m.last_entry(3) is not None  # open txn stays


def test_native_batch_info_is_a_producer_batch(tmp_path: Path) -> None:
    if not hasattr(_native, "build_batch"):
        pytest.skip("native build_batch not landed yet")
    raw = _native.build_batch(
        [(None, b"a", [], 10), (None, b"b", [], 11)],
        base_offset=40,
        producer_id=77,
        producer_epoch=1,
        base_sequence=0,
    )
    info = _native.analyze_records(raw, max_batch_size=2**31 - 1).batches[0]
    m = ProducerStateManager(tmp_path)
    assert m.check_batch(info, verify_sequence=True) is None
    m.update(info, 0)
    e = m.last_entry(77)
    assert e is not None and (e.last_seq, e.last_data_offset) == (1, 41)
    dup = m.check_batch(info, verify_sequence=True)
    assert dup is not None and dup.first_offset == 40
