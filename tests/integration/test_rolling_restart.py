"""A rolling restart, as operators upgrade or reconfigure a cluster: each of
three brokers stopped cleanly (SIGTERM: controlled shutdown moves its
leaderships first), started again, and the next one only once every replica is
back in sync — under an idempotent acks=all producer and a consumer group
that commits. Nothing acknowledged is lost, nothing is written twice, the
group reads every acknowledged record, and neither client reports an error it
did not retry away."""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from pylog.testing import LocalCluster, ZooKeeperServer

PARTITIONS = 3


@pytest.fixture
def cluster(
    pylog_zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalCluster]:
    c = LocalCluster(
        3,
        {"controlled.shutdown.retry.backoff.ms": 200},
        zookeeper=pylog_zookeeper,
        directory=str(tmp_path_factory.mktemp("cluster")),
    )
    try:
        yield c.start()
    finally:
        c.close()


class _Producing(threading.Thread):
    """Sends "0", "1", … until stopped, about ``rate`` a second."""

    def __init__(self, bootstrap: str, topic: str, rate: int = 400) -> None:
        super().__init__(daemon=True)
        self.topic, self.rate = topic, rate
        self.producer = Producer({
            "bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
            "linger.ms": 5, "message.timeout.ms": 120_000,
        })  # fmt: skip
        self.acked: list[int] = []
        self.errors: list[KafkaError] = []
        self.sent = 0
        self.stopping = threading.Event()

    def _done(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self.errors.append(err)
        else:
            self.acked.append(int(msg.value()))

    def run(self) -> None:
        while not self.stopping.is_set():
            self.producer.produce(self.topic, str(self.sent).encode(), on_delivery=self._done)
            self.sent += 1
            self.producer.poll(0)
            time.sleep(1 / self.rate)
        self.producer.flush(120)


class _Consuming(threading.Thread):
    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        super().__init__(daemon=True)
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
            "enable.auto.commit": True, "auto.commit.interval.ms": 200,
        })  # fmt: skip
        self.consumer.subscribe([topic])
        self.seen: list[int] = []
        self.errors: list[KafkaError] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        try:
            while not self.stopping.is_set():
                m = self.consumer.poll(0.2)
                if m is None:
                    continue
                if m.error() is not None:
                    self.errors.append(m.error())
                    continue
                self.seen.append(int(m.value()))
        finally:
            self.consumer.close()


def _whole_log(bootstrap: str, topic: str) -> list[int]:
    """Every record of the topic, read from the start of each partition."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex[:6]}",
                  "enable.partition.eof": True, "enable.auto.commit": False})  # fmt: skip
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        out: list[int] = []
        at_end: set[int] = set()
        deadline = time.monotonic() + 60
        while len(at_end) < PARTITIONS:
            assert time.monotonic() < deadline, "the topic could not be read to its end"
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error() is not None:
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                at_end.add(m.partition())
                continue
            out.append(int(m.value()))
        return out
    finally:
        c.close()


def test_rolling_restart_under_load(cluster: LocalCluster) -> None:
    b = cluster.bootstrap_servers
    topic = f"roll-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": b})
    new = NewTopic(topic, PARTITIONS, 3, config={"min.insync.replicas": "2"})
    admin.create_topics([new])[topic].result(30)
    cluster.wait_for_full_isr(topic, PARTITIONS)

    producing = _Producing(b, topic)
    consuming = _Consuming(b, topic, f"roll-{uuid.uuid4().hex[:6]}")
    producing.start()
    consuming.start()
    try:
        time.sleep(2)
        for broker_id in sorted(cluster.registered()):
            before = producing.sent
            broker = cluster.broker(broker_id)
            assert broker.stop() == 0  # a clean exit, after its controlled shutdown
            broker.start()
            cluster.wait_for_full_isr(topic, PARTITIONS, timeout=120)
            # The producer kept going across this broker's restart.
            cluster.wait_for(lambda before=before: producing.sent > before + 200, "more records")
        time.sleep(2)
    finally:
        producing.stopping.set()
        producing.join(180)
    assert not producing.is_alive()
    assert producing.errors == []
    acked = set(producing.acked)
    assert len(acked) == len(producing.acked) == producing.sent  # every record acknowledged

    # The log holds each acknowledged record once: none lost, none twice
    # (the idempotent producer's retries across leader moves deduplicated).
    log = _whole_log(b, topic)
    twice = [v for v, n in Counter(log).items() if n > 1]
    assert twice == []
    assert set(log) == acked

    # The group reads everything acknowledged (at least once: a commit in
    # flight when its coordinator moved may be repeated).
    deadline = time.monotonic() + 60
    while not acked <= set(consuming.seen):
        assert time.monotonic() < deadline, len(acked - set(consuming.seen))
        time.sleep(0.2)
    consuming.stopping.set()
    consuming.join(30)
    assert consuming.errors == []
