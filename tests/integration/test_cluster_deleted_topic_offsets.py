"""A deleted topic's committed offsets leave every group on a three-broker
cluster, whichever broker coordinates the group: as on Kafka (ZooKeeper
mode), each broker learns of the deletion from the controller's
UpdateMetadata (leader -2) and its group coordinator drops the offsets
(KafkaApis.handleUpdateMetadataRequest -> onPartitionsDeleted). Before, only
the broker that answered DeleteTopics dropped them, so a group coordinated
elsewhere resumed a recreated topic at the old topic's offsets."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from broker_process import topic_name

from pylog.coordinator.records import partition_for
from pylog.testing import LocalCluster

WAIT = 60.0  # upper bound for waits: only catches hangs
OFFSETS = "__consumer_offsets"
OFFSETS_PARTITIONS = 3
NO_OFFSET = -1001


def _committed(bootstrap: str, group: str, topic: str, partitions: int) -> list[int]:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    req = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])
    got = admin.list_consumer_group_offsets([req])[group].result(timeout=WAIT)
    return [tp.offset for tp in sorted(got.topic_partitions, key=lambda tp: tp.partition)]


def _create(admin: Any, topic: str) -> None:
    from confluent_kafka.admin import NewTopic

    admin.create_topics([NewTopic(topic, 2, 3)])[topic].result(timeout=WAIT)


def test_a_deleted_topics_offsets_leave_groups_coordinated_by_other_brokers(
    pylog_cluster_factory: Callable[..., LocalCluster],
) -> None:
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient

    c = pylog_cluster_factory(3, offsets_topic_num_partitions=OFFSETS_PARTITIONS)
    boot = c.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": boot})
    topic, other = topic_name("gone"), topic_name("kept")
    for name in (topic, other):
        _create(admin, name)
    # The offsets topic exists after a first FindCoordinator; its leaders are
    # spread over the brokers.
    first = topic_name("g")
    _committed(boot, first, topic, 2)
    for p in range(OFFSETS_PARTITIONS):
        c.wait_for_leader(OFFSETS, p, timeout=WAIT)
    controller = c.controller()
    assert controller is not None
    # A group whose coordinator is not the controller: DeleteTopics goes to
    # the controller (librdkafka's admin sends it there), the group's
    # offsets live on another broker. And one coordinated by the controller,
    # the broker answering DeleteTopics (each broker leads one of the three
    # offsets partitions, as the topic was placed on three live brokers).
    candidates = [f"{first}-{i}" for i in range(100)]

    def coordinator_of(g: str) -> int | None:
        return c.leader(OFFSETS, partition_for(g, OFFSETS_PARTITIONS))

    group = next(g for g in candidates if coordinator_of(g) != controller)
    local = next(g for g in candidates if coordinator_of(g) == controller)
    coordinator = coordinator_of(group)
    assert coordinator is not None and coordinator != controller

    for g in (group, local):
        consumer = Consumer({"bootstrap.servers": boot, "group.id": g})
        try:
            consumer.commit(
                offsets=[TopicPartition(t, p, 7) for t in (topic, other) for p in (0, 1)],
                asynchronous=False,
            )
        finally:
            consumer.close()
        assert _committed(boot, g, topic, 2) == [7, 7]

    admin.delete_topics([topic], operation_timeout=30)[topic].result(timeout=WAIT)
    zk = c.zk
    assert zk is not None
    c.wait_for(
        lambda: (
            zk.exists(f"/brokers/topics/{topic}") is None
            and zk.exists(f"/admin/delete_topics/{topic}") is None
        ),
        f"{topic} to go",
        timeout=WAIT,
    )
    _create(admin, topic)
    pause = threading.Event()
    deadline = time.monotonic() + WAIT  # an upper bound: the tombstones are appended
    for g in (group, local):
        while (got := _committed(boot, g, topic, 2)) != [NO_OFFSET, NO_OFFSET]:
            assert time.monotonic() < deadline, (g, got)
            pause.wait(0.2)
        # The other topic's offsets stay.
        assert _committed(boot, g, other, 2) == [7, 7]

    # The tombstones are in the offsets partition: its next leader (after the
    # coordinator stops) loads the group without the deleted topic's offsets.
    c.broker(coordinator).stop()
    c.wait_for(
        lambda: coordinator_of(group) not in (None, coordinator),
        "another coordinator",
        timeout=WAIT,
    )
    boot = c.bootstrap_servers
    assert _committed(boot, group, topic, 2) == [NO_OFFSET, NO_OFFSET]
    assert _committed(boot, group, other, 2) == [7, 7]
