"""Kafka Connect (Apache Kafka's workers and its file connectors, from Maven
Central) against a `pylog broker start` process: FileStreamSource copies a
file's lines into a topic and FileStreamSink copies the topic into another
file.

Standalone, the source connector's position lives in the worker's offset file
and the sink's in its consumer group's committed offsets on pylog; a
distributed worker keeps its connectors, their source offsets and their status
in three compacted topics on pylog as well. After a clean restart of the
worker, lines appended to the input are copied once, and nothing read before
is copied again.
"""

from __future__ import annotations

import json
import signal
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from broker_process import BrokerProcess, topic_name
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType
from kafka_streams_connect import (
    SIGTERM_EXITS,
    JavaProcess,
    connect_distributed,
    connect_standalone,
    write_properties,
)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path / "data").start()
    try:
        yield b
    finally:
        if b.proc is not None:
            b.stop(signal.SIGKILL)


def _topic_values(bootstrap: str, topic: str) -> list[str]:
    """Every record's value on the topic's one partition, in offset order."""
    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False}
    )
    try:
        tp = TopicPartition(topic, 0, 0)
        end = c.get_watermark_offsets(tp, timeout=10)[1]
        c.assign([tp])
        out: list[str] = []
        deadline = time.monotonic() + 30
        while len(out) < end and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            assert m.error() is None, m.error()
            out.append(m.value().decode())
        assert len(out) == end
        return out
    finally:
        c.close()


def _committed(bootstrap: str, group: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        return int(c.committed([TopicPartition(topic, 0)], timeout=10)[0].offset)
    finally:
        c.close()


def _lines(path: Path) -> list[str]:
    """The file's complete lines: a writer may be midway through the last one."""
    text = path.read_text() if path.exists() else ""
    return text[: text.rfind("\n") + 1].splitlines()


def _wait_lines(worker: JavaProcess, path: Path, expected: list[str], timeout: float = 90) -> None:
    """Until ``path`` holds ``expected`` (the timeout is an upper bound); a line
    the input does not have, or one too many, fails at once."""
    deadline = time.monotonic() + timeout
    got: list[str] = []
    while time.monotonic() < deadline:
        got = _lines(path)
        if got == expected:
            return
        assert got == expected[: len(got)], f"{path} diverged from the input: {got[-5:]}"
        assert worker.proc.poll() is None, f"connect exited:\n{worker.stderr_tail()}"
        time.sleep(0.2)
    pytest.fail(
        f"{path} has {len(got)} of {len(expected)} lines after {timeout}s\n"
        f"stderr:\n{worker.stderr_tail()}",
        pytrace=False,
    )


def test_file_source_to_topic_to_file_sink_across_a_restart(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    topic = topic_name("connect")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    source_file, sink_file = tmp_path / "in.txt", tmp_path / "out.txt"
    worker = write_properties(
        tmp_path / "worker.properties",
        {
            "bootstrap.servers": broker.bootstrap,
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            "offset.storage.file.filename": tmp_path / "connect.offsets",
            "offset.flush.interval.ms": 500,
            # An ephemeral port for the REST API: tests may run side by side.
            "listeners": "http://127.0.0.1:0",
            # The file connectors are on the classpath with ServiceLoader
            # manifests: no reflective scan of every jar at start-up.
            "plugin.discovery": "service_load",
            # The sink's group forgets a killed worker's member after 6 s (the
            # brokers' smallest) rather than 45: the restart rejoins sooner.
            "consumer.session.timeout.ms": 6000,
        },
    )
    source = write_properties(
        tmp_path / "source.properties",
        {
            "name": "file-source",
            "connector.class": "FileStreamSource",
            "tasks.max": 1,
            "file": source_file,
            "topic": topic,
        },
    )
    sink = write_properties(
        tmp_path / "sink.properties",
        {
            "name": "file-sink",
            "connector.class": "FileStreamSink",
            "tasks.max": 1,
            "file": sink_file,
            "topics": topic,
        },
    )

    first = [f"line {i} of the first part" for i in range(100)]
    source_file.write_text("".join(f"{line}\n" for line in first))
    connect = connect_standalone(tmp_path, worker, source, sink)
    try:
        _wait_lines(connect, sink_file, first)
        # SIGTERM: the worker stops its tasks, which commit their offsets.
        # SIGTERM: the worker stops its tasks, which commit their offsets, and
        # the JVM exits as a signalled one does.
        assert connect.stop() in SIGTERM_EXITS
    finally:
        connect.kill()
    assert _topic_values(broker.bootstrap, topic) == first
    assert _committed(broker.bootstrap, "connect-file-sink", topic) == len(first)

    second = [f"line {i} of the second part" for i in range(50)]
    with source_file.open("a") as f:
        f.write("".join(f"{line}\n" for line in second))
    connect = connect_standalone(tmp_path, worker, source, sink)
    try:
        _wait_lines(connect, sink_file, first + second)
        # Nothing more arrives: the source resumed after the first part
        # (no line of it sent twice) and the sink after its committed offset.
        time.sleep(2)
        assert _lines(sink_file) == first + second
        assert connect.stop() in SIGTERM_EXITS
    finally:
        connect.kill()
    assert _topic_values(broker.bootstrap, topic) == first + second
    assert _committed(broker.bootstrap, "connect-file-sink", topic) == len(first + second)

    # Killed (no offsets committed on the way out) while copying: at least
    # once, so after the next start every line is there, in order, and
    # anything written twice is a replay of lines already written.
    third = [f"line {i} of the third part" for i in range(2000)]
    with source_file.open("a") as f:
        f.write("".join(f"{line}\n" for line in third))
    connect = connect_standalone(tmp_path, worker, source, sink)
    try:
        deadline = time.monotonic() + 90
        while len(_lines(sink_file)) <= len(first + second):
            assert time.monotonic() < deadline, connect.stderr_tail()
            time.sleep(0.05)
    finally:
        connect.kill()
    # A line the killed sink was midway through writing is the file's, not
    # the broker's: drop it, as whoever reads such a file would.
    sink_file.write_text("".join(f"{line}\n" for line in _lines(sink_file)))
    connect = connect_standalone(tmp_path, worker, source, sink)
    try:
        everything = first + second + third
        deadline = time.monotonic() + 90
        while True:
            got = _lines(sink_file)
            if list(dict.fromkeys(got)) == everything:
                break
            assert time.monotonic() < deadline, (len(got), connect.stderr_tail())
            time.sleep(0.2)
        _assert_replays_only(got, everything)
        _assert_replays_only(_topic_values(broker.bootstrap, topic), everything)
        assert connect.stop() in SIGTERM_EXITS
    finally:
        connect.kill()


def _assert_replays_only(got: list[str], expected: list[str]) -> None:
    """``got`` is ``expected`` with runs of it sent again: each line is either
    the next new one or repeats one already seen (at-least-once delivery)."""
    index = {line: i for i, line in enumerate(expected)}
    new = 0
    for line in got:
        i = index[line]
        assert i <= new, f"{line!r} arrived before {expected[new]!r}"
        new = max(new, i + 1)
    assert new == len(expected)


def _rest(url: str, method: str = "GET", body: dict[str, object] | None = None) -> object:
    """A call to the worker's REST API. Until the worker has joined its group
    it answers 409 (no leader known yet, a rebalance underway): asked again."""
    data = None if body is None else json.dumps(body).encode()
    deadline = time.monotonic() + 90
    while True:
        req = urllib.request.Request(url, data, {"Content-Type": "application/json"}, method=method)
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as e:
            if e.code != 409 or time.monotonic() > deadline:
                raise
        time.sleep(0.5)


def test_distributed_worker_keeps_its_state_in_compacted_topics(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    suffix = uuid.uuid4().hex[:8]
    topic = f"lines-{suffix}"
    stores = {kind: f"connect-{kind}-{suffix}" for kind in ("config", "offset", "status")}
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    source_file, sink_file = tmp_path / "in.txt", tmp_path / "out.txt"
    worker = write_properties(
        tmp_path / "worker.properties",
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": f"connect-{suffix}",
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            **{f"{kind}.storage.topic": name for kind, name in stores.items()},
            **{f"{kind}.storage.replication.factor": 1 for kind in stores},
            "offset.flush.interval.ms": 500,
            "listeners": "http://127.0.0.1:0",
            "plugin.discovery": "service_load",
            "consumer.session.timeout.ms": 6000,
            # A worker's close does not wait for its LeaveGroup to be sent
            # (Kafka's client closes with a zero timer): the next worker's join
            # waits out this session, 6 s (the brokers' smallest) rather than 10.
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 1000,
        },
    )
    first = [f"row {i} before the restart" for i in range(100)]
    source_file.write_text("".join(f"{line}\n" for line in first))

    connect = connect_distributed(tmp_path, worker, "connect-distributed-1")
    try:
        url = connect.rest_url()
        _rest(f"{url}/connectors/src/config", "PUT", {
            "connector.class": "FileStreamSource", "tasks.max": "1",
            "file": str(source_file), "topic": topic,
        })  # fmt: skip
        _rest(f"{url}/connectors/snk/config", "PUT", {
            "connector.class": "FileStreamSink", "tasks.max": "1",
            "file": str(sink_file), "topics": topic,
        })  # fmt: skip
        _wait_lines(connect, sink_file, first)
        assert connect.stop() in SIGTERM_EXITS
    finally:
        connect.kill()

    # The worker created its three topics compacted, with Connect's default
    # partition counts, through pylog's admin APIs.
    topics = admin.list_topics(timeout=10).topics
    partitions = {kind: len(topics[name].partitions) for kind, name in stores.items()}
    assert partitions == {"config": 1, "offset": 25, "status": 5}
    for name in stores.values():
        res = ConfigResource(ResourceType.TOPIC, name)
        policy = admin.describe_configs([res])[res].result(30)["cleanup.policy"]
        assert (policy.value, policy.is_default) == ("compact", False)

    # A new worker reads its connectors and the source's position back from
    # those topics: nothing is configured again, nothing is copied twice.
    second = [f"row {i} after the restart" for i in range(50)]
    with source_file.open("a") as f:
        f.write("".join(f"{line}\n" for line in second))
    connect = connect_distributed(tmp_path, worker, "connect-distributed-2")
    try:
        url = connect.rest_url()
        _wait_lines(connect, sink_file, first + second)
        time.sleep(2)
        assert _lines(sink_file) == first + second
        assert sorted(_rest(f"{url}/connectors")) == ["snk", "src"]  # type: ignore[arg-type]
        # The source's position, as committed to the offset topic (every
        # 500 ms): the end of the input file.
        want = {
            "offsets": [
                {
                    "partition": {"filename": str(source_file)},
                    "offset": {"position": source_file.stat().st_size},
                }
            ]
        }
        deadline = time.monotonic() + 60
        while (offsets := _rest(f"{url}/connectors/src/offsets")) != want:
            assert time.monotonic() < deadline, offsets
            time.sleep(0.3)
        assert connect.stop() in SIGTERM_EXITS
    finally:
        connect.kill()
    assert _topic_values(broker.bootstrap, topic) == first + second
