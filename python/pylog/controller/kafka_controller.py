"""KafkaController: the broker elected through ZooKeeper to decide partition
leadership and tell the other brokers (Kafka's ZooKeeper-mode controller).

Election: every broker watches the ephemeral ``/controller``; when it is
missing, each tries to create it in one transaction with a conditional raise
of ``/controller_epoch`` (KafkaZkClient.register_controller_and_increment_epoch):
one wins and its epoch is unique. The winner loads the cluster into its
ControllerContext, watches ``/brokers/ids``, ``/brokers/topics`` (and each
topic's assignment), ``/admin/delete_topics`` and ``/isr_change_notification``,
sends every live broker UpdateMetadata and every replica its LeaderAndIsr, and
brings offline and new partitions online, and carries on the reassignments
in flight. When ``/controller`` then names another broker (or disappears with
this broker's session), it resigns: its watches, channels and context go.

In office it also answers what brokers and clients ask of the controller: a
stopping broker's ControlledShutdown (its leaderships move to other in-sync
replicas), ElectLeaders (preferred or unclean elections, also run by the
``auto.leader.rebalance.enable`` check and ``/admin/preferred_replica_election``),
and AlterPartitionReassignments / ListPartitionReassignments (with
``/admin/reassign_partitions``), each an event on the same queue.

Two rooms of its work have files of their own: topic deletion is the
TopicDeletionManager's (``topic_deletion_manager.py``, as in Kafka), and
partition reassignment the PartitionReassignmentManager's
(``partition_reassignment_manager.py``; Kafka keeps that family in this class).
This class keeps the office, the brokers, topics and ISR changes, controlled
shutdown and leader elections, and the events that reach the two rooms.

Every watch and every piece of work is a ControllerEvent run one at a time
by the ControllerEventManager, on the event loop; ZooKeeper calls run on the
client's executor (``zk.run``)."""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from pylog.common.topic_partition import TopicPartition
from pylog.controller.api_error import ApiError
from pylog.controller.controller_channel_manager import (
    ControllerBrokerRequestBatch,
    ControllerChannelManager,
)
from pylog.controller.controller_context import (
    ControllerContext,
    PartitionState,
    ReplicaAssignment,
    ReplicaState,
)
from pylog.controller.controller_event_manager import ControllerEvent, ControllerEventManager
from pylog.controller.election import LeaderElectionStrategy
from pylog.controller.log_dir_event_notification_handler import LogDirEventNotificationHandler
from pylog.controller.partition_reassignment_manager import PartitionReassignmentManager
from pylog.controller.partition_state_machine import (
    ElectionStats,
    PartitionStateMachine,
    StateChangeFailed,
)
from pylog.controller.replica_state_machine import ReplicaStateMachine
from pylog.controller.topic_deletion_manager import TopicDeletionManager
from pylog.errors import ErrorCode
from pylog.metadata.kafka_zk_client import (
    ControllerMovedError,
    KafkaZkClient,
    ZkConnectionError,
    ZkError,
)
from pylog.metadata.zk_data import (
    ControllerZNode,
    DeleteTopicsZNode,
    IsrChangeNotificationZNode,
    LeaderAndIsr,
    LogDirEventNotificationZNode,
    PreferredReplicaElectionZNode,
    ReassignPartitionsZNode,
    TopicsZNode,
    TopicZNode,
    ZkDataError,
)
from pylog.network.metrics import MetricsRegistry

__all__ = [
    "ELECTION_PREFERRED",
    "ELECTION_UNCLEAN",
    "ApiError",
    "ControlledShutdownResult",
    "ElectionTrigger",
    "KafkaController",
]

#: Seconds between election attempts while ZooKeeper is unreachable.
_ELECTION_RETRY_S = 0.5

_log = logging.getLogger("pylog.controller")

_TRUE = ("true", "1", "yes")

#: AbstractControlRequest.UNKNOWN_BROKER_EPOCH: a request without an epoch (v0-1).
UNKNOWN_BROKER_EPOCH = -1
#: Kafka's ElectionType values (ElectLeaders v1+).
ELECTION_PREFERRED = 0
ELECTION_UNCLEAN = 1
#: Kafka's first automatic leader balance check after taking office.
_FIRST_REBALANCE_CHECK_S = 5.0


class ElectionTrigger(enum.Enum):
    """Who asked for a leader election (Kafka's ElectionTrigger)."""

    AdminClientTriggered = "admin client"
    ZkTriggered = "/admin/preferred_replica_election"
    AutoTriggered = "the leader balance check"


#: Per partition: the leader elected, or why none was.
ElectionResults = dict[TopicPartition, int | ApiError]


@dataclass
class ControlledShutdownResult:
    """The controller's answer to a ControlledShutdown: an error code (and
    message), or the partitions the broker still leads (none: it may stop)."""

    error_code: int = ErrorCode.NONE
    message: str | None = None
    remaining: list[TopicPartition] = field(default_factory=list)


class KafkaController:
    def __init__(
        self,
        zk: KafkaZkClient,
        broker_id: int,
        *,
        inter_broker_listener: str,
        unclean_leader_election_default: bool = False,
        auto_leader_rebalance: bool = False,
        leader_imbalance_check_interval_s: float = 300.0,
        leader_imbalance_per_broker_percentage: int = 10,
        on_active_change: Callable[[bool], None] | None = None,
        socket_timeout_s: float = 30.0,
    ) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self.unclean_default = unclean_leader_election_default
        #: auto.leader.rebalance.enable and its leader.imbalance.* keys
        self.auto_leader_rebalance = auto_leader_rebalance
        self.leader_imbalance_check_interval_s = leader_imbalance_check_interval_s
        self.leader_imbalance_per_broker_percentage = leader_imbalance_per_broker_percentage
        self.on_active_change = on_active_change
        self.context = ControllerContext()
        self.events = ControllerEventManager()
        self.channel = ControllerChannelManager(
            inter_broker_listener, broker_id=broker_id, socket_timeout_s=socket_timeout_s
        )
        self.stats = ElectionStats()
        self.partition_state_machine = PartitionStateMachine(
            zk, self.context, self._unclean_enabled, self.stats
        )
        self.replica_state_machine = ReplicaStateMachine(zk, self.context)
        self.topic_deletion_manager = TopicDeletionManager(self)
        #: AlterPartitionReassignments, /admin/reassign_partitions and their steps
        self.partition_reassignment_manager = PartitionReassignmentManager(self)
        #: /log_dir_event_notification and the replicas on failed log dirs
        self.log_dir_event_handler = LogDirEventNotificationHandler(self)
        self.channel.on_leader_and_isr_response = (
            self.log_dir_event_handler.on_leader_and_isr_response
        )
        #: the broker ``/controller`` names (-1: none known)
        self.active_controller_id = -1
        self.is_active = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_controller_watch: Callable[[], None] | None = None
        self._stop_watches: list[Callable[[], None]] = []
        self._topic_watches: dict[str, Callable[[], None]] = {}
        self._rebalance_timer: asyncio.TimerHandle | None = None
        #: events waiting for ZooKeeper to come back (_retry_when_connected)
        self._retries: set[asyncio.Task[None]] = set()
        self._closed = False

    # ------------------------------------------------------------------ lifecycle

    async def startup(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.events.start()
        self._stop_controller_watch = await self.zk.run(
            self.zk.watch_data, ControllerZNode.path(), self._on_controller_znode, self._loop
        )

    async def shutdown(self) -> None:
        """Stop; an active controller resigns (deletes ``/controller``) so
        another broker takes over at once."""
        if self._closed:
            return
        self._closed = True
        if self._stop_controller_watch is not None:
            self._stop_controller_watch()
        for task in list(self._retries):
            task.cancel()
        await self.events.close()
        if self.is_active:
            await self._on_resignation()
            try:
                await self.zk.run(self.zk.delete_controller)
            except Exception:
                _log.exception("deleting /controller failed")
        await self.channel.close()

    def register_metrics(self, metrics: MetricsRegistry) -> None:
        metrics.gauge(
            "kafka_controller_kafkacontroller_activecontrollercount",
            "1 on the broker that is the active controller, else 0.",
            lambda: 1.0 if self.is_active else 0.0,
        )
        metrics.gauge(
            "kafka_controller_kafkacontroller_offlinepartitionscount",
            "Partitions without a live leader (on the active controller).",
            lambda: float(self.context.offline_partition_count()) if self.is_active else 0.0,
        )
        metrics.gauge(
            "kafka_controller_kafkacontroller_preferredreplicaimbalancecount",
            "Partitions not led by their preferred replica (on the active controller).",
            lambda: (
                float(self.context.preferred_replica_imbalance_count()) if self.is_active else 0.0
            ),
        )
        metrics.gauge(
            "kafka_controller_kafkacontroller_globaltopiccount",
            "Topics in the cluster (on the active controller).",
            lambda: float(len(self.context.assignments)) if self.is_active else 0.0,
        )
        metrics.gauge(
            "kafka_controller_kafkacontroller_globalpartitioncount",
            "Partitions with a leader (on the active controller).",
            lambda: float(len(self.context.leadership)) if self.is_active else 0.0,
        )
        metrics.gauge(
            "kafka_controller_controllerstats_leaderelectionrateandtimems_count",
            "Leader elections by this controller (LeaderElectionRateAndTimeMs count).",
            lambda: float(self.stats.elections),
            kind="counter",
        )
        metrics.gauge(
            "kafka_controller_controllerstats_leaderelectionrateandtimems_sum",
            "Milliseconds spent electing leaders (LeaderElectionRateAndTimeMs total).",
            lambda: self.stats.election_ms_total,
            kind="counter",
        )
        metrics.gauge(
            "kafka_controller_controllerstats_uncleanleaderelections_total",
            "Leaders elected from outside the ISR (UncleanLeaderElectionsPerSec count).",
            lambda: float(self.stats.unclean_elections),
            kind="counter",
        )

    def _put(
        self,
        name: str,
        process: Callable[[], object],
        preempt: Callable[[], None] | None = None,
    ) -> None:
        if self._closed:
            if preempt is not None:
                preempt()
            return

        async def run() -> None:
            result = process()
            if asyncio.iscoroutine(result):
                await result

        self.events.put(ControllerEvent(name, run, preempt))

    def put_event(
        self,
        name: str,
        process: Callable[[], object],
        preempt: Callable[[], None] | None = None,
    ) -> None:
        """An event on the controller's queue (``preempt`` runs instead when
        the queue is closed): the requests of zk_broker_requests.py."""
        self._put(name, process, preempt)

    async def elect(self) -> None:
        """Re-read ``/controller`` (after a fenced write) and take or leave the office."""
        await self._elect()

    def put_active(self, name: str, process: Callable[[], object]) -> None:
        """An event that only the active controller processes."""

        async def run() -> None:
            if not self.is_active:
                return
            try:
                result = process()
                if asyncio.iscoroutine(result):
                    await result
            except ControllerMovedError:
                # A fenced write: another broker took the office meanwhile.
                _log.info("controller epoch %d was fenced; re-reading /controller",
                          self.context.epoch)  # fmt: skip
                await self._elect()
            except ZkConnectionError as e:
                # ZooKeeper went away mid-event (Kafka's client would block
                # until it is back). Run the event again then: what it read
                # is still there (an ISR change notification stays until the
                # controller deletes it), and an expired session makes this
                # broker resign first, so the retry finds it inactive.
                _log.warning("controller event %s stopped (%s); it runs again once "
                             "ZooKeeper is back", name, e)  # fmt: skip
                self._retry_when_connected(name, process)

        self._put(name, run)

    def _retry_when_connected(self, name: str, process: Callable[[], object]) -> None:
        async def wait() -> None:
            while not self._closed and not self.zk.connected:
                await asyncio.sleep(0.2)
            if not self._closed:
                self.put_active(name, process)

        task = asyncio.get_running_loop().create_task(wait(), name=f"retry-{name}")
        self._retries.add(task)
        task.add_done_callback(self._retries.discard)

    def new_batch(self) -> ControllerBrokerRequestBatch:
        """Requests to the brokers, gathered and sent together."""
        return ControllerBrokerRequestBatch(self.broker_id, self.context, self.channel)

    def _unclean_enabled(self, topic: str) -> bool:
        """``unclean.leader.election.enable`` of the topic, else the broker's (blocking)."""
        value = self.zk.get_entity_config("topics", topic).get("unclean.leader.election.enable")
        if value is None:
            return self.unclean_default
        return value.strip().lower() in _TRUE

    # ------------------------------------------------------------------ election

    def _on_controller_znode(self, data: bytes | None, version: int) -> None:
        self._put("ControllerChange", self._elect)

    async def _elect(self) -> None:
        try:
            await self._try_elect()
        except ZkError as e:
            # ZooKeeper is unreachable (restarting, or the session is being
            # re-established): the /controller watch will not fire again for
            # this change, so the election is tried again shortly.
            if self._closed:
                return
            _log.warning("controller election: %s; trying again in %.1f s", e, _ELECTION_RETRY_S)
            asyncio.get_running_loop().call_later(
                _ELECTION_RETRY_S, self._put, "ControllerChange", self._elect
            )

    async def _try_elect(self) -> None:
        holder = await self.zk.run(self.zk.get_controller_id)
        # Our own id there while we are not in office: perhaps our election's
        # transaction reached ZooKeeper and its answer was lost (the connection
        # dropped). The registration below tells: it returns our epoch when the
        # znode is this session's (Kafka's checkControllerAndEpoch), and
        # ControllerMovedError when an expired session of ours left it.
        if holder is not None and (holder != self.broker_id or self.is_active):
            self.active_controller_id = holder
            if holder != self.broker_id and self.is_active:
                await self._on_resignation()
            return
        if self._closed:
            return
        try:
            epoch, version = await self.zk.run(
                self.zk.register_controller_and_increment_epoch, self.broker_id
            )
        except ControllerMovedError:
            holder = await self.zk.run(self.zk.get_controller_id)
            self.active_controller_id = holder if holder is not None else -1
            if self.is_active:
                await self._on_resignation()
            return
        if self.is_active:  # our session lost the office and won it again
            await self._on_resignation()
        self.active_controller_id = self.broker_id
        try:
            await self._on_failover(epoch, version)
        except Exception:
            # Half a failover is no controller: give the office back (the
            # /controller watch then runs a new election).
            _log.exception("controller failover failed; resigning")
            await self._on_resignation()
            await self.zk.run(self.zk.delete_controller)

    async def _on_failover(self, epoch: int, epoch_zk_version: int) -> None:
        _log.info("broker %d is the controller, epoch %d", self.broker_id, epoch)
        ctx = self.context
        ctx.reset()
        ctx.epoch = epoch
        ctx.epoch_zk_version = epoch_zk_version
        self.is_active = True
        if self.on_active_change is not None:
            self.on_active_change(True)
        zk = self.zk
        for info in await zk.run(zk.get_all_brokers):
            ctx.live_brokers[info.id] = info
            self.channel.add_broker(info)
        for topic in await zk.run(zk.get_all_topics):
            await self.load_topic(topic)
        for tp in ctx.all_partitions():
            state = ctx.leadership.get(tp)
            if state is None:
                ctx.partition_states[tp] = PartitionState.NewPartition
            elif state.leader in ctx.live_brokers:
                ctx.partition_states[tp] = PartitionState.OnlinePartition
            else:
                ctx.partition_states[tp] = PartitionState.OfflinePartition
            for r in ctx.replicas(tp):
                ctx.replica_states[(tp, r)] = (
                    ReplicaState.OnlineReplica
                    if r in ctx.live_brokers
                    else ReplicaState.OfflineReplica
                )
        # Every broker learns the live brokers and partitions before any
        # LeaderAndIsr of this controller (Kafka's onControllerFailover sends
        # this UpdateMetadata first, on its own): see _on_broker_startup.
        first = self.new_batch()
        first.add_update_metadata(ctx.live_brokers, ctx.all_partitions())
        first.send()
        batch = self.new_batch()
        for tp in ctx.all_partitions():
            if ctx.partition_states[tp] is PartitionState.OnlinePartition:
                batch.add_leader_and_isr([r for r in ctx.replicas(tp) if r in ctx.live_brokers], tp)
        await self.partition_state_machine.trigger_online_partition_state_change(batch)
        # Replicas on brokers that went while no controller was in office
        # (the last one among them, perhaps) leave the ISRs now, as at a
        # broker's failure: a leader would otherwise wait replica.lag.time.max.ms
        # for them before an acks=all produce completes.
        offline = [
            (tp, r)
            for tp in ctx.all_partitions()
            for r in ctx.replicas(tp)
            if r not in ctx.live_brokers and tp.topic not in ctx.topics_being_deleted
        ]
        await self.replica_state_machine.handle_state_changes(
            offline, ReplicaState.OfflineReplica, batch
        )
        batch.send()
        loop = self._loop
        self._stop_watches = [
            await zk.run(zk.watch_children, path, cb, loop)
            for path, cb in (
                ("/brokers/ids", self._on_broker_change),
                (TopicsZNode.path(), self._on_topic_change),
                (DeleteTopicsZNode.path(), self._on_delete_topics),
                (IsrChangeNotificationZNode.parent(), self._on_isr_change),
                (LogDirEventNotificationZNode.parent(), self.log_dir_event_handler.on_children),
            )
        ]
        # Fires at once when a request is pending: it is elected then.
        self._stop_watches.append(
            await zk.run(
                zk.watch_data,
                PreferredReplicaElectionZNode.path(),
                self._on_preferred_replica_election_znode,
                loop,
            )
        )
        # Reassignments in flight when the last controller went go on.
        for tp in ctx.partitions_being_reassigned():
            await self.partition_reassignment_manager.on_partition_reassignment(
                tp, ctx.full_assignment(tp)
            )
        self.partition_reassignment_manager.reset()
        self._stop_watches.append(
            await zk.run(
                zk.watch_data,
                ReassignPartitionsZNode.path(),
                self.partition_reassignment_manager.on_reassign_partitions_znode,
                loop,
            )
        )
        if self.auto_leader_rebalance:
            self._schedule_auto_rebalance(_FIRST_REBALANCE_CHECK_S)

    async def load_topic(self, topic: str) -> list[TopicPartition]:
        """Read a topic's assignment (and its partitions' states) into the
        context; returns the partitions it did not know. Watches the topic's
        assignment for added partitions."""
        ctx = self.context
        got = await self.zk.run(self.zk.get_topic_assignment, topic)
        if got is None:
            return []
        assignment, _ = got
        known = ctx.assignments.get(topic, {})
        added = [p for p in assignment.partitions if p not in known]
        ctx.assignments[topic] = {p: list(r) for p, r in assignment.partitions.items()}
        for p in assignment.partitions:  # a reassignment in flight (KIP-455)
            tp = TopicPartition(topic, p)
            for held, got_replicas in (
                (ctx.adding_replicas, assignment.adding_replicas.get(p)),
                (ctx.removing_replicas, assignment.removing_replicas.get(p)),
            ):
                if got_replicas:
                    held[tp] = list(got_replicas)
                else:
                    held.pop(tp, None)
        if assignment.topic_id:
            ctx.topic_ids[topic] = assignment.topic_id
        for p in added:
            state = await self.zk.run(self.zk.get_partition_state, topic, p)
            if state is not None:
                ctx.leadership[TopicPartition(topic, p)] = state
        if topic not in self._topic_watches and self._loop is not None:
            self._topic_watches[topic] = await self.zk.run(
                self.zk.watch_data,
                TopicZNode.path(topic),
                lambda data, version, t=topic: self.put_active(
                    f"PartitionModifications({t})", lambda: self._on_partition_modification(t)
                ),
                self._loop,
            )
        return [TopicPartition(topic, p) for p in sorted(added)]

    async def _on_resignation(self) -> None:
        _log.info("broker %d is no longer the controller", self.broker_id)
        self.is_active = False
        if self._rebalance_timer is not None:
            self._rebalance_timer.cancel()
            self._rebalance_timer = None
        for stop in [*self._stop_watches, *self._topic_watches.values()]:
            stop()
        self._stop_watches.clear()
        self._topic_watches.clear()
        self.topic_deletion_manager.reset()
        await self.channel.close()
        self.context.reset()
        if self.on_active_change is not None:
            self.on_active_change(False)

    # ------------------------------------------------------------------ brokers

    def _on_broker_change(self, children: list[str]) -> None:
        self.put_active("BrokerChange", self._process_broker_change)

    async def _process_broker_change(self) -> None:
        ctx = self.context
        infos = {b.id: b for b in await self.zk.run(self.zk.get_all_brokers)}
        dead = sorted(b for b in ctx.live_brokers if b not in infos)
        bounced = sorted(
            b for b, info in infos.items() if b in ctx.live_brokers and
            info.epoch != ctx.live_brokers[b].epoch
        )  # fmt: skip
        new = sorted(b for b in infos if b not in ctx.live_brokers)
        for b in [*dead, *bounced, *new]:  # a new registration: its log dirs start afresh
            ctx.replicas_on_offline_dirs.pop(b, None)
        if dead or bounced:
            for b in [*dead, *bounced]:
                ctx.live_brokers.pop(b, None)
                self.channel.remove_broker(b)
            await self._on_broker_failure([*dead, *bounced])
        if new or bounced:
            for b in [*new, *bounced]:
                ctx.live_brokers[b] = infos[b]
                self.channel.add_broker(infos[b])
            await self._on_broker_startup([*new, *bounced])

    async def _on_broker_failure(self, dead: list[int]) -> None:
        _log.info("brokers %s are gone", dead)
        ctx = self.context
        ctx.shutting_down_brokers.difference_update(dead)
        batch = self.new_batch()
        gone = set(dead)
        led = [
            tp for tp in ctx.partitions_led_by_any(gone) if tp.topic not in ctx.topics_being_deleted
        ]
        await self.partition_state_machine.handle_state_changes(
            led, PartitionState.OfflinePartition, batch
        )
        await self.partition_state_machine.trigger_online_partition_state_change(batch)
        replicas = [
            (tp, b)
            for b in dead
            for tp in ctx.partitions_on_broker(b)
            if tp.topic not in ctx.topics_being_deleted
        ]
        await self.replica_state_machine.handle_state_changes(
            replicas, ReplicaState.OfflineReplica, batch
        )
        batch.add_update_metadata(ctx.live_brokers, [tp for tp, _ in replicas])
        batch.send()
        self.topic_deletion_manager.on_brokers_failed(gone)

    async def _on_broker_startup(self, new: list[int]) -> None:
        _log.info("brokers %s joined", new)
        ctx = self.context
        # The live brokers and every partition go out first, in a batch of
        # their own (Kafka's onBrokerStartup): a Kafka broker handed
        # LeaderAndIsr before it knows the leaders' endpoints does not start
        # following them ("cannot become follower since the new leader is
        # unavailable") and waits for the next LeaderAndIsr.
        first = self.new_batch()
        first.add_update_metadata(ctx.live_brokers, ctx.all_partitions())
        first.send()
        batch = self.new_batch()
        await self.partition_state_machine.trigger_online_partition_state_change(batch)
        replicas = [
            (tp, b)
            for b in new
            for tp in ctx.partitions_on_broker(b)
            if tp.topic not in ctx.topics_being_deleted
        ]
        await self.replica_state_machine.handle_state_changes(
            replicas, ReplicaState.OnlineReplica, batch
        )
        batch.send()
        joined = set(new)
        for tp in ctx.partitions_being_reassigned():
            assignment = ctx.full_assignment(tp)
            if joined & set(assignment.target_replicas):
                await self.partition_reassignment_manager.on_partition_reassignment(tp, assignment)

    # ------------------------------------------------------------------ topics

    def _on_topic_change(self, children: list[str]) -> None:
        self.put_active("TopicChange", self._process_topic_change)

    async def _process_topic_change(self) -> None:
        ctx = self.context
        names = set(await self.zk.run(self.zk.get_all_topics))
        for topic in sorted(set(ctx.assignments) - names):
            if topic not in ctx.topics_being_deleted:
                self.forget_topic(topic)
        added: list[TopicPartition] = []
        for topic in sorted(names - set(ctx.assignments)):
            added += await self.load_topic(topic)
        if added:
            await self._on_new_partitions(added)

    async def _on_partition_modification(self, topic: str) -> None:
        if topic not in self.context.assignments or topic in self.context.topics_being_deleted:
            return
        added = await self.load_topic(topic)
        if added:
            await self._on_new_partitions(added)

    async def _on_new_partitions(self, partitions: list[TopicPartition]) -> None:
        ctx = self.context
        batch = self.new_batch()
        fresh = [tp for tp in partitions if tp not in ctx.leadership]
        existing = [tp for tp in partitions if tp in ctx.leadership]
        replicas = [(tp, r) for tp in fresh for r in ctx.replicas(tp)]
        psm, rsm = self.partition_state_machine, self.replica_state_machine
        await psm.handle_state_changes(fresh, PartitionState.NewPartition, batch)
        await rsm.handle_state_changes(replicas, ReplicaState.NewReplica, batch)
        await psm.handle_state_changes(fresh, PartitionState.OnlinePartition, batch)
        await rsm.handle_state_changes(replicas, ReplicaState.OnlineReplica, batch)
        for tp in existing:  # state written already (an earlier controller)
            ctx.partition_states[tp] = PartitionState.OfflinePartition
        await psm.handle_state_changes(existing, PartitionState.OnlinePartition, batch)
        batch.send()

    def forget_topic(self, topic: str) -> None:
        """Drop a topic that left ZooKeeper: its watch, deletion and context."""
        stop = self._topic_watches.pop(topic, None)
        if stop is not None:
            stop()
        self.topic_deletion_manager.forget(topic)
        self.context.remove_topic(topic)

    # ------------------------------------------------------------------ deletion

    def _on_delete_topics(self, children: list[str]) -> None:
        self.put_active("TopicDeletion", self.topic_deletion_manager.process_topic_deletion)

    # ------------------------------------------------------------------ ISR changes

    def _on_isr_change(self, children: list[str]) -> None:
        if children:
            self.put_active("IsrChangeNotification", self._process_isr_change)

    async def _process_isr_change(self) -> None:
        ctx = self.context
        names = await self.zk.run(self.zk.get_isr_change_notifications)
        if not names:
            return
        changed: set[TopicPartition] = set()
        for name in names:
            for topic, p in await self.zk.run(self.zk.get_isr_change_notification, name):
                changed.add(TopicPartition(topic, p))
        known = sorted(tp for tp in changed if tp.topic in ctx.assignments)
        for tp in known:
            state = await self.zk.run(self.zk.get_partition_state, tp.topic, tp.partition)
            if state is not None:
                ctx.leadership[tp] = state
        if known:
            batch = self.new_batch()
            batch.add_update_metadata(ctx.live_brokers, known)
            batch.send()
        await self.zk.run(self.zk.delete_isr_change_notifications, names)
        await self._maybe_complete_reassignments(known)

    def on_reassignment_isr_change(self, partitions: list[TopicPartition]) -> None:
        """ISRs this controller wrote itself (a Kafka leader's AlterPartition)
        may complete a reassignment. Kafka's ZooKeeper controller learns it
        from its watch on a reassigned partition's state znode
        (PartitionReassignmentIsrChangeHandler), which its own write fires
        too: a separate event, after the AlterPartition was answered."""
        if partitions:
            self.put_active(
                "PartitionReassignmentIsrChange",
                lambda: self._maybe_complete_reassignments(partitions),
            )

    async def _maybe_complete_reassignments(self, partitions: list[TopicPartition]) -> None:
        ctx = self.context
        for tp in partitions:
            if tp.topic not in ctx.assignments:
                continue
            assignment = ctx.full_assignment(tp)
            if (
                assignment.is_being_reassigned
                and tp.topic not in ctx.topics_being_deleted
                and await self.partition_reassignment_manager.is_reassignment_complete(
                    tp, assignment
                )
            ):
                _log.info("target replicas %s of %s are in sync", assignment.target_replicas, tp)
                await self.partition_reassignment_manager.on_partition_reassignment(tp, assignment)

    # ------------------------------------------------------------------ controlled shutdown

    async def controlled_shutdown(
        self, broker_id: int, broker_epoch: int
    ) -> ControlledShutdownResult:
        """A broker asks to stop (ControlledShutdown; or this broker itself):
        its leaderships move to other in-sync replicas and it leaves the ISRs.
        Answered once the controller's event queue has run it."""
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[ControlledShutdownResult] = loop.create_future()

        def reply(result: ControlledShutdownResult) -> None:
            if not answer.done():
                answer.set_result(result)

        async def process() -> None:
            try:
                reply(await self._process_controlled_shutdown(broker_id, broker_epoch))
            except ControllerMovedError:
                reply(_not_controller())
                await self._elect()
            except Exception as e:
                _log.exception("controlled shutdown of broker %d failed", broker_id)
                reply(ControlledShutdownResult(ErrorCode.UNKNOWN_SERVER_ERROR, str(e)))

        self._put(f"ControlledShutdown({broker_id})", process, lambda: reply(_not_controller()))
        return await answer

    async def _process_controlled_shutdown(
        self, broker_id: int, broker_epoch: int
    ) -> ControlledShutdownResult:
        ctx = self.context
        if not self.is_active:
            return _not_controller()
        info = ctx.live_brokers.get(broker_id)
        if info is None:
            return ControlledShutdownResult(
                ErrorCode.BROKER_NOT_AVAILABLE, f"Broker id {broker_id} does not exist."
            )
        # An older registration's request (KIP-380); an unknown epoch (v0-1) passes.
        if broker_epoch != UNKNOWN_BROKER_EPOCH and broker_epoch < info.epoch:
            message = (
                f"Received controlled shutdown request from an old broker epoch {broker_epoch} "
                f"for broker {broker_id}. Current broker epoch is {info.epoch}."
            )
            _log.info("%s", message)
            return ControlledShutdownResult(ErrorCode.STALE_BROKER_EPOCH, message)
        _log.info("shutting down broker %d", broker_id)
        ctx.shutting_down_brokers.add(broker_id)
        acting = [
            tp
            for tp in ctx.partitions_on_broker(broker_id)
            if len(ctx.replicas(tp)) > 1
            and tp in ctx.leadership
            and tp.topic not in ctx.topics_being_deleted
        ]
        led = [tp for tp in acting if ctx.leadership[tp].leader == broker_id]
        followed = [tp for tp in acting if ctx.leadership[tp].leader != broker_id]
        batch = self.new_batch()
        await self.partition_state_machine.elect_leaders(
            led, LeaderElectionStrategy.ControlledShutdown, batch
        )
        # As a follower it stops fetching and leaves the ISR; the leaders hear it.
        await self.replica_state_machine.handle_state_changes(
            [(tp, broker_id) for tp in followed], ReplicaState.OfflineReplica, batch
        )
        batch.send()
        remaining = ctx.partition_leaders_on_broker(broker_id)
        _log.info(
            "controlled shutdown of broker %d: moved %d leaders, %d remain",
            broker_id,
            len(led) - len(remaining),
            len(remaining),
        )
        return ControlledShutdownResult(remaining=remaining)

    # ------------------------------------------------------------------ leader elections

    async def elect_leaders(
        self, partitions: Iterable[TopicPartition], election_type: int
    ) -> ElectionResults:
        """ElectLeaders from a client (Kafka's electLeaders, AdminClientTriggered):
        per partition, the leader elected or an error. PREFERRED moves
        leadership to the preferred replica when it is alive and in the ISR;
        UNCLEAN elects a leader for a partition without a live one, from
        outside the ISR if need be."""
        wanted = sorted(set(partitions))
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[ElectionResults] = loop.create_future()

        def not_controller() -> None:
            if not answer.done():
                answer.set_result({tp: ApiError(ErrorCode.NOT_CONTROLLER) for tp in wanted})

        async def process() -> None:
            try:
                results = await self._process_replica_leader_election(
                    wanted, election_type, ElectionTrigger.AdminClientTriggered
                )
            except ControllerMovedError:
                not_controller()
                await self._elect()
                return
            except Exception as e:
                _log.exception("leader election failed")
                results = {tp: ApiError(ErrorCode.UNKNOWN_SERVER_ERROR, str(e)) for tp in wanted}
            if not answer.done():
                answer.set_result(results)

        self._put("ReplicaLeaderElection", process, not_controller)
        return await answer

    async def _process_replica_leader_election(
        self,
        partitions: list[TopicPartition],
        election_type: int,
        trigger: ElectionTrigger,
    ) -> ElectionResults:
        ctx = self.context
        if not self.is_active:
            return {tp: ApiError(ErrorCode.NOT_CONTROLLER) for tp in partitions}
        results: ElectionResults = {}
        electable: list[TopicPartition] = []
        live = ctx.live_broker_ids()
        for tp in partitions:
            replicas = ctx.replicas(tp)
            if not replicas:
                results[tp] = ApiError(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."
                )
                continue
            if tp.topic in ctx.topics_being_deleted:
                results[tp] = ApiError(
                    ErrorCode.INVALID_TOPIC_EXCEPTION, "The topic is being deleted"
                )
                continue
            state = ctx.leadership.get(tp)
            leader = state.leader if state is not None else -1
            if election_type == ELECTION_PREFERRED:
                needed = leader != replicas[0]
            else:
                needed = leader == -1 or leader not in live
            if needed:
                electable.append(tp)
            else:
                results[tp] = ApiError(ErrorCode.ELECTION_NOT_NEEDED)
        elected = await self._on_replica_election(electable, election_type, trigger)
        failed = (
            ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
            if election_type == ELECTION_PREFERRED
            else ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
        )
        for tp, got in elected.items():
            if isinstance(got, StateChangeFailed):
                results[tp] = ApiError(failed, got.message)
            else:
                results[tp] = got.leader
        return results

    async def _on_replica_election(
        self,
        partitions: list[TopicPartition],
        election_type: int,
        trigger: ElectionTrigger,
    ) -> dict[TopicPartition, LeaderAndIsr | StateChangeFailed]:
        if not partitions:
            return {}
        _log.info(
            "replica leader election (%s) for %s triggered by %s",
            "PREFERRED" if election_type == ELECTION_PREFERRED else "UNCLEAN",
            ", ".join(f"{tp.topic}-{tp.partition}" for tp in partitions[:20]),
            trigger.value,
        )
        batch = self.new_batch()
        if election_type == ELECTION_PREFERRED:
            results = await self.partition_state_machine.elect_leaders(
                partitions, LeaderElectionStrategy.PreferredReplica, batch
            )
        else:
            # Unclean only when an admin asks for it (as Kafka: conservative).
            results = await self.partition_state_machine.elect_leaders(
                partitions,
                LeaderElectionStrategy.OfflinePartition,
                batch,
                allow_unclean=True if trigger is ElectionTrigger.AdminClientTriggered else None,
            )
        batch.send()
        return results

    # -- /admin/preferred_replica_election (the ZooKeeper-era tool)

    def _on_preferred_replica_election_znode(self, data: bytes | None, version: int) -> None:
        if data is not None:
            self.put_active("PreferredReplicaLeaderElection", self._process_zk_election)

    async def _process_zk_election(self) -> None:
        path = PreferredReplicaElectionZNode.path()
        got = await self.zk.run(self.zk.get_data, path)
        if got is None:
            return
        try:
            wanted = sorted(
                {TopicPartition(t, p) for t, p in PreferredReplicaElectionZNode.decode(got[0])}
            )
        except ZkDataError as e:
            _log.error("ignoring %s: %s", path, e)
            wanted = []
        try:
            await self._process_replica_leader_election(
                wanted, ELECTION_PREFERRED, ElectionTrigger.ZkTriggered
            )
        finally:
            await self.zk.run(self.zk.delete_recursive, path)

    # -- auto.leader.rebalance.enable

    def _schedule_auto_rebalance(self, delay_s: float) -> None:
        if self._loop is None or self._closed:
            return
        self._rebalance_timer = self._loop.call_later(
            delay_s,
            self.put_active,
            "AutoPreferredReplicaLeaderElection",
            self._process_auto_preferred_election,
        )

    async def _process_auto_preferred_election(self) -> None:
        try:
            await self._check_and_trigger_auto_leader_rebalance()
        finally:
            if self.is_active:
                self._schedule_auto_rebalance(self.leader_imbalance_check_interval_s)

    async def _check_and_trigger_auto_leader_rebalance(self) -> None:
        """Per broker, the share of the partitions it is the preferred replica
        of that another broker leads; above leader.imbalance.per.broker.percentage,
        those whose preferred replica is alive and in the ISR are given back."""
        ctx = self.context
        by_preferred: dict[int, list[TopicPartition]] = {}
        for tp in ctx.all_partitions():
            replicas = ctx.replicas(tp)
            if replicas and tp.topic not in ctx.topics_being_deleted:
                by_preferred.setdefault(replicas[0], []).append(tp)
        live = ctx.live_broker_ids()
        threshold = self.leader_imbalance_per_broker_percentage / 100
        for broker, tps in sorted(by_preferred.items()):
            not_led = [
                tp for tp in tps if (s := ctx.leadership.get(tp)) is not None and s.leader != broker
            ]
            ratio = len(not_led) / len(tps)
            if ratio <= threshold:
                continue
            candidates = [
                tp for tp in not_led if broker in live and broker in ctx.leadership[tp].isr
            ]
            _log.info(
                "leader imbalance of broker %d is %.0f%%: moving %d partitions back to it",
                broker,
                ratio * 100,
                len(candidates),
            )
            await self._on_replica_election(
                candidates, ELECTION_PREFERRED, ElectionTrigger.AutoTriggered
            )

    # ------------------------------------------------------------------ partition reassignment

    async def alter_partition_reassignments(
        self,
        reassignments: Mapping[TopicPartition, list[int] | None],
        allow_replication_factor_change: bool = True,
    ) -> dict[TopicPartition, ApiError] | ApiError:
        """AlterPartitionReassignments (KIP-455): per partition, its target
        replicas, or None to cancel the reassignment in flight. An error for
        the whole request (NOT_CONTROLLER) or one per partition."""
        wanted = dict(reassignments)
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[dict[TopicPartition, ApiError] | ApiError] = loop.create_future()

        def reply(result: dict[TopicPartition, ApiError] | ApiError) -> None:
            if not answer.done():
                answer.set_result(result)

        async def process() -> None:
            try:
                reply(
                    await self.partition_reassignment_manager.process_api_partition_reassignment(
                        wanted, allow_replication_factor_change
                    )
                )
            except ControllerMovedError:
                reply(ApiError(ErrorCode.NOT_CONTROLLER))
                await self._elect()
            except Exception as e:
                _log.exception("partition reassignment failed")
                reply(ApiError(ErrorCode.UNKNOWN_SERVER_ERROR, str(e)))

        self._put(
            "ApiPartitionReassignment", process, lambda: reply(ApiError(ErrorCode.NOT_CONTROLLER))
        )
        return await answer

    async def list_partition_reassignments(
        self, partitions: Iterable[TopicPartition] | None
    ) -> dict[TopicPartition, ReplicaAssignment] | ApiError:
        """ListPartitionReassignments: the reassignments in flight among
        ``partitions`` (None: all of them)."""
        wanted = None if partitions is None else set(partitions)
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[dict[TopicPartition, ReplicaAssignment] | ApiError] = (
            loop.create_future()
        )

        def reply(result: dict[TopicPartition, ReplicaAssignment] | ApiError) -> None:
            if not answer.done():
                answer.set_result(result)

        async def process() -> None:
            if not self.is_active:
                reply(ApiError(ErrorCode.NOT_CONTROLLER))
                return
            reply(self.partition_reassignment_manager.list_partition_reassignments(wanted))

        self._put(
            "ListPartitionReassignments", process, lambda: reply(ApiError(ErrorCode.NOT_CONTROLLER))
        )
        return await answer


def _not_controller() -> ControlledShutdownResult:
    return ControlledShutdownResult(
        ErrorCode.NOT_CONTROLLER, "Controller moved to another broker. Aborting controlled shutdown"
    )
