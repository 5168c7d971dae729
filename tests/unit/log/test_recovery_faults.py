"""Recovery from damaged partition directories, made by cutting and corrupting real
segment files: each case ends with a log whose every batch validates, nothing
before the first bad batch lost, and one log line per repair."""

from __future__ import annotations

import logging
import os
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pylog import _native
from pylog.errors import LogDirLockedError
from pylog.log.config import LogConfig
from pylog.log.leader_epoch import LeaderEpochFileCache
from pylog.log.loader import LoadedLog, LogLoader
from pylog.log.log import Log
from pylog.log.manager import LogManager
from pylog.log.producer_state import ProducerStateManager

CONFIG = LogConfig(segment_bytes=2048, index_interval_bytes=256, segment_index_bytes=4096)


def batch(n: int = 3) -> bytearray:
    now = int(time.time() * 1000)
    return bytearray(_native.build_batch([(b"k", b"v" + bytes(60), [], now)] * n))


def write_log(dir: Path, batches: int) -> int:
    """A closed log of ``batches`` 3-record batches in several segments; its LEO."""
    log = Log.open(str(dir), CONFIG)
    for _ in range(batches):
        log.append_as_leader(batch(), 0)
    leo = log.log_end_offset
    log.close()
    return leo


def segment_bases(dir: Path) -> list[int]:
    return sorted(int(p.name.split(".")[0]) for p in dir.glob("*.log"))


def batches_of(path: Path) -> list[_native.BatchInfo]:
    infos, _ = _native.read_batch_infos(str(path), 0, 100000)
    return infos


def log_path(dir: Path, base: int) -> Path:
    return dir / f"{base:020d}.log"


def load(dir: Path, *, clean: bool, recovery_point: int = 0) -> LoadedLog:
    ps = ProducerStateManager(dir)
    cache = LeaderEpochFileCache(dir / "leader-epoch-checkpoint")
    return LogLoader(dir, CONFIG, 0, recovery_point, clean, ps, cache).load()


def close(loaded: LoadedLog) -> None:
    for seg in loaded.segments:
        seg.close()


def verify(dir: Path, *, contiguous: bool = True) -> int:
    """Every batch of every segment validates (CRC, framing); offsets continue. The LEO."""
    expected = None
    for base in segment_bases(dir):
        path = log_path(dir, base)
        scan = _native.scan_segment(str(path), deep=True, max_batch_size=2**31 - 1)
        assert scan.error is None, (path, scan.error)
        assert scan.valid_bytes == path.stat().st_size
        for b in batches_of(path):
            if contiguous and expected is not None:
                assert b.base_offset == expected, path
            expected = b.last_offset + 1
    return expected or 0


def repairs(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "pylog.log" and r.levelno >= logging.WARNING
    ]


# ---------------------------------------------------------------- torn and corrupt data


def test_last_segment_cut_mid_batch(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    leo = write_log(tmp_path, 30)
    last = log_path(tmp_path, segment_bases(tmp_path)[-1])
    victim = batches_of(last)[-1]
    with open(last, "r+b") as f:
        f.truncate(victim.position + victim.size // 2)
    with caplog.at_level(logging.INFO, logger="pylog.log"):
        loaded = load(tmp_path, clean=False)
    assert loaded.log_end_offset == victim.base_offset == leo - 3
    lines = repairs(caplog)
    assert len(lines) == 1, lines
    assert str(last) in lines[0] and f"at position {victim.position}" in lines[0]
    close(loaded)
    assert verify(tmp_path) == victim.base_offset


def test_middle_segment_cut_drops_everything_after(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_log(tmp_path, 30)
    bases = segment_bases(tmp_path)
    assert len(bases) >= 4
    middle = log_path(tmp_path, bases[1])
    victim = batches_of(middle)[2]
    with open(middle, "r+b") as f:
        f.truncate(victim.position + 20)  # inside the batch header
    with caplog.at_level(logging.INFO, logger="pylog.log"):
        loaded = load(tmp_path, clean=False)
    assert loaded.log_end_offset == victim.base_offset
    assert segment_bases(tmp_path) == bases[:2]
    lines = repairs(caplog)
    assert len(lines) == 2, lines  # the cut, and the later segments removed
    assert str(middle) in lines[0]
    assert "deleted" in lines[1] and all(str(log_path(tmp_path, b)) in lines[1] for b in bases[2:])
    close(loaded)
    assert verify(tmp_path) == victim.base_offset


def test_flipped_bytes_truncate_at_the_bad_batch(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_log(tmp_path, 30)
    bases = segment_bases(tmp_path)
    seg = log_path(tmp_path, bases[2])
    victim = batches_of(seg)[1]
    earlier = {b: log_path(tmp_path, b).read_bytes() for b in bases[:2]}
    raw = bytearray(seg.read_bytes())
    for i in range(victim.position + 70, victim.position + 74):
        raw[i] ^= 0xFF
    seg.write_bytes(bytes(raw))
    with caplog.at_level(logging.INFO, logger="pylog.log"):
        loaded = load(tmp_path, clean=False)
    assert loaded.log_end_offset == victim.base_offset
    lines = repairs(caplog)
    assert str(seg) in lines[0] and "crc" in lines[0].lower(), lines
    assert len(lines) == (2 if len(bases) > 3 else 1)
    close(loaded)
    assert verify(tmp_path) == victim.base_offset
    # nothing before the bad batch is lost: earlier segments byte-identical, its
    # segment keeps the batch before it
    assert {b: log_path(tmp_path, b).read_bytes() for b in bases[:2]} == earlier
    assert seg.read_bytes() == bytes(raw[: victim.position])


def test_corruption_before_the_recovery_point_is_not_rescanned(tmp_path: Path) -> None:
    leo = write_log(tmp_path, 30)
    bases = segment_bases(tmp_path)
    loaded = load(tmp_path, clean=False, recovery_point=bases[-1])
    assert loaded.log_end_offset == leo and loaded.recovery_point == bases[-1]
    close(loaded)


@pytest.mark.parametrize("damage", ["missing", "odd-length", "disordered", "time-disordered"])
def test_missing_or_corrupt_index_is_rebuilt(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: str
) -> None:
    leo = write_log(tmp_path, 30)
    base = segment_bases(tmp_path)[1]
    index = tmp_path / f"{base:020d}.index"
    timeindex = tmp_path / f"{base:020d}.timeindex"
    good_entries = index.stat().st_size // 8
    assert good_entries > 0
    if damage == "missing":
        index.unlink()
    elif damage == "odd-length":
        with open(index, "ab") as f:
            f.write(b"\x01\x02\x03")
    elif damage == "disordered":
        index.write_bytes(struct.pack(">iiii", 9, 900, 3, 300))
    else:
        timeindex.write_bytes(struct.pack(">qiqi", 2_000_000_000_000, 5, 1_000, 6))
    with caplog.at_level(logging.INFO, logger="pylog.log"):
        loaded = load(tmp_path, clean=True, recovery_point=leo)
    lines = repairs(caplog)
    assert len(lines) == 1, lines
    assert "rebuilt the indexes" in lines[0] and f"{base:020d}.log" in lines[0]
    assert loaded.log_end_offset == leo
    seg = next(s for s in loaded.segments if s.base_offset == base)
    assert seg.offset_index.entries == good_entries
    close(loaded)
    assert verify(tmp_path) == leo


# ---------------------------------------------------------------- interrupted file operations


def test_leftover_swap_replaces_the_segments_it_covers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    leo = write_log(tmp_path, 30)
    bases = segment_bases(tmp_path)
    # A compaction of the first two segments into one, interrupted before the swap-in.
    merged = log_path(tmp_path, bases[0]).read_bytes() + log_path(tmp_path, bases[1]).read_bytes()
    (tmp_path / f"{bases[0]:020d}.log.swap").write_bytes(merged)
    with caplog.at_level(logging.INFO, logger="pylog.log"):
        loaded = load(tmp_path, clean=True, recovery_point=leo)
    lines = repairs(caplog)
    assert len(lines) == 1, lines
    assert "swap" in lines[0] and str(bases[1]) in lines[0]
    assert [s.base_offset for s in loaded.segments] == [bases[0], *bases[2:]]
    assert not list(tmp_path.glob("*.swap"))
    assert log_path(tmp_path, bases[0]).read_bytes() == merged
    assert loaded.log_end_offset == leo
    close(loaded)
    assert verify(tmp_path) == leo


def test_leftover_cleaned_deleted_and_unfinished_swaps(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    leo = write_log(tmp_path, 30)
    bases = segment_bases(tmp_path)
    first = log_path(tmp_path, bases[0]).read_bytes()
    (tmp_path / f"{bases[1]:020d}.log.cleaned").write_bytes(first[:100])
    (tmp_path / f"{bases[2]:020d}.log.swap").write_bytes(first)  # above the .cleaned: a split
    (tmp_path / f"{bases[2]:020d}.index.swap").write_bytes(bytes(8))
    (tmp_path / "00000000000000000000.log.deleted").write_bytes(first)
    (tmp_path / "00000000000000000000.index.deleted").write_bytes(bytes(8))
    before = {b: log_path(tmp_path, b).read_bytes() for b in bases}
    with caplog.at_level(logging.INFO, logger="pylog.log"):
        loaded = load(tmp_path, clean=True, recovery_point=leo)
    lines = repairs(caplog)
    assert len(lines) == 5, lines
    for name in (".log.cleaned", ".log.swap", ".index.swap", ".log.deleted", ".index.deleted"):
        assert sum(name in m for m in lines) == 1, (name, lines)
    assert not [p for p in tmp_path.iterdir() if p.suffix in (".cleaned", ".swap", ".deleted")]
    assert {b: log_path(tmp_path, b).read_bytes() for b in bases} == before
    assert loaded.log_end_offset == leo
    close(loaded)
    assert verify(tmp_path) == leo


# ---------------------------------------------------------------- the directory lock

_HOLD_LOCK = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX)
print("locked", flush=True)
time.sleep(120)
"""


def test_stale_lock_of_a_killed_process_does_not_block(tmp_path: Path) -> None:
    logdir = tmp_path / "logs"
    logdir.mkdir()
    child = subprocess.Popen(
        [sys.executable, "-c", _HOLD_LOCK, str(logdir / ".lock")],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "locked"
        with pytest.raises(LogDirLockedError, match="in use"):
            LogManager({"log.dirs": [str(logdir)]})
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    assert (logdir / ".lock").exists()  # the file stays; only the flock counted
    manager = LogManager({"log.dirs": [str(logdir)]})
    manager.shutdown()
