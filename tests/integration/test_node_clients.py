"""The Node client kafkajs against a real broker process (`pylog broker
start`): an idempotent producer (acks all), gzip, acks 1 and 0; consuming a
partition from an offset; a consumer group of two members that rebalances when
one leaves, with committed offsets resumed exactly by the next member; and the
admin client's topics, groups and offsets. The program is
tests/node/client.js; `make node-client` installs its packages (`npm ci`) into
a cache outside the repository."""

from __future__ import annotations

import re
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from broker_process import BrokerProcess, topic_name
from client_programs import (
    ClientResult,
    Line,
    Member,
    batches,
    ck_read,
    node_command,
    node_env,
    run_client,
    shared_out,
)
from doc_snippets import ADDRESS, ROOT, code_blocks


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("broker") / "data").start()
    try:
        yield b
    finally:
        if b.proc is not None:
            b.stop(signal.SIGKILL)


def node(*args: str, timeout: float = 120) -> ClientResult:
    return run_client(node_command(*args), timeout=timeout, env=node_env()).check()


def admin(kafka: BrokerProcess, op: str, *args: str) -> Line:
    """One admin operation; its one result line."""
    result = node("admin", op, "--bootstrap", kafka.bootstrap, *args)
    assert result.last == {"type": "done"}, result.lines
    return result.lines[-2]


def produce(kafka: BrokerProcess, topic: str, *args: str) -> ClientResult:
    return node("produce", "--bootstrap", kafka.bootstrap, "--topic", topic, *args)


def consume(kafka: BrokerProcess, topic: str, *args: str) -> ClientResult:
    return node("consume", "--bootstrap", kafka.bootstrap, "--topic", topic, *args)


def test_idempotent_produce_and_consume_from_offsets(kafka: BrokerProcess) -> None:
    topic = topic_name("node-produce")
    assert admin(kafka, "create-topic", "--topic", topic, "--partitions", "2")["error"] is None

    produced = produce(kafka, topic, "--partition", "1", "--count", "300")
    assert produced.last == {"type": "done", "acked": 300, "failed": 0}
    # One send per 100 records; each is told where its batch begins.
    assert [(s["partition"], s["baseOffset"], s["error"]) for s in produced.of("sent")] == [
        (1, 0, 0), (1, 100, 0), (1, 200, 0),
    ]  # fmt: skip
    on_disk = batches(kafka.data / f"{topic}-1")
    assert sum(b[1] for b in on_disk) == 300
    assert {b[2] for b in on_disk} == {on_disk[0][2]} and on_disk[0][2] >= 0  # a producer id
    assert [b[4] for b in on_disk] == [b[0] for b in on_disk]  # sequences follow offsets

    consumed = consume(kafka, topic, "--partition", "1", "--to-end")
    assert consumed.last == {"type": "done", "count": 300, "complete": True}
    assert [
        (r["partition"], r["offset"], r["key"], r["value"], r["headers"])
        for r in consumed.of("record")
    ] == [(1, i, f"key-{i}", f"value-{i}", {"index": str(i)}) for i in range(300)]

    tail = consume(kafka, topic, "--partition", "1", "--offset", "280", "--count", "20")
    assert [r["offset"] for r in tail.of("record")] == list(range(280, 300))
    assert admin(kafka, "end-offsets", "--topic", topic)["offsets"] == {"0": 0, "1": 300}


def test_gzip_and_acks_read_by_librdkafka(kafka: BrokerProcess) -> None:
    topic = topic_name("node-gzip")
    admin(kafka, "create-topic", "--topic", topic)
    produce(kafka, topic, "--count", "150", "--compression", "gzip")
    produce(kafka, topic, "--count", "50", "--start", "150", "--acks", "1", "--idempotent", "false")
    zero = produce(
        kafka, topic, "--count", "50", "--start", "200", "--acks", "0", "--idempotent", "false"
    )
    assert zero.last["acked"] == 50
    read = ck_read(kafka.bootstrap, topic, 0, 250)
    assert read == [(f"key-{i}".encode(), f"value-{i}".encode(), i) for i in range(250)]
    pids = [b[2] for b in batches(kafka.data / f"{topic}-0")]
    assert pids[0] >= 0 and pids[-1] == -1  # idempotent first, then not


def _member(kafka: BrokerProcess, topic: str, group: str, name: str, tmp_path: Path) -> Member:
    cmd = node_command(
        "group-consume", "--bootstrap", kafka.bootstrap, "--topic", topic,
        "--group", group, "--timeout", "600",
    )  # fmt: skip
    return Member(name, cmd, tmp_path / f"{name}.log", env=node_env())


def _values(*members: Member) -> list[str]:
    return [r["value"] for m in members for r in m.records()]


def test_consumer_group_rebalances_and_resumes_from_commits(
    kafka: BrokerProcess, tmp_path: Path
) -> None:
    topic = topic_name("node-group")
    group = topic_name("node-grp")
    admin(kafka, "create-topic", "--topic", topic, "--partitions", "4")
    produce(kafka, topic, "--count", "100")
    everything = list(range(4))
    members: list[Member] = []
    try:
        a = _member(kafka, topic, group, "a", tmp_path)
        members.append(a)
        a.wait_for("all four partitions", lambda: a.owned() == everything)
        a.wait_for("the first 100 records", lambda: len(a.records()) >= 100)

        b = _member(kafka, topic, group, "b", tmp_path)
        members.append(b)
        b.wait_for("its share of the partitions", lambda: shared_out(everything, a, b))
        produce(kafka, topic, "--count", "100", "--start", "100")
        b.wait_for("the next 100 records", lambda: len(set(_values(a, b))) >= 200)
        assert b.records(), "the second member read none of the new records"

        assert b.stop() == 0, b.describe()
        a.wait_for("every partition back", lambda: a.owned() == everything)
        produce(kafka, topic, "--count", "100", "--start", "200")
        a.wait_for("the last 100 records", lambda: len(set(_values(a, b))) >= 300)
        assert a.stop() == 0, a.describe()

        # Each record's offset is committed before the next is taken and
        # before a rebalance: every record was read exactly once.
        assert sorted(_values(a, b)) == sorted(f"value-{i}" for i in range(300))
        for m in (a, b):
            assert m.of("commit-error") == [] and m.of("group-error") == [], m.describe()

        committed = admin(kafka, "offsets", "--group", group, "--topic", topic)
        ends = admin(kafka, "end-offsets", "--topic", topic)
        assert committed["offsets"] == ends["offsets"]
        assert sum(ends["offsets"].values()) == 300
        assert admin(kafka, "list-groups")["groups"][group]["protocolType"] == "consumer"

        produce(kafka, topic, "--count", "40", "--start", "300")
        c = _member(kafka, topic, group, "c", tmp_path)
        members.append(c)
        c.wait_for("the 40 new records", lambda: len(c.records()) >= 40)
        assert c.stop() == 0, c.describe()
        assert sorted(_values(c)) == sorted(f"value-{i}" for i in range(300, 340))
    finally:
        for m in members:
            m.kill()


def test_admin_topics(kafka: BrokerProcess) -> None:
    topic = topic_name("node-admin")
    created = admin(
        kafka, "create-topic", "--topic", topic, "--partitions", "3",
        "--config", "cleanup.policy=compact",
    )  # fmt: skip
    assert (created["created"], created["error"]) == (True, None)
    assert topic in admin(kafka, "list-topics")["topics"]
    described = admin(kafka, "describe-topic", "--topic", topic)["topics"][topic]
    assert [
        (p["partition"], p["leader"], p["replicas"], p["isr"], p["error"])
        for p in described["partitions"]
    ] == [(p, 0, [0], [0], None) for p in range(3)]

    # kafkajs turns TOPIC_ALREADY_EXISTS into "not created".
    again = admin(kafka, "create-topic", "--topic", topic)
    assert (again["created"], again["error"]) == (False, None)
    too_many = admin(kafka, "create-topic", "--topic", topic_name("node-rf"),
                     "--replication-factor", "3")  # fmt: skip
    assert too_many["error"] == "INVALID_REPLICATION_FACTOR"

    assert admin(kafka, "delete-topic", "--topic", topic)["error"] is None
    assert topic not in admin(kafka, "list-topics")["topics"]
    # (kafkajs retries this error: no retries, the answer is what is checked.)
    gone = admin(kafka, "delete-topic", "--topic", topic, "--retries", "0")
    assert gone["error"] == "UNKNOWN_TOPIC_OR_PARTITION"


def test_docs_node_snippet(kafka: BrokerProcess, tmp_path: Path) -> None:
    """docs/clients.md's kafkajs program reads back, through its group, the
    ten records it wrote."""
    (code,) = code_blocks(ROOT / "docs" / "clients.md", "js")
    script = tmp_path / "snippet.js"
    script.write_text(code.replace(ADDRESS, kafka.bootstrap))
    proc = subprocess.run(
        [*node_command()[:1], str(script)], env=node_env(), capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    # "<partition> <offset> <value>" lines (kafkajs logs to stdout too).
    lines = [line.split(" ", 2) for line in re.findall(r"^\d+ \d+ hello.*$", proc.stdout, re.M)]
    assert sorted(value for _, _, value in lines) == sorted(f"hello {i}" for i in range(10))
