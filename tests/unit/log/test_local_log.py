"""LocalLog under the Log (Kafka's LocalLog under UnifiedLog) on real files: what
each half keeps, and the one scheduler a Log opened alone shares."""

from __future__ import annotations

import os
import time
from pathlib import Path

from conftest import build_batch
from support.clock import ManualClock
from support.scheduler import ManualScheduler

from pylog.log.config import LogConfig
from pylog.log.log import FetchIsolation, Log
from pylog.log.scheduler import Scheduler, default_scheduler

CONFIG = LogConfig.from_props(
    {
        "internal.segment.bytes": 1024,
        "file.delete.delay.ms": 1000,
        "message.timestamp.after.max.ms": 2**63 - 1,
        "retention.ms": -1,
    }
)


def _fill(log: Log, n: int) -> None:
    for i in range(n):
        log.append_as_leader(bytearray(build_batch([b"value-%03d" % i * 8])), 0)


def test_the_local_log_holds_the_segments_and_offsets_on_disk(
    tmp_path: Path, clock: ManualClock, scheduler: ManualScheduler
) -> None:
    log = Log.open(str(tmp_path / "t-0"), CONFIG, scheduler=scheduler, clock=clock)
    _fill(log, 40)
    local = log.local_log
    assert local.segments.values() == log.segments and len(log.segments) > 1
    assert local.log_end_offset == log.log_end_offset == 40
    assert local.active_segment is log.active_segment
    log.flush()
    assert local.recovery_point == log.recovery_point == 40
    # The high watermark and the log start offset are the Log's, not the LocalLog's.
    assert not hasattr(local, "high_watermark") and not hasattr(local, "log_start_offset")
    log.close()


def test_truncation_cuts_the_recovery_point_with_the_log_end(
    tmp_path: Path, clock: ManualClock, scheduler: ManualScheduler
) -> None:
    log = Log.open(str(tmp_path / "t-0"), CONFIG, scheduler=scheduler, clock=clock)
    _fill(log, 40)
    log.flush()
    removed = [s.base_offset for s in log.segments if s.base_offset > 10]
    assert removed
    assert log.truncate_to(10)
    assert log.log_end_offset == 10 and log.recovery_point == 10
    assert all(s.base_offset <= 10 for s in log.segments)
    # The removed segments' files wait as .deleted for the scheduler.
    names = os.listdir(log.dir)
    assert any(n.endswith(".log.deleted") for n in names)
    clock.advance(1000)
    scheduler.run_due()
    assert not any(n.endswith(".deleted") for n in os.listdir(log.dir))
    assert log.read_bytes(0, 1 << 20) and log.read(10, 1 << 20).records.size == 0
    log.close()


def test_read_stops_at_the_bound_the_log_gives(
    tmp_path: Path, clock: ManualClock, scheduler: ManualScheduler
) -> None:
    log = Log.open(str(tmp_path / "t-0"), CONFIG, scheduler=scheduler, clock=clock)
    _fill(log, 10)
    log.update_high_watermark(4)
    upto_hw = log.read(0, 1 << 20, FetchIsolation.HIGH_WATERMARK, True)
    upto_leo = log.read(0, 1 << 20, FetchIsolation.LOG_END, True)
    assert 0 < upto_hw.records.size < upto_leo.records.size
    log.close()


def test_a_log_opened_alone_shares_the_default_scheduler(tmp_path: Path) -> None:
    shared = default_scheduler()
    assert isinstance(shared, Scheduler) and shared.is_started
    assert default_scheduler() is shared
    log = Log.open(str(tmp_path / "t-0"), CONFIG)
    _fill(log, 40)  # rolls: each roll flushes the segments before it on the scheduler
    rolled_at = log.active_segment.base_offset
    assert rolled_at > 0
    deadline = time.monotonic() + 60  # catches a hang only
    while log.recovery_point < rolled_at and time.monotonic() < deadline:
        time.sleep(0.01)
    assert log.recovery_point >= rolled_at
    log.close()


def test_the_manual_scheduler_is_a_scheduler_that_starts_no_thread() -> None:
    s = ManualScheduler()
    ran: list[str] = []
    s.schedule_once("a", lambda: ran.append("a"), 5)
    assert isinstance(s, Scheduler) and not s.is_started
    assert s.names() == ["a"] and ran == []
    assert s.run_all() == 1 and ran == ["a"]
