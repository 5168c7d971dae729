"""Replication inside the ReplicaManager and Partition, without processes:
the controller's requests (fencing, roles), the leader's view of its
followers (LEO, HW, ISR shrink and expand through the AlterIsrManager,
acks=-1 and min.insync.replicas), the follower's truncation decisions, and
producer state on followers."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

from conftest import build_batch

from pylog.common.topic_partition import TopicPartition
from pylog.errors import ErrorCode
from pylog.log import LogManager
from pylog.metadata import JsonMetadataStore
from pylog.metadata.metadata_cache import (
    BrokerEndpoint,
    MetadataBroker,
    MetadataCache,
    PartitionInfo,
)
from pylog.network.metrics import MetricsRegistry
from pylog.server.alter_isr_manager import InProcessAlterIsrManager, LeaderAndIsr
from pylog.server.delayed_fetch import FetchParams, FetchPartitionRequest
from pylog.server.partition import PartitionState
from pylog.server.replica_fetcher_blocking_send import BrokerEndPoint
from pylog.server.replica_fetcher_manager import ReplicaFetcherManager, java_string_hash
from pylog.server.replica_fetcher_thread import (
    FetchState,
    PartitionFetchState,
    ReplicaFetcherConfig,
    ReplicaFetcherThread,
)
from pylog.server.replica_manager import ReplicaManager, StopReplicaState

TP = TopicPartition("t", 0)
TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"


def make(
    path: str, broker_id: int, lag_ms: int = 30_000, **kw: Any
) -> tuple[LogManager, ReplicaManager]:
    """A ReplicaManager whose ISR-expiration task never fires during a test:
    tests call maybe_shrink_isr themselves."""
    lm = LogManager({"log.dirs": path})
    store = JsonMetadataStore(path)
    rm = ReplicaManager(lm, store, broker_id=broker_id, replica_lag_time_max_ms=lag_ms,
                        isr_expiration_interval_ms=3_600_000, **kw)  # fmt: skip
    rm.startup()
    return lm, rm


def close(lm: LogManager, rm: ReplicaManager) -> None:
    rm.shutdown()
    lm.shutdown()


def state(leader: int, epoch: int, isr: list[int], pe: int = 0) -> PartitionState:
    return PartitionState(
        controller_epoch=1,
        leader=leader,
        leader_epoch=epoch,
        isr=tuple(isr),
        partition_epoch=pe,
        replicas=(0, 1, 2),
    )


def lead(rm: ReplicaManager, epoch: int = 0, isr: list[int] | None = None, pe: int = 0) -> int:
    r = rm.become_leader_or_follower(
        controller_id=9,
        controller_epoch=1,
        broker_epoch=-1,
        partition_states={TP: state(rm.broker_id, epoch, isr or [0, 1, 2], pe)},
        topic_ids={"t": TOPIC_ID},
    )
    assert r.error_code == 0 and r.partition_errors is not None
    return r.partition_errors[TP]


def follower_fetch(rm: ReplicaManager, replica: int, offset: int) -> int:
    out = rm.read_from_local_log(
        FetchParams(replica_id=replica), [FetchPartitionRequest(TP, offset, 1 << 20)]
    )
    return out[0].error_code


def test_controller_made_partitions_take_the_topic_configs(tmp_path: Any) -> None:
    """On a cluster the topic comes from the metadata store and the partition
    from the controller's LeaderAndIsr: the log still gets the topic's overrides."""
    lm, rm = make(str(tmp_path), 0, controller_managed=True)
    overrides = {"max.message.bytes": "200", "min.insync.replicas": "2"}
    rm.metadata_store.create_topic("t", 1, 1, overrides, topic_id=TOPIC_ID)
    assert rm.partition(TP) is None  # the controller's to make
    assert lead(rm) == 0
    p = rm.partition(TP)
    assert p is not None
    assert (p.log.config.max_message_bytes, p.min_insync_replicas) == (200, 2)
    close(lm, rm)


def test_leader_hw_follows_the_isr_and_completes_acks_all(tmp_path: Any) -> None:
    lm, rm = make(str(tmp_path), 0)

    async def main() -> None:
        assert lead(rm) == 0
        p = rm.partition(TP)
        assert p is not None and p.is_leader and p.in_sync_replicas == [0, 1, 2]
        produce = asyncio.ensure_future(
            rm.append_records(10_000, -1, {TP: build_batch([b"a", b"b", b"c"])})
        )
        await asyncio.sleep(0.01)
        assert not produce.done() and p.high_watermark == 0
        assert follower_fetch(rm, 1, 3) == 0
        assert p.high_watermark == 0 and not produce.done()  # broker 2 has not fetched
        assert follower_fetch(rm, 2, 2) == 0
        assert p.high_watermark == 2
        assert follower_fetch(rm, 2, 3) == 0
        assert p.high_watermark == 3
        res = await asyncio.wait_for(produce, 5)
        assert res[TP].error_code == 0 and res[TP].base_offset == 0

    asyncio.run(main())
    close(lm, rm)


def test_isr_shrinks_after_lag_and_expands_when_caught_up(tmp_path: Any) -> None:
    alter = InProcessAlterIsrManager()
    lm, rm = make(str(tmp_path), 0, alter_isr_manager=alter, lag_ms=50)
    metrics = MetricsRegistry()
    rm.register_metrics(metrics)

    async def main() -> None:
        lead(rm, isr=[0, 1, 2])
        p = rm.partition(TP)
        assert p is not None
        await rm.append_records(1000, 1, {TP: build_batch([b"a"])})
        assert follower_fetch(rm, 1, 1) == 0
        await asyncio.sleep(0.1)
        assert follower_fetch(rm, 1, 1) == 0  # broker 1 keeps up, broker 2 is silent
        rm.maybe_shrink_isr()
        assert p.in_sync_replicas == [0, 1]
        assert p.partition_epoch == 1, alter.changes
        assert alter.changes == [(TP, LeaderAndIsr(0, 0, (0, 1), 1))]
        assert p.high_watermark == 1  # the HW no longer waits for broker 2
        assert rm.isr_shrinks == 1 and p.is_under_replicated
        text = metrics.render()
        assert "kafka_server_replicamanager_underreplicatedpartitions 1" in text
        assert "kafka_server_replicamanager_isrshrinks_total 1" in text
        # Broker 2 comes back behind the HW: not yet in sync.
        assert follower_fetch(rm, 2, 0) == 0
        assert p.in_sync_replicas == [0, 1]
        assert follower_fetch(rm, 2, 1) == 0
        assert p.in_sync_replicas == [0, 1, 2] and p.partition_epoch == 2
        assert rm.isr_expands == 1 and not p.is_under_replicated
        assert "kafka_server_replicamanager_isrexpands_total 1" in metrics.render()

    asyncio.run(main())
    close(lm, rm)


def test_a_diverging_follower_fetch_moves_neither_its_position_nor_hw_nor_isr(
    tmp_path: Any,
) -> None:
    """A follower fetch answered with a diverging epoch (KIP-320) does not
    record the fetch offset as the follower's LEO: that offset is in a log the
    leader does not share, so the HW must not reach it and the ISR must not
    take the follower in (Kafka's Partition.fetchRecords)."""
    alter = InProcessAlterIsrManager()
    lm, rm = make(str(tmp_path), 0, alter_isr_manager=alter)

    def fetch(replica: int, offset: int, last_epoch: int) -> tuple[int, tuple[int, int] | None]:
        req = FetchPartitionRequest(TP, offset, 1 << 20, last_fetched_epoch=last_epoch)
        out = rm.read_from_local_log(FetchParams(replica_id=replica), [req])[0]
        return out.error_code, out.diverging_epoch

    async def main() -> None:
        # Epoch 0 wrote offsets 0-2, epoch 2 (this leader, again) offsets 3-5.
        lead(rm, epoch=0, isr=[0, 1])
        await rm.append_records(1000, 1, {TP: build_batch([b"a", b"b", b"c"])})
        lead(rm, epoch=2, isr=[0, 1], pe=1)
        await rm.append_records(1000, 1, {TP: build_batch([b"d", b"e", b"f"])})
        p = rm.partition(TP)
        assert p is not None and p.log_end_offset == 6
        assert fetch(1, 3, 0) == (0, None)  # broker 1 has all of epoch 0
        follower = p.replica(1)
        assert follower is not None and follower.log_end_offset == 3
        assert p.high_watermark == 3
        # Broker 1 then claims offsets 3-4 of an epoch 1 the leader never had
        # (a deposed leader's): told to truncate to the end of epoch 0.
        assert fetch(1, 5, 1) == (0, (0, 3))
        assert follower.log_end_offset == 3 and p.high_watermark == 3
        # Broker 2, out of the ISR, claims to be past the leader's end on the
        # wrong epoch: it is not taken into the ISR.
        assert fetch(2, 6, 1) == (0, (0, 3))
        assert p.in_sync_replicas == [0, 1] and alter.changes == []
        # Once truncated and fetching on the leader's epochs it catches up.
        assert fetch(1, 6, 2) == (0, None)
        assert follower.log_end_offset == 6 and p.high_watermark == 6

    asyncio.run(main())
    close(lm, rm)


def test_isr_change_refused_by_the_store_is_not_applied(tmp_path: Any) -> None:
    alter = InProcessAlterIsrManager()
    lm, rm = make(str(tmp_path), 0, alter_isr_manager=alter, lag_ms=10)

    async def main() -> None:
        lead(rm, isr=[0, 1, 2])
        p = rm.partition(TP)
        assert p is not None
        # The controller moved the partition state on meanwhile (a newer version).
        alter.seed(TP, LeaderAndIsr(0, 0, (0, 1, 2), 7))
        await asyncio.sleep(0.03)
        rm.maybe_shrink_isr()
        assert p.in_sync_replicas == [0, 1, 2] and alter.changes == []

    asyncio.run(main())
    close(lm, rm)


def test_min_insync_replicas(tmp_path: Any) -> None:
    alter = InProcessAlterIsrManager()
    lm, rm = make(str(tmp_path), 0, alter_isr_manager=alter, lag_ms=10)

    async def main() -> None:
        lead(rm, isr=[0, 1])
        p = rm.partition(TP)
        assert p is not None
        p._min_isr_override = 2
        produce = asyncio.ensure_future(rm.append_records(10_000, -1, {TP: build_batch([b"a"])}))
        await asyncio.sleep(0.03)
        rm.maybe_shrink_isr()  # broker 1 never fetched: the ISR drops to [0]
        res = await asyncio.wait_for(produce, 5)
        assert res[TP].error_code == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        assert p.is_under_min_isr
        res = await rm.append_records(1000, -1, {TP: build_batch([b"b"])})
        assert res[TP].error_code == ErrorCode.NOT_ENOUGH_REPLICAS
        res = await rm.append_records(1000, 1, {TP: build_batch([b"c"])})
        assert res[TP].error_code == 0

    asyncio.run(main())
    close(lm, rm)


def test_controller_fencing(tmp_path: Any) -> None:
    epoch = [-1]
    lm, rm = make(str(tmp_path), 0, broker_epoch=lambda: epoch[0])

    async def main() -> None:
        assert lead(rm, epoch=3) == 0
        # An older leader epoch, and the same one again: STALE_CONTROLLER_EPOCH.
        assert lead(rm, epoch=2) == ErrorCode.STALE_CONTROLLER_EPOCH
        assert lead(rm, epoch=3) == ErrorCode.STALE_CONTROLLER_EPOCH
        # The same leader epoch with a newer partition epoch: an ISR update.
        assert lead(rm, epoch=3, isr=[0, 1], pe=1) == 0
        assert rm.partition(TP).in_sync_replicas == [0, 1]  # type: ignore[union-attr]
        r = rm.become_leader_or_follower(
            controller_id=9,
            controller_epoch=0,
            broker_epoch=-1,
            partition_states={TP: state(0, 9, [0])},
        )
        assert r.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
        epoch[0] = 100  # registered: older broker epochs are refused, -1 is not checked
        r = rm.become_leader_or_follower(
            controller_id=9,
            controller_epoch=1,
            broker_epoch=99,
            partition_states={TP: state(0, 9, [0])},
        )
        assert r.error_code == ErrorCode.STALE_BROKER_EPOCH
        assert rm.partition(TP).leader_epoch == 3  # type: ignore[union-attr]
        update = rm.maybe_update_metadata_cache(
            controller_id=9, controller_epoch=1, broker_epoch=99, brokers=[], partitions=[]
        )
        assert update.error_code == ErrorCode.STALE_BROKER_EPOCH
        # Not a replica: UNKNOWN_TOPIC_OR_PARTITION; another topic id: INCONSISTENT_TOPIC_ID.
        r = rm.become_leader_or_follower(
            controller_id=9,
            controller_epoch=1,
            broker_epoch=100,
            partition_states={
                TopicPartition("u", 0): PartitionState(1, 1, 0, (1,), 0, (1, 2)),
                TP: state(0, 4, [0]),
            },
            topic_ids={"t": "AAAAAAAAAAAAAAAAAAAAAg"},
        )
        assert r.partition_errors == {
            TopicPartition("u", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            TP: ErrorCode.INCONSISTENT_TOPIC_ID,
        }
        # StopReplica: an older leader epoch is fenced; delete removes the log.
        r = rm.stop_replicas(
            controller_id=9,
            controller_epoch=1,
            broker_epoch=-1,
            partitions={TP: StopReplicaState(2, True)},
        )
        assert r.partition_errors == {TP: ErrorCode.FENCED_LEADER_EPOCH}
        r = rm.stop_replicas(
            controller_id=9,
            controller_epoch=1,
            broker_epoch=-1,
            partitions={TP: StopReplicaState(3, True)},
        )
        assert r.partition_errors == {TP: 0}
        assert rm.partition(TP) is None

    asyncio.run(main())
    close(lm, rm)


def test_follower_refuses_produce_and_reads(tmp_path: Any) -> None:
    lm, rm = make(str(tmp_path), 1)

    async def main() -> None:
        r = rm.become_leader_or_follower(
            controller_id=9,
            controller_epoch=1,
            broker_epoch=-1,
            partition_states={TP: state(0, 1, [0, 1, 2])},
            topic_ids={"t": TOPIC_ID},
            live_leaders={0: BrokerEndPoint(0, "127.0.0.1", 1)},
        )
        assert r.partition_errors == {TP: 0}
        p = rm.partition(TP)
        assert p is not None and not p.is_leader and p.leader_id == 0
        assert rm.metadata_store.topic("t").topic_id == TOPIC_ID  # type: ignore[union-attr]
        res = await rm.append_records(1000, 1, {TP: build_batch([b"a"])})
        assert res[TP].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        out = rm.read_from_local_log(FetchParams(), [FetchPartitionRequest(TP, 0, 1000)])
        assert out[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert rm.last_offset_for_leader_epoch(TP, -1, 0).error_code == 6
        fetcher = rm.replica_fetcher_manager.partition_fetcher(TP)
        assert fetcher is not None and fetcher.source.id == 0
        assert fetcher.states[TP].current_leader_epoch == 1
        await rm.shutdown_replica_fetchers()

    asyncio.run(main())
    close(lm, rm)


def _follower_with_epochs(tmp_path: Any) -> tuple[LogManager, ReplicaManager, ReplicaFetcherThread]:
    """Broker 1 following broker 0; its log holds epoch 0 at 0-4 and epoch 2 at
    5-9, HW 3."""
    lm, rm = make(str(tmp_path), 1)
    rm.become_leader_or_follower(
        controller_id=9,
        controller_epoch=1,
        broker_epoch=-1,
        partition_states={TP: state(0, 3, [0, 1])},
        topic_ids={"t": TOPIC_ID},
    )
    p = rm.partition(TP)
    assert p is not None
    p.append_records_to_follower(
        memoryview(build_batch([b"%d" % i for i in range(5)], partition_leader_epoch=0))
    )
    p.append_records_to_follower(
        memoryview(
            build_batch([b"%d" % i for i in range(5)], base_offset=5, partition_leader_epoch=2)
        )
    )
    p.update_follower_high_watermark(3)
    fetcher = ReplicaFetcherThread(
        "f", 0, BrokerEndPoint(0, "127.0.0.1", 1), ReplicaFetcherConfig(broker_id=1), rm
    )
    return lm, rm, fetcher


def test_truncation_by_leader_epoch_not_to_the_hw(tmp_path: Any) -> None:
    lm, rm, fetcher = _follower_with_epochs(tmp_path)
    p = rm.partition(TP)
    assert p is not None and p.high_watermark == 3 and p.log_end_offset == 10
    s = PartitionFetchState(10, 3)
    fetcher.states[TP] = s
    # The leader has epoch 2 up to 8: cut at 8, not at the HW (3).
    fetcher._apply_epoch_end(TP, p, s, 2, 8)
    assert p.log_end_offset == 8 and s.state is FetchState.FETCHING and s.fetch_offset == 8
    # The leader has all of epoch 2 and more: nothing to cut.
    s2 = PartitionFetchState(8, 3)
    fetcher.states[TP] = s2
    fetcher._apply_epoch_end(TP, p, s2, 2, 12)
    assert p.log_end_offset == 8 and s2.state is FetchState.FETCHING
    close(lm, rm)


def test_truncation_when_the_leader_lacks_our_latest_epoch(tmp_path: Any) -> None:
    lm, rm, fetcher = _follower_with_epochs(tmp_path)
    p = rm.partition(TP)
    assert p is not None
    s = PartitionFetchState(10, 3)
    fetcher.states[TP] = s
    # Asked for epoch 2, the leader answers epoch 0 ending at 7: our epoch 0 ends
    # at 5 (offsets 5-6 are our epoch 2), so the shorter copy ends at 5.
    fetcher._apply_epoch_end(TP, p, s, 0, 7)
    assert p.log_end_offset == 5 and s.state is FetchState.FETCHING and s.fetch_offset == 5
    close(lm, rm)


def test_truncation_asks_again_for_an_epoch_the_follower_lacks(tmp_path: Any) -> None:
    lm, rm, fetcher = _follower_with_epochs(tmp_path)
    p = rm.partition(TP)
    assert p is not None
    s = PartitionFetchState(10, 3)
    fetcher.states[TP] = s
    # The leader answers epoch 1, which this log never had: cut where our epoch
    # below it (0) ends, and ask again with epoch 0, now our latest.
    fetcher._apply_epoch_end(TP, p, s, 1, 8)
    assert p.log_end_offset == 5 and s.state is FetchState.TRUNCATING
    assert p.log.latest_epoch == 0
    fetcher._apply_epoch_end(TP, p, s, 0, 5)
    assert p.log_end_offset == 5 and s.state is FetchState.FETCHING and s.fetch_offset == 5
    # A leader without epochs: the HW is all there is.
    s3 = PartitionFetchState(5, 3)
    fetcher.states[TP] = s3
    fetcher._apply_epoch_end(TP, p, s3, -1, -1)
    assert p.log_end_offset == 3
    close(lm, rm)


def test_follower_rebuilds_producer_state_so_a_new_leader_dedupes(tmp_path: Any) -> None:
    lm, rm = make(str(tmp_path), 1)

    async def main() -> None:
        rm.become_leader_or_follower(
            controller_id=9,
            controller_epoch=1,
            broker_epoch=-1,
            partition_states={TP: state(0, 0, [0, 1])},
            topic_ids={"t": TOPIC_ID},
        )
        p = rm.partition(TP)
        assert p is not None
        # The batch as the old leader wrote it (epoch 0 stamped), replicated here.
        p.append_records_to_follower(
            memoryview(
                build_batch(
                    [b"a", b"b"],
                    producer_id=7,
                    producer_epoch=0,
                    base_sequence=0,
                    partition_leader_epoch=0,
                )
            )
        )
        # The producer never got its answer and retries the same batch.
        retried = bytearray(
            build_batch([b"a", b"b"], producer_id=7, producer_epoch=0, base_sequence=0)
        )
        rm.become_leader_or_follower(
            controller_id=9,
            controller_epoch=1,
            broker_epoch=-1,
            partition_states={TP: state(1, 1, [1])},
        )
        assert p.is_leader
        res = await rm.append_records(1000, 1, {TP: retried})
        assert res[TP].error_code == 0 and res[TP].base_offset == 0  # the original offsets
        assert p.log_end_offset == 2

    asyncio.run(main())
    close(lm, rm)


def test_metadata_cache_updates_and_deletes() -> None:
    cache = MetadataCache(1)
    b1 = MetadataBroker(1, (BrokerEndpoint("PLAINTEXT", "h1", 9092),), "r1")
    cache.update(
        controller_id=2,
        brokers=[b1, MetadataBroker(2, (BrokerEndpoint("PLAINTEXT", "h2", 9093),))],
        partitions=[PartitionInfo("t", 0, 1, 4, (1, 2), (1,), 3, (2,))],
        topic_ids={"t": TOPIC_ID},
    )
    assert cache.controller_id == 2 and [b.id for b in cache.alive_brokers()] == [1, 2]
    assert cache.broker_endpoint(2, "PLAINTEXT") == BrokerEndpoint("PLAINTEXT", "h2", 9093)
    assert cache.alive_broker(1).rack == "r1"  # type: ignore[union-attr]
    info = cache.partition_info("t", 0)
    assert info is not None and info.isr == (1,) and info.offline_replicas == (2,)
    assert cache.leader_of("t", 0) == 1 and cache.topic_id("t") == TOPIC_ID
    removed = cache.update(
        controller_id=2, brokers=[b1], partitions=[PartitionInfo("t", 0, -2, 5, (), ())]
    )
    assert removed == [("t", 0)] and not cache.contains_topic("t")
    assert not cache.has_broker(2)


def test_fetcher_id_spreads_partitions_like_kafka(tmp_path: Any) -> None:
    assert java_string_hash("topic") == 110546223  # "topic".hashCode() in Java
    assert java_string_hash("a\U0001f600") == 97 * 31 * 31 + 0xD83D * 31 + 0xDE00  # UTF-16 units
    lm, rm = make(str(tmp_path), 1)
    mgr = ReplicaFetcherManager(ReplicaFetcherConfig(broker_id=1, num_fetchers=3), rm)
    ids = {mgr.fetcher_id(TopicPartition("topic", i)) for i in range(6)}
    assert ids == {0, 1, 2}
    # abs(31 * hash + partition) in Java's 32-bit arithmetic: 31 * 110546223 wraps.
    assert mgr.fetcher_id(TopicPartition("topic", 0)) == abs(31 * 110546223 - (1 << 32)) % 3
    close(lm, rm)


def test_controller_managed_broker_makes_no_partition_from_its_store(tmp_path: Any) -> None:
    lm = LogManager({"log.dirs": str(tmp_path)})
    store = JsonMetadataStore(str(tmp_path))
    store.create_topic("t", 2)
    rm = ReplicaManager(lm, store, broker_id=1, controller_managed=True)
    rm.startup()
    store.create_topic("u", 1)
    # A restarted cluster broker leads nothing until a LeaderAndIsr says so.
    assert rm.partitions() == {}
    close(lm, rm)


def test_silent_follower_holding_everything_stays_in_sync(tmp_path: Any) -> None:
    lm, rm = make(str(tmp_path), 0, lag_ms=10)

    async def main() -> None:
        lead(rm, isr=[0, 1, 2])
        p = rm.partition(TP)
        assert p is not None
        await rm.append_records(1000, 1, {TP: build_batch([b"a"])})
        assert follower_fetch(rm, 1, 1) == 0 and follower_fetch(rm, 2, 0) == 0
        await asyncio.sleep(0.03)
        rm.maybe_shrink_isr()
        # Broker 1 has offset 0 (the LEO): no new data since, it stays.
        assert p.in_sync_replicas == [0, 1]

    asyncio.run(main())
    close(lm, rm)


def test_a_fetcher_that_stops_unexpectedly_starts_again(tmp_path: Any) -> None:
    """A fetcher's task ending while it should run (an exception its loop does
    not catch) would leave its partitions unfetched until a restart: it is
    started again, and fetches on."""
    lm, rm, fetcher = _follower_with_epochs(tmp_path)
    calls: list[int] = []

    class Escaped(BaseException):
        """Not an Exception: the fetcher's loop does not catch it."""

    async def work() -> bool:
        calls.append(1)
        if len(calls) == 1:
            raise Escaped("boom")
        return False

    async def main() -> None:
        fetcher._do_work = work  # type: ignore[method-assign]
        fetcher.start()
        first = fetcher._task
        for _ in range(200):
            if len(calls) >= 2:
                break
            await asyncio.sleep(0.01)
        assert len(calls) >= 2, "the fetcher was not started again"
        assert fetcher._task is not None and fetcher._task is not first
        assert not fetcher._task.done()
        await fetcher.shutdown()
        assert fetcher._task is None

    asyncio.run(main())
    close(lm, rm)


def test_becoming_leader_waits_for_a_follower_append_in_progress(tmp_path: Any) -> None:
    """A large follower append runs on a worker thread; a LeaderAndIsr making
    this broker the leader meanwhile waits for it (Kafka's leaderIsrUpdateLock),
    so the new epoch starts after the old leader's last batch, never before it."""
    import threading

    lm, rm = make(str(tmp_path), 1)
    rm.become_leader_or_follower(
        controller_id=9,
        controller_epoch=1,
        broker_epoch=-1,
        partition_states={TP: state(0, 0, [0, 1])},
        topic_ids={"t": TOPIC_ID},
    )
    p = rm.partition(TP)
    assert p is not None
    log = p.log
    entered, release = threading.Event(), threading.Event()
    real_append = log.append_as_follower

    def slow_append(records: Any) -> Any:
        entered.set()
        assert release.wait(10)
        return real_append(records)

    log.append_as_follower = slow_append  # type: ignore[method-assign]
    batch = memoryview(build_batch([b"a", b"b", b"c"], partition_leader_epoch=0))
    appender = threading.Thread(target=p.append_records_to_follower, args=(batch,))
    appender.start()
    assert entered.wait(10)
    led = threading.Event()

    def lead_now() -> None:
        rm.become_leader_or_follower(
            controller_id=9,
            controller_epoch=1,
            broker_epoch=-1,
            partition_states={TP: state(1, 1, [1])},
        )
        led.set()

    leader = threading.Thread(target=lead_now)
    leader.start()
    assert not led.wait(0.3), "became leader in the middle of a follower append"
    release.set()
    appender.join(10)
    leader.join(10)
    assert led.is_set() and p.is_leader
    assert p.log_end_offset == 3
    assert p.leader_epoch_start_offset == 3  # the new epoch after the old leader's batch
    cache = log.leader_epoch_cache
    assert cache is not None and cache.latest_epoch == 1
    close(lm, rm)


class HeldAlterIsrManager:
    """An AlterIsrManager whose store has taken each proposal but not yet
    answered: what a leader sees between its ZooKeeper write landing and the
    answer reaching it."""

    def __init__(self) -> None:
        self.held: list[tuple[LeaderAndIsr, Any]] = []

    def submit(self, tp: TopicPartition, proposed: LeaderAndIsr, ce: int, callback: Any) -> None:
        self.held.append((proposed, callback))

    def answer(self) -> None:
        proposed, callback = self.held.pop(0)
        callback(
            LeaderAndIsr(
                proposed.leader, proposed.leader_epoch, proposed.isr, proposed.partition_epoch + 1
            )
        )


def test_the_hw_waits_for_a_replica_being_added_to_the_isr(tmp_path: Any) -> None:
    """While an ISR expansion is being written, the store may already name the
    new replica (the controller elects from the store), so the HW counts it
    before the leader has heard back — Kafka's maximal ISR (KIP-497). Without
    it, records were acknowledged on the old ISR alone, and a leader lost in
    that window could be replaced by the new replica without them."""
    alter = HeldAlterIsrManager()
    lm, rm = make(str(tmp_path), 0, alter_isr_manager=alter)

    async def main() -> None:
        lead(rm, isr=[0, 1])
        p = rm.partition(TP)
        assert p is not None
        await rm.append_records(1000, 1, {TP: build_batch([b"a", b"b"])})
        assert follower_fetch(rm, 1, 2) == 0 and p.high_watermark == 2
        assert follower_fetch(rm, 2, 2) == 0  # caught up: the expansion is proposed
        assert [h[0].isr for h in alter.held] == [(0, 1, 2)]
        assert p.in_sync_replicas == [0, 1]  # not applied until written
        await rm.append_records(1000, 1, {TP: build_batch([b"c", b"d"])})
        assert follower_fetch(rm, 1, 4) == 0
        assert p.high_watermark == 2, "the HW moved past a replica the store names in the ISR"
        alter.answer()
        assert p.in_sync_replicas == [0, 1, 2] and p.high_watermark == 2
        assert follower_fetch(rm, 2, 4) == 0
        assert p.high_watermark == 4

    asyncio.run(main())
    close(lm, rm)


def test_an_epoch_led_without_records_is_dropped_so_fetches_stop_diverging(
    tmp_path: Any,
) -> None:
    """The follower led briefly (epoch 4 at its LEO, 10) and appended nothing
    before another leader was elected. Its fetches named epoch 4, which the
    new leader never had: it answered that the log diverges at epoch 2, ending
    at 10 — where the follower's log already ends. Truncating "to 10" removed
    nothing, so the empty epoch stayed, the next fetch diverged the same way,
    and the follower never rejoined the ISR (seen in the partition suite after
    a severed link). Truncation at the LEO now drops the empty epoch, as
    Kafka's UnifiedLog.truncateTo does."""
    lm, rm, fetcher = _follower_with_epochs(tmp_path)
    p = rm.partition(TP)
    assert p is not None
    cache = p.log.leader_epoch_cache
    assert cache is not None
    cache.assign(4, p.log_end_offset)  # led at epoch 4 from offset 10, wrote nothing
    assert p.log.latest_epoch == 4
    s = PartitionFetchState(10, 5)
    fetcher.states[TP] = s
    fetcher._apply_epoch_end(TP, p, s, 2, 10)
    assert p.log_end_offset == 10 and s.state is FetchState.FETCHING and s.fetch_offset == 10
    assert p.log.latest_epoch == 2, "the fetch would name epoch 4 and diverge again"
    close(lm, rm)


def test_an_isr_change_written_off_the_loop_answers_waiting_produces_on_the_loop(
    tmp_path: Any,
) -> None:
    """On ZooKeeper an ISR change lands on the AlterIsr worker thread. The
    acks=-1 produces it completes must be answered on the event loop, where
    their connections write: answered from the worker, a response raced the
    loop's writes on the same connection (the partition suite saw a Produce
    left unanswered for 60 s, librdkafka's epoch bump and a duplicate)."""
    alter = HeldAlterIsrManager()
    lm, rm = make(str(tmp_path), 0, alter_isr_manager=alter, lag_ms=50)
    purgatory = rm.delayed_produce_purgatory
    checked_on: list[int] = []
    check = purgatory.check_and_complete

    def recording_check(key: Any) -> int:
        checked_on.append(threading.get_ident())
        return check(key)

    purgatory.check_and_complete = recording_check  # type: ignore[method-assign]

    async def main() -> None:
        loop_thread = threading.get_ident()
        rm._loop = asyncio.get_running_loop()  # a broker starts its ReplicaManager on the loop
        lead(rm, isr=[0, 1, 2])
        p = rm.partition(TP)
        assert p is not None
        produce = asyncio.ensure_future(rm.append_records(10_000, -1, {TP: build_batch([b"a"])}))
        await asyncio.sleep(0.1)  # neither follower fetches: both lag
        rm.maybe_shrink_isr()
        assert [h[0].isr for h in alter.held] == [(0,)] and not produce.done()
        checked_on.clear()
        worker = threading.Thread(target=alter.answer)  # as ZkAlterIsrManager's worker
        worker.start()
        worker.join()
        assert p.in_sync_replicas == [0] and p.high_watermark == 1
        res = await asyncio.wait_for(produce, 5)
        assert res[TP].error_code == 0 and res[TP].base_offset == 0
        assert checked_on and set(checked_on) == {loop_thread}, "completed off the loop"

    asyncio.run(main())
    close(lm, rm)


def test_a_repeated_back_off_is_logged_once(tmp_path: Any, caplog: Any) -> None:
    """A leader gone for a while: one INFO line per reason, the repeats at
    DEBUG, and a new reason (or the same one after a fetch succeeded) at INFO."""
    lm, rm, fetcher = _follower_with_epochs(tmp_path)
    s = fetcher.states[TP] = PartitionFetchState(10, 3)
    caplog.set_level(logging.DEBUG, logger="pylog.server.replica_fetcher")
    for why in ("Fetch: error 6", "Fetch: error 6", "Fetch: error 6", "Fetch: error 74"):
        fetcher._delay(TP, why)
    s.backoff_reason = None  # what a successful fetch does
    fetcher._delay(TP, "Fetch: error 74")
    lines = [(r.levelno, r.getMessage().rsplit(": ", 1)[1]) for r in caplog.records
             if "backs off" in r.getMessage()]  # fmt: skip
    assert lines == [
        (logging.INFO, "error 6"),
        (logging.DEBUG, "error 6"),
        (logging.DEBUG, "error 6"),
        (logging.INFO, "error 74"),
        (logging.INFO, "error 74"),
    ]
    close(lm, rm)


def test_acks_awaited_on_a_partition_whose_directory_fails(tmp_path: Any) -> None:
    """A produce waiting for its acks when the partition's log directory fails
    is answered KAFKA_STORAGE_ERROR (Kafka's getPartitionOrError for an offline
    partition), not UNKNOWN_TOPIC_OR_PARTITION."""
    lm, rm = make(str(tmp_path), 0)

    async def main() -> None:
        lead(rm, isr=[0, 1, 2])
        produce = asyncio.ensure_future(rm.append_records(10_000, -1, {TP: build_batch([b"a"])}))
        await asyncio.sleep(0.01)
        assert not produce.done()
        rm.handle_log_dir_failure(str(tmp_path))
        res = await asyncio.wait_for(produce, 5)
        assert res[TP].error_code == ErrorCode.KAFKA_STORAGE_ERROR

    asyncio.run(main())
    close(lm, rm)
