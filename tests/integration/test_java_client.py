"""The Java Kafka client (org.apache.kafka:kafka-clients 4.x, the reference
client) against a real broker process (`pylog broker start`): produce and
consume on assigned partitions and in a group (committed offsets resumed by
the next member), an idempotent producer's batches, every codec, acks 0 / 1,
and the Admin client creating, describing and deleting topics and describing
the cluster. The program is tests/java, built by `make java-client`."""

from __future__ import annotations

import shlex
import signal
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from broker_process import BrokerProcess, ck_consume, topic_name
from doc_snippets import ADDRESS, ROOT, shell_lines
from java_client import JavaResult, run_java


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("broker") / "data").start()
    try:
        yield b
    finally:
        if b.proc is not None:
            b.stop(signal.SIGKILL)


def _admin(kafka: BrokerProcess, *args: str) -> JavaResult:
    return run_java("admin", "--bootstrap", kafka.bootstrap, *args).check()


def _batches(log_dir: Path) -> list[tuple[int, int, int, int, int]]:
    """(base offset, record count, producer id, producer epoch, base sequence)
    of every batch in a partition's segment files, read from the v2 header."""
    out = []
    for seg in sorted(log_dir.glob("*.log")):
        data = seg.read_bytes()
        pos = 0
        while pos + 61 <= len(data):
            base_offset, length = struct.unpack_from(">qi", data, pos)
            pid, epoch, seq, count = struct.unpack_from(">qhii", data, pos + 43)
            out.append((base_offset, count, pid, epoch, seq))
            pos += 12 + length
    return out


def test_produce_and_consume_assigned(kafka: BrokerProcess) -> None:
    topic = topic_name("java-assign")
    _admin(kafka, "create-topic", "--topic", topic, "--partitions", "2")
    produced = run_java(
        "produce", "--bootstrap", kafka.bootstrap, "--topic", topic, "--partition", "1",
        "--count", "300", "--key-prefix", "key-", "--value-prefix", "value-", "--headers",
    ).check()  # fmt: skip
    acks = produced.of("ack")
    assert produced.last == {"type": "done", "acked": 300, "failed": 0}
    assert sorted((a["index"], a["offset"], a["partition"]) for a in acks) == [
        (i, i, 1) for i in range(300)
    ]

    consumed = run_java(
        "consume", "--bootstrap", kafka.bootstrap, "--topic", topic, "--assign", "1", "--to-end"
    ).check()
    records = consumed.of("record")
    assert [(r["offset"], r["key"], r["value"], r["headers"]) for r in records] == [
        (i, f"key-{i}", f"value-{i}", {"index": str(i)}) for i in range(300)
    ]
    assert {r["partition"] for r in records} == {1}
    assert all(r["leaderEpoch"] == 0 for r in records)
    # The timestamps the producer was told are the records' (CreateTime).
    assert [r["timestamp"] for r in records] == [
        a["timestamp"] for a in sorted(acks, key=lambda a: a["offset"])
    ]
    assert consumed.last == {"type": "done", "count": 300, "complete": True}

    # From an offset; and partition 0 is empty.
    tail = run_java(
        "consume", "--bootstrap", kafka.bootstrap, "--topic", topic, "--assign", "1",
        "--offset", "290", "--to-end",
    ).check()  # fmt: skip
    assert [r["value"] for r in tail.of("record")] == [f"value-{i}" for i in range(290, 300)]
    empty = run_java(
        "consume", "--bootstrap", kafka.bootstrap, "--topic", topic, "--assign", "0", "--to-end"
    ).check()
    assert empty.of("record") == []


def test_group_consumes_and_the_next_member_resumes(kafka: BrokerProcess) -> None:
    topic = topic_name("java-group")
    group = topic_name("java-g")
    _admin(kafka, "create-topic", "--topic", topic, "--partitions", "3")
    run_java(
        "produce", "--bootstrap", kafka.bootstrap, "--topic", topic, "--count", "60",
        "--key-prefix", "k",
    ).check()  # fmt: skip

    consume = ("consume", "--bootstrap", kafka.bootstrap, "--topic", topic, "--group", group)
    first = run_java(*consume, "--count", "20", "--property", "max.poll.records=5").check()
    assert first.of("assigned") == [{"type": "assigned", "partitions": [0, 1, 2]}]
    got_first = first.of("record")
    assert len(got_first) >= 20
    # What it committed is, per partition, one past the last record it read.
    last_read: dict[int, int] = {}
    for r in got_first:
        last_read[r["partition"]] = max(last_read.get(r["partition"], -1), r["offset"])
    committed = {c["partition"]: c["offset"] for c in first.of("committed")}
    assert {p: committed[p] for p in last_read} == {p: o + 1 for p, o in last_read.items()}

    # The next member of the group starts at the committed offsets.
    rest = 60 - len(got_first)
    second = run_java(*consume, "--count", str(rest)).check()
    got_second = second.of("record")
    values = [r["value"] for r in got_first + got_second]
    assert sorted(values) == sorted(f"value-{i}" for i in range(60))  # each exactly once
    done = {c["partition"]: c["offset"] for c in second.of("committed")}
    assert sum(done.values()) == 60
    for r in got_second:
        assert r["offset"] >= committed.get(r["partition"], 0)


def test_idempotent_producer(kafka: BrokerProcess) -> None:
    topic = topic_name("java-idem")
    produced = run_java(
        "produce", "--bootstrap", kafka.bootstrap, "--topic", topic, "--count", "2000",
        "--acks", "all", "--idempotence", "true", "--linger-ms", "0",
        "--property", "max.in.flight.requests.per.connection=5", "--property", "batch.size=2048",
    ).check()  # fmt: skip
    acks = produced.of("ack")
    assert sorted((a["offset"], a["value"]) for a in acks) == [
        (i, f"value-{i}") for i in range(2000)
    ]

    # Many batches, each carrying the producer id and epoch, their sequences
    # one run from 0 with no gap and no repeat.
    batches = _batches(kafka.data / f"{topic}-0")
    assert len(batches) > 10
    assert {b[2] for b in batches} != {-1} and len({(b[2], b[3]) for b in batches}) == 1
    offset = 0
    for base_offset, count, _pid, _epoch, seq in batches:
        assert (base_offset, seq) == (offset, offset)
        offset += count
    assert offset == 2000

    # A second idempotent producer gets another producer id.
    run_java(
        "produce", "--bootstrap", kafka.bootstrap, "--topic", topic, "--count", "5",
        "--value-prefix", "again-",
    ).check()  # fmt: skip
    # (the client may send its five records in more than one batch)
    again = [b for b in _batches(kafka.data / f"{topic}-0") if b[0] >= 2000]
    assert again and again[0][2] != batches[0][2] and again[0][4] == 0
    assert len({b[2] for b in again}) == 1
    got = ck_consume(kafka.bootstrap, topic, 2005)
    assert [g[1] for g in got] == [b"value-%d" % i for i in range(2000)] + [
        b"again-%d" % i for i in range(5)
    ]

    # Without idempotence the batches carry no producer id.
    plain = topic_name("java-plain")
    run_java(
        "produce", "--bootstrap", kafka.bootstrap, "--topic", plain, "--count", "10",
        "--idempotence", "false",
    ).check()  # fmt: skip
    assert {b[2] for b in _batches(kafka.data / f"{plain}-0")} == {-1}


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_codecs_read_by_librdkafka(kafka: BrokerProcess, codec: str) -> None:
    topic = topic_name(f"java-{codec}")
    run_java(
        "produce", "--bootstrap", kafka.bootstrap, "--topic", topic, "--count", "500",
        "--key-prefix", "k", "--linger-ms", "20", "--property", f"compression.type={codec}",
    ).check()  # fmt: skip
    # Another client's decoder reads what the Java client's encoder wrote.
    got = ck_consume(kafka.bootstrap, topic, 500)
    assert [(g[0], g[1], g[3]) for g in got] == [
        (b"k%d" % i, b"value-%d" % i, i) for i in range(500)
    ]


@pytest.mark.parametrize("acks", ["0", "1"])
def test_acks(kafka: BrokerProcess, acks: str) -> None:
    topic = topic_name(f"java-acks{acks}")
    _admin(kafka, "create-topic", "--topic", topic)
    produced = run_java(
        "produce", "--bootstrap", kafka.bootstrap, "--topic", topic, "--count", "100",
        "--acks", acks, "--idempotence", "false",
    ).check()  # fmt: skip
    offsets = [a["offset"] for a in produced.of("ack")]
    # acks=0: nothing comes back, so the client knows no offset.
    assert offsets == ([-1] * 100 if acks == "0" else list(range(100)))
    consumed = run_java(
        "consume", "--bootstrap", kafka.bootstrap, "--topic", topic, "--assign", "0",
        "--count", "100",
    ).check()  # fmt: skip
    assert [r["value"] for r in consumed.of("record")] == [f"value-{i}" for i in range(100)]


def test_admin_create_describe_delete(kafka: BrokerProcess) -> None:
    topic = topic_name("java-admin")
    created = _admin(
        kafka, "create-topic", "--topic", topic, "--partitions", "3", "--replication-factor", "1",
        "--config", "retention.ms=123456", "--config", "cleanup.policy=compact",
    )  # fmt: skip
    (c,) = created.of("created")
    assert (c["partitions"], c["replicationFactor"]) == (3, 1)

    (d,) = _admin(kafka, "describe-topic", "--topic", topic).of("topic")
    assert d["name"] == topic and d["topicId"] == c["topicId"] and d["internal"] is False
    assert d["partitions"] == [
        {"partition": p, "leader": 0, "replicas": [0], "isr": [0]} for p in range(3)
    ]
    (cfg,) = _admin(kafka, "describe-configs", "--topic", topic).of("configs")
    configs = cfg["configs"]
    assert configs["retention.ms"] == "123456" and configs["cleanup.policy"] == "compact"
    assert configs["segment.bytes"] == "1073741824"  # a default, described too

    (listed,) = _admin(kafka, "list-topics").of("topics")
    assert topic in listed["names"]
    (cluster,) = _admin(kafka, "describe-cluster").of("cluster")
    assert cluster["nodes"] == [{"id": 0, "host": "127.0.0.1", "port": kafka.port, "rack": None}]
    assert cluster["controller"] == 0 and cluster["clusterId"]

    # Kafka's errors, as the Java client's exceptions.
    again = run_java("admin", "--bootstrap", kafka.bootstrap, "create-topic", "--topic", topic)
    assert again.returncode == 1 and again.last["error"] == "TopicExistsException"
    too_many = run_java(
        "admin", "--bootstrap", kafka.bootstrap, "create-topic", "--topic", topic_name("rf"),
        "--replication-factor", "3",
    )  # fmt: skip
    assert too_many.last["error"] == "InvalidReplicationFactorException"
    bad = run_java("admin", "--bootstrap", kafka.bootstrap, "create-topic", "--topic", "a b")
    assert bad.last["error"] == "InvalidTopicException"

    deleted = _admin(kafka, "delete-topic", "--topic", topic)
    assert deleted.of("deleted") == [{"type": "deleted", "topics": [topic]}]
    gone = run_java("admin", "--bootstrap", kafka.bootstrap, "describe-topic", "--topic", topic)
    assert gone.returncode == 1 and gone.last["error"] == "UnknownTopicOrPartitionException"
    twice = run_java("admin", "--bootstrap", kafka.bootstrap, "delete-topic", "--topic", topic)
    assert twice.last["error"] == "UnknownTopicOrPartitionException"
    (listed,) = _admin(kafka, "list-topics").of("topics")
    assert topic not in listed["names"]


def test_the_doc_lines(kafka: BrokerProcess) -> None:
    """docs/clients.md's Java lines run as written (the jar where this machine has it)."""
    lines = [line for line in shell_lines(ROOT / "docs" / "clients.md") if line.startswith("java ")]
    assert len(lines) == 3
    documented_jar = "~/.cache/pylog/java/build/pylog-java-client.jar"
    results = []
    for line in lines:
        args = shlex.split(line.replace(ADDRESS, kafka.bootstrap))
        assert args[:3] == ["java", "-jar", documented_jar]
        results.append(run_java(*args[3:]).check())
    created, produced, consumed = results
    assert created.of("created")[0]["partitions"] == 3
    assert [a["offset"] for a in produced.of("ack")] == [0, 1, 2]
    records = consumed.of("record")
    assert [(r["offset"], r["value"]) for r in records] == [(i, f"value-{i}") for i in range(3)]
    assert consumed.last == {"type": "done", "count": 3, "complete": True}
