"""PartitionStateMachine: NonExistentPartition → NewPartition → OnlinePartition
⇄ OfflinePartition → NonExistentPartition, as Kafka's controller moves them.

Going online writes the partition's state znode: a new partition gets its
first leader (the first live replica of its assignment) and an ISR of its
live replicas; an offline one gets a leader elected from its ISR
(:mod:`pylog.controller.election`), and an online one moves to
another leader by a strategy: the preferred replica, away from a broker in
controlled shutdown, or into a reassignment's targets. Every write is conditional on the state
znode's version and on ``/controller_epoch``'s, so neither a leader changing
its ISR nor a deposed controller is overwritten; a lost race re-reads and
tries again. The new state goes to the replicas in LeaderAndIsr and to every
live broker in UpdateMetadata (through the request batch)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from pylog.controller.controller_channel_manager import ControllerBrokerRequestBatch
from pylog.controller.controller_context import ControllerContext, PartitionState
from pylog.controller.election import LeaderElectionStrategy, elect, offline_partition_leader
from pylog.log.checkpoint import TopicPartition
from pylog.metadata.kafka_zk_client import KafkaZkClient, ZkNodeExists
from pylog.metadata.zk_data import LeaderAndIsr

__all__ = [
    "ElectionStats",
    "PartitionStateMachine",
    "StateChangeFailed",
    "offline_partition_leader",
]

_log = logging.getLogger("pylog.controller.partitions")

_RETRIES = 10


@dataclass(frozen=True)
class StateChangeFailed:
    """Why a partition's election elected no one (Kafka's StateChangeFailedException)."""

    message: str


@dataclass
class ElectionStats:
    """LeaderElectionRateAndTimeMs (count and total time) and
    UncleanLeaderElectionsPerSec (count)."""

    elections: int = 0
    election_ms_total: float = 0.0
    unclean_elections: int = 0


class PartitionStateMachine:
    def __init__(
        self,
        zk: KafkaZkClient,
        context: ControllerContext,
        unclean_enabled: Callable[[str], bool],  # blocking: run on the ZooKeeper executor
        stats: ElectionStats,
    ) -> None:
        self.zk = zk
        self.context = context
        self.unclean_enabled = unclean_enabled
        self.stats = stats

    def state(self, tp: TopicPartition) -> PartitionState:
        return self.context.partition_states.get(tp, PartitionState.NonExistentPartition)

    async def handle_state_changes(
        self,
        partitions: Iterable[TopicPartition],
        target: PartitionState,
        batch: ControllerBrokerRequestBatch,
    ) -> None:
        ctx = self.context
        for tp in partitions:
            current = self.state(tp)
            if target is PartitionState.NewPartition:
                ctx.partition_states[tp] = target
            elif target is PartitionState.OnlinePartition:
                if current is PartitionState.NewPartition:
                    await self._initialize(tp, batch)
                elif current in (PartitionState.OfflinePartition, PartitionState.OnlinePartition):
                    await self._elect(tp, batch)
            elif target is PartitionState.OfflinePartition:
                ctx.partition_states[tp] = target
            elif target is PartitionState.NonExistentPartition:
                ctx.partition_states.pop(tp, None)

    async def trigger_online_partition_state_change(
        self, batch: ControllerBrokerRequestBatch
    ) -> None:
        """Try to bring every offline (or new) partition online."""
        ctx = self.context
        todo = [
            tp
            for tp, s in ctx.partition_states.items()
            if s in (PartitionState.OfflinePartition, PartitionState.NewPartition)
            and tp.topic not in ctx.topics_being_deleted
        ]
        await self.handle_state_changes(sorted(todo), PartitionState.OnlinePartition, batch)

    async def _initialize(self, tp: TopicPartition, batch: ControllerBrokerRequestBatch) -> None:
        ctx = self.context
        replicas = ctx.replicas(tp)
        eligible = ctx.live_broker_ids()
        live = [r for r in replicas if r in eligible]
        if not live:
            _log.warning("new partition %s has no live replica: it stays new", tp)
            return
        state = LeaderAndIsr(
            leader=live[0], leader_epoch=0, isr=live, controller_epoch=ctx.epoch, zk_version=0
        )
        try:
            await self.zk.run(self.zk.create_partition_state, tp.topic, tp.partition, state)
        except ZkNodeExists:
            # Left by an earlier controller: use it (as an offline partition would).
            existing = await self.zk.run(self.zk.get_partition_state, tp.topic, tp.partition)
            if existing is None:
                return
            ctx.leadership[tp] = existing
            if existing.leader in ctx.live_brokers:
                ctx.partition_states[tp] = PartitionState.OnlinePartition
                batch.add_leader_and_isr(replicas, tp)
            else:
                ctx.partition_states[tp] = PartitionState.OfflinePartition
                await self._elect(tp, batch)
            return
        ctx.leadership[tp] = state
        ctx.partition_states[tp] = PartitionState.OnlinePartition
        batch.add_leader_and_isr(replicas, tp, is_new=True)

    async def elect_leaders(
        self,
        partitions: Iterable[TopicPartition],
        strategy: LeaderElectionStrategy,
        batch: ControllerBrokerRequestBatch,
        *,
        allow_unclean: bool | None = None,
    ) -> dict[TopicPartition, LeaderAndIsr | StateChangeFailed]:
        """Move partitions to a new leader by ``strategy`` (Kafka's
        transition to OnlinePartition with a strategy): per partition, its new
        state or why none was elected. ``allow_unclean`` as for :meth:`_elect`."""
        results: dict[TopicPartition, LeaderAndIsr | StateChangeFailed] = {}
        for tp in partitions:
            results[tp] = await self._elect(tp, batch, strategy, allow_unclean=allow_unclean)
        return results

    async def _elect(
        self,
        tp: TopicPartition,
        batch: ControllerBrokerRequestBatch,
        strategy: LeaderElectionStrategy = LeaderElectionStrategy.OfflinePartition,
        *,
        allow_unclean: bool | None = None,
    ) -> LeaderAndIsr | StateChangeFailed:
        """Elect a leader by ``strategy``. For an offline partition (its leader
        gone, or never known) no eligible replica leaves it offline; an
        election by another strategy that finds none leaves the partition as
        it is. ``allow_unclean`` forces the unclean choice for an offline
        partition (else the topic's config decides)."""
        ctx = self.context
        replicas = ctx.replicas(tp)
        offline = strategy is LeaderElectionStrategy.OfflinePartition
        t0 = time.perf_counter()
        for _ in range(_RETRIES):
            current = await self.zk.run(self.zk.get_partition_state, tp.topic, tp.partition)
            if current is None:
                if not offline:
                    return StateChangeFailed(
                        f"LeaderAndIsr information doesn't exist for partition {tp}"
                    )
                ctx.partition_states[tp] = PartitionState.NewPartition
                await self._initialize(tp, batch)
                got = ctx.leadership.get(tp)
                return got if got is not None else StateChangeFailed(f"{tp} stays new")
            if current.controller_epoch > ctx.epoch:
                return StateChangeFailed(
                    f"the state of {tp} was written by a newer controller (epoch "
                    f"{current.controller_epoch})"
                )
            live = ctx.live_broker_ids()
            if offline and current.leader in live and current.leader in replicas:
                # Still led by a live broker (a stale view): take it as it is.
                ctx.leadership[tp] = current
                ctx.partition_states[tp] = PartitionState.OnlinePartition
                batch.add_leader_and_isr(replicas, tp)
                return current
            unclean_ok = False
            if offline:
                if allow_unclean is not None:
                    unclean_ok = allow_unclean
                elif not any(r in live for r in current.isr):
                    unclean_ok = await self.zk.run(self.unclean_enabled, tp.topic)
            new, unclean = elect(
                strategy,
                current,
                replicas,
                live=live,
                shutting_down=ctx.shutting_down_brokers,
                controller_epoch=ctx.epoch,
                allow_unclean=unclean_ok,
                target=ctx.reassignment_target(tp),
            )
            if new is None:
                ctx.leadership[tp] = current
                if offline:
                    ctx.partition_states[tp] = PartitionState.OfflinePartition
                    _log.error(
                        "no live in-sync replica of %s (ISR %s, live %s): it stays offline",
                        tp,
                        current.isr,
                        sorted(live),
                    )
                    batch.add_update_metadata(ctx.live_brokers, [tp])
                return StateChangeFailed(
                    f"Failed to elect leader for partition {tp} under strategy "
                    f"{strategy.name}LeaderElectionStrategy"
                )
            done = await self.zk.run(
                self.zk.update_leader_and_isr,
                tp.topic,
                tp.partition,
                new,
                current.zk_version,
                controller_epoch_zk_version=ctx.epoch_zk_version,
            )
            if not done.succeeded:
                continue  # the leader changed the ISR meanwhile: read again
            written = LeaderAndIsr(
                new.leader,
                new.leader_epoch,
                new.isr,
                new.controller_epoch,
                new.leader_recovery_state,
                done.version,
            )
            ctx.leadership[tp] = written
            ctx.partition_states[tp] = PartitionState.OnlinePartition
            self.stats.elections += 1
            self.stats.election_ms_total += (time.perf_counter() - t0) * 1000
            if unclean:
                self.stats.unclean_elections += 1
            _log.info(
                "elected broker %d leader of %s (%s; leader epoch %d, ISR %s%s)",
                new.leader,
                tp,
                strategy.value,
                new.leader_epoch,
                new.isr,
                ", unclean" if unclean else "",
            )
            # The stopping broker too hears it is no longer the leader.
            batch.add_leader_and_isr(replicas, tp)
            return written
        _log.error("could not write the new leader of %s: its state kept changing", tp)
        return StateChangeFailed(f"the state of {tp} kept changing")
