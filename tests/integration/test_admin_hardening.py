"""Requests that must not sink the broker: a real broker on loopback, raw
requests built with pylog's own codec (KafkaConnection), and where a restart
or a signal matters, a `pylog broker start` process.

Each test reproduces one finding of the hostile test of the admin and metadata
paths: oversized partition counts, mass auto-creation, internal topics,
requests by topic id and extreme retention, client strings in log lines."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pylog.errors import ErrorCode
from pylog.protocol import ZERO_UUID, ApiKey
from pylog.protocol.client import KafkaConnection
from pylog.testing import EmbeddedBroker, broker

E = ErrorCode
K = ApiKey
PYLOG = str(Path(sys.executable).with_name("pylog"))


@pytest.fixture
def b() -> Iterator[EmbeddedBroker]:
    with broker() as running:
        yield running


def conn(b: EmbeddedBroker, timeout: float = 30) -> KafkaConnection:
    return KafkaConnection(b.bootstrap_servers, timeout=timeout)


def metadata(c: KafkaConnection, version: int, topics: list[dict[str, Any]] | None) -> Any:
    return c.request(
        K.METADATA,
        version,
        {
            "topics": topics,
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False,
        },
    )


# ---------------------------------------------------------------- 10: by id, retention


def test_metadata_v10_v11_by_topic_id_is_answered_not_a_closed_connection(
    b: EmbeddedBroker,
) -> None:
    with conn(b) as c:
        c.request(K.CREATE_TOPICS, 5, {"topics": [{"name": "known", "num_partitions": 2,
                  "replication_factor": 1, "assignments": [], "configs": []}],
                  "timeout_ms": 5000})  # fmt: skip
        known = metadata(c, 12, [{"name": "known"}]).topics[0].topic_id
        for version in (10, 11, 12):
            empty = None if version >= 12 else ""
            r = metadata(c, version, [{"name": None, "topic_id": ZERO_UUID}])
            assert [(t.error_code, t.name) for t in r.topics] == [(E.INVALID_REQUEST, empty)]
            r = metadata(c, version, [{"name": None, "topic_id": "AAAAAAAAAAAAAAAAAAAAAQ"}])
            assert [(t.error_code, t.name) for t in r.topics] == [(E.UNKNOWN_TOPIC_ID, empty)]
            r = metadata(c, version, [{"name": None, "topic_id": known}])
            assert [(t.error_code, t.name, len(t.partitions)) for t in r.topics] == [
                (E.NONE, "known", 2)
            ]


def test_offset_commit_with_the_largest_retention_is_accepted(b: EmbeddedBroker) -> None:
    with conn(b) as c:
        # commits name partitions that exist (UNKNOWN_TOPIC_OR_PARTITION otherwise)
        assert create_topics(c, ("t", 1)) in ([("t", E.NONE)], [("t", E.TOPIC_ALREADY_EXISTS)])
        assert c.request(K.FIND_COORDINATOR, 3, {"key": "g", "key_type": 0}).error_code == 0
        deadline = time.monotonic() + 20
        while True:
            r = c.request(
                K.OFFSET_COMMIT,
                4,
                {
                    "group_id": "g",
                    "generation_id_or_member_epoch": -1,
                    "member_id": "",
                    "retention_time_ms": 2**63 - 1,
                    "topics": [{"name": "t", "partitions": [
                        {"partition_index": 0, "committed_offset": 5, "committed_metadata": ""}
                    ]}],
                },
            )  # fmt: skip
            code = r.topics[0].partitions[0].error_code
            if code != E.COORDINATOR_LOAD_IN_PROGRESS or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert code == E.NONE
        r = c.request(
            K.OFFSET_FETCH,
            3,
            {"group_id": "g", "topics": [{"name": "t", "partition_indexes": [0]}]},
        )
        assert r.topics[0].partitions[0].committed_offset == 5


# ---------------------------------------------------------------- 7: partition caps


def create_topics(
    c: KafkaConnection, *topics: tuple[str, int], validate_only: bool = False
) -> list[tuple[str, int]]:
    r = c.request(
        K.CREATE_TOPICS,
        5,
        {
            "topics": [
                {"name": n, "num_partitions": p, "replication_factor": -1, "assignments": [],
                 "configs": []}
                for n, p in topics
            ],
            "timeout_ms": 5000,
            "validate_only": validate_only,
        },
    )  # fmt: skip
    return [(t.name, t.error_code) for t in r.topics]


def create_partitions(c: KafkaConnection, *topics: tuple[str, int]) -> list[tuple[str, int]]:
    r = c.request(
        K.CREATE_PARTITIONS,
        1,
        {
            "topics": [{"name": n, "count": k, "assignments": None} for n, k in topics],
            "timeout_ms": 5000,
            "validate_only": False,
        },
    )
    return [(t.name, t.error_code) for t in r.results]


def partition_dirs(log_dir: str, topic: str) -> int:
    return sum(1 for d in os.listdir(log_dir) if d.rsplit("-", 1)[0] == topic)


def test_create_topics_asking_for_2_billion_partitions_is_refused_whole(
    b: EmbeddedBroker,
) -> None:
    """40 bytes asking for 2^31-1 partitions once made ~1,000 partitions a
    second on the event loop (no other client answered, SIGTERM ignored),
    wrote the topic to the store first, and the next start failed after
    minutes. Kafka's controller refuses a request for more than 10,000
    partitions whole, POLICY_VIOLATION."""
    with conn(b) as c:
        got = create_topics(c, ("huge", 2**31 - 1), ("small", 1))
        assert got == [("huge", E.POLICY_VIOLATION), ("small", E.POLICY_VIOLATION)]
        got = create_topics(c, ("a", 6000), ("b", 4001))  # 10,001 together
        assert got == [("a", E.POLICY_VIOLATION), ("b", E.POLICY_VIOLATION)]
        r = c.request(
            K.CREATE_TOPICS,
            5,
            {"topics": [{"name": "assigned", "num_partitions": -1, "replication_factor": -1,
                         "assignments": [{"partition_index": i, "broker_ids": [0]}
                                         for i in range(10_001)],
                         "configs": []}],
             "timeout_ms": 5000},
        )  # fmt: skip
        assert [(t.name, t.error_code) for t in r.topics] == [("assigned", E.POLICY_VIOLATION)]
        assert create_topics(c, ("small", 2)) == [("small", E.NONE)]
        assert create_partitions(c, ("small", 2**31 - 1)) == [("small", E.POLICY_VIOLATION)]
    assert partition_dirs(b.log_dir, "huge") == 0
    assert partition_dirs(b.log_dir, "small") == 2
    b.restart()
    with conn(b) as c:
        r = metadata(c, 9, [{"name": "huge"}, {"name": "small"}])
        assert [(t.name, t.error_code, len(t.partitions)) for t in r.topics] == [
            ("huge", E.UNKNOWN_TOPIC_OR_PARTITION, 0),
            ("small", E.NONE, 2),
        ]


def test_max_broker_partitions_caps_create_topics_create_partitions_and_auto_create() -> None:
    with broker({"max.broker.partitions": "10"}) as b, conn(b) as c:
        assert create_topics(c, ("eight", 8)) == [("eight", E.NONE)]
        assert create_topics(c, ("three", 3)) == [("three", E.POLICY_VIOLATION)]
        assert create_topics(c, ("three", 3), validate_only=True) == [("three", E.POLICY_VIOLATION)]
        assert create_partitions(c, ("eight", 11)) == [("eight", E.POLICY_VIOLATION)]
        assert create_partitions(c, ("eight", 9)) == [("eight", E.NONE)]
        r = c.request(
            K.METADATA,
            9,
            {"topics": [{"name": "auto-1"}, {"name": "auto-2"}],
             "allow_auto_topic_creation": True},
        )  # fmt: skip
        assert [(t.name, t.error_code) for t in r.topics] == [
            ("auto-1", E.NONE),
            ("auto-2", E.UNKNOWN_TOPIC_OR_PARTITION),
        ]
        assert partition_dirs(b.log_dir, "three") == 0
        assert partition_dirs(b.log_dir, "auto-2") == 0


def test_a_store_holding_an_oversized_topic_still_starts(tmp_path: Path) -> None:
    """A store written before the caps (one pylog-metadata.json, the old
    format) with the 2^31-1-partition topic: the broker starts without that
    topic's partitions, and it can be deleted."""
    (tmp_path / "pylog-metadata.json").write_text(
        '{"cluster_id": "hW6Zq1mFQjGJ0cQ2ZxLxJw", "producer_id_block_end": 0, '
        '"topics": {"huge": {"configs": {}, "partitions": 2147483647, '
        '"replication_factor": 1, "topic_id": "C7hX4Rb2Q9yqR0b8lTqPkA"}, '
        '"ok": {"configs": {}, "partitions": 2, "replication_factor": 1, '
        '"topic_id": "Yq0sE2vYQkq3j2qJ3v5bRw"}}, "version": 1}'
    )
    with broker(log_dir=str(tmp_path)) as b, conn(b) as c:
        assert partition_dirs(b.log_dir, "ok") == 2
        assert partition_dirs(b.log_dir, "huge") == 0
        r = c.request(K.DELETE_TOPICS, 4, {"topic_names": ["huge"], "timeout_ms": 5000})
        assert [(t.name, t.error_code) for t in r.responses] == [("huge", E.NONE)]


# ---------------------------------------------------------------- 8: auto-creation


def auto_create(c: KafkaConnection, names: list[str]) -> Any:
    return c.request(
        K.METADATA,
        9,
        {"topics": [{"name": n} for n in names], "allow_auto_topic_creation": True},
    )


def test_auto_creating_many_topics_is_one_store_write_and_leaves_the_loop_free(
    b: EmbeddedBroker,
) -> None:
    """Each auto-created topic rewrote and fsynced the whole metadata file on
    the event loop: 2,000 new topics in one Metadata request blocked every
    client for 17 s. Now one request's topics are one journal entry, made on
    a worker thread: here the partitions' creation is held up, and another
    connection is answered meanwhile."""
    import threading

    from pylog.metadata import MetadataEvent

    assert b.server is not None and b.server.metadata_store is not None
    store = b.server.metadata_store
    journal = Path(b.log_dir) / "pylog-metadata.journal"
    lines_before = journal.read_bytes().count(b"\n")
    release = threading.Event()
    entered = threading.Event()

    def slow_listener(event: MetadataEvent) -> None:
        if event.kind == "create" and event.topic.name.startswith("many-"):
            entered.set()
            release.wait(30)

    store.add_listener(slow_listener)
    names = [f"many-{i:04d}" for i in range(300)]
    answer: list[Any] = []

    def ask() -> None:
        with conn(b, timeout=60) as c:
            answer.append(auto_create(c, names))

    asker = threading.Thread(target=ask)
    asker.start()
    try:
        assert entered.wait(30), "the auto-creation did not start"
        with conn(b, timeout=10) as other:  # the loop is free: answered at once
            assert other.request(K.API_VERSIONS, 0, {}).error_code == 0
            r = metadata(other, 9, [{"name": "many-0000"}])  # reads take no lock
            assert r.topics[0].error_code == E.NONE
    finally:
        release.set()
        asker.join(60)
    assert [t.error_code for t in answer[0].topics] == [E.NONE] * 300
    # One journal entry (one fsync) for the 300 topics.
    assert journal.read_bytes().count(b"\n") - lines_before == 1


def test_one_metadata_request_auto_creates_at_most_10000_partitions(tmp_path: Path) -> None:
    """The 10,000-partition cap of a request holds for auto-creation too: the
    names past it are answered LEADER_NOT_AVAILABLE and made by the client's
    next Metadata request (the deferral is exercised by the 20,000-topic
    test below); a default past the cap makes nothing."""
    with broker({"num.partitions": "10001"}, log_dir=str(tmp_path)) as b, conn(b) as c:
        r = auto_create(c, ["p1", "p2"])
        assert [(t.name, t.error_code) for t in r.topics] == [
            ("p1", E.UNKNOWN_TOPIC_OR_PARTITION),
            ("p2", E.UNKNOWN_TOPIC_OR_PARTITION),
        ]
        assert partition_dirs(b.log_dir, "p1") == 0


def broker_process(data: Path, *overrides: str) -> tuple[subprocess.Popen[str], str]:
    cmd = [PYLOG, "broker", "start", "--log-level", "WARNING",
           "--override", "listeners=PLAINTEXT://127.0.0.1:0",
           "--override", f"log.dirs={data}"]  # fmt: skip
    for o in overrides:
        cmd += ["--override", o]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert "started: PLAINTEXT://127.0.0.1:" in line, line
    return proc, "127.0.0.1:" + line.split("127.0.0.1:")[1].split()[0]


def test_sigterm_during_a_huge_auto_create_stops_the_broker(tmp_path: Path) -> None:
    """20,000 new topics named in one Metadata request kept the event loop
    busy for minutes and SIGTERM was not handled. Now the broker stops within
    seconds, and starts again."""
    data = tmp_path / "data"
    proc, boot = broker_process(data)
    try:
        c = KafkaConnection(boot, timeout=120)
        c.send(
            K.METADATA,
            9,
            {"topics": [{"name": f"t{i:05d}"} for i in range(20_000)],
             "allow_auto_topic_creation": True},
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while not any(d.startswith("t0") for d in os.listdir(data)):
            assert time.monotonic() < deadline, "the auto-creation did not start"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0  # the bound only catches a hang
        c.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    proc, boot = broker_process(data)
    try:
        with KafkaConnection(boot, timeout=30) as c:
            assert c.request(K.API_VERSIONS, 0, {}).error_code == 0
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


# ---------------------------------------------------------------- 9: internal topics


def commit(c: KafkaConnection, group: str, offset: int) -> int:
    """Commit (as a group that manages its own partitions), looking the
    coordinator up again while it answers a retriable error. Topic "t" is
    made first: a commit names partitions that exist."""
    assert create_topics(c, ("t", 1))[0][1] in (E.NONE, E.TOPIC_ALREADY_EXISTS)
    deadline = time.monotonic() + 20
    while True:
        c.request(K.FIND_COORDINATOR, 3, {"key": group, "key_type": 0})
        r = c.request(
            K.OFFSET_COMMIT,
            8,
            {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
             "group_instance_id": None,
             "topics": [{"name": "t", "partitions": [
                 {"partition_index": 0, "committed_offset": offset,
                  "committed_leader_epoch": -1, "committed_metadata": ""}]}]},
        )  # fmt: skip
        code = int(r.topics[0].partitions[0].error_code)
        retriable = (E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR)
        if code not in retriable or time.monotonic() > deadline:
            return code
        time.sleep(0.05)


def committed(c: KafkaConnection, group: str) -> int:
    deadline = time.monotonic() + 20
    while True:
        r = c.request(
            K.OFFSET_FETCH,
            5,
            {"group_id": group, "topics": [{"name": "t", "partition_indexes": [0]}]},
        )
        if r.error_code != E.COORDINATOR_LOAD_IN_PROGRESS or time.monotonic() > deadline:
            assert r.error_code == E.NONE
            return int(r.topics[0].partitions[0].committed_offset)
        time.sleep(0.05)


def test_partitions_cannot_be_added_to_the_offsets_topic(b: EmbeddedBroker) -> None:
    """Adding partitions to __consumer_offsets moved every group to another
    partition (its id's hash modulo the count): their committed offsets were
    gone, at once and after a restart. Kafka's tools refuse it; so does the
    broker now."""
    with conn(b) as c:
        groups = [f"g{i}" for i in range(8)]
        for i, g in enumerate(groups):
            assert commit(c, g, 100 + i) == E.NONE
        assert create_partitions(c, ("__consumer_offsets", 4)) == [
            ("__consumer_offsets", E.POLICY_VIOLATION)
        ]
        assert [committed(c, g) for g in groups] == [100 + i for i in range(8)]
    b.restart()
    with conn(b) as c:
        assert [committed(c, g) for g in groups] == [100 + i for i in range(8)]


def test_metadata_does_not_auto_create_the_offsets_topic_as_a_plain_topic(
    b: EmbeddedBroker,
) -> None:
    """Auto-created by a Metadata request, __consumer_offsets had
    num.partitions partitions and no compaction; the coordinator then used it.
    It is made by the first FindCoordinator, with offsets.topic.* settings."""
    with conn(b) as c:
        r = auto_create(c, ["__consumer_offsets", "__transaction_state"])
        assert [t.error_code for t in r.topics] == [E.UNKNOWN_TOPIC_OR_PARTITION] * 2
        assert commit(c, "g", 3) == E.NONE
        r = c.request(
            K.DESCRIBE_CONFIGS,
            1,
            {"resources": [{"resource_type": 2, "resource_name": "__consumer_offsets",
                            "configuration_keys": ["cleanup.policy"]}],
             "include_synonyms": False},
        )  # fmt: skip
        assert [e.value for e in r.results[0].configs] == ["compact"]


def test_deleting_the_offsets_topic_drops_the_offsets_and_commits_work_again(
    b: EmbeddedBroker,
) -> None:
    """Kafka lets an admin delete __consumer_offsets (only its tools refuse):
    the committed offsets are gone. Commits then failed until a restart; now
    the coordinator drops its groups with the topic, and the next
    FindCoordinator makes a new one."""
    with conn(b) as c:
        assert commit(c, "g", 5) == E.NONE
        r = c.request(
            K.DELETE_TOPICS, 4, {"topic_names": ["__consumer_offsets"], "timeout_ms": 5000}
        )
        assert [(t.name, t.error_code) for t in r.responses] == [("__consumer_offsets", E.NONE)]
        assert commit(c, "g", 7) == E.NONE
        assert committed(c, "g") == 7
        assert commit(c, "h", 9) == E.NONE
    b.restart()
    with conn(b) as c:
        assert committed(c, "g") == 7
        assert committed(c, "h") == 9


# ---------------------------------------------------------------- 11: log lines


def test_client_strings_cannot_forge_log_lines(
    b: EmbeddedBroker, caplog: pytest.LogCaptureFixture
) -> None:
    """A group id (or member id, protocol name, topic name) holding a newline
    wrote a second, forged line into the broker log. Client strings are now
    shown quoted and escaped: one record stays one line."""
    forged = "g\n2026-01-01 00:00:00,000 ERROR pylog.broker: forged"
    caplog.set_level(logging.DEBUG, logger="pylog")
    with conn(b) as c:
        assert c.request(K.FIND_COORDINATOR, 3, {"key": forged, "key_type": 0}).error_code == 0
        join = {
            "group_id": forged,
            "session_timeout_ms": 10_000,
            "rebalance_timeout_ms": 10_000,
            "member_id": "",
            "group_instance_id": None,
            "protocol_type": "consumer",
            "protocols": [{"name": "range\nforged", "metadata": b""}],
        }
        deadline = time.monotonic() + 20
        while True:
            r = c.request(K.JOIN_GROUP, 5, join)
            if r.error_code == E.MEMBER_ID_REQUIRED:
                join["member_id"] = r.member_id
                continue
            if r.error_code != E.COORDINATOR_LOAD_IN_PROGRESS or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert r.error_code == E.NONE
        assert commit(c, "h\rforged", 1) == E.NONE
    lines = [rec.getMessage() for rec in caplog.records if rec.name.startswith("pylog")]
    about_group = [m for m in lines if "forged" in m]
    assert about_group, lines  # the group was logged about ...
    for m in about_group:  # ... on one line each, the id escaped
        assert "\n" not in m and "\r" not in m, m
    assert any(repr(forged) in m for m in about_group)
