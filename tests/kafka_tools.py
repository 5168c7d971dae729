"""Apache Kafka's own command-line tools, run as their Java main classes from
the jars `make kafka` copies into ${XDG_CACHE_HOME:-~/.cache}/pylog/kafka-<version>/libs
(bench/kafka/pom.xml names the version), and Apache Kafka itself (KRaft
combined mode, started by bench/kafka_peer.py's KafkaPeer) for the on-disk
format tests.

The bin/kafka-*.sh scripts are not in those jars; each is a thin wrapper around
one main class, so a tool here is `java -cp <libs>/* <main class> <args>`.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"

# bin/kafka-<name>.sh -> its main class in Kafka 4.x (checked with `unzip -l`
# on kafka-tools-<v>.jar and kafka_2.13-<v>.jar).
TOOLS = {
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-share-groups": "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
    "kafka-configs": "kafka.admin.ConfigCommand",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-dump-log": "org.apache.kafka.tools.DumpLogSegments",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    # kafka.admin.AclCommand before Kafka 4
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-client-metrics": "org.apache.kafka.tools.ClientMetricsCommand",
}

# What bin/kafka-run-class.sh gives a tool's JVM, smaller: the tools here
# handle a few records. Tiered compilation stopped at C1 starts them faster.
TOOL_JVM = [
    "-Xmx256M",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Xshare:auto",
    "-Djava.awt.headless=true",
]

# Warnings and errors to stderr, as bin/ scripts' tools-log4j2.yaml does.
LOG4J2 = """\
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = err
appender.err.type = Console
appender.err.name = err
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
"""


def _bench_module() -> object:
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    import kafka_peer  # bench/kafka_peer.py: the version, the cache path, KafkaPeer

    return kafka_peer


def kafka_version() -> str:
    return str(_bench_module().kafka_version())  # type: ignore[attr-defined]


def kafka_libs() -> Path:
    """Kafka's jars; a clear failure naming `make kafka` when they are absent."""
    libs = Path(_bench_module().default_libs())  # type: ignore[attr-defined]
    jar = libs / f"kafka-tools-{kafka_version()}.jar"
    if not jar.exists():
        pytest.fail(
            f"Apache Kafka's jars are not in {libs} (no {jar.name}): run `make kafka` "
            "(Maven fetches them, bench/kafka/pom.xml), as `make test` does",
            pytrace=False,
        )
    return libs


def _log4j(workdir: Path) -> str:
    path = workdir / "tools-log4j2.properties"
    if not path.exists():
        path.write_text(LOG4J2)
    return f"-Dlog4j2.configurationFile={path}"


def run_tool(
    tool: str,
    *args: str,
    workdir: Path,
    stdin: str | None = None,
    timeout: float = 120,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    """Run bin/<tool>.sh's main class; with ``check`` a non-zero exit fails the
    test with the tool's output."""
    libs = kafka_libs()
    cmd = ["java", *TOOL_JVM, _log4j(workdir), "-cp", f"{libs}/*", TOOLS[tool], *args]
    done = subprocess.run(
        cmd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=workdir,
        env={**os.environ, "KAFKA_HEAP_OPTS": ""},
    )
    if check and done.returncode != 0:
        pytest.fail(
            f"{tool} {' '.join(args)} exited {done.returncode}\n"
            f"stdout: {done.stdout[-3000:]}\nstderr: {done.stderr[-3000:]}",
            pytrace=False,
        )
    return done


def start_kafka(workdir: Path, extra: dict[str, str] | None = None) -> object:
    """Apache Kafka in KRaft combined mode under ``workdir/kafka`` (its log dir
    is ``workdir/kafka/logs``), ``extra`` broker properties over the defaults:
    bench/kafka_peer.py's KafkaPeer, stopped with ``.stop()`` (SIGTERM, a clean
    shutdown)."""
    libs = kafka_libs()
    return _bench_module().KafkaPeer(str(workdir), libs, extra)  # type: ignore[attr-defined]


def restart_kafka(peer: Any) -> None:
    """Start a stopped ``start_kafka`` broker again on its config, ports and data."""
    bench: Any = _bench_module()
    peer.stderr = open(peer.dir / "kafka.stderr", "a+b")  # noqa: SIM115
    peer.proc = subprocess.Popen(
        ["java", *bench.KAFKA_JVM, peer.log4j, "-cp", peer.classpath, "kafka.Kafka",
         str(peer.dir / "server.properties")],
        stdout=subprocess.DEVNULL,
        stderr=peer.stderr,
    )  # fmt: skip
    peer.pid = peer.proc.pid
    peer._wait_ready(120)


# Kafka 4.3's DumpLogSegments starts each .log file's "last offset" at -1 and
# reports the first record of any segment not based at 0 as non-consecutive
# ("-1 is followed by <base offset>"), for Kafka's own files as well: that one
# pair is the tool's, every other is a finding.
def dump_log_findings(out: str) -> list[str]:
    """The lines of kafka-dump-log's output that report a problem."""
    lines = out.splitlines()
    bad: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        m = re.match(r"Non-consecutive offsets in (\S+/(\d{20})\.log)$", line)
        if m:
            i += 1
            while i < len(lines) and lines[i].startswith("  "):
                if lines[i].strip() != f"-1 is followed by {int(m.group(2))}":
                    bad.append(f"{line}: {lines[i]}")
                i += 1
            continue
        if re.search(r"error|mismatch|exception|not found|corrupt|failed", line, re.I):
            bad.append(line)
        i += 1
    return bad
