"""Every snippet of docs/consumer-groups.md runs as written, against a real
broker (the mechanism of test_docs_clients.py): the Python blocks in a
subprocess with the documented address replaced by an embedded broker's, and
the ``pylog groups`` lines in order, after the snippets made their groups."""

from __future__ import annotations

import re
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from doc_snippets import ADDRESS, PYLOG, ROOT, code_blocks, run_python, shell_lines

from pylog.testing import EmbeddedBroker, broker

DOC = ROOT / "docs" / "consumer-groups.md"
PYTHON = code_blocks(DOC, "python")
# pylog's own lines; the page's lines of Kafka's tools (kafka-share-groups.sh)
# run in test_share_groups.py.
SHELL_LINES = [line for line in shell_lines(DOC) if line.strip().startswith("pylog ")]


@pytest.fixture(scope="module")
def embedded() -> Iterator[EmbeddedBroker]:
    with broker() as b:
        yield b


def test_the_doc_has_a_snippet_per_client() -> None:
    text = "\n".join(PYTHON)
    for client in ("confluent_kafka", "from kafka ", "aiokafka"):
        assert client in text, client
    for verb in ("list", "describe", "reset-offsets", "delete"):
        assert any(line.startswith(f"pylog groups {verb}") for line in SHELL_LINES), verb


def run_snippet(code: str, embedded: EmbeddedBroker, where: Path) -> str:
    return run_python(code, where, bootstrap=embedded.bootstrap_servers)


@pytest.mark.parametrize(
    "code",
    PYTHON,
    ids=["confluent", "kafka-python", "aiokafka", "confluent-kip848", "confluent-share"],
)
def test_client_snippet_runs(code: str, embedded: EmbeddedBroker, tmp_path: Path) -> None:
    lines = run_snippet(code, embedded, tmp_path).splitlines()
    if "ShareConsumer" in code:
        # a share group starts at the latest offset: which job comes first varies
        assert len(lines) == 10 and all(line.startswith("job ") for line in lines)
        return
    assert len(lines) == 10 and lines[0].endswith(" 0")


def test_pylog_groups_lines(embedded: EmbeddedBroker, tmp_path: Path) -> None:
    # The lines describe the group the confluent-kafka snippet leaves behind.
    for code in PYTHON:
        group = re.search(r'group[._]id"?[:=] ?"(\w+)"', code)
        assert group is not None
        cmd = [PYLOG, "groups", "list", "--bootstrap-server", embedded.bootstrap_servers]
        listed = subprocess.run(cmd, capture_output=True, text=True)
        if group.group(1) not in listed.stdout.split():
            run_snippet(code, embedded, tmp_path)
    outputs = []
    for line in SHELL_LINES:
        args = shlex.split(line.replace(ADDRESS, embedded.bootstrap_servers))
        out = subprocess.run([PYLOG, *args[1:]], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, (line, out.stderr)
        outputs.append(out.stdout)
    listing, typed, offsets, members, state, plan, shifted, deleted = outputs
    assert {"billing", "ledger", "analytics", "payouts"} <= set(listing.split())
    assert "payouts  consumer" in typed.splitlines() and "billing" not in typed
    assert sum(int(row.split()[3]) for row in offsets.splitlines()[1:]) == 10
    assert "Empty" in state
    assert all(row.split()[3] == "0" for row in plan.splitlines()[1:])
    assert "Deleted consumer group 'billing'." in deleted
    assert members.startswith("GROUP") and shifted.startswith("GROUP")
