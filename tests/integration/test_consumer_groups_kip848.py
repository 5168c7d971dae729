"""KIP-848 consumer groups (``group.protocol=consumer``) against a real broker
process: raw ConsumerGroupHeartbeat requests for the exact answers Kafka's
group coordinator gives, then stock clients (confluent-kafka, Kafka's Java
client 4.x) forming groups, splitting partitions, rebalancing as members come
and go, and committing.

Raw requests (pylog's KafkaConnection):

- the reconciliation: a joining member gets nothing another member still
  holds; the holder is asked to revoke first (its epoch stays), and only once
  it says it has does it move to the new epoch and the newcomer get them;
- bad input gets Kafka's error code and leaves the group as it was: future
  and stale member epochs (FENCED_MEMBER_EPOCH), an assignor the broker does
  not have (UNSUPPORTED_ASSIGNOR), a regex RE2 would refuse
  (INVALID_REGULAR_EXPRESSION), missing fields (INVALID_REQUEST), an unknown
  member (UNKNOWN_MEMBER_ID), a static instance still in use
  (UNRELEASED_INSTANCE_ID), a classic group heartbeated at an epoch other than 0
  (GROUP_ID_NOT_FOUND), a
  member too many (GROUP_MAX_SIZE_REACHED);
- OffsetCommit v9 and OffsetFetch v9 check the member epoch
  (STALE_MEMBER_EPOCH, FENCED_MEMBER_EPOCH); ListGroups v5 reports the type;
  DescribeGroups calls the group Dead, as Kafka's v0-5 do;
- a broker restart loads the group back from ``__consumer_offsets``.
"""

from __future__ import annotations

import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from broker_process import PYLOG, BrokerProcess, ck_produce, topic_name

from pylog.protocol.client import KafkaConnection

pytestmark = pytest.mark.integration

HEARTBEAT, DESCRIBE, COMMIT, FETCH, LIST, DESCRIBE_GROUPS, JOIN = 68, 69, 8, 9, 16, 15, 11
NONE, UNKNOWN_MEMBER_ID, INVALID_REQUEST, GROUP_ID_NOT_FOUND = 0, 25, 42, 69
GROUP_MAX_SIZE_REACHED = 81
FENCED_MEMBER_EPOCH, UNRELEASED_INSTANCE_ID, UNSUPPORTED_ASSIGNOR = 110, 111, 112
STALE_MEMBER_EPOCH, INVALID_REGULAR_EXPRESSION, INCONSISTENT_GROUP_PROTOCOL = 113, 128, 23


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(
        tmp_path_factory.mktemp("kip848") / "data",
        {
            "offsets.topic.num.partitions": 2,
            # long sessions: raw-request members heartbeat only when the test
            # says, and none may be fenced meanwhile however slow the machine
            "group.consumer.session.timeout.ms": 60000,
            "group.consumer.min.heartbeat.interval.ms": 500,
            "group.consumer.heartbeat.interval.ms": 500,
            "group.consumer.max.size": 3,
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
    conn = KafkaConnection(b.bootstrap, client_id="kip848-test")
    # the first FindCoordinator creates __consumer_offsets
    deadline = time.monotonic() + 30
    while conn.request(10, 3, {"key": "x", "key_type": 0}).error_code != NONE:
        assert time.monotonic() < deadline, "no coordinator"
        time.sleep(0.2)
    return conn


def hb(conn: KafkaConnection, group: str, member: str, epoch: int, **fields: Any) -> Any:
    body: dict[str, Any] = {"group_id": group, "member_id": member, "member_epoch": epoch}
    body.update(fields)
    return conn.request(HEARTBEAT, 1, body)


def join(
    conn: KafkaConnection, group: str, member: str, topics: list[str],
    rebalance_timeout_ms: int = 30000, **fields: Any,
) -> Any:  # fmt: skip
    return hb(conn, group, member, 0, rebalance_timeout_ms=rebalance_timeout_ms,
              subscribed_topic_names=topics, topic_partitions=[], **fields)  # fmt: skip


def owned(response: Any) -> list[int]:
    assert response.assignment is not None, response
    return sorted(p for t in response.assignment.topic_partitions for p in t.partitions)


def parts(topic_id: str, ps: list[int]) -> list[dict[str, Any]]:
    return [{"topic_id": topic_id, "partitions": ps}]


def describe(conn: KafkaConnection, group: str) -> Any:
    return conn.request(DESCRIBE, 0, {"group_ids": [group]}).groups[0]


def snapshot(conn: KafkaConnection, group: str) -> tuple[Any, ...]:
    """What must not change when a request is refused."""
    g = describe(conn, group)
    members = sorted(
        (m.member_id, m.member_epoch,
         [(t.topic_name, sorted(t.partitions)) for t in m.assignment.topic_partitions])
        for m in g.members
    )  # fmt: skip
    return g.group_state, g.group_epoch, g.assignment_epoch, members


def test_reconciliation_revokes_before_reassigning(broker: BrokerProcess) -> None:
    topic = create_topic(broker.bootstrap, topic_name("recon"), 4)
    group = f"g-{uuid.uuid4()}"
    conn = connect(broker)
    a, b = str(uuid.uuid4()), str(uuid.uuid4())
    ra = join(conn, group, a, [topic])
    assert ra.error_code == NONE and ra.member_epoch == 1 and owned(ra) == [0, 1, 2, 3]
    assert ra.heartbeat_interval_ms == 500
    tid = ra.assignment.topic_partitions[0].topic_id
    # b joins: epoch 2, but every partition is still a's
    rb = join(conn, group, b, [topic])
    assert rb.error_code == NONE and rb.member_epoch == 2 and owned(rb) == []
    g = describe(conn, group)
    assert (g.group_state, g.group_epoch, g.assignment_epoch) == ("Reconciling", 2, 2)
    # a is told to give up two partitions, at its old epoch
    ra = hb(conn, group, a, 1)
    assert ra.error_code == NONE and ra.member_epoch == 1
    kept = owned(ra)
    assert len(kept) == 2
    # b still gets nothing: a has not said it revoked them
    rb = hb(conn, group, b, 2, topic_partitions=[])
    assert rb.error_code == NONE and (rb.assignment is None or owned(rb) == [])
    # a reports what it still owns: it reaches epoch 2
    ra = hb(conn, group, a, 1, topic_partitions=parts(tid, kept))
    assert ra.error_code == NONE and ra.member_epoch == 2
    rb = hb(conn, group, b, 2, topic_partitions=[])
    assert rb.error_code == NONE and owned(rb) == sorted({0, 1, 2, 3} - set(kept))
    g = describe(conn, group)
    assert g.group_state == "Stable" and g.assignor_name == "uniform"
    assert {m.member_id: m.member_epoch for m in g.members} == {a: 2, b: 2}
    # a leaves: b gets everything at epoch 3
    assert hb(conn, group, a, -1).member_epoch == -1
    rb = hb(conn, group, b, 2, topic_partitions=parts(tid, owned(rb)))
    assert rb.member_epoch == 3 and owned(rb) == [0, 1, 2, 3]


def test_bad_heartbeats_get_kafkas_codes_and_change_nothing(broker: BrokerProcess) -> None:
    topic = create_topic(broker.bootstrap, topic_name("bad"), 2)
    group = f"g-{uuid.uuid4()}"
    conn = connect(broker)
    a = str(uuid.uuid4())
    r = join(conn, group, a, [topic], instance_id="inst-a")
    assert r.error_code == NONE and r.member_epoch == 1
    before = snapshot(conn, group)

    def refused(code: int, response: Any) -> None:
        assert response.error_code == code, response
        assert response.error_message, response
        assert snapshot(conn, group) == before

    refused(FENCED_MEMBER_EPOCH, hb(conn, group, a, 7, instance_id="inst-a"))  # from the future
    refused(FENCED_MEMBER_EPOCH, hb(conn, group, a, 1 - 1 + 5, instance_id="inst-a"))
    # stale: not the previous epoch with a subset of the assignment
    r2 = join(conn, group, str(uuid.uuid4()), [topic])  # epoch 2 for the group
    before = snapshot(conn, group)
    assert hb(conn, group, a, 1, instance_id="inst-a").error_code == NONE
    before = snapshot(conn, group)
    refused(FENCED_MEMBER_EPOCH, hb(conn, group, r2.member_id, 1))
    refused(UNSUPPORTED_ASSIGNOR, hb(conn, group, a, 1, server_assignor="sticky"))
    refused(UNSUPPORTED_ASSIGNOR, join(conn, group, str(uuid.uuid4()), [topic],
                                       server_assignor="nope"))  # fmt: skip
    refused(INVALID_REGULAR_EXPRESSION, hb(conn, group, a, 1, subscribed_topic_regex="(a"))
    refused(INVALID_REGULAR_EXPRESSION, hb(conn, group, a, 1, subscribed_topic_regex="(?=x)y"))
    refused(INVALID_REGULAR_EXPRESSION, hb(conn, group, a, 1, subscribed_topic_regex="(a+)+$"))
    refused(INVALID_REQUEST, hb(conn, group, "", 1))
    refused(INVALID_REQUEST, hb(conn, group, a, -3))
    refused(INVALID_REQUEST, hb(conn, group, str(uuid.uuid4()), 0, subscribed_topic_names=[topic],
                                topic_partitions=[]))  # no rebalance timeout  # fmt: skip
    refused(INVALID_REQUEST, hb(conn, "", a, 0))
    refused(UNKNOWN_MEMBER_ID, hb(conn, group, str(uuid.uuid4()), 1))
    refused(UNRELEASED_INSTANCE_ID, join(conn, group, str(uuid.uuid4()), [topic],
                                         instance_id="inst-a"))  # fmt: skip
    refused(GROUP_ID_NOT_FOUND, hb(conn, f"none-{uuid.uuid4()}", a, 3))
    # group.consumer.max.size is 3 here
    assert join(conn, group, str(uuid.uuid4()), [topic]).error_code == NONE
    before = snapshot(conn, group)
    refused(GROUP_MAX_SIZE_REACHED, join(conn, group, str(uuid.uuid4()), [topic]))


def test_static_member_comes_back_to_its_partitions(broker: BrokerProcess) -> None:
    topic = create_topic(broker.bootstrap, topic_name("static"), 4)
    group = f"g-{uuid.uuid4()}"
    conn = connect(broker)
    a, b = str(uuid.uuid4()), str(uuid.uuid4())
    join(conn, group, a, [topic], instance_id="ia")
    rb = join(conn, group, b, [topic], instance_id="ib")
    ra = hb(conn, group, a, 1)
    tid = ra.assignment.topic_partitions[0].topic_id
    ra = hb(conn, group, a, 1, topic_partitions=parts(tid, owned(ra)))
    rb = hb(conn, group, b, 2, topic_partitions=[])
    mine = owned(rb)
    epoch = describe(conn, group).group_epoch
    # b leaves for a moment (-2) and comes back under a new member id
    assert hb(conn, group, b, -2, instance_id="ib").error_code == NONE
    b2 = str(uuid.uuid4())
    r = join(conn, group, b2, [topic], instance_id="ib")
    assert r.error_code == NONE and owned(r) == mine and r.member_epoch == 2
    g = describe(conn, group)
    assert g.group_epoch == epoch, "a static member's return is no rebalance"
    assert sorted(m.member_id for m in g.members) == sorted([a, b2])
    # the old incarnation is fenced
    assert hb(conn, group, b, 2, instance_id="ib").error_code == 82  # FENCED_INSTANCE_ID


def test_offsets_check_the_member_epoch(broker: BrokerProcess) -> None:
    topic = create_topic(broker.bootstrap, topic_name("commit"), 2)
    group = f"g-{uuid.uuid4()}"
    conn = connect(broker)
    a = str(uuid.uuid4())
    assert join(conn, group, a, [topic]).member_epoch == 1

    def commit(epoch: int, version: int = 9, member: str = a) -> int:
        r = conn.request(COMMIT, version, {
            "group_id": group, "generation_id_or_member_epoch": epoch, "member_id": member,
            "topics": [{"name": topic, "partitions": [
                {"partition_index": 0, "committed_offset": 42, "committed_metadata": ""}]}],
        })  # fmt: skip
        code: int = r.topics[0].partitions[0].error_code
        return code

    assert commit(0) == STALE_MEMBER_EPOCH
    assert commit(2) == FENCED_MEMBER_EPOCH
    assert commit(1, member="someone") == UNKNOWN_MEMBER_ID
    assert commit(1, version=8) == 35  # UNSUPPORTED_VERSION: a KIP-848 member commits with v9
    assert commit(1) == NONE

    def fetch(epoch: int) -> Any:
        return conn.request(FETCH, 9, {"groups": [{
            "group_id": group, "member_id": a, "member_epoch": epoch,
            "topics": [{"name": topic, "partition_indexes": [0]}]}]}).groups[0]  # fmt: skip

    assert fetch(3).error_code == STALE_MEMBER_EPOCH
    g = fetch(1)
    assert g.error_code == NONE and g.topics[0].partitions[0].committed_offset == 42
    # an admin's fetch (no member) is fine
    r = conn.request(FETCH, 8, {"groups": [{"group_id": group, "topics": None}]})
    assert r.groups[0].topics[0].partitions[0].committed_offset == 42

    listed = conn.request(LIST, 5, {"states_filter": [], "types_filter": ["consumer"]})
    mine = [x for x in listed.groups if x.group_id == group]
    assert len(mine) == 1 and mine[0].group_type == "consumer"
    assert mine[0].group_state in ("Stable", "Reconciling") and mine[0].protocol_type == "consumer"
    classic = conn.request(LIST, 5, {"states_filter": [], "types_filter": ["classic"]})
    assert group not in [x.group_id for x in classic.groups]
    d = conn.request(DESCRIBE_GROUPS, 5, {"groups": [group]}).groups[0]
    assert (d.error_code, d.group_state) == (NONE, "Dead")
    # a classic member of another protocol type may not join while it has
    # members (one of the consumer type joins as a classic member of the
    # consumer group: test_consumer_group_migration.py)
    r = conn.request(JOIN, 5, {
        "group_id": group, "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
        "member_id": "", "protocol_type": "connect",
        "protocols": [{"name": "range", "metadata": b""}]})  # fmt: skip
    assert r.error_code == INCONSISTENT_GROUP_PROTOCOL


def test_classic_group_is_not_a_consumer_group(broker: BrokerProcess) -> None:
    from confluent_kafka import Consumer

    topic = create_topic(broker.bootstrap, topic_name("classic"), 1)
    group = f"g-{uuid.uuid4()}"
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                  "session.timeout.ms": 30000})  # fmt: skip
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + 30
        while not c.assignment():
            assert time.monotonic() < deadline
            c.poll(0.2)
        conn = connect(broker)
        # only a joining member (epoch 0) upgrades a classic group
        # (test_consumer_group_migration.py): any other epoch finds none
        r = hb(conn, group, str(uuid.uuid4()), 1, topic_partitions=[])
        assert r.error_code == GROUP_ID_NOT_FOUND
        d = describe(conn, group)
        assert d.error_code == GROUP_ID_NOT_FOUND and "not a consumer group" in d.error_message
    finally:
        c.close()


def test_the_group_survives_a_restart(tmp_path_factory: pytest.TempPathFactory) -> None:
    b = BrokerProcess(tmp_path_factory.mktemp("kip848-restart") / "data",
                      {"offsets.topic.num.partitions": 2}).start()  # fmt: skip
    try:
        topic = create_topic(b.bootstrap, topic_name("restart"), 3)
        group = f"g-{uuid.uuid4()}"
        conn = connect(b)
        a, m2 = str(uuid.uuid4()), str(uuid.uuid4())
        ra = join(conn, group, a, [topic], server_assignor="range")
        join(conn, group, m2, [topic])
        kept = owned(hb(conn, group, a, 1))  # a is asked to revoke some
        assert len(kept) < 3
        before = snapshot(conn, group)
        targets = {m.member_id: m.target_assignment for m in describe(conn, group).members}
        conn.close()
        b.stop(signal.SIGTERM)
        b.start()
        conn = connect(b)
        deadline = time.monotonic() + 30
        while describe(conn, group).error_code != NONE:  # loading
            assert time.monotonic() < deadline
            time.sleep(0.2)
        assert snapshot(conn, group) == before
        after = {m.member_id: m.target_assignment for m in describe(conn, group).members}
        assert after == targets
        assert describe(conn, group).assignor_name == "range"
        # the members carry on where they were: a has revoked, reaches epoch 2
        tid = ra.assignment.topic_partitions[0].topic_id
        r = hb(conn, group, a, 1, topic_partitions=parts(tid, kept))
        assert r.error_code == NONE and r.member_epoch == 2
    finally:
        b.stop(signal.SIGKILL)


def test_a_silent_member_is_fenced_and_its_partitions_move(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    b = BrokerProcess(tmp_path_factory.mktemp("kip848-session") / "data", {
        "offsets.topic.num.partitions": 1,
        "group.consumer.min.session.timeout.ms": 2000,
        "group.consumer.session.timeout.ms": 2000,
        "group.consumer.min.heartbeat.interval.ms": 500,
        "group.consumer.heartbeat.interval.ms": 500,
    }).start()  # fmt: skip
    try:
        topic = create_topic(b.bootstrap, topic_name("session"), 2)
        group = f"g-{uuid.uuid4()}"
        conn = connect(b)
        a, silent = str(uuid.uuid4()), str(uuid.uuid4())
        ra = join(conn, group, a, [topic])
        tid = ra.assignment.topic_partitions[0].topic_id
        join(conn, group, silent, [topic])
        mine = owned(hb(conn, group, a, 1))  # asked to revoke one
        epoch = hb(conn, group, a, 1, topic_partitions=parts(tid, mine)).member_epoch
        # a keeps heartbeating, the other never again: once its session has
        # passed it is fenced and a gets both partitions at a new epoch
        deadline = time.monotonic() + 60
        while True:
            r = hb(conn, group, a, epoch, topic_partitions=parts(tid, mine))
            assert r.error_code == NONE, r
            if r.assignment is not None:
                mine = owned(r)
            epoch = r.member_epoch
            if mine == [0, 1]:
                break
            assert time.monotonic() < deadline, "the silent member was never fenced"
            time.sleep(0.3)
        assert epoch == 3
        assert [m.member_id for m in describe(conn, group).members] == [a]
        assert hb(conn, group, silent, 2).error_code == UNKNOWN_MEMBER_ID

        # A member that does not revoke within its rebalance timeout is
        # fenced too, heartbeats or not.
        slow, c = str(uuid.uuid4()), str(uuid.uuid4())
        topic2 = create_topic(b.bootstrap, topic_name("revoke"), 2)
        group2 = f"g-{uuid.uuid4()}"
        join(conn, group2, slow, [topic2], rebalance_timeout_ms=1000)
        join(conn, group2, c, [topic2])
        r = hb(conn, group2, slow, 1)
        assert r.error_code == NONE and len(owned(r)) == 1  # asked to give one up
        deadline = time.monotonic() + 60
        while hb(conn, group2, slow, 1).error_code == NONE:  # never says it revoked
            assert time.monotonic() < deadline, "the member was never fenced"
            time.sleep(0.3)
        assert hb(conn, group2, slow, 1).error_code == UNKNOWN_MEMBER_ID
        assert [m.member_id for m in describe(conn, group2).members] == [c]
    finally:
        b.stop(signal.SIGKILL)


# ---------------------------------------------------------------- real clients


def ck_consumer(bootstrap: str, group: str, name: str, **extra: Any) -> Any:
    from confluent_kafka import Consumer

    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "group.protocol": "consumer",
        "client.id": name,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    conf.update(extra)
    return Consumer(conf)


def test_confluent_kafka_group_splits_rebalances_and_commits(broker: BrokerProcess) -> None:
    """Two, then three, then two members of a KIP-848 group read every record
    exactly once, committing as they go; the partitions are split between
    whoever is in the group, and move only when a member comes or goes."""
    topic = create_topic(broker.bootstrap, topic_name("ck848"), 6)
    group = f"g-{uuid.uuid4()}"
    total = 600
    ck_produce(broker.bootstrap, topic, [(b"k%d" % i, b"%d" % i, None) for i in range(total)])
    seen: dict[str, list[int]] = {}
    lock = threading.Lock()
    stop: dict[str, threading.Event] = {}
    assignments: dict[str, list[int]] = {}

    def run(name: str) -> None:
        c = ck_consumer(broker.bootstrap, group, name)
        c.subscribe([topic])
        try:
            while not stop[name].is_set():
                m = c.poll(0.1)
                assignments[name] = sorted(p.partition for p in c.assignment())
                if m is None or m.error():
                    continue
                with lock:
                    seen.setdefault(name, []).append(int(m.value()))
                c.commit(message=m, asynchronous=False)
        finally:
            c.close()

    threads: dict[str, threading.Thread] = {}

    def start(name: str) -> None:
        stop[name] = threading.Event()
        threads[name] = threading.Thread(target=run, args=(name,), daemon=True)
        threads[name].start()

    def split_between(names: list[str]) -> None:
        deadline = time.monotonic() + 60
        while True:
            got = [assignments.get(n, []) for n in names]
            if sorted(p for g in got for p in g) == list(range(6)) and all(got):
                return
            assert time.monotonic() < deadline, f"no split: {assignments}"
            time.sleep(0.2)

    start("c1")
    start("c2")
    split_between(["c1", "c2"])
    start("c3")
    split_between(["c1", "c2", "c3"])
    stop["c1"].set()
    threads["c1"].join(30)
    assignments.pop("c1", None)
    split_between(["c2", "c3"])
    deadline = time.monotonic() + 60
    while sum(len(v) for v in seen.values()) < total:
        assert time.monotonic() < deadline, f"read {sum(len(v) for v in seen.values())}"
        time.sleep(0.2)
    for n in ("c2", "c3"):
        stop[n].set()
        threads[n].join(30)
    values = sorted(v for vs in seen.values() for v in vs)
    # every record read; a record read twice would be one not committed before a move
    assert values == list(range(total))
    # what was committed is what was read
    conn = connect(broker)
    r = conn.request(FETCH, 8, {"groups": [{"group_id": group, "topics": None}]})
    committed = sum(p.committed_offset for t in r.groups[0].topics for p in t.partitions)
    assert committed == total


def test_java_client_consumes_with_the_consumer_protocol(broker: BrokerProcess) -> None:
    java_client = pytest.importorskip("java_client")
    try:
        java_client.jar_path()
    except RuntimeError as e:
        pytest.skip(str(e))
    topic = create_topic(broker.bootstrap, topic_name("java848"), 4)
    group = f"g-{uuid.uuid4()}"
    ck_produce(broker.bootstrap, topic, [(None, b"%d" % i, None) for i in range(200)])

    def consume(count: int) -> Any:
        return java_client.run_java(
            "consume", "--bootstrap", broker.bootstrap, "--topic", topic, "--group", group,
            "--count", str(count), "--timeout-ms", "60000",
            "--property", "group.protocol=consumer",
        )  # fmt: skip

    first = consume(200).check()
    assert sorted(int(r["value"]) for r in first.of("record")) == list(range(200))
    assert sorted(p for a in first.of("assigned") for p in a["partitions"]) == [0, 1, 2, 3]
    assert sum(c["offset"] for c in first.of("committed")) == 200
    # committed: a second run of the group starts at the end
    ck_produce(broker.bootstrap, topic, [(None, b"%d" % i, None) for i in range(200, 210)])
    second = consume(10).check()
    assert sorted(int(r["value"]) for r in second.of("record")) == list(range(200, 210))


def pylog_groups(bootstrap: str, *args: str) -> str:
    out = subprocess.run(
        [PYLOG, "groups", *args, "--bootstrap-server", bootstrap],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_pylog_groups_shows_consumer_groups(broker: BrokerProcess) -> None:
    topic = create_topic(broker.bootstrap, topic_name("cli848"), 2)
    group = f"g-{uuid.uuid4()}"
    ck_produce(broker.bootstrap, topic, [(None, b"%d" % i, None) for i in range(10)])
    conn = connect(broker)
    a = str(uuid.uuid4())
    r = join(conn, group, a, [topic])
    assert conn.request(COMMIT, 9, {
        "group_id": group, "generation_id_or_member_epoch": r.member_epoch, "member_id": a,
        "topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "committed_offset": 3, "committed_metadata": ""}]}],
    }).topics[0].partitions[0].error_code == NONE  # fmt: skip
    # keep the member alive while the tool runs, whatever its pace
    alive = threading.Event()

    def beat() -> None:
        with KafkaConnection(broker.bootstrap) as c:
            while not alive.wait(0.5):
                assert hb(c, group, a, r.member_epoch).error_code == NONE

    beater = threading.Thread(target=beat, daemon=True)
    beater.start()
    try:
        check_tool_output(broker, group, topic, a)
    finally:
        alive.set()
        beater.join(10)


def check_tool_output(broker: BrokerProcess, group: str, topic: str, a: str) -> None:
    listed = pylog_groups(broker.bootstrap, "list", "--type", "consumer")
    assert f"{group}  consumer" in listed.splitlines()
    state = pylog_groups(broker.bootstrap, "describe", "--group", group, "--state")
    row = state.splitlines()[1].split()
    assert row == [group, "Stable", "consumer", "uniform", "1", "consumer"]
    members = pylog_groups(broker.bootstrap, "describe", "--group", group, "--members")
    assert a in members and f"{topic}(0,1)" in members
    lag = pylog_groups(broker.bootstrap, "describe", "--group", group).splitlines()
    cols = next(line.split() for line in lag if line.split()[1:3] == [topic, "0"])
    # committed 3 of partition 0's records: its lag is what is left, its owner a
    assert int(cols[3]) == 3 and int(cols[5]) == int(cols[4]) - 3 and cols[6] == a


def test_franz_go_kip848_group_rebalances_incrementally(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    """franz-go's KIP-848 consumer (kgo.ServerSideBalancer): two members
    split four partitions, one leaves and the other takes them all back, a
    third resumes from the commits; every record is read exactly once."""
    client_programs = pytest.importorskip("client_programs")
    try:
        client_programs.go_binary()
    except (RuntimeError, AssertionError, OSError) as e:
        pytest.skip(str(e))
    topic = create_topic(broker.bootstrap, topic_name("franz848"), 4)
    group = f"g-{uuid.uuid4()}"
    ck_produce(broker.bootstrap, topic, [(None, b"value-%d" % i, None) for i in range(100)])
    everything = list(range(4))

    def member(name: str) -> Any:
        cmd = client_programs.go_command(
            "franz", "group-consume", "--bootstrap", broker.bootstrap, "--topic", topic,
            "--group", group, "--timeout", "10m", "--server-assignor", "uniform",
        )  # fmt: skip
        return client_programs.Member(name, cmd, tmp_path / f"{name}.log")

    def values(*ms: Any) -> list[str]:
        return [r["value"] for m in ms for r in m.records()]

    members: list[Any] = []
    try:
        a = member("a")
        members.append(a)
        a.wait_for("all four partitions", lambda: a.owned() == everything)
        a.wait_for("the first 100 records", lambda: len(a.records()) >= 100)
        conn = connect(broker)
        g = describe(conn, group)
        assert g.error_code == NONE and [m.member_epoch for m in g.members] == [1]
        b = member("b")
        members.append(b)
        b.wait_for("its share", lambda: client_programs.shared_out(everything, a, b))
        # incremental: a kept consuming what it kept, and lost nothing
        assert a.of("lost") == []
        ck_produce(broker.bootstrap, topic,
                   [(None, b"value-%d" % i, None) for i in range(100, 200)])  # fmt: skip
        b.wait_for("the next 100 records", lambda: len(set(values(a, b))) >= 200)
        assert b.stop() == 0, b.describe()
        a.wait_for("every partition back", lambda: a.owned() == everything)
        assert a.stop() == 0, a.describe()
        assert sorted(values(a, b)) == sorted(f"value-{i}" for i in range(200))
        for m in (a, b):
            assert m.of("commit-error") == [] and m.of("group-error") == [], m.describe()
        ck_produce(broker.bootstrap, topic,
                   [(None, b"value-%d" % i, None) for i in range(200, 240)])  # fmt: skip
        c = member("c")
        members.append(c)
        c.wait_for("the 40 new records", lambda: len(c.records()) >= 40)
        assert c.stop() == 0, c.describe()
        assert sorted(values(c)) == sorted(f"value-{i}" for i in range(200, 240))
    finally:
        for m in members:
            m.kill()


def test_confluent_kafka_regex_subscription(broker: BrokerProcess) -> None:
    """librdkafka sends a "^" subscription as SubscribedTopicRegex: the broker
    resolves it, and a matching topic created later joins the assignment."""
    prefix = topic_name("rx")
    for suffix in ("a", "b"):
        create_topic(broker.bootstrap, f"{prefix}-{suffix}", 1)
        ck_produce(broker.bootstrap, f"{prefix}-{suffix}", [(None, suffix.encode(), None)])
    create_topic(broker.bootstrap, f"x{prefix}-a", 1)  # a full match only
    c = ck_consumer(broker.bootstrap, f"g-{uuid.uuid4()}", "rx")
    c.subscribe([f"^{prefix}-.*"])
    got: set[str] = set()

    def read_until(want: set[str]) -> None:
        deadline = time.monotonic() + 60
        while not want <= got:
            assert time.monotonic() < deadline, got
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                got.add(m.topic())

    try:
        read_until({f"{prefix}-a", f"{prefix}-b"})
        create_topic(broker.bootstrap, f"{prefix}-c", 1)
        ck_produce(broker.bootstrap, f"{prefix}-c", [(None, b"c", None)])
        read_until({f"{prefix}-c"})
        assert sorted(tp.topic for tp in c.assignment()) == [f"{prefix}-{s}" for s in "abc"]
    finally:
        c.close()
