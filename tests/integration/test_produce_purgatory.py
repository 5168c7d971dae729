"""An acks=all Produce to a partition alone in its ISR (replication factor 1)
is answered without the Produce purgatory: the append moves the high
watermark, so there is nothing to wait for (Kafka tries to complete before it
watches, too). Seen from outside on a real broker process through /metrics,
beside a consumer's long-polling Fetch, which does wait in its purgatory."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator

import pytest
from broker_process import BrokerProcess, metrics_broker, topic_name

WAIT = 60.0  # upper bound for waits: only catches hangs
OPS = "pylog_server_delayedoperationpurgatory_operations_total"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, int]]:
    with metrics_broker(tmp_path_factory.mktemp("purgatory") / "data") as started:
        yield started


def purgatory_operations(port: int) -> dict[str, float]:
    """Operations handed to each purgatory so far, by its name."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith(OPS + "{"):
            labels, value = line.rsplit(" ", 1)
            out[labels.split('delayedOperation="')[1].split('"')[0]] = float(value)
    return out


def test_acks_all_on_replication_factor_1_skips_the_produce_purgatory(
    broker: tuple[BrokerProcess, int],
) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    b, port = broker
    topic = topic_name("acks-all-rf1")
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(WAIT)
    before = purgatory_operations(port)
    assert set(before) == {"Produce", "Fetch"}

    acked: list[tuple[int, int]] = []

    def delivered(err: object, msg: object) -> None:
        assert err is None, err
        acked.append((msg.partition(), msg.offset()))  # type: ignore[attr-defined]

    p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "linger.ms": 0})
    for i in range(40):
        p.produce(topic, f"v{i}".encode(), partition=i % 2, on_delivery=delivered)
        if i % 10 == 9:
            assert p.flush(WAIT) == 0
    assert p.flush(WAIT) == 0
    assert sorted(acked) == [(part, off) for part in (0, 1) for off in range(20)]
    after_produce = purgatory_operations(port)
    assert after_produce["Produce"] == before["Produce"]

    # A consumer at the end of the log long-polls: its Fetch waits in the
    # Fetch purgatory, which the same counter shows.
    c = Consumer(
        {
            "bootstrap.servers": b.bootstrap,
            "group.id": topic,
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 200,
        }
    )
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        seen: list[bytes] = []
        while len(seen) < 20:
            m = c.poll(WAIT)
            assert m is not None and m.error() is None
            seen.append(m.value() or b"")
        assert seen == [f"v{i}".encode() for i in range(0, 40, 2)]
        assert c.poll(1.0) is None  # at the end: the next fetches wait
    finally:
        c.close()
    assert purgatory_operations(port)["Fetch"] > after_produce["Fetch"]
    assert purgatory_operations(port)["Produce"] == before["Produce"]
