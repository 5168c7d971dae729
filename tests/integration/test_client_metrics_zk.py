"""KIP-714 subscriptions on ZooKeeper, as Kafka's ZooKeeper mode kept the
client-metrics entity: ``/config/client-metrics/<name>`` with a change
notification; another broker's ClientMetricsManager follows the change, a
broker started later reads every subscription, and an emptied one is gone."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator

import pytest

from pylog.metadata.kafka_zk_client import KafkaZkClient
from pylog.metadata.zk_store import ZkMetadataStore
from pylog.server.client_metrics_manager import ClientMetricsManager
from pylog.testing import ZooKeeperServer

WAIT = 30.0  # only catches hangs


@pytest.fixture
def clients(pylog_zookeeper: ZooKeeperServer) -> Iterator[Callable[[], KafkaZkClient]]:
    chroot = f"{pylog_zookeeper.connect}/cm-{uuid.uuid4().hex[:10]}"
    made: list[KafkaZkClient] = []

    def make() -> KafkaZkClient:
        c = KafkaZkClient(chroot, session_timeout_ms=4000)
        c.start()
        c.create_top_level_paths()
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


def test_subscriptions_in_zookeeper(clients: Callable[[], KafkaZkClient]) -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        one = await asyncio.to_thread(ZkMetadataStore, clients(), 1, loop=loop)
        two = await asyncio.to_thread(ZkMetadataStore, clients(), 2, loop=loop)
        one.start_watching()
        two.start_watching()
        heard = ClientMetricsManager(1024, two)

        async def until(pred: Callable[[], bool]) -> None:
            deadline = loop.time() + WAIT
            while not pred():
                assert loop.time() < deadline, "timed out"
                await asyncio.sleep(0.02)

        configs = {"metrics": "org.apache.kafka.producer.", "interval.ms": "1000"}
        await asyncio.to_thread(one.set_client_metrics_config, "producers", configs)
        zk = clients()
        assert zk.get_entity_config("client-metrics", "producers") == configs
        await until(lambda: heard.subscription_names() == ["producers"])

        # a broker started later reads it at start
        three = await asyncio.to_thread(ZkMetadataStore, clients(), 3, loop=loop)
        assert three.client_metrics_configs() == {"producers": configs}
        assert ClientMetricsManager(1024, three).subscription_names() == ["producers"]

        await asyncio.to_thread(one.set_client_metrics_config, "producers", {})
        await until(lambda: heard.subscription_names() == [])
        assert two.client_metrics_configs() == {}
        for store in (one, two, three):
            await asyncio.to_thread(store.close)

    asyncio.run(scenario())
