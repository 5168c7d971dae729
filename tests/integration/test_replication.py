"""Replication between real broker processes, the test acting as Kafka's
controller: it sends LeaderAndIsr and UpdateMetadata (pylog's codec) as the
ZooKeeper-mode controller would, then checks the followers' logs against the
leader's byte for byte, ISR shrink and expansion around a stopped follower,
truncation of a deposed leader by leader epoch, and the fencing of a stale
controller."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from broker_process import BrokerProcess, topic_name
from conftest import build_batch

from pylog.protocol import ApiKey
from pylog.protocol.client import KafkaConnection
from pylog.protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    ProduceResponse,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from pylog.protocol.messages.delete_records_request import (
    DeleteRecordsPartition,
    DeleteRecordsTopic,
)
from pylog.protocol.messages.leader_and_isr_request import (
    LeaderAndIsrLiveLeader,
    LeaderAndIsrPartitionState,
    LeaderAndIsrTopicState,
)
from pylog.protocol.messages.metadata_request import MetadataRequestTopic
from pylog.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from pylog.protocol.messages.update_metadata_request import (
    UpdateMetadataBroker,
    UpdateMetadataEndpoint,
    UpdateMetadataPartitionState,
    UpdateMetadataTopicState,
)
from pylog.server.replica_fetcher_blocking_send import BrokerEndPoint, ReplicaFetcherBlockingSend

LAG_MS = 1500
DEADLINE_S = 30  # only catches hangs
CONTROLLER_EPOCH = 5


class Controller:
    """Kafka's controller, played by the test: one connection per broker."""

    def __init__(self, brokers: dict[int, BrokerProcess]) -> None:
        self.brokers = brokers
        # One controller for the module's cluster: every test speaks at this
        # epoch, and the stale-epoch test below it.
        self.epoch = CONTROLLER_EPOCH
        self.conns: dict[int, KafkaConnection] = {}

    def conn(self, b: int) -> KafkaConnection:
        if b not in self.conns:
            self.conns[b] = KafkaConnection(self.brokers[b].bootstrap, timeout=20)
        return self.conns[b]

    def close(self) -> None:
        for c in self.conns.values():
            c.close()
        self.conns.clear()

    def leader_and_isr(
        self,
        to: int,
        topic: str,
        topic_id: uuid.UUID,
        *,
        leader: int,
        leader_epoch: int,
        isr: list[int],
        replicas: list[int],
        partition_epoch: int = 0,
        controller_epoch: int | None = None,
    ) -> LeaderAndIsrResponse:
        epoch = self.epoch if controller_epoch is None else controller_epoch
        body = LeaderAndIsrRequest(
            controller_id=1,
            controller_epoch=epoch,
            broker_epoch=-1,
            type=0,
            topic_states=[
                LeaderAndIsrTopicState(
                    topic_name=topic,
                    topic_id=topic_id,
                    partition_states=[
                        LeaderAndIsrPartitionState(
                            partition_index=0,
                            controller_epoch=epoch,
                            leader=leader,
                            leader_epoch=leader_epoch,
                            isr=isr,
                            partition_epoch=partition_epoch,
                            replicas=replicas,
                            is_new=leader_epoch == 0,
                        )
                    ],
                )
            ],
            live_leaders=[
                LeaderAndIsrLiveLeader(
                    broker_id=leader, host_name="127.0.0.1", port=self.brokers[leader].port
                )
            ],
        )
        return self.conn(to).request(ApiKey.LEADER_AND_ISR, 6, body, LeaderAndIsrResponse)

    def update_metadata(
        self,
        to: int,
        topic: str,
        topic_id: uuid.UUID,
        *,
        leader: int,
        leader_epoch: int,
        isr: list[int],
        replicas: list[int],
        controller_epoch: int | None = None,
    ) -> UpdateMetadataResponse:
        epoch = self.epoch if controller_epoch is None else controller_epoch
        body = UpdateMetadataRequest(
            controller_id=1,
            controller_epoch=epoch,
            broker_epoch=-1,
            topic_states=[
                UpdateMetadataTopicState(
                    topic_name=topic,
                    topic_id=topic_id,
                    partition_states=[
                        UpdateMetadataPartitionState(
                            partition_index=0,
                            controller_epoch=epoch,
                            leader=leader,
                            leader_epoch=leader_epoch,
                            isr=isr,
                            zk_version=0,
                            replicas=replicas,
                            offline_replicas=[],
                        )
                    ],
                )
            ],
            live_brokers=[
                UpdateMetadataBroker(
                    id=b,
                    endpoints=[
                        UpdateMetadataEndpoint(
                            port=p.port, host="127.0.0.1", listener="PLAINTEXT", security_protocol=0
                        )
                    ],
                    rack=None,
                )
                for b, p in self.brokers.items()
            ],
        )
        return self.conn(to).request(ApiKey.UPDATE_METADATA, 7, body, UpdateMetadataResponse)

    def place(
        self, topic: str, topic_id: uuid.UUID, *, leader: int, leader_epoch: int, isr: list[int]
    ) -> None:
        """LeaderAndIsr to every replica (followers first, as it does not
        matter), then UpdateMetadata to every broker."""
        replicas = sorted(self.brokers)
        for b in replicas:
            r = self.leader_and_isr(
                b,
                topic,
                topic_id,
                leader=leader,
                leader_epoch=leader_epoch,
                isr=isr,
                replicas=replicas,
            )
            assert r.error_code == 0
            assert [p.error_code for t in r.topics for p in t.partition_errors] == [0]
        for b in replicas:
            r2 = self.update_metadata(
                b,
                topic,
                topic_id,
                leader=leader,
                leader_epoch=leader_epoch,
                isr=isr,
                replicas=replicas,
            )
            assert r2.error_code == 0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[int, BrokerProcess]]:
    brokers: dict[int, BrokerProcess] = {}
    try:
        for b in (1, 2, 3):
            brokers[b] = BrokerProcess(
                tmp_path_factory.mktemp(f"broker{b}"),
                {
                    "broker.id": b,
                    "replica.lag.time.max.ms": LAG_MS,
                    "replica.fetch.wait.max.ms": 100,
                    "replica.fetch.backoff.ms": 100,
                    "auto.create.topics.enable": "false",
                    # Small segments: followers must roll where the leader rolls.
                    "log.segment.bytes": 1024 * 1024,
                },
            ).start()
        yield brokers
    finally:
        for p in brokers.values():
            if p.proc is not None:
                p.proc.send_signal(signal.SIGCONT)
                p.stop()


def segment(broker: BrokerProcess, topic: str) -> Path:
    return broker.data / f"{topic}-0" / "00000000000000000000.log"


def wait_for(what: str, check: object) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def segments(broker: BrokerProcess, topic: str) -> list[tuple[str, bytes]]:
    d = broker.data / f"{topic}-0"
    return [(p.name, p.read_bytes()) for p in sorted(d.glob("*.log"))]


def wait_identical(brokers: dict[int, BrokerProcess], topic: str) -> bytes:
    """Every replica's segment files equal to the leader's, names and bytes;
    returns their bytes end to end."""
    found: list[list[tuple[str, bytes]]] = []

    def same() -> bool:
        each = [segments(b, topic) for b in brokers.values()]
        found[:] = [each[0]]
        return any(data for _, data in each[0]) and all(s == each[0] for s in each)

    wait_for(f"identical segments of {topic}", same)
    return b"".join(data for _, data in found[0])


def isr_of(broker: BrokerProcess, topic: str) -> list[int]:
    with KafkaConnection(broker.bootstrap) as c:
        r = c.request(
            ApiKey.METADATA,
            1,
            MetadataRequest(topics=[MetadataRequestTopic(name=topic)]),
            MetadataResponse,
        )
    return sorted(r.topics[0].partitions[0].isr_nodes)


def produce_raw(broker: BrokerProcess, topic: str, values: list[bytes], acks: int) -> int:
    """A Produce of one batch with pylog's codec; returns the error code."""
    body = ProduceRequest(
        transactional_id=None,
        acks=acks,
        timeout_ms=DEADLINE_S * 1000,
        topic_data=[
            TopicProduceData(
                name=topic,
                partition_data=[
                    PartitionProduceData(index=0, records=memoryview(build_batch(values)))
                ],
            )
        ],
    )
    with KafkaConnection(broker.bootstrap, timeout=2 * DEADLINE_S) as c:
        r = c.request(ApiKey.PRODUCE, 8, body, ProduceResponse)
    return r.responses[0].partition_responses[0].error_code


def ck_produce_all(bootstrap: str, topic: str, n: int, prefix: bytes, pad: int = 0) -> None:
    from confluent_kafka import Producer

    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "message.timeout.ms": 25_000,
        }
    )
    errors: list[object] = []
    for i in range(n):
        p.produce(
            topic,
            value=prefix + b"-%05d" % i + b"." * pad,
            key=b"k%d" % (i % 7),
            on_delivery=lambda err, msg: errors.append(err) if err else None,
        )
    assert p.flush(DEADLINE_S) == 0
    assert errors == []


def test_followers_replicate_byte_for_byte(cluster: dict[int, BrokerProcess]) -> None:
    topic, topic_id = topic_name("repl"), uuid.uuid4()
    ctl = Controller(cluster)
    try:
        ctl.place(topic, topic_id, leader=1, leader_epoch=0, isr=[1, 2, 3])
        t0 = time.monotonic()
        ck_produce_all(cluster[1].bootstrap, topic, 3000, b"v", pad=500)  # 1.5 MB: 2 segments
        data = wait_identical(cluster, topic)
        print(f"3000 acks=all records replicated to 3 brokers in {time.monotonic() - t0:.2f}s")
        assert data.count(b"v-02999") == 1
        assert len(segments(cluster[2], topic)) > 1
        wait_for("a full ISR", lambda: isr_of(cluster[1], topic) == [1, 2, 3])
        # A follower takes no produce.
        assert produce_raw(cluster[2], topic, [b"x"], acks=1) == 6  # NOT_LEADER_OR_FOLLOWER
    finally:
        ctl.close()


def test_followers_take_whole_megabyte_fetch_responses(cluster: dict[int, BrokerProcess]) -> None:
    """Batches near replica.fetch.max.bytes come to each follower in one Fetch
    response of about a MiB, read off the socket in one go (the fetcher does
    not stop reading partway): acks=-1 is answered only once both followers
    hold them, and every replica ends byte for byte the leader's."""
    topic, topic_id = topic_name("big"), uuid.uuid4()
    ctl = Controller(cluster)
    try:
        ctl.place(topic, topic_id, leader=1, leader_epoch=0, isr=[1, 2, 3])
        for i in range(4):  # ~900 KiB each: one batch a segment, one batch a response
            values = [b"b%d-%04d" % (i, j) + os.urandom(1000) for j in range(900)]
            assert produce_raw(cluster[1], topic, values, acks=-1) == 0
            # Answered acks=-1: every follower in the ISR has the batch (one that
            # joined since had to reach the HW, which is past it).
            for b in set(isr_of(cluster[1], topic)) - {1}:
                assert (b"b%d-0899" % i) in b"".join(d for _, d in segments(cluster[b], topic))
        data = wait_identical(cluster, topic)
        assert all(data.count(b"b%d-0899" % i) == 1 for i in range(4))
        assert len(segments(cluster[3], topic)) >= 4
    finally:
        ctl.close()


def test_fetcher_socket_takes_replica_socket_receive_buffer_bytes(
    cluster: dict[int, BrokerProcess],
) -> None:
    """The follower's connection has SO_RCVBUF = replica.socket.receive.buffer.bytes,
    set before connecting; -1 leaves the OS default. Requests go through either."""
    host, port = cluster[1].bootstrap.rsplit(":", 1)
    default = socket.socket().getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)

    async def rcvbuf(size: int) -> int:
        send = ReplicaFetcherBlockingSend(
            BrokerEndPoint(1, host, int(port)),
            client_id="test-fetcher",
            socket_timeout_ms=DEADLINE_S * 1000,
            max_response_bytes=1 << 20,
            receive_buffer_bytes=size,
        )
        try:
            r = await send.send_request(
                ApiKey.API_VERSIONS, 3, ApiVersionsRequest("t", "1"), ApiVersionsResponse
            )
            assert r.error_code == 0
            assert send._writer is not None
            sock = send._writer.get_extra_info("socket")
            return int(sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF))
        finally:
            await send.close()

    # Linux doubles the size asked (its bookkeeping); the default is not locked.
    assert asyncio.run(rcvbuf(256 * 1024)) in (256 * 1024, 512 * 1024)
    assert asyncio.run(rcvbuf(-1)) == default


def test_stale_controller_epoch_is_refused(cluster: dict[int, BrokerProcess]) -> None:
    topic, topic_id = topic_name("stale"), uuid.uuid4()
    ctl = Controller(cluster)
    try:
        ctl.place(topic, topic_id, leader=1, leader_epoch=0, isr=[1, 2, 3])
        r = ctl.leader_and_isr(
            2,
            topic,
            topic_id,
            leader=2,
            leader_epoch=1,
            isr=[1, 2, 3],
            replicas=[1, 2, 3],
            controller_epoch=CONTROLLER_EPOCH - 1,
        )
        assert r.error_code == 11  # STALE_CONTROLLER_EPOCH
        r2 = ctl.update_metadata(
            2,
            topic,
            topic_id,
            leader=2,
            leader_epoch=1,
            isr=[1, 2, 3],
            replicas=[1, 2, 3],
            controller_epoch=CONTROLLER_EPOCH - 1,
        )
        assert r2.error_code == 11
        # A stale leader epoch from the current controller: refused per partition.
        r3 = ctl.leader_and_isr(
            2, topic, topic_id, leader=1, leader_epoch=0, isr=[1, 2, 3], replicas=[1, 2, 3]
        )
        assert r3.error_code == 0
        assert [p.error_code for t in r3.topics for p in t.partition_errors] == [11]
        # Broker 2 still follows broker 1: it refuses produce.
        assert produce_raw(cluster[2], topic, [b"x"], acks=1) == 6
    finally:
        ctl.close()


def test_stopped_follower_leaves_and_rejoins_the_isr(cluster: dict[int, BrokerProcess]) -> None:
    topic, topic_id = topic_name("isr"), uuid.uuid4()
    ctl = Controller(cluster)
    try:
        ctl.place(topic, topic_id, leader=1, leader_epoch=0, isr=[1, 2, 3])
        assert produce_raw(cluster[1], topic, [b"first"], acks=-1) == 0
        proc = cluster[3].proc
        assert proc is not None
        os.kill(proc.pid, signal.SIGSTOP)
        try:
            t0 = time.monotonic()
            # acks=all waits for broker 3 until the ISR drops it, then succeeds.
            assert produce_raw(cluster[1], topic, [b"while-stopped"], acks=-1) == 0
            wait_for("ISR shrink", lambda: isr_of(cluster[1], topic) == [1, 2])
            print(f"ISR shrank {time.monotonic() - t0:.2f}s after SIGSTOP (lag {LAG_MS} ms)")
        finally:
            os.kill(proc.pid, signal.SIGCONT)
        t1 = time.monotonic()
        wait_for("ISR expand", lambda: isr_of(cluster[1], topic) == [1, 2, 3])
        print(f"ISR expanded {time.monotonic() - t1:.2f}s after SIGCONT")
        data = wait_identical(cluster, topic)
        assert b"while-stopped" in data
    finally:
        ctl.close()


def test_deposed_leader_truncates_by_leader_epoch(cluster: dict[int, BrokerProcess]) -> None:
    topic, topic_id = topic_name("epoch"), uuid.uuid4()
    ctl = Controller(cluster)
    replicas = [1, 2, 3]
    try:
        ctl.place(topic, topic_id, leader=1, leader_epoch=0, isr=replicas)
        ck_produce_all(cluster[1].bootstrap, topic, 200, b"before")
        committed = wait_identical(cluster, topic)
        # Broker 2 leads at epoch 1 and broker 3 follows it; broker 1 is not told yet.
        for b in (2, 3):
            r = ctl.leader_and_isr(
                b,
                topic,
                topic_id,
                leader=2,
                leader_epoch=1,
                isr=[2, 3],
                replicas=replicas,
                partition_epoch=1,
            )
            assert [p.error_code for t in r.topics for p in t.partition_errors] == [0]
        # The old leader still takes an acks=1 write at epoch 0: it will diverge.
        assert produce_raw(cluster[1], topic, [b"divergent-%d" % i for i in range(20)], 1) == 0
        assert b"divergent-0" in segment(cluster[1], topic).read_bytes()
        assert produce_raw(cluster[2], topic, [b"new-leader-%d" % i for i in range(5)], -1) == 0
        # Now broker 1 learns it follows broker 2 at epoch 1: it truncates the
        # divergent batch (by leader epoch, not to its HW) and fetches epoch 1.
        r = ctl.leader_and_isr(
            1,
            topic,
            topic_id,
            leader=2,
            leader_epoch=1,
            isr=[2, 3],
            replicas=replicas,
            partition_epoch=1,
        )
        assert [p.error_code for t in r.topics for p in t.partition_errors] == [0]
        data = wait_identical(cluster, topic)
        assert data.startswith(committed)
        assert b"divergent" not in data
        assert b"new-leader-4" in data
        # The deposed leader refuses produce; the new leader's ISR takes broker 1 back.
        assert produce_raw(cluster[1], topic, [b"x"], acks=1) == 6
        wait_for("broker 1 back in the ISR", lambda: isr_of(cluster[2], topic) == [1, 2, 3])
    finally:
        ctl.close()


def delete_records(broker: BrokerProcess, topic: str, offset: int) -> int:
    body = DeleteRecordsRequest(
        topics=[
            DeleteRecordsTopic(
                name=topic, partitions=[DeleteRecordsPartition(partition_index=0, offset=offset)]
            )
        ],
        timeout_ms=10_000,
    )
    with KafkaConnection(broker.bootstrap) as c:
        r = c.request(ApiKey.DELETE_RECORDS, 2, body, DeleteRecordsResponse)
    return r.topics[0].partitions[0].error_code


def test_restarted_follower_behind_the_log_start_restarts_there(
    cluster: dict[int, BrokerProcess],
) -> None:
    topic, topic_id = topic_name("restart"), uuid.uuid4()
    ctl = Controller(cluster)
    try:
        ctl.place(topic, topic_id, leader=1, leader_epoch=0, isr=[1, 2, 3])
        # Batches of 10 records: offsets 0-49 everywhere.
        for i in range(5):
            assert produce_raw(cluster[1], topic, [b"a%d-%d" % (i, j) for j in range(10)], -1) == 0
        wait_identical(cluster, topic)
        cluster[3].stop()
        ctl.conns.pop(3).close()
        # Offsets 50-99 while broker 3 is down (the first waits for the ISR shrink).
        for i in range(5):
            assert produce_raw(cluster[1], topic, [b"b%d-%d" % (i, j) for j in range(10)], -1) == 0
        wait_for("ISR without broker 3", lambda: isr_of(cluster[1], topic) == [1, 2])
        # The leader's log now starts inside the batch 80-89.
        assert delete_records(cluster[1], topic, 85) == 0
        cluster[3].start()
        # The controller tells the restarted broker its role again.
        r = ctl.leader_and_isr(
            3, topic, topic_id, leader=1, leader_epoch=0, isr=[1, 2], replicas=[1, 2, 3],
            partition_epoch=1,
        )  # fmt: skip
        assert [p.error_code for t in r.topics for p in t.partition_errors] == [0]
        # Broker 3 fetches from 50, is told OFFSET_OUT_OF_RANGE, restarts its log
        # at the batch holding the leader's log start (80), and catches up.
        restarted = cluster[3].data / f"{topic}-0" / "00000000000000000080.log"
        leader_segment = segment(cluster[1], topic)
        wait_for(
            "broker 3 to restart at offset 80 and catch up",
            lambda: (
                restarted.exists()
                and len(restarted.read_bytes()) > 0
                and leader_segment.read_bytes().endswith(restarted.read_bytes())
                and b"b4-9" in restarted.read_bytes()
            ),
        )
        assert b"b2-9" not in restarted.read_bytes()  # offsets before 80 are not fetched
        wait_for("broker 3 back in the ISR", lambda: isr_of(cluster[1], topic) == [1, 2, 3])
    finally:
        ctl.close()
