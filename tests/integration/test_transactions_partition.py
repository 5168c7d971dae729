"""The partition side of transactions, on real broker processes.

No transaction coordinator runs on this branch's brokers, so the test plays
it with pylog's own protocol client, as Kafka's coordinator would: a
producer id from InitProducerId, transactional batches produced, then
WriteTxnMarkers (COMMIT for one transaction, ABORT for another, a stale
coordinator epoch refused). Fetch with read_committed then stops at the last
stable offset and lists the aborted transaction; read_uncommitted sees
everything; ListOffsets answers the LSO for read_committed; DescribeProducers
shows the open transactions. A restart (clean, then SIGKILL) keeps it all
(snapshot, .txnindex, recovery), kcat reading with
isolation.level=read_committed sees only committed records, and on a
3-broker cluster the followers get the markers and a new leader after a
failover has the same LSO and aborted transactions.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from broker_process import BrokerProcess, metrics_broker, topic_name

from pylog import _native
from pylog.protocol import ApiKey
from pylog.protocol.client import KafkaConnection
from pylog.protocol.messages import (
    ApiVersionsResponse,
    DescribeProducersResponse,
    FetchResponse,
    InitProducerIdResponse,
    ListOffsetsResponse,
    ProduceResponse,
    WriteTxnMarkersResponse,
)
from pylog.testing.cluster import LocalCluster

WAIT = 60.0  # upper bound for waits: only catches hangs
FENCED = 52  # TRANSACTION_COORDINATOR_FENCED
UNKNOWN = 3  # UNKNOWN_TOPIC_OR_PARTITION
NOT_LEADER = 6
PURGATORY_OPS = "pylog_server_delayedoperationpurgatory_operations_total"


def wait_for(pred: Callable[[], object], what: str, timeout: float = WAIT) -> None:
    pause = threading.Event()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        pause.wait(0.05)
    raise AssertionError(f"timed out waiting for {what}")


#: These tests play the transaction coordinator themselves (their producers
#: have no transactional id a coordinator knows), so the leaders must not ask
#: one before appending (KIP-890 verification, tested in
#: test_transactions_coordinator.py).
NO_VERIFICATION = {"transaction.partition.verification.enable": "false"}


class Client:
    """A connection that speaks for producers and for a transaction coordinator."""

    def __init__(self, bootstrap: str) -> None:
        self.conn = KafkaConnection(bootstrap, timeout=WAIT, client_id="txn-partition-test")
        self.seq: dict[int, int] = {}

    def close(self) -> None:
        self.conn.close()

    def create_topic(self, topic: str, replication_factor: int = 1, **configs: str) -> None:
        t = {
            "name": topic,
            "num_partitions": 1,
            "replication_factor": replication_factor,
            "configs": [{"name": k.replace("_", "."), "value": v} for k, v in configs.items()],
        }
        r = self.conn.request(ApiKey.CREATE_TOPICS, 5, {"topics": [t], "timeout_ms": 30000})
        assert r.topics[0].error_code == 0, r  # type: ignore[attr-defined]

    def producer_id(self) -> int:
        r = self.conn.request(
            ApiKey.INIT_PRODUCER_ID,
            4,
            {"transactional_id": None, "transaction_timeout_ms": 60000},
            InitProducerIdResponse,
        )
        assert r.error_code == 0, r
        self.seq[r.producer_id] = 0
        return r.producer_id

    def produce(
        self, topic: str, values: list[bytes], pid: int = -1, *, transactional: bool = True
    ) -> int:
        seq = self.seq.get(pid, -1)
        batch = _native.build_batch(
            [(None, v, [], int(time.time() * 1000)) for v in values],
            producer_id=pid,
            producer_epoch=0 if pid >= 0 else -1,
            base_sequence=seq,
            is_transactional=transactional and pid >= 0,
        )
        if pid >= 0:
            self.seq[pid] = seq + len(values)
        body = {
            "transactional_id": f"tx-{pid}" if transactional and pid >= 0 else None,
            "acks": -1,
            "timeout_ms": 30000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
        }
        r = self.conn.request(ApiKey.PRODUCE, 9, body, ProduceResponse)
        part = r.responses[0].partition_responses[0]
        assert part.error_code == 0, part
        return part.base_offset

    def markers(self, topic: str, *ends: tuple[int, bool, int], partition: int = 0) -> list[int]:
        """WriteTxnMarkers: one marker per (producer id, commit, coordinator
        epoch); the error code of each."""
        body = {
            "markers": [
                {
                    "producer_id": pid,
                    "producer_epoch": 0,
                    "transaction_result": commit,
                    "coordinator_epoch": epoch,
                    "topics": [{"name": topic, "partition_indexes": [partition]}],
                }
                for pid, commit, epoch in ends
            ]
        }
        r = self.conn.request(ApiKey.WRITE_TXN_MARKERS, 1, body, WriteTxnMarkersResponse)
        assert [m.producer_id for m in r.markers] == [e[0] for e in ends]
        return [m.topics[0].partitions[0].error_code for m in r.markers]

    def fetch(
        self, topic: str, isolation: int, offset: int = 0, *, max_wait_ms: int = 0
    ) -> tuple[int, int, list, list]:
        """(high watermark, last stable offset, aborted (pid, first offset)
        pairs, [(offset, value or marker, is_control)]). With ``max_wait_ms``
        the broker waits for at least one byte (a DelayedFetch)."""
        body = {
            "replica_id": -1,
            "max_wait_ms": max_wait_ms,
            "min_bytes": 1 if max_wait_ms else 0,
            "max_bytes": 1 << 20,
            "isolation_level": isolation,
            "topics": [
                {
                    "topic": topic,
                    "partitions": [
                        {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20}
                    ],
                }
            ],
        }
        r = self.conn.request(ApiKey.FETCH, 11, body, FetchResponse)
        p = r.responses[0].partitions[0]
        assert p.error_code == 0, p
        aborted = (
            None
            if p.aborted_transactions is None
            else [(a.producer_id, a.first_offset) for a in p.aborted_transactions]
        )
        records = []
        if p.records:
            batches, _ = _native.decode_batches(bytes(p.records))
            for info, recs in batches:
                for rec in recs:
                    value = rec.value if not info.is_control else rec.key
                    records.append((rec.offset, value, info.is_control))
        return p.high_watermark, p.last_stable_offset, aborted or [], records

    def list_offset(self, topic: str, isolation: int) -> int:
        body = {
            "replica_id": -1,
            "isolation_level": isolation,
            "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}],
        }
        r = self.conn.request(ApiKey.LIST_OFFSETS, 5, body, ListOffsetsResponse)
        p = r.topics[0].partitions[0]
        assert p.error_code == 0, p
        return p.offset

    def describe_producers(self, topic: str) -> tuple[int, dict[int, int]]:
        """(error code, producer id -> current txn start offset)."""
        body = {"topics": [{"name": topic, "partition_indexes": [0]}]}
        r = self.conn.request(ApiKey.DESCRIBE_PRODUCERS, 0, body, DescribeProducersResponse)
        p = r.topics[0].partitions[0]
        return p.error_code, {s.producer_id: s.current_txn_start_offset for s in p.active_producers}


def values(records: list[tuple[int, bytes, bool]]) -> list[bytes]:
    return [v for _, v, control in records if not control]


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[tuple[BrokerProcess, int]]:
    with metrics_broker(tmp_path / "data", NO_VERIFICATION) as started:
        yield started


def fetches_waited(metrics_port: int) -> float:
    """Fetches handed to the Fetch purgatory so far (the broker's /metrics)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as r:
        text = r.read().decode()
    for line in text.splitlines():
        if line.startswith(PURGATORY_OPS + "{") and 'delayedOperation="Fetch"' in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def write_two_transactions(c: Client, topic: str) -> tuple[int, int, int]:
    """p0 (plain), a0 a1 (A), b0 (B), C's c0 left open after A commits and B
    aborts: returns the producer ids (A, B, C)."""
    a, b, cc = c.producer_id(), c.producer_id(), c.producer_id()
    assert c.produce(topic, [b"p0"], transactional=False) == 0
    assert c.produce(topic, [b"a0", b"a1"], a) == 1
    assert c.produce(topic, [b"b0"], b) == 3
    return a, b, cc


def test_commit_abort_read_committed_restart_and_kcat(
    broker: tuple[BrokerProcess, int],
) -> None:
    bp, metrics_port = broker
    topic = topic_name("txn")
    c = Client(bp.bootstrap)
    try:
        versions = c.conn.request(ApiKey.API_VERSIONS, 0, {}, ApiVersionsResponse)
        advertised = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
        assert advertised[ApiKey.WRITE_TXN_MARKERS] == (1, 2)  # v2: KIP-1228
        assert advertised[ApiKey.DESCRIBE_PRODUCERS] == (0, 0)
        c.create_topic(topic)
        a, b, cc = write_two_transactions(c, topic)

        hw, lso, aborted, recs = c.fetch(topic, isolation=1)
        assert (hw, lso, aborted) == (4, 1, [])
        assert values(recs) == [b"p0"]  # the open transactions are not readable
        hw, lso, aborted, recs = c.fetch(topic, isolation=0)
        assert (hw, lso) == (4, 1)
        assert values(recs) == [b"p0", b"a0", b"a1", b"b0"]
        assert (c.list_offset(topic, 1), c.list_offset(topic, 0)) == (1, 4)
        assert c.describe_producers(topic) == (0, {a: 1, b: 3})  # C has written nothing yet

        # A read_committed consumer at the LSO waits (a DelayedFetch); the
        # markers moving the LSO complete it, long before its max wait.
        waiting = Client(bp.bootstrap)
        waited = fetches_waited(metrics_port)
        got: list[tuple[int, int, list, list]] = []
        t = threading.Thread(
            target=lambda: got.append(waiting.fetch(topic, 1, 1, max_wait_ms=int(WAIT * 1000)))
        )
        t.start()
        wait_for(lambda: fetches_waited(metrics_port) > waited, "the fetch to wait")

        # The coordinator ends both: A commits, B aborts (coordinator epoch 5).
        assert c.markers(topic, (a, True, 5), (b, False, 5)) == [0, 0]
        t.join(WAIT)
        waiting.close()
        assert got, "the waiting read_committed fetch was not answered"
        # Answered when the first marker moved the LSO (to B's start, 3) or
        # both had (6): the records below it, and B's abort once it is there.
        _, lso, aborted, recs = got[0]
        expected = {3: ([b"a0", b"a1"], []), 6: ([b"a0", b"a1", b"b0"], [(b, 3)])}
        assert lso in expected
        assert (values(recs), aborted) == expected[lso]
        # A zombie coordinator (epoch 4) is fenced; a topic nobody has is unknown.
        assert c.markers(topic, (b, True, 4)) == [FENCED]
        assert c.markers(topic + "-none", (b, True, 5)) == [UNKNOWN]
        assert c.produce(topic, [b"c0"], cc) == 6

        def check_after_markers() -> None:
            hw, lso, aborted, recs = c.fetch(topic, isolation=1)
            assert (hw, lso) == (7, 6)
            assert aborted == [(b, 3)]
            # The aborted records and both markers are in the slice; the
            # consumer drops B's records by the aborted list.
            assert values(recs) == [b"p0", b"a0", b"a1", b"b0"]
            assert [off for off, _, control in recs if control] == [4, 5]
            assert c.list_offset(topic, 1) == 6
            assert c.describe_producers(topic) == (0, {a: -1, b: -1, cc: 6})
            # read_uncommitted: no aborted list, everything up to the HW.
            hw, lso, aborted, recs = c.fetch(topic, isolation=0)
            assert aborted == [] and values(recs)[-1] == b"c0"

        check_after_markers()
        txnindex = bp.data / f"{topic}-0" / "00000000000000000000.txnindex"
        assert txnindex.stat().st_size == 34

        # kcat (librdkafka) with read_committed: only committed records (and
        # the open transaction's c0 not yet).
        if shutil.which("kcat") is not None:
            assert kcat(bp.bootstrap, topic, "read_committed") == ["p0", "a0", "a1"]
            assert kcat(bp.bootstrap, topic, "read_uncommitted") == [
                "p0", "a0", "a1", "b0", "c0"
            ]  # fmt: skip

        # A clean restart (snapshot at the LEO) and a SIGKILL (recovery from
        # the log) keep the LSO, the open transaction and the .txnindex.
        for sig in (signal.SIGTERM, signal.SIGKILL):
            c.close()
            bp.stop(sig)
            if sig == signal.SIGKILL:
                txnindex.unlink()  # recovery must rebuild it from the markers
                for snap in (bp.data / f"{topic}-0").glob("*.snapshot"):
                    snap.unlink()
            bp.start()
            c = restarted = Client(bp.bootstrap)
            wait_for(lambda r=restarted: r.fetch(topic, isolation=0)[0] == 7, "the restarted HW")
            check_after_markers()
            assert txnindex.stat().st_size == 34

        # C commits: the LSO reaches the HW, and kcat sees c0.
        assert c.markers(topic, (cc, True, 5)) == [0]
        hw, lso, aborted, recs = c.fetch(topic, isolation=1)
        assert (hw, lso, aborted) == (8, 8, [(b, 3)])
        if shutil.which("kcat") is not None:
            assert kcat(bp.bootstrap, topic, "read_committed") == ["p0", "a0", "a1", "c0"]
    finally:
        c.close()


def kcat(bootstrap: str, topic: str, isolation: str) -> list[str]:
    out = subprocess.run(
        ["kcat", "-C", "-b", bootstrap, "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q",
         "-X", f"isolation.level={isolation}", "-f", "%s\n"],
        capture_output=True, text=True, timeout=WAIT, check=True,
    )  # fmt: skip
    return out.stdout.split()


def test_write_txn_markers_on_a_cluster_and_lso_after_failover(tmp_path: Path) -> None:
    topic = topic_name("txn-cluster")
    with LocalCluster(
        3,
        {"min.insync.replicas": "2", "replica.fetch.wait.max.ms": "100", **NO_VERIFICATION},
        directory=str(tmp_path / "cluster"),
    ) as cluster:
        c = Client(cluster.bootstrap_servers)
        try:
            c.create_topic(topic, replication_factor=3)
        finally:
            c.close()
        cluster.wait_for_full_isr(topic)
        leader = cluster.wait_for_leader(topic)
        c = Client(cluster.broker(leader).bootstrap_servers)
        try:
            a, b, cc = write_two_transactions(c, topic)
            # The leader answers once the followers have the markers (acks=all).
            assert c.markers(topic, (a, True, 3), (b, False, 3)) == [0, 0]
            assert c.produce(topic, [b"c0"], cc) == 6
            before = c.fetch(topic, isolation=1)
            assert before[:3] == (7, 6, [(b, 3)])
        finally:
            c.close()

        # Every follower applied the markers it copied: its own producer
        # state (DescribeProducers answers from any replica) and .txnindex.
        followers = [i for i in (1, 2, 3) if i != leader]
        for f in followers:
            fc = Client(cluster.broker(f).bootstrap_servers)
            try:
                wait_for(
                    lambda fc=fc: fc.describe_producers(topic) == (0, {a: -1, b: -1, cc: 6}),
                    f"the markers on follower {f}",
                )
                # Not the leader: markers sent here are refused.
                assert fc.markers(topic, (cc, True, 3)) == [NOT_LEADER]
            finally:
                fc.close()
            index = Path(cluster.broker(f).log_dir) / f"{topic}-0" / "00000000000000000000.txnindex"
            wait_for(lambda index=index: index.exists() and index.stat().st_size == 34,
                     "the follower's .txnindex")  # fmt: skip

        # The leader dies: the new one has the same LSO and aborted transactions.
        cluster.broker(leader).kill()
        new_leader = None

        def elected() -> bool:
            nonlocal new_leader
            new_leader = cluster.leader(topic)
            return new_leader is not None and new_leader != leader

        cluster.wait_for(elected, "a new leader", WAIT)
        assert new_leader is not None
        nc = Client(cluster.broker(new_leader).bootstrap_servers)
        try:

            def same() -> bool:
                try:
                    return nc.fetch(topic, isolation=1)[:3] == before[:3]
                except AssertionError:  # not leading yet, or HW not yet known
                    return False

            wait_for(same, "the new leader's LSO")
            assert values(nc.fetch(topic, isolation=1)[3]) == [b"p0", b"a0", b"a1", b"b0"]
            # The new leader ends C's transaction; the LSO reaches the HW.
            assert nc.markers(topic, (cc, False, 4)) == [0]
            assert nc.fetch(topic, isolation=1)[:3] == (8, 8, [(b, 3), (cc, 6)])
        finally:
            nc.close()
        assert os.path.isdir(cluster.broker(leader).log_dir)
