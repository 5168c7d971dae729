"""TopicDeletionManager: the controller's topic deletion (Kafka's
``TopicDeletionManager``, ZooKeeper mode).

A client's DeleteTopics (or ``kafka-topics --delete``) leaves a marker under
``/admin/delete_topics``; the controller's watch of it brings each new topic
here. Deleting a topic: it joins the context's ``topics_being_deleted`` (the
controller's other work leaves it alone from then on), every live broker gets
UpdateMetadata without it, and each replica on a live broker moves to
ReplicaDeletionStarted, which sends StopReplica with ``delete_partition``.
When every such broker has answered, the deletion completes: the topic's
znodes (assignment, partition states, config) and its marker are removed and
the controller forgets it.

Where pylog differs from Kafka: Kafka marks a topic *ineligible* for
deletion while a broker holding one of its replicas is down or while one of
its partitions is being reassigned, and resumes when that ends; pylog counts
a replica whose broker died as answered, so the deletion completes without
it, and the reassignment paths refuse a topic being deleted
(UNKNOWN_TOPIC_OR_PARTITION).

Like the rest of the controller it runs on the controller's event queue: a
completion found outside an event (a StopReplica answer, a broker gone) is
queued as one.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from pylog.controller.controller_context import ReplicaState

if TYPE_CHECKING:
    from pylog.controller.kafka_controller import KafkaController

__all__ = ["TopicDeletionManager"]

_log = logging.getLogger("pylog.controller")


class TopicDeletionManager:
    """The topics being deleted and the brokers each one still waits for."""

    def __init__(self, controller: KafkaController) -> None:
        # The controller is this manager's DeletionClient (Kafka's
        # ControllerDeletionClient wraps it the same way): its ZooKeeper
        # client, request batches and event queue.
        self._controller = controller
        #: topic → brokers whose StopReplica(delete) has not been answered
        self._pending: dict[str, set[int]] = {}

    def reset(self) -> None:
        """The controller resigned: nothing is waited for any more."""
        self._pending.clear()

    def forget(self, topic: str) -> None:
        """The topic left the cluster (deleted, or its znode removed)."""
        self._pending.pop(topic, None)

    async def process_topic_deletion(self) -> None:
        """Start the deletion of each topic marked under ``/admin/delete_topics``
        that is not being deleted yet; a marker for an unknown topic is
        removed."""
        controller = self._controller
        zk, ctx = controller.zk, controller.context
        for topic in await zk.run(zk.get_delete_topic_markers):
            if topic in ctx.topics_being_deleted:
                continue
            if topic not in ctx.assignments:
                if await zk.run(zk.get_topic_assignment, topic) is None:
                    await zk.run(zk.delete_delete_topic_marker, topic)
                    continue
                await controller.load_topic(topic)
            await self._on_topic_deletion(topic)

    async def _on_topic_deletion(self, topic: str) -> None:
        """UpdateMetadata without the topic, then StopReplica(delete) to every
        live replica (Kafka's onTopicDeletion and onPartitionDeletion)."""
        controller = self._controller
        ctx = controller.context
        _log.info("deleting topic %s", topic)
        ctx.topics_being_deleted.add(topic)
        partitions = ctx.partitions_of_topic(topic)
        batch = controller.new_batch()
        batch.add_update_metadata(ctx.live_brokers, partitions)
        replicas = [(tp, r) for tp in partitions for r in ctx.replicas(tp) if r in ctx.live_brokers]
        pending = {r for _, r in replicas}
        self._pending[topic] = pending
        await controller.replica_state_machine.handle_state_changes(
            replicas, ReplicaState.ReplicaDeletionStarted, batch
        )

        def answered(broker: int, response: object, t: str = topic) -> None:
            waiting = self._pending.get(t)
            if waiting is None:
                return
            waiting.discard(broker)
            if not waiting:
                self._queue_completion(t)

        batch.send(answered)
        if not pending:
            await self._complete_delete_topic(topic)

    def on_brokers_failed(self, dead: Iterable[int]) -> None:
        """Brokers gone mid-deletion answer no more: their replicas count as
        done (see the module's note on Kafka's ineligible topics)."""
        gone = set(dead)
        for topic, pending in list(self._pending.items()):
            pending -= gone
            if not pending:
                self._queue_completion(topic)

    def _queue_completion(self, topic: str) -> None:
        self._controller.put_active(
            f"TopicDeletion({topic})", lambda: self._complete_delete_topic(topic)
        )

    async def _complete_delete_topic(self, topic: str) -> None:
        """Every replica answered: the topic's znodes and marker go, and the
        controller forgets it (Kafka's completeDeleteTopic)."""
        controller = self._controller
        if topic not in controller.context.topics_being_deleted:
            return
        zk = controller.zk
        await zk.run(zk.delete_topic_znodes, topic)
        await zk.run(zk.delete_delete_topic_marker, topic)
        controller.forget_topic(topic)
        _log.info("topic %s deleted", topic)
