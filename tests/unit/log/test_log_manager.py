"""LogManager across restarts on real directories: locks, clean-shutdown marker,
checkpoints, recovery threads, placement, deletion, background tasks; and the
scheduler it runs them on."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from pylog import _native
from pylog.common.topic_partition import TopicPartition
from pylog.errors import LogDirLockedError
from pylog.log.checkpoint import OffsetCheckpointFile
from pylog.log.manager import (
    CLEAN_SHUTDOWN_FILE,
    LogManager,
    parse_topic_partition_name,
)
from pylog.log.partition_metadata import InconsistentTopicIdError, PartitionMetadataFile
from pylog.log.scheduler import Scheduler


def props(*dirs: Path, **extra: Any) -> dict[str, Any]:
    p: dict[str, Any] = {
        "log.dirs": [str(d) for d in dirs],
        "log.segment.bytes": 1 << 20,
        "num.recovery.threads.per.data.dir": 2,
    }
    p.update({k.replace("_", "."): v for k, v in extra.items()})
    return p


def batch(n: int = 2) -> bytearray:
    now = int(time.time() * 1000)
    return bytearray(_native.build_batch([(b"k", b"value", [], now)] * n))


def fill(manager: LogManager, tp: tuple[str, int], batches: int) -> int:
    log = manager.get_or_create_log(tp)
    for _ in range(batches):
        log.append_as_leader(batch(), 0)
    return log.log_end_offset


def test_parse_partition_dir_names() -> None:
    assert parse_topic_partition_name("my-topic-12") == ("my-topic", 12)
    assert parse_topic_partition_name("t.x-0.0123456789abcdef0123456789abcdef-delete") == ("t.x", 0)
    for bad in ("topic", "topic-", "-3", "topic-x", "a.b-delete"):
        with pytest.raises(ValueError):
            parse_topic_partition_name(bad)


def test_clean_restart_keeps_logs_and_checkpoints(tmp_path: Path) -> None:
    d = tmp_path / "d1"
    m = LogManager(props(d))
    m.startup()
    leo_a = fill(m, ("a", 0), 10)
    leo_b = fill(m, ("b", 3), 4)
    topic_id = m.topic_id("a")
    m.shutdown()
    assert (d / CLEAN_SHUTDOWN_FILE).exists()
    assert OffsetCheckpointFile(d / "recovery-point-offset-checkpoint").read() == {
        ("a", 0): leo_a,
        ("b", 3): leo_b,
    }
    m2 = LogManager(props(d))
    assert m2.had_clean_shutdown[str(d)] is True
    assert not (d / CLEAN_SHUTDOWN_FILE).exists()  # removed once loaded
    a = m2.get_log(("a", 0))
    assert a is not None and a.log_end_offset == leo_a and a.recovery_point == leo_a
    assert m2.topic_id("a") == topic_id
    assert PartitionMetadataFile(d / "a-0").read() == topic_id
    m2.shutdown()


def test_unclean_restart_recovers(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "d1"
    m = LogManager(props(d))
    leo = fill(m, ("a", 0), 10)
    m.shutdown()
    (d / CLEAN_SHUTDOWN_FILE).unlink()  # as if the broker had died
    seg = d / "a-0" / "00000000000000000000.log"
    with open(seg, "r+b") as f:
        f.truncate(seg.stat().st_size - 7)  # the last batch torn
    with caplog.at_level(logging.INFO, logger="pylog.log"):
        m2 = LogManager(props(d))
    assert m2.had_clean_shutdown[str(d)] is False
    log = m2.get_log(("a", 0))
    assert log is not None and log.log_end_offset == leo - 2
    assert len([r for r in caplog.records if r.levelno >= logging.WARNING]) == 1
    m2.shutdown()


def test_second_manager_on_a_locked_dir_fails(tmp_path: Path) -> None:
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    m = LogManager(props(d1, d2))
    with pytest.raises(LogDirLockedError, match=str(d2)):
        LogManager(props(tmp_path / "d3", d2))
    # the failed manager released the lock it did take
    m3 = LogManager(props(tmp_path / "d3"))
    m3.shutdown()
    m.shutdown()
    LogManager(props(d1, d2)).shutdown()


def test_new_logs_go_to_the_dir_with_fewest(tmp_path: Path) -> None:
    dirs = [tmp_path / f"d{i}" for i in range(3)]
    m = LogManager(props(*dirs))
    for p in range(9):
        m.get_or_create_log(("t", p))
    counts = [len(m.logs_in_dir(str(d))) for d in dirs]
    assert counts == [3, 3, 3]
    assert {n for n in os.listdir(dirs[0]) if n.startswith("t-")} == {"t-0", "t-3", "t-6"}
    # the same topic id on every partition
    ids = {PartitionMetadataFile(Path(log.dir)).read() for log in m.all_logs().values()}
    assert len(ids) == 1
    m.shutdown()


def test_topic_id_mismatch_is_refused(tmp_path: Path) -> None:
    m = LogManager(props(tmp_path / "d"))
    m.get_or_create_log(("t", 0), topic_id="AAAAAAAAAAAAAAAAAAAAAQ")
    with pytest.raises(InconsistentTopicIdError):
        m.get_or_create_log(("t", 0), topic_id="BBBBBBBBBBBBBBBBBBBBBQ")
    m.shutdown()


def test_delete_renames_then_removes_in_background(tmp_path: Path) -> None:
    d = tmp_path / "d"
    m = LogManager(props(d, log_segment_delete_delay_ms=0, log_initial_task_delay_ms=10**9))
    m.startup()
    fill(m, ("gone", 0), 3)
    fill(m, ("kept", 0), 3)
    m.async_delete(("gone", 0))
    assert m.get_log(("gone", 0)) is None
    assert not (d / "gone-0").exists()
    deadline = time.time() + 5
    while any(n.endswith("-delete") for n in os.listdir(d)) and time.time() < deadline:
        time.sleep(0.02)
    assert not any(n.endswith("-delete") for n in os.listdir(d))
    assert ("gone", 0) not in OffsetCheckpointFile(d / "recovery-point-offset-checkpoint").read()
    m.shutdown()


def test_interrupted_delete_finished_at_start(tmp_path: Path) -> None:
    d = tmp_path / "d"
    m = LogManager(props(d))
    fill(m, ("gone", 0), 3)
    m.shutdown()
    os.rename(d / "gone-0", d / "gone-0.0123456789abcdef0123456789abcdef-delete")
    m2 = LogManager(props(d))
    assert len(m2) == 0 and os.listdir(d).count("gone-0") == 0
    assert not any(n.endswith("-delete") for n in os.listdir(d))
    m2.shutdown()


def test_log_start_offset_checkpoint_round_trip(tmp_path: Path) -> None:
    d = tmp_path / "d"
    m = LogManager(props(d))
    fill(m, ("t", 0), 10)
    log = m.get_log(("t", 0))
    assert log is not None
    log.update_high_watermark(log.log_end_offset)
    assert log.maybe_increment_log_start_offset(6)
    m.checkpoint_log_start_offsets()
    assert OffsetCheckpointFile(d / "log-start-offset-checkpoint").read() == {("t", 0): 6}
    m.shutdown()
    m2 = LogManager(props(d))
    again = m2.get_log(("t", 0))
    assert again is not None and again.log_start_offset == 6
    m2.shutdown()


def test_corrupt_checkpoint_means_full_recovery(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    d = tmp_path / "d"
    m = LogManager(props(d))
    leo = fill(m, ("t", 0), 5)
    m.shutdown()
    (d / "recovery-point-offset-checkpoint").write_text("0\n1\ngarbage\n")
    (d / CLEAN_SHUTDOWN_FILE).unlink()
    with caplog.at_level(logging.INFO, logger="pylog.log"):
        m2 = LogManager(props(d))
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(lines) == 1 and "recovery-point-offset-checkpoint:3" in lines[0]
    log = m2.get_log(("t", 0))
    assert log is not None and log.log_end_offset == leo
    m2.shutdown()


def test_background_tasks_run_on_their_intervals(tmp_path: Path) -> None:
    d = tmp_path / "d"
    m = LogManager(
        props(
            d,
            log_initial_task_delay_ms=0,
            log_flush_offset_checkpoint_interval_ms=20,
            log_flush_scheduler_interval_ms=20,
            log_flush_interval_ms=0,
        )
    )
    m.startup()
    leo = fill(m, ("t", 0), 5)
    cp = OffsetCheckpointFile(d / "recovery-point-offset-checkpoint")
    deadline = time.time() + 5
    while cp.read().get(TopicPartition("t", 0)) != leo and time.time() < deadline:
        time.sleep(0.02)
    assert cp.read()[TopicPartition("t", 0)] == leo  # flushed, then checkpointed
    m.shutdown()
    assert not [t for t in threading.enumerate() if t.name.startswith("pylog-scheduler")]


def test_many_partitions_load_in_parallel(tmp_path: Path) -> None:
    dirs = [tmp_path / "d0", tmp_path / "d1"]
    m = LogManager(props(*dirs))
    for p in range(40):
        fill(m, (f"t{p % 4}", p), 2)
    m.shutdown()
    for d in dirs:
        (d / CLEAN_SHUTDOWN_FILE).unlink()
    m2 = LogManager(props(*dirs, num_recovery_threads_per_data_dir=4))
    assert len(m2) == 40
    assert all(log.log_end_offset == 4 for log in m2.all_logs().values())
    m2.shutdown()


_CHILD = textwrap.dedent(
    """
    import sys, time
    from pylog import _native
    from pylog.log.config import BrokerLogConfig, LogConfig
    from pylog.log.manager import LogManager
    m = LogManager(
        BrokerLogConfig(log_dirs=(sys.argv[1],), default_log_config=LogConfig(segment_bytes=4096))
    )
    m.startup()
    log = m.get_or_create_log(("crash", 0))
    i = 0
    while True:
        now = int(time.time() * 1000)
        raw = bytearray(_native.build_batch([(b"k", b"v" * 50, [], now)] * 3))
        info = log.append_as_leader(raw, 0)
        print(info.last_offset, flush=True)
        i += 1
        if i == 300:
            print("many", flush=True)
    """
)


def test_kill_9_mid_writes_then_restart(tmp_path: Path) -> None:
    d = tmp_path / "d"
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(d)], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    last, many = -1, False
    for line in child.stdout:
        if line.strip() == "many":
            many = True
            break
        last = int(line)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    assert many, "the writer died before writing enough"
    assert not (d / CLEAN_SHUTDOWN_FILE).exists()
    m = LogManager(props(d))
    assert m.had_clean_shutdown[str(d)] is False
    log = m.get_log(("crash", 0))
    assert log is not None
    assert log.log_end_offset >= last + 1  # every acknowledged append survived
    for seg in log.segments:
        scan = _native.scan_segment(seg.log_path, max_batch_size=2**31 - 1)
        assert scan.error is None and scan.valid_bytes == seg.size
    assert len(log.segments) > 10
    m.shutdown()


# ---------------------------------------------------------------- scheduler


def test_scheduler_periodic_once_and_shutdown() -> None:
    s = Scheduler(threads=2)
    runs: list[str] = []
    s.schedule_once("early", lambda: runs.append("early"))  # queued before startup
    s.startup()
    s.schedule("tick", lambda: runs.append("tick"), 0, 10)
    s.schedule("boom", lambda: 1 / 0, 0, 10)  # a failing task keeps its schedule
    time.sleep(0.2)
    s.cancel("tick")
    n = runs.count("tick")
    time.sleep(0.05)
    assert "early" in runs
    assert n >= 2 and runs.count("tick") <= n + 1
    s.shutdown()
    s.schedule_once("late", lambda: runs.append("late"))
    time.sleep(0.05)
    assert "late" not in runs
    with pytest.raises(RuntimeError):
        s.startup()
