"""ZkAlterIsrManager against a real ZooKeeper: an ISR change is written to the
partition state znode conditionally on its version, leaves an
isr_change_notification, and each submit is answered exactly once — the state
as written, or INVALID_UPDATE_VERSION / FENCED_LEADER_EPOCH after a lost race;
and a KafkaServer on ZooKeeper uses it, with the registration's czxid as its
broker epoch."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from pylog.broker.kafka_server import KafkaServer
from pylog.common.topic_partition import TopicPartition
from pylog.errors import ErrorCode
from pylog.metadata.kafka_zk_client import KafkaZkClient, ZkError
from pylog.metadata.zk_data import LeaderAndIsr as ZkLeaderAndIsr
from pylog.metadata.zk_data import TopicReplicaAssignment
from pylog.server.alter_isr_manager import INVALID_UPDATE_VERSION, LeaderAndIsr
from pylog.server.config import KafkaConfig
from pylog.server.zk_alter_isr_manager import ZkAlterIsrManager
from pylog.testing import ZooKeeperServer

TP = TopicPartition("t", 0)


@pytest.fixture
def zk(pylog_zookeeper: ZooKeeperServer) -> Iterator[KafkaZkClient]:
    c = KafkaZkClient(f"{pylog_zookeeper.connect}/ai-{uuid.uuid4().hex[:8]}")
    c.start()
    c.create_top_level_paths()
    c.create_topic(
        "t",
        TopicReplicaAssignment(None, {0: [1, 2, 3]}),
        {},
        {0: ZkLeaderAndIsr(1, 4, [1, 2, 3], 7)},
    )
    yield c
    c.close()


def submit(m: ZkAlterIsrManager, proposed: LeaderAndIsr) -> LeaderAndIsr | int:
    results: list[LeaderAndIsr | int] = []
    done = threading.Event()

    def cb(r: LeaderAndIsr | int) -> None:
        results.append(r)
        done.set()

    m.submit(TP, proposed, 7, cb)
    assert done.wait(20)
    return results[0]


def notifications(zk: KafkaZkClient) -> list[str]:
    """The isr_change notifications, once there is one: the manager answers
    the leaders first and writes the notification after them."""
    deadline = time.monotonic() + 20
    while not (notes := zk.get_isr_change_notifications()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return notes


def test_writes_conditionally_and_notifies(zk: KafkaZkClient) -> None:
    m = ZkAlterIsrManager(zk)
    try:
        got = submit(m, LeaderAndIsr(1, 4, (2, 1), 0))
        assert got == LeaderAndIsr(1, 4, (1, 2), 1)
        state = zk.get_partition_state("t", 0)
        assert state is not None
        assert (state.leader, state.leader_epoch, state.isr, state.controller_epoch) == (
            1, 4, [1, 2], 7,
        )  # fmt: skip
        assert state.zk_version == 1
        notes = notifications(zk)
        assert len(notes) == 1 and zk.get_isr_change_notification(notes[0]) == [("t", 0)]
        # Based on an old version: refused, nothing written.
        assert submit(m, LeaderAndIsr(1, 4, (1, 2, 3), 0)) == INVALID_UPDATE_VERSION
        # The controller elected another leader meanwhile: fenced.
        zk.update_leader_and_isr("t", 0, ZkLeaderAndIsr(2, 5, [2], 7), 1)
        assert submit(m, LeaderAndIsr(1, 4, (1, 2, 3), 1)) == ErrorCode.FENCED_LEADER_EPOCH
        assert zk.get_partition_state("t", 0).isr == [2]  # type: ignore[union-attr]
        assert len(zk.get_isr_change_notifications()) == 1
    finally:
        m.shutdown()


def test_queued_changes_are_written_in_one_round_with_one_notification(
    zk: KafkaZkClient,
) -> None:
    """A broker's return changes the ISR of every partition it follows at
    once: the proposals queued meanwhile go to ZooKeeper pipelined, in one
    round, and the controller hears of them in one notification; a stale one
    among them is refused alone."""
    n = 30
    zk.create_topic(
        "u",
        TopicReplicaAssignment(None, {p: [1, 2, 3] for p in range(n)}),
        {},
        {p: ZkLeaderAndIsr(1, 4, [1, 2], 7) for p in range(n)},
    )
    m = ZkAlterIsrManager(zk)
    results: dict[int, LeaderAndIsr | int] = {}
    all_done = threading.Event()

    def answer(p: int) -> Callable[[LeaderAndIsr | int], None]:
        def cb(r: LeaderAndIsr | int) -> None:
            results[p] = r
            if len(results) == n:
                all_done.set()

        return cb

    try:
        with m._wake:  # the worker waits until every proposal is queued
            for p in range(n):
                stale = p == 7  # based on a version the znode has left
                m.submit(
                    TopicPartition("u", p),
                    LeaderAndIsr(1, 4, (1, 2, 3), 5 if stale else 0),
                    7,
                    answer(p),
                )
        assert all_done.wait(30)
        assert results[7] == INVALID_UPDATE_VERSION
        for p in range(n):
            if p != 7:
                assert results[p] == LeaderAndIsr(1, 4, (1, 2, 3), 1), p
                assert zk.get_partition_state("u", p).isr == [1, 2, 3]  # type: ignore[union-attr]
        assert zk.get_partition_state("u", 7).isr == [1, 2]  # type: ignore[union-attr]
        assert m.rounds == [n - 1]
        notes = notifications(zk)
        assert len(notes) == 1
        assert sorted(zk.get_isr_change_notification(notes[0])) == sorted(
            ("u", p) for p in range(n) if p != 7
        )
    finally:
        m.shutdown()


def test_kafka_server_uses_it(pylog_zookeeper: ZooKeeperServer, tmp_path: Path) -> None:
    connect = f"{pylog_zookeeper.connect}/ks-{uuid.uuid4().hex[:8]}"

    async def main() -> None:
        config = KafkaConfig.from_props(
            {
                "broker.id": 4,
                "zookeeper.connect": connect,
                "listeners": "PLAINTEXT://127.0.0.1:0",
                "log.dirs": str(tmp_path / "d"),
            }
        )
        server = KafkaServer(config)
        await server.startup()
        try:
            assert isinstance(server.alter_isr_manager, ZkAlterIsrManager)
            assert server.replica_manager is not None
            assert server.replica_manager.alter_isr_manager is server.alter_isr_manager
            zk = server.zk_client
            assert zk is not None
            info = await zk.run(zk.get_broker, 4)
            assert info is not None and info.epoch > 0
            assert server.broker_epoch == info.epoch
            assert server.replica_manager.broker_epoch == info.epoch
            # A new session re-registers: the broker epoch follows it.
            sid, password = zk.session_id, zk.session_password
            assert sid is not None and password is not None
            k = KazooClient(hosts=pylog_zookeeper.connect, client_id=(sid, password))
            await asyncio.to_thread(k.start, 20)
            await asyncio.to_thread(k.stop)
            k.close()
            now = None
            for _ in range(400):
                with contextlib.suppress(ZkError):  # while the session is replaced
                    now = await zk.run(zk.get_broker, 4)
                if now is not None and now.epoch > info.epoch:
                    break
                await asyncio.sleep(0.05)
            assert now is not None and now.epoch > info.epoch
            for _ in range(100):  # the healthcheck sets it just after writing
                if server.broker_epoch == now.epoch:
                    break
                await asyncio.sleep(0.05)
            assert server.broker_epoch == now.epoch
            assert server.replica_manager.broker_epoch == now.epoch
        finally:
            await server.shutdown()

    asyncio.run(main())
