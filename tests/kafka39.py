"""Apache Kafka 3.9 brokers in ZooKeeper mode beside the pylog brokers of a
:class:`~pylog.testing.LocalCluster`, on the cluster's ZooKeeper and chroot
(issue 25: the mixed cluster).

Kafka 3.9 is the last Kafka line with ZooKeeper mode; `make kafka39` copies its
broker jars (tests/kafka39/pom.xml names the version) into
${XDG_CACHE_HOME:-~/.cache}/pylog/kafka-<version>/libs. A :class:`Kafka39Broker`
is a :class:`~pylog.testing.ClusterBroker` (same start / stop / kill / restart,
``log_dir``, ``bootstrap_servers``), so a test puts it in ``cluster.brokers``
and the cluster's waits and the partition workload's checker
(tests/partition_workload.py) see it as one more broker.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

from pylog.testing import ClusterBroker, LocalCluster
from pylog.testing.cluster import CLUSTER_TEST_DEFAULTS

HERE = Path(__file__).resolve().parent

# Smaller than bin/kafka-server-start.sh's 1 GiB heap: a test broker holds a
# few MB of records, and the machine runs several brokers and clients at once.
KAFKA_JVM = [
    "-Xmx384M",
    "-Xms128M",
    "-XX:+UseSerialGC",
    "-Xshare:auto",
    "-Djava.awt.headless=true",
]

# reload4j (Kafka 3.x logs through slf4j onto it): INFO to stderr, which the
# helper sends to <dir>/broker.log, as LocalCluster does with a pylog broker's.
LOG4J = """\
log4j.rootLogger=INFO, stderr
log4j.appender.stderr=org.apache.log4j.ConsoleAppender
log4j.appender.stderr.Target=System.err
log4j.appender.stderr.layout=org.apache.log4j.PatternLayout
log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.org.apache.zookeeper=WARN
log4j.logger.kafka.log.LogCleaner=WARN
"""


def kafka39_version() -> str:
    """The version tests/kafka39/pom.xml fetches: one place names it."""
    pom = (HERE / "kafka39" / "pom.xml").read_text()
    m = re.search(r"<kafka\.version>([^<]+)</kafka\.version>", pom)
    assert m, "tests/kafka39/pom.xml names no kafka.version"
    return m.group(1)


def kafka39_libs() -> Path:
    """Kafka 3.9's jars; a clear failure naming `make kafka39` when absent."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    version = kafka39_version()
    libs = cache / "pylog" / f"kafka-{version}" / "libs"
    if not (libs / f"kafka_2.13-{version}.jar").exists():
        pytest.fail(
            f"Apache Kafka {version}'s jars are not in {libs}: run `make kafka39` "
            "(Maven fetches them, tests/kafka39/pom.xml), as `make test` does",
            pytrace=False,
        )
    return libs


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Kafka39Broker(ClusterBroker):
    """``kafka.Kafka server.properties`` of Apache Kafka 3.9 in ZooKeeper mode:
    ``broker.id``, the cluster's ``zookeeper.connect`` (chroot included), one
    PLAINTEXT listener that is also the inter-broker one, and the test
    timeouts LocalCluster gives its pylog brokers (CLUSTER_TEST_DEFAULTS)."""

    def __init__(
        self,
        broker_id: int,
        directory: str,
        overrides: Mapping[str, object] | None = None,
        *,
        startup_timeout: float = 120.0,
    ) -> None:
        props: dict[str, object] = {
            **CLUSTER_TEST_DEFAULTS,
            "offsets.topic.replication.factor": "3",
            **(overrides or {}),
        }
        super().__init__(
            broker_id, directory, props, port=_free_port(), startup_timeout=startup_timeout
        )
        self.libs = kafka39_libs()
        self._log_start = 0

    def properties(self) -> dict[str, str]:
        props = {
            "broker.id": str(self.broker_id),
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": self.log_dir,
            # The ids pylog's brokers use are set by hand too: none generated.
            "broker.id.generation.enable": "false",
        }
        props.update({k: str(v) for k, v in self.overrides.items()})
        return props

    def command(self) -> list[str]:
        config = os.path.join(self.dir, "server.properties")
        log4j = os.path.join(self.dir, "log4j.properties")
        return [
            "java", *KAFKA_JVM, f"-Dlog4j.configuration=file:{log4j}",
            "-cp", f"{self.libs}/*", "kafka.Kafka", config,
        ]  # fmt: skip

    def start(self) -> Kafka39Broker:
        if self.running:
            raise RuntimeError(f"broker {self.broker_id} is already running")
        os.makedirs(self.dir, exist_ok=True)
        Path(self.dir, "server.properties").write_text(
            "".join(f"{k}={v}\n" for k, v in self.properties().items())
        )
        Path(self.dir, "log4j.properties").write_text(LOG4J)
        log = open(self.log_file, "a")  # noqa: SIM115 - handed to the child
        self._log_start = log.tell()  # this start's lines begin here
        try:
            proc = subprocess.Popen(
                self.command(),
                stdout=subprocess.DEVNULL,
                stderr=log,
                start_new_session=True,
            )
        finally:
            log.close()
        self.proc = proc  # type: ignore[assignment]
        deadline = time.monotonic() + self.startup_timeout
        while not self._serving():
            if proc.poll() is not None:
                self.proc = None
                raise RuntimeError(
                    f"Kafka broker {self.broker_id} exited {proc.returncode}; "
                    f"see {self.log_file}: {self.log_tail()}"
                )
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(
                    f"Kafka broker {self.broker_id} did not start in "
                    f"{self.startup_timeout:.0f} s; see {self.log_file}"
                )
            time.sleep(0.2)
        self.listener_ports = {"PLAINTEXT": self.port}
        return self

    def _serving(self) -> bool:
        # KafkaServer logs "started" once its socket server accepts and it
        # is registered in /brokers/ids; only this start's lines count.
        try:
            with open(self.log_file, "rb") as f:
                f.seek(self._log_start)
                text = f.read().decode("utf-8", "replace")
        except OSError:
            return False
        return f"[KafkaServer id={self.broker_id}] started" in text and _accepts(self.port)

    def log_tail(self, lines: int = 15) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(Path(self.log_file).read_text(errors="replace").splitlines()[-lines:])
        return ""

    def log_lines(self, pattern: str) -> list[str]:
        """The lines of its log matching ``pattern`` (a regular expression)."""
        text = Path(self.log_file).read_text(errors="replace")
        return [line for line in text.splitlines() if re.search(pattern, line)]

    def __repr__(self) -> str:
        state = self.bootstrap_servers if self.running else "stopped"
        return f"Kafka39Broker({self.broker_id}, {state})"


def _accepts(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
        return True
    return False


def add_kafka39_broker(
    cluster: LocalCluster,
    broker_id: int,
    overrides: Mapping[str, object] | None = None,
    *,
    first: bool = False,
) -> Kafka39Broker:
    """A Kafka 3.9 broker in ``cluster`` (not started yet): LocalCluster.start
    gives it the cluster's ``zookeeper.connect`` and starts it with the pylog
    brokers, in ``cluster.brokers`` order: ``first`` puts it before them, so it
    is the only broker when the first controller election runs and wins it;
    otherwise it starts last and a pylog broker is the controller."""
    b = Kafka39Broker(broker_id, os.path.join(cluster.dir, f"kafka-{broker_id}"), overrides)
    if first:
        cluster.brokers = {broker_id: b, **cluster.brokers}
    else:
        cluster.brokers[broker_id] = b
    return b


# bin/kafka-<name>.sh of Kafka 3.9 -> its main class (`unzip -l` of
# kafka-tools-3.9.1.jar and kafka_2.13-3.9.1.jar).
TOOLS39 = {
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-configs": "kafka.admin.ConfigCommand",
}

# What bin/kafka-run-class.sh gives a tool, smaller; warnings to stderr as
# bin/'s tools-log4j.properties does.
TOOL_JVM39 = ["-Xmx256M", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto"]
TOOLS_LOG4J = """\
log4j.rootLogger=WARN, stderr
log4j.appender.stderr=org.apache.log4j.ConsoleAppender
log4j.appender.stderr.Target=System.err
log4j.appender.stderr.layout=org.apache.log4j.PatternLayout
log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n
"""


def run_kafka39_tool(
    tool: str, *args: str, workdir: Path, check: bool = True, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Kafka 3.9's bin/<tool>.sh, as its main class from the jars `make
    kafka39` fetches; with ``check`` a non-zero exit fails the test with the
    tool's output."""
    libs = kafka39_libs()
    if not (libs / f"kafka-tools-{kafka39_version()}.jar").exists():
        pytest.fail(f"no kafka-tools jar in {libs}: run `make kafka39`", pytrace=False)
    log4j = workdir / "tools-log4j.properties"
    log4j.write_text(TOOLS_LOG4J)
    cmd = [
        "java", *TOOL_JVM39, f"-Dlog4j.configuration=file:{log4j}",
        "-cp", f"{libs}/*", TOOLS39[tool], *args,
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=workdir)
    if check and done.returncode != 0:
        pytest.fail(
            f"{tool} {' '.join(args)} exited {done.returncode}\n"
            f"stdout: {done.stdout[-3000:]}\nstderr: {done.stderr[-3000:]}",
            pytrace=False,
        )
    return done


__all__ = [
    "Kafka39Broker",
    "add_kafka39_broker",
    "kafka39_libs",
    "kafka39_version",
    "run_kafka39_tool",
]
