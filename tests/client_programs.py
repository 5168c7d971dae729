"""The Go and Node client programs the integration tests drive (tests/go,
tests/node): built or installed by `make go-client` / `make node-client` into a
cache outside the repository, run as subprocesses that print one JSON object
per line.

    run_client(go_command("franz", "produce", "--bootstrap", b, "--topic", t, "--count", "10"))
    # -> ClientResult(returncode=0, lines=[{"type": "ack", ...}, ..., {"type": "done", ...}])

A consumer-group member runs until told to stop: `Member` collects its lines
as they come, `wait_for` waits (an upper bound that only catches a hang) for
what the test expects, and `stop` writes "stop" so it commits and leaves.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parent
Line = dict[str, Any]


def cache_dir() -> Path:
    """Where the Makefile puts them: $XDG_CACHE_HOME/pylog, else ~/.cache/pylog."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pylog"


def _require(built: Path, sources: list[Path], target: str) -> None:
    """Fails naming the make target when ``built`` is missing or older than a source."""
    if not built.exists():
        raise RuntimeError(f"{built} is missing: run `make {target}`")
    if built.stat().st_mtime < max(p.stat().st_mtime for p in sources):
        raise RuntimeError(f"{built} is older than {sources[0].parent}: run `make {target}`")


def go_binary() -> Path:
    """tests/go built by `make go-client` (PYLOG_GO_CLIENT overrides)."""
    override = os.environ.get("PYLOG_GO_CLIENT")
    if override:
        return Path(override)
    binary = cache_dir() / "go" / "bin" / "pylog-go-client"
    _require(binary, [p for p in (TESTS / "go").iterdir() if p.is_file()], "go-client")
    return binary


def kgo_test_binary() -> Path:
    """franz-go's own kgo package tests, compiled by `make go-client`."""
    binary = cache_dir() / "go" / "bin" / "kgo.test"
    _require(binary, [TESTS / "go" / "go.mod", TESTS / "go" / "go.sum"], "go-client")
    return binary


def go_env() -> dict[str, str]:
    """The environment `make go-client` builds in: its module and build caches,
    so a Go program using the same modules builds without the network."""
    go = cache_dir() / "go"
    return {
        **os.environ,
        "GOMODCACHE": str(go / "mod"),
        "GOCACHE": str(go / "build"),
        "GOFLAGS": "-mod=mod -modcacherw -buildvcs=false",
        "GOPROXY": "off",
    }


def go_command(library: str, *args: str) -> list[str]:
    """The argv running the Go program with franz-go ("franz") or sarama."""
    return [str(go_binary()), library, *args]


def node_modules() -> Path:
    """tests/node's dependencies installed by `make node-client`."""
    modules = cache_dir() / "node" / "node_modules"
    lock = [TESTS / "node" / "package.json", TESTS / "node" / "package-lock.json"]
    _require(modules / ".package-lock.json", lock, "node-client")
    return modules


def node_command(*args: str) -> list[str]:
    """The argv running tests/node/client.js."""
    node = shutil.which("node")
    if node is None:
        raise RuntimeError("no `node` on PATH: run `make tools`")
    return [node, str(TESTS / "node" / "client.js"), *args]


def node_env() -> dict[str, str]:
    """The environment in which client.js finds its packages in the cache."""
    return {**os.environ, "NODE_PATH": str(node_modules())}


def _parse(stdout: str) -> list[Line]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


@dataclass
class ClientResult:
    returncode: int
    lines: list[Line]
    stderr: str = field(repr=False)

    def of(self, kind: str) -> list[Line]:
        """The lines of one "type" (ack, failed, record, created, ...)."""
        return [line for line in self.lines if line.get("type") == kind]

    @property
    def last(self) -> Line:
        assert self.lines, f"the client printed nothing; stderr:\n{self.stderr[-4000:]}"
        return self.lines[-1]

    def check(self) -> ClientResult:
        """Asserts a zero exit status, showing the output otherwise."""
        assert self.returncode == 0, (
            f"client exited {self.returncode}: {self.lines[-5:]}\nstderr:\n{self.stderr[-4000:]}"
        )
        return self


def run_client(
    cmd: list[str], *, timeout: float = 120, env: dict[str, str] | None = None
) -> ClientResult:
    """Runs one subcommand to its end; ``timeout`` only catches a hang."""
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    return ClientResult(proc.returncode, _parse(proc.stdout), proc.stderr)


class Member:
    """A long-running subcommand (a consumer-group member) whose JSON lines are
    collected by a thread as it prints them; its own log goes to ``stderr``."""

    def __init__(
        self, name: str, cmd: list[str], stderr: Path, env: dict[str, str] | None = None
    ) -> None:
        self.name = name
        self.stderr = stderr
        self._lines: list[Line] = []
        self._lock = threading.Lock()
        with stderr.open("w") as err:
            self.proc = subprocess.Popen(
                cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                text=True, bufsize=1, env=env,
            )  # fmt: skip
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            if raw.startswith("{"):
                with self._lock:
                    self._lines.append(json.loads(raw))

    @property
    def lines(self) -> list[Line]:
        with self._lock:
            return list(self._lines)

    def of(self, kind: str) -> list[Line]:
        return [line for line in self.lines if line.get("type") == kind]

    def owned(self) -> list[int] | None:
        """The partitions it owns now (its last "owned" line), None before any."""
        owned = self.of("owned")
        return sorted(owned[-1]["partitions"]) if owned else None

    def records(self) -> list[Line]:
        return self.of("record")

    def describe(self) -> str:
        events = [line for line in self.lines if line["type"] not in ("record", "committed")]
        log = self.stderr.read_text(errors="replace")[-3000:]
        return f"{self.name}: exit={self.proc.poll()} events={events[-12:]}\nlog:\n{log}"

    def wait_for(self, what: str, cond: Callable[[], bool], timeout: float = 90) -> None:
        """Waits until ``cond()`` holds; the timeout only catches a hang."""
        deadline = time.monotonic() + timeout
        while not cond():
            if self.proc.poll() is not None:
                self._reader.join(5)
                if cond():
                    return
                raise AssertionError(f"{self.name} exited before {what}\n{self.describe()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name}: no {what} after {timeout}s\n{self.describe()}")
            time.sleep(0.1)

    def stop(self, timeout: float = 90) -> int:
        """Says "stop": the member commits, leaves the group and exits."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write("stop\n")
            self.proc.stdin.close()
        except BrokenPipeError:
            pass
        code = self.proc.wait(timeout)
        self._reader.join(10)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def shared_out(partitions: list[int], *members: Member) -> bool:
    """Whether each member owns some of ``partitions`` and together all of them, once each."""
    owned = [m.owned() or [] for m in members]
    return all(owned) and sorted(p for o in owned for p in o) == partitions


# ------------------------------------------------ what the clients wrote, read another way


def batches(log_dir: Path) -> list[tuple[int, int, int, int, int]]:
    """(base offset, record count, producer id, producer epoch, base sequence)
    of every batch in a partition's segments, read from the v2 batch header."""
    out = []
    for segment in sorted(log_dir.glob("*.log")):
        data = segment.read_bytes()
        pos = 0
        while pos + 61 <= len(data):
            base_offset, length = struct.unpack_from(">qi", data, pos)
            pid, epoch, seq, count = struct.unpack_from(">qhii", data, pos + 43)
            out.append((base_offset, count, pid, epoch, seq))
            pos += 12 + length
    return out


def ck_read(bootstrap: str, topic: str, partition: int, count: int) -> list[tuple]:
    """(key, value, offset) of ``count`` records read by confluent-kafka."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    c.assign([TopicPartition(topic, partition, 0)])
    out: list[tuple] = []
    deadline = time.monotonic() + 60
    try:
        while len(out) < count and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None:
                assert m.error() is None, m.error()
                out.append((m.key(), m.value(), m.offset()))
    finally:
        c.close()
    return out
