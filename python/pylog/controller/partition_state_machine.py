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
live broker in UpdateMetadata (through the request batch).

The partitions of one state change are read and written together, with the
ZooKeeper requests pipelined (KafkaZkClient's batch calls), as Kafka's
ZkPartitionStateMachine does: a broker's failure costs a few round trips, not
two per partition it led."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from pylog.common.topic_partition import TopicPartition
from pylog.controller.controller_channel_manager import ControllerBrokerRequestBatch
from pylog.controller.controller_context import ControllerContext, PartitionState
from pylog.controller.election import LeaderElectionStrategy, elect, offline_partition_leader
from pylog.metadata.kafka_zk_client import KafkaZkClient
from pylog.metadata.zk_data import LeaderAndIsr

__all__ = [
    "ElectionStats",
    "PartitionStateMachine",
    "StateChangeFailed",
    "current_states",
    "offline_partition_leader",
]

_log = logging.getLogger("pylog.controller.partitions")

_RETRIES = 10


@dataclass(frozen=True)
class StateChangeFailed:
    """Why a partition's election elected no one (Kafka's StateChangeFailedException)."""

    message: str


async def current_states(
    zk: KafkaZkClient,
    context: ControllerContext,
    partitions: list[TopicPartition],
    cached_if: Callable[[LeaderAndIsr], bool] | None = None,
) -> list[LeaderAndIsr | None]:
    """The partitions' states to base conditional writes on: the controller's
    own copy where ``cached_if`` accepts it, read from ZooKeeper (pipelined)
    otherwise. A stale copy is safe only for a write: its znode version no
    longer matches, the write fails and the next round reads; so ``cached_if``
    must accept only states that lead to a write."""
    out: list[LeaderAndIsr | None] = [None] * len(partitions)
    unread: list[int] = []
    for i, tp in enumerate(partitions):
        cached = context.leadership.get(tp)
        if (
            cached_if is not None
            and cached is not None
            and cached.zk_version >= 0
            and cached_if(cached)
        ):
            out[i] = cached
        else:
            unread.append(i)
    if unread:
        read = await zk.run(zk.get_partition_states, [partitions[i] for i in unread])
        for i, state in zip(unread, read, strict=True):
            out[i] = state
    return out


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
        todo = list(partitions)
        if target is PartitionState.OnlinePartition:
            # New ones first, then elections: each group's ZooKeeper reads and
            # writes go out pipelined, not one partition after another.
            new = [tp for tp in todo if self.state(tp) is PartitionState.NewPartition]
            elect = [
                tp
                for tp in todo
                if self.state(tp)
                in (PartitionState.OfflinePartition, PartitionState.OnlinePartition)
            ]
            await self._initialize(new, batch)
            await self._elect(elect, batch, LeaderElectionStrategy.OfflinePartition)
            return
        for tp in todo:
            if target in (PartitionState.NewPartition, PartitionState.OfflinePartition):
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

    async def _initialize(
        self, partitions: list[TopicPartition], batch: ControllerBrokerRequestBatch
    ) -> None:
        """First leader and ISR of new partitions: the first live replica of the
        assignment, and the live replicas."""
        ctx = self.context
        eligible = ctx.live_broker_ids()
        todo: list[tuple[TopicPartition, LeaderAndIsr]] = []
        for tp in partitions:
            live = [r for r in ctx.replicas(tp) if r in eligible]
            if not live:
                _log.warning("new partition %s has no live replica: it stays new", tp)
                continue
            state = LeaderAndIsr(
                leader=live[0], leader_epoch=0, isr=live, controller_epoch=ctx.epoch, zk_version=0
            )
            todo.append((tp, state))
        if not todo:
            return
        created = await self.zk.run(
            self.zk.create_partition_states, [(tp.topic, tp.partition, s) for tp, s in todo]
        )
        existing: list[TopicPartition] = []
        for (tp, state), ok in zip(todo, created, strict=True):
            if not ok:
                existing.append(tp)
                continue
            ctx.leadership[tp] = state
            ctx.partition_states[tp] = PartitionState.OnlinePartition
            batch.add_leader_and_isr(ctx.replicas(tp), tp, is_new=True)
        if not existing:
            return
        # Left by an earlier controller: use them (as offline partitions would).
        states = await self.zk.run(self.zk.get_partition_states, existing)
        offline: list[TopicPartition] = []
        for tp, current in zip(existing, states, strict=True):
            if current is None:
                continue
            ctx.leadership[tp] = current
            if current.leader in ctx.live_brokers:
                ctx.partition_states[tp] = PartitionState.OnlinePartition
                batch.add_leader_and_isr(ctx.replicas(tp), tp)
            else:
                ctx.partition_states[tp] = PartitionState.OfflinePartition
                offline.append(tp)
        await self._elect(offline, batch, LeaderElectionStrategy.OfflinePartition)

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
        return await self._elect(list(partitions), batch, strategy, allow_unclean=allow_unclean)

    async def _elect(
        self,
        partitions: list[TopicPartition],
        batch: ControllerBrokerRequestBatch,
        strategy: LeaderElectionStrategy,
        *,
        allow_unclean: bool | None = None,
    ) -> dict[TopicPartition, LeaderAndIsr | StateChangeFailed]:
        """Elect leaders by ``strategy``: each round reads every state, then
        writes every new leader, pipelined; the partitions whose write lost a
        race (a leader changed its ISR meanwhile) go round again. For an
        offline partition (its leader gone, or never known) no eligible replica
        leaves it offline; an election by another strategy that finds none
        leaves the partition as it is. ``allow_unclean`` forces the unclean
        choice for an offline partition (else the topic's config decides)."""
        ctx = self.context
        offline = strategy is LeaderElectionStrategy.OfflinePartition
        results: dict[TopicPartition, LeaderAndIsr | StateChangeFailed] = {}
        t0 = time.perf_counter()
        todo = list(partitions)
        missing: list[TopicPartition] = []
        unclean_allowed: dict[str, bool] = {}
        elected = 0

        def leaderless(state: LeaderAndIsr) -> bool:
            return state.leader not in ctx.live_brokers

        for attempt in range(_RETRIES):
            if not todo:
                break
            live = ctx.live_broker_ids()
            # First round of an offline election: a partition whose known
            # leader is dead is written from the controller's own copy (no
            # read); the write is fenced on its version, so a stale copy only
            # costs a second round.
            cached_if = leaderless if offline and attempt == 0 else None
            states = await current_states(self.zk, ctx, todo, cached_if)
            writes: list[tuple[TopicPartition, LeaderAndIsr, int, bool]] = []
            all_live = live
            for tp, current in zip(todo, states, strict=True):
                replicas = ctx.replicas(tp)
                # Replicas on a failed log directory are not eligible.
                live = {b for b in all_live if ctx.is_replica_online(b, tp)}
                if current is None:
                    if offline:
                        missing.append(tp)
                    else:
                        results[tp] = StateChangeFailed(
                            f"LeaderAndIsr information doesn't exist for partition {tp}"
                        )
                    continue
                if current.controller_epoch > ctx.epoch:
                    results[tp] = StateChangeFailed(
                        f"the state of {tp} was written by a newer controller (epoch "
                        f"{current.controller_epoch})"
                    )
                    continue
                if offline and current.leader in live and current.leader in replicas:
                    # Still led by a live broker (a stale view): take it as it is.
                    ctx.leadership[tp] = current
                    ctx.partition_states[tp] = PartitionState.OnlinePartition
                    batch.add_leader_and_isr(replicas, tp)
                    results[tp] = current
                    continue
                unclean_ok = False
                if offline:
                    if allow_unclean is not None:
                        unclean_ok = allow_unclean
                    elif not any(r in live for r in current.isr):
                        if tp.topic not in unclean_allowed:
                            unclean_allowed[tp.topic] = await self.zk.run(
                                self.unclean_enabled, tp.topic
                            )
                        unclean_ok = unclean_allowed[tp.topic]
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
                    results[tp] = StateChangeFailed(
                        f"Failed to elect leader for partition {tp} under strategy "
                        f"{strategy.name}LeaderElectionStrategy"
                    )
                    continue
                writes.append((tp, new, current.zk_version, unclean))
            todo = []
            if not writes:
                break
            done_all = await self.zk.run(
                self.zk.update_leader_and_isrs,
                [(tp.topic, tp.partition, new, version) for tp, new, version, _ in writes],
                controller_epoch_zk_version=ctx.epoch_zk_version,
            )
            for (tp, new, _, unclean), done in zip(writes, done_all, strict=True):
                if not done.succeeded:
                    todo.append(tp)  # the leader changed the ISR meanwhile: read again
                    continue
                written = replace(new, zk_version=done.version)
                ctx.leadership[tp] = written
                ctx.partition_states[tp] = PartitionState.OnlinePartition
                results[tp] = written
                elected += 1
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
                batch.add_leader_and_isr(ctx.replicas(tp), tp)
        for tp in todo:
            _log.error("could not write the new leader of %s: its state kept changing", tp)
            results[tp] = StateChangeFailed(f"the state of {tp} kept changing")
        if elected:
            # One election round for all of them: its time counts once.
            self.stats.elections += elected
            self.stats.election_ms_total += (time.perf_counter() - t0) * 1000
        if missing:
            for tp in missing:
                ctx.partition_states[tp] = PartitionState.NewPartition
            await self._initialize(missing, batch)
            for tp in missing:
                got = ctx.leadership.get(tp)
                results[tp] = got if got is not None else StateChangeFailed(f"{tp} stays new")
        return results
