"""A Jepsen-style workload for pylog's partition suite: clients that record
every operation, a nemesis that injects faults into a real cluster through
:class:`~pylog.testing.network_faults.NetworkFaults`, and a checker that reads
the history against the brokers' segment files.

The clients are stock: two confluent-kafka producers with acks=all (one
idempotent, one not) writing unique values round-robin over the topic's
partitions, and a confluent-kafka consumer in a group committing what it
read. Each fault is applied, held, healed, and followed by a recovery phase
that measures the liveness bounds (every ISR full again, every producer
acknowledged again, one controller over every live broker).

The checker's properties, as in Jepsen's Kafka workloads:

* **lost writes**: every acknowledged record is on every replica at the
  offset it was acknowledged at;
* **offsets reused**: no two acknowledged records share an offset;
* **duplicates**: the idempotent producer's records are each stored once;
* **replicas diverge**: below the high watermark every replica holds the
  same records at the same offsets;
* **non-monotonic polls**: within one assignment, a consumer's offsets of a
  partition only grow;
* **phantom reads**: every record a consumer saw is in the log at the offset
  it saw it at (it read nothing that was later truncated away);
* **committed offsets outside what was read**: a committed offset is at most
  one past the highest offset the group read of that partition;
* **acks=all below min.insync.replicas**: a record acknowledged while fewer
  than min.insync.replicas brokers were alive is held, at its offset, by
  min.insync.replicas replicas, counting the dead brokers' logs as the kill
  left them (it was on them before they died);
* **aborted reads** (a third, transactional producer commits its
  transactions and aborts one in four on purpose; the consumers read
  committed): no consumer reads a record of a transaction whose commit was
  never asked for, nor of one that was aborted; and a fresh read_committed
  read of the whole topic at the end returns every committed record and no
  aborted one.
"""

from __future__ import annotations

import random
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pylog import _native
from pylog.testing import ClusterBroker, LocalCluster

WAIT = 60.0  # upper bound of a wait: only catches hangs


# ---------------------------------------------------------------- history


@dataclass(slots=True)
class Ack:
    producer: str
    value: str
    partition: int
    offset: int
    at: float  # time.monotonic() of the delivery report


@dataclass(slots=True)
class Poll:
    generation: int  # the consumer's assignment count when it read
    partition: int
    offset: int
    value: str
    at: float = 0.0  # time.monotonic() of the poll


@dataclass
class History:
    acks: list[Ack] = field(default_factory=list)
    failed: list[tuple[str, str, float]] = field(default_factory=list)  # producer, error, at
    attempted: set[str] = field(default_factory=set)
    polls: list[Poll] = field(default_factory=list)
    #: the transactional producer's values: when its transaction's commit was
    #: asked for, and how the transaction ended (committed, aborted, unknown)
    commit_asked: dict[str, float] = field(default_factory=dict)
    outcome: dict[str, str] = field(default_factory=dict)
    last_txn_commit: float = float("-inf")
    commits: list[tuple[int, int, float]] = field(default_factory=list)  # partition, offset, at
    #: (producer, partition) -> its latest ack
    last_ack: dict[tuple[str, int], float] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def acked_since(self, producer: str, after: float, partitions: int = 1) -> bool:
        """Whether ``producer`` has had an ack since ``after`` on each of the
        first ``partitions`` partitions (one stuck partition is a liveness
        failure even while the other one flows)."""
        with self.lock:
            return all(
                self.last_ack.get((producer, p), float("-inf")) > after for p in range(partitions)
            )


class WorkloadProducer(threading.Thread):
    """Writes ``<name>-<n>`` to partition ``n % partitions``, acks=all."""

    def __init__(
        self,
        name: str,
        bootstrap: str,
        topic: str,
        partitions: int,
        history: History,
        **conf: object,
    ) -> None:
        super().__init__(name=name, daemon=True)
        from confluent_kafka import Producer

        self.topic, self.partitions, self.history = topic, partitions, history
        self.conf: dict[str, object] = {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 5,
            "message.timeout.ms": 60_000,
            "topic.metadata.refresh.interval.ms": 1000,
            "retry.backoff.max.ms": 500,
            # A fatal error (idempotence) comes here with its reason; the
            # delivery reports after it only say _FATAL.
            "error_cb": self._error,
            **conf,
        }
        self.producer = Producer(self.conf)
        self.stop_event = threading.Event()

    def _error(self, err: object) -> None:
        if getattr(err, "fatal", lambda: False)():
            with self.history.lock:
                self.history.failed.append((self.name, f"fatal: {err}", time.monotonic()))

    def _delivered(self, err: object, msg: object) -> None:
        now = time.monotonic()
        h = self.history
        with h.lock:
            if err is not None:
                h.failed.append((self.name, str(err), now))
            else:
                h.last_ack[(self.name, msg.partition())] = now  # type: ignore[attr-defined]
                h.acks.append(
                    Ack(
                        self.name,
                        msg.value().decode(),  # type: ignore[attr-defined]
                        msg.partition(),  # type: ignore[attr-defined]
                        msg.offset(),  # type: ignore[attr-defined]
                        now,
                    )
                )

    def run(self) -> None:
        n = 0
        while not self.stop_event.is_set():
            value = f"{self.name}-{n}"
            try:
                self.producer.produce(
                    self.topic, value.encode(), partition=n % self.partitions,
                    on_delivery=self._delivered,
                )  # fmt: skip
            except BufferError:
                self.producer.poll(0.1)
                continue
            with self.history.lock:
                self.history.attempted.add(value)
            n += 1
            self.producer.poll(0)
            time.sleep(0.002)
        self.producer.flush(WAIT)

    def stop(self) -> None:
        self.stop_event.set()
        self.join(WAIT + 10)


class TransactionalProducer(WorkloadProducer):
    """Writes ``txn-<n>`` in transactions of ``size`` records spread over the
    partitions, commits them and aborts one in four on purpose, and records
    each transaction's outcome. A commit or abort that fails retriably is
    retried, one that must abort is aborted; after a fatal error (fenced, a
    timed-out transaction) the outcome is unknown and a new producer with the
    same transactional.id takes over — its InitProducerId ends what the old
    one left open."""

    def __init__(
        self, bootstrap: str, topic: str, partitions: int, history: History, *, size: int = 10
    ) -> None:
        super().__init__(
            "txn", bootstrap, topic, partitions, history,
            **{"transactional.id": "jepsen-txn", "transaction.timeout.ms": 30_000,
              "message.timeout.ms": 30_000},
        )  # fmt: skip
        self.size = size
        self.rng = random.Random(7)

    def _init(self) -> None:
        from confluent_kafka import KafkaException, Producer

        while not self.stop_event.is_set():
            try:
                self.producer.init_transactions(WAIT)
                return
            except KafkaException as e:
                if not e.args[0].retriable():
                    self.producer = Producer(self.conf)
                time.sleep(0.5)

    def _end(self, commit: bool) -> str:
        from confluent_kafka import KafkaException

        while True:
            try:
                if commit:
                    self.producer.commit_transaction(WAIT)
                    return "committed"
                self.producer.abort_transaction(WAIT)
                return "aborted"
            except KafkaException as e:
                err = e.args[0]
                if err.txn_requires_abort():
                    commit = False
                elif not err.retriable():
                    raise
                time.sleep(0.1)

    def run(self) -> None:
        from confluent_kafka import KafkaException, Producer

        n = 0
        self._init()
        while not self.stop_event.is_set():
            values = [f"txn-{n + i}" for i in range(self.size)]
            n += self.size
            with self.history.lock:
                self.history.attempted.update(values)
            outcome = "unknown"
            try:
                self.producer.begin_transaction()
                for i, v in enumerate(values):
                    while True:
                        try:
                            self.producer.produce(
                                self.topic, v.encode(), partition=i % self.partitions,
                                on_delivery=self._delivered,
                            )  # fmt: skip
                            break
                        except BufferError:
                            self.producer.poll(0.1)
                commit = self.rng.random() >= 0.25
                if not commit:
                    # On the log before the abort, or librdkafka would drop
                    # them unsent and there would be nothing to hide.
                    self.producer.flush(WAIT)
                if commit:
                    now = time.monotonic()
                    with self.history.lock:
                        for v in values:
                            self.history.commit_asked[v] = now
                outcome = self._end(commit)
            except KafkaException as e:
                with self.history.lock:
                    self.history.failed.append((self.name, f"transaction: {e}", time.monotonic()))
                self.producer = Producer(self.conf)
                self._init()
            with self.history.lock:
                for v in values:
                    self.history.outcome[v] = outcome
                if outcome == "committed":
                    self.history.last_txn_commit = time.monotonic()
            self.producer.poll(0)
        self.producer.flush(WAIT)


class WorkloadConsumer(threading.Thread):
    """A group member reading the topic and committing what it read."""

    def __init__(self, bootstrap: str, topic: str, group: str, history: History) -> None:
        super().__init__(name="consumer", daemon=True)
        from confluent_kafka import Consumer

        self.history = history
        self.generation = 0
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 10_000,
                "topic.metadata.refresh.interval.ms": 1000,
            }
        )
        self.consumer.subscribe([topic], on_assign=self._assigned)
        self.stop_event = threading.Event()

    def _assigned(self, consumer: object, partitions: object) -> None:
        self.generation += 1

    def run(self) -> None:
        from confluent_kafka import KafkaException, TopicPartition

        h = self.history
        since_commit = 0
        positions: dict[int, int] = {}
        while not self.stop_event.is_set():
            msg = self.consumer.poll(0.2)
            if msg is None or msg.error() is not None:
                continue
            p, o = msg.partition(), msg.offset()
            with h.lock:
                h.polls.append(Poll(self.generation, p, o, msg.value().decode(), time.monotonic()))
            positions[p] = o + 1
            since_commit += 1
            if since_commit >= 200:
                since_commit = 0
                offsets = [TopicPartition(msg.topic(), q, off) for q, off in positions.items()]
                try:
                    done = self.consumer.commit(offsets=offsets, asynchronous=False)
                except KafkaException:
                    continue  # a commit during a fault may fail; it is not a violation
                now = time.monotonic()
                with h.lock:
                    for tp in done or []:
                        if tp.error is None:
                            h.commits.append((tp.partition, tp.offset, now))
        self.consumer.close()

    def stop(self) -> None:
        self.stop_event.set()
        self.join(WAIT + 10)


# ---------------------------------------------------------------- the cluster's logs


def segment_records(log_dir: str, topic: str, partition: int) -> dict[int, str]:
    """Offset → value of every record in a partition's segment files under
    ``log_dir``, decoded in process by the native batch iterator (one call per
    file; a torn tail left by a kill is left out, as a reader would)."""
    d = Path(log_dir) / f"{topic}-{partition}"
    records: dict[int, str] = {}
    for path in sorted(d.glob("*.log")):
        batches, _ = _native.decode_batches(path.read_bytes())
        for info, decoded in batches:
            if info.is_control:
                continue
            for r in decoded:
                records[r.offset] = (r.value or b"").decode()
    return records


def high_watermarks(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "hw-probe"})
    try:
        return {
            p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=WAIT)[1]
            for p in range(partitions)
        }
    finally:
        c.close()


# ---------------------------------------------------------------- faults


@dataclass
class Recovery:
    """How long, after a fault healed, each liveness property took (seconds)."""

    fault: str
    isr_full: float
    producers: dict[str, float]
    controller: float


@dataclass
class KillWindow:
    """Brokers killed at ``at``: their partition logs as the kill left them."""

    at: float
    until: float
    snapshots: dict[int, str]  # broker id -> copied log dir
    alive: int  # brokers running meanwhile


class Nemesis:
    """Faults against one cluster and topic; each ``<fault>()`` holds its fault
    and heals it before it returns."""

    def __init__(
        self,
        cluster: LocalCluster,
        topic: str,
        partitions: int,
        hold: float | tuple[float, float] = 12.0,
        rng: random.Random | None = None,
    ) -> None:
        assert cluster.faults is not None, "the cluster needs network_faults=True"
        self.cluster = cluster
        self.faults = cluster.faults
        self.topic = topic
        self.partitions = partitions
        self.hold = hold
        self.rng = rng or random.Random(0)
        self.kill_windows: list[KillWindow] = []
        self.snapshot_root = tempfile.mkdtemp(prefix="pylog-nemesis-")

    # -- who is where

    def leader(self) -> int:
        return self.cluster.wait_for_leader(self.topic, 0, timeout=WAIT)

    def followers(self, leader: int) -> list[int]:
        return [b for b in self.cluster.brokers if b != leader]

    def controller(self) -> int:
        self.cluster.wait_for(lambda: self.cluster.controller() is not None, "a controller", WAIT)
        c = self.cluster.controller()
        assert c is not None
        return c

    # -- the faults

    def isolate_leader(self) -> None:
        """The leader cut from the other brokers both ways; clients and
        ZooKeeper still reach it."""
        self.faults.isolate(self.leader())
        self._hold_and_heal()

    def leader_one_way_out(self) -> None:
        """Nothing the leader sends reaches the other brokers."""
        leader = self.leader()
        for f in self.followers(leader):
            self.faults.cut(leader, f, one_way=True)
        self._hold_and_heal()

    def leader_one_way_in(self) -> None:
        """Nothing the other brokers send reaches the leader."""
        leader = self.leader()
        for f in self.followers(leader):
            self.faults.cut(f, leader, one_way=True)
        self._hold_and_heal()

    def leader_listener_stalled(self) -> None:
        """The leader's inter-broker listener stops answering: what the other
        brokers open to it holds both ways, what it opens to them flows."""
        leader = self.leader()
        for f in self.followers(leader):
            self.faults.stall_connections(f, leader)
        self._hold_and_heal()

    def follower_isolated(self) -> None:
        """One follower cut from every other broker."""
        self.faults.isolate(self.rng.choice(self.followers(self.leader())))
        self._hold_and_heal()

    def leader_from_zookeeper(self) -> None:
        """The leader loses ZooKeeper (its session expires) while clients and
        the other brokers still reach it."""
        self.faults.cut(self.leader(), "zk")
        self._hold_and_heal()

    def follower_from_zookeeper(self) -> None:
        """A follower loses ZooKeeper (its session expires, the controller
        takes it out of every ISR and stops talking to it) while it still
        reaches the leader."""
        self.faults.cut(self.rng.choice(self.followers(self.leader())), "zk")
        self._hold_and_heal()

    def controller_from_zookeeper(self) -> None:
        self.faults.cut(self.controller(), "zk")
        self._hold_and_heal()

    def leader_from_clients(self) -> None:
        self.faults.cut("client", self.leader())
        self._hold_and_heal()

    def reset_leader_links(self) -> None:
        """Every connection between the leader and the other brokers reset, and
        refused for a few seconds."""
        leader = self.leader()
        for f in self.followers(leader):
            self.faults.reset(leader, f)
        time.sleep(3)
        self.faults.heal()

    def sever_leader_links(self) -> None:
        """The connections between the leader and the other brokers lost for
        good, mid-request; after the heal only new connections flow, so each
        end must notice by its own timeout (replica.socket.timeout.ms,
        controller.socket.timeout.ms)."""
        leader = self.leader()
        for f in self.followers(leader):
            self.faults.sever(leader, f)
        self._hold_and_heal()

    def pause_leader(self) -> None:
        b = self.cluster.broker(self.leader())
        b.pause()
        time.sleep(self.held() / 2)
        b.resume()

    def kill_follower(self) -> None:
        b = self.cluster.broker(self.rng.choice(self.followers(self.leader())))
        self._kill([b])
        time.sleep(self.held() / 2)
        self._restart([b])

    def kill_two(self) -> None:
        """The leader and one follower, or both followers, SIGKILLed together
        with produces in flight; the survivor alone is below
        min.insync.replicas until they return."""
        leader = self.leader()
        followers = self.followers(leader)
        doomed = [leader, self.rng.choice(followers)] if self.rng.random() < 0.5 else followers
        brokers = [self.cluster.broker(b) for b in doomed]
        self._kill(brokers)
        time.sleep(self.held())
        self._restart(brokers)

    def kill_followers_one_lagging(self) -> None:
        """Both followers SIGKILLed, one of them paused a while before: the
        leader drops the lagging one from the ISR first, and its high
        watermark moves up to the other's last fetch — acknowledgements that
        arrive seconds after the kill, for records the dead follower holds."""
        leader = self.leader()
        lagging, other = (self.cluster.broker(b) for b in self.followers(leader))
        lagging.pause()
        time.sleep(2.5)
        self._kill([lagging, other])
        time.sleep(self.held())
        self._restart([lagging, other])

    ALL: tuple[str, ...] = (
        "isolate_leader",
        "leader_one_way_out",
        "leader_one_way_in",
        "leader_listener_stalled",
        "follower_isolated",
        "leader_from_zookeeper",
        "follower_from_zookeeper",
        "controller_from_zookeeper",
        "leader_from_clients",
        "reset_leader_links",
        "sever_leader_links",
        "pause_leader",
        "kill_follower",
        "kill_two",
        "kill_followers_one_lagging",
    )

    # -- helpers

    def held(self) -> float:
        """How long the next fault lasts: ``hold``, or a draw from its range."""
        if isinstance(self.hold, tuple):
            return self.rng.uniform(*self.hold)
        return self.hold

    def _hold_and_heal(self) -> None:
        time.sleep(self.held())
        self.faults.heal()

    def _kill(self, brokers: list[ClusterBroker]) -> None:
        at = time.monotonic()
        for b in brokers:
            b.kill()
        snaps: dict[int, str] = {}
        for b in brokers:
            dest = Path(self.snapshot_root) / f"{len(self.kill_windows)}-{b.broker_id}"
            dest.mkdir(parents=True)
            for p in range(self.partitions):
                src = Path(b.log_dir) / f"{self.topic}-{p}"
                if src.is_dir():
                    shutil.copytree(src, dest / src.name)
            snaps[b.broker_id] = str(dest)
        alive = sum(1 for b in self.cluster.brokers.values() if b.running)
        self.kill_windows.append(KillWindow(at, float("inf"), snaps, alive))

    def _restart(self, brokers: list[ClusterBroker]) -> None:
        # A broker registers /brokers/ids/<id> as it starts, and refuses to
        # start while another ZooKeeper session holds that znode, as Kafka's
        # does (KafkaZkClient's CheckedEphemeral: NODEEXISTS, a fatal start-up
        # error). A killed broker's znode lives until ZooKeeper expires its
        # session (zookeeper.session.timeout.ms, up to a tick later), so a
        # restart inside that window fails; an operator waits for it, and so
        # does the nemesis.
        ids = {b.broker_id for b in brokers}
        self.cluster.wait_for(
            lambda: not ids.intersection(self.cluster.registered()),
            f"the registrations of killed brokers {sorted(ids)} to expire",
            WAIT,
        )
        self.kill_windows[-1].until = time.monotonic()
        for b in brokers:
            b.start()

    def close(self) -> None:
        shutil.rmtree(self.snapshot_root, ignore_errors=True)


def recover(
    cluster: LocalCluster,
    topic: str,
    partitions: int,
    history: History,
    producers: list[str],
    fault: str,
    healed_at: float,
) -> Recovery:
    """Wait for every liveness property after a heal; measure each."""

    def full_isr() -> bool:
        return all(
            (r := cluster.replicas(topic, p)) and cluster.isr(topic, p) == sorted(r)
            for p in range(partitions)
        )

    def settled() -> bool:
        running = sorted(b for b, br in cluster.brokers.items() if br.running)
        return cluster.controller() is not None and cluster.registered() == running

    cluster.wait_for(settled, f"the controller to settle after {fault}", WAIT)
    controller = time.monotonic() - healed_at
    cluster.wait_for(full_isr, f"every ISR to be full after {fault}", WAIT)
    isr = time.monotonic() - healed_at
    times: dict[str, float] = {}
    for name in producers:
        try:
            cluster.wait_for(
                lambda name=name: history.acked_since(name, healed_at, partitions),
                f"producer {name} to be acknowledged on every partition after {fault}",
                WAIT,
            )
        except TimeoutError as e:
            # Say why: a producer that stopped has its errors in the history.
            with history.lock:
                errors = [err for who, err, _ in history.failed if who == name]
            fatal = [err for err in errors if err.startswith("fatal:")]
            raise TimeoutError(
                f"{e}; {fatal[:1]}, its last delivery errors ({len(errors)} in all): {errors[-3:]}"
            ) from None
        times[name] = time.monotonic() - healed_at
    if "txn" in producers:
        cluster.wait_for(
            lambda: history.last_txn_commit > healed_at,
            f"a transaction to commit after {fault}",
            WAIT,
        )
        times["txn commit"] = time.monotonic() - healed_at
    return Recovery(fault, isr, times, controller)


# ---------------------------------------------------------------- checker


def read_committed(bootstrap: str, topic: str, hws: dict[int, int]) -> list[Poll]:
    """Every record a fresh read_committed consumer gets from the start of
    each partition up to its high watermark (the LSO reaches it once no
    transaction is open)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "final-reader",
                  "isolation.level": "read_committed", "enable.auto.commit": False})  # fmt: skip
    got: list[Poll] = []
    try:
        c.assign([TopicPartition(topic, p, 0) for p in hws])
        deadline = time.monotonic() + 2 * WAIT
        while time.monotonic() < deadline:
            positions = c.position([TopicPartition(topic, p) for p in hws])
            if all(tp.offset >= hws[tp.partition] for tp in positions):
                break
            msg = c.poll(0.2)
            if msg is not None and msg.error() is None:
                got.append(
                    Poll(0, msg.partition(), msg.offset(), msg.value().decode(), time.monotonic())
                )
        else:
            raise TimeoutError(f"read_committed never reached the high watermarks {hws}")
    finally:
        c.close()
    return got


def check_transactions(topic: str, history: History, final_read: list[Poll]) -> list[str]:
    """The aborted-reads properties of the module docstring."""
    problems: list[str] = []

    def aborted(poll: Poll, when: str) -> None:
        where = (
            f"{poll.value} read at {topic}-{poll.partition}@{poll.offset} {when} "
            f"(its transaction: {history.outcome.get(poll.value, 'open')})"
        )
        asked = history.commit_asked.get(poll.value)
        if asked is None or poll.at < asked:
            problems.append(f"uncommitted read: {where}, before its commit was asked for")
        elif history.outcome.get(poll.value) == "aborted":
            problems.append(f"aborted read: {where}")

    for poll in history.polls:
        if poll.value.startswith("txn-"):
            aborted(poll, "by the group")
    for poll in final_read:
        if poll.value.startswith("txn-"):
            aborted(poll, "at the end")
    read = {poll.value for poll in final_read}
    missing = sorted(v for v, o in history.outcome.items() if o == "committed" and v not in read)
    if missing:
        problems.append(f"committed but not read: {len(missing)} records, e.g. {missing[:5]}")
    return problems


def check(
    cluster: LocalCluster,
    topic: str,
    partitions: int,
    history: History,
    idempotent: set[str],
    kill_windows: list[KillWindow],
    min_insync: int,
) -> list[str]:
    """Every property of the module docstring over the history; the
    violations found, each a sentence."""
    problems: list[str] = []
    hws = high_watermarks(cluster.bootstrap_servers, topic, partitions)
    logs = {
        (b.broker_id, p): segment_records(b.log_dir, topic, p)
        for b in cluster.brokers.values()
        for p in range(partitions)
    }
    # Replicas agree below the high watermark; the leader's copy is the log.
    final: dict[int, dict[int, str]] = {}
    for p in range(partitions):
        leader = cluster.leader(topic, p)
        assert leader is not None
        final[p] = logs[(leader, p)]
        for b in cluster.brokers:
            mine = {o: v for o, v in logs[(b, p)].items() if o < hws[p]}
            theirs = {o: v for o, v in final[p].items() if o < hws[p]}
            if mine != theirs:
                diff = sorted(set(mine.items()) ^ set(theirs.items()))[:5]
                problems.append(
                    f"replicas diverge: broker {b} {topic}-{p} below HW {hws[p]}: {diff}"
                )
    # A delivery report may say "delivered" without an offset (librdkafka's
    # idempotent producer does when it learns a retried batch was already
    # written: RD_KAFKA_MSG_STATUS_PERSISTED with the offset unknown). Such a
    # record is checked by its value: in the log (once, for an idempotent
    # producer: the duplicates check below), at whatever offset it holds.
    where = {(p, v): o for p, recs in final.items() for o, v in recs.items()}
    for a in history.acks:
        if a.offset is None or a.offset < 0:
            a.offset = where.get((a.partition, a.value), -1)
    at_offset: dict[tuple[int, int], str] = {}
    for a in history.acks:
        key = (a.partition, a.offset)
        if key in at_offset and at_offset[key] != a.value:
            problems.append(f"offset reused: {topic}-{a.partition}@{a.offset} acked for "
                            f"{at_offset[key]} and {a.value}")  # fmt: skip
        at_offset[key] = a.value
        if final[a.partition].get(a.offset) != a.value:
            problems.append(f"lost write: {a.value} acked at {topic}-{a.partition}@{a.offset}, "
                            f"the log holds {final[a.partition].get(a.offset)!r}")  # fmt: skip
    for p in range(partitions):
        seen: dict[str, int] = {}
        for o, v in final[p].items():
            producer = v.rsplit("-", 1)[0]
            if producer in idempotent and v in seen:
                problems.append(f"duplicate: {v} at {topic}-{p}@{seen[v]} and @{o}")
            seen[v] = o
            if v not in history.attempted:
                problems.append(f"phantom write: {v} at {topic}-{p}@{o} was never sent")
    last: dict[tuple[int, int], int] = {}
    highest_read: dict[int, int] = {}
    for poll in history.polls:
        key = (poll.generation, poll.partition)
        if key in last and poll.offset <= last[key]:
            problems.append(f"non-monotonic poll: {topic}-{poll.partition}@{poll.offset} after "
                            f"@{last[key]} in assignment {poll.generation}")  # fmt: skip
        last[key] = poll.offset
        highest_read[poll.partition] = max(highest_read.get(poll.partition, -1), poll.offset)
        if final[poll.partition].get(poll.offset) != poll.value:
            problems.append(f"phantom read: {poll.value} read at {topic}-{poll.partition}@"
                            f"{poll.offset}, the log holds "
                            f"{final[poll.partition].get(poll.offset)!r}")  # fmt: skip
    for p, offset, _ in history.commits:
        if offset < 0 or offset > highest_read.get(p, -1) + 1:
            problems.append(f"commit outside what was read: {topic}-{p}@{offset}, "
                            f"highest read {highest_read.get(p, -1)}")  # fmt: skip
    for w in kill_windows:
        if w.alive >= min_insync:
            # The survivors can back an acknowledgement on their own; their
            # logs now say nothing of when they got a record.
            continue
        dead = {b: {p: segment_records(d, topic, p) for p in range(partitions)}
                for b, d in w.snapshots.items()}  # fmt: skip
        for a in history.acks:
            if not w.at <= a.at <= w.until:
                continue
            # The survivor's log, plus each dead broker's log as the kill left it.
            holders = 1 + sum(
                1 for recs in dead.values() if recs[a.partition].get(a.offset) == a.value
            )
            if holders < min_insync:
                problems.append(f"acks=all below min.insync.replicas: {a.value} at {topic}-"
                                f"{a.partition}@{a.offset} acked {a.at - w.at:.1f} s after brokers "
                                f"{sorted(w.snapshots)} died, held by {holders}")  # fmt: skip
    if history.outcome:
        final_read = read_committed(cluster.bootstrap_servers, topic, hws)
        problems += check_transactions(topic, history, final_read)
    return problems


def run_schedule(
    cluster: LocalCluster,
    faults: list[str] | Callable[[], str | None],
    *,
    topic: str = "jepsen",
    partitions: int = 2,
    hold: float | tuple[float, float] = 12.0,
    seed: int = 0,
    report: Callable[[str], None] = print,
) -> tuple[list[str], list[Recovery], History]:
    """Run the workload through ``faults`` (names of :class:`Nemesis` methods,
    or a function giving the next one, None to stop); return the checker's
    violations, the recovery times and the history."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(topic, partitions, 3, config={"min.insync.replicas": "2"})])[
        topic
    ].result(WAIT)
    cluster.wait_for_full_isr(topic, partitions, timeout=WAIT)
    history = History()
    names = ["idempotent", "plain", "txn"]
    producers = [
        WorkloadProducer("idempotent", cluster.bootstrap_servers, topic, partitions, history,
                         **{"enable.idempotence": True, "debug": "eos"}),
        WorkloadProducer("plain", cluster.bootstrap_servers, topic, partitions, history,
                         **{"enable.idempotence": False, "retries": 2**31 - 1,
                            "max.in.flight.requests.per.connection": 1}),
        TransactionalProducer(cluster.bootstrap_servers, topic, partitions, history),
    ]  # fmt: skip
    consumer = WorkloadConsumer(cluster.bootstrap_servers, topic, "jepsen-group", history)
    nemesis = Nemesis(cluster, topic, partitions, hold, random.Random(seed))
    recoveries: list[Recovery] = []
    try:
        for t in (*producers, consumer):
            t.start()
        start = time.monotonic()
        cluster.wait_for(
            lambda: all(history.acked_since(n, start, partitions) for n in names),
            "first acks",
            WAIT,
        )
        queue = list(faults) if isinstance(faults, list) else None
        while True:
            fault = (queue.pop(0) if queue else None) if queue is not None else faults()  # type: ignore[operator]
            if fault is None:
                break
            began = time.monotonic()
            getattr(nemesis, fault)()
            healed = time.monotonic()
            r = recover(cluster, topic, partitions, history, names, fault, healed)
            recoveries.append(r)
            report(f"{fault}: held {healed - began:.1f} s; after the heal: controller "
                   f"{r.controller:.1f} s, full ISR {r.isr_full:.1f} s, producers "
                   + ", ".join(f"{k} {v:.1f} s" for k, v in r.producers.items()))  # fmt: skip
    finally:
        for t in producers:
            t.stop()
        consumer.stop()
    cluster.wait_for_full_isr(topic, partitions, timeout=WAIT)
    problems = check(
        cluster, topic, partitions, history, {"idempotent", "txn"}, nemesis.kill_windows, 2
    )
    for w in nemesis.kill_windows:
        late = [a.at - w.at for a in history.acks if w.at <= a.at <= w.until]
        if late:
            report(f"brokers {sorted(w.snapshots)} killed: {len(late)} acks arrived after the "
                   f"kill, the last {max(late):.2f} s after it")  # fmt: skip
    nemesis.close()
    return problems, recoveries, history
