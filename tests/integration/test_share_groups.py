"""KIP-932 share groups ("queues for Kafka") against a real broker process,
driven by Kafka's own KafkaShareConsumer (kafka-clients 4.x, tests/java's
``share-consume``) and by raw requests where an exact answer is checked.

- two share consumers in one group on a topic of ONE partition both receive
  records, and every record is delivered and accepted exactly once;
- a released record comes back with its delivery count raised, a rejected
  one never again;
- a record released at each delivery is delivered
  ``group.share.delivery.count.limit`` times, then archived;
- a consumer killed while it holds records: their acquisition lock runs out
  and another consumer of the group gets them, counted as a second delivery;
- a broker restart keeps what was acknowledged (``__share_group_state``):
  the next consumer gets only the records not accepted before.
"""

from __future__ import annotations

import signal
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from broker_process import PYLOG, BrokerProcess, ck_produce, topic_name
from java_client import command, jar_path

from pylog.protocol.client import KafkaConnection
from pylog.testing.cluster import LocalCluster

pytestmark = pytest.mark.integration

DELIVERY_LIMIT = 3


@pytest.fixture(scope="module")
def java() -> None:
    try:
        jar_path()
    except RuntimeError as e:
        pytest.skip(str(e))


def _broker(data: Path) -> BrokerProcess:
    return BrokerProcess(
        data,
        {
            "offsets.topic.num.partitions": 1,
            "share.coordinator.state.topic.num.partitions": 3,
            "group.share.min.record.lock.duration.ms": 1000,
            # long enough that no lock runs out while a consumer works
            "group.share.record.lock.duration.ms": 10000,
            "group.share.delivery.count.limit": DELIVERY_LIMIT,
            "group.share.min.heartbeat.interval.ms": 500,
            "group.share.heartbeat.interval.ms": 500,
            "group.share.min.session.timeout.ms": 6000,
            "group.share.session.timeout.ms": 6000,
        },
        log_path=data.parent / "broker.log",
    )


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = _broker(tmp_path_factory.mktemp("share") / "data").start()
    try:
        yield b
    finally:
        if b.proc is not None:
            b.stop(signal.SIGKILL)


def create_topic(bootstrap: str, partitions: int = 1) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = topic_name("queue")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(20)
    return topic


def produce(bootstrap: str, topic: str, values: list[str], per_batch: int = 1) -> None:
    """Each ``per_batch`` values in a batch of their own: a share fetch acquires
    whole batches, so small batches let several consumers share a partition."""
    for i in range(0, len(values), per_batch):
        ck_produce(bootstrap, topic, [(None, v.encode(), []) for v in values[i : i + per_batch]])


def members(b: BrokerProcess | str, group: str) -> list[Any]:
    """The group's members as its coordinator describes them ([] while it cannot)."""
    bootstrap = b if isinstance(b, str) else b.bootstrap
    with KafkaConnection(bootstrap, client_id="share-test") as conn:
        fc = conn.request(10, 4, {"key_type": 0, "coordinator_keys": [group]}).coordinators[0]
        if fc.error_code:
            return []
    with KafkaConnection(f"{fc.host}:{fc.port}", client_id="share-test") as conn:
        g = conn.request(77, 1, {"group_ids": [group], "include_authorized_operations": False})
        described = g.groups[0]
        return list(described.members) if described.error_code == 0 else []


def wait_members(b: BrokerProcess | str, group: str, n: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while len([m for m in members(b, group) if m.assignment.topic_partitions]) < n:
        assert time.monotonic() < deadline, f"{group} never had {n} assigned members"
        time.sleep(0.3)


def start_consumer(
    b: BrokerProcess, topic: str, group: str, tmp: Path, *args: str
) -> subprocess.Popen[str]:
    err = tmp / f"share-consumer-{uuid.uuid4().hex[:6]}.log"
    with err.open("w") as f:
        return subprocess.Popen(
            command(
                "share-consume",
                "--bootstrap",
                b.bootstrap,
                "--topic",
                topic,
                "--group",
                group,
                *args,
            ),
            stdout=subprocess.PIPE,
            stderr=f,
            text=True,
        )


def finish(proc: subprocess.Popen[str], timeout: float = 120) -> list[dict[str, Any]]:
    import json

    out, _ = proc.communicate(timeout=timeout)
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def records(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The delivered records, ``ack`` as AcknowledgeType's name (or ``NONE``)."""
    out = [line for line in lines if line["type"] == "record"]
    for r in out:
        r["ack"] = r["ack"].upper()
    return out


def test_two_consumers_share_one_partition(
    broker: BrokerProcess, java: None, tmp_path: Path
) -> None:
    topic = create_topic(broker.bootstrap)
    group = f"share-{uuid.uuid4().hex[:8]}"
    opts = ("--property", "max.poll.records=5", "--idle-ms", "5000", "--timeout-ms", "90000")
    a = start_consumer(broker, topic, group, tmp_path, *opts)
    b = start_consumer(broker, topic, group, tmp_path, *opts)
    wait_members(broker, group, 2)
    values = [f"v{i}" for i in range(120)]
    produce(broker.bootstrap, topic, values)
    got_a, got_b = records(finish(a)), records(finish(b))
    assert got_a and got_b, "both consumers of the one partition receive records"
    assert {r["value"] for r in got_a + got_b if r["ack"] == "ACCEPT"} == set(values)
    # Each record is acquired by one member at a time: a first delivery happens
    # once (a second only after a lock ran out on a stalled machine).
    first = [r["value"] for r in got_a + got_b if r["delivery_count"] == 1]
    assert Counter(first) == Counter(values), "every record delivered first exactly once"


def test_release_redelivers_and_reject_archives(
    broker: BrokerProcess, java: None, tmp_path: Path
) -> None:
    topic = create_topic(broker.bootstrap)
    group = f"share-{uuid.uuid4().hex[:8]}"
    c = start_consumer(broker, topic, group, tmp_path, "--release-below", "2",
                       "--reject", "v3", "--idle-ms", "5000")  # fmt: skip
    wait_members(broker, group, 1)
    values = [f"v{i}" for i in range(10)]
    produce(broker.bootstrap, topic, values, per_batch=10)
    got = records(finish(c))
    by_value: dict[str, list[tuple[int, str]]] = {}
    for r in got:
        by_value.setdefault(r["value"], []).append((r["delivery_count"], r["ack"]))
    for v in values:
        want_last = "REJECT" if v == "v3" else "ACCEPT"
        assert by_value[v] == [(1, "RELEASE"), (2, want_last)], (v, by_value[v])


def test_delivery_count_limit_archives(broker: BrokerProcess, java: None, tmp_path: Path) -> None:
    topic = create_topic(broker.bootstrap)
    group = f"share-{uuid.uuid4().hex[:8]}"
    c = start_consumer(broker, topic, group, tmp_path, "--release-below", "100",
                       "--idle-ms", "5000")  # fmt: skip
    wait_members(broker, group, 1)
    values = [f"v{i}" for i in range(5)]
    produce(broker.bootstrap, topic, values, per_batch=5)
    got = records(finish(c))
    counts: dict[str, list[int]] = {}
    for r in got:
        counts.setdefault(r["value"], []).append(r["delivery_count"])
    assert counts == {v: list(range(1, DELIVERY_LIMIT + 1)) for v in values}


def test_killed_consumer_lock_expires_to_another(
    broker: BrokerProcess, java: None, tmp_path: Path
) -> None:
    topic = create_topic(broker.bootstrap)
    group = f"share-{uuid.uuid4().hex[:8]}"
    a = start_consumer(broker, topic, group, tmp_path, "--halt-after", "1")
    wait_members(broker, group, 1)
    values = [f"v{i}" for i in range(20)]
    produce(broker.bootstrap, topic, values, per_batch=20)
    held = records(finish(a))
    assert held and all(r["ack"] == "NONE" for r in held)
    b = start_consumer(broker, topic, group, tmp_path, "--count", "20", "--idle-ms", "15000")
    got = records(finish(b))
    assert sorted(r["value"] for r in got) == sorted(values)
    counts = {r["value"]: r["delivery_count"] for r in got}
    assert all(counts[r["value"]] == 2 for r in held), "the killed consumer's records come back"


def test_acknowledged_records_survive_restart(tmp_path: Path, java: None) -> None:
    b = _broker(tmp_path / "data").start()
    try:
        topic = create_topic(b.bootstrap)
        group = f"share-{uuid.uuid4().hex[:8]}"
        first = start_consumer(b, topic, group, tmp_path, "--count", "10",
                               "--property", "max.poll.records=10")  # fmt: skip
        wait_members(b, group, 1)
        values = [f"v{i}" for i in range(20)]
        produce(b.bootstrap, topic, values, per_batch=10)
        seen = records(finish(first))
        accepted = {r["value"] for r in seen if r["ack"] == "ACCEPT"}
        assert len(accepted) == 10
        b.stop(signal.SIGTERM)
        b.start()
        second = start_consumer(b, topic, group, tmp_path, "--count", "10", "--idle-ms", "8000")
        got = records(finish(second))
        assert {r["value"] for r in got} == set(values) - accepted
    finally:
        if b.proc is not None:
            b.stop(signal.SIGKILL)


def test_confluent_kafka_share_consumers(broker: BrokerProcess, tmp_path: Path) -> None:
    """librdkafka's share consumer (confluent-kafka 2.16+, implicit
    acknowledgement): two of them on one partition split the records. The
    group's ShareGroup* records in ``__consumer_offsets`` are read by Kafka's
    kafka-dump-log --offsets-decoder, and pylog's dump-log prints the same."""
    group = share_consumers_split_one_partition(broker.bootstrap, create_topic(broker.bootstrap))
    from kafka_tools import run_tool

    segments = [
        str(seg)
        for seg in sorted(broker.data.glob("__consumer_offsets-*/*.log"))
        if seg.stat().st_size > 0
    ]
    dumped = run_tool(
        "kafka-dump-log", "--files", ",".join(segments), "--offsets-decoder", workdir=tmp_path
    )
    mine = [line for line in dumped.stdout.splitlines() if f'"groupId":"{group}"' in line]
    # Kafka 4.3 names the record type in the key: 10 member metadata, 11 the
    # group's epoch, 12/13 target assignment, 14 current assignment, 15 the
    # initialized share partitions.
    types = {int(line.split('"type":')[1].split(",")[0].strip('"')) for line in mine}
    assert types == {10, 11, 12, 13, 14, 15}, dumped.stdout[-3000:]
    assert not [line for line in dumped.stdout.splitlines() if "Error" in line], dumped.stdout
    ours = subprocess.run(
        [PYLOG, "dump-log", "--offsets-decoder", "--files", *segments],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert ours.returncode == 0, ours.stderr
    assert ours.stdout.splitlines() == dumped.stdout.splitlines()


def share_consumers_split_one_partition(bootstrap: str, topic: str) -> str:
    """Two confluent-kafka ShareConsumers split one partition; the group id."""
    ck = pytest.importorskip("confluent_kafka")
    if not hasattr(ck, "ShareConsumer"):
        pytest.skip("this confluent-kafka has no ShareConsumer")
    group = f"share-{uuid.uuid4().hex[:8]}"
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "max.poll.records": 5}
    consumers = [ck.ShareConsumer(conf) for _ in range(2)]
    try:
        for c in consumers:
            c.subscribe([topic])
        deadline = time.monotonic() + 60
        while len([m for m in members(bootstrap, group) if m.assignment.topic_partitions]) < 2:
            assert time.monotonic() < deadline, "the share consumers never joined"
            for c in consumers:
                c.poll(0.2)
        for c in consumers:  # their first ShareFetch: the start offset is fixed
            c.poll(0.5)
        values = [f"v{i}" for i in range(60)]
        produce(bootstrap, topic, values)
        got: list[list[str]] = [[], []]
        deadline = time.monotonic() + 60
        while sum(map(len, got)) < len(values) and time.monotonic() < deadline:
            for i, c in enumerate(consumers):
                for m in c.poll(0.3):
                    assert m.error() is None, m.error()
                    got[i].append(m.value().decode())
        assert got[0] and got[1], "both share consumers of the one partition receive records"
        assert set(got[0] + got[1]) == set(values), "every record delivered"
        # `pylog groups` lists and describes the share group
        cli = [PYLOG, "groups", "--bootstrap-server", bootstrap]
        listed = subprocess.run(
            [*cli[:2], "list", "--type", "share", *cli[2:]], capture_output=True, text=True
        )
        assert group in listed.stdout, listed
        described = subprocess.run(
            [*cli[:2], "describe", "--group", group, "--members", *cli[2:]],
            capture_output=True,
            text=True,
        )
        assert described.returncode == 0, described
        rows = [line for line in described.stdout.splitlines() if line.startswith(group)]
        assert len(rows) == 2 and all(f"{topic}(0)" in r for r in rows), described.stdout
    finally:
        for c in consumers:
            c.close()
    return group


def test_share_group_on_a_cluster(pylog_cluster_factory: Callable[..., LocalCluster]) -> None:
    """Three brokers on ZooKeeper: the group's coordinator and the
    partition's leader may be different brokers; the consumers heartbeat to
    the one and fetch from the other. Then a share group whose
    ``__share_group_state`` partition another broker leads than its share
    partition: the leader persists through the share coordinator
    (WriteShareGroupState), and when that broker (also the group's
    coordinator) is SIGKILLed the state moves with the partition's next
    leader and the group with its ``__consumer_offsets`` partition — the
    consumer goes on as a member, nothing acknowledged is delivered again,
    nothing is lost, and the new coordinator holds what was acknowledged
    before and after the kill; when the share partition's
    leader dies next, its successor reads that state back."""
    cluster = pylog_cluster_factory(
        3,
        {
            "offsets.topic.num.partitions": 3,
            "share.coordinator.state.topic.num.partitions": 3,
            "group.share.min.heartbeat.interval.ms": 500,
            "group.share.heartbeat.interval.ms": 500,
        },
    )
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = topic_name("queue")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
    cluster.wait_for_leader(topic, 0)
    share_consumers_split_one_partition(cluster.bootstrap_servers, topic)
    state_survives_its_coordinator(cluster, topic)


def _topic_id(bootstrap: str, topic: str) -> str:
    with KafkaConnection(bootstrap, client_id="share-test") as conn:
        md = conn.request(
            3,
            12,
            {
                "topics": [{"name": topic, "topic_id": None}],
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False,
            },
        )
    return str(md.topics[0].topic_id)


def _coordinator(bootstrap: str, key: str, key_type: int) -> int:
    """FindCoordinator's node for ``key`` (-1 while none)."""
    with KafkaConnection(bootstrap, client_id="share-test") as conn:
        fc = conn.request(10, 6, {"key_type": key_type, "coordinator_keys": [key]})
    c = fc.coordinators[0]
    return -1 if c.error_code else int(c.node_id)


def _state_start(cluster: LocalCluster, group: str, topic_id: str) -> int:
    """The share partition's start offset as its share coordinator answers
    ReadShareGroupStateSummary (-2 while it cannot)."""
    node = _coordinator(cluster.bootstrap_servers, f"{group}:{topic_id}:0", 2)
    if node < 0:
        return -2
    try:
        with KafkaConnection(cluster.broker(node).bootstrap_servers) as conn:
            r = conn.request(87, 1, {"group_id": group, "topics": [
                {"topic_id": topic_id, "partitions": [{"partition": 0, "leader_epoch": -1}]}
            ]})  # fmt: skip
    except Exception:
        return -2
    p = r.results[0].partitions[0]
    return -2 if p.error_code else int(p.start_offset)


def state_survives_its_coordinator(cluster: LocalCluster, topic: str) -> None:
    ck = pytest.importorskip("confluent_kafka")
    bootstrap = cluster.bootstrap_servers
    leader = cluster.leader(topic, 0)
    controller = cluster.controller()
    topic_id = _topic_id(bootstrap, topic)
    # A group whose state another broker leads than the share partition (and
    # than the controller, which stays up).
    group, state_leader = "", -1
    deadline = time.monotonic() + 30
    while not group:
        assert time.monotonic() < deadline, "no group found whose state another broker leads"
        for _ in range(64):
            g = f"moved-{uuid.uuid4().hex[:8]}"
            s = _coordinator(bootstrap, f"{g}:{topic_id}:0", 2)
            # The group's coordinator is the state's broker, killed with it:
            # the broker taking over its __consumer_offsets partition loads
            # the group's ShareGroup* records, and the member heartbeats on
            # at its epoch (librdkafka takes GROUP_ID_NOT_FOUND as fatal).
            if s >= 0 and s not in (leader, controller) and _coordinator(bootstrap, g, 0) == s:
                group, state_leader = g, s
                break
        else:
            time.sleep(0.5)  # __share_group_state is being placed
    consumer = ck.ShareConsumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "max.poll.records": 10}
    )
    got: Counter[str] = Counter()

    def consume_until(n: int, timeout: float) -> None:
        end = time.monotonic() + timeout
        while sum(got.values()) < n:
            assert time.monotonic() < end, f"{sum(got.values())} of {n} records delivered"
            for m in consumer.poll(0.3):
                if m.error() is None:
                    got[m.value().decode()] += 1

    try:
        consumer.subscribe([topic])
        wait_members(bootstrap, group, 1)
        deadline = time.monotonic() + 30
        while (initial := _state_start(cluster, group, topic_id)) < 0:
            assert time.monotonic() < deadline, "the share partition was never initialized"
            consumer.poll(0.3)
        before = [f"b{i}" for i in range(50)]
        produce(bootstrap, topic, before, per_batch=5)
        consume_until(len(before), 60)
        # The implicit acknowledgements reach the share coordinator on the other broker.
        deadline = time.monotonic() + 30
        while (start := _state_start(cluster, group, topic_id)) < initial + len(before):
            assert time.monotonic() < deadline, f"state start {start}: acks not persisted"
            consumer.poll(0.3)
        cluster.broker(state_leader).kill()
        after = [f"a{i}" for i in range(50)]
        produce(bootstrap, topic, after, per_batch=5)
        consume_until(len(before) + len(after), 90)
        # The state partition's next leader holds everything acknowledged.
        deadline = time.monotonic() + 60
        while (start := _state_start(cluster, group, topic_id)) < initial + len(before + after):
            assert time.monotonic() < deadline, f"state start {start} after the move"
            assert not [m for m in consumer.poll(0.3) if m.error() is None], "redelivered"
        assert _coordinator(bootstrap, f"{group}:{topic_id}:0", 2) != state_leader
        # The new group coordinator knows the member it never saw join.
        successor = _coordinator(bootstrap, group, 0)
        assert successor not in (-1, state_leader)
        with KafkaConnection(cluster.broker(successor).bootstrap_servers) as conn:
            d = conn.request(77, 1, {"group_ids": [group], "include_authorized_operations": False})
        assert d.groups[0].error_code == 0 and len(d.groups[0].members) == 1, d.groups[0]
        assert set(got) == set(before + after), "nothing lost"
        assert max(got.values()) == 1, f"delivered twice: {[v for v, n in got.items() if n > 1]}"
        # Then the share partition's leader dies (the state's broker back
        # first): its next leader reads the state from the share coordinator,
        # and what was acknowledged is not delivered again.
        cluster.broker(state_leader).restart()
        cluster.wait_for_full_isr("__share_group_state", 3)
        cluster.wait_for_full_isr(topic)
        cluster.broker(leader).kill()
        later = [f"c{i}" for i in range(20)]
        produce(cluster.bootstrap_servers, topic, later, per_batch=5)
        consume_until(len(before + after + later), 90)
        assert set(got) == set(before + after + later), "nothing lost"
        assert max(got.values()) == 1, f"delivered twice: {[v for v, n in got.items() if n > 1]}"
    finally:
        consumer.close()


def _share_consume(
    bootstrap: str, group: str, topic: str, n: int, produce_values: list[str] | None = None
) -> list[str]:
    """One confluent-kafka ShareConsumer: joins ``group``, (produces
    ``produce_values`` once it has fetched), takes ``n`` records, closes."""
    ck = pytest.importorskip("confluent_kafka")
    c = ck.ShareConsumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "max.poll.records": 50}
    )
    got: list[str] = []
    try:
        c.subscribe([topic])
        wait_members(bootstrap, group, 1)
        got += [m.value().decode() for m in c.poll(0.5) if m.error() is None]
        if produce_values:
            produce(bootstrap, topic, produce_values, per_batch=5)
        deadline = time.monotonic() + 60
        while len(got) < n:
            assert time.monotonic() < deadline, f"{len(got)} of {n} records"
            got += [m.value().decode() for m in c.poll(0.3) if m.error() is None]
        c.poll(0.3)  # the implicit acknowledgement of the last records
    finally:
        c.close()
    return got


def _offsets(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    """DescribeShareGroupOffsets v1 (all topics): (topic, partition) -> start offset."""
    with KafkaConnection(bootstrap, client_id="share-test") as conn:
        r = conn.request(90, 1, {"groups": [{"group_id": group, "topics": None}]})
    g = r.groups[0]
    assert g.error_code == 0, g
    return {
        (t.topic_name, p.partition_index): p.start_offset for t in g.topics for p in t.partitions
    }


def test_share_group_offsets_with_kafka_tools(broker: BrokerProcess, tmp_path: Path) -> None:
    """kafka-share-groups --describe --offsets and --reset-offsets --to-earliest
    (DescribeShareGroupOffsets, AlterShareGroupOffsets); a reset refused while
    the group has a member, or naming an unknown topic, changes nothing."""
    from kafka_tools import run_tool

    bootstrap = broker.bootstrap
    topic = create_topic(bootstrap)
    group = f"offsets-{uuid.uuid4().hex[:8]}"
    produce(bootstrap, topic, [f"old{i}" for i in range(10)], per_batch=5)
    new = [f"new{i}" for i in range(10)]
    assert sorted(_share_consume(bootstrap, group, topic, 10, new)) == sorted(new)
    deadline = time.monotonic() + 30
    while _offsets(bootstrap, group) != {(topic, 0): 20}:
        assert time.monotonic() < deadline, _offsets(bootstrap, group)
        time.sleep(0.3)
    tool = ["--bootstrap-server", bootstrap, "--group", group]
    out = run_tool("kafka-share-groups", *tool, "--describe", "--offsets", workdir=tmp_path).stdout
    row = [line.split() for line in out.splitlines() if topic in line]
    assert row and row[0][:4] == [group, topic, "0", "20"], out
    # An unknown topic: the partition's error, the group's offsets unchanged.
    with KafkaConnection(bootstrap, client_id="share-test") as conn:
        r = conn.request(91, 0, {"group_id": group, "topics": [
            {"topic_name": "no-such-topic",
             "partitions": [{"partition_index": 0, "start_offset": 0}]}
        ]})  # fmt: skip
    assert r.error_code == 0 and r.responses[0].partitions[0].error_code == 3, r
    assert _offsets(bootstrap, group) == {(topic, 0): 20}
    # A member in the group: NON_EMPTY_GROUP, nothing changes.
    ck = pytest.importorskip("confluent_kafka")
    member = ck.ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        member.subscribe([topic])
        wait_members(bootstrap, group, 1)
        with KafkaConnection(bootstrap, client_id="share-test") as conn:
            r = conn.request(91, 0, {"group_id": group, "topics": [
                {"topic_name": topic, "partitions": [{"partition_index": 0, "start_offset": 0}]}
            ]})  # fmt: skip
        assert r.error_code == 68, r  # NON_EMPTY_GROUP
    finally:
        member.close()
    assert _offsets(bootstrap, group) == {(topic, 0): 20}
    deadline = time.monotonic() + 30
    while members(broker, group):
        assert time.monotonic() < deadline, "the member never left"
        time.sleep(0.3)
    reset = run_tool("kafka-share-groups", *tool, "--reset-offsets", "--to-earliest",
                     "--topic", topic, "--execute", workdir=tmp_path)  # fmt: skip
    assert _offsets(bootstrap, group) == {(topic, 0): 0}, reset.stdout
    # The group reads again from the log start.
    again = _share_consume(bootstrap, group, topic, 20)
    assert sorted(again) == sorted([f"old{i}" for i in range(10)] + new)
    # DeleteGroups deletes the group's share state (DeleteShareGroupState) with it.
    deadline = time.monotonic() + 30
    while members(broker, group):
        assert time.monotonic() < deadline, "the member never left"
        time.sleep(0.3)
    topic_id = _topic_id(bootstrap, topic)
    with KafkaConnection(bootstrap, client_id="share-test") as conn:
        d = conn.request(42, 2, {"groups_names": [group]})
        assert d.results[0].error_code == 0, d
        s = conn.request(87, 1, {"group_id": group, "topics": [
            {"topic_id": topic_id, "partitions": [{"partition": 0, "leader_epoch": -1}]}
        ]})  # fmt: skip
    assert s.results[0].partitions[0].start_offset == -1, s


def _alter_group_config(bootstrap: str, group: str, configs: dict[str, str]) -> tuple[int, str]:
    """IncrementalAlterConfigs (SET) on the GROUP resource: (error, message)."""
    with KafkaConnection(bootstrap, client_id="share-test") as conn:
        r = conn.request(44, 1, {"resources": [{
            "resource_type": 32, "resource_name": group,
            "configs": [{"name": k, "config_operation": 0, "value": v} for k, v in configs.items()],
        }], "validate_only": False})  # fmt: skip
    res = r.responses[0]
    return res.error_code, res.error_message or ""


def _group_configs(bootstrap: str, group: str) -> dict[str, tuple[str, int]]:
    """DescribeConfigs of the GROUP resource: key -> (value, source)."""
    with KafkaConnection(bootstrap, client_id="share-test") as conn:
        r = conn.request(32, 4, {"resources": [
            {"resource_type": 32, "resource_name": group, "configuration_keys": None}
        ], "include_synonyms": False, "include_documentation": False})  # fmt: skip
    res = r.results[0]
    assert res.error_code == 0, res
    return {c.name: (c.value, c.config_source) for c in res.configs}


def test_share_group_configs(broker: BrokerProcess, tmp_path: Path) -> None:
    """Per-group configs (GroupConfig, GROUP resource 32): kafka-configs sets
    share.auto.offset.reset=earliest and the new group reads the topic from
    its start; an unknown key or a value outside the broker's bounds is
    INVALID_CONFIG and leaves the group's configs as they were."""
    from kafka_tools import run_tool

    bootstrap = broker.bootstrap
    topic = create_topic(bootstrap)
    group = f"configs-{uuid.uuid4().hex[:8]}"
    old = [f"old{i}" for i in range(10)]
    produce(bootstrap, topic, old, per_batch=5)
    run_tool("kafka-configs", "--bootstrap-server", bootstrap, "--alter", "--entity-type",
             "groups", "--entity-name", group, "--add-config",
             "share.auto.offset.reset=earliest,share.record.lock.duration.ms=20000",
             workdir=tmp_path)  # fmt: skip
    configs = _group_configs(bootstrap, group)
    assert configs["share.auto.offset.reset"] == ("earliest", 8), configs  # GROUP_CONFIG
    assert configs["share.record.lock.duration.ms"] == ("20000", 8), configs
    assert configs["share.session.timeout.ms"] == ("6000", 5), configs  # the broker's
    for bad in (
        {"share.no.such.key": "1"},
        {"share.record.lock.duration.ms": "1"},  # below group.share.min.record.lock.duration.ms
        {"share.auto.offset.reset": "sometimes"},
        {"share.heartbeat.interval.ms": "6000"},  # not below the session timeout
    ):
        code, message = _alter_group_config(bootstrap, group, bad)
        assert code == 40, (bad, code, message)  # INVALID_CONFIG
        assert _group_configs(bootstrap, group) == configs, bad
    # The group's share partition starts at the log start: the old records come.
    assert sorted(_share_consume(bootstrap, group, topic, len(old))) == sorted(old)


def test_share_isolation_level_and_record_limit(broker: BrokerProcess) -> None:
    """share.isolation.level=read_committed (a group config): the share group
    gets the committed transactions' records only — not an aborted one's, not
    an open one's (it stops at the last stable offset) — while a
    read_uncommitted group gets them all. ShareFetch v2 with ShareAcquireMode
    RECORD_LIMIT (KIP-1206) acquires exactly max_records of a larger batch."""
    ck = pytest.importorskip("confluent_kafka")
    bootstrap = broker.bootstrap
    topic = create_topic(bootstrap)
    p = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": f"iso-{topic}"})
    p.init_transactions(30)
    sent: dict[str, list[str]] = {"committed": [], "aborted": [], "open": []}
    for kind, values in (
        ("committed", [f"c{i}" for i in range(5)]),
        ("aborted", [f"x{i}" for i in range(5)]),
        ("committed", [f"c{i}" for i in range(5, 10)]),
        ("open", [f"o{i}" for i in range(3)]),
    ):
        p.begin_transaction()
        for v in values:
            p.produce(topic, v.encode(), partition=0)
        p.flush(30)
        if kind == "committed":
            p.commit_transaction(30)
        elif kind == "aborted":
            p.abort_transaction(30)
        sent[kind] += values
    try:
        groups = {}
        for level in ("read_committed", "read_uncommitted"):
            group = groups[level] = f"{level}-{uuid.uuid4().hex[:6]}"
            code, message = _alter_group_config(
                bootstrap, group,
                {"share.isolation.level": level, "share.auto.offset.reset": "earliest"},
            )  # fmt: skip
            assert code == 0, message
        assert _group_configs(bootstrap, groups["read_committed"])["share.isolation.level"] == (
            "read_committed",
            8,
        )
        committed = _share_consume(bootstrap, groups["read_committed"], topic, 10)
        assert sorted(committed) == sorted(sent["committed"]), committed
        everything = _share_consume(bootstrap, groups["read_uncommitted"], topic, 18)
        assert sorted(everything) == sorted(v for vs in sent.values() for v in vs), everything
        # Nothing past the open transaction reaches read_committed, even later.
        late = _share_consume_for(bootstrap, groups["read_committed"], topic, 3.0)
        assert late == [], late
    finally:
        p.abort_transaction(30)
    _record_limit(bootstrap, create_topic(bootstrap))


def _share_consume_for(bootstrap: str, group: str, topic: str, seconds: float) -> list[str]:
    ck = pytest.importorskip("confluent_kafka")
    c = ck.ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    got: list[str] = []
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            got += [m.value().decode() for m in c.poll(0.3) if m.error() is None]
    finally:
        c.close()
    return got


def _record_limit(bootstrap: str, topic: str) -> None:
    """One batch of ten records; ShareFetch v2, max_records 3: RECORD_LIMIT
    acquires three of them, BATCH_OPTIMIZED (the next fetch of another
    member) the whole rest of the batch."""
    produce(bootstrap, topic, [f"r{i}" for i in range(10)], per_batch=10)
    topic_id = _topic_id(bootstrap, topic)
    group = f"limit-{uuid.uuid4().hex[:6]}"
    code, message = _alter_group_config(bootstrap, group, {"share.auto.offset.reset": "earliest"})
    assert code == 0, message
    with KafkaConnection(bootstrap, client_id="share-test") as conn:
        acquired: dict[str, list[tuple[int, int]]] = {}
        for member, mode in (("m-limit", 1), ("m-batch", 0)):
            deadline = time.monotonic() + 30
            while True:
                hb = conn.request(76, 1, {
                    "group_id": group, "member_id": member, "member_epoch": 0,
                    "rack_id": None, "subscribed_topic_names": [topic],
                })  # fmt: skip
                assert hb.error_code == 0, hb
                if hb.assignment is not None and hb.assignment.topic_partitions:
                    break
                assert time.monotonic() < deadline, "no assignment"
                time.sleep(0.3)
            r = conn.request(78, 2, {
                "group_id": group, "member_id": member, "share_session_epoch": 0,
                "max_wait_ms": 5000, "min_bytes": 1, "max_bytes": 1 << 20,
                "max_records": 3, "batch_size": 3, "share_acquire_mode": mode,
                "topics": [{"topic_id": topic_id, "partitions": [{"partition_index": 0}]}],
            })  # fmt: skip
            assert r.error_code == 0, r
            part = r.responses[0].partitions[0]
            assert part.error_code == 0, part
            acquired[member] = [(a.first_offset, a.last_offset) for a in part.acquired_records]
    # The batch's first three to the one, the other seven to the other.
    assert acquired == {"m-limit": [(0, 2)], "m-batch": [(3, 9)]}, acquired
