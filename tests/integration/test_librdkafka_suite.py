"""librdkafka's own test suite (the tests/ directory of its source, built by
`make librdkafka-tests` from Debian's source package into
~/.cache/pylog/librdkafka-<version>) against pylog broker processes.

tests/librdkafka/tests.txt names every test of that version: the ones that
apply to a single broker and to what pylog has are run, in the suite's
"default" scenario (auto.create.topics.enable=true, num.partitions=4, as the
suite's scenarios/default.json asks) and its "noautocreate" scenario (a
second broker with auto.create.topics.enable=false); the tests marked
`cluster` (transactions on replication-factor-3 topics) share one
three-broker pylog cluster (pylog.testing.cluster, with its ZooKeeper);
each of the others carries the reason it is left out. Every run test must
pass.

The suite's kafka-topics.sh calls (test_kafka_topics(): create a topic with
configs, add partitions, delete) run Apache Kafka's own TopicCommand from the
jars `make kafka` fetches, through a bin/kafka-topics.sh under KAFKA_PATH.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from broker_process import BrokerProcess
from client_programs import TESTS, cache_dir
from kafka_tools import TOOL_JVM, TOOLS, kafka_libs
from security_support import listener_ports, plain_jaas

from pylog.testing.cluster import LocalCluster

ROOT = TESTS.parent
LIST = TESTS / "librdkafka" / "tests.txt"

# The broker version the suite is told it talks to (TEST_KAFKA_VERSION): its
# tests gate features on it (TEST_BRKVER), and from 3.0 on its kafka-topics.sh
# calls use --bootstrap-server. pylog serves the APIs of Kafka's ZooKeeper era
# up to 3.9, with Kafka 4's topic configs.
KAFKA_VERSION = "3.9.0"

# `|<colour> <name> | <state> | <seconds>s <colour>| <why>`: the runner's summary.
SUMMARY = re.compile(
    r"^\|\s*(\d{4}_\w+)\s*\|\s*(PASSED|FAILED|SKIPPED|RUNNING|DNS)\s*\|(.*)$", re.M
)
ANSI = re.compile(r"\x1b\[[0-9;]*m")
# The `sasl` group's one PLAIN user.
SASL_USER = ("rdkafka", "rdkafka-secret")


@dataclass(frozen=True)
class Entry:
    name: str
    verdict: str  # "run" or "skip"
    scenario: str  # for "run": "default" or "noautocreate"
    reason: str  # for "skip": "<group>: <why>"

    @property
    def number(self) -> str:
        return self.name.split("_", 1)[0]


def curated() -> list[Entry]:
    entries = []
    for line in LIST.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, verdict, *rest = line.split(maxsplit=2)
        tail = rest[0] if rest else ""
        if verdict == "run":
            entries.append(Entry(name, "run", tail or "default", ""))
        else:
            assert verdict == "skip" and ": " in tail, f"tests.txt: {line!r}"
            entries.append(Entry(name, "skip", "", tail))
    return entries


def librdkafka_version() -> str:
    m = re.search(r"^LIBRDKAFKA_VERSION \?= (\S+)$", (ROOT / "Makefile").read_text(), re.M)
    assert m is not None
    return m.group(1)


def suite_dir() -> Path:
    src = cache_dir() / f"librdkafka-{librdkafka_version()}" / "src"
    if not (src / "tests" / "test-runner").exists():
        pytest.fail(
            f"{src}/tests/test-runner is missing: run `make librdkafka-tests`", pytrace=False
        )
    return src


def suite_table(src: Path) -> dict[str, str]:
    """The version's test table (tests/test.c): each test's name and flags."""
    text = (src / "tests" / "test.c").read_text()
    table = text[text.index("struct test tests[]") :]
    return dict(re.findall(r"_TEST\((\w+),\s*([^,)]*)", table[: table.index("{NULL}")]))


def kafka_path(where: Path) -> Path:
    """A KAFKA_PATH whose bin/kafka-topics.sh is Kafka's TopicCommand."""
    bin_dir = where / "kafka" / "bin"
    bin_dir.mkdir(parents=True)
    java = " ".join(shlex.quote(a) for a in ["java", *TOOL_JVM, "-cp", f"{kafka_libs()}/*"])
    # kafka-acls.sh: the `acls` group's deny ACLs (0109, 0115, 0119).
    for tool in ("kafka-topics", "kafka-acls"):
        script = bin_dir / f"{tool}.sh"
        script.write_text(f'#!/bin/sh\nexec {java} {TOOLS[tool]} "$@"\n')
        script.chmod(0o755)
    # java/run-class.sh (the suite's Java helpers) runs this with CLASSPATH
    # naming the helpers' directory, as Kafka's own script takes it.
    run_class = bin_dir / "kafka-run-class.sh"
    jvm = " ".join(shlex.quote(a) for a in ["java", *TOOL_JVM])
    libs = shlex.quote(f"{kafka_libs()}/*")
    run_class.write_text(f'#!/bin/sh\nexec {jvm} -cp "$CLASSPATH:"{libs} "$@"\n')
    run_class.chmod(0o755)
    return where / "kafka"


def java_helpers(src: Path) -> None:
    """The suite's Java helpers (tests/java: TransactionProducerCli for
    0098), compiled against Kafka's client jar beside their sources once."""
    java = src / "tests" / "java"
    if (java / "TransactionProducerCli.class").exists():
        return
    clients = sorted(kafka_libs().glob("kafka-clients-*.jar"))
    assert clients, f"no kafka-clients jar in {kafka_libs()}"
    subprocess.run(
        ["javac", "-nowarn", "-classpath", str(clients[0]), "-d", str(java),
         str(java / "TransactionProducerCli.java")],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip


def run_suite(
    src: Path,
    names: list[str],
    scenario: str,
    where: Path,
    parallel: int = 2,
    brokers: int = 1,
    extra: dict[str, object] | None = None,
    quick: bool = True,
) -> tuple[dict[str, str], str]:
    """Runs the tests ``names`` of one scenario against a fresh broker (or
    ``brokers`` of them, a ZooKeeper cluster), ``parallel`` at once: each
    test's state (PASSED, FAILED, SKIPPED) from the runner's summary, and the
    whole output."""
    where.mkdir(parents=True)
    overrides = {
        "num.partitions": 4,
        "auto.create.topics.enable": "false" if scenario == "noautocreate" else "true",
        # Kafka's default: the suite's group tests have their members join
        # within it, as they do against Kafka (0118 depends on it).
        "group.initial.rebalance.delay.ms": 3000,
        **(extra or {}),
    }
    sasl_ports: list[int] = []
    if brokers > 1:
        cluster = LocalCluster(brokers, overrides, directory=str(where / "cluster"))
        cluster.start()
        bootstrap = cluster.bootstrap_servers
        stop = cluster.close
        sasl_ports = [
            b.listener_ports["SASL_PLAINTEXT"]
            for b in cluster.brokers.values()
            if "SASL_PLAINTEXT" in b.listener_ports
        ]
    else:
        broker = BrokerProcess(where / "data", overrides, log_path=where / "broker.log").start()
        bootstrap = broker.bootstrap
        ports = listener_ports(broker.start_line)
        sasl_ports = [ports["SASL_PLAINTEXT"]] if "SASL_PLAINTEXT" in ports else []

        def stop() -> None:
            broker.stop(signal.SIGKILL)

    conf = where / "test.conf"
    # The suite's timeouts are upper bounds, doubled here as its test.conf
    # example suggests for slow machines (two cores shared with other work).
    lines = [f"bootstrap.servers={bootstrap}", "test.timeout.multiplier=2"]
    if sasl_ports:
        # The clients under test use the SASL listeners (PLAIN, a user of the
        # brokers' JAAS); kafka-topics.sh (BROKERS) the PLAINTEXT ones.
        user, password = SASL_USER
        lines[0] = "bootstrap.servers=" + ",".join(f"127.0.0.1:{p}" for p in sasl_ports)
        lines += ["security.protocol=SASL_PLAINTEXT", "sasl.mechanism=PLAIN",
                  f"sasl.username={user}", f"sasl.password={password}"]  # fmt: skip
    conf.write_text("".join(f"{line}\n" for line in lines))
    numbers = sorted({n.split("_", 1)[0] for n in names})
    # The runner works in a tests/ directory beside the library's src/ (0053
    # reads ../src/statistics_schema.json); its stats files land there.
    (where / "tests").mkdir()
    (where / "src").symlink_to(src / "src")
    # Its Java helpers run as java/run-class.sh from there.
    (where / "tests" / "java").symlink_to(src / "tests" / "java")
    log = where / "suite.log"
    try:
        with log.open("w") as out:
            subprocess.run(
                # -L: no local-only test; -Q: the suite's quick mode; -pN: N at
                # once. Line-buffered, so the summary is there even when the
                # runner aborts on a failure, as it does.
                ["stdbuf", "-oL", str(src / "tests" / "test-runner"),
                 "-L", *(["-Q"] if quick else []), f"-p{parallel}", "-s", scenario],
                stdout=out, stderr=subprocess.STDOUT, cwd=where / "tests", timeout=15 * 60,
                env={
                    **os.environ, "TESTS": ",".join(numbers), "TEST_KAFKA_VERSION": KAFKA_VERSION,
                    "RDKAFKA_TEST_CONF": str(conf), "KAFKA_PATH": str(kafka_path(where)),
                    "BROKERS": bootstrap,
                    "LD_LIBRARY_PATH": f"{src / 'src'}:{src / 'src-cpp'}",
                },
            )  # fmt: skip
    finally:
        stop()
    text = ANSI.sub("", log.read_text(errors="replace"))
    states = {name: state for name, state, _ in SUMMARY.findall(text)}
    # A test the summary does not list (the runner crashed or hung) failed.
    return {name: states.get(name, "FAILED") for name in names}, text


def failures(text: str) -> str:
    """The runner's own words on each failure: its "### Test ... ###" blocks,
    and every line saying FAIL (TEST_FAIL_LATER reports only that way)."""
    lines = re.findall(r"^### Test .* ###\n.*$|^.*FAIL.*$", text, re.M)
    return "\n".join(dict.fromkeys(lines))[-6000:]


def test_the_list_names_every_test_of_the_suite_once() -> None:
    names = [e.name for e in curated()]
    assert len(names) == len(set(names))
    assert names == list(suite_table(suite_dir()))


def test_no_skipped_test_shares_a_number_with_a_run_one() -> None:
    # The runner selects by number: a skipped test sharing one with a run test
    # would run too, unless its flags keep it out (-L: local; manual and
    # known-issue tests run only when asked for).
    flags = suite_table(suite_dir())
    entries = curated()
    run = {e.number for e in entries if e.verdict == "run"}
    kept_out = re.compile(r"TEST_F_(LOCAL|MANUAL|KNOWN_ISSUE)\b")
    shared = [
        e.name
        for e in entries
        if e.verdict == "skip" and e.number in run and not kept_out.search(flags[e.name])
    ]
    assert shared == []


def run_group(group: str, where: Path) -> None:
    """Runs one group of the list and checks every test of it passed."""
    src = suite_dir()
    scenario = "noautocreate" if group == "noautocreate" else "default"
    names = [e.name for e in curated() if e.verdict == "run" and e.scenario == group]
    # 0142 (sasl) creates its topic with replication factor 3.
    brokers = 3 if group in ("cluster", "sasl") else 1
    # "acls": an authorizer that lets everyone do what no ACL names, as the
    # suite's own clusters do, so that the tests' deny ACLs are what bites.
    # "sasl": three brokers with a SASL_PLAINTEXT listener (PLAIN) the clients
    # log in on, whose sessions last 5 s (connections.max.reauth.ms, KIP-368,
    # for 0142).
    extra: dict[str, object] = {}
    if group == "acls":
        extra = {
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "allow.everyone.if.no.acl.found": "true",
        }
    elif group == "sasl":
        extra = {
            "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            "inter.broker.listener.name": "PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas(
                {SASL_USER[0]: SASL_USER[1]}, login=SASL_USER
            ),
            "connections.max.reauth.ms": 5000,
        }
    if group == "cluster":
        java_helpers(src)
    # Most of a test's time is waiting (session timeouts, poll intervals), so
    # four at once finish in 0.6 of the time two take.
    parallel = 1 if group in ("serial", "cluster", "acls", "sasl") else 4
    # The sasl group's 0142 does its work in sub-tests quick mode leaves out.
    quick = group != "sasl"
    results, text = run_suite(src, names, scenario, where / "run", parallel, brokers, extra, quick)
    failed = sorted(n for n, s in results.items() if s != "PASSED")
    if failed:
        # Some of the suite's tests bound their waits by a few seconds (on a
        # machine whose two cores other work shares), and a test that times
        # out stops the runner (the rest never start): those run once more,
        # one at a time, on a fresh broker, and are named.
        again, retry = run_suite(src, failed, scenario, where / "rerun", 1, brokers, extra, quick)
        still = sorted(n for n, s in again.items() if s != "PASSED")
        assert still == [], f"{group}: failed twice: {still}\n{failures(retry)}\n{failures(text)}"
        warnings.warn(f"librdkafka tests passed only when run again: {failed}", stacklevel=1)
        results.update(again)
    assert sorted(n for n, s in results.items() if s == "PASSED") == sorted(names)


@pytest.mark.parametrize(
    "groups", [("default", "serial"), ("noautocreate", "acls", "sasl"), ("cluster",)],
    ids=["default+serial", "noautocreate+acls+sasl", "cluster"],
)  # fmt: skip
def test_librdkafka_own_tests(groups: tuple[str, ...], tmp_path: Path) -> None:
    # "serial": the default scenario one test at a time, for the tests whose
    # socket emulator (sockem) closes client sockets by number, which hits
    # another test's socket that reuses the number when two run at once in one
    # runner; a second runner process (its own broker) beside the default
    # group's does not share its sockets, so the two groups run side by side.
    # "cluster": the default scenario on three brokers, one test at a time;
    # "acls" on a broker with an authorizer, beside "noautocreate".
    with ThreadPoolExecutor(len(groups)) as pool:
        done = [pool.submit(run_group, g, tmp_path / g) for g in groups]
        errors = [str(e) for f in done if (e := f.exception()) is not None]
    assert errors == []
