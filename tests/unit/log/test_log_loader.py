"""LogLoader on real partition directories: clean and unclean loads, leftovers,
orphan indexes, producer state and leader epochs rebuilt from the files."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

import pytest

from pylog import _native
from pylog.log.config import LogConfig
from pylog.log.leader_epoch import EpochEntry, LeaderEpochFileCache
from pylog.log.loader import LoadedLog, LogLoader
from pylog.log.log import Log
from pylog.log.producer_state import ProducerStateManager

CONFIG = LogConfig(segment_bytes=2048, index_interval_bytes=256, segment_index_bytes=4096)


def batch(n: int = 3, *, pid: int = -1, epoch: int = -1, seq: int = -1) -> bytearray:
    now = int(time.time() * 1000)
    records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]] = [
        (b"key", b"value-" + bytes(60), [], now) for _ in range(n)
    ]
    return bytearray(
        _native.build_batch(records, producer_id=pid, producer_epoch=epoch, base_sequence=seq)
    )


def write_log(dir: Path, batches: int, *, leader_epoch: int = 0, **kw: Any) -> Log:
    log = Log.open(str(dir), CONFIG)
    for _ in range(batches):
        log.append_as_leader(batch(**kw), leader_epoch)
    return log


def load(dir: Path, *, clean: bool, log_start: int = 0, recovery_point: int = 0) -> LoadedLog:
    ps = ProducerStateManager(dir)
    cache = LeaderEpochFileCache(dir / "leader-epoch-checkpoint")
    loaded = LogLoader(dir, CONFIG, log_start, recovery_point, clean, ps, cache).load()
    loaded.producer_state = ps  # type: ignore[attr-defined]
    loaded.cache = cache  # type: ignore[attr-defined]
    return loaded


def close(loaded: LoadedLog) -> None:
    for seg in loaded.segments:
        seg.close()


def assert_all_batches_valid(dir: Path) -> int:
    """Every segment scans clean and offsets continue across segments; returns the LEO."""
    expected = None
    for name in sorted(os.listdir(dir)):
        if not name.endswith(".log"):
            continue
        path = str(dir / name)
        scan = _native.scan_segment(path, max_batch_size=2**31 - 1)
        assert scan.error is None, (path, scan.error)
        assert scan.valid_bytes == os.path.getsize(path)
        infos, _ = _native.read_batch_infos(path, 0, 100000)
        for b in infos:
            if expected is not None:
                assert b.base_offset == expected
            expected = b.last_offset + 1
    return expected or 0


def repairs(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "pylog.log" and r.levelno >= logging.WARNING
    ]


def test_clean_load_keeps_everything_and_logs_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = write_log(tmp_path, 40)
    leo = log.log_end_offset
    assert log.num_segments > 3
    log.close()
    with caplog.at_level(logging.INFO, logger="pylog.log"):
        loaded = load(tmp_path, clean=True, recovery_point=leo)
    assert loaded.log_end_offset == leo == 120
    assert loaded.recovery_point == leo
    assert [s.base_offset for s in loaded.segments] == sorted(
        s.base_offset for s in loaded.segments
    )
    assert loaded.next_offset_metadata.segment_base_offset == loaded.segments[-1].base_offset
    assert repairs(caplog) == []
    close(loaded)


def test_unclean_load_of_intact_files_loses_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = write_log(tmp_path, 40)
    leo = log.log_end_offset
    log.close()
    with caplog.at_level(logging.INFO, logger="pylog.log"):
        loaded = load(tmp_path, clean=False, recovery_point=0)
    assert loaded.log_end_offset == leo
    assert loaded.recovery_point == 0  # recovery never moves the recovery point forward
    assert repairs(caplog) == []
    assert assert_all_batches_valid(tmp_path) == leo
    close(loaded)


def test_empty_dir_gets_a_segment_at_the_log_start(tmp_path: Path) -> None:
    loaded = load(tmp_path / "t-0", clean=False, log_start=42, recovery_point=42)
    assert [s.base_offset for s in loaded.segments] == [42]
    assert loaded.log_end_offset == 42 and loaded.log_start_offset == 42
    assert (tmp_path / "t-0" / "00000000000000000042.log").exists()
    close(loaded)


def test_log_start_offset_is_max_of_checkpoint_and_first_segment(tmp_path: Path) -> None:
    log = write_log(tmp_path, 10)
    log.close()
    loaded = load(tmp_path, clean=True, log_start=7)
    assert loaded.log_start_offset == 7
    close(loaded)


def test_log_start_beyond_log_end_deletes_all_segments(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = write_log(tmp_path, 10)
    log.close()
    with caplog.at_level(logging.INFO, logger="pylog.log"):
        loaded = load(tmp_path, clean=False, log_start=500)
    assert [s.base_offset for s in loaded.segments] == [500]
    assert loaded.log_end_offset == 500
    lines = repairs(caplog)
    assert len(lines) == 1 and "before its log start offset 500" in lines[0]
    assert sorted(p.name for p in tmp_path.glob("*.log")) == ["00000000000000000500.log"]
    close(loaded)


def test_orphan_indexes_and_tmp_files_are_deleted_one_line_each(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = write_log(tmp_path, 5)
    log.close()
    (tmp_path / "00000000000000009999.index").write_bytes(bytes(16))
    (tmp_path / "00000000000000009999.timeindex").write_bytes(bytes(24))
    (tmp_path / "leader-epoch-checkpoint.tmp").write_text("0\n")
    with caplog.at_level(logging.INFO, logger="pylog.log"):
        loaded = load(tmp_path, clean=True)
    lines = repairs(caplog)
    assert len(lines) == 3
    assert sum("index file without a log file" in m for m in lines) == 2
    assert any("leader-epoch-checkpoint.tmp" in m for m in lines)
    assert not (tmp_path / "00000000000000009999.index").exists()
    assert not (tmp_path / "00000000000000009999.timeindex").exists()
    close(loaded)


def test_producer_state_survives_restart(tmp_path: Path) -> None:
    log = write_log(tmp_path, 0)
    for i in range(12):
        log.append_as_leader(batch(2, pid=77, epoch=3, seq=i * 2), 0)
    leo = log.log_end_offset
    log.close()  # snapshot at the LEO
    assert (tmp_path / f"{leo:020d}.snapshot").exists()
    loaded = load(tmp_path, clean=True, recovery_point=leo)
    ps: ProducerStateManager = loaded.producer_state  # type: ignore[attr-defined]
    entry = ps.last_entry(77)
    assert entry is not None and entry.last_seq == 23 and entry.producer_epoch == 3
    assert ps.map_end_offset == leo
    close(loaded)


def test_producer_state_rebuilt_from_log_without_snapshot(tmp_path: Path) -> None:
    log = write_log(tmp_path, 0)
    for i in range(12):
        log.append_as_leader(batch(2, pid=77, epoch=3, seq=i * 2), 0)
    log.append_as_leader(batch(2, pid=88, epoch=0, seq=0), 0)
    leo = log.log_end_offset
    log.close()
    for snap in tmp_path.glob("*.snapshot"):
        snap.unlink()
    loaded = load(tmp_path, clean=False)
    ps: ProducerStateManager = loaded.producer_state  # type: ignore[attr-defined]
    e77, e88 = ps.last_entry(77), ps.last_entry(88)
    assert e77 is not None and e77.last_seq == 23 and len(e77.batches) == 5
    assert e88 is not None and e88.last_data_offset == leo - 1
    # the rebuilt state is snapshotted so the next start does not replay again
    assert (tmp_path / f"{leo:020d}.snapshot").exists()
    close(loaded)


def test_leader_epoch_cache_cut_to_the_log(tmp_path: Path) -> None:
    log = write_log(tmp_path, 3, leader_epoch=1)
    log.append_as_leader(batch(), 2)
    log.append_as_leader(batch(), 4)
    log.close()
    cache = LeaderEpochFileCache(tmp_path / "leader-epoch-checkpoint")
    cache.assign(9, 1000)  # an epoch past the log's end (e.g. flushed before the data)
    loaded = load(tmp_path, clean=True, log_start=4)
    assert loaded.cache.entries() == [  # type: ignore[attr-defined]
        EpochEntry(1, 4),
        EpochEntry(2, 9),
        EpochEntry(4, 12),
    ]
    close(loaded)


def test_leader_epochs_rebuilt_by_recovery(tmp_path: Path) -> None:
    log = write_log(tmp_path, 3, leader_epoch=1)
    log.append_as_leader(batch(), 5)
    log.close()
    (tmp_path / "leader-epoch-checkpoint").unlink()
    loaded = load(tmp_path, clean=False)
    assert loaded.cache.entries() == [EpochEntry(1, 0), EpochEntry(5, 9)]  # type: ignore[attr-defined]
    close(loaded)


def test_log_open_uses_the_loader(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    log = write_log(tmp_path, 20)
    leo = log.log_end_offset
    log.close()
    (tmp_path / "00000000000000000000.index").unlink()
    with caplog.at_level(logging.INFO, logger="pylog.log"):
        again = Log.open(str(tmp_path), CONFIG, had_clean_shutdown=True, recovery_point=leo)
    assert again.log_end_offset == leo
    assert len(repairs(caplog)) == 1
    assert again.read_bytes(0, 100000)
    again.close()
