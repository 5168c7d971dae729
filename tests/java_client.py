"""The Java Kafka client (kafka-clients 4.x) for the integration tests: the
program in tests/java, built by `make java-client` into a cache outside the
repository, run as a subprocess that prints one JSON object per line.

    run_java("produce", "--bootstrap", b, "--topic", t, "--count", "10")
    # -> JavaResult(returncode=0, lines=[{"type": "ack", ...}, ..., {"type": "done", ...}])

Subcommands and options: tests/java/src/main/java/io/pylog/testclient/Main.java.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_SOURCES = Path(__file__).resolve().parent / "java"
MAKE_TARGET = "make java-client"


def cache_dir() -> Path:
    """Where the Makefile builds it: $XDG_CACHE_HOME/pylog/java, else ~/.cache/pylog/java."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pylog" / "java"


def jar_path() -> Path:
    """The built jar (PYLOG_JAVA_CLIENT_JAR overrides); fails naming the make
    target when it is missing or older than tests/java."""
    override = os.environ.get("PYLOG_JAVA_CLIENT_JAR")
    jar = Path(override) if override else cache_dir() / "build" / "pylog-java-client.jar"
    if shutil.which("java") is None:
        raise RuntimeError(f"no `java` on PATH: run `make tools` then `{MAKE_TARGET}`")
    if not jar.is_file():
        raise RuntimeError(f"the Java client is not built ({jar} is missing): run `{MAKE_TARGET}`")
    if override is None:
        newest = max(p.stat().st_mtime for p in _SOURCES.rglob("*") if p.is_file())
        if jar.stat().st_mtime < newest:
            raise RuntimeError(f"{jar} is older than tests/java: run `{MAKE_TARGET}`")
    return jar


def command(*args: str) -> list[str]:
    """The argv that runs the Java client with ``args``."""
    # A small heap and no JIT tiers beyond C1: the tests start many short-lived JVMs on 2 cores.
    return ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-jar", str(jar_path()), *args]


@dataclass
class JavaResult:
    returncode: int
    lines: list[dict[str, Any]]
    stderr: str = field(repr=False)

    def of(self, kind: str) -> list[dict[str, Any]]:
        """The lines of one "type" (ack, failed, record, committed, topic, ...)."""
        return [line for line in self.lines if line.get("type") == kind]

    @property
    def last(self) -> dict[str, Any]:
        assert self.lines, f"the Java client printed nothing; stderr:\n{self.stderr[-4000:]}"
        return self.lines[-1]

    def check(self) -> JavaResult:
        """Asserts a zero exit status, showing the output otherwise."""
        assert self.returncode == 0, (
            f"java client exited {self.returncode}: {self.lines[-5:]}\n"
            f"stderr:\n{self.stderr[-4000:]}"
        )
        return self


def _parse(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def run_java(*args: str, timeout: float = 120, stdin: str | None = None) -> JavaResult:
    """Runs one subcommand to its end; ``timeout`` only catches a hang."""
    proc = subprocess.run(
        command(*args), input=stdin, capture_output=True, text=True, timeout=timeout
    )
    return JavaResult(proc.returncode, _parse(proc.stdout), proc.stderr)


def start_java(*args: str, stderr: Path) -> subprocess.Popen[str]:
    """Starts a subcommand with stdin and stdout as line-buffered text pipes and
    its stderr (the client's own log) written to ``stderr``, which cannot fill up."""
    with stderr.open("w") as err:
        return subprocess.Popen(
            command(*args),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            bufsize=1,
        )
