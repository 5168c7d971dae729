"""Every snippet of docs/clients.md runs as written, against a real broker.

Python blocks run in a subprocess (with a time limit) against an embedded
broker, with the documented address 127.0.0.1:9092 replaced by the broker's;
the block defining a pytest test runs under pytest, through the installed
``pylog_broker`` plugin; the shell blocks' ``pylog broker start`` lines start a
broker (on port 0) and stop it, and their kcat lines run in order.
"""

from __future__ import annotations

import re
import shlex
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from doc_snippets import ADDRESS, PYLOG, ROOT, code_blocks, run_python, shell_lines

from pylog.testing import EmbeddedBroker, broker

DOC = ROOT / "docs" / "clients.md"
PYTHON = code_blocks(DOC, "python")
SCRIPTS = [b for b in PYTHON if "def test_" not in b]
PYTEST_BLOCKS = [b for b in PYTHON if "def test_" in b]
SHELL_LINES = shell_lines(DOC)


def test_the_doc_has_every_snippet() -> None:
    text = "\n".join(PYTHON)
    for client in ("confluent_kafka", "from kafka ", "aiokafka", "pylog.testing"):
        assert client in text, client
    assert len(PYTEST_BLOCKS) == 1 and "pylog_broker" in PYTEST_BLOCKS[0]
    assert any(line.startswith("kcat") for line in SHELL_LINES)
    assert any(line.startswith("pylog broker start") for line in SHELL_LINES)


@pytest.fixture
def embedded() -> Iterator[EmbeddedBroker]:
    with broker() as b:
        yield b


@pytest.mark.parametrize("code", SCRIPTS, ids=[f"block{i}" for i in range(len(SCRIPTS))])
def test_python_snippet_runs(code: str, embedded: EmbeddedBroker, tmp_path: Path) -> None:
    uses_address = ADDRESS in code
    stdout = run_python(code, tmp_path, bootstrap=embedded.bootstrap_servers, timeout=60)
    if uses_address:  # a client snippet: it read back what it wrote
        assert "hello" in stdout
        assert embedded.server is not None
        assert embedded.server.log_manager.get_log(("events", 0)) is not None
    else:  # pylog.testing.broker(): a broker of its own
        assert "127.0.0.1:" in stdout


def test_pytest_fixture_snippet(tmp_path: Path) -> None:
    (tmp_path / "test_snippet.py").write_text(PYTEST_BLOCKS[0])
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_snippet.py"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert "1 passed" in out.stdout


def test_broker_start_lines(tmp_path: Path) -> None:
    makefile = (DOC.parent.parent / "Makefile").read_text()
    assert re.search(r"^run:.*\n\t\$\(VENV\)/bin/pylog broker start$", makefile, re.M)
    starts = [line for line in SHELL_LINES if line.startswith("pylog broker start")]
    assert starts
    for n, line in enumerate(starts):
        where = tmp_path / f"run{n}"
        where.mkdir()
        args = shlex.split(line.replace("/tmp/pylog-data", str(where / "data")), comments=True)
        # Port 0 rather than the documented one (later overrides win).
        args += ["--override", "listeners=PLAINTEXT://127.0.0.1:0", "--log-level", "warning"]
        proc = subprocess.Popen([PYLOG, *args[1:]], stdout=subprocess.PIPE, text=True, cwd=where)
        try:
            assert proc.stdout is not None
            assert "started: PLAINTEXT://127.0.0.1:" in proc.stdout.readline()
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(20) == 0
        data = where / "data" if "log.dirs" in line else where / "pylog-data"
        assert (data / ".kafka_cleanshutdown").exists(), line


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed (make tools)")
def test_kcat_lines(embedded: EmbeddedBroker) -> None:
    lines = [line for line in SHELL_LINES if "kcat" in line]
    outputs = []
    for line in lines:
        out = subprocess.run(
            ["bash", "-c", line.replace(ADDRESS, embedded.bootstrap_servers)],
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        assert out.returncode == 0, (line, out.stderr)
        outputs.append(out.stdout)
    listing, _, consumed = outputs
    assert "1 brokers:" in listing
    assert consumed.splitlines() == ["k1=hello @0", "k2=world @1"]
