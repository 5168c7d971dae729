"""Several log directories in one LogManager: placement, a directory failing
at start-up or while running (LogDirFailureChannel), and moving a log to
another directory through its future log (AlterReplicaLogDirs' disk side).
The failures are real file-system errors (a path that is a file, a partition
directory removed under its log); the failing disks themselves are in
tests/integration/test_jbod.py."""

from __future__ import annotations

import errno
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from pylog import _native
from pylog.common.topic_partition import TopicPartition
from pylog.errors import KafkaStorageError
from pylog.log.log import FetchIsolation, Log
from pylog.log.log_dir_failure_channel import LogDirFailureChannel, is_disk_error
from pylog.log.manager import LogManager, delete_dir_name


def props(*dirs: Path) -> dict[str, Any]:
    return {"log.dirs": [str(d) for d in dirs], "log.segment.bytes": 1 << 20}


def batch(n: int = 2) -> bytearray:
    now = int(time.time() * 1000)
    return bytearray(_native.build_batch([(b"k", b"value", [], now)] * n))


def test_new_partitions_go_to_the_directory_with_the_fewest(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    with LogManager(props(a, b)) as m:
        for p in range(4):
            m.get_or_create_log(("t", p))
        dirs = [m.log_dir_of(("t", p)) for p in range(4)]
        assert dirs == [str(a), str(b), str(a), str(b)]
        assert {d: len(m.logs_in_dir(d)) for d in m.log_dirs} == {str(a): 2, str(b): 2}


def test_a_directory_that_cannot_be_made_is_offline_and_the_rest_start(tmp_path: Path) -> None:
    good, bad = tmp_path / "good", tmp_path / "bad"
    bad.write_bytes(b"not a directory")
    heard: list[str] = []
    channel = LogDirFailureChannel()
    channel.add_listener(heard.append)
    with LogManager(props(bad, good), log_dir_failure_channel=channel) as m:
        assert m.offline_log_dirs == [str(bad)] and m.live_log_dirs == [str(good)]
        assert heard == [str(bad)]
        m.get_or_create_log(("t", 0))
        assert m.log_dir_of(("t", 0)) == str(good)
    with pytest.raises(KafkaStorageError, match="every log directory is offline"):
        LogManager(props(bad))


def test_an_io_error_takes_its_whole_directory_offline(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    m = LogManager(props(a, b))
    heard: list[str] = []
    m.log_dir_failure_channel.add_listener(heard.append)
    try:
        for p in range(4):
            m.get_or_create_log(("t", p)).append_as_leader(batch(), 0)
        victim = m.get_log(("t", 0))
        assert victim is not None and m.log_dir_of(("t", 0)) == str(a)
        shutil.rmtree(victim.dir)  # the disk lost the directory
        with pytest.raises(KafkaStorageError) as caught:
            victim.roll()
        assert is_disk_error(caught.value)
        assert m.maybe_handle_io_error(victim.dir, "rolling", caught.value)
        assert heard == [str(a)]
        # The directory's logs are gone (both partitions), the other's stay.
        assert sorted(m.all_logs()) == [TopicPartition("t", 1), TopicPartition("t", 3)]
        assert m.is_offline(str(a)) and m.live_log_dirs == [str(b)]
        m.get_or_create_log(("t", 9))
        assert m.log_dir_of(("t", 9)) == str(b)
        # Reported again: nothing more happens.
        assert m.maybe_handle_io_error(victim.dir, "again", caught.value)
        assert heard == [str(a)]
        m.checkpoint_recovery_offsets()  # skips the offline directory
        m.flush_dirty_logs()
    finally:
        m.shutdown()
    assert not (a / ".kafka_cleanshutdown").exists()
    assert (b / ".kafka_cleanshutdown").exists()


def test_a_lone_full_directory_stays_online(tmp_path: Path) -> None:
    with LogManager(props(tmp_path / "a")) as m:
        log = m.get_or_create_log(("t", 0))
        full = KafkaStorageError("appending: No space left on device", errno.ENOSPC)
        assert not m.maybe_handle_io_error(log.dir, "appending", full)
        assert m.live_log_dirs == [str(tmp_path / "a")]
    with LogManager(props(tmp_path / "b", tmp_path / "c")) as m:
        log = m.get_or_create_log(("t", 0))
        assert m.maybe_handle_io_error(log.dir, "appending", full)
        assert m.offline_log_dirs == [str(tmp_path / "b")]
    # Not a disk error: nothing happens.
    with LogManager(props(tmp_path / "d", tmp_path / "e")) as m:
        log = m.get_or_create_log(("t", 0))
        assert not m.maybe_handle_io_error(log.dir, "x", KafkaStorageError("shut down"))


def test_a_log_moves_to_another_directory_through_its_future_log(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    with LogManager(props(a, b)) as m:
        tp = TopicPartition("t", 0)
        log = m.get_or_create_log(tp)
        for _ in range(50):
            log.append_as_leader(batch(3), 0)
        log.update_high_watermark(log.log_end_offset)
        before = log.read_bytes(0, 1 << 20, FetchIsolation.LOG_END)
        future = m.create_future_log(tp, str(b), m.topic_id("t"))
        assert m.future_log_dir_of(tp) == str(b)
        assert list(m.future_logs_in_dir(str(b))) == [tp]
        assert os.path.basename(future.dir).endswith("-future")
        while future.log_end_offset < log.log_end_offset:
            future.append_as_follower(
                log.read_bytes(future.log_end_offset, 4096, FetchIsolation.LOG_END)
            )
        moved = m.replace_current_with_future_log(tp)
        assert m.log_dir_of(tp) == str(b) and m.get_log(tp) is moved
        assert moved.dir == str(b / "t-0")
        assert moved.read_bytes(0, 1 << 20, FetchIsolation.LOG_END) == before
        assert moved.high_watermark == log.log_end_offset
        assert m.future_log(tp) is None
        assert not (a / "t-0").exists()
        assert [p.name for p in a.iterdir() if p.name.endswith("-delete")]


# ---------------------------------------------------------------- moves across a restart


def moving(m: LogManager, a: Path, b: Path, batches: int = 60) -> tuple[Log, Log, bytes]:
    """t-0 in ``a`` with ``batches`` batches and its future log in ``b``
    holding about half of them; returns (current, future, current's bytes)."""
    tp = TopicPartition("t", 0)
    log = m.get_or_create_log(tp)
    assert m.log_dir_of(tp) == str(a)
    for _ in range(batches):
        log.append_as_leader(batch(3), 0)
    log.update_high_watermark(log.log_end_offset)
    future = m.create_future_log(tp, str(b), m.topic_id("t"))
    while future.log_end_offset < log.log_end_offset // 2:
        future.append_as_follower(
            log.read_bytes(future.log_end_offset, 2048, FetchIsolation.LOG_END)
        )
    return log, future, log.read_bytes(0, 1 << 20, FetchIsolation.LOG_END)


def finish_move(m: LogManager, tp: TopicPartition) -> Log:
    future, current = m.future_log(tp), m.get_log(tp)
    assert future is not None and current is not None
    while future.log_end_offset < current.log_end_offset:
        future.append_as_follower(
            current.read_bytes(future.log_end_offset, 4096, FetchIsolation.LOG_END)
        )
    return m.replace_current_with_future_log(tp)


def test_a_move_in_flight_at_a_clean_stop_goes_on_at_the_next_start(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    tp = TopicPartition("t", 0)
    with LogManager(props(a, b)) as m:
        _log, future, before = moving(m, a, b)
        future_dir, copied = future.dir, future.log_end_offset
    # Flushed and checkpointed in its directory, as Kafka's logsByDir does.
    assert f"t 0 {copied}" in (b / "recovery-point-offset-checkpoint").read_text()
    with LogManager(props(a, b)) as m:
        resumed = m.future_log(tp)
        assert resumed is not None and resumed.dir == future_dir
        assert resumed.log_end_offset == copied and m.future_log_dir_of(tp) == str(b)
        assert m.log_dir_of(tp) == str(a)
        moved = finish_move(m, tp)
        assert m.log_dir_of(tp) == str(b)
        assert moved.read_bytes(0, 1 << 20, FetchIsolation.LOG_END) == before


def test_a_move_in_flight_at_a_crash_goes_on_from_what_survived(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    tp = TopicPartition("t", 0)
    crashed = tmp_path / "crashed"
    with LogManager(props(a, b)) as m:
        _log, future, before = moving(m, a, b)
        copied = future.log_end_offset
        # The files as a crash leaves them: no clean-shutdown marker, no
        # checkpoint of the future log, its last batch torn in half.
        for d in (a, b):
            shutil.copytree(d, crashed / d.name)
    (seg,) = (crashed / "b").glob("t-0.*-future/*.log")
    with open(seg, "r+b") as f:
        f.truncate(seg.stat().st_size - 20)
    with LogManager(props(crashed / "a", crashed / "b")) as m:
        assert not m.had_clean_shutdown[str(crashed / "b")]
        resumed = m.future_log(tp)
        assert resumed is not None and 0 < resumed.log_end_offset < copied
        moved = finish_move(m, tp)
        assert moved.read_bytes(0, 1 << 20, FetchIsolation.LOG_END) == before


def test_a_future_log_without_its_source_is_removed(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    tp = TopicPartition("t", 0)
    with LogManager(props(a, b)) as m:
        moving(m, a, b)
    shutil.rmtree(a / "t-0")  # the partition went (say, by hand) while the broker was down
    with LogManager(props(a, b)) as m:
        assert m.future_log(tp) is None and m.get_log(tp) is None
    assert not list(b.glob("*-future"))


def test_a_future_log_is_kept_while_its_source_may_be_on_an_offline_directory(
    tmp_path: Path,
) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    tp = TopicPartition("t", 0)
    with LogManager(props(a, b)) as m:
        _log, future, before = moving(m, a, b)
        copied = future.log_end_offset
    a.rename(tmp_path / "a-away")
    a.write_bytes(b"the disk is gone")
    with LogManager(props(a, b)) as m:
        assert m.offline_log_dirs == [str(a)]
        assert m.future_log(tp) is None and m.get_log(tp) is None
    assert len(list(b.glob("t-0.*-future"))) == 1
    a.unlink()
    (tmp_path / "a-away").rename(a)
    with LogManager(props(a, b)) as m:  # the disk is back: the move goes on
        resumed = m.future_log(tp)
        assert resumed is not None and resumed.log_end_offset == copied
        assert finish_move(m, tp).read_bytes(0, 1 << 20, FetchIsolation.LOG_END) == before


def test_a_swap_cut_short_by_a_stop_is_completed_at_start(tmp_path: Path) -> None:
    """The swap renames the current directory -delete first, then the future
    one: a stop in between leaves the caught-up future log, and the -delete
    directory proves it was being swapped in."""
    a, b = tmp_path / "a", tmp_path / "b"
    tp = TopicPartition("t", 0)
    with LogManager(props(a, b)) as m:
        log, future, before = moving(m, a, b)
        while future.log_end_offset < log.log_end_offset:
            future.append_as_follower(
                log.read_bytes(future.log_end_offset, 4096, FetchIsolation.LOG_END)
            )
    (a / "t-0").rename(a / delete_dir_name(tp))
    with LogManager(props(a, b)) as m:
        assert m.log_dir_of(tp) == str(b) and m.future_log(tp) is None
        moved = m.get_log(tp)
        assert moved is not None and moved.dir == str(b / "t-0")
        assert moved.read_bytes(0, 1 << 20, FetchIsolation.LOG_END) == before
    assert not list(a.glob("*-delete")) and not list(b.glob("*-future"))
