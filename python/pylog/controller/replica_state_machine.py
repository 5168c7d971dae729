"""ReplicaStateMachine: each (partition, broker) replica's state, as Kafka's
controller moves it — NewReplica, OnlineReplica, OfflineReplica, and for a
topic deletion ReplicaDeletionStarted → ReplicaDeletionSuccessful →
NonExistentReplica.

OnlineReplica sends the replica's broker the partition's LeaderAndIsr.
OfflineReplica takes the broker out of the partition's ISR (a conditional
write of the state znode with a new leader epoch; the leader becomes
NoLeader (-1) when it was the dead broker and no one else is in the ISR) and
tells the remaining replicas; a broker's partitions are written together,
pipelined (see :mod:`pylog.controller.partition_state_machine`).
ReplicaDeletionStarted sends StopReplica with delete."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import replace

from pylog.common.topic_partition import TopicPartition
from pylog.controller.controller_channel_manager import ControllerBrokerRequestBatch
from pylog.controller.controller_context import ControllerContext, ReplicaState
from pylog.controller.partition_state_machine import current_states
from pylog.metadata.kafka_zk_client import KafkaZkClient
from pylog.metadata.zk_data import LeaderAndIsr

__all__ = ["ReplicaStateMachine"]

_log = logging.getLogger("pylog.controller.replicas")

NO_LEADER = -1
_RETRIES = 10

Replica = tuple[TopicPartition, int]


class ReplicaStateMachine:
    def __init__(self, zk: KafkaZkClient, context: ControllerContext) -> None:
        self.zk = zk
        self.context = context

    def state(self, replica: Replica) -> ReplicaState:
        return self.context.replica_states.get(replica, ReplicaState.NonExistentReplica)

    async def handle_state_changes(
        self,
        replicas: Iterable[Replica],
        target: ReplicaState,
        batch: ControllerBrokerRequestBatch,
    ) -> None:
        ctx = self.context
        todo = list(replicas)
        if target is ReplicaState.OfflineReplica:
            # One broker's partitions at a time, their ISR writes pipelined.
            by_broker: dict[int, list[TopicPartition]] = {}
            for tp, broker in todo:
                batch.add_stop_replica(broker, tp, delete=False)
                by_broker.setdefault(broker, []).append(tp)
            for broker, partitions in by_broker.items():
                await self._remove_from_isr(broker, partitions, batch)
                for tp in partitions:
                    ctx.replica_states[(tp, broker)] = target
            return
        for tp, broker in todo:
            if target is ReplicaState.NewReplica:
                ctx.replica_states[(tp, broker)] = target
            elif target is ReplicaState.OnlineReplica:
                if self.state((tp, broker)) is not ReplicaState.NewReplica:
                    batch.add_leader_and_isr([broker], tp)
                ctx.replica_states[(tp, broker)] = target
            elif target is ReplicaState.ReplicaDeletionStarted:
                batch.add_stop_replica(broker, tp, delete=True)
                ctx.replica_states[(tp, broker)] = target
            elif target is ReplicaState.ReplicaDeletionSuccessful:
                ctx.replica_states[(tp, broker)] = target
            elif target is ReplicaState.NonExistentReplica:
                ctx.replica_states.pop((tp, broker), None)

    async def _remove_from_isr(
        self, broker: int, partitions: list[TopicPartition], batch: ControllerBrokerRequestBatch
    ) -> None:
        """Take ``broker`` out of the ISRs of ``partitions`` (Kafka's
        doRemoveReplicasFromIsr): read every state, write the changed ones,
        pipelined; partitions whose write lost a race go round again."""
        ctx = self.context
        todo = list(partitions)

        def involved(state: LeaderAndIsr) -> bool:
            return broker in state.isr or state.leader == broker

        for attempt in range(_RETRIES):
            if not todo:
                break
            # First round: where the controller's copy has the broker in the
            # ISR, write from it (fenced on its version); where it has not,
            # read, since a copy can miss an ISR expansion a leader made.
            states = await current_states(self.zk, ctx, todo, involved if attempt == 0 else None)
            writes: list[tuple[TopicPartition, LeaderAndIsr, int]] = []
            for tp, current in zip(todo, states, strict=True):
                if current is None:
                    continue
                if broker not in current.isr and current.leader != broker:
                    ctx.leadership[tp] = current
                    continue
                isr = [r for r in current.isr if r != broker]
                if not isr:
                    isr = list(current.isr)  # the last in-sync replica stays, for a clean election
                new = LeaderAndIsr(
                    leader=NO_LEADER if current.leader == broker else current.leader,
                    leader_epoch=current.leader_epoch + 1,
                    isr=isr,
                    controller_epoch=ctx.epoch,
                    leader_recovery_state=current.leader_recovery_state,
                )
                writes.append((tp, new, current.zk_version))
            todo = []
            if not writes:
                break
            results = await self.zk.run(
                self.zk.update_leader_and_isrs,
                [(tp.topic, tp.partition, new, version) for tp, new, version in writes],
                controller_epoch_zk_version=ctx.epoch_zk_version,
            )
            for (tp, new, _), done in zip(writes, results, strict=True):
                if not done.succeeded:
                    todo.append(tp)
                    continue
                ctx.leadership[tp] = replace(new, zk_version=done.version)
                _log.info("removed broker %d from the ISR of %s: %s", broker, tp, new.isr)
                batch.add_leader_and_isr(
                    [r for r in ctx.replicas(tp) if r != broker and r in ctx.live_brokers], tp
                )
        for tp in todo:
            _log.error("could not take broker %d out of the ISR of %s", broker, tp)
