"""ListOffsets MAX_TIMESTAMP (-3) answers the record holding the largest
timestamp and that timestamp, not the last offset of its batch (Kafka's
KAFKA-16310), asked by confluent-kafka's admin client of a real broker."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest
from broker_process import BrokerProcess, topic_name


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("max-ts") / "data").start()
    try:
        yield b
    finally:
        if b.proc is not None:
            b.stop(signal.SIGKILL)


def produce_one_batch(bootstrap: str, topic: str, timestamps: list[int], codec: str) -> list[int]:
    """The records, in one batch (a long linger, one flush); their offsets."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2000, "compression.type": codec})
    offsets: list[int] = []

    def delivered(err: object, msg: Any) -> None:
        offsets.append(-1 if err else msg.offset())

    for i, ts in enumerate(timestamps):
        p.produce(topic, value=b"v%d" % i, partition=0, timestamp=ts, on_delivery=delivered)
    assert p.flush(20) == 0
    return offsets


def max_timestamp(bootstrap: str, topic: str) -> tuple[int, int]:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    admin = AdminClient({"bootstrap.servers": bootstrap})
    tp = TopicPartition(topic, 0)
    r = admin.list_offsets({tp: OffsetSpec.max_timestamp()})[tp].result(20)
    return r.offset, r.timestamp


def create_topic(bootstrap: str, topic: str, **configs: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(20)


@pytest.mark.parametrize("codec", ["none", "lz4"])
def test_max_timestamp_is_the_record_within_its_batch(broker: BrokerProcess, codec: str) -> None:
    topic = topic_name("maxts")
    create_topic(broker.bootstrap, topic)
    now = int(time.time() * 1000)
    # The largest timestamp is the second record of the first batch; a later
    # batch has smaller ones.
    first = produce_one_batch(broker.bootstrap, topic, [now - 9000, now - 1000, now - 5000], codec)
    assert first == [0, 1, 2]
    assert produce_one_batch(broker.bootstrap, topic, [now - 4000, now - 3000], codec) == [3, 4]
    assert max_timestamp(broker.bootstrap, topic) == (1, now - 1000)
    # A tie: the first record holding it is the answer.
    assert produce_one_batch(broker.bootstrap, topic, [now - 2000, now - 1000], codec) == [5, 6]
    assert max_timestamp(broker.bootstrap, topic) == (1, now - 1000)
    # A newer maximum in the middle of a later batch.
    assert produce_one_batch(broker.bootstrap, topic, [now, now + 500, now + 100], codec) == [
        7,
        8,
        9,
    ]
    assert max_timestamp(broker.bootstrap, topic) == (8, now + 500)


def test_max_timestamp_of_log_append_time_is_the_batch_s_first_record(
    broker: BrokerProcess,
) -> None:
    topic = topic_name("maxts-lat")
    create_topic(broker.bootstrap, topic, **{"message.timestamp.type": "LogAppendTime"})
    produce_one_batch(broker.bootstrap, topic, [1, 2], "none")
    before = int(time.time() * 1000)
    assert produce_one_batch(broker.bootstrap, topic, [5, 3, 4], "none") == [2, 3, 4]
    offset, ts = max_timestamp(broker.bootstrap, topic)
    # Every record of a batch has the batch's append time: the first holds it.
    assert offset == 2 and ts >= before, (offset, ts)


def test_max_timestamp_of_an_empty_partition_is_unknown(broker: BrokerProcess) -> None:
    topic = topic_name("maxts-empty")
    create_topic(broker.bootstrap, topic)
    assert max_timestamp(broker.bootstrap, topic) == (-1, -1)
