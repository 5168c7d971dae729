"""ReplicaStateMachine: each (partition, broker) replica's state, as Kafka's
controller moves it — NewReplica, OnlineReplica, OfflineReplica, and for a
topic deletion ReplicaDeletionStarted → ReplicaDeletionSuccessful →
NonExistentReplica.

OnlineReplica sends the replica's broker the partition's LeaderAndIsr.
OfflineReplica takes the broker out of the partition's ISR (a conditional
write of the state znode with a new leader epoch; the leader becomes
NoLeader (-1) when it was the dead broker and no one else is in the ISR) and
tells the remaining replicas. ReplicaDeletionStarted sends StopReplica with
delete."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from pylog.controller.controller_channel_manager import ControllerBrokerRequestBatch
from pylog.controller.controller_context import ControllerContext, ReplicaState
from pylog.log.checkpoint import TopicPartition
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
        for tp, broker in replicas:
            if target is ReplicaState.NewReplica:
                ctx.replica_states[(tp, broker)] = target
            elif target is ReplicaState.OnlineReplica:
                if self.state((tp, broker)) is not ReplicaState.NewReplica:
                    batch.add_leader_and_isr([broker], tp)
                ctx.replica_states[(tp, broker)] = target
            elif target is ReplicaState.OfflineReplica:
                batch.add_stop_replica(broker, tp, delete=False)
                await self._remove_from_isr(tp, broker, batch)
                ctx.replica_states[(tp, broker)] = target
            elif target is ReplicaState.ReplicaDeletionStarted:
                batch.add_stop_replica(broker, tp, delete=True)
                ctx.replica_states[(tp, broker)] = target
            elif target is ReplicaState.ReplicaDeletionSuccessful:
                ctx.replica_states[(tp, broker)] = target
            elif target is ReplicaState.NonExistentReplica:
                ctx.replica_states.pop((tp, broker), None)

    async def _remove_from_isr(
        self, tp: TopicPartition, broker: int, batch: ControllerBrokerRequestBatch
    ) -> None:
        ctx = self.context
        for _ in range(_RETRIES):
            current = await self.zk.run(self.zk.get_partition_state, tp.topic, tp.partition)
            if current is None:
                return
            if broker not in current.isr and current.leader != broker:
                ctx.leadership[tp] = current
                return
            leader = NO_LEADER if current.leader == broker else current.leader
            isr = [r for r in current.isr if r != broker]
            if not isr:
                isr = list(current.isr)  # the last in-sync replica stays, for a clean election
            new = LeaderAndIsr(
                leader=leader,
                leader_epoch=current.leader_epoch + 1,
                isr=isr,
                controller_epoch=ctx.epoch,
                leader_recovery_state=current.leader_recovery_state,
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
                continue
            ctx.leadership[tp] = LeaderAndIsr(
                new.leader,
                new.leader_epoch,
                new.isr,
                new.controller_epoch,
                new.leader_recovery_state,
                done.version,
            )
            _log.info("removed broker %d from the ISR of %s: %s", broker, tp, isr)
            batch.add_leader_and_isr(
                [r for r in ctx.replicas(tp) if r != broker and r in ctx.live_brokers], tp
            )
            return
        _log.error("could not take broker %d out of the ISR of %s", broker, tp)
