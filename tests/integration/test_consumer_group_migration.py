"""KIP-848's online upgrade and downgrade against a real broker process: a
classic group whose members use the ``consumer`` embedded protocol becomes a
consumer group when a member joins with ConsumerGroupHeartbeat — its
classic members stay, served by JoinGroup/SyncGroup/Heartbeat against the
consumer group — and turns back into a classic group when its last
consumer-protocol member leaves (Kafka's GroupMetadataManager, broker key
``group.consumer.migration.policy``).

Raw requests (pylog's KafkaConnection) pin Kafka's answers: the converted
members keep their generation as member epoch and their assignment; a
classic heartbeat is told REBALANCE_IN_PROGRESS once the group epoch moves;
the classic member's rejoin is answered at once with its member epoch as the
generation and no leader, its SyncGroup with its share of the server's
assignment; ConsumerGroupDescribe v1 tells the member types apart; the
records are loaded back after a restart; the policy refuses what it must.
Stock clients (confluent-kafka, and Kafka's Java client as a classic member)
then change protocol mid-stream with every record read once.
"""

from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from broker_process import PYLOG, BrokerProcess, ck_produce, topic_name

from pylog.protocol.client import KafkaConnection

pytestmark = pytest.mark.integration

JOIN, SYNC, HEARTBEAT_CLASSIC, LEAVE = 11, 14, 12, 13
CG_HEARTBEAT, CG_DESCRIBE, LIST, DESCRIBE_GROUPS, COMMIT, FETCH = 68, 69, 16, 15, 8, 9
NONE, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS, MEMBER_ID_REQUIRED = 0, 22, 27, 79
GROUP_ID_NOT_FOUND, UNKNOWN_MEMBER_ID = 69, 25
CLASSIC_MEMBER, CONSUMER_MEMBER = 0, 1


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(
        tmp_path_factory.mktemp("migration") / "data",
        {
            "offsets.topic.num.partitions": 2,
            "group.initial.rebalance.delay.ms": 0,
            "group.consumer.session.timeout.ms": 60000,
            "group.consumer.min.heartbeat.interval.ms": 500,
            "group.consumer.heartbeat.interval.ms": 500,
        },
    ).start()
    try:
        yield b
    finally:
        if b.proc is not None:
            b.stop(signal.SIGKILL)


def create_topic(bootstrap: str, topic: str, partitions: int) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(20)
    return topic


def connect(b: BrokerProcess) -> KafkaConnection:
    conn = KafkaConnection(b.bootstrap, client_id="migration-test")
    deadline = time.monotonic() + 30
    while conn.request(10, 3, {"key": "x", "key_type": 0}).error_code != NONE:
        assert time.monotonic() < deadline, "no coordinator"
        time.sleep(0.2)
    return conn


# ------------------------------------------------------------ the consumer protocol


def subscription(topics: list[str], owned: dict[str, list[int]] | None = None) -> bytes:
    """A ConsumerProtocolSubscription v1 (topics, no user data, owned partitions)."""
    out = struct.pack(">hi", 1, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    out += struct.pack(">i", -1)
    owned = owned or {}
    out += struct.pack(">i", len(owned))
    for t, ps in owned.items():
        out += struct.pack(">h", len(t)) + t.encode() + struct.pack(">i", len(ps))
        out += b"".join(struct.pack(">i", p) for p in ps)
    return out


def assignment(partitions: dict[str, list[int]]) -> bytes:
    out = struct.pack(">hi", 1, len(partitions))
    for t, ps in partitions.items():
        out += struct.pack(">h", len(t)) + t.encode() + struct.pack(">i", len(ps))
        out += b"".join(struct.pack(">i", p) for p in ps)
    return out + struct.pack(">i", -1)


def read_assignment(data: bytes) -> dict[str, list[int]]:
    pos = 2
    (n,) = struct.unpack_from(">i", data, pos)
    pos += 4
    out = {}
    for _ in range(n):
        (ln,) = struct.unpack_from(">h", data, pos)
        topic = data[pos + 2 : pos + 2 + ln].decode()
        pos += 2 + ln
        (k,) = struct.unpack_from(">i", data, pos)
        out[topic] = sorted(struct.unpack_from(f">{k}i", data, pos + 4))
        pos += 4 + 4 * k
    return out


def classic_join(
    conn: KafkaConnection, group: str, member: str, topics: list[str],
    owned: dict[str, list[int]] | None = None, instance: str | None = None,
) -> Any:  # fmt: skip
    body = {
        "group_id": group, "session_timeout_ms": 30000, "rebalance_timeout_ms": 30000,
        "member_id": member, "group_instance_id": instance, "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": subscription(topics, owned)}],
    }  # fmt: skip
    r = conn.request(JOIN, 5, body)
    if r.error_code == MEMBER_ID_REQUIRED:
        body["member_id"] = r.member_id
        r = conn.request(JOIN, 5, body)
    return r


def classic_sync(
    conn: KafkaConnection, group: str, member: str, generation: int,
    assignments: dict[str, bytes] | None = None,
) -> Any:  # fmt: skip
    return conn.request(SYNC, 3, {
        "group_id": group, "generation_id": generation, "member_id": member,
        "group_instance_id": None,
        "assignments": [{"member_id": m, "assignment": a} for m, a in (assignments or {}).items()],
    })  # fmt: skip


def classic_heartbeat(conn: KafkaConnection, group: str, member: str, generation: int) -> int:
    return int(conn.request(HEARTBEAT_CLASSIC, 3, {
        "group_id": group, "generation_id": generation, "member_id": member,
        "group_instance_id": None,
    }).error_code)  # fmt: skip


def cg_join(
    conn: KafkaConnection, group: str, member: str, topics: list[str], instance: str | None = None
) -> Any:
    return conn.request(CG_HEARTBEAT, 1, {
        "group_id": group, "member_id": member, "member_epoch": 0, "instance_id": instance,
        "rebalance_timeout_ms": 30000, "subscribed_topic_names": topics, "topic_partitions": [],
    })  # fmt: skip


def cg_heartbeat(conn: KafkaConnection, group: str, member: str, epoch: int, **fields: Any) -> Any:
    body: dict[str, Any] = {"group_id": group, "member_id": member, "member_epoch": epoch}
    body.update(fields)
    return conn.request(CG_HEARTBEAT, 1, body)


def describe(conn: KafkaConnection, group: str) -> Any:
    return conn.request(CG_DESCRIBE, 1, {"group_ids": [group]}).groups[0]


def group_type(conn: KafkaConnection, group: str) -> str | None:
    r = conn.request(LIST, 5, {"states_filter": [], "types_filter": []})
    found = [g for g in r.groups if g.group_id == group]
    return found[0].group_type if found else None


def classic_group(
    b: BrokerProcess, conn: KafkaConnection, group: str, topic: str
) -> tuple[str, str, int]:
    """Two classic members, the leader assigning partitions 0-1 and 2-3."""
    a = classic_join(conn, group, "", [topic])
    assert a.error_code == NONE, a
    # the second joins: the group rebalances, the first rejoins
    conn2 = conn  # one connection: the joins are answered once both are in
    results: dict[str, Any] = {}

    def second() -> None:
        c = KafkaConnection(b.bootstrap, client_id="migration-test-2")
        try:
            results["b"] = classic_join(c, group, "", [topic])
        finally:
            c.close()

    ok = classic_sync(conn2, group, a.member_id, a.generation_id,
                      {a.member_id: assignment({topic: [0, 1, 2, 3]})})  # fmt: skip
    assert ok.error_code == NONE
    t = threading.Thread(target=second)
    t.start()
    deadline = time.monotonic() + 30
    while classic_heartbeat(conn, group, a.member_id, a.generation_id) != REBALANCE_IN_PROGRESS:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    a2 = classic_join(conn, group, a.member_id, [topic])
    t.join(30)
    second_join = results["b"]
    assert a2.error_code == NONE and second_join.error_code == NONE, (a2, second_join)
    leader = a2 if a2.leader == a2.member_id else second_join
    follower = second_join if leader is a2 else a2
    plan = {
        leader.member_id: assignment({topic: [0, 1]}),
        follower.member_id: assignment({topic: [2, 3]}),
    }
    results.clear()

    def sync_follower() -> None:
        c = KafkaConnection(b.bootstrap, client_id="migration-test-3")
        try:
            results["f"] = classic_sync(c, group, follower.member_id, follower.generation_id)
        finally:
            c.close()

    t = threading.Thread(target=sync_follower)
    t.start()
    r = classic_sync(conn, group, leader.member_id, leader.generation_id, plan)
    t.join(30)
    assert r.error_code == NONE and results["f"].error_code == NONE
    return leader.member_id, follower.member_id, leader.generation_id


def test_upgrade_keeps_the_classic_members_and_downgrade_gives_them_back(
    broker: BrokerProcess,
) -> None:
    topic = create_topic(broker.bootstrap, topic_name("upgrade"), 4)
    group = f"g-{uuid.uuid4()}"
    conn = connect(broker)
    c1, c2, gen = classic_group(broker, conn, group, topic)
    assert group_type(conn, group) == "classic"
    # an offset committed by the classic group is kept across the change
    r = conn.request(COMMIT, 8, {
        "group_id": group, "generation_id_or_member_epoch": gen, "member_id": c1,
        "group_instance_id": None,
        "topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "committed_offset": 7, "committed_metadata": ""}]}],
    })  # fmt: skip
    assert r.topics[0].partitions[0].error_code == NONE

    # a member joins with the consumer protocol: the group is upgraded
    new = str(uuid.uuid4())
    j = cg_join(conn, group, new, [topic])
    assert j.error_code == NONE, j
    assert j.member_epoch == gen + 1
    assert group_type(conn, group) == "consumer"
    d = describe(conn, group)
    assert d.error_code == NONE and d.group_epoch == gen + 1
    types = {m.member_id: m.member_type for m in d.members}
    assert types == {c1: CLASSIC_MEMBER, c2: CLASSIC_MEMBER, new: CONSUMER_MEMBER}
    epochs = {m.member_id: m.member_epoch for m in d.members}
    assert epochs[c1] == epochs[c2] == gen
    held = {m.member_id: sorted(p for t in m.assignment.topic_partitions for p in t.partitions)
            for m in d.members}  # fmt: skip
    assert held[c1] == [0, 1] and held[c2] == [2, 3]
    # DescribeGroups sees no classic group any more (Kafka: Dead before v6)
    dg = conn.request(DESCRIBE_GROUPS, 5, {"groups": [group]}).groups[0]
    assert dg.group_state == "Dead"

    # the classic members are told to rejoin; they do, with what they own
    assert classic_heartbeat(conn, group, c1, gen) == REBALANCE_IN_PROGRESS
    assert classic_heartbeat(conn, group, c1, gen + 5) == ILLEGAL_GENERATION
    for member, had in ((c1, [0, 1]), (c2, [2, 3])):
        rj = classic_join(conn, group, member, [topic], owned={topic: had})
        assert rj.error_code == NONE, rj
        assert rj.leader == "" and rj.members == [] and rj.protocol_name == "range"
        rs = classic_sync(conn, group, member, rj.generation_id)
        assert rs.error_code == NONE, rs
        kept = read_assignment(bytes(rs.assignment)).get(topic, [])
        assert set(kept) <= set(had)  # nothing another member may still hold
        if rj.generation_id == gen:
            # it had partitions to give up: told to rejoin once it has
            assert classic_heartbeat(conn, group, member, gen) == REBALANCE_IN_PROGRESS
            rj = classic_join(conn, group, member, [topic], owned={topic: kept})
            assert rj.error_code == NONE and rj.generation_id == gen + 1, rj
            rs = classic_sync(conn, group, member, rj.generation_id)
            assert rs.error_code == NONE
        assert classic_heartbeat(conn, group, member, rj.generation_id) == NONE
    # the consumer member gets what the classic members released
    deadline = time.monotonic() + 30
    while True:
        r = cg_heartbeat(conn, group, new, gen + 1, topic_partitions=[])
        assert r.error_code == NONE
        d = describe(conn, group)
        if d.group_state == "Stable":
            break
        assert time.monotonic() < deadline, d
        time.sleep(0.2)
    owned = [p for m in d.members for t in m.assignment.topic_partitions for p in t.partitions]
    assert sorted(owned) == [0, 1, 2, 3]
    assert all(m.assignment.topic_partitions for m in d.members)

    # the consumer-protocol member leaves: the group is classic again
    r = cg_heartbeat(conn, group, new, -1)
    assert r.error_code == NONE
    assert group_type(conn, group) == "classic"
    dg = conn.request(DESCRIBE_GROUPS, 5, {"groups": [group]}).groups[0]
    assert dg.group_state == "PreparingRebalance"
    assert sorted(m.member_id for m in dg.members) == sorted([c1, c2])
    # and its committed offsets are the ones committed before the upgrade
    f = conn.request(FETCH, 8, {"groups": [{"group_id": group, "topics": None}]})
    committed = {p.partition_index: p.committed_offset for t in f.groups[0].topics
                 for p in t.partitions}  # fmt: skip
    assert committed.get(0) == 7
    conn.close()


def test_a_classic_static_member_replacing_the_last_consumer_member_downgrades(
    broker: BrokerProcess,
) -> None:
    """Kafka's other downgrade: the static instance of the last member on the
    consumer protocol comes back on the classic protocol; the group is
    classic again at once, Stable, the newcomer holding the old member's
    target — no rebalance."""
    topic = create_topic(broker.bootstrap, topic_name("static"), 4)
    group = f"g-{uuid.uuid4()}"
    conn = connect(broker)
    c1, c2, gen = classic_group(broker, conn, group, topic)
    modern = str(uuid.uuid4())
    assert cg_join(conn, group, modern, [topic], instance="s1").error_code == NONE
    assert group_type(conn, group) == "consumer"
    target = [p for m in describe(conn, group).members if m.member_id == modern
              for t in m.target_assignment.topic_partitions for p in t.partitions]  # fmt: skip
    assert target  # the server gave it a share
    r = classic_join(conn, group, "", [topic], instance="s1")
    assert r.error_code == NONE, r
    assert group_type(conn, group) == "classic"
    dg = conn.request(DESCRIBE_GROUPS, 5, {"groups": [group]}).groups[0]
    assert dg.group_state == "Stable"
    assert sorted(m.member_id for m in dg.members) == sorted([c1, c2, r.member_id])
    assert r.generation_id > gen and r.protocol_name == "range"
    s = classic_sync(conn, group, r.member_id, r.generation_id)
    assert s.error_code == NONE
    assert sorted(read_assignment(bytes(s.assignment)).get(topic, [])) == sorted(target)
    assert classic_heartbeat(conn, group, r.member_id, r.generation_id) == NONE
    conn.close()


def test_the_policy_can_refuse_the_upgrade(tmp_path_factory: pytest.TempPathFactory) -> None:
    b = BrokerProcess(tmp_path_factory.mktemp("migration-off") / "data", {
        "offsets.topic.num.partitions": 1, "group.initial.rebalance.delay.ms": 0,
        "group.consumer.migration.policy": "downgrade",
    }).start()  # fmt: skip
    try:
        topic = create_topic(b.bootstrap, topic_name("noupgrade"), 4)
        group = f"g-{uuid.uuid4()}"
        conn = connect(b)
        c1, _, gen = classic_group(b, conn, group, topic)
        r = cg_join(conn, group, str(uuid.uuid4()), [topic])
        assert r.error_code == GROUP_ID_NOT_FOUND, r
        # nothing changed for the classic members
        assert classic_heartbeat(conn, group, c1, gen) == NONE
        assert group_type(conn, group) == "classic"
        conn.close()
    finally:
        b.stop(signal.SIGKILL)


def test_the_upgraded_group_is_loaded_back(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The records written at the upgrade (the classic group's tombstone, the
    members with their ClassicMemberMetadata) are what a restart loads."""
    b = BrokerProcess(tmp_path_factory.mktemp("migration-restart") / "data", {
        "offsets.topic.num.partitions": 1, "group.initial.rebalance.delay.ms": 0,
    }).start()  # fmt: skip
    try:
        topic = create_topic(b.bootstrap, topic_name("reload"), 4)
        group = f"g-{uuid.uuid4()}"
        conn = connect(b)
        c1, c2, gen = classic_group(b, conn, group, topic)
        new = str(uuid.uuid4())
        assert cg_join(conn, group, new, [topic]).error_code == NONE
        before = describe(conn, group)
        conn.close()
        b.stop(signal.SIGTERM)
        b.start()
        conn = connect(b)
        deadline = time.monotonic() + 30
        while (after := describe(conn, group)).error_code != NONE:
            assert time.monotonic() < deadline
            time.sleep(0.2)

        def shape(d: Any) -> Any:
            return (
                d.group_epoch,
                d.assignment_epoch,
                sorted((m.member_id, m.member_epoch, m.member_type) for m in d.members),
            )

        assert shape(after) == shape(before)
        # the classic members go on with the classic protocol
        assert classic_heartbeat(conn, group, c1, gen) == REBALANCE_IN_PROGRESS
        rj = classic_join(conn, group, c2, [topic], owned={topic: [2, 3]})
        assert rj.error_code == NONE and rj.protocol_name == "range"
        conn.close()
    finally:
        b.stop(signal.SIGKILL)


# ------------------------------------------------------------ real clients


def tool_state(b: BrokerProcess, group: str) -> list[str]:
    """`pylog groups describe --state`'s row: group, state, protocol type,
    assignor, members, type."""
    out = subprocess.run(
        [PYLOG, "groups", "describe", "--group", group, "--state",
         "--bootstrap-server", b.bootstrap],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()[1].split()


def test_confluent_kafka_members_change_protocol_mid_stream(broker: BrokerProcess) -> None:
    """Two classic confluent-kafka consumers read and commit; one restarts
    with group.protocol=consumer (the group is upgraded), later leaves (it is
    classic again): every record is read once, the commits carry over."""
    from confluent_kafka import Consumer

    topic = create_topic(broker.bootstrap, topic_name("ckmig"), 4)
    group = f"g-{uuid.uuid4()}"
    seen: list[int] = []
    lock = threading.Lock()
    stop: dict[str, threading.Event] = {}
    assignments: dict[str, list[int]] = {}
    errors: list[str] = []
    produced = 0

    def produce(n: int) -> None:
        nonlocal produced
        records = [(b"k%d" % i, b"%d" % i, None) for i in range(produced, produced + n)]
        ck_produce(broker.bootstrap, topic, records)
        produced += n

    def run(name: str, protocol: str) -> None:
        conf = {
            "bootstrap.servers": broker.bootstrap, "group.id": group, "client.id": name,
            "auto.offset.reset": "earliest", "enable.auto.commit": False,
            "group.protocol": protocol,
        }  # fmt: skip
        if protocol == "classic":
            conf.update({"session.timeout.ms": 10000, "heartbeat.interval.ms": 500})
        c = Consumer(conf)
        c.subscribe([topic])
        try:
            while not stop[name].is_set():
                m = c.poll(0.1)
                assignments[name] = sorted(p.partition for p in c.assignment())
                if m is None or m.error():
                    continue
                try:
                    c.commit(message=m, asynchronous=False)
                except Exception as e:  # a failed commit would explain a duplicate
                    errors.append(f"{name}: {e}")
                with lock:
                    seen.append(int(m.value()))
        finally:
            c.close()
            assignments.pop(name, None)

    threads: dict[str, threading.Thread] = {}

    def start(name: str, protocol: str) -> None:
        stop[name] = threading.Event()
        threads[name] = threading.Thread(target=run, args=(name, protocol), daemon=True)
        threads[name].start()

    def halt(name: str) -> None:
        stop[name].set()
        threads[name].join(60)
        assert not threads[name].is_alive()

    def split_between(names: list[str]) -> None:
        deadline = time.monotonic() + 90
        while True:
            got = [assignments.get(n, []) for n in names]
            if sorted(p for g in got for p in g) == list(range(4)) and all(got):
                return
            assert time.monotonic() < deadline, f"no split: {assignments}"
            time.sleep(0.2)

    def read_all() -> None:
        deadline = time.monotonic() + 90
        while len(set(seen)) < produced:
            assert time.monotonic() < deadline, f"read {len(set(seen))} of {produced}"
            time.sleep(0.2)

    conn = connect(broker)
    try:
        start("a", "classic")
        start("b", "classic")
        split_between(["a", "b"])
        produce(200)
        read_all()
        assert group_type(conn, group) == "classic"
        # b restarts with the consumer protocol: the group is upgraded
        halt("b")
        produce(200)
        start("b", "consumer")
        split_between(["a", "b"])
        assert group_type(conn, group) == "consumer"
        d = describe(conn, group)
        assert sorted(m.member_type for m in d.members) == [CLASSIC_MEMBER, CONSUMER_MEMBER]
        assert tool_state(broker, group)[5] == "consumer"
        produce(200)
        read_all()
        # b leaves: the group is classic again, a reads on alone
        halt("b")
        deadline = time.monotonic() + 30
        while group_type(conn, group) != "classic":
            assert time.monotonic() < deadline
            time.sleep(0.2)
        produce(200)
        split_between(["a"])
        read_all()
        assert tool_state(broker, group)[5] == "classic"
        halt("a")
    finally:
        for name in stop:
            stop[name].set()
        conn.close()
    assert not errors, errors
    assert sorted(seen) == list(range(produced)), "a record read twice or never"
    conn = connect(broker)
    r = conn.request(FETCH, 8, {"groups": [{"group_id": group, "topics": None}]})
    assert sum(p.committed_offset for t in r.groups[0].topics for p in t.partitions) == produced
    conn.close()


def test_java_classic_member_in_an_upgraded_group(broker: BrokerProcess) -> None:
    """Kafka's Java consumer, classic protocol, stays in the group while a
    confluent-kafka member joins with the consumer protocol: the Java member
    rejoins the consumer group through JoinGroup/SyncGroup, gives up half its
    partitions and reads on; nothing is read twice or lost."""
    java_client = pytest.importorskip("java_client")
    try:
        java_client.jar_path()
    except RuntimeError as e:
        pytest.skip(str(e))
    from confluent_kafka import Consumer

    topic = create_topic(broker.bootstrap, topic_name("javamig"), 4)
    group = f"g-{uuid.uuid4()}"
    total = 400
    ck_produce(broker.bootstrap, topic, [(None, b"%d" % i, None) for i in range(total // 2)])
    cmd = java_client.command(
        "consume", "--bootstrap", broker.bootstrap, "--topic", topic, "--group", group,
        "--count", str(10**9), "--timeout-ms", "60000",
        "--property", "enable.auto.commit=true",
        "--property", "auto.commit.interval.ms=200",
        "--property", "partition.assignment.strategy="
        "org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
    )  # fmt: skip
    java = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ})  # fmt: skip
    java_seen: list[int] = []

    def read_java() -> None:
        assert java.stdout is not None
        for line in java.stdout:
            if line.startswith("{"):
                r = json.loads(line)
                if r.get("type") == "record":
                    java_seen.append(int(r["value"]))

    reader = threading.Thread(target=read_java, daemon=True)
    reader.start()
    conn = connect(broker)
    ck_seen: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while group_type(conn, group) != "classic":
            assert time.monotonic() < deadline, "the Java member never joined"
            time.sleep(0.5)
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                      "group.protocol": "consumer", "auto.offset.reset": "earliest",
                      "enable.auto.commit": False})  # fmt: skip
        c.subscribe([topic])
        try:
            deadline = time.monotonic() + 60
            while not c.assignment() or len(c.assignment()) == 4:
                assert time.monotonic() < deadline, "no split with the Java member"
                m = c.poll(0.2)
                if m is not None and not m.error():
                    ck_seen.append(int(m.value()))
                    c.commit(message=m, asynchronous=False)
            d = describe(conn, group)
            assert sorted(m.member_type for m in d.members) == [CLASSIC_MEMBER, CONSUMER_MEMBER]
            ck_produce(broker.bootstrap, topic,
                       [(None, b"%d" % i, None) for i in range(total // 2, total)])  # fmt: skip
            deadline = time.monotonic() + 120
            while len(java_seen) + len(ck_seen) < total:
                assert time.monotonic() < deadline, (len(java_seen), len(ck_seen))
                m = c.poll(0.2)
                if m is not None and not m.error():
                    ck_seen.append(int(m.value()))
                    c.commit(message=m, asynchronous=False)
        finally:
            c.close()
    finally:
        java.send_signal(signal.SIGTERM)
        java.wait(60)
        reader.join(30)
        conn.close()
    both = sorted(java_seen + ck_seen)
    assert both == list(range(total)), (len(java_seen), len(ck_seen))
