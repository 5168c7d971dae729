"""Consumer groups of stock clients against a real broker process.

confluent-kafka (librdkafka), kafka-python and aiokafka groups split the
partitions and read every record exactly once when they commit; a member that
leaves and one killed with SIGKILL make the group rebalance and the others
carry on without loss; librdkafka's cooperative-sticky rebalances
incrementally; a static member restarting within its session keeps its
partitions with no new generation; a broker restart keeps groups and
committed offsets; ``pylog groups`` reports and resets what the clients did.
"""

from __future__ import annotations

import asyncio
import signal
import struct
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from broker_process import PYLOG, BrokerProcess, ck_produce, topic_name

from pylog.coordinator.records import decode_group_value, decode_key, partition_for

OFFSETS_PARTITIONS = 10


class GroupBroker(BrokerProcess):
    """The e2e broker with a smaller __consumer_offsets (faster to create)."""

    def __init__(self, data: Path) -> None:
        super().__init__(data, {"offsets.topic.num.partitions": OFFSETS_PARTITIONS})


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GroupBroker]:
    b = GroupBroker(tmp_path_factory.mktemp("groups") / "data").start()
    try:
        yield b
    finally:
        if b.proc is not None:
            b.stop(signal.SIGKILL)


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(20)


def produce(bootstrap: str, topic: str, start: int, count: int) -> None:
    ck_produce(
        bootstrap, topic, [(b"k%d" % i, b"%d" % i, None) for i in range(start, start + count)]
    )


def committed(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        found = admin.list_group_offsets({group: None})[group]
    finally:
        admin.close()
    return {(tp.topic, tp.partition): o.offset for tp, o in found.items()}


def describe(bootstrap: str, group: str) -> dict[str, Any]:
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        return dict(admin.describe_groups([group])[group])
    finally:
        admin.close()


def wait_for(
    cond: Callable[[], bool],
    timeout: float,
    what: str,
    state: Callable[[], object] | None = None,
) -> None:
    """Poll ``cond``; on timeout fail with ``state()`` (what the clients and the
    coordinator saw) so a failure on a loaded machine can be diagnosed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}: {state() if state else ''}")


def group_generation(bootstrap: str, group: str) -> tuple[int, list[str]]:
    """The generation and member ids of the last GroupMetadata record the
    coordinator wrote for ``group`` (read straight from __consumer_offsets)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False}
    )
    p = partition_for(group, OFFSETS_PARTITIONS)
    c.assign([TopicPartition("__consumer_offsets", p, 0)])
    _, high = c.get_watermark_offsets(TopicPartition("__consumer_offsets", p), timeout=10)
    last = None
    try:
        while True:
            m = c.poll(1.0)
            if m is None:
                break
            if m.error() is None:
                key = decode_key(m.key())
                if getattr(key, "group", None) == group and not hasattr(key, "topic"):
                    last = decode_group_value(m.value()) if m.value() is not None else None
                if m.offset() + 1 >= high:
                    break
    finally:
        c.close()
    assert last is not None
    return last.generation, [mem.member_id for mem in last.members]


# ---------------------------------------------------------------- exactly once, 3 members


class Seen:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.records: dict[tuple[int, int], list[int]] = {}  # (partition, offset) -> members

    def add(self, member: int, partition: int, offset: int) -> None:
        with self.lock:
            self.records.setdefault((partition, offset), []).append(member)

    def count(self) -> int:
        with self.lock:
            return len(self.records)

    def by_member(self) -> dict[int, int]:
        out: dict[int, int] = {}
        for members in self.records.values():
            for m in members:
                out[m] = out.get(m, 0) + 1
        return out


def check_exactly_once(seen: Seen, total: int, members: int) -> None:
    assert seen.count() == total
    dupes = {k: v for k, v in seen.records.items() if len(v) > 1}
    assert dupes == {}
    assert len(seen.by_member()) == members, seen.by_member()


def run_three_members(
    kafka: GroupBroker,
    topic: str,
    group: str,
    member: Callable[[int], None],
    seen: Seen,
    assignments: dict[int, int],
    stop: threading.Event,
) -> None:
    """Run ``member(0..2)`` on threads until they split the 6 partitions 2/2/2
    and have read 600 records produced after the split; then stop them."""
    threads = [threading.Thread(target=member, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    try:
        state = lambda: (assignments, seen.count(), describe(kafka.bootstrap, group))  # noqa: E731
        wait_for(lambda: sorted(assignments.values()) == [2, 2, 2], 40, "a 2/2/2 split", state)
        produce(kafka.bootstrap, topic, 0, 600)
        wait_for(lambda: seen.count() >= 600, 30, "600 records", state)
        time.sleep(0.5)
    finally:
        stop.set()
        for t in threads:
            t.join(20)


def test_confluent_group_of_three_reads_each_record_once(kafka: GroupBroker) -> None:
    from confluent_kafka import Consumer

    topic, group = topic_name("ck3"), topic_name("g-ck3")
    create_topic(kafka.bootstrap, topic, 6)
    seen = Seen()
    assignments: dict[int, int] = {}
    stop = threading.Event()

    def member(n: int) -> None:
        c = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": group,
                      "auto.offset.reset": "earliest", "enable.auto.commit": False,
                      "session.timeout.ms": 6000, "heartbeat.interval.ms": 300})  # fmt: skip
        c.subscribe([topic])
        try:
            while not stop.is_set():
                m = c.poll(0.2)
                assignments[n] = len(c.assignment())
                if m is None or m.error() is not None:
                    continue
                seen.add(n, m.partition(), m.offset())
                c.commit(m, asynchronous=False)
        finally:
            t0 = time.monotonic()
            c.close()
            assert time.monotonic() - t0 < 20  # without a coordinator it hung ~45 s

    run_three_members(kafka, topic, group, member, seen, assignments, stop)
    check_exactly_once(seen, 600, 3)
    offsets = committed(kafka.bootstrap, group)
    assert sum(offsets.values()) == 600 and len(offsets) == 6
    assert describe(kafka.bootstrap, group)["group_state"] == "Empty"  # all left


POLL_MS = 5000


def kafka_python_member(bootstrap: str, topic: str, group: str, **conf: Any) -> Any:
    """A kafka-python group member that knows the topic's partitions before it
    joins; poll it with a timeout longer than a rebalance (POLL_MS).

    kafka-python 3.0.12 has a race: a leader whose metadata changed since it
    last assigned rejoins, and if a poll() times out while that rejoin's
    SyncGroup is in flight, the member never applies the answer (its
    need_rejoin() turns False while it assigns, so the join is not awaited
    again) and stops heartbeating, or goes on fetching the partitions it had.
    The broker's log shows the SyncGroup answered; fetching the metadata first
    and polls that outlast a join keep the client off that path."""
    from kafka import KafkaConsumer

    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, **conf)
    assert c.partitions_for_topic(topic)
    c.subscribe([topic])
    return c


def test_kafka_python_group_of_three_reads_each_record_once(kafka: GroupBroker) -> None:
    topic, group = topic_name("kp3"), topic_name("g-kp3")
    create_topic(kafka.bootstrap, topic, 6)
    seen = Seen()
    assignments: dict[int, int] = {}
    stop = threading.Event()

    def member(n: int) -> None:
        c = kafka_python_member(kafka.bootstrap, topic, group, auto_offset_reset="earliest",
                                enable_auto_commit=False, session_timeout_ms=6000,
                                heartbeat_interval_ms=300)  # fmt: skip
        try:
            while not stop.is_set():
                batch = c.poll(timeout_ms=POLL_MS)
                assignments[n] = len(c.assignment())
                for tp, records in batch.items():
                    for r in records:
                        seen.add(n, tp.partition, r.offset)
                if batch:
                    c.commit()
        finally:
            c.close()

    run_three_members(kafka, topic, group, member, seen, assignments, stop)
    check_exactly_once(seen, 600, 3)
    assert sum(committed(kafka.bootstrap, group).values()) == 600


def test_aiokafka_group_of_three_reads_each_record_once(kafka: GroupBroker) -> None:
    from aiokafka import AIOKafkaConsumer

    topic, group = topic_name("aio3"), topic_name("g-aio3")
    create_topic(kafka.bootstrap, topic, 6)
    seen = Seen()

    async def main() -> None:
        consumers = [
            AIOKafkaConsumer(
                topic,
                bootstrap_servers=kafka.bootstrap,
                group_id=group,
                auto_offset_reset="earliest",
                enable_auto_commit=False,
                session_timeout_ms=6000,
                heartbeat_interval_ms=300,
            )
            for _ in range(3)
        ]
        for c in consumers:
            await c.start()
        stop = asyncio.Event()

        async def run(n: int, c: AIOKafkaConsumer) -> None:
            while not stop.is_set():
                batch = await c.getmany(timeout_ms=200)
                for tp, records in batch.items():
                    for r in records:
                        seen.add(n, tp.partition, r.offset)
                if batch:
                    await c.commit()

        tasks = [asyncio.ensure_future(run(i, c)) for i, c in enumerate(consumers)]
        try:
            deadline = time.monotonic() + 40
            while sorted(len(c.assignment()) for c in consumers) != [2, 2, 2]:
                assert time.monotonic() < deadline, [c.assignment() for c in consumers]
                await asyncio.sleep(0.1)
            await asyncio.to_thread(produce, kafka.bootstrap, topic, 0, 600)
            while seen.count() < 600 and time.monotonic() < deadline + 30:
                await asyncio.sleep(0.1)
            await asyncio.sleep(0.5)
        finally:
            stop.set()
            await asyncio.gather(*tasks)
            for c in consumers:
                await c.stop()

    asyncio.run(main())
    check_exactly_once(seen, 600, 3)
    assert sum(committed(kafka.bootstrap, group).values()) == 600


# ---------------------------------------------------------------- leave and kill

KILLED_MEMBER = textwrap.dedent(
    """
    import sys
    from confluent_kafka import Consumer
    bootstrap, topic, group = sys.argv[1:4]
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    c.subscribe([topic])
    announced = False
    while True:
        m = c.poll(0.2)
        if not announced and c.assignment():
            print("assigned", len(c.assignment()), flush=True)
            announced = True
        if m is not None and m.error() is None:
            c.commit(m, asynchronous=False)
    """
)


def test_member_killed_and_member_leaving_rebalance_without_loss(
    kafka: GroupBroker, tmp_path: Path
) -> None:
    from confluent_kafka import Consumer

    topic, group = topic_name("kill"), topic_name("g-kill")
    create_topic(kafka.bootstrap, topic, 6)
    script = tmp_path / "member.py"
    script.write_text(KILLED_MEMBER)
    victim = subprocess.Popen([sys.executable, str(script), kafka.bootstrap, topic, group],
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    seen = Seen()
    assignments: dict[int, int] = {}
    stops = [threading.Event(), threading.Event()]
    rebalances = [0, 0]

    def member(n: int) -> None:
        def on_assign(c: Any, parts: list[Any]) -> None:
            rebalances[n] += 1

        c = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": group,
                      "auto.offset.reset": "earliest", "enable.auto.commit": False,
                      "session.timeout.ms": 6000, "heartbeat.interval.ms": 300})  # fmt: skip
        c.subscribe([topic], on_assign=on_assign)
        try:
            while not stops[n].is_set():
                m = c.poll(0.2)
                assignments[n] = len(c.assignment())
                if m is None or m.error() is not None:
                    continue
                seen.add(n, m.partition(), m.offset())
                c.commit(m, asynchronous=False)
        finally:
            c.close()

    threads = [threading.Thread(target=member, args=(i,)) for i in range(2)]
    try:
        assert victim.stdout is not None
        assert victim.stdout.readline().startswith("assigned")
        for t in threads:
            t.start()
        state = lambda: (assignments, seen.count(), describe(kafka.bootstrap, group))  # noqa: E731
        wait_for(lambda: sorted(assignments.values()) == [2, 2], 30, "a 2/2/2 split", state)
        produce(kafka.bootstrap, topic, 0, 300)
        wait_for(lambda: sum(committed(kafka.bootstrap, group).values()) == 300, 30,
                 "the first 300 committed")  # fmt: skip
        # SIGKILL: no LeaveGroup; the session timeout (6 s) notices.
        t_kill = time.monotonic()
        victim.kill()
        victim.wait(10)
        wait_for(lambda: sorted(assignments.values()) == [3, 3], 30, "a 3/3 split", state)
        took = time.monotonic() - t_kill
        assert 4 <= took <= 30, took  # never before the 6 s session timeout
        before = seen.count()
        produce(kafka.bootstrap, topic, 300, 300)
        wait_for(lambda: seen.count() >= before + 300, 30, "300 more")
        # A clean leave: the survivor takes every partition at once.
        stops[1].set()
        threads[1].join(20)
        wait_for(lambda: assignments[0] == 6, 15, "one member with all 6")
        before = seen.count()
        produce(kafka.bootstrap, topic, 600, 300)
        wait_for(lambda: seen.count() >= before + 300, 30, "the last 300")
    finally:
        for s in stops:
            s.set()
        for t in threads:
            if t.is_alive():
                t.join(20)
        if victim.poll() is None:
            victim.kill()
    offsets = committed(kafka.bootstrap, group)
    assert sum(offsets.values()) == 900  # every record processed and committed
    late = [k for k, v in seen.records.items() if len(v) > 1]
    assert late == []  # survivors resumed from the commits: nothing read twice
    assert rebalances[0] >= 3


# ---------------------------------------------------------------- cooperative-sticky


def test_librdkafka_cooperative_sticky_rebalances_incrementally(kafka: GroupBroker) -> None:
    from confluent_kafka import Consumer, KafkaError, KafkaException

    topic, group = topic_name("coop"), topic_name("g-coop")
    create_topic(kafka.bootstrap, topic, 6)
    events: list[tuple[int, str, list[int]]] = []
    owned: dict[int, set[int]] = {0: set(), 1: set(), 2: set()}
    seen = Seen()
    stops = [threading.Event() for _ in range(3)]
    failed_commits: list[int] = []
    assignment_lost = threading.Event()

    def member(n: int) -> None:
        def on_assign(c: Any, parts: list[Any]) -> None:
            events.append((n, "assign", sorted(p.partition for p in parts)))
            owned[n] |= {p.partition for p in parts}

        def on_revoke(c: Any, parts: list[Any]) -> None:
            events.append((n, "revoke", sorted(p.partition for p in parts)))
            owned[n] -= {p.partition for p in parts}

        c = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": group,
                      "partition.assignment.strategy": "cooperative-sticky",
                      "auto.offset.reset": "earliest", "enable.auto.commit": False,
                      "session.timeout.ms": 6000, "heartbeat.interval.ms": 300})  # fmt: skip
        c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
        try:
            while not stops[n].is_set():
                m = c.poll(0.2)
                if m is None or m.error() is not None:
                    continue
                seen.add(n, m.partition(), m.offset())
                try:
                    c.commit(m, asynchronous=False)
                except KafkaException as e:
                    # A member keeps consuming through a cooperative
                    # rebalance; a commit while the new assignment is being
                    # handed out is refused (as by Kafka) and may be re-read:
                    # REBALANCE_IN_PROGRESS, or ILLEGAL_GENERATION when it
                    # still carries the generation the rebalance replaced
                    # (Kafka checks the generation first).
                    assert e.args[0].code() in (
                        KafkaError.REBALANCE_IN_PROGRESS,
                        KafkaError.ILLEGAL_GENERATION,
                    )
                    if e.args[0].code() == KafkaError.ILLEGAL_GENERATION:
                        # librdkafka then treats its assignment as lost and
                        # rejoins from nothing: no incremental pattern to check.
                        assignment_lost.set()
                    failed_commits.append(m.offset())
        finally:
            c.close()

    threads = [threading.Thread(target=member, args=(i,)) for i in range(3)]
    try:
        threads[0].start()
        wait_for(lambda: len(owned[0]) == 6, 20, "member 0 owning 6")
        produce(kafka.bootstrap, topic, 0, 300)
        threads[1].start()
        wait_for(lambda: len(owned[0]) == 3 and len(owned[1]) == 3, 30, "a 3/3 split")
        kept = set(owned[0])
        threads[2].start()
        wait_for(lambda: [len(owned[i]) for i in range(3)] == [2, 2, 2], 30, "a 2/2/2 split")
        if not assignment_lost.is_set():
            assert owned[0] <= kept  # sticky: member 0 only gave partitions up
        produce(kafka.bootstrap, topic, 300, 300)
        wait_for(lambda: seen.count() >= 600, 30, "600 records")
        running = list(events)  # before the members close (closing revokes too)
    finally:
        for s in stops:
            s.set()
        for t in threads:
            if t.is_alive():
                t.join(20)
    # Incremental (COOPERATIVE): member 0 gave up 3 then 1 partitions; it
    # never revoked everything it owned, as an eager rebalance would, and was
    # never handed partitions back.
    revokes0 = [parts for n, kind, parts in running if n == 0 and kind == "revoke"]
    assigns0 = [parts for n, kind, parts in running if n == 0 and kind == "assign" and parts]
    if not assignment_lost.is_set():
        assert [len(parts) for parts in revokes0] == [3, 1], running
        assert assigns0 == [list(range(6))], running
    assert seen.count() == 600
    assert sum(len(v) - 1 for v in seen.records.values()) <= len(failed_commits)


# ---------------------------------------------------------------- static membership


def test_static_member_restart_keeps_partitions_and_generation(kafka: GroupBroker) -> None:
    from confluent_kafka import Consumer

    topic, group = topic_name("static"), topic_name("g-static")
    create_topic(kafka.bootstrap, topic, 4)

    def start(instance: str) -> Any:
        c = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": group,
                      "group.instance.id": instance, "session.timeout.ms": 20000,
                      "heartbeat.interval.ms": 300, "enable.auto.commit": False})  # fmt: skip
        c.subscribe([topic])
        return c

    def settle(*consumers: Any, sizes: list[int]) -> None:
        deadline = time.monotonic() + 30
        while sorted(len(c.assignment()) for c in consumers) != sizes:
            assert time.monotonic() < deadline
            for c in consumers:
                c.poll(0.1)

    a, b = start("a"), start("b")
    settle(a, b, sizes=[2, 2])
    a_parts = sorted(p.partition for p in a.assignment())
    gen, members = group_generation(kafka.bootstrap, group)
    a.close()  # a static member sends no LeaveGroup
    for _ in range(10):
        b.poll(0.1)
    a2 = start("a")
    settle(a2, b, sizes=[2, 2])
    assert sorted(p.partition for p in a2.assignment()) == a_parts
    for _ in range(10):  # b heartbeats on: no rebalance comes
        b.poll(0.1)
    gen2, members2 = group_generation(kafka.bootstrap, group)
    assert gen2 == gen
    assert len(members2) == 2 and set(members2) != set(members)  # a has a new member id
    assert describe(kafka.bootstrap, group)["group_state"] == "Stable"
    a2.close()
    b.close()


# ---------------------------------------------------------------- restart, auto-commit


def test_broker_restart_keeps_groups_and_offsets(tmp_path: Path) -> None:
    from confluent_kafka import Consumer

    b = GroupBroker(tmp_path / "data").start()
    try:
        topic, group = "resume", "g-resume"
        create_topic(b.bootstrap, topic, 3)
        produce(b.bootstrap, topic, 0, 200)
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group,
                      "auto.offset.reset": "earliest", "enable.auto.commit": True,
                      "auto.commit.interval.ms": 100})  # fmt: skip
        c.subscribe([topic])
        got = 0
        deadline = time.monotonic() + 30
        while got < 200 and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                got += 1
        t0 = time.monotonic()
        c.close()  # commits the auto-commit offsets and leaves, promptly
        assert time.monotonic() - t0 < 20  # without a coordinator it hung ~45 s
        assert got == 200
        before = committed(b.bootstrap, group)
        assert sum(before.values()) == 200
        produce(b.bootstrap, topic, 200, 50)
        b.stop()
        b.start()
        assert committed(b.bootstrap, group) == before
        assert describe(b.bootstrap, group)["group_state"] == "Empty"
        kc = kafka_python_member(b.bootstrap, topic, group, auto_offset_reset="earliest",
                                 enable_auto_commit=False)  # fmt: skip
        values = []
        deadline = time.monotonic() + 30
        while len(values) < 50 and time.monotonic() < deadline:
            for records in kc.poll(timeout_ms=POLL_MS).values():
                values += [int(r.value) for r in records]
        kc.commit()
        kc.close()
        assert sorted(values) == list(range(200, 250))  # resumed from the commits
        # After kill -9 too: the offsets topic is recovered and loaded.
        b.stop(signal.SIGKILL)
        b.start()
        assert sum(committed(b.bootstrap, group).values()) == 250
    finally:
        if b.proc is not None:
            b.stop(signal.SIGKILL)


def test_pylog_consume_with_group_commits(kafka: GroupBroker) -> None:
    topic, group = topic_name("cli-consume"), topic_name("g-cli")
    create_topic(kafka.bootstrap, topic, 2)
    produce(kafka.bootstrap, topic, 0, 20)
    t0 = time.monotonic()
    out = subprocess.run(
        [PYLOG, "consume", "--bootstrap-server", kafka.bootstrap, "--topic", topic,
         "--group", group, "--from-beginning", "--max-messages", "20", "--timeout-ms", "15000"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert sorted(int(v) for v in out.stdout.split()) == list(range(20))
    assert time.monotonic() - t0 < 30
    assert sum(committed(kafka.bootstrap, group).values()) == 20


# ---------------------------------------------------------------- pylog groups


def pylog_groups(bootstrap: str, *args: str, ok: bool = True) -> str:
    out = subprocess.run([PYLOG, "groups", *args, "--bootstrap-server", bootstrap],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert (out.returncode == 0) == ok, out.stderr + out.stdout
    return out.stdout + out.stderr


def test_pylog_groups_reports_and_resets_what_clients_did(kafka: GroupBroker) -> None:
    from confluent_kafka import Consumer

    topic, group = topic_name("tool"), topic_name("g-tool")
    create_topic(kafka.bootstrap, topic, 4)
    produce(kafka.bootstrap, topic, 0, 100)
    consumers = []
    for i in range(2):
        c = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": group,
                      "client.id": f"tool-client-{i}", "auto.offset.reset": "earliest",
                      "enable.auto.commit": False})  # fmt: skip
        c.subscribe([topic])
        consumers.append(c)
    got = 0
    deadline = time.monotonic() + 30
    while (got < 60 or sorted(len(c.assignment()) for c in consumers) != [2, 2]) and (
        time.monotonic() < deadline
    ):
        for c in consumers:
            m = c.poll(0.05)
            if m is not None and m.error() is None and got < 60:
                got += 1
                c.commit(m, asynchronous=False)
    offsets = committed(kafka.bootstrap, group)
    assert sum(offsets.values()) == 60

    assert group in pylog_groups(kafka.bootstrap, "list").split()
    state = pylog_groups(kafka.bootstrap, "describe", "--group", group, "--state")
    assert "Stable" in state and "range" in state
    every = pylog_groups(kafka.bootstrap, "describe", "--all-groups", "--state")
    assert [group, "Stable"] in [line.split()[:2] for line in every.splitlines()]
    members = pylog_groups(kafka.bootstrap, "describe", "--group", group, "--members")
    assert "tool-client-0" in members and "tool-client-1" in members
    assert members.count(f"{topic}(") == 2
    table = pylog_groups(kafka.bootstrap, "describe", "--group", group)
    rows = [line.split() for line in table.splitlines()[1:]]
    assert len(rows) == 4
    for row in rows:
        p, cur, end, lag = int(row[2]), row[3], int(row[4]), row[5]
        want = offsets.get((topic, p))
        assert cur == (str(want) if want is not None else "-")
        assert lag == (str(end - want) if want is not None else "-")
        assert row[6].startswith("tool-client-")
    assert sum(int(r[4]) for r in rows) == 100

    # Active group: --execute is refused, the plan still printed by --dry-run.
    pylog_groups(kafka.bootstrap, "reset-offsets", "--group", group, "--all-topics",
                 "--to-earliest", "--execute", ok=False)  # fmt: skip
    for c in consumers:
        c.close()
    plan = pylog_groups(kafka.bootstrap, "reset-offsets", "--group", group, "--topic", topic,
                        "--to-latest", "--dry-run")  # fmt: skip
    ends = {int(r[2]): r[4] for r in rows}
    assert {int(line.split()[2]): line.split()[3] for line in plan.splitlines()[1:]} == ends
    assert committed(kafka.bootstrap, group) == offsets  # a dry run changes nothing
    pylog_groups(kafka.bootstrap, "reset-offsets", "--group", group, "--topic", f"{topic}:0,1",
                 "--to-offset", "5", "--execute")  # fmt: skip
    pylog_groups(kafka.bootstrap, "reset-offsets", "--group", group, "--topic", f"{topic}:2",
                 "--shift-by", "-1000", "--execute")  # fmt: skip
    after = committed(kafka.bootstrap, group)
    assert after[(topic, 0)] == after[(topic, 1)] == 5 and after[(topic, 2)] == 0
    pylog_groups(kafka.bootstrap, "reset-offsets", "--group", group, "--topic", topic,
                 "--to-datetime", "2000-01-01T00:00:00", "--execute")  # fmt: skip
    assert set(committed(kafka.bootstrap, group).values()) == {0}
    assert "Deleted" in pylog_groups(kafka.bootstrap, "delete", "--group", group)
    assert group not in pylog_groups(kafka.bootstrap, "list").split()
    assert "GroupIdNotFound" in pylog_groups(kafka.bootstrap, "delete", "--group", group, ok=False)
    gone = pylog_groups(kafka.bootstrap, "describe", "--group", group, ok=False)
    assert f"Consumer group '{group}' does not exist." in gone


def test_offsets_topic_records_are_kafka_format(kafka: GroupBroker) -> None:
    """The committed offsets as Kafka's OffsetCommitKey/Value bytes."""
    from confluent_kafka import Consumer, TopicPartition

    group, topic = topic_name("g-fmt"), topic_name("fmt")
    create_topic(kafka.bootstrap, topic, 4)  # a commit names a partition that exists
    c = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": group,
                  "enable.auto.commit": False})  # fmt: skip
    c.commit(offsets=[TopicPartition(topic, 3, 42)], asynchronous=False)
    c.close()
    r = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": "reader2",
                  "enable.auto.commit": False})  # fmt: skip
    p = partition_for(group, OFFSETS_PARTITIONS)
    r.assign([TopicPartition("__consumer_offsets", p, 0)])
    glen = len(group.encode())
    want = struct.pack(">hh", 1, glen) + group.encode()
    want += struct.pack(">h", len(topic)) + topic.encode() + struct.pack(">i", 3)
    found = None
    deadline = time.monotonic() + 15
    while found is None and time.monotonic() < deadline:
        m = r.poll(0.5)  # other groups may share the partition
        if m is not None and m.error() is None and m.key() == want:
            found = m
    r.close()
    assert found is not None
    version, offset = struct.unpack_from(">hq", found.value())
    assert (version, offset) == (3, 42)


def test_live_members_ride_through_a_broker_restart(tmp_path: Path) -> None:
    """Members restored from __consumer_offsets keep their generation: after a
    restart the consumers heartbeat on with no rebalance and keep committing."""
    from confluent_kafka import Consumer

    b = GroupBroker(tmp_path / "data").start()
    topic, group = "live", "g-live"
    assigns = [0, 0]
    seen = Seen()
    stop = threading.Event()
    assignments: dict[int, int] = {}

    def member(n: int) -> None:
        def on_assign(c: Any, parts: list[Any]) -> None:
            assigns[n] += 1

        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group,
                      "auto.offset.reset": "earliest", "enable.auto.commit": False,
                      "session.timeout.ms": 10000, "heartbeat.interval.ms": 300,
                      "reconnect.backoff.max.ms": 200})  # fmt: skip
        c.subscribe([topic], on_assign=on_assign)
        try:
            while not stop.is_set():
                m = c.poll(0.2)
                assignments[n] = len(c.assignment())
                if m is None or m.error() is not None:
                    continue
                seen.add(n, m.partition(), m.offset())
                try:
                    c.commit(m, asynchronous=False)
                except Exception:
                    seen.add(99, m.partition(), m.offset())  # retried below
        finally:
            c.close()

    threads = [threading.Thread(target=member, args=(i,)) for i in range(2)]
    try:
        create_topic(b.bootstrap, topic, 4)
        for t in threads:
            t.start()
        state = lambda: (assignments, seen.count(), describe(b.bootstrap, group))  # noqa: E731
        wait_for(lambda: sorted(assignments.values()) == [2, 2], 30, "a 2/2 split", state)
        produce(b.bootstrap, topic, 0, 100)
        wait_for(lambda: seen.count() >= 100, 30, "100 records", state)
        before = list(assigns)
        b.stop()
        b.start()  # same port, same data
        produce(b.bootstrap, topic, 100, 100)
        wait_for(lambda: seen.count() >= 200, 40, "100 more after the restart")
        wait_for(lambda: sum(committed(b.bootstrap, group).values()) == 200, 20, "commits")
        assert assigns == before  # no rebalance: the group came back Stable
        assert describe(b.bootstrap, group)["group_state"] == "Stable"
    finally:
        stop.set()
        for t in threads:
            t.join(20)
        if b.proc is not None:
            b.stop(signal.SIGKILL)


def test_a_heartbeat_behind_a_waiting_join_is_answered_after_it(kafka: GroupBroker) -> None:
    """As on Kafka, a connection's requests are handled in turn: a heartbeat
    pipelined behind a JoinGroup that waits for the other members is handled
    once the join has answered, so it sees the new generation (and says
    ILLEGAL_GENERATION to the old one) rather than a rebalance that is over."""
    from pylog.protocol.client import KafkaConnection

    group = topic_name("g-order")
    meta = struct.pack(">hi", 0, 1) + struct.pack(">h", 1) + b"t" + struct.pack(">i", -1)

    def join(conn: KafkaConnection, member: str) -> None:
        conn.send(11, 3, {  # JoinGroup v3: no MEMBER_ID_REQUIRED round trip
            "group_id": group, "session_timeout_ms": 30_000, "rebalance_timeout_ms": 30_000,
            "member_id": member, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": meta}],
        })  # fmt: skip

    def sync(conn: KafkaConnection, gen: int, member: str, leader: bool) -> None:
        assignments = [{"member_id": member, "assignment": b""}] if leader else []
        r = conn.request(14, 2, {"group_id": group, "generation_id": gen,
                                 "member_id": member, "assignments": assignments})  # fmt: skip
        assert r.error_code == 0, r

    def rebalancing(conn: KafkaConnection) -> None:
        # Requests on different connections have no order: the next join
        # goes out once the broker has taken this one (the group rebalances),
        # or it may overtake it and be answered from the settled group.
        def started() -> bool:
            r = conn.request(15, 0, {"groups": [group]})
            return bool(r.groups[0].group_state == "PreparingRebalance")

        wait_for(started, 20, "the group to start rebalancing")

    with (
        KafkaConnection(kafka.bootstrap) as a,
        KafkaConnection(kafka.bootstrap) as b,
        KafkaConnection(kafka.bootstrap) as c,
        KafkaConnection(kafka.bootstrap) as d,
    ):
        # FindCoordinator v1 creates __consumer_offsets on first use
        assert a.request(10, 1, {"key": group, "key_type": 0}).error_code == 0
        join(a, "")
        ja = a.recv(11, 3)
        assert ja.error_code == 0 and ja.generation_id == 1
        join(b, "")  # a second member: a rebalance that waits for a to rejoin
        rebalancing(d)
        join(a, ja.member_id)
        ja, jb = a.recv(11, 3), b.recv(11, 3)
        assert ja.generation_id == jb.generation_id == 2
        # the leader syncs; the follower's sync then answers at once
        sync(a, 2, ja.member_id, leader=True)
        sync(b, 2, jb.member_id, leader=False)

        join(c, "")  # a third member: rebalance; a and b must rejoin
        rebalancing(d)
        join(a, ja.member_id)  # waits for b
        a.send(12, 2, {"group_id": group, "generation_id": 2, "member_id": ja.member_id})
        time.sleep(0.3)  # the heartbeat has reached the broker, behind the join
        join(b, jb.member_id)  # completes generation 3
        ja3 = a.recv(11, 3)
        hb = a.recv(12, 2)
        assert ja3.error_code == 0 and ja3.generation_id == 3
        assert hb.error_code == 22, hb  # ILLEGAL_GENERATION: it saw generation 3
        assert b.recv(11, 3).generation_id == 3 and c.recv(11, 3).generation_id == 3
