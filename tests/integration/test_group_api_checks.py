"""The order of the group APIs' checks, as Kafka's GroupCoordinator has it,
against a real broker process: raw requests (pylog's KafkaConnection) for the
exact answers, and confluent-kafka's admin client for what a user sees.

- OffsetCommit (and OffsetDelete) to a topic or partition the cluster lacks
  is refused with UNKNOWN_TOPIC_OR_PARTITION for those partitions only; the
  others commit.
- OffsetCommit while the group completes a rebalance names a stale generation
  (ILLEGAL_GENERATION) or an unknown member (UNKNOWN_MEMBER_ID) before it says
  REBALANCE_IN_PROGRESS, which only a current member of this generation hears.
- LeaveGroup of a group that does not exist is a good request whose members
  are unknown.
"""

from __future__ import annotations

import signal
import struct
import time
from collections.abc import Iterator
from typing import Any

import pytest
from broker_process import BrokerProcess, topic_name

from pylog.protocol.client import KafkaConnection

JOIN, SYNC, HEARTBEAT, LEAVE, COMMIT, FETCH, FIND, OFFSET_DELETE = 11, 14, 12, 13, 8, 9, 10, 47
DESCRIBE_GROUPS = 15
NONE, UNKNOWN_TOPIC_OR_PARTITION, GROUP_ID_NOT_FOUND = 0, 3, 69
ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS = 22, 25, 27


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(
        tmp_path_factory.mktemp("group-checks") / "data", {"offsets.topic.num.partitions": 2}
    ).start()
    try:
        yield b
    finally:
        if b.proc is not None:
            b.stop(signal.SIGKILL)


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(20)


def group_state(conn: KafkaConnection, group: str) -> str:
    state: str = conn.request(DESCRIBE_GROUPS, 0, {"groups": [group]}).groups[0].group_state
    return state


def commit(
    conn: KafkaConnection,
    group: str,
    generation: int,
    member: str,
    partitions: list[tuple[str, int]],
    offset: int = 5,
) -> dict[tuple[str, int], int]:
    """OffsetCommit v8; the error code of each partition."""
    by_topic: dict[str, list[int]] = {}
    for t, p in partitions:
        by_topic.setdefault(t, []).append(p)
    r = conn.request(COMMIT, 8, {
        "group_id": group, "generation_id_or_member_epoch": generation, "member_id": member,
        "topics": [{"name": t, "partitions": [
            {"partition_index": p, "committed_offset": offset, "committed_metadata": ""}
            for p in ps]} for t, ps in by_topic.items()],
    })  # fmt: skip
    return {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions}


def fetched(conn: KafkaConnection, group: str) -> dict[tuple[str, int], int]:
    r = conn.request(FETCH, 7, {"group_id": group, "topics": None})
    assert r.error_code == 0, r
    return {(t.name, p.partition_index): p.committed_offset for t in r.topics for p in t.partitions}


def test_offset_commit_to_a_missing_topic_or_partition(broker: BrokerProcess) -> None:
    topic, group = topic_name("oc"), topic_name("g-oc")
    missing = topic_name("nothere")
    create_topic(broker.bootstrap, topic, 2)
    with KafkaConnection(broker.bootstrap) as c:
        assert c.request(FIND, 1, {"key": group, "key_type": 0}).error_code == 0
        codes = commit(c, group, -1, "", [(topic, 0), (topic, 1), (topic, 2), (missing, 0)])
        assert codes == {
            (topic, 0): NONE,
            (topic, 1): NONE,
            (topic, 2): UNKNOWN_TOPIC_OR_PARTITION,  # past the topic's partitions
            (missing, 0): UNKNOWN_TOPIC_OR_PARTITION,
        }
        assert fetched(c, group) == {(topic, 0): 5, (topic, 1): 5}
        # OffsetDelete likewise; a group error still wins over the partitions.
        delete = {"group_id": group, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0}, {"partition_index": 7}]},
            {"name": missing, "partitions": [{"partition_index": 0}]}]}  # fmt: skip
        r = c.request(OFFSET_DELETE, 0, delete)
        assert r.error_code == NONE
        assert {
            (t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions
        } == {
            (topic, 0): NONE,
            (topic, 7): UNKNOWN_TOPIC_OR_PARTITION,
            (missing, 0): UNKNOWN_TOPIC_OR_PARTITION,
        }
        assert fetched(c, group) == {(topic, 1): 5}
        r = c.request(OFFSET_DELETE, 0, {**delete, "group_id": topic_name("g-none")})
        assert (r.error_code, r.topics) == (GROUP_ID_NOT_FOUND, [])


def test_admin_alter_offsets_of_a_missing_topic_fails_that_partition(
    broker: BrokerProcess,
) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, TopicPartition
    from confluent_kafka.admin import AdminClient

    topic, group = topic_name("alter"), topic_name("g-alter")
    missing = topic_name("nothere")
    create_topic(broker.bootstrap, topic, 1)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    ok = admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, 7)])]
    )[group].result(20)
    assert [(tp.topic, tp.partition, tp.offset, tp.error) for tp in ok.topic_partitions] == [
        (topic, 0, 7, None)
    ]
    bad = admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(missing, 0, 7)])]
    )[group].result(20)
    assert [(tp.topic, tp.error and tp.error.code()) for tp in bad.topic_partitions] == [
        (missing, KafkaError.UNKNOWN_TOPIC_OR_PART)
    ]
    with KafkaConnection(broker.bootstrap) as c:
        assert fetched(c, group) == {(topic, 0): 7}  # nothing of the missing topic


def test_commit_while_completing_rebalance_checks_member_and_generation_first(
    broker: BrokerProcess,
) -> None:
    topic, group = topic_name("cr"), topic_name("g-cr")
    create_topic(broker.bootstrap, topic, 2)
    meta = struct.pack(">hi", 0, 1) + struct.pack(">h", len(topic)) + topic.encode()
    meta += struct.pack(">i", -1)

    def join(conn: KafkaConnection, member: str) -> None:
        conn.send(JOIN, 3, {  # v3: no MEMBER_ID_REQUIRED round trip
            "group_id": group, "session_timeout_ms": 30_000, "rebalance_timeout_ms": 30_000,
            "member_id": member, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": meta}],
        })  # fmt: skip

    def sync(conn: KafkaConnection, gen: int, member: str) -> Any:
        return conn.request(SYNC, 2, {"group_id": group, "generation_id": gen,
                                      "member_id": member, "assignments": []})  # fmt: skip

    tps = [(topic, 0)]
    with KafkaConnection(broker.bootstrap) as a, KafkaConnection(broker.bootstrap) as b:
        assert a.request(FIND, 1, {"key": group, "key_type": 0}).error_code == 0
        join(a, "")
        ja = a.recv(JOIN, 3)
        assert ja.error_code == 0 and ja.generation_id == 1
        r = a.request(SYNC, 2, {"group_id": group, "generation_id": 1, "member_id": ja.member_id,
                                "assignments": [{"member_id": ja.member_id,
                                                 "assignment": b""}]})  # fmt: skip
        assert r.error_code == 0
        assert commit(a, group, 1, ja.member_id, tps, 1) == {(topic, 0): NONE}
        # A second member: generation 2 forms and waits for the leader's
        # SyncGroup (CompletingRebalance), which never comes here.
        join(b, "")
        # b's join must reach the group first: had a's (the leader's, same
        # metadata) come first, generation 2 would form without b, and b's
        # join would start generation 3 that a never rejoins.
        deadline = time.monotonic() + 20
        while group_state(a, group) != "PreparingRebalance":
            assert time.monotonic() < deadline, group_state(a, group)
            time.sleep(0.01)
        join(a, ja.member_id)
        ja2, jb2 = a.recv(JOIN, 3), b.recv(JOIN, 3)
        assert ja2.generation_id == jb2.generation_id == 2

        assert commit(a, group, 1, ja.member_id, tps) == {(topic, 0): ILLEGAL_GENERATION}
        assert commit(a, group, 2, "nobody", tps) == {(topic, 0): UNKNOWN_MEMBER_ID}
        assert commit(a, group, -1, "", tps) == {(topic, 0): UNKNOWN_MEMBER_ID}  # not empty
        assert commit(a, group, 2, jb2.member_id, tps) == {(topic, 0): REBALANCE_IN_PROGRESS}
        assert fetched(a, group) == {(topic, 0): 1}  # none of them was stored

        # The other APIs, in the same state: member and generation first.
        assert sync(b, 1, jb2.member_id).error_code == ILLEGAL_GENERATION
        assert sync(b, 2, "nobody").error_code == UNKNOWN_MEMBER_ID
        hb = {"group_id": group, "generation_id": 1, "member_id": jb2.member_id}
        assert a.request(HEARTBEAT, 2, hb).error_code == ILLEGAL_GENERATION
        hb["generation_id"] = 2
        assert a.request(HEARTBEAT, 2, hb).error_code == NONE  # completing: a live member


def test_leave_of_a_group_that_does_not_exist(broker: BrokerProcess) -> None:
    group = topic_name("g-none")
    with KafkaConnection(broker.bootstrap) as c:
        assert c.request(FIND, 1, {"key": group, "key_type": 0}).error_code == 0
        r = c.request(LEAVE, 3, {"group_id": group, "members": [
            {"member_id": "m-1", "group_instance_id": None}]})  # fmt: skip
        assert r.error_code == NONE
        assert [(m.member_id, m.error_code) for m in r.members] == [("m-1", UNKNOWN_MEMBER_ID)]
        # Before v3 the member's error is the answer's.
        r = c.request(LEAVE, 2, {"group_id": group, "member_id": "m-1"})
        assert r.error_code == UNKNOWN_MEMBER_ID
