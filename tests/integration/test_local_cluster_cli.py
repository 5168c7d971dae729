"""``pylog cluster local`` (what ``make cluster`` runs): ZooKeeper and three
brokers until SIGINT, then a clean stop; a second run on the same directory
finds the same cluster and its topics."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

from broker_process import PYLOG, topic_name


def _start(directory: Path) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [PYLOG, "cluster", "local", "--dir", str(directory), "--base-port", "0",
         "--zookeeper-port", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("bootstrap.servers="):
            return proc, line.strip().split("=", 1)[1]
    raise AssertionError(f"pylog cluster local exited with {proc.wait(30)} before it was up")


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGINT)
    assert proc.wait(90) == 0


def _cli(*args: str) -> str:
    return subprocess.run(
        [PYLOG, *args], capture_output=True, text=True, check=True, timeout=60
    ).stdout


def test_local_cluster_runs_stops_and_comes_back(tmp_path: Path) -> None:
    topic = topic_name("local")
    proc, bootstrap = _start(tmp_path)
    try:
        assert len(bootstrap.split(",")) == 3
        described = _cli("cluster", "describe", "--bootstrap-server", bootstrap)
        assert "Brokers: 3" in described and "(controller)" in described
        _cli("topics", "create", "--bootstrap-server", bootstrap, "--topic", topic,
             "--partitions", "2", "--replication-factor", "3")  # fmt: skip
    finally:
        _stop(proc)
    logs = [tmp_path / f"broker-{b}" / "broker.log" for b in (1, 2, 3)]
    assert all("shut down in" in p.read_text() for p in logs)

    proc, bootstrap = _start(tmp_path)
    try:
        out = _cli("topics", "describe", "--bootstrap-server", bootstrap, "--topic", topic)
        assert "ReplicationFactor: 3" in out and "PartitionCount: 2" in out
    finally:
        _stop(proc)


def test_the_testing_example_in_docs_cluster_md_runs() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "cluster.md").read_text()
    start = doc.index("```python\nfrom confluent_kafka.admin import AdminClient, NewTopic")
    code = doc[start + len("```python\n") : doc.index("```\n", start + 10)]
    exec(compile(code, "docs/cluster.md", "exec"), {})
