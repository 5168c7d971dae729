"""Cluster figures for `make bench`: a real ZooKeeper and three
`pylog broker start` processes (``pylog.testing.LocalCluster``), driven by
confluent-kafka and kazoo from this process, on loopback.

    .venv/bin/python bench/cluster_bench.py [--only replication,failover,controller]
        [--seconds 3] [--kills 10] [--partitions 1000] [--session-timeout-ms 6000]

1. replication cost: produce throughput of 1 KiB records (a throughput-tuned
   producer, bounded in time and count) to an RF-3 topic with acks=all, and
   with acks=1, against acks=1 to an RF-1 topic of the same cluster in the
   same run;
2. failover: a producer sends 100-byte records with acks=all every ~2 ms
   (short retry and reconnect backoffs); the partition's leader is SIGKILLed
   ``--kills`` times (restarted, full ISR again, between kills). Each kill is
   timed to the controller noticing (its log line: the dead broker's
   ZooKeeper session expired), to the new leader in the partition's state
   znode (a kazoo watch), and to the acknowledgement of the first record sent
   after the kill. A SIGKILLed broker is only noticed when its ZooKeeper
   session expires, so the session timeout is printed beside the figures.
   Between the new leader and the first acknowledgement is mostly the client:
   librdkafka looks a leaderless partition's leader up once a second (its
   debug log shows "broker is down: re-query");
3. controller: ``--partitions`` partitions, RF 3, over the three brokers; a
   broker that is not the controller is SIGKILLed. Timed from the
   controller's "brokers [n] are gone" line to the last of the partitions
   the broker led showing another leader in its state znode, and to every
   partition's ISR without it (one kazoo watch per state znode), beside the
   same number of fenced state writes made one after another from this
   process (the floor of a controller that writes one partition at a time),
   and the controller's LeaderElectionRateAndTimeMs from its /metrics.

Every load and wait is bounded; nothing here fails on timing. With the test
session timeout (6 s) the whole run takes about 2-3 minutes on 2 cores;
``--session-timeout-ms 18000`` (Kafka's default) makes the failover figure
take about 3 minutes more.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import http.client
import json
import os
import re
import socket
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from datetime import datetime
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient
from storage_bench import Figure, print_table

from pylog.testing import LocalCluster

KiB = 1 << 10
MiB = 1 << 20
WAIT = 120.0  # upper bound of every wait: only catches hangs

THROUGHPUT_PRODUCER: dict[str, object] = {
    "linger.ms": 5,
    "batch.size": MiB,
    "batch.num.messages": 1_000_000,
    "message.max.bytes": 2 * MiB,
    "compression.type": "none",
    "queue.buffering.max.messages": 2_000_000,
    "queue.buffering.max.kbytes": 1024 * 1024,
    "max.in.flight.requests.per.connection": 5,
    "enable.idempotence": False,
    "delivery.report.only.error": True,
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def create_topic(bootstrap: str, topic: str, partitions: int, rf: int, **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, rf, config=config)])[topic].result(WAIT)


def start_cluster(session_timeout_ms: int, log_dir: str | None) -> LocalCluster:
    per_broker = {i: {"metrics.port": free_port()} for i in (1, 2, 3)}
    c = LocalCluster(
        3,
        {"zookeeper.session.timeout.ms": str(session_timeout_ms)},
        per_broker=per_broker,
        directory=log_dir,
    )
    c.start()
    return c


def metrics(c: LocalCluster, broker_id: int) -> dict[str, float]:
    port = c.broker(broker_id).overrides["metrics.port"]
    for attempt in range(10):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
                text = r.read().decode()
            break
        except (OSError, http.client.HTTPException) as e:
            # 503 or a closed connection: the broker's event loop, which
            # renders the metrics, was busy past the endpoint's deadline.
            print(f"  /metrics of broker {broker_id}: {e!r}", file=sys.stderr, flush=True)
            if attempt == 9:
                raise
            time.sleep(0.5)
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


_LOG_TIME = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")


def log_lines_after(c: LocalCluster, broker_id: int, wall: float, pattern: str) -> list[float]:
    """Wall-clock times of the broker's log lines after ``wall`` that match."""
    rx = re.compile(pattern)
    out = []
    with open(c.broker(broker_id).log_file, errors="replace") as f:
        for line in f:
            m = _LOG_TIME.match(line)
            if m is None or rx.search(line) is None:
                continue
            t = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
            if t >= wall - 0.001:
                out.append(t)
    return out


def wait_for(predicate: Callable[[], Any], what: str, timeout: float = WAIT) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = predicate()
        if got:
            return got
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.01)


# ---------------------------------------------------------------- 1. replication


def produce_for(
    bootstrap: str, topic: str, acks: str, seconds: float, max_records: int
) -> tuple[int, float]:
    """Produce 1 KiB records to partition 0 for ``seconds`` or ``max_records``
    (then flush), at most 64 MiB queued in the client. (records, elapsed)."""
    errors: list[KafkaError] = []

    def on_error(err: KafkaError | None, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            **THROUGHPUT_PRODUCER,
            "acks": acks,
            "on_delivery": on_error,
        }
    )
    messages = [{"value": os.urandom(KiB)} for _ in range(64)] * 4  # 256 KiB a call
    p.produce_batch(topic, messages[:1], partition=0)  # connect + metadata outside the clock
    p.flush(30)
    sent = 0
    start = time.perf_counter()
    deadline = start + seconds
    while time.perf_counter() < deadline and sent < max_records:
        if len(p) > 64 * KiB:
            p.poll(0.001)
            continue
        n = p.produce_batch(topic, messages, partition=0)
        if n != len(messages):
            raise RuntimeError(f"produce_batch queued {n} of {len(messages)}")
        sent += n
        p.poll(0)
    left = p.flush(WAIT)
    elapsed = time.perf_counter() - start
    if left or errors:
        raise RuntimeError(f"{left} records not delivered, errors: {errors[:3]}")
    return sent, elapsed


def bench_replication(c: LocalCluster, args: argparse.Namespace) -> list[Figure]:
    create_topic(c.bootstrap_servers, "rep-rf1", 1, 1)
    create_topic(c.bootstrap_servers, "rep-rf3", 1, 3)
    c.wait_for_leader("rep-rf1")
    c.wait_for_full_isr("rep-rf3", timeout=WAIT)
    max_records = 4_000_000
    rows = []
    for topic, acks in (("rep-rf1", "1"), ("rep-rf3", "1"), ("rep-rf3", "all")):
        n, t = produce_for(c.bootstrap_servers, topic, acks, args.seconds, max_records)
        isr = c.isr(topic)
        rows.append((topic, acks, n, t, isr))
        print(
            f"  {topic} acks={acks}: {n:,} x 1 KiB in {t:.2f} s = {n * KiB / t / 1e6:.0f} MB/s, "
            f"ISR after {isr}",
            file=sys.stderr,
            flush=True,
        )
    base_n, base_t = rows[0][2], rows[0][3]
    base_rate = base_n / base_t
    figures = []
    for _topic, acks, n, t, isr in rows[1:]:
        rate = n / t
        full = "" if len(isr) == 3 else f"; ISR shrank to {isr}"
        figures.append(
            Figure(
                f"produce 1 KiB records, RF 3, acks={acks} (leader + 2 followers on 2 cores{full})",
                f"{rate * KiB / 1e6:.0f} MB/s, {rate / 1e3:.0f} k rec/s",
                f"RF 1, acks=1: {base_rate * KiB / 1e6:.0f} MB/s, {base_rate / 1e3:.0f} k rec/s",
                f"{rate / base_rate:.2f}",
                "—",
            )
        )
    return figures


# ---------------------------------------------------------------- 2. failover


class AckTimer(threading.Thread):
    """An idempotent acks=all producer sending a 100-byte record every ~2 ms;
    keeps (sent, acknowledged) perf_counter times of every record."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.topic = topic
        self.bootstrap = bootstrap
        self.producer = self._new_producer()
        self.acks: list[tuple[float, float]] = []
        self.errors: list[str] = []
        #: fatal producer errors (each ends that producer; a new one goes on)
        self.fatal: list[str] = []
        self.stop_event = threading.Event()

    def _new_producer(self) -> Producer:
        return Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 0,
                "message.timeout.ms": 300_000,
                "retry.backoff.ms": 20,
                "retry.backoff.max.ms": 100,
                "reconnect.backoff.ms": 20,
                "reconnect.backoff.max.ms": 200,
                "topic.metadata.refresh.fast.interval.ms": 50,
                "log_level": 0,
            }
        )

    def _done(self, sent: float, err: KafkaError | None, _msg: Any) -> None:
        if err is not None:
            self.errors.append(str(err))
        else:
            self.acks.append((sent, time.perf_counter()))

    def run(self) -> None:
        value = os.urandom(100)
        while not self.stop_event.is_set():
            with_time = functools.partial(self._done, time.perf_counter())
            try:
                with contextlib.suppress(BufferError):  # the queue is full: poll and go on
                    self.producer.produce(self.topic, value, partition=0, on_delivery=with_time)
                self.producer.poll(0.002)
            except KafkaException as e:
                # A fatal error (an idempotent producer's sequence lost sync
                # with the new leader): counted, and a new producer goes on.
                self.fatal.append(str(e))
                print(f"  producer fatal error: {e}", file=sys.stderr, flush=True)
                self.producer.purge()
                self.producer = self._new_producer()
        self.producer.flush(WAIT)

    def first_ack_of_record_sent_after(self, t: float, from_index: int) -> float | None:
        for sent, acked in self.acks[from_index:]:
            if sent > t:
                return acked
        return None

    def last_ack_before(self, t: float) -> float:
        return max((a for _, a in self.acks if a <= t), default=float("nan"))


def new_leader_watch(zk: KazooClient, path: str, dead: int) -> tuple[threading.Event, list[float]]:
    """Set ``when[0]`` to the perf_counter time the state znode first names a
    leader other than ``dead`` (and not -1)."""
    done = threading.Event()
    when: list[float] = []

    def check(data: bytes | None) -> None:
        if data is None or done.is_set():
            return
        leader = int(json.loads(data)["leader"])
        if leader not in (dead, -1):
            when.append(time.perf_counter())
            done.set()

    def on_event(_event: Any) -> None:
        now = time.perf_counter()
        data, _ = zk.get(path, watch=on_event)
        if not done.is_set() and int(json.loads(data)["leader"]) not in (dead, -1):
            when.append(now)
            done.set()

    data, _ = zk.get(path, watch=on_event)
    check(data)
    return done, when


def bench_failover(c: LocalCluster, args: argparse.Namespace) -> list[Figure]:
    topic = "failover"
    create_topic(c.bootstrap_servers, topic, 1, 3, **{"min.insync.replicas": "2"})
    c.wait_for_full_isr(topic, timeout=WAIT)
    producer = AckTimer(c.bootstrap_servers, topic)
    producer.start()
    wait_for(lambda: len(producer.acks) > 10, "the first acknowledgements")
    assert c.zk is not None
    path = f"/brokers/topics/{topic}/partitions/0/state"
    noticed, elected, acked, gaps = [], [], [], []
    controller_kills = 0
    try:
        for i in range(args.kills):
            leader = c.wait_for_leader(topic, timeout=WAIT)
            controller = c.controller()
            before = len(producer.acks)
            wait_for(lambda b=before: len(producer.acks) > b + 5, "acknowledgements")
            done, when = new_leader_watch(c.zk, path, leader)
            index = len(producer.acks)
            wall = time.time()
            t_kill = time.perf_counter()
            c.broker(leader).kill()
            done.wait(WAIT)
            t_ack = wait_for(
                lambda t=t_kill, i=index: producer.first_ack_of_record_sent_after(t, i),
                "an acknowledgement after the kill",
            )
            # The broker that noticed: the controller, or (when the dead leader
            # was the controller) the broker that took the office.
            if controller == leader:
                controller_kills += 1
                new_ctl = wait_for(
                    lambda old=leader: (n := c.controller()) not in (None, old) and n,
                    "a new controller",
                )
                pattern = r"is the controller, epoch"
            else:
                new_ctl = controller
                pattern = rf"brokers \[.*\b{leader}\b.*\] are gone"
            seen = wait_for(
                lambda n=new_ctl, p=pattern, w=wall: log_lines_after(c, n, w, p), "the log"
            )
            noticed.append(seen[0] - wall)
            elected.append(when[0] - t_kill)
            acked.append(t_ack - t_kill)
            gaps.append(t_ack - producer.last_ack_before(t_kill))
            was = " (the controller)" if controller == leader else ""
            print(
                f"  kill {i + 1}: leader {leader}{was} noticed {noticed[-1] * 1000:.0f} ms, "
                f"new leader in ZooKeeper "
                f"{elected[-1] * 1000:.0f} ms, first acks=all ack {acked[-1] * 1000:.0f} ms "
                f"(ack gap {gaps[-1] * 1000:.0f} ms)",
                file=sys.stderr,
                flush=True,
            )
            c.broker(leader).start()
            c.wait_for_full_isr(topic, timeout=WAIT)
    finally:
        producer.stop_event.set()
        producer.join(WAIT)
    if producer.errors:
        print(f"  delivery errors: {producer.errors[:5]}", file=sys.stderr)
    sto = args.session_timeout_ms
    n = len(acked)

    def row(name: str, values: list[float]) -> Figure:
        p50, p99 = pct(values, 0.5), pct(values, 0.99)
        return Figure(
            f"{name}, p50 / p99 of {n} kills",
            f"{p50 * 1000:,.0f} / {p99 * 1000:,.0f} ms",
            f"zookeeper.session.timeout.ms={sto}",
            f"{p50 * 1000 / sto:.2f} / {p99 * 1000 / sto:.2f}",
            "—",
        )

    who = f" ({controller_kills} of them the controller)" if controller_kills else ""
    figures = [
        row(f"SIGKILL leader{who} -> the controller notices", noticed),
        row("SIGKILL leader -> new leader in the state znode", elected),
        row("SIGKILL leader -> first acks=all ack (of a record sent after the kill)", acked),
    ]
    if producer.fatal or producer.errors:
        first = (producer.fatal or producer.errors)[0]
        figures.append(
            Figure(
                "idempotent producer: fatal errors / failed deliveries over the kills",
                f"{len(producer.fatal)} / {len(producer.errors)}",
                first[:90],
                "—",
                "0 / 0",
            )
        )
    return figures


# ---------------------------------------------------------------- 3. controller


def serial_fenced_writes(zk: KazooClient, n: int) -> float:
    """Seconds for ``n`` fenced writes one after another (a check of a version
    and a set, in one transaction), as a controller writing one partition's
    state at a time would make them."""
    base = "/bench-serial"
    zk.ensure_path(base)
    zk.ensure_path(f"{base}/epoch")
    paths = [f"{base}/p{i}" for i in range(n)]
    for p in paths:
        zk.create(p, b"{}")
    start = time.perf_counter()
    for p in paths:
        zk.get(p)
        tx = zk.transaction()
        tx.check(f"{base}/epoch", 0)
        tx.set_data(p, b'{"leader":1}', 0)
        tx.commit()
    elapsed = time.perf_counter() - start
    zk.delete(base, recursive=True)
    return elapsed


def bench_controller(c: LocalCluster, args: argparse.Namespace) -> list[Figure]:
    topic, parts = "ctl", args.partitions
    assert c.zk is not None
    zk = c.zk
    t0 = time.perf_counter()
    create_topic(c.bootstrap_servers, topic, parts, 3)
    t_created = time.perf_counter() - t0
    # Every partition's state znode written by the controller (polling only
    # the ones not seen yet, so the poll adds little load).
    unseen = set(range(parts))
    while unseen and time.perf_counter() - t0 < WAIT:
        futures = {p: zk.exists_async(f"/brokers/topics/{topic}/partitions/{p}/state")
                   for p in unseen}  # fmt: skip
        unseen = {p for p, f in futures.items() if f.get() is None}
        if unseen:
            time.sleep(0.02)
    t_states = time.perf_counter() - t0

    def states() -> list[dict[str, Any]]:
        futures = [zk.get_async(f"/brokers/topics/{topic}/partitions/{p}/state")
                   for p in range(parts)]  # fmt: skip
        out = []
        for f in futures:
            try:
                out.append(json.loads(f.get()[0]))
            except Exception:
                return []
        return out

    wait_for(lambda: (s := states()) and all(len(x["isr"]) == 3 for x in s),
             f"{parts} partitions with a full ISR")  # fmt: skip
    t_isr = time.perf_counter() - t0
    print(f"  {parts} partitions RF 3: CreateTopics answered in {t_created:.2f} s, every state "
          f"znode in {t_states:.2f} s, every ISR full in {t_isr:.2f} s",
          file=sys.stderr, flush=True)  # fmt: skip
    controller = c.controller()
    assert controller is not None
    victim = next(b for b in sorted(c.brokers) if b != controller)
    led = [p for p, s in enumerate(states()) if s["leader"] == victim]
    before = metrics(c, controller)
    elect_count = "kafka_controller_controllerstats_leaderelectionrateandtimems_count"
    elect_sum = "kafka_controller_controllerstats_leaderelectionrateandtimems_sum"

    changed: dict[int, float] = {}
    lock = threading.Lock()

    def watch(p: int) -> None:
        def fired(_event: Any) -> None:
            with lock:
                changed.setdefault(p, time.time())

        zk.get_async(f"/brokers/topics/{topic}/partitions/{p}/state", watch=fired).get()

    for p in range(parts):
        watch(p)
    wall = time.time()
    c.broker(victim).kill()
    wait_for(lambda: len(changed) == parts, "every partition's state to change", WAIT)
    gone = wait_for(
        lambda: log_lines_after(c, controller, wall, rf"brokers \[.*\b{victim}\b.*\] are gone"),
        "the controller's log line",
    )[0]
    after = metrics(c, controller)
    final = states()
    not_elected = [p for p in led if final[p]["leader"] in (victim, -1)]
    still_in_isr = [p for p, s in enumerate(final) if victim in s["isr"]]
    if not_elected or still_in_isr:
        raise RuntimeError(f"no new leader for {not_elected[:5]}; still in ISR: {still_in_isr[:5]}")
    last_leader = max(changed[p] for p in led) - gone
    last_isr = max(changed.values()) - gone
    elections = after.get(elect_count, 0) - before.get(elect_count, 0)
    election_ms = after.get(elect_sum, 0) - before.get(elect_sum, 0)
    floor = serial_fenced_writes(zk, len(led))
    print(
        f"  broker {victim} (led {len(led)}) killed; controller {controller} noticed after "
        f"{gone - wall:.2f} s; new leaders in {last_leader * 1000:.0f} ms, ISRs in "
        f"{last_isr * 1000:.0f} ms; {elections:.0f} elections, {election_ms:.0f} ms in "
        f"LeaderElectionRateAndTimeMs; {len(led)} serial fenced writes {floor * 1000:.0f} ms",
        file=sys.stderr,
        flush=True,
    )
    return [
        Figure(
            f"a {parts}-partition RF-3 topic: CreateTopics -> every state znode / every ISR full",
            f"{t_states * 1000:,.0f} ms / {t_isr * 1000:,.0f} ms",
            "—",
            "—",
            "—",
        ),
        Figure(
            f"controller: new leaders for the {len(led)} of {parts} partitions (RF 3) "
            f"a SIGKILLed broker led, from noticing it",
            f"{last_leader * 1000:,.0f} ms ({len(led) / last_leader:,.0f} partitions/s)",
            f"{len(led)} fenced ZooKeeper writes one at a time: {floor * 1000:,.0f} ms",
            f"{last_leader / floor:.2f}",
            "—",
        ),
        Figure(
            f"controller: the dead broker out of all {parts} ISRs, from noticing it",
            f"{last_isr * 1000:,.0f} ms",
            "—",
            "—",
            "—",
        ),
        Figure(
            "controller: LeaderElectionRateAndTimeMs (count, sum) for that failure",
            f"{elections:,.0f} elections, {election_ms:,.0f} ms",
            "—",
            "—",
            "—",
        ),
    ]


BENCHES: dict[str, Callable[[LocalCluster, argparse.Namespace], list[Figure]]] = {
    "replication": bench_replication,
    "failover": bench_failover,
    "controller": bench_controller,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(BENCHES), help="comma-separated subset")
    parser.add_argument("--seconds", type=float, default=3.0, help="bound of each produce load")
    parser.add_argument("--kills", type=int, default=10, help="leader kills for failover")
    parser.add_argument("--partitions", type=int, default=1000, help="for the controller")
    parser.add_argument("--session-timeout-ms", type=int, default=6000,
                        help="zookeeper.session.timeout.ms of the brokers")  # fmt: skip
    parser.add_argument("--dir", default=None, help="keep the cluster's data and logs here")
    args = parser.parse_args()

    started = time.perf_counter()
    c = start_cluster(args.session_timeout_ms, args.dir)
    print(f"  cluster of 3 up in {time.perf_counter() - started:.1f} s "
          f"(zookeeper.session.timeout.ms={args.session_timeout_ms})",
          file=sys.stderr, flush=True)  # fmt: skip
    figures: list[Figure] = []
    try:
        for name in args.only.split(","):
            t = time.perf_counter()
            figures += BENCHES[name](c, args)
            print(f"  [{name}: {time.perf_counter() - t:.0f} s]", file=sys.stderr, flush=True)
    finally:
        c.close()
    print_table(figures)
    print(f"\n{time.perf_counter() - started:.0f} s in all")


if __name__ == "__main__":
    main()
