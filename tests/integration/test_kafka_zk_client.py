"""KafkaZkClient and ZkMetadataStore against a real ZooKeeper server (Debian's
package, started by pylog.testing): registration and broker epochs, conditional
writes that lose races with a version error, controller election between two
clients, session expiry and re-registration, notifications, and the store's
view following another broker's changes."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor

import pytest
from kazoo.client import KazooClient

from pylog.broker.kafka_healthcheck import KafkaHealthcheck
from pylog.controller.kafka_controller import KafkaController
from pylog.errors import InvalidReplicationFactorError, TopicAlreadyExistsError
from pylog.metadata.dynamic_config_manager import ConfigType, DynamicConfigManager
from pylog.metadata.kafka_zk_client import (
    BrokerIdInUseError,
    ControllerMovedError,
    KafkaZkClient,
    ZkConnectionError,
    ZkNodeExists,
)
from pylog.metadata.store import MetadataEvent
from pylog.metadata.zk_data import (
    BrokerInfo,
    EndPointInfo,
    LeaderAndIsr,
    TopicReplicaAssignment,
)
from pylog.metadata.zk_store import ZkMetadataStore
from pylog.server.config import KafkaConfig
from pylog.testing import ZooKeeperServer
from pylog.testing.network_faults import ZOOKEEPER, NetworkFaults

WAIT = 30.0  # upper bound for anything that waits: only catches hangs


@pytest.fixture
def chroot(pylog_zookeeper: ZooKeeperServer) -> str:
    """A connect string of the test's own (a chroot on the shared server)."""
    return f"{pylog_zookeeper.connect}/t-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def clients(chroot: str) -> Iterator[Callable[..., KafkaZkClient]]:
    made: list[KafkaZkClient] = []

    def make(**kw: int) -> KafkaZkClient:
        c = KafkaZkClient(chroot, session_timeout_ms=kw.pop("session_timeout_ms", 4000), **kw)
        c.start()
        c.create_top_level_paths()
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


def _info(broker_id: int, port: int = 9092) -> BrokerInfo:
    return BrokerInfo(broker_id, (EndPointInfo("PLAINTEXT", "127.0.0.1", port, "PLAINTEXT"),))


def _expire(zk: ZooKeeperServer, client: KafkaZkClient) -> None:
    """Expire ``client``'s session: a second connection with the same session id
    and password closes it (ZooKeeper's own tests do this)."""
    sid, password = client.session_id, client.session_password
    assert sid is not None and password is not None
    k = KazooClient(hosts=zk.connect, client_id=(sid, password))
    k.start(timeout=WAIT)
    k.stop()
    k.close()


def _wait_for(pred: Callable[[], object], what: str) -> None:
    done = threading.Event()
    for _ in range(int(WAIT / 0.05)):
        if pred():
            return
        done.wait(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_broker_registration_epoch_and_duplicate_id(clients: Callable[..., KafkaZkClient]) -> None:
    a, b = clients(), clients()
    epoch = a.register_broker(_info(1, 9092))
    assert epoch > 0
    assert a.register_broker(_info(1, 9092)) == epoch  # our own znode: reused
    with pytest.raises(BrokerIdInUseError, match=r"broker\.id 1 is already registered"):
        b.register_broker(_info(1, 9093))
    b.register_broker(_info(2, 9093))
    brokers = b.get_all_brokers()
    assert [x.id for x in brokers] == [1, 2]
    assert brokers[0].epoch == epoch and brokers[0].endpoints[0].port == 9092
    assert not b.deregister_broker(1)  # not b's to delete
    assert a.deregister_broker(1)
    assert b.register_broker(_info(1, 9093)) > epoch  # a new registration, a larger epoch
    assert a.get_sorted_broker_list() == [1, 2]


def test_cluster_id_first_writer_wins(clients: Callable[..., KafkaZkClient]) -> None:
    a, b = clients(), clients()
    assert a.get_cluster_id() is None
    assert a.get_or_create_cluster_id("first") == "first"
    assert b.get_or_create_cluster_id("second") == "first"


def test_partition_state_conditional_write_race(clients: Callable[..., KafkaZkClient]) -> None:
    a, b = clients(), clients()
    a.create_topic(
        "t", TopicReplicaAssignment("id", {0: [1, 2]}), {}, {0: LeaderAndIsr(1, 0, [1, 2], 1)}
    )
    seen_a = a.get_partition_state("t", 0)
    seen_b = b.get_partition_state("t", 0)
    assert seen_a is not None and seen_b is not None and seen_a.zk_version == 0
    # the leader shrinks the ISR; the controller, having read the same version, loses
    won = a.update_leader_and_isr("t", 0, LeaderAndIsr(1, 0, [1], 1), seen_a.zk_version)
    assert won.succeeded and won.version == 1
    lost = b.update_leader_and_isr("t", 0, LeaderAndIsr(2, 1, [2], 1), seen_b.zk_version)
    assert not lost.succeeded and lost.version == -1
    now = b.get_partition_state("t", 0)
    assert now is not None and now.isr == [1] and now.leader == 1 and now.zk_version == 1

    # many writers at one version: exactly one wins
    def attempt(leader: int) -> bool:
        c = a if leader % 2 else b
        return c.update_leader_and_isr("t", 0, LeaderAndIsr(leader, 2, [leader], 1), 1).succeeded

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(attempt, range(1, 17)))
    assert results.count(True) == 1
    with pytest.raises(ZkNodeExists):
        b.create_topic("t", TopicReplicaAssignment("id2", {0: [2]}), {})


def test_partition_states_in_batches(clients: Callable[..., KafkaZkClient]) -> None:
    """The controller's pipelined calls, through a window of 3 requests in
    flight: per-partition answers, in order, and the same fencing as one at a
    time."""
    zk, other = clients(max_in_flight_requests=3), clients()
    parts = 40
    zk.create_topic("t", TopicReplicaAssignment("id", {p: [1, 2] for p in range(parts)}), {})
    _, epoch_version = zk.register_controller_and_increment_epoch(1)
    # One state is there already (an earlier controller's): not created again.
    other.create_partition_state("t", 7, LeaderAndIsr(2, 3, [2], 1))
    created = zk.create_partition_states(
        [("t", p, LeaderAndIsr(1 + p % 2, 0, [1, 2], 1)) for p in range(parts)]
    )
    assert created == [p != 7 for p in range(parts)]

    states = zk.get_partition_states([("t", p) for p in range(parts)] + [("gone", 0)])
    assert states[-1] is None
    assert [(s.leader, s.leader_epoch, s.zk_version) for s in states[:-1] if s] == [
        (2, 3, 0) if p == 7 else (1 + p % 2, 0, 0) for p in range(parts)
    ]

    # A leader changes partition 5's ISR first: that write loses, the rest win.
    assert other.update_leader_and_isr("t", 5, LeaderAndIsr(2, 0, [2], 1), 0).succeeded
    writes = [("t", p, LeaderAndIsr(2, 1, [2], 1), 0) for p in range(parts) if p != 7]
    results = zk.update_leader_and_isrs(writes, controller_epoch_zk_version=epoch_version)
    assert [r.succeeded for r in results] == [p != 5 for p in range(parts) if p != 7]
    assert {r.version for r in results if r.succeeded} == {1}
    after = zk.get_partition_states([("t", p) for p in range(parts)])
    assert [s.leader_epoch for s in after if s] == [
        0 if p == 5 else 3 if p == 7 else 1 for p in range(parts)
    ]

    # Another controller takes the office: every write of the old one is refused.
    zk.delete_controller()
    other.register_controller_and_increment_epoch(2)
    with pytest.raises(ControllerMovedError):
        zk.update_leader_and_isrs(
            [("t", 0, LeaderAndIsr(1, 2, [1], 1), 1)], controller_epoch_zk_version=epoch_version
        )
    assert zk.get_partition_state("t", 0) == after[0]


def test_controller_election_between_two_clients(clients: Callable[..., KafkaZkClient]) -> None:
    a, b = clients(), clients()
    epoch_a, version_a = a.register_controller_and_increment_epoch(1)
    assert epoch_a == 1
    with pytest.raises(ControllerMovedError, match="broker 1 is the controller"):
        b.register_controller_and_increment_epoch(2)
    assert b.get_controller_id() == 1
    assert b.get_controller_epoch() == (1, version_a)

    loop = asyncio.new_event_loop()
    try:
        events: list[tuple[bytes | None, int, bool]] = []
        loop_thread: list[int] = []

        def on_controller(data: bytes | None, version: int) -> None:
            events.append((data, version, threading.get_ident() == loop_thread[0]))

        async def follow() -> None:
            loop_thread.append(threading.get_ident())
            stop = b.watch_data("/controller", on_controller, loop)
            while not any(d is None for d, _, _ in events):
                await asyncio.sleep(0.02)
            stop()

        async def scenario() -> None:
            task = asyncio.ensure_future(follow())
            while not events:
                await asyncio.sleep(0.02)
            a.delete_controller()  # the controller resigns (or its session dies)
            await asyncio.wait_for(task, WAIT)

        loop.run_until_complete(scenario())
    finally:
        loop.close()
    assert events[0][0] is not None and b'"brokerid":1' in events[0][0]
    assert events[-1][:2] == (None, -1)
    assert all(on_loop for _, _, on_loop in events)  # delivered on the event loop thread

    epoch_b, version_b = b.register_controller_and_increment_epoch(2)
    assert (epoch_b, b.get_controller_id()) == (2, 2)
    # the old controller is fenced: its writes carry the old epoch's znode version
    a.create_topic("f", TopicReplicaAssignment("id", {0: [1]}), {}, {0: LeaderAndIsr(1, 0, [1], 1)})
    with pytest.raises(ControllerMovedError):
        a.update_leader_and_isr(
            "f", 0, LeaderAndIsr(1, 1, [1], 1), 0, controller_epoch_zk_version=version_a
        )
    ok = b.update_leader_and_isr(
        "f", 0, LeaderAndIsr(2, 1, [2], 2), 0, controller_epoch_zk_version=version_b
    )
    assert ok.succeeded


def test_session_expiry_reregisters_with_a_new_epoch(
    pylog_zookeeper: ZooKeeperServer, chroot: str, clients: Callable[..., KafkaZkClient]
) -> None:
    zk = clients(session_timeout_ms=2000)
    observer = clients()
    config = KafkaConfig.from_props(
        {
            "broker.id": 5,
            "listeners": "PLAINTEXT://127.0.0.1:9099",
            "broker.rack": "r2",
            "zookeeper.connect": chroot,
        }
    )
    health = KafkaHealthcheck(zk, config)
    first = health.startup()
    info = observer.get_broker(5)
    assert info is not None and info.epoch == first and info.rack == "r2"
    old_session = zk.session_id
    _expire(pylog_zookeeper, zk)

    def reregistered() -> bool:
        now = observer.get_broker(5)
        return now is not None and now.epoch > first

    _wait_for(reregistered, "the broker to register again")
    assert zk.session_id != old_session
    assert health.broker_epoch == observer.get_broker(5).epoch  # type: ignore[union-attr]
    health.shutdown()
    assert observer.get_broker(5) is None


def test_notifications_and_producer_id_blocks(clients: Callable[..., KafkaZkClient]) -> None:
    a, b = clients(), clients()
    first = a.create_isr_change_notification([("t", 0)])
    second = b.create_isr_change_notification([("t", 1), ("u", 0)])
    assert a.get_isr_change_notifications() == [first, second]
    assert a.get_isr_change_notification(second) == [("t", 1), ("u", 0)]
    a.delete_isr_change_notifications([first, second])
    assert a.get_isr_change_notifications() == []

    assert a.create_delete_topic_marker("gone")
    assert not b.create_delete_topic_marker("gone")
    assert b.get_delete_topic_markers() == ["gone"] and b.is_topic_marked_for_deletion("gone")
    b.delete_delete_topic_marker("gone")
    assert a.get_delete_topic_markers() == []

    change = a.set_entity_config("topics", "t", {"retention.ms": "5"})
    assert b.get_config_change_notifications() == [change]
    assert b.get_config_change_notification(change) == ("topics", "t")
    assert b.get_entity_config("topics", "t") == {"retention.ms": "5"}

    # producer-id blocks from two brokers at once never overlap
    def allocate(i: int) -> tuple[int, int]:
        block = (a if i % 2 else b).allocate_producer_id_block(i % 2, 100)
        return block.first, block.last

    with ThreadPoolExecutor(6) as pool:
        blocks = sorted(pool.map(allocate, range(24)))
    assert blocks == [(i * 100, i * 100 + 99) for i in range(24)]


def test_zk_store_follows_another_brokers_changes(clients: Callable[..., KafkaZkClient]) -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        one = await asyncio.to_thread(ZkMetadataStore, clients(), 1, loop=loop)
        two = await asyncio.to_thread(ZkMetadataStore, clients(), 2, loop=loop)
        one.start_watching()
        two.start_watching()
        assert one.cluster_id == two.cluster_id
        heard: list[tuple[str, str, bool]] = []
        on_loop = threading.get_ident()
        two.add_listener(
            lambda e: heard.append((e.kind, e.topic.name, threading.get_ident() == on_loop))
        )
        mine: list[MetadataEvent] = []
        one.add_listener(mine.append)

        async def until(pred: Callable[[], bool]) -> None:
            deadline = loop.time() + WAIT
            while not pred():
                assert loop.time() < deadline, "timed out"
                await asyncio.sleep(0.02)

        # a change made in a thread: the listener runs on the loop before the await returns
        meta = await asyncio.to_thread(one.create_topic, "orders", 3, 1, {"retention.ms": "60000"})
        assert [e.kind for e in mine] == ["create"]
        with pytest.raises(TopicAlreadyExistsError):
            one.create_topic("orders", 1)
        with pytest.raises(InvalidReplicationFactorError, match="controller"):
            one.create_topic("rf3", 1, 3)
        await until(lambda: ("create", "orders", True) in heard)
        seen = two.topic("orders")
        assert seen is not None and seen.topic_id == meta.topic_id and seen.partitions == 3
        assert seen.configs == {"retention.ms": "60000"}
        assert two.topic_by_id(meta.topic_id) == seen

        await asyncio.to_thread(one.alter_topic_config, "orders", {"retention.ms": "1000"})
        await until(lambda: ("config", "orders", True) in heard)
        assert two.topic("orders").configs == {"retention.ms": "1000"}  # type: ignore[union-attr]

        # brokers altering different keys at once: each merges into what ZooKeeper has
        await asyncio.gather(
            *(
                asyncio.to_thread(store.alter_topic_config, "orders", {key: "1"})
                for store, key in [(one, "a.1"), (two, "b.2"), (one, "c.3"), (two, "d.4")]
            )
        )
        want = {"retention.ms": "1000", "a.1": "1", "b.2": "1", "c.3": "1", "d.4": "1"}
        assert one.zk.get_entity_config("topics", "orders") == want
        await until(lambda: one.topic("orders").configs == two.topic("orders").configs == want)  # type: ignore[union-attr]

        grown = await asyncio.to_thread(one.add_partitions, "orders", 5)
        assert grown.partitions == 5
        await until(lambda: ("partitions", "orders", True) in heard)
        assert two.topic("orders").partitions == 5  # type: ignore[union-attr]
        assert one.zk.get_partition_state("orders", 4) == LeaderAndIsr(1, 0, [1], 0, zk_version=0)

        assert await asyncio.to_thread(one.reserve_producer_id_block, 10) == 0
        assert await asyncio.to_thread(two.reserve_producer_id_block, 10) == 10

        await asyncio.to_thread(one.delete_topic, "orders")
        await until(lambda: ("delete", "orders", True) in heard)
        assert two.topic("orders") is None and one.topics() == []

        # two brokers create one topic at once: one wins, the other is told it exists
        async def create(store: ZkMetadataStore) -> str:
            try:
                await asyncio.to_thread(store.create_topic, "race", 2)
                return "created"
            except TopicAlreadyExistsError:
                return "exists"

        assert sorted(await asyncio.gather(create(one), create(two))) == ["created", "exists"]
        await until(lambda: one.topic("race") is not None and two.topic("race") is not None)
        assert one.topic("race") == two.topic("race")
        one.close()
        two.close()

    asyncio.run(scenario())


def test_zk_store_reloads_a_topic_before_its_watch_fires(
    clients: Callable[..., KafkaZkClient],
) -> None:
    """A LeaderAndIsr can name a topic (or partition) this broker's watches
    have not reported yet: reload_topic reads it from ZooKeeper there and
    then, so the replica is made under the topic's real id instead of the
    broker creating the topic itself."""
    one = ZkMetadataStore(clients(), 1)
    two = ZkMetadataStore(clients(), 2)  # not watching: every change is news to it
    heard: list[MetadataEvent] = []
    two.add_listener(heard.append)
    created = one.create_topic("late", 2, 1, {"min.insync.replicas": "2"})
    assert two.topic("late") is None
    seen = two.reload_topic("late")
    assert seen is not None and seen.topic_id == created.topic_id and seen.partitions == 2
    assert seen.configs == {"min.insync.replicas": "2"}
    assert two.topic("late") == seen and two.topic_by_id(created.topic_id) == seen
    assert [(e.kind, e.topic.name) for e in heard] == [("create", "late")]
    assert two.reload_topic("late") == seen and len(heard) == 1  # told once
    one.add_partitions("late", 4)
    grown = two.reload_topic("late")
    assert grown is not None and grown.partitions == 4
    assert two.reload_topic("never-created") is None
    one.close()
    two.close()


def test_zk_store_purges_config_changes_once_expired(
    clients: Callable[..., KafkaZkClient],
) -> None:
    """Every broker processing a change deletes notifications older than the
    expiration (15 minutes by default; 1 s here), so /config/changes does not
    grow forever; the newest stays until it too is old."""

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        one = await asyncio.to_thread(ZkMetadataStore, clients(), 1, loop=loop)
        two = await asyncio.to_thread(
            ZkMetadataStore, clients(), 2, loop=loop, change_expiration_ms=1000
        )
        one.start_watching()
        two.start_watching()
        await asyncio.to_thread(one.create_topic, "purged", 1, 1)
        await asyncio.to_thread(one.alter_topic_config, "purged", {"retention.ms": "1"})
        first = one.zk.get_config_change_notifications()
        assert len(first) == 1
        await asyncio.sleep(1.5)
        await asyncio.to_thread(one.alter_topic_config, "purged", {"retention.ms": "2"})
        deadline = loop.time() + WAIT
        while one.zk.get_config_change_notifications() != [] and (
            one.zk.get_config_change_notifications()[0] == first[0]
        ):
            assert loop.time() < deadline, "the old notification was never purged"
            await asyncio.sleep(0.05)
        left = one.zk.get_config_change_notifications()
        assert first[0] not in left and len(left) == 1
        assert two.topic("purged").configs == {"retention.ms": "2"}  # type: ignore[union-attr]
        one.close()
        two.close()

    asyncio.run(scenario())


def test_dynamic_config_manager_hands_each_change_to_its_entity_types_handler(
    clients: Callable[..., KafkaZkClient],
) -> None:
    """Kafka's DynamicConfigManager: each new /config/changes notification, in
    sequence order and once, goes to its entity type's handler with the
    entity's whole config as ZooKeeper has it now; a type without a handler
    (broker configs, not dynamic yet) is skipped; notifications present at
    start-up, and a change marked as this broker's own, are not processed."""
    writer, reader = clients(), clients()
    writer.set_entity_config("topics", "before", {"retention.ms": "1"})  # before start-up
    seen: list[tuple[str, str, dict[str, str]]] = []
    got_all = threading.Event()

    def handler(entity_type: str) -> Callable[[str, Mapping[str, str]], None]:
        def handle(name: str, configs: Mapping[str, str]) -> None:
            seen.append((entity_type, name, dict(configs)))
            if name == "last":
                got_all.set()

        return handle

    executor = ThreadPoolExecutor(1)
    lock = threading.RLock()  # held by the store while it writes and marks its own change
    manager = DynamicConfigManager(
        reader,
        {t: handler(t) for t in (ConfigType.TOPIC, ConfigType.USER, ConfigType.CLIENT)},
        executor=executor,
        lock=lock,
    )
    manager.skip_existing()
    manager.start()
    try:
        writer.set_entity_config("topics", "orders", {"cleanup.policy": "compact"})
        writer.set_entity_config("brokers", "1", {"log.cleaner.threads": "2"})  # no handler
        with lock:
            own = writer.set_entity_config("topics", "mine", {"retention.ms": "5"})
            manager.mark_processed(own)
        writer.set_entity_config("users", "alice/clients/etl", {"producer_byte_rate": "10"})
        writer.set_entity_config("clients", "last", {"request_percentage": "50"})
        assert got_all.wait(WAIT), seen
    finally:
        manager.close()
        executor.shutdown(wait=True)
    assert seen == [
        ("topics", "orders", {"cleanup.policy": "compact"}),
        ("users", "alice/clients/etl", {"producer_byte_rate": "10"}),
        ("clients", "last", {"request_percentage": "50"}),
    ]


def test_missing_zookeeper_fails_with_the_way_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pylog.testing import ZooKeeperUnavailable

    monkeypatch.setenv("PYLOG_ZOOKEEPER_CLASSPATH", "/nonexistent/zookeeper.jar")
    with pytest.raises(ZooKeeperUnavailable, match="make tools"):
        ZooKeeperServer().start()


def test_zk_store_keeps_client_quotas_in_kafkas_znodes(
    clients: Callable[..., KafkaZkClient],
) -> None:
    """Quotas are /config/users/<u>[/clients/<c>] and /config/clients/<c> as
    Kafka writes them (a user's SCRAM credentials kept beside); another
    broker follows through /config/changes, and a quota written by someone
    else (Kafka's `kafka-configs --zookeeper`) is read the same way."""
    from pylog.metadata.client_quota_entity import ClientQuotaEntity
    from pylog.security.scram_credential import ScramCredential
    from pylog.security.scram_mechanism import ScramMechanism

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        one = await asyncio.to_thread(ZkMetadataStore, clients(), 1, loop=loop)
        two = await asyncio.to_thread(ZkMetadataStore, clients(), 2, loop=loop)
        one.start_watching()
        two.start_watching()

        async def until(pred: Callable[[], bool]) -> None:
            deadline = loop.time() + WAIT
            while not pred():
                assert loop.time() < deadline, "timed out"
                await asyncio.sleep(0.02)

        sha512 = ScramMechanism.by_name("SCRAM-SHA-512")
        assert sha512 is not None
        cred = ScramCredential(b"salt", b"s" * 64, b"k" * 64, 4096)
        await asyncio.to_thread(one.alter_user_scram_credentials, {"alice": {sha512: cred}})
        alice = ClientQuotaEntity.of("alice")
        alice_etl = ClientQuotaEntity.of("alice", "etl app")
        default_client = ClientQuotaEntity.of(client_id=None)
        await asyncio.to_thread(
            one.alter_client_quotas,
            {
                alice: {"producer_byte_rate": 1024.0, "request_percentage": 50.0},
                alice_etl: {"consumer_byte_rate": 2048.0},
                default_client: {"producer_byte_rate": 512.0},
            },
        )
        zk = one.zk
        assert zk.get_entity_config("users", "alice") == {
            "SCRAM-SHA-512": cred.to_string(),
            "producer_byte_rate": "1024",
            "request_percentage": "50.0",
        }
        assert zk.get_entity_config("users", "alice/clients/etl%20app") == {
            "consumer_byte_rate": "2048"
        }
        assert zk.get_entity_config("clients", "<default>") == {"producer_byte_rate": "512"}
        want = {
            alice: {"producer_byte_rate": 1024.0, "request_percentage": 50.0},
            alice_etl: {"consumer_byte_rate": 2048.0},
            default_client: {"producer_byte_rate": 512.0},
        }
        assert one.client_quotas == want
        await until(lambda: two.client_quotas == want)
        assert two.scram_credentials.credentials("alice") == {sha512: cred}

        # removing a quota keeps the credentials; Kafka's own writes are read too
        await asyncio.to_thread(one.alter_client_quotas, {alice: {"producer_byte_rate": None}})
        await asyncio.to_thread(
            zk.set_entity_config, "users", "<default>/clients/<default>",
            {"consumer_byte_rate": "4096"},
        )  # fmt: skip
        want[alice] = {"request_percentage": 50.0}
        want[ClientQuotaEntity.of(None, None)] = {"consumer_byte_rate": 4096.0}
        await until(lambda: two.client_quotas == want and one.client_quotas == want)
        assert two.scram_credentials.credentials("alice") == {sha512: cred}
        three = await asyncio.to_thread(ZkMetadataStore, clients(), 3, loop=loop)
        assert three.client_quotas == want  # loaded at start-up
        for store in (one, two, three):
            store.close()

    asyncio.run(scenario())


def test_an_election_whose_answer_was_lost_takes_the_office(
    clients: Callable[..., KafkaZkClient],
) -> None:
    # The election's transaction reached ZooKeeper but its answer was lost (the
    # connection dropped, as a ZooKeeper restart during a broker's start did in
    # a make test run): /controller is this session's. The election tried again
    # must take the office, not take the znode for another controller's and
    # leave the cluster with none.
    zk = clients()
    epoch, _ = zk.register_controller_and_increment_epoch(1)

    async def main() -> None:
        controller = KafkaController(zk, 1, inter_broker_listener="PLAINTEXT")
        await controller.startup()  # the /controller watch runs an election
        try:
            deadline = asyncio.get_running_loop().time() + 10
            while not controller.is_active:
                assert asyncio.get_running_loop().time() < deadline, "never took the office"
                await asyncio.sleep(0.05)
            assert controller.context.epoch == epoch
            assert zk.get_controller_epoch() == (epoch, controller.context.epoch_zk_version)
        finally:
            await controller.shutdown()

    asyncio.run(main())


def test_a_controller_event_cut_short_by_zookeeper_runs_again_when_it_is_back(
    pylog_zookeeper: ZooKeeperServer, caplog: pytest.LogCaptureFixture
) -> None:
    # A ZooKeeper request in flight when the connection is lost (held by a
    # fault proxy until the client gives up on it; the session outlives the
    # cut) fails with the retriable ZkConnectionError. The controller event
    # that made it is logged in one line, without a traceback, and runs again
    # once the client is connected: an ISR change notification it was reading
    # would otherwise wait until the next one.
    faults = NetworkFaults()
    host, port = pylog_zookeeper.connect.rsplit(":", 1)
    proxy = faults.proxy(ZOOKEEPER, "controller", (host, int(port)))
    zk = KafkaZkClient(f"{proxy.address}/cut-{uuid.uuid4().hex[:8]}", session_timeout_ms=20_000)
    attempts: list[str] = []

    async def probe() -> None:
        if not attempts:
            faults.cut("controller", ZOOKEEPER)
        try:
            await zk.run(zk.get_isr_change_notifications)
        except ZkConnectionError:
            attempts.append("lost")
            faults.heal()
            raise
        attempts.append("read")

    async def main() -> None:
        controller = KafkaController(zk, 1, inter_broker_listener="PLAINTEXT")
        await controller.startup()
        try:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + WAIT
            while not controller.is_active:
                assert loop.time() < deadline, "never took the office"
                await asyncio.sleep(0.05)
            controller.put_active("Probe", probe)
            while "read" not in attempts:
                assert loop.time() < deadline, f"the probe never ran again: {attempts}"
                await asyncio.sleep(0.05)
        finally:
            await controller.shutdown()

    try:
        zk.start()
        zk.create_top_level_paths()
        with caplog.at_level("WARNING", logger="pylog.controller"):
            asyncio.run(main())
    finally:
        faults.heal()
        zk.close()
        faults.close()
    assert attempts == ["lost", "read"]
    stopped = [r for r in caplog.records if "controller event Probe stopped" in r.getMessage()]
    assert stopped and all(r.exc_info is None for r in stopped)
