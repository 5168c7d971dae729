"""The Python examples of README and docs/features.md (the reference README
points to) run as written: the storage example in a scratch directory, the
client examples against a real (embedded) broker."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from doc_snippets import ADDRESS, ROOT, code_blocks, run_python

from pylog.coordinator.records import partition_for
from pylog.testing import broker

README = ROOT / "README.md"
FEATURES = ROOT / "docs" / "features.md"
PYTHON = code_blocks(README, "python") + code_blocks(FEATURES, "python")
STORAGE = [b for b in PYTHON if "LogManager" in b]
CLIENTS = [b for b in PYTHON if ADDRESS in b]


def test_every_python_block_is_checked() -> None:
    assert code_blocks(README, "python"), "README shows a first produce and consume"
    assert len(STORAGE) == 1
    assert len(STORAGE) + len(CLIENTS) == len(PYTHON)
    text = "\n".join(CLIENTS)
    for client in ("confluent_kafka", "from kafka ", "aiokafka", "pylog.spark"):
        assert client in text, client


def test_storage_example_runs(tmp_path: Path) -> None:
    code = STORAGE[0].replace("/tmp/pylog-data", str(tmp_path / "data"))
    namespace: dict[str, object] = {}
    exec(compile(code, "README.md", "exec"), namespace)
    assert namespace["info"].first_offset == 0  # type: ignore[attr-defined]
    assert b"hello" in namespace["data"]  # type: ignore[operator]
    assert (tmp_path / "data" / "events-0" / "00000000000000000000.log").exists()
    assert (tmp_path / "data" / ".kafka_cleanshutdown").exists()


@pytest.mark.parametrize(
    "code",
    [
        pytest.param(c, id=f"client{i}", marks=[pytest.mark.spark] if "pylog.spark" in c else [])
        for i, c in enumerate(CLIENTS)
    ],
)
def test_client_example_runs(code: str, tmp_path: Path) -> None:
    with broker() as b:
        lines = run_python(code, tmp_path, bootstrap=b.bootstrap_servers, timeout=240).splitlines()
        assert len(lines) == 5 and lines[0].endswith(" 0"), lines
        group = re.search(r'group[._]id"?[:=] ?"(\w+)"', code)
        if group is None:  # the Spark example: it read what it produced, in order
            assert "pylog.spark" in code and lines == [f"trade {i}" for i in range(5)]
            return
        # A group example committed: its group's __consumer_offsets partition holds records.
        assert b.server is not None
        partitions = len(b.server.replica_manager.partitions_of("__consumer_offsets"))
        log = b.server.log_manager.get_log(
            ("__consumer_offsets", partition_for(group.group(1), partitions))
        )
        assert log is not None and log.log_end_offset > 0
