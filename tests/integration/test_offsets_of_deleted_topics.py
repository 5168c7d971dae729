"""A deleted topic's committed offsets leave its groups (Kafka's
GroupCoordinator.onPartitionsDeleted): a topic created again under the same
name starts with no committed offset, so a consumer does not resume it at
the old topic's positions (found by Kafka Streams' application reset, which
deletes and recreates its repartition topics)."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator

import pytest
from broker_process import BrokerProcess, topic_name


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("deleted-offsets") / "data", {}).start()
    try:
        yield b
    finally:
        if b.proc is not None:
            b.stop(signal.SIGKILL)


def _committed(bootstrap: str, group: str, topic: str, partitions: int) -> list[int]:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    req = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])
    got = admin.list_consumer_group_offsets([req])[group].result(timeout=30)
    return [tp.offset for tp in sorted(got.topic_partitions, key=lambda tp: tp.partition)]


def test_a_deleted_topics_offsets_leave_its_groups(broker: BrokerProcess) -> None:
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic, other, group = topic_name("gone"), topic_name("kept"), topic_name("g")
    for name in (topic, other):
        admin.create_topics([NewTopic(name, 2, 1)])[name].result(timeout=30)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        c.commit(
            offsets=[TopicPartition(t, p, 7) for t in (topic, other) for p in (0, 1)],
            asynchronous=False,
        )
    finally:
        c.close()
    assert _committed(broker.bootstrap, group, topic, 2) == [7, 7]

    admin.delete_topics([topic], operation_timeout=30)[topic].result(timeout=30)
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(timeout=30)
    deadline = time.monotonic() + 30  # an upper bound: the tombstones are appended
    while _committed(broker.bootstrap, group, topic, 2) != [-1001, -1001]:
        assert time.monotonic() < deadline, _committed(broker.bootstrap, group, topic, 2)
        time.sleep(0.1)
    # The other topic's offsets stay, and so does the group after a restart.
    assert _committed(broker.bootstrap, group, other, 2) == [7, 7]
    broker.stop()
    broker.start()
    assert _committed(broker.bootstrap, group, topic, 2) == [-1001, -1001]
    assert _committed(broker.bootstrap, group, other, 2) == [7, 7]


def test_an_empty_group_left_without_offsets_goes(broker: BrokerProcess) -> None:
    """As Kafka's cleanupGroupMetadata: an Empty group whose only offsets were
    of the deleted topic is dead — no longer listed."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic, group = topic_name("only"), topic_name("g")
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=30)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        c.commit(offsets=[TopicPartition(topic, 0, 3)], asynchronous=False)
    finally:
        c.close()

    def listed() -> bool:
        groups = admin.list_consumer_groups().result(timeout=30).valid
        return group in {g.group_id for g in groups}

    assert listed()
    admin.delete_topics([topic], operation_timeout=30)[topic].result(timeout=30)
    deadline = time.monotonic() + 30  # an upper bound: the tombstones are appended
    while listed():
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert _committed(broker.bootstrap, group, topic, 1) == [-1001]
