"""`pylog console` in a real browser: Debian's headless Chromium, driven by
Playwright's Python API (its bundled driver speaks to the Chromium given as
``executable_path``: nothing is downloaded), against a real three-broker
pylog cluster and against Apache Kafka 4.x. The console runs as the
`pylog console` process a user starts.

Checked in the DOM: each page shows what the cluster says (brokers and the
controller, log dirs, API versions; topics, partitions, replicas, ISR,
configs with their sources; records with their headers; groups with their
lag); a topic is created and a record produced through the pages; names,
headers and values holding HTML or script show as text and run nothing; a
read-only console refuses changes and logs the refusal; killing a broker
marks its partitions under-replicated on the topic page. A screenshot of
each page is saved under the session's base temp directory
(``console-screenshots/``), named by cluster and page."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from broker_process import PYLOG, topic_name
from security_support import plain_jaas

from pylog.cli.client import ClusterClient
from pylog.protocol import ApiKey
from pylog.testing import LocalCluster

playwright_sync = pytest.importorskip(
    "playwright.sync_api", reason="the console extra (make install) brings Playwright"
)

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
DEADLINE_S = 90  # only catches hangs
SCRIPT = "<script>window.__ran = 1</script>"
IMG = '<img src=x onerror="window.__ran = 2">'


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ConsoleProcess:
    """`pylog console` serving one cluster on a free port."""

    def __init__(self, bootstrap: str, workdir: Path, *extra: str) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = workdir / f"console-{self.port}.log"
        self._out = open(self.log, "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [PYLOG, "console", "--bootstrap-server", bootstrap, "--port", str(self.port),
             "--timeout-ms", "10000", "--lag-interval", "1", *extra],
            stdout=self._out,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        deadline = time.monotonic() + DEADLINE_S
        while True:
            try:
                with urllib.request.urlopen(self.url + "/audit", timeout=5) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise AssertionError(f"the console did not start:\n{self.log.read_text()}")
            time.sleep(0.2)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._out.close()


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("console")


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.getbasetemp() / "console-screenshots"
    path.mkdir(exist_ok=True)
    return path


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not os.path.exists(CHROMIUM):
        pytest.fail("no chromium: `make tools` installs Debian's", pytrace=False)
    with playwright_sync.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    pg = context.new_page()
    pg.set_default_timeout(DEADLINE_S * 1000)
    try:
        yield pg
    finally:
        context.close()


BROKER_CONSOLE_PORT = _free_port()
SASL_USERS = {"admin": "admin-secret", "alice": "alice-secret"}
METRICS_PORTS = {b: _free_port() for b in (1, 2, 3)}


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    # Broker 1 also serves the console itself (console.port); each broker
    # serves /metrics for the Prometheus test.
    per_broker: dict[int, dict[str, object]] = {
        b: {"metrics.port": port} for b, port in METRICS_PORTS.items()
    }
    per_broker[1]["console.port"] = BROKER_CONSOLE_PORT
    # An authorizer, for the ACLs page; the console's and the brokers'
    # User:ANONYMOUS is a super user, so no ACL added changes what they may do.
    # A SASL_PLAINTEXT listener (PLAIN) for the sign-in test: admin is a
    # super user too, alice only what her ACLs allow.
    overrides = {
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:ANONYMOUS;User:admin",
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas(
            SASL_USERS, login=("admin", SASL_USERS["admin"])
        ),
    }
    with LocalCluster(3, overrides, per_broker=per_broker) as c:
        yield c


@pytest.fixture(scope="module")
def console(cluster: LocalCluster, workdir: Path) -> Iterator[ConsoleProcess]:
    c = ConsoleProcess(cluster.bootstrap_servers, workdir)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture(scope="module")
def read_only_console(cluster: LocalCluster, workdir: Path) -> Iterator[ConsoleProcess]:
    c = ConsoleProcess(cluster.bootstrap_servers, workdir, "--read-only")
    try:
        yield c
    finally:
        c.close()


@pytest.fixture(scope="module")
def kafka(workdir: Path) -> Iterator[Any]:
    from kafka_tools import start_kafka

    peer: Any = start_kafka(workdir / "kafka-4")
    try:
        yield peer
    finally:
        peer.stop()


@pytest.fixture(scope="module")
def kafka_console(kafka: Any, workdir: Path) -> Iterator[ConsoleProcess]:
    c = ConsoleProcess(kafka.bootstrap, workdir)
    try:
        yield c
    finally:
        c.close()


# ---------------------------------------------------------------- helpers


def _text(page: Any, selector: str) -> str:
    return str(page.locator(selector).inner_text()).strip()


def _rows(page: Any, table: str) -> list[list[str]]:
    cells = page.eval_on_selector_all(
        f"#{table} tbody tr",
        "rows => rows.map(r => Array.from(r.cells).map(c => c.innerText.trim()))",
    )
    return [list(r) for r in cells]


def _reload_until(page: Any, url: str, statuses: Callable[[list[str]], bool]) -> None:
    """Load the topic page until its partitions' status column pleases
    ``statuses`` (metadata reaches the brokers a moment after ZooKeeper)."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        page.goto(url)
        found = [r[5] for r in _rows(page, "partitions")]
        if statuses(found):
            return
        assert time.monotonic() < deadline, found
        time.sleep(0.3)


def _no_script_ran(page: Any) -> None:
    assert page.evaluate("window.__ran") is None
    assert page.locator("script").count() == 0
    assert page.locator("main img").count() == 0


def _create_topic(page: Any, console: ConsoleProcess, name: str, partitions: int, rf: int) -> None:
    page.goto(console.url + "/topics")
    page.fill("#create-topic input[name=name]", name)
    page.fill("#create-topic input[name=partitions]", str(partitions))
    page.fill("#create-topic input[name=replication_factor]", str(rf))
    page.fill("#create-topic textarea[name=configs]", "retention.ms=3600000")
    page.click("#create-topic button")
    page.wait_for_selector("#created")


def _produce(
    page: Any, console: ConsoleProcess, topic: str, key: str, value: str, headers: str
) -> None:
    page.goto(f"{console.url}/topics/{topic}/messages")
    page.fill("#produce input[name=partition]", "0")
    page.fill("#produce input[name=key]", key)
    page.fill("#produce textarea[name=value]", value)
    page.fill("#produce textarea[name=headers]", headers)
    page.click("#produce button")
    page.wait_for_selector("#produced")


def _commit_group(bootstrap: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    # A new group's coordinator may still be making or loading
    # __consumer_offsets (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS): again.
    deadline = time.monotonic() + DEADLINE_S
    with ClusterClient(bootstrap) as client:
        while True:
            result = client.commit(group, offsets)
            if set(result.values()) == {0}:
                return
            assert set(result.values()) <= {14, 15, 16}, result
            assert time.monotonic() < deadline, result
            time.sleep(0.2)


def _check_topic_and_messages(
    page: Any, console: ConsoleProcess, name: str, partitions: int, rf: int, shots: Path, tag: str
) -> None:
    _create_topic(page, console, name, partitions, rf)
    assert _text(page, "#topic-name") == name
    rows = _rows(page, "partitions")
    assert [r[0] for r in rows] == [str(i) for i in range(partitions)]
    assert all(len(r[2].split(",")) == rf for r in rows)  # replicas
    assert all(r[5] == "ok" for r in rows)
    retention = page.locator("#configs tr[data-config='retention.ms']")
    assert retention.locator(".value").inner_text() == "3600000"
    assert retention.locator(".source").inner_text().startswith("DYNAMIC_TOPIC_CONFIG")
    assert (
        "DEFAULT_CONFIG" in page.locator("#configs tr[data-config='cleanup.policy']").inner_text()
    )
    page.screenshot(path=shots / f"{tag}-topic.png", full_page=True)
    # Alter a config through the page, then put it back to its default.
    page.fill("#alter-config input[name=key]", "retention.ms")
    page.fill("#alter-config input[name=value]", "7200000")
    page.click("#alter-config button")
    page.wait_for_selector("#altered")
    assert retention.locator(".value").inner_text() == "7200000"
    page.fill("#alter-config input[name=key]", "retention.ms")
    page.check("#alter-config input[name=default]")
    page.click("#alter-config button")
    page.wait_for_selector("#altered")
    assert retention.locator(".value").inner_text() == "604800000"
    assert "DYNAMIC_TOPIC_CONFIG" not in retention.locator(".source").inner_text()

    _produce(page, console, name, "k1", '{"n": 1, "html": "' + SCRIPT + '"}', f"h1: {IMG}")
    _produce(page, console, name, "k2", SCRIPT, "trace: abc")
    page.goto(f"{console.url}/topics/{name}/messages?partition=0&format=text")
    assert page.locator("#records tbody tr").count() == 2
    first = page.locator("#records tr[data-offset='0']")
    assert first.locator(".key").inner_text() == "k1"
    assert SCRIPT in first.locator(".value").inner_text()
    assert first.locator(".headers").inner_text() == f"h1: {IMG}"
    second = page.locator("#records tr[data-offset='1']")
    assert second.locator(".value").inner_text() == SCRIPT
    _no_script_ran(page)
    page.screenshot(path=shots / f"{tag}-messages.png", full_page=True)

    page.goto(f"{console.url}/topics/{name}/messages?partition=0&format=json")
    assert '"n": 1' in page.locator("#records tr[data-offset='0'] .value").inner_text()
    page.goto(f"{console.url}/topics/{name}/messages?partition=0&format=hex&offset=1")
    assert page.locator("#records tbody tr").count() == 1
    assert page.locator("#records tr[data-offset='1'] .key").inner_text() == "6b 32"  # "k2"
    # From a timestamp: one far in the future finds nothing, the epoch finds all.
    page.goto(f"{console.url}/topics/{name}/messages?partition=0&timestamp=2999-01-01T00:00Z")
    assert page.locator("#records tr[data-offset]").count() == 0
    page.goto(f"{console.url}/topics/{name}/messages?partition=0&timestamp=0")
    assert page.locator("#records tr[data-offset]").count() == 2


def _check_groups(
    page: Any, console: ConsoleProcess, bootstrap: str, topic: str, shots: Path, tag: str
) -> None:
    group = f"<b>g</b>{SCRIPT}-{topic}"
    _commit_group(bootstrap, group, {(topic, 0): 1})
    page.goto(console.url + "/groups")
    row = page.locator("#groups tr", has_text=topic)
    assert row.locator("a").inner_text() == group
    _no_script_ran(page)
    page.screenshot(path=shots / f"{tag}-groups.png", full_page=True)
    row.locator("a").click()
    page.wait_for_selector("#group-id")
    assert _text(page, "#group-id") == group
    offsets = page.locator(f"#offsets tr[data-tp='{topic}-0']")
    assert offsets.locator(".committed").inner_text() == "1"
    assert offsets.locator(".end").inner_text() == "2"
    assert offsets.locator(".lag").inner_text() == "1"
    assert _text(page, "#total-lag") == "1"
    _no_script_ran(page)
    # The group's consumer is stopped (its offset stays) while records come:
    # the lag chart climbs from 1 to 4.
    group_url = page.url
    for i in range(3):
        _produce(page, console, topic, f"more{i}", "v", "")
    deadline = time.monotonic() + DEADLINE_S
    while True:
        page.goto(group_url)
        lags = [int(x) for x in page.locator("#lag-chart circle").evaluate_all(
            "cs => cs.map(c => c.dataset.lag)"
        )]  # fmt: skip
        if lags and lags[0] == 1 and lags[-1] == 4:
            break
        assert time.monotonic() < deadline, lags
        time.sleep(0.5)
    assert lags == sorted(lags)  # never down: nothing was consumed
    assert _text(page, "#total-lag") == "4"
    page.screenshot(path=shots / f"{tag}-group.png", full_page=True)


def _check_live_groups(
    page: Any, console: ConsoleProcess, bootstrap: str, shots: Path, tag: str
) -> None:
    """A classic group and a KIP-848 consumer group, each with a live
    confluent-kafka member: both listed with their type, each member shown
    with its client id and the partitions it was assigned."""
    from confluent_kafka import Consumer

    topic = topic_name("live")
    with ClusterClient(bootstrap) as client:
        (result,) = client.create_topics(
            [{"name": topic, "num_partitions": 2, "replication_factor": 1, "assignments": [],
              "configs": []}]
        )  # fmt: skip
        assert result.error_code == 0
    consumers = {}
    for protocol in ("classic", "consumer"):
        group = f"{protocol}-{topic}"
        c = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "group.protocol": protocol,
                "client.id": f"client-{protocol}",
                "enable.auto.commit": False,
            }
        )
        c.subscribe([topic])
        consumers[group] = (protocol, c)
    try:
        deadline = time.monotonic() + DEADLINE_S
        while not all(c.assignment() for _, c in consumers.values()):
            for _, c in consumers.values():
                c.poll(0.1)
            assert time.monotonic() < deadline, "no assignment"
        page.goto(console.url + "/groups")
        for group, (protocol, _) in consumers.items():
            row = page.locator(f"#groups tr[data-group='{group}']")
            assert row.locator("td").nth(1).inner_text() == protocol
        for group, (protocol, c) in consumers.items():
            c.poll(0.1)
            page.goto(f"{console.url}/group?id={group}")
            assert _text(page, "#group-type") == protocol
            members = _rows(page, "members")
            assert len(members) == 1, members
            assert members[0][1] == f"client-{protocol}"
            assert members[0][4] == f"{topic}-0, {topic}-1"
            assert _text(page, "#group-state") == "Stable"
            page.screenshot(path=shots / f"{tag}-group-{protocol}.png", full_page=True)
    finally:
        for _, c in consumers.values():
            c.close()


def _check_read_committed(page: Any, console: ConsoleProcess, bootstrap: str) -> None:
    """An aborted and a committed transaction (confluent-kafka): the browser
    shows both under read_uncommitted and only the committed record under
    read_committed."""
    from confluent_kafka import Producer

    topic = topic_name("txn")
    with ClusterClient(bootstrap) as client:
        (result,) = client.create_topics(
            [{"name": topic, "num_partitions": 1, "replication_factor": 1, "assignments": [],
              "configs": []}]
        )  # fmt: skip
        assert result.error_code == 0
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{topic}"})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, value=b"aborted-value", partition=0)
    p.flush(30)
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce(topic, value=b"committed-value", partition=0)
    p.commit_transaction(30)
    base = f"{console.url}/topics/{topic}/messages?partition=0&offset=0"
    page.goto(base + "&isolation=read_uncommitted")
    values = [v.strip() for v in page.locator("#records td.value").all_inner_texts()]
    assert values == ["aborted-value", "committed-value"]
    page.goto(base + "&isolation=read_committed")
    values = [v.strip() for v in page.locator("#records td.value").all_inner_texts()]
    assert values == ["committed-value"]


def _check_delete(page: Any, console: ConsoleProcess) -> None:
    name = topic_name("doomed")
    _create_topic(page, console, name, 1, 1)
    page.fill("#delete-topic input[name=confirm]", "not-its-name")
    page.click("#delete-topic button")
    assert "confirm" in _text(page, "#error")
    page.goto(f"{console.url}/topics/{name}")
    page.fill("#delete-topic input[name=confirm]", name)
    page.click("#delete-topic button")
    page.wait_for_selector("#deleted")
    deadline = time.monotonic() + DEADLINE_S
    while page.locator(f"#topics tr[data-topic='{name}']").count():
        assert time.monotonic() < deadline, "the deleted topic is still listed"
        time.sleep(0.3)
        page.goto(console.url + "/topics")
    page.goto(console.url + "/audit")
    outcomes = [(r[3], r[5]) for r in _rows(page, "audit") if r[4] == name]
    assert outcomes[:2] == [
        ("delete topic", "ok"),
        ("delete topic", "failed: type the topic's name to confirm"),
    ]


# ---------------------------------------------------------------- pylog


def test_cluster_page(
    page: Any, console: ConsoleProcess, cluster: LocalCluster, shots: Path
) -> None:
    page.goto(console.url + "/")
    assert page.url.endswith("/cluster")
    assert _text(page, "#broker-count") == "3"
    assert _text(page, "#controller") == str(cluster.controller())
    rows = _rows(page, "brokers")
    assert [r[0] for r in rows] == ["1", "2", "3"]
    for r, b in zip(rows, sorted(cluster.brokers.values(), key=lambda b: b.broker_id), strict=True):
        assert r[1] == b.bootstrap_servers
        assert ("controller" in r[3]) == (b.broker_id == cluster.controller())
        assert int(r[4]) > 40  # APIs served
        assert b.broker_id and "broker-" in r[6]  # a log dir, with its size
    apis = {r[0]: r for r in _rows(page, "api-versions")}
    assert re.fullmatch(r"\d+\W\d+", apis["PRODUCE"][2])  # min-max at broker 1
    assert "FETCH" in apis and "DESCRIBE_LOG_DIRS" in apis
    page.screenshot(path=shots / "pylog-cluster.png", full_page=True)


def test_topic_created_and_messages_produced_through_the_pages(
    page: Any, console: ConsoleProcess, cluster: LocalCluster, shots: Path
) -> None:
    name = topic_name("console")
    _check_topic_and_messages(page, console, name, 3, 3, shots, "pylog")
    page.goto(console.url + "/topics")
    row = page.locator(f"#topics tr[data-topic='{name}']")
    assert row.locator("td").nth(1).inner_text() == "3"
    assert row.locator(".under").inner_text() == "0"
    page.screenshot(path=shots / "pylog-topics.png", full_page=True)
    _check_groups(page, console, cluster.bootstrap_servers, name, shots, "pylog")
    page.goto(console.url + "/audit")
    audit = _rows(page, "audit")
    assert any(r[3] == "create topic" and r[4] == name and r[5].startswith("ok") for r in audit)
    assert sum(1 for r in audit if r[3] == "produce to" and r[4] == f"{name}-0") == 5
    assert all(r[1] == "User:ANONYMOUS" and r[2] == "127.0.0.1" for r in audit)
    page.screenshot(path=shots / "pylog-audit.png", full_page=True)


def test_a_topic_name_holding_script_is_refused_and_shown_as_text(
    page: Any, console: ConsoleProcess
) -> None:
    page.goto(console.url + "/topics")
    page.fill("#create-topic input[name=name]", SCRIPT)
    page.click("#create-topic button")
    page.wait_for_selector("#error")
    error = _text(page, "#error")
    assert SCRIPT in error and "InvalidTopic" in error
    _no_script_ran(page)


def test_a_changing_form_without_its_token_is_refused(page: Any, console: ConsoleProcess) -> None:
    name = topic_name("forged")
    page.goto(console.url + "/topics")
    resp = page.request.post(console.url + "/topics", form={"name": name, "partitions": "1"})
    assert resp.status == 403
    page.goto(console.url + "/topics")
    assert page.locator(f"#topics tr[data-topic='{name}']").count() == 0


def test_read_only_console_refuses_changes(
    page: Any, read_only_console: ConsoleProcess, console: ConsoleProcess
) -> None:
    ro = read_only_console
    name = topic_name("ro")
    page.goto(ro.url + "/topics")
    assert page.locator("#read-only").count() == 1
    assert page.locator("form[method=post]").count() == 0
    # A token taken from a writable console's page does not help either.
    page.goto(console.url + "/topics")
    token = page.locator("#create-topic input[name=csrf]").get_attribute("value")
    resp = page.request.post(
        ro.url + "/topics", form={"name": name, "partitions": "1", "csrf": token or ""}
    )
    assert resp.status == 403
    assert "read-only" in resp.text()
    resp = page.request.post(
        f"{ro.url}/topics/{name}/messages", form={"value": "v", "csrf": token or ""}
    )
    assert resp.status == 403
    resp = page.request.post(
        f"{ro.url}/topics/__consumer_offsets/delete",
        form={"confirm": "__consumer_offsets", "csrf": token or ""},
    )
    assert resp.status == 403
    for path, form in (
        ("/acls", {"resource_type": "Topic", "resource_name": name, "principal": "User:x",
                   "operation": "Read"}),
        ("/users", {"user": name, "mechanism": "SCRAM-SHA-512", "password": "p"}),
        ("/quotas", {"user": name, "key": "producer_byte_rate", "value": "1"}),
        (f"/topics/{name}/partitions", {"count": "2"}),
        ("/group/offsets", {"id": name, "to": "earliest"}),
    ):  # fmt: skip
        page.goto(ro.url + path if "/" not in path[1:] else ro.url + "/topics")
        assert page.locator("form[method=post]").count() == 0
        resp = page.request.post(ro.url + path, form={**form, "csrf": token or ""})
        assert resp.status == 403, path
    page.goto(ro.url + "/topics")
    assert page.locator(f"#topics tr[data-topic='{name}']").count() == 0
    page.goto(ro.url + "/audit")
    refused = [r for r in _rows(page, "audit") if name in r[4]]
    assert {r[3] for r in refused} == {
        "create topic", "produce to", "create ACL", "set SCRAM credential of", "set quota of",
        "add partitions to", "reset offsets of",
    }  # fmt: skip
    assert all(r[5] == "refused: read-only console" for r in refused)


def test_a_broker_serves_the_console_read_only(
    page: Any, cluster: LocalCluster, shots: Path
) -> None:
    url = f"http://127.0.0.1:{BROKER_CONSOLE_PORT}"
    name = topic_name("seen")
    with ClusterClient(cluster.bootstrap_servers) as client:
        (result,) = client.create_topics(
            [{"name": name, "num_partitions": 1, "replication_factor": 3, "assignments": [],
              "configs": []}]
        )  # fmt: skip
        assert result.error_code == 0
    page.goto(url + "/cluster")
    assert _text(page, "#broker-count") == "3"
    assert _text(page, "#controller") == str(cluster.controller())
    assert page.locator("#read-only").count() == 1
    # The broker's console reads the broker's own ZooKeeper: the ensemble
    # (srvr) and the cluster's znodes.
    assert _text(page, "#zk-controller").startswith(str(cluster.controller()))
    assert _text(page, "#zk-brokers") == "1, 2, 3"
    [server] = _rows(page, "zookeeper-servers")
    assert server[1] == "standalone" and int(server[5]) > 10, server  # mode, znodes
    page.goto(url + "/topics")
    assert page.locator("form[method=post]").count() == 0
    assert page.locator(f"#topics tr[data-topic='{name}']").count() == 1
    page.screenshot(path=shots / "pylog-broker-console-topics.png", full_page=True)


def test_reassignment_progress_on_the_cluster_page(
    page: Any, console: ConsoleProcess, cluster: LocalCluster, shots: Path, workdir: Path
) -> None:
    """A replica added by `pylog reassign-partitions --execute --throttle`
    copies 4 MiB at 256 KB/s: the cluster page shows the partition, the
    replica being added and how much of the leader it holds; once it caught
    up (the throttle lifted) the page says no partition is being moved."""
    from confluent_kafka import Producer

    name = topic_name("moving")
    with ClusterClient(cluster.bootstrap_servers) as client:
        (result,) = client.create_topics(
            [{"name": name, "num_partitions": -1, "replication_factor": -1,
              "assignments": [{"partition_index": 0, "broker_ids": [1]}], "configs": []}]
        )  # fmt: skip
        assert result.error_code == 0
    cluster.wait_for_leader(name)
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 20})
    value = os.urandom(1024)
    for _ in range(4096):
        p.produce(name, value, partition=0)
    assert p.flush(60) == 0
    plan = workdir / f"{name}.json"
    moves = [{"topic": name, "partition": 0, "replicas": [1, 2]}]
    plan.write_text(json.dumps({"version": 1, "partitions": moves}))
    cli = [PYLOG, "reassign-partitions", "--bootstrap-server", cluster.bootstrap_servers,
           "--reassignment-json-file", str(plan)]  # fmt: skip
    done = subprocess.run([*cli, "--execute", "--throttle", "262144"], capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    page.goto(console.url + "/cluster")
    row = page.locator(f"#reassignments tr[data-partition='{name}-0']")
    assert row.count() == 1, page.content()[-3000:]
    cells = _rows(page, "reassignments")[0]
    assert cells[1] == "1, 2" and cells[2] == "2" and cells[4] == "1", cells
    bar = row.locator(".progress[data-broker='2'] progress")
    if bar.count():  # the new replica's broker has its log dir already
        assert 0 <= int(bar.get_attribute("value") or "-1") < 100
    page.screenshot(path=shots / "pylog-cluster-reassignment.png", full_page=True)
    # The throttle rises (Kafka's --additional --throttle on a move in
    # progress); --verify clears it once the move is done.
    done = subprocess.run([*cli, "--execute", "--additional", "--throttle", "1000000000"],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    deadline = time.monotonic() + DEADLINE_S
    while page.locator("#no-reassignments").count() == 0:
        assert time.monotonic() < deadline, "the reassignment never finished"
        time.sleep(1)
        page.goto(console.url + "/cluster")
    subprocess.run([*cli, "--verify"], capture_output=True, text=True, timeout=120)


def test_topic_deleted_through_the_page(page: Any, console: ConsoleProcess) -> None:
    _check_delete(page, console)


def test_read_committed_hides_aborted_records(
    page: Any, console: ConsoleProcess, cluster: LocalCluster
) -> None:
    _check_read_committed(page, console, cluster.bootstrap_servers)


def test_live_groups_of_both_protocols(
    page: Any, console: ConsoleProcess, cluster: LocalCluster, shots: Path
) -> None:
    _check_live_groups(page, console, cluster.bootstrap_servers, shots, "pylog")


PASSWORD = "s3cret-never-shown"


def _shows(
    page: Any, table: str, select: Callable[[list[list[str]]], list[Any]], expected: list[Any]
) -> None:
    """The table shows ``expected`` (what ``select`` picks from its rows),
    reloading until it does: Kafka's KRaft brokers answer
    DescribeClientQuotas and DescribeUserScramCredentials from their
    metadata image, which a change reaches a moment after its answer
    (pylog's pages show it at once)."""
    deadline = time.monotonic() + DEADLINE_S
    while (got := select(_rows(page, table))) != expected:
        assert time.monotonic() < deadline, (got, expected)
        time.sleep(0.3)
        page.reload()


def _check_users_and_quotas(
    page: Any, console: ConsoleProcess, shots: Path, tag: str
) -> tuple[str, str]:
    """A SCRAM user and a quota made and deleted through their pages; the
    user's name and the quota's entity."""
    user = f"u-{topic_name('scram')}-{IMG}"
    page.goto(console.url + "/users")
    page.fill("#upsert-user input[name=user]", user)
    page.select_option("#upsert-user select[name=mechanism]", "SCRAM-SHA-256")
    page.fill("#upsert-user input[name=password]", PASSWORD)
    page.fill("#upsert-user input[name=iterations]", "4096")
    page.click("#upsert-user button")
    page.wait_for_selector("#done")
    _shows(
        page, "users", lambda rows: [r[:3] for r in rows if r[0] == user],
        [[user, "SCRAM-SHA-256", "4096"]],
    )  # fmt: skip
    _no_script_ran(page)
    page.screenshot(path=shots / f"{tag}-users.png", full_page=True)
    page.locator(f"#users tr[data-user='{user}'] form.delete-user button").click()
    page.wait_for_selector("#done")
    _shows(page, "users", lambda rows: [r for r in rows if r[0] == user], [])

    quota_user = f"q-{SCRIPT}"
    page.goto(console.url + "/quotas")
    page.fill("#set-quota input[name=user]", quota_user)
    page.check("#set-quota input[name=client_id_default]")
    page.select_option("#set-quota select[name=key]", "producer_byte_rate")
    page.fill("#set-quota input[name=value]", "1048576")
    page.click("#set-quota button")
    page.wait_for_selector("#done")
    entity = f"client-id=<default>, user={quota_user}"
    _shows(
        page, "quotas", lambda rows: [r[:3] for r in rows if r[0] == entity],
        [[entity, "producer_byte_rate", "1048576"]],
    )  # fmt: skip
    _no_script_ran(page)
    page.screenshot(path=shots / f"{tag}-quotas.png", full_page=True)
    page.locator("#quotas tr", has_text=quota_user).locator("form.remove-quota button").click()
    page.wait_for_selector("#done")
    _shows(page, "quotas", lambda rows: [r for r in rows if r[0] == entity], [])

    # An IP's connection-rate quota (KIP-612), set and removed the same way.
    page.fill("#set-quota input[name=ip]", "127.0.0.9")
    page.select_option("#set-quota select[name=key]", "connection_creation_rate")
    page.fill("#set-quota input[name=value]", "25")
    page.click("#set-quota button")
    page.wait_for_selector("#done")
    _shows(
        page, "quotas", lambda rows: [r[:3] for r in rows if r[0] == "ip=127.0.0.9"],
        [["ip=127.0.0.9", "connection_creation_rate", "25"]],
    )  # fmt: skip
    page.locator("#quotas tr[data-entity='ip=127.0.0.9'] form.remove-quota button").click()
    page.wait_for_selector("#done")
    _shows(page, "quotas", lambda rows: [r for r in rows if r[0] == "ip=127.0.0.9"], [])

    return user, entity


def test_acls_users_and_quotas_through_the_pages(
    page: Any, console: ConsoleProcess, shots: Path
) -> None:
    """An ACL, a SCRAM user and a quota made and deleted through the pages:
    listed as the cluster describes them, names holding script shown as
    text, each change in the audit log with who made it (never a password)."""
    resource = f"{topic_name('acl')}-{IMG}"
    principal = f"User:{SCRIPT}"
    page.goto(console.url + "/acls")
    page.select_option("#create-acl select[name=resource_type]", "Topic")
    page.select_option("#create-acl select[name=pattern_type]", "PREFIXED")
    page.fill("#create-acl input[name=resource_name]", resource)
    page.fill("#create-acl input[name=principal]", principal)
    page.select_option("#create-acl select[name=operation]", "Write")
    page.select_option("#create-acl select[name=permission]", "DENY")
    page.click("#create-acl button")
    page.wait_for_selector("#done")
    rows = [r for r in _rows(page, "acls") if r[2:3] == [resource]]
    assert [r[:7] for r in rows] == [
        ["Topic", "PREFIXED", resource, principal, "*", "Write", "DENY"]
    ]
    _no_script_ran(page)
    page.screenshot(path=shots / "pylog-acls.png", full_page=True)
    page.locator("#acls tr", has_text=resource).locator("form.delete-acl button").click()
    page.wait_for_selector("#done")
    assert not [r for r in _rows(page, "acls") if r[2:3] == [resource]]

    user, entity = _check_users_and_quotas(page, console, shots, "pylog")
    page.goto(console.url + "/audit")
    audit = _rows(page, "audit")
    assert PASSWORD not in page.content()
    done = {(r[3], r[4]): r[5] for r in audit}
    acl = f"Topic:PREFIXED:{resource} {principal} DENY Write from *"
    assert done[("create ACL", acl)] == "ok"
    assert done[("delete ACL", acl)] == "ok"
    assert done[("set SCRAM credential of", user)] == "ok SCRAM-SHA-256 iterations=4096"
    assert done[("delete SCRAM credential of", user)] == "ok SCRAM-SHA-256"
    assert done[("set quota of", entity)] == "ok producer_byte_rate=1048576"
    assert done[("remove quota of", entity)] == "ok producer_byte_rate"
    assert all(r[1] == "User:ANONYMOUS" and r[2] == "127.0.0.1" for r in audit)
    _no_script_ran(page)


def test_partitions_added_and_group_offsets_reset_through_the_pages(
    page: Any, console: ConsoleProcess, cluster: LocalCluster, shots: Path
) -> None:
    """A topic grown from 1 to 3 partitions (and not shrunk); a group's
    offsets reset to earliest, an offset, a shift and a time, and refused
    while the group has a live member."""
    from confluent_kafka import Consumer, Producer

    topic = topic_name("grow")
    with ClusterClient(cluster.bootstrap_servers) as client:
        (result,) = client.create_topics(
            [{"name": topic, "num_partitions": 1, "replication_factor": 3, "assignments": [],
              "configs": []}]
        )  # fmt: skip
        assert result.error_code == 0
    page.goto(f"{console.url}/topics/{topic}")
    page.fill("#add-partitions input[name=count]", "3")
    page.click("#add-partitions button")
    page.wait_for_selector("#grown")
    assert [r[0] for r in _rows(page, "partitions")] == ["0", "1", "2"]
    page.screenshot(path=shots / "pylog-topic-grown.png", full_page=True)
    resp = page.request.post(
        f"{console.url}/topics/{topic}/partitions",
        form={
            "count": "2",
            "csrf": page.locator("#add-partitions input[name=csrf]").get_attribute("value") or "",
        },
    )
    assert resp.status == 400 and "InvalidPartitions" in resp.text()

    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers})
    for i in range(5):
        producer.produce(topic, value=b"r%d" % i, partition=0)
    assert producer.flush(30) == 0
    group = f"<i>g</i>{SCRIPT}-{topic}"
    _commit_group(cluster.bootstrap_servers, group, {(topic, 0): 5})
    group_url = f"{console.url}/group?id={urllib.parse.quote(group, safe='')}"

    def reset(to: str, value: str = "", expect: str = "") -> None:
        page.goto(group_url)
        page.fill("#reset-offsets input[name=topic]", topic)
        page.select_option("#reset-offsets select[name=to]", to)
        page.fill("#reset-offsets input[name=value]", value)
        page.click("#reset-offsets button")
        if expect:
            page.wait_for_selector("#error")
            assert expect in _text(page, "#error")
            return
        page.wait_for_selector("#reset")
        _no_script_ran(page)

    def committed() -> list[str]:
        return [
            page.locator(f"#offsets tr[data-tp='{topic}-{p}'] .committed").inner_text()
            for p in range(3)
        ]

    reset("earliest")
    assert _text(page, "#group-id") == group
    assert committed() == ["0", "0", "0"]
    assert page.locator(f"#offsets tr[data-tp='{topic}-0'] .lag").inner_text() == "5"
    page.screenshot(path=shots / "pylog-group-reset.png", full_page=True)
    reset("offset", "2")
    assert committed() == ["2", "0", "0"]  # clamped to each log's end
    reset("shift", "-1")
    assert committed() == ["1", "0", "0"]
    reset("timestamp", "2999-01-01T00:00Z")  # nothing that late: the end
    assert committed() == ["5", "0", "0"]

    # A group with a live member is not reset.
    consumer = Consumer(
        {"bootstrap.servers": cluster.bootstrap_servers, "group.id": group,
         "enable.auto.commit": False}
    )  # fmt: skip
    consumer.subscribe([topic])
    try:
        deadline = time.monotonic() + DEADLINE_S
        while not consumer.assignment():
            consumer.poll(0.1)
            assert time.monotonic() < deadline, "no assignment"
        reset("earliest", expect="inactive")
    finally:
        consumer.close()
    page.goto(console.url + "/audit")
    outcomes = [r[5] for r in _rows(page, "audit") if r[3] == "reset offsets of" and r[4] == group]
    assert outcomes[0].startswith("failed: topic=") and "Stable" in outcomes[0]
    assert outcomes[-1] == f"ok topic={topic} to=earliest: {topic}-0=0, {topic}-1=0, {topic}-2=0"
    grown = [r[5] for r in _rows(page, "audit") if r[3] == "add partitions to" and r[4] == topic]
    assert grown[-1] == "ok count=3" and grown[0].startswith("failed: count=2: InvalidPartitions")
    _no_script_ran(page)


def _sign_in(page: Any, url: str, user: str, password: str) -> None:
    page.goto(url + "/topics")
    assert page.url.endswith("/signin")  # nothing without a session
    page.fill("#signin input[name=user]", user)
    page.fill("#signin input[name=password]", password)
    page.click("#signin button")


def test_sign_in_as_a_sasl_user_who_sees_what_its_acls_allow(
    browser: Any, cluster: LocalCluster, workdir: Path, shots: Path
) -> None:
    """`pylog console --sign-in` on the SASL listener: a wrong password is
    refused; alice, with DESCRIBE on one topic only, sees that topic and not
    the other, may not read the ACLs nor create a topic; admin (a super
    user) sees both; every sign-in and change is audited with its principal."""
    registration = cluster._json("/brokers/ids/1")
    assert registration is not None
    [endpoint] = [e for e in registration["endpoints"] if e.startswith("SASL_PLAINTEXT://")]
    seen, hidden = topic_name("seen"), topic_name("hidden")
    with ClusterClient(cluster.bootstrap_servers) as client:
        for name in (seen, hidden):
            (result,) = client.create_topics(
                [{"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [],
                  "configs": []}]
            )  # fmt: skip
            assert result.error_code == 0
        r = client.request(
            ApiKey.CREATE_ACLS,
            {"creations": [{"resource_type": 2, "resource_name": seen, "resource_pattern_type": 3,
                            "principal": "User:alice", "host": "*", "operation": 8,
                            "permission_type": 3}]},  # Topic LITERAL, Describe, Allow
        )  # fmt: skip
        assert r.results[0].error_code == 0
    config = workdir / "sasl-console.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n")
    console = ConsoleProcess(
        endpoint.split("//", 1)[1], workdir, "--command-config", str(config), "--sign-in"
    )
    contexts = [browser.new_context(viewport={"width": 1400, "height": 900}) for _ in range(2)]
    try:
        alice, admin = (c.new_page() for c in contexts)
        _sign_in(alice, console.url, "alice", "wrong")
        assert "did not accept alice" in _text(alice, "#error")
        _sign_in(alice, console.url, "alice", SASL_USERS["alice"])
        alice.wait_for_selector("#broker-count")
        assert _text(alice, "#principal") == "User:alice"
        deadline = time.monotonic() + DEADLINE_S
        while True:  # the ACL reaches every broker through ZooKeeper
            alice.goto(console.url + "/topics")
            listed = {r[0] for r in _rows(alice, "topics")}
            if seen in listed:
                break
            assert time.monotonic() < deadline, listed
            time.sleep(0.3)
        assert hidden not in listed
        alice.screenshot(path=shots / "pylog-signed-in-topics.png", full_page=True)
        alice.goto(f"{console.url}/topics/{hidden}")
        assert alice.locator("#topic-name").count() == 0
        assert "TopicAuthorization" in _text(alice, "#error")
        alice.goto(console.url + "/acls")
        assert "ClusterAuthorization" in _text(alice, "#acls-error")
        alice.goto(console.url + "/topics")
        alice.fill("#create-topic input[name=name]", topic_name("denied"))
        alice.click("#create-topic button")
        alice.wait_for_selector("#error")
        assert "Authorization" in _text(alice, "#error")

        _sign_in(admin, console.url, "admin", SASL_USERS["admin"])
        admin.wait_for_selector("#broker-count")
        admin.goto(console.url + "/topics")
        listed = {r[0] for r in _rows(admin, "topics")}
        assert {seen, hidden} <= listed

        alice.click("#signout button")
        alice.wait_for_selector("#signin")
        alice.goto(console.url + "/topics")
        assert alice.url.endswith("/signin")
        admin.goto(console.url + "/audit")
        audit = [(r[1], r[3], r[5]) for r in _rows(admin, "audit")]
        assert ("User:alice", "sign in", "ok") in audit
        assert ("User:admin", "sign in", "ok") in audit
        assert ("User:alice", "sign out", "ok") in audit
        assert any(p == "User:alice" and o.startswith("failed: the cluster did not accept")
                   for p, a, o in audit if a == "sign in")  # fmt: skip
        assert any(p == "User:alice" and a == "create topic" and o.startswith("failed:")
                   for p, a, o in audit)  # fmt: skip
        admin.screenshot(path=shots / "pylog-signed-in-audit.png", full_page=True)
    finally:
        for c in contexts:
            c.close()
        console.close()


# ---------------------------------------------------------------- Grafana


DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "pylog.json"
# Grafana's variables, as the dashboard's "All" and a short rate window give them.
GRAFANA_VARIABLES = {"$__rate_interval": "20s", "$instance": ".+", "$topic": ".+"}


def _dashboard_queries() -> list[tuple[str, str]]:
    import json

    dash = json.loads(DASHBOARD.read_text())
    out = []
    for panel in dash["panels"]:
        for target in panel.get("targets", []):
            expr = target["expr"]
            for var, value in GRAFANA_VARIABLES.items():
                expr = expr.replace(var, value)
            out.append((panel["title"], expr))
    return out


def _prometheus_query(url: str, expr: str) -> list[dict[str, Any]]:
    import json
    import urllib.parse

    q = urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(f"{url}/api/v1/query?{q}", timeout=10) as r:
        body = json.loads(r.read())
    assert body["status"] == "success", body
    return list(body["data"]["result"])


@pytest.fixture(scope="module")
def prometheus(cluster: LocalCluster, workdir: Path) -> Iterator[str]:
    """Debian's Prometheus scraping every broker's /metrics each second."""
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.fail("no prometheus: `make tools` installs Debian's", pytrace=False)
    targets = ", ".join(f"'127.0.0.1:{p}'" for p in METRICS_PORTS.values())
    config = workdir / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        f"scrape_configs:\n  - job_name: pylog\n    static_configs:\n"
        f"      - targets: [{targets}]\n"
    )
    port = _free_port()
    log = open(workdir / "prometheus.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen(
        [binary, f"--config.file={config}", f"--storage.tsdb.path={workdir / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + DEADLINE_S
        while True:
            try:
                if len(_prometheus_query(url, "up == 1")) == len(METRICS_PORTS):
                    break
            except OSError:
                pass
            assert proc.poll() is None, (workdir / "prometheus.log").read_text()
            assert time.monotonic() < deadline, (workdir / "prometheus.log").read_text()
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def test_every_dashboard_query_returns_data_from_prometheus(
    cluster: LocalCluster, prometheus: str
) -> None:
    """A producer and a consumer group on a replicated topic while Prometheus
    scrapes the brokers: every query of docs/grafana/pylog.json returns data
    through Prometheus' HTTP API, and the JMX exporter's names count what
    was sent (MessagesInPerSec's counter over the leaders = records acked)."""
    from confluent_kafka import Consumer, Producer

    topic = topic_name("grafana")
    with ClusterClient(cluster.bootstrap_servers) as client:
        (result,) = client.create_topics(
            [{"name": topic, "num_partitions": 3, "replication_factor": 3, "assignments": [],
              "configs": []}]
        )  # fmt: skip
        assert result.error_code == 0
    cluster.wait_for_full_isr(topic, 3)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 5})
    consumer = Consumer(
        {"bootstrap.servers": cluster.bootstrap_servers, "group.id": f"g-{topic}",
         "auto.offset.reset": "earliest"}
    )  # fmt: skip
    consumer.subscribe([topic])
    acked = 0

    def delivered(err: Any, msg: Any) -> None:
        nonlocal acked
        if err is None:
            acked += 1

    queries = _dashboard_queries()
    assert len(queries) > 25
    empty: list[tuple[str, str]] = queries
    deadline = time.monotonic() + DEADLINE_S
    try:
        # Load until every query answers (rates need two scrapes of a change).
        while empty:
            for i in range(50):
                producer.produce(
                    topic, value=b"v" * 100, key=str(i).encode(), on_delivery=delivered
                )
            producer.poll(0)
            consumer.poll(0.1)
            empty = [(t, e) for t, e in empty if not _prometheus_query(prometheus, e)]
            assert time.monotonic() < deadline, f"queries without data: {empty}"
        producer.flush(30)
        # Every record acknowledged is counted once, by its partition's leader.
        expr = f'sum(kafka_server_brokertopicmetrics_messagesin_total{{topic="{topic}"}})'
        while True:  # until a scrape after the last append (none yet: no series)
            got = _prometheus_query(prometheus, expr)
            counted = int(float(got[0]["value"][1])) if got else 0
            if counted == acked:
                break
            assert counted < acked, (got, acked)
            assert time.monotonic() < deadline, (got, acked)
            time.sleep(0.5)
    finally:
        consumer.close()
    p99 = _prometheus_query(
        prometheus, 'kafka_network_requestmetrics_totaltimems{request="Produce",quantile="0.99"}'
    )
    assert any(float(s["value"][1]) > 0 for s in p99), p99
    print(f"{len(queries)} dashboard queries answered; {acked} records counted")


# ---------------------------------------------------------------- Apache Kafka


def test_kafka_cluster_page(
    page: Any, kafka_console: ConsoleProcess, kafka: Any, shots: Path
) -> None:
    page.goto(kafka_console.url + "/cluster")
    assert _text(page, "#broker-count") == "1"
    assert _text(page, "#controller") != "none"
    (row,) = _rows(page, "brokers")
    assert row[1] == kafka.bootstrap
    assert "metadata.version" in row[5]  # Kafka's finalized features (ApiVersions v3)
    assert "logs" in row[6]  # its log dir, with size and free space (DescribeLogDirs v4)
    assert " of " in row[6]
    page.screenshot(path=shots / "kafka-cluster.png", full_page=True)


def test_kafka_topics_messages_and_groups(
    page: Any, kafka_console: ConsoleProcess, kafka: Any, shots: Path
) -> None:
    name = topic_name("console")
    _check_topic_and_messages(page, kafka_console, name, 2, 1, shots, "kafka")
    page.goto(kafka_console.url + "/topics")
    assert page.locator(f"#topics tr[data-topic='{name}']").count() == 1
    page.screenshot(path=shots / "kafka-topics.png", full_page=True)
    _check_groups(page, kafka_console, kafka.bootstrap, name, shots, "kafka")


def test_kafka_live_groups_of_both_protocols(
    page: Any, kafka_console: ConsoleProcess, kafka: Any, shots: Path
) -> None:
    _check_live_groups(page, kafka_console, kafka.bootstrap, shots, "kafka")


def test_kafka_read_committed_hides_aborted_records(
    page: Any, kafka_console: ConsoleProcess, kafka: Any
) -> None:
    _check_read_committed(page, kafka_console, kafka.bootstrap)


def test_kafka_topic_deleted_through_the_page(page: Any, kafka_console: ConsoleProcess) -> None:
    _check_delete(page, kafka_console)


def test_kafka_users_quotas_and_acls_pages(
    page: Any, kafka_console: ConsoleProcess, shots: Path
) -> None:
    """Apache Kafka (KRaft) answers the same SCRAM and quota APIs; without an
    authorizer its ACLs page says security is disabled."""
    _check_users_and_quotas(page, kafka_console, shots, "kafka")
    page.goto(kafka_console.url + "/acls")
    assert "SecurityDisabled" in _text(page, "#acls-error")
    page.screenshot(path=shots / "kafka-acls.png", full_page=True)


# ---------------------------------------------------------------- client telemetry (KIP-714)


def _telemetry_payload(metric: str, value: float) -> bytes:
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
    from opentelemetry.proto.metrics.v1.metrics_pb2 import (
        Gauge,
        Metric,
        MetricsData,
        NumberDataPoint,
        ResourceMetrics,
        ScopeMetrics,
    )

    point = NumberDataPoint(
        as_double=value,
        attributes=[KeyValue(key="topic", value=AnyValue(string_value=SCRIPT))],
    )
    gauge = Metric(name=metric, gauge=Gauge(data_points=[point]))
    data = MetricsData(
        resource_metrics=[ResourceMetrics(scope_metrics=[ScopeMetrics(metrics=[gauge])])]
    )
    return bytes(data.SerializeToString())


def test_clients_pages_show_pushed_telemetry_as_text(
    page: Any, cluster: LocalCluster, console: ConsoleProcess, workdir: Path, shots: Path
) -> None:
    """A subscription set on broker 1 reaches broker 2 through ZooKeeper; a
    client pushing to broker 1 shows on the console broker 1 serves and on a
    `pylog console --metrics-url` of every broker; names holding HTML stay
    text; a console without either says where telemetry is."""
    from pylog.protocol.client import KafkaConnection
    from pylog.protocol.messages import (
        GetTelemetrySubscriptionsRequest,
        GetTelemetrySubscriptionsResponse,
        IncrementalAlterConfigsRequest,
        IncrementalAlterConfigsResponse,
        PushTelemetryRequest,
        PushTelemetryResponse,
    )
    from pylog.protocol.messages.incremental_alter_configs_request import (
        AlterableConfig,
        AlterConfigsResource,
    )

    zero = "AAAAAAAAAAAAAAAAAAAAAA"
    prefix = f"org.apache.kafka.console{os.getpid()}."
    with KafkaConnection(cluster.broker(1).bootstrap_servers) as c:
        altered = c.request(
            ApiKey.INCREMENTAL_ALTER_CONFIGS,
            1,
            IncrementalAlterConfigsRequest(resources=[AlterConfigsResource(
                resource_type=16, resource_name="console-test",
                configs=[AlterableConfig(name="metrics", config_operation=0, value=prefix),
                         AlterableConfig(name="interval.ms", config_operation=0, value="1000")],
            )]),
            IncrementalAlterConfigsResponse,
        )  # fmt: skip
    assert altered.responses[0].error_code == 0, altered
    # broker 2 learns of it from /config/changes
    deadline = time.monotonic() + DEADLINE_S
    while True:
        with KafkaConnection(cluster.broker(2).bootstrap_servers) as c:
            got = c.request(
                ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0,
                GetTelemetrySubscriptionsRequest(client_instance_id=zero),
                GetTelemetrySubscriptionsResponse,
            )  # fmt: skip
        if prefix in got.requested_metrics:
            break
        assert time.monotonic() < deadline, got
        time.sleep(0.3)

    client_id = f"telemetry-{SCRIPT}"
    metric = f"{prefix}{IMG}"
    with KafkaConnection(cluster.broker(1).bootstrap_servers, client_id=client_id) as c:
        sub = c.request(
            ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0,
            GetTelemetrySubscriptionsRequest(client_instance_id=zero),
            GetTelemetrySubscriptionsResponse,
        )  # fmt: skip
        assert prefix in sub.requested_metrics
        pushed = c.request(
            ApiKey.PUSH_TELEMETRY, 0,
            PushTelemetryRequest(client_instance_id=sub.client_instance_id,
                                 subscription_id=sub.subscription_id,
                                 metrics=_telemetry_payload(metric, 42.5)),
            PushTelemetryResponse,
        )  # fmt: skip
        assert pushed.error_code == 0
    instance = sub.client_instance_id

    def check(base: str, shot: str) -> None:
        page.goto(base + "/clients")
        row = page.locator(f"#clients tr[data-instance='{instance}']")
        assert row.count() == 1
        assert _text(page, f"#clients tr[data-instance='{instance}'] .client-id") == client_id
        _no_script_ran(page)
        page.screenshot(path=shots / f"{shot}-clients.png", full_page=True)
        page.goto(base + "/client?id=" + urllib.parse.quote(instance))
        assert _text(page, "#instance-id") == instance
        assert _text(page, "#client-id") == client_id
        names = [r[0] for r in _rows(page, "metrics")]
        assert metric in names, names
        (shown,) = [r for r in _rows(page, "metrics") if r[0] == metric]
        assert shown[3] == "42.5" and f"topic={SCRIPT}" in shown[1], shown
        _no_script_ran(page)
        page.screenshot(path=shots / f"{shot}-client.png", full_page=True)

    check(f"http://127.0.0.1:{BROKER_CONSOLE_PORT}", "pylog-broker-console")
    urls = [f"--metrics-url=http://127.0.0.1:{p}/metrics" for p in METRICS_PORTS.values()]
    scraping = ConsoleProcess(cluster.bootstrap_servers, workdir, *urls)
    try:
        check(scraping.url, "pylog")
    finally:
        scraping.close()
    page.goto(console.url + "/clients")
    assert page.locator("#telemetry-unavailable").count() == 1
    assert page.locator("#clients").count() == 0


def test_killed_broker_turns_its_partitions_under_replicated(
    page: Any, console: ConsoleProcess, cluster: LocalCluster, shots: Path
) -> None:
    # The last test of the file: it leaves a broker down.
    name = topic_name("kill")
    with ClusterClient(cluster.bootstrap_servers) as client:
        (result,) = client.create_topics(
            [{"name": name, "num_partitions": 3, "replication_factor": 3, "assignments": [],
              "configs": []}]
        )  # fmt: skip
        assert result.error_code == 0
    cluster.wait_for_full_isr(name, 3)
    _reload_until(page, f"{console.url}/topics/{name}", lambda rows: rows == ["ok"] * 3)
    victim = next(b for b in sorted(cluster.brokers) if b != cluster.controller())
    cluster.broker(victim).kill()
    killed = time.monotonic()
    _reload_until(
        page, f"{console.url}/topics/{name}", lambda rows: rows == ["under-replicated"] * 3
    )
    seen_after = time.monotonic() - killed
    rows = _rows(page, "partitions")
    assert all(str(victim) not in r[3].split(",") for r in rows)  # out of every ISR
    assert page.locator("#partitions tr.under").count() == 3
    page.screenshot(path=shots / "pylog-topic-under-replicated.png", full_page=True)
    print(f"partitions under-replicated on the page {seen_after:.1f} s after the kill")
    page.goto(console.url + "/cluster")
    assert _text(page, "#broker-count") == "2"
    assert _text(page, "#under-replicated") != "0"
