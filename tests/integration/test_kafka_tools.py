"""Apache Kafka's own command-line tools (their main classes from the jars
`make kafka` fetches) against a `pylog broker start` process: each asserts on
what the tool prints and on pylog's state as a second client sees it."""

from __future__ import annotations

import json
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from broker_process import BrokerProcess, ck_produce, topic_name
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, OffsetSpec, ResourceType
from doc_snippets import ROOT, code_blocks
from kafka_tools import TOOLS, dump_log_findings, kafka_version, run_tool


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("broker") / "data").start()
    try:
        yield b
    finally:
        if b.proc is not None:
            b.stop(signal.SIGKILL)


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tools")


def _admin(kafka: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": kafka.bootstrap})


def _partitions(kafka: BrokerProcess, topic: str) -> int | None:
    # All topics: a Metadata request naming the topic would auto-create it.
    md = _admin(kafka).list_topics(timeout=10).topics.get(topic)
    if md is None or md.error is not None:
        return None
    return len(md.partitions)


def _watermarks(kafka: BrokerProcess, topic: str, partition: int = 0) -> tuple[int, int]:
    c = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": "watermarks"})
    try:
        lo, hi = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
        return int(lo), int(hi)
    finally:
        c.close()


def _topics(kafka: BrokerProcess, work: Path, *args: str) -> str:
    return run_tool(
        "kafka-topics", "--bootstrap-server", kafka.bootstrap, *args, workdir=work
    ).stdout


def test_kafka_topics_create_describe_alter_list_delete(kafka: BrokerProcess, work: Path) -> None:
    topic = topic_name("tools-topics")
    out = _topics(
        kafka, work, "--create", "--topic", topic, "--partitions", "2",
        "--replication-factor", "1", "--config", "retention.ms=86400000",
    )  # fmt: skip
    assert f"Created topic {topic}." in out
    assert _partitions(kafka, topic) == 2

    out = _topics(kafka, work, "--describe", "--topic", topic)
    assert re.search(rf"Topic: {topic}\tTopicId: \S+\tPartitionCount: 2\tReplicationFactor: 1", out)
    assert "retention.ms=86400000" in out
    rows = re.findall(
        rf"Topic: {topic}\tPartition: (\d+)\tLeader: (\d+)\tReplicas: (\d+)\tIsr: (\d+)", out
    )
    assert sorted(r[0] for r in rows) == ["0", "1"]
    assert all(r[1] == r[2] == r[3] for r in rows), rows

    _topics(kafka, work, "--alter", "--topic", topic, "--partitions", "3")
    assert _partitions(kafka, topic) == 3
    out = _topics(kafka, work, "--describe", "--topic", topic)
    assert "PartitionCount: 3" in out
    # Fewer partitions than now: Kafka's INVALID_PARTITIONS, told by the tool.
    shrink = run_tool(
        "kafka-topics", "--bootstrap-server", kafka.bootstrap, "--alter", "--topic", topic,
        "--partitions", "1", workdir=work, check=False,
    )  # fmt: skip
    assert shrink.returncode != 0
    assert "InvalidPartitionsException" in shrink.stdout + shrink.stderr
    assert _partitions(kafka, topic) == 3

    assert topic in _topics(kafka, work, "--list").split()
    _topics(kafka, work, "--delete", "--topic", topic)
    deadline = time.monotonic() + 30
    while _partitions(kafka, topic) is not None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _partitions(kafka, topic) is None
    assert topic not in _topics(kafka, work, "--list").split()


def test_console_producer_to_console_consumer(kafka: BrokerProcess, work: Path) -> None:
    topic = topic_name("tools-console")
    _topics(kafka, work, "--create", "--topic", topic, "--partitions", "1")
    lines = [f"key-{i}:value {i} ünïcode" for i in range(20)]
    run_tool(
        "kafka-console-producer", "--bootstrap-server", kafka.bootstrap, "--topic", topic,
        "--reader-property", "parse.key=true", "--reader-property", "key.separator=:",
        workdir=work, stdin="\n".join(lines) + "\n",
    )  # fmt: skip
    assert _watermarks(kafka, topic) == (0, 20)

    out = run_tool(
        "kafka-console-consumer", "--bootstrap-server", kafka.bootstrap, "--topic", topic,
        "--from-beginning", "--max-messages", "15", "--timeout-ms", "30000",
        "--formatter-property", "print.key=true", "--formatter-property", "key.separator=:",
        "--formatter-property", "print.offset=true",
        workdir=work,
    )  # fmt: skip
    got = out.stdout.splitlines()
    assert got == [f"Offset:{i}:{line}" for i, line in enumerate(lines[:15])], got
    assert "Processed a total of 15 messages" in out.stderr

    # The same records as another client reads them: keys and values apart.
    c = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": "check"})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        seen: list[tuple[bytes | None, bytes | None]] = []
        deadline = time.monotonic() + 20
        while len(seen) < 20 and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                seen.append((m.key(), m.value()))
    finally:
        c.close()
    assert seen == [tuple(s.encode() for s in line.split(":", 1)) for line in lines]


def test_kafka_consumer_groups_list_describe_reset(kafka: BrokerProcess, work: Path) -> None:
    topic = topic_name("tools-groups")
    group = topic_name("tools-group")
    _topics(kafka, work, "--create", "--topic", topic, "--partitions", "2")
    ck_produce(kafka.bootstrap, topic, [(b"k%d" % i, b"v%d" % i, None) for i in range(10)])
    hw = [_watermarks(kafka, topic, p)[1] for p in (0, 1)]
    assert sum(hw) == 10
    c = Consumer(
        {
            "bootstrap.servers": kafka.bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        c.subscribe([topic])
        got = 0
        deadline = time.monotonic() + 30
        while got < 10 and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                got += 1
        assert got == 10
        c.commit(asynchronous=False)
    finally:
        c.close()  # leaves the group: it is empty (inactive) from here

    def groups(*args: str) -> str:
        done = run_tool(
            "kafka-consumer-groups", "--bootstrap-server", kafka.bootstrap, *args, workdir=work
        )
        return done.stdout + done.stderr

    assert group in groups("--list").split()
    out = groups("--describe", "--group", group)
    assert f"Consumer group '{group}' has no active members." in out
    rows = {
        int(p): (int(cur), int(end), int(lag))
        for p, cur, end, lag in re.findall(
            rf"{group}\s+{topic}\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)", out
        )
    }
    assert rows == {0: (hw[0], hw[0], 0), 1: (hw[1], hw[1], 0)}, out

    out = groups(
        "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute"
    )
    reset = re.findall(rf"{group}\s+{topic}\s+(\d+)\s+(\d+)", out)
    assert sorted(reset) == [("0", "0"), ("1", "0")], out
    # pylog's committed offsets, through another client.
    c = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": group})
    try:
        committed = c.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=10)
    finally:
        c.close()
    assert [tp.offset for tp in committed] == [0, 0]
    out = groups("--describe", "--group", group)
    lags = re.findall(rf"{group}\s+{topic}\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)", out)
    assert sorted((p, cur, lag) for p, cur, _, lag in lags) == [
        ("0", "0", str(hw[0])),
        ("1", "0", str(hw[1])),
    ]


def test_kafka_configs_describe_alter_topic(kafka: BrokerProcess, work: Path) -> None:
    topic = topic_name("tools-configs")
    _topics(kafka, work, "--create", "--topic", topic, "--partitions", "1")

    def configs(*args: str) -> str:
        return run_tool(
            "kafka-configs", "--bootstrap-server", kafka.bootstrap, "--entity-type", "topics",
            "--entity-name", topic, *args, workdir=work,
        ).stdout  # fmt: skip

    out = configs("--describe")
    assert f"Dynamic configs for topic {topic} are:" in out
    assert "retention.ms" not in out
    out = configs("--alter", "--add-config", "retention.ms=123456789,cleanup.policy=compact")
    assert f"Completed updating config for topic {topic}." in out
    out = configs("--describe")
    assert "retention.ms=123456789 sensitive=false" in out
    assert "cleanup.policy=compact sensitive=false" in out
    res = ConfigResource(ResourceType.TOPIC, topic)
    admin = _admin(kafka)  # kept: a freed client fails its futures
    entries = admin.describe_configs([res])[res].result(timeout=10)
    assert entries["retention.ms"].value == "123456789"
    assert entries["cleanup.policy"].value == "compact"

    configs("--alter", "--delete-config", "cleanup.policy")
    out = configs("--describe")
    assert "cleanup.policy" not in out
    assert "retention.ms=123456789" in out
    entries = admin.describe_configs([res])[res].result(timeout=10)
    assert entries["cleanup.policy"].value == "delete"


def test_kafka_get_offsets_and_delete_records(kafka: BrokerProcess, work: Path) -> None:
    topic = topic_name("tools-offsets")
    _topics(kafka, work, "--create", "--topic", topic, "--partitions", "2")
    p = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 5})
    for i in range(37):
        p.produce(topic, value=b"v%d" % i, partition=0 if i < 30 else 1)
    assert p.flush(20) == 0

    def offsets(*args: str) -> list[str]:
        return run_tool(
            "kafka-get-offsets", "--bootstrap-server", kafka.bootstrap, "--topic", topic,
            *args, workdir=work,
        ).stdout.split()  # fmt: skip

    assert offsets("--time", "-1") == [f"{topic}:0:30", f"{topic}:1:7"]
    assert offsets("--time", "-2") == [f"{topic}:0:0", f"{topic}:1:0"]

    spec = work / f"{topic}-delete.json"
    spec.write_text(
        json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "offset": 12}]})
    )
    out = run_tool(
        "kafka-delete-records", "--bootstrap-server", kafka.bootstrap,
        "--offset-json-file", str(spec), workdir=work,
    ).stdout  # fmt: skip
    assert f"partition: {topic}-0\tlow_watermark: 12" in out, out
    assert _watermarks(kafka, topic, 0) == (12, 30)
    assert offsets("--time", "-2") == [f"{topic}:0:12", f"{topic}:1:0"]
    assert offsets("--time", "-1", "--partitions", "0") == [f"{topic}:0:30"]


def test_kafka_producer_perf_test(kafka: BrokerProcess, work: Path) -> None:
    topic = topic_name("tools-perf")
    _topics(kafka, work, "--create", "--topic", topic, "--partitions", "1")
    out = run_tool(
        "kafka-producer-perf-test", "--topic", topic, "--num-records", "500",
        "--record-size", "100", "--throughput", "-1",
        "--producer-props", f"bootstrap.servers={kafka.bootstrap}", "acks=all", workdir=work,
    ).stdout  # fmt: skip
    assert re.search(r"^500 records sent, .* records/sec", out, re.M), out
    assert _watermarks(kafka, topic) == (0, 500)


def test_kafka_dump_log_reads_pylog_files(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data").start()
    topic = "dumped"
    now = int(time.time() * 1000)
    produced: list[tuple[int, bytes, bytes, int]] = []  # (offset, key, value, timestamp)
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        # Record timestamps 2 s apart per codec roll a segment per codec
        # (segment.ms); an index entry every few hundred bytes.
        conf = {"segment.ms": "1000", "index.interval.bytes": "300"}
        for fut in admin.create_topics([NewTopic(topic, 1, 1, config=conf)]).values():
            fut.result(timeout=30)
        for i, codec in enumerate(["none", "gzip", "snappy", "lz4", "zstd"]):
            p = Producer(
                {
                    "bootstrap.servers": broker.bootstrap,
                    "compression.type": codec,
                    "enable.idempotence": True,
                    "linger.ms": 20,
                    "batch.num.messages": 30,
                }
            )
            for j in range(90):
                # Out of order within a batch: the largest is not the last.
                ts = now - 60_000 + i * 2_000 + (j * 7) % 13
                key, value = b"k%d-%d" % (i, j), b"%s-%d-" % (codec.encode(), j) * (1 + j % 4)
                p.produce(topic, key=key, value=value, headers=[("h", b"%d" % j)], timestamp=ts)
                produced.append((len(produced), key, value, ts))
            assert p.flush(30) == 0
        # ListOffsets MAX_TIMESTAMP names the record, not its batch's last offset.
        best = max(r[3] for r in produced)
        want = min(r[0] for r in produced if r[3] == best)
        tp = TopicPartition(topic, 0)
        res = admin.list_offsets({tp: OffsetSpec.max_timestamp()})[tp].result(timeout=10)
        assert (res.offset, res.timestamp) == (want, best)
    finally:
        assert broker.stop() == 0  # clean: the snapshot of the active segment is written
    d = tmp_path / "data" / f"{topic}-0"
    logs = sorted(d.glob("*.log"))
    assert len(logs) >= 2, logs  # several segments, each with its indexes
    snapshots = sorted(d.glob("*.snapshot"))
    assert snapshots
    files = [
        *logs, *sorted(d.glob("*.index")), *sorted(d.glob("*.timeindex")), *snapshots,
        d / "leader-epoch-checkpoint",
    ]  # fmt: skip
    names = ",".join(str(f) for f in files)

    out = run_tool(
        "kafka-dump-log", "--files", names, "--print-data-log", "--deep-iteration",
        workdir=tmp_path,
    )  # fmt: skip
    assert dump_log_findings(out.stdout + out.stderr) == []
    records = re.findall(
        r"^\| offset: (\d+) CreateTime: (\d+) keySize: \d+ valueSize: \d+ sequence: (\d+) "
        r"headerKeys: \[h\] key: (\S+) payload: (\S+)$",
        out.stdout,
        re.M,
    )
    assert [(int(o), int(ts), k.encode(), v.encode()) for o, ts, _, k, v in records] == [
        (o, ts, k, v) for o, k, v, ts in produced
    ]
    # Every record of each producer in sequence: 0..89 per codec.
    assert [int(s) for _, _, s, _, _ in records] == list(range(90)) * 5
    counts = [
        int(c)
        for c in re.findall(r"^baseOffset: \d+ lastOffset: \d+ count: (\d+) ", out.stdout, re.M)
    ]
    assert sum(counts) == len(produced)
    assert "compresscodec: gzip" in out.stdout and "compresscodec: zstd" in out.stdout
    assert "isvalid: true" in out.stdout and "isvalid: false" not in out.stdout
    # Each idempotent producer's last batch, as pylog's snapshot holds it.
    last_snapshot = out.stdout.split(f"Dumping {snapshots[-1]}")[1]
    entries = re.findall(
        r"producerId: (\d+) producerEpoch: 0 .* lastSequence: (\d+) lastOffset: (\d+)",
        last_snapshot,
    )
    assert sorted(int(off) for _, seq, off in entries if seq == "89") == [89, 179, 269, 359, 449]
    # The tool has no reader for leader-epoch-checkpoint (Kafka's own broker
    # reads pylog's, test_kafka_disk_format); its text is Kafka's format.
    assert f"Ignoring unknown file {d / 'leader-epoch-checkpoint'}" in out.stdout + out.stderr
    assert (d / "leader-epoch-checkpoint").read_text() == "0\n1\n0 0\n"

    indexes = ",".join(str(f) for f in files if f.suffix in (".index", ".timeindex"))
    sanity = run_tool(
        "kafka-dump-log", "--files", indexes, "--index-sanity-check", workdir=tmp_path
    )
    assert sanity.stdout.count("passed sanity check") == len(logs) * 2, sanity.stdout
    assert dump_log_findings(sanity.stdout + sanity.stderr) == []
    verify = run_tool("kafka-dump-log", "--files", indexes, "--verify-index-only", workdir=tmp_path)
    assert dump_log_findings(verify.stdout + verify.stderr) == []
    assert verify.stdout.count("Dumping ") == len(logs) * 2


def test_the_docs_tool_line_runs(kafka: BrokerProcess, work: Path) -> None:
    """docs/clients.md's kafka-topics line, as written but for the address and topic."""
    [block] = [b for b in code_blocks(ROOT / "docs" / "clients.md", "text") if "TopicCommand" in b]
    words = block.replace("\\\n", " ").split()
    assert words[:3] == ["java", "-cp", f'"$HOME/.cache/pylog/kafka-{kafka_version()}/libs/*"']
    assert words[3] == TOOLS["kafka-topics"]
    topic = topic_name("payments")
    args = [
        kafka.bootstrap if w == "127.0.0.1:9092" else topic if w == "payments" else w
        for w in words[4:]
    ]
    assert f"Created topic {topic}." in run_tool("kafka-topics", *args, workdir=work).stdout
    assert _partitions(kafka, topic) == 3


def test_kafka_dump_log_reads_delete_horizons_the_cleaner_wrote(tmp_path: Path) -> None:
    """KIP-534: Kafka's tool reads the batches pylog's cleaner rewrote with a
    delete horizon — the same horizon and record timestamps as pylog's own
    dump-log, every batch line alike."""
    import io

    from pylog import _native
    from pylog.cli.dump_log import dump_log_file
    from pylog.common.topic_partition import TopicPartition as TP
    from pylog.log.manager import LogManager

    props = {"log.dirs": [str(tmp_path / "logs")], "log.cleaner.enable": False}
    config = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": 0.01,
              "delete.retention.ms": 1000}  # fmt: skip
    manager = LogManager(props, topic_configs={"horizon": config})
    stamps = []
    try:
        log = manager.get_or_create_log(TP("horizon", 0))
        now = int(time.time() * 1000)
        for codec in (0, 1, 4):  # none, gzip, zstd
            k = b"%d" % codec  # keys of their own: each batch keeps its three records
            records = [(b"a" + k, b"1", [], now - 9), (b"b" + k, None, [], now - 5),
                       (b"c" + k, b"3", [], now)]  # fmt: skip
            stamps += [ts for *_, ts in records]
            log.append_as_leader(bytearray(_native.build_batch(records, compression=codec)), 0)
        log.roll()
        log.update_high_watermark(log.log_end_offset)
        assert manager.cleaner.clean_once()
        segments = [s.log_path for s in log.segments if s.size > 0]
    finally:
        manager.shutdown()
    out = run_tool(
        "kafka-dump-log", "--files", ",".join(segments), "--deep-iteration", workdir=tmp_path
    ).stdout
    assert dump_log_findings(out) == []
    horizons = re.findall(r"deleteHorizonMs: OptionalLong\[(\d+)\]", out)
    assert len(horizons) == 3 and all(int(h) >= now + 1000 for h in horizons), out
    # every record keeps its own timestamp, read through the horizon base
    got = [int(ts) for ts in re.findall(r"^\| offset: \d+ CreateTime: (\d+)", out, re.M)]
    assert got == stamps, out
    ours = io.StringIO()
    for path in segments:
        dump_log_file(path, ours, False, False, 1 << 30)
    batch_lines = [ln for ln in out.splitlines() if ln.startswith("baseOffset:")]
    assert batch_lines == [
        ln for ln in ours.getvalue().splitlines() if ln.startswith("baseOffset:")
    ]


def test_kafka_topics_describe_pages_through_describe_topic_partitions(tmp_path: Path) -> None:
    """Kafka 4's admin client describes topics with DescribeTopicPartitions
    (KIP-966) when the broker offers it: kafka-topics with a limit of two
    partitions a response reads a five-partition topic in three pages, each
    resuming at the cursor the previous answer gave."""
    import urllib.request

    from broker_process import metrics_broker

    def served(port: int) -> float:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            text = r.read().decode()
        m = re.search(r'kafka_network_requestmetrics_requests_total\{request="'
                      r'DescribeTopicPartitions"\} (\S+)', text)  # fmt: skip
        return float(m.group(1)) if m else 0.0

    with metrics_broker(tmp_path / "data") as (broker, port):
        topic = topic_name("dtp")
        run_tool("kafka-topics", "--bootstrap-server", broker.bootstrap, "--create", "--topic",
                 topic, "--partitions", "5", "--replication-factor", "1",
                 workdir=tmp_path)  # fmt: skip
        before = served(port)
        out = run_tool("kafka-topics", "--bootstrap-server", broker.bootstrap, "--describe",
                       "--topic", topic, "--partition-size-limit-per-response", "2",
                       workdir=tmp_path).stdout  # fmt: skip
        rows = re.findall(rf"Topic: {topic}\tPartition: (\d+)\tLeader: 0\tReplicas: 0\tIsr: 0",
                          out)  # fmt: skip
        assert rows == ["0", "1", "2", "3", "4"], out
        assert served(port) - before == 3  # pages of 2, 2 and 1 partitions
