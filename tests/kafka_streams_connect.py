"""Kafka Streams and Kafka Connect (Apache Kafka's own, from Maven Central) as
subprocesses for the integration tests: the word-count program of
tests/kafka-streams and Connect's standalone worker, both run from the jars
`make kafka-streams-connect` puts into
${XDG_CACHE_HOME:-~/.cache}/pylog/streams-connect-<version>/build (the version
is the one bench/kafka/pom.xml names, as for Kafka's tools).
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import IO, Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ROOT / "tests" / "kafka-streams"
MAKE_TARGET = "make kafka-streams-connect"

# Small heaps, C1 only and the serial collector: these JVMs handle a few
# hundred records on 2 shared cores, where start-up time is what counts.
JVM = ["-Xmx256M", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true"]

# Warnings and errors to stderr (a file the test shows when it fails), and the
# line of Connect's REST server that names the port it bound.
LOG4J2 = """\
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = err
appender.err.type = Console
appender.err.name = err
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
logger.rest.name = org.apache.kafka.connect.runtime.rest.RestServer
logger.rest.level = INFO
"""


# How a JVM stopped by SIGTERM exits: 143 once its shutdown hooks ran, or as
# killed by the signal when it arrives while the JVM is already exiting.
SIGTERM_EXITS = (128 + signal.SIGTERM, -signal.SIGTERM)


def kafka_version() -> str:
    pom = (ROOT / "bench" / "kafka" / "pom.xml").read_text()
    m = re.search(r"<kafka\.version>([^<]+)</kafka\.version>", pom)
    assert m, "bench/kafka/pom.xml names no kafka.version"
    return m.group(1)


def build_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pylog" / f"streams-connect-{kafka_version()}" / "build"


def classpath() -> str:
    """The word-count jar and every runtime jar of Streams and Connect; fails
    naming the make target when they are missing or older than the sources."""
    build = build_dir()
    jar = build / "pylog-kafka-streams.jar"
    if not jar.is_file() or not (build / "lib" / f"connect-file-{kafka_version()}.jar").is_file():
        pytest.fail(
            f"Kafka Streams/Connect are not built in {build}: run `{MAKE_TARGET}`", pytrace=False
        )
    newest = max(p.stat().st_mtime for p in SOURCES.rglob("*") if p.is_file())
    if jar.stat().st_mtime < newest:
        pytest.fail(f"{jar} is older than tests/kafka-streams: run `{MAKE_TARGET}`", pytrace=False)
    return f"{jar}:{build / 'lib'}/*"


def log4j_option(workdir: Path) -> str:
    path = workdir / "log4j2.properties"
    if not path.exists():
        path.write_text(LOG4J2)
    return f"-Dlog4j2.configurationFile={path}"


def write_properties(path: Path, props: dict[str, object]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


class JavaProcess:
    """A JVM whose stdout lines are JSON objects (or log lines), read on a
    thread; stderr goes to ``<workdir>/<name>.stderr``."""

    def __init__(self, name: str, workdir: Path, main: str, args: list[str]) -> None:
        self.name = name
        self.stderr_path = workdir / f"{name}.stderr"
        err = open(self.stderr_path, "ab")  # noqa: SIM115
        try:
            self.proc = subprocess.Popen(
                ["java", *JVM, log4j_option(workdir), "-cp", classpath(), main, *args],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                cwd=workdir,
            )
        finally:
            err.close()
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True).start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            if line.startswith("{"):
                self.lines.put(json.loads(line))

    def stderr_tail(self, chars: int = 4000) -> str:
        return self.stderr_path.read_text(errors="replace")[-chars:]

    def wait_for_log(self, pattern: str, timeout: float) -> re.Match[str]:
        """The first stderr line matching ``pattern`` (the timeout is an upper bound)."""
        deadline = time.monotonic() + timeout
        while True:
            m = re.search(pattern, self.stderr_path.read_text(errors="replace"))
            if m is not None:
                return m
            if self.proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(
                    f"{self.name}: no {pattern!r} in its log (exit {self.proc.returncode})\n"
                    f"stderr:\n{self.stderr_tail()}",
                    pytrace=False,
                )
            time.sleep(0.1)

    def rest_url(self, timeout: float = 120) -> str:
        """A Connect worker's REST address (it listens on an ephemeral port),
        once it serves its resources (it answers 404 until then)."""
        url = self.wait_for_log(r"REST server listening at (http://\S+?)/?,", timeout).group(1)
        self.wait_for_log(r"REST resources initialized", timeout)
        return url

    def wait_for(self, kind: str, timeout: float, **match: object) -> dict[str, Any]:
        """The next stdout object of ``"type": kind`` with the given fields; an
        error line, an exit or the timeout (an upper bound) fails the test."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                pytest.fail(
                    f"{self.name}: no {kind} {match} within {timeout}s; saw {self.seen[-10:]}\n"
                    f"stderr:\n{self.stderr_tail()}",
                    pytrace=False,
                )
            try:
                obj = self.lines.get(timeout=min(left, 0.5))
            except queue.Empty:
                if self.proc.poll() is not None and self.lines.empty():
                    pytest.fail(
                        f"{self.name} exited {self.proc.returncode} before {kind} {match}; "
                        f"saw {self.seen[-10:]}\nstderr:\n{self.stderr_tail()}",
                        pytrace=False,
                    )
                continue
            self.seen.append(obj)
            if obj.get("type") == "error":
                pytest.fail(f"{self.name}: {obj}\nstderr:\n{self.stderr_tail()}", pytrace=False)
            if obj.get("type") == kind and all(obj.get(k) == v for k, v in match.items()):
                return obj

    def close_stdin(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()

    def wait(self, timeout: float) -> int:
        return self.proc.wait(timeout)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60) -> int:
        """Signal the JVM (SIGTERM runs its shutdown hooks: a clean stop) and wait."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        finally:
            if self.proc.stdin is not None and not self.proc.stdin.closed:
                self.proc.stdin.close()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()


def word_count(
    workdir: Path,
    bootstrap: str,
    app_id: str,
    input_topic: str,
    output_topic: str,
    state_dir: Path,
    **configs: object,
) -> JavaProcess:
    """tests/kafka-streams' WordCount, running until ``close_stdin()``; the
    keyword configs (dots as underscores) go to Streams."""
    extra = [f"{k.replace('_', '.')}={v}" for k, v in configs.items()]
    args = [bootstrap, app_id, input_topic, output_topic, str(state_dir), *extra]
    name = f"streams-{app_id}-{state_dir.name}"  # one log per instance
    return JavaProcess(name, workdir, "io.pylog.streams.WordCount", args)


def connect_standalone(workdir: Path, worker: Path, *connectors: Path) -> JavaProcess:
    """Connect's standalone worker (bin/connect-standalone.sh's main class)."""
    return JavaProcess(
        "connect-standalone",
        workdir,
        "org.apache.kafka.connect.cli.ConnectStandalone",
        [str(worker), *(str(c) for c in connectors)],
    )


def connect_distributed(workdir: Path, worker: Path, name: str) -> JavaProcess:
    """A distributed Connect worker (bin/connect-distributed.sh's main class);
    its log goes to ``<workdir>/<name>.stderr``."""
    return JavaProcess(
        name, workdir, "org.apache.kafka.connect.cli.ConnectDistributed", [str(worker)]
    )
