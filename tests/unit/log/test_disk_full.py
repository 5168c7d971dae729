"""A full disk, for real: a small tmpfs filled up, with pylog writing into it.

Every append that cannot get disk space must fail with KafkaStorageError and
leave the log as it was (nothing acknowledged lost, appends resume once space
is back). Each scenario runs in a child process, so that a regression to a
SIGBUS (storing into a sparse mapped index on a full disk) fails the test
rather than killing pytest. Mounting needs root, as CI here has.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def tiny_fs(tmp_path: Path) -> Iterator[Path]:
    mount_point = tmp_path / f"tiny-{uuid.uuid4().hex[:8]}"
    mount_point.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def run_child(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def fill(path: Path) -> None:
    """Use up the filesystem's free space, keeping ``path/fill`` to free it later."""
    fd = os.open(path / "fill", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)


def test_index_append_on_a_full_disk_is_a_storage_error(tiny_fs: Path) -> None:
    fill(tiny_fs)
    done = run_child(
        """
        import sys
        from pylog import _native
        from pylog.errors import KafkaStorageError
        index = _native.OffsetIndex(sys.argv[1] + "/0.index", 0, max_index_size=1 << 20)
        try:
            for n in range(1, 100_000):
                index.append(n, n * 10)
        except KafkaStorageError as e:
            print("refused", index.entries, e.errno)
        """,
        str(tiny_fs),
    )
    assert done.returncode == 0, f"child died ({done.returncode}): {done.stderr}"
    words = done.stdout.split()
    assert words[0] == "refused", done.stdout
    assert int(words[2]) == 28  # ENOSPC


def test_log_append_on_a_full_disk_loses_nothing(tiny_fs: Path) -> None:
    fill(tiny_fs)
    os.truncate(tiny_fs / "fill", (os.path.getsize(tiny_fs / "fill")) - 256 * 1024)
    done = run_child(
        """
        import os, sys
        from pylog import _native
        from pylog.errors import KafkaStorageError
        from pylog.log import Log, LogConfig

        d = sys.argv[1] + "/topic-0"
        log = Log.open(d, LogConfig())
        acked = []
        value = os.urandom(8000)
        refused = None
        for n in range(1000):
            batch = bytearray(_native.build_batch([(None, value + b"%d" % n, [], 1000 + n)]))
            try:
                info = log.append_as_leader(batch, 0)
            except KafkaStorageError as e:
                refused = e
                break
            acked.append((info.first_offset, value + b"%d" % n))
        assert refused is not None, "the disk never filled"
        assert log.log_end_offset == len(acked)

        def contents(log):
            out, offset = [], 0
            while offset < log.log_end_offset:
                data = log.read(offset, 1 << 20).records.read_bytes()
                for info in _native.analyze_records(data, max_batch_size=2**31 - 1).batches:
                    for r in _native.decode_records(data[info.position:info.position + info.size]):
                        out.append((r.offset, r.value))
                offset = out[-1][0] + 1
            return out

        assert contents(log) == acked
        os.unlink(sys.argv[1] + "/fill")  # space is back: appends resume
        info = log.append_as_leader(bytearray(_native.build_batch([(None, b"after", [], 5000)])), 0)
        assert info.first_offset == len(acked)
        log.close()
        again = Log.open(d, LogConfig())
        assert contents(again) == acked + [(len(acked), b"after")]
        print("ok", len(acked), refused.errno)
        """,
        str(tiny_fs),
    )
    assert done.returncode == 0, f"child failed ({done.returncode}): {done.stderr}"
    assert done.stdout.split()[0] == "ok", done.stdout
    assert int(done.stdout.split()[1]) > 0


@pytest.mark.integration  # a real broker process on the small disk
def test_a_broker_logs_a_full_disk_once_and_its_recovery_once(
    tiny_fs: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from broker_process import BrokerProcess

    from pylog import _native
    from pylog.protocol.client import KafkaConnection

    monkeypatch.setenv("PYLOG_TEST_BROKER_LOG_LEVEL", "INFO")
    b = BrokerProcess(tiny_fs / "data").start()

    def produce(conn: KafkaConnection, value: bytes) -> int:
        batch = _native.build_batch([(None, value, [], 1000)])
        body = {
            "transactional_id": None,
            "acks": 1,
            "timeout_ms": 10000,
            "topic_data": [{"name": "full", "partition_data": [{"index": 0, "records": batch}]}],
        }
        r = conn.request(0, 7, body)
        return int(r.responses[0].partition_responses[0].error_code)

    try:
        with KafkaConnection(b.bootstrap, timeout=20) as conn:
            topic = {"name": "full", "num_partitions": 1, "replication_factor": 1,
                     "assignments": [], "configs": []}  # fmt: skip
            r = conn.request(19, 4, {"topics": [topic], "timeout_ms": 10000,
                                     "validate_only": False})  # fmt: skip
            assert r.topics[0].error_code == 0
            assert produce(conn, b"before") == 0
            fill(tiny_fs)
            codes = [produce(conn, os.urandom(64 * 1024)) for _ in range(5)]
            assert codes[-3:] == [56, 56, 56], codes  # KAFKA_STORAGE_ERROR
            os.unlink(tiny_fs / "fill")
            assert [produce(conn, b"after") for _ in range(3)] == [0, 0, 0]
    finally:
        b.stop(signal.SIGKILL)
    err = capfd.readouterr().err
    warnings = [line for line in err.splitlines() if "out of space" in line]
    recovered = [line for line in err.splitlines() if "has space again" in line]
    assert len(warnings) == 1 and " WARNING " in warnings[0], err[-3000:]
    assert str(tiny_fs / "data") in warnings[0]
    assert len(recovered) == 1 and " INFO " in recovered[0], err[-3000:]
