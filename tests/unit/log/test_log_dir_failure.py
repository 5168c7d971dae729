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
from pylog.log.log import FetchIsolation
from pylog.log.log_dir_failure_channel import LogDirFailureChannel, is_disk_error
from pylog.log.manager import LogManager


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
