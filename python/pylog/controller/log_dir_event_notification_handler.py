"""A broker's failed log directory, as the controller handles it.

Kafka's ZooKeeper-mode controller, ``LogDirEventNotificationHandler`` and
the KafkaController steps it starts (``processLogDirEventNotification``,
``onBrokerLogDirFailure``, ``onReplicasBecomeOffline``):

1. A broker whose log directory failed writes
   ``/log_dir_event_notification/log_dir_event_<seq>`` =
   ``{"version":1,"broker":<id>,"event":1}``. The controller reads and
   deletes the notifications and sends each named live broker LeaderAndIsr
   for every replica it holds.
2. The broker answers KAFKA_STORAGE_ERROR for the partitions of its failed
   directory. Those replicas are offline from then on (``ControllerContext.
   replicas_on_offline_dirs``): the partitions they led go offline and get a
   leader elected among the online in-sync replicas, and the replicas leave
   the ISRs (OfflineReplica). UpdateMetadata lists them as offline replicas.
3. When the broker registers again (a restart, the disk repaired) its
   replicas are online again (the broker-change event clears them).

The LeaderAndIsr answers of every request are looked at, so a replica found
offline any other way (a LeaderAndIsr sent after a restart whose directory
still fails) goes the same way.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from pylog.common.topic_partition import TopicPartition
from pylog.controller.controller_context import PartitionState, ReplicaState
from pylog.errors import ErrorCode
from pylog.protocol.messages import LeaderAndIsrResponse

if TYPE_CHECKING:
    from pylog.controller.kafka_controller import KafkaController

__all__ = ["LogDirEventNotificationHandler"]

_log = logging.getLogger("pylog.controller")


class LogDirEventNotificationHandler:
    def __init__(self, controller: KafkaController) -> None:
        self.controller = controller

    # ------------------------------------------------------------ the znode watch

    def on_children(self, children: list[str]) -> None:
        if children:
            self.controller.put_active("LogDirEventNotification", self.process)

    async def process(self) -> None:
        c = self.controller
        zk = c.zk
        names = await zk.run(zk.get_log_dir_event_notifications)
        if not names:
            return
        brokers: set[int] = set()
        for name in names:
            broker = await zk.run(zk.get_log_dir_event_broker, name)
            if broker is not None:
                brokers.add(broker)
        await zk.run(zk.delete_log_dir_event_notifications, names)
        ctx = c.context
        live = sorted(b for b in brokers if b in ctx.live_brokers)
        if not live:
            return
        _log.info("brokers %s report a failed log directory: asking them which replicas", live)
        batch = c.new_batch()
        replicas = [
            (tp, b)
            for b in live
            for tp in ctx.partitions_on_broker(b)
            if tp.topic not in ctx.topics_being_deleted
        ]
        # OnlineReplica sends each its LeaderAndIsr; the answers say which are not.
        await c.replica_state_machine.handle_state_changes(
            replicas, ReplicaState.OnlineReplica, batch
        )
        batch.send()

    # ------------------------------------------------------------ LeaderAndIsr answers

    def on_leader_and_isr_response(self, broker: int, response: object) -> None:
        """A broker's LeaderAndIsr answer (on the loop): its KAFKA_STORAGE_ERROR
        partitions become an event."""
        if not isinstance(response, LeaderAndIsrResponse):
            return
        names = {v: k for k, v in self.controller.context.topic_ids.items()}
        offline: set[TopicPartition] = set()
        for t in response.topics:
            topic = names.get(t.topic_id)
            if topic is None:
                continue
            for pe in t.partition_errors:
                if pe.error_code == ErrorCode.KAFKA_STORAGE_ERROR:
                    offline.add(TopicPartition(topic, pe.partition_index))
        for pe in response.partition_errors:  # versions before 5
            if pe.error_code == ErrorCode.KAFKA_STORAGE_ERROR:
                offline.add(TopicPartition(pe.topic_name, pe.partition_index))
        if not offline:
            return

        async def process() -> None:
            await self.on_replicas_offline(broker, offline)

        self.controller.put_active("LeaderAndIsrResponseReceived", process)

    async def on_replicas_offline(self, broker: int, partitions: set[TopicPartition]) -> None:
        c = self.controller
        ctx = c.context
        if broker not in ctx.live_brokers:
            return
        known = ctx.replicas_on_offline_dirs.setdefault(broker, set())
        new = sorted(tp for tp in partitions - known if tp.topic in ctx.assignments)
        known.update(new)
        if not new:
            return
        _log.warning("broker %d has %d replicas on a failed log directory: %s",
                     broker, len(new), ", ".join(map(str, new)))  # fmt: skip
        batch = c.new_batch()
        live = [tp for tp in new if tp.topic not in ctx.topics_being_deleted]
        led = [
            tp for tp in live if (s := ctx.leadership.get(tp)) is not None and s.leader == broker
        ]
        psm, rsm = c.partition_state_machine, c.replica_state_machine
        await psm.handle_state_changes(led, PartitionState.OfflinePartition, batch)
        await psm.trigger_online_partition_state_change(batch)
        await rsm.handle_state_changes(
            [(tp, broker) for tp in live], ReplicaState.OfflineReplica, batch
        )
        batch.add_update_metadata(ctx.live_brokers, live)
        batch.send()
