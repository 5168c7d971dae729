"""The transaction coordinator on real broker processes, with real clients.

Kafka's Java client (``TxnCommand``: commits and aborts, consume-transform-
produce with sendOffsetsToTransaction, fencing) and librdkafka's
transactional producer against a lone broker; a read_committed consumer
sees every committed record once and no aborted one. pylog's protocol client
checks Kafka's error codes (INVALID_TRANSACTION_TIMEOUT, PRODUCER_FENCED /
INVALID_PRODUCER_EPOCH by version, INVALID_TXN_STATE,
INVALID_PRODUCER_ID_MAPPING), the ``__transaction_state`` records in
Kafka's layout on disk, the state reloaded after a restart, and a
transaction past its timeout aborted by the coordinator (its producer
fenced, the LSO released). On a three-broker ZooKeeper cluster the same
clients run, and the coordinator's broker is SIGKILLed in the middle of a
transaction: the transaction ends (committed or aborted as a whole), the LSO
reaches the high watermark, nothing hangs.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from broker_process import BrokerProcess, topic_name

from pylog import _native
from pylog.common.topic_partition import TopicPartition
from pylog.protocol import ApiKey
from pylog.protocol.client import KafkaConnection
from pylog.protocol.messages import (
    AddPartitionsToTxnResponse,
    DescribeTransactionsResponse,
    EndTxnResponse,
    FindCoordinatorResponse,
    InitProducerIdResponse,
    ListOffsetsResponse,
    ListTransactionsResponse,
    ProduceResponse,
)
from pylog.server.add_partitions_to_txn_manager import AddPartitionsToTxnManager, CoordinatorNode
from pylog.testing.cluster import LocalCluster
from pylog.transaction.transaction_log import read_key, read_value
from pylog.transaction.transaction_metadata import TransactionState
from pylog.transaction.transaction_state_manager import TRANSACTION_STATE_TOPIC

pytestmark = pytest.mark.integration

WAIT = 60.0  # upper bound for waits: only catches hangs

NONE = 0
NETWORK_EXCEPTION = 13
NOT_ENOUGH_REPLICAS = 19
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
INVALID_PRODUCER_ID_MAPPING = 49
INVALID_TRANSACTION_TIMEOUT = 50
CONCURRENT_TRANSACTIONS = 51
LOAD_IN_PROGRESS = 14  # COORDINATOR_LOAD_IN_PROGRESS
PRODUCER_FENCED = 90
TRANSACTIONAL_ID_NOT_FOUND = 105
READ_COMMITTED = 1


def wait_for(pred: Callable[[], object], what: str, timeout: float = WAIT) -> None:
    pause = threading.Event()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        pause.wait(0.1)
    raise AssertionError(f"timed out waiting for {what}")


# ---------------------------------------------------------------- the Java client


def _java() -> Any:
    try:
        import java_client
    except ImportError:  # pragma: no cover - tests/ is on the path under pytest
        pytest.skip("tests/java_client.py not importable")
    try:
        java_client.jar_path()
    except RuntimeError as e:
        pytest.skip(str(e))
    return java_client


def read_committed_values(bootstrap: str, topic: str, partitions: int) -> list[str]:
    """Every record a read_committed Java consumer reads up to the LSO."""
    jc = _java()
    assign = ",".join(str(p) for p in range(partitions))
    r = jc.run_java(
        "consume", "--bootstrap", bootstrap, "--topic", topic, "--assign", assign, "--to-end",
        "--timeout-ms", "60000", "--property", "isolation.level=read_committed",
    )  # fmt: skip
    assert r.returncode == 0, (r.lines[-3:], r.stderr[-2000:])
    return [line["value"] for line in r.of("record")]


def read_uncommitted_count(bootstrap: str, topic: str, partitions: int) -> int:
    jc = _java()
    assign = ",".join(str(p) for p in range(partitions))
    r = jc.run_java(
        "consume", "--bootstrap", bootstrap, "--topic", topic, "--assign", assign, "--to-end",
        "--timeout-ms", "60000",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    return len(r.of("record"))


def create_topic(bootstrap: str, topic: str, partitions: int, rf: int = 1) -> None:
    with KafkaConnection(bootstrap, timeout=WAIT) as c:
        t = {"name": topic, "num_partitions": partitions, "replication_factor": rf, "configs": []}
        r = c.request(ApiKey.CREATE_TOPICS, 5, {"topics": [t], "timeout_ms": 30000})
        assert r.topics[0].error_code == 0, r  # type: ignore[attr-defined]


def check_produced(values: list[str], committed_txns: int, per_txn: int) -> None:
    """Committed transactions' records exactly once, aborted ones never."""
    assert not [v for v in values if v.startswith("a-")], "an aborted record was read"
    assert len(values) == len(set(values)), "a committed record was read twice"
    assert len(values) == committed_txns * per_txn


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    b = BrokerProcess(
        tmp_path / "data",
        {"transaction.abort.timed.out.transaction.cleanup.interval.ms": 500},
        log_path=tmp_path / "broker.log",
        log_level="INFO",
    ).start()
    try:
        yield b
    finally:
        b.stop()


def test_java_commit_abort_read_committed(broker: BrokerProcess) -> None:
    jc = _java()
    topic = topic_name("txn-java")
    create_topic(broker.bootstrap, topic, 3)
    r = jc.run_java(
        "txn", "produce", "--bootstrap", broker.bootstrap, "--topic", topic,
        "--transactional-id", "java-txn", "--commit", "6", "--abort", "3", "--per-txn", "10",
    )  # fmt: skip
    assert r.returncode == 0, (r.lines[-3:], r.stderr[-3000:])
    assert r.last == {"type": "done", "committed": 6, "aborted": 3}
    check_produced(read_committed_values(broker.bootstrap, topic, 3), 6, 10)
    # The aborted records are in the log all the same (a read_uncommitted
    # consumer sees them), with the markers between.
    assert read_uncommitted_count(broker.bootstrap, topic, 3) == 90
    # Kafka 4's client ran transactions v2 (transaction.version 2 is
    # finalized): no AddPartitionsToTxn (Produce v12 added the partitions),
    # and every EndTxn bumped the epoch, the markers carrying the new one.
    S = TransactionState
    log = [v for tid, v in transaction_log_records(broker.data) if tid == "java-txn" and v]
    prepared = [v.producer_epoch for v in log if v.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT)]
    assert prepared == list(range(1, 10))
    assert {v.client_transaction_version for v in log if v.state != S.EMPTY} == {2}


def test_java_consume_transform_produce(broker: BrokerProcess) -> None:
    jc = _java()
    src, dst = topic_name("ctp-in"), topic_name("ctp-out")
    create_topic(broker.bootstrap, src, 2)
    create_topic(broker.bootstrap, dst, 2)
    r = jc.run_java("produce", "--bootstrap", broker.bootstrap, "--topic", src, "--count", "50")
    assert r.returncode == 0, r.stderr[-2000:]
    r = jc.run_java(
        "txn", "transform", "--bootstrap", broker.bootstrap, "--input", src, "--output", dst,
        "--group", "ctp", "--transactional-id", "ctp-1", "--count", "50",
    )  # fmt: skip
    assert r.returncode == 0, (r.lines[-3:], r.stderr[-3000:])
    assert r.last["processed"] == 50
    out = read_committed_values(broker.bootstrap, dst, 2)
    assert sorted(out) == sorted(f"value-{i}-out" for i in range(50))
    # The group's offsets were committed in the transactions: the COMMIT
    # markers on __consumer_offsets made them the group's committed offsets.
    with KafkaConnection(broker.bootstrap, timeout=WAIT) as c:
        resp = c.request(ApiKey.OFFSET_FETCH, 7, {"group_id": "ctp", "topics": None,
                                                   "require_stable": True})  # fmt: skip
        assert resp.error_code == 0  # type: ignore[attr-defined]
        committed = {
            p.partition_index: p.committed_offset
            for t in resp.topics  # type: ignore[attr-defined]
            for p in t.partitions
            if t.name == src
        }
    assert sum(committed.values()) == 50, committed
    # Under transactions v2 the offsets partition came in with TxnOffsetCommit
    # v5 (the group coordinator added it), the epoch bumped at each commit.
    log = [v for tid, v in transaction_log_records(broker.data) if tid == "ctp-1" and v]
    added = [v for v in log if any(tp.topic == "__consumer_offsets" for tp in v.partitions)]
    assert added and {v.client_transaction_version for v in added} == {2}
    # A second run finds nothing left to do: the committed offsets hold.
    r = jc.run_java(
        "txn", "transform", "--bootstrap", broker.bootstrap, "--input", src, "--output", dst,
        "--group", "ctp", "--transactional-id", "ctp-1", "--count", "1", "--timeout-ms", "3000",
    )  # fmt: skip
    assert r.last["processed"] == 0


def test_java_fencing(broker: BrokerProcess) -> None:
    jc = _java()
    topic = topic_name("txn-fence")
    create_topic(broker.bootstrap, topic, 1)
    r = jc.run_java(
        "txn", "fence", "--bootstrap", broker.bootstrap, "--topic", topic,
        "--transactional-id", "fence-1",
    )  # fmt: skip
    assert r.returncode == 0, (r.lines, r.stderr[-3000:])
    assert r.of("fenced") == [{"type": "fenced", "producer": "first",
                               "error": "ProducerFencedException"}]  # fmt: skip
    assert r.of("committed") == [{"type": "committed", "producer": "second"}]
    # The first producer's open transaction was aborted by the fence.
    assert read_committed_values(broker.bootstrap, topic, 1) == ["second-committed"]


def test_librdkafka_transactions(broker: BrokerProcess) -> None:
    ck = pytest.importorskip("confluent_kafka")
    topic = topic_name("txn-ck")
    create_topic(broker.bootstrap, topic, 2)
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "ck-txn"})
    p.init_transactions(WAIT)
    for i in range(4):
        p.begin_transaction()
        aborted = i % 2 == 1
        for j in range(5):
            p.produce(topic, value=f"{'a' if aborted else 'c'}-{i}-{j}".encode())
        if aborted:
            p.flush(WAIT)
            p.abort_transaction(WAIT)
        else:
            p.commit_transaction(WAIT)
    p.flush(WAIT)
    check_produced(read_committed_values(broker.bootstrap, topic, 2), 2, 5)


# ---------------------------------------------------------------- the protocol


class TxnClient:
    """pylog's protocol client speaking for a transactional producer."""

    def __init__(self, bootstrap: str) -> None:
        self.conn = KafkaConnection(bootstrap, timeout=WAIT, client_id="txn-coordinator-test")

    def close(self) -> None:
        self.conn.close()

    def find_coordinator(self, txn_id: str) -> FindCoordinatorResponse:
        r = self.conn.request(
            ApiKey.FIND_COORDINATOR, 3, {"key": txn_id, "key_type": 1}, FindCoordinatorResponse
        )
        return r

    def wait_coordinator(self, txn_id: str) -> int:
        found: list[int] = []

        def ok() -> bool:
            r = self.find_coordinator(txn_id)
            if r.error_code == 0:
                found.append(r.node_id)
            return r.error_code == 0

        wait_for(ok, "a transaction coordinator")
        return found[-1]

    def init(
        self, txn_id: str, timeout_ms: int = 60000, pid: int = -1, epoch: int = -1, version: int = 4
    ) -> InitProducerIdResponse:
        return self.conn.request(
            ApiKey.INIT_PRODUCER_ID, version,
            {"transactional_id": txn_id, "transaction_timeout_ms": timeout_ms,
             "producer_id": pid, "producer_epoch": epoch},
            InitProducerIdResponse,
        )  # fmt: skip

    def add(
        self, txn_id: str, pid: int, epoch: int, topic: str, parts: list[int], version: int = 3
    ) -> int:
        r = self.conn.request(
            ApiKey.ADD_PARTITIONS_TO_TXN, version,
            {"v3_and_below_transactional_id": txn_id, "v3_and_below_producer_id": pid,
             "v3_and_below_producer_epoch": epoch,
             "v3_and_below_topics": [{"name": topic, "partitions": parts}]},
            AddPartitionsToTxnResponse,
        )  # fmt: skip
        codes = {p.partition_error_code for t in r.results_by_topic_v3_and_below
                 for p in t.results_by_partition}  # fmt: skip
        assert len(codes) == 1, codes
        return codes.pop()

    def end(self, txn_id: str, pid: int, epoch: int, commit: bool, version: int = 3) -> int:
        r = self.conn.request(
            ApiKey.END_TXN, version,
            {"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch,
             "committed": commit},
            EndTxnResponse,
        )  # fmt: skip
        return r.error_code

    def describe(self, txn_id: str) -> Any:
        r = self.conn.request(
            ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [txn_id]},
            DescribeTransactionsResponse,
        )  # fmt: skip
        return r.transaction_states[0]

    def produce(
        self,
        txn_id: str,
        topic: str,
        pid: int,
        epoch: int,
        seq: int,
        values: list[bytes],
        acks: int = -1,
        partition: int = 0,
    ) -> int:
        batch = _native.build_batch(
            [(None, v, [], int(time.time() * 1000)) for v in values],
            producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=True,
        )  # fmt: skip
        r = self.conn.request(
            ApiKey.PRODUCE, 9,
            {"transactional_id": txn_id, "acks": acks, "timeout_ms": 30000,
             "topic_data": [{"name": topic,
                             "partition_data": [{"index": partition, "records": batch}]}]},
            ProduceResponse,
        )  # fmt: skip
        return r.responses[0].partition_responses[0].error_code

    def offsets(self, topic: str, partition: int = 0) -> tuple[int, int]:
        """(LSO, high watermark) of one of the topic's partitions."""
        out = []
        for isolation in (READ_COMMITTED, 0):
            r = self.conn.request(
                ApiKey.LIST_OFFSETS, 5,
                {"replica_id": -1, "isolation_level": isolation,
                 "topics": [{"name": topic, "partitions": [
                     {"partition_index": partition, "current_leader_epoch": -1,
                      "timestamp": -1}]}]},
                ListOffsetsResponse,
            )  # fmt: skip
            out.append(r.topics[0].partitions[0].offset)
        return out[0], out[1]


def _set_verification(bootstrap: str, enabled: bool) -> None:
    """transaction.partition.verification.enable as a cluster-wide dynamic
    broker config (kafka-configs --entity-type brokers --entity-default)."""
    with KafkaConnection(bootstrap, timeout=WAIT) as conn:
        r = conn.request(
            ApiKey.INCREMENTAL_ALTER_CONFIGS, 1,
            {"resources": [{"resource_type": 4, "resource_name": "", "configs": [
                {"name": "transaction.partition.verification.enable", "config_operation": 0,
                 "value": "true" if enabled else "false"}]}],
             "validate_only": False},
        )  # fmt: skip
        assert r.responses[0].error_code == NONE, r  # type: ignore[attr-defined]


def test_partition_verification_prevents_hanging_transactions(broker: BrokerProcess) -> None:
    """KIP-890 part 1: a leader appends a transactional batch that would open
    a transaction only once the coordinator confirms the partition is in it.
    A batch for a partition never added, a late batch after the commit and a
    fenced producer's batch are refused with Kafka's codes and write
    nothing; with verification switched off the same batch is appended and
    its transaction hangs (the LSO stays behind it)."""
    topic = topic_name("txn-verify")
    create_topic(broker.bootstrap, topic, 2)
    c = TxnClient(broker.bootstrap)
    try:
        # No __transaction_state yet: the coordinator cannot be asked, a
        # retriable NOT_ENOUGH_REPLICAS (Kafka's translation).
        r = c.conn.request(
            ApiKey.PRODUCE, 9,
            {"transactional_id": "hang", "acks": -1, "timeout_ms": 30000,
             "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records":
                 _native.build_batch([(None, b"early", [], 0)], producer_id=1000,
                                     producer_epoch=0, base_sequence=0,
                                     is_transactional=True)}]}]},
            ProduceResponse,
        )  # fmt: skip
        early = r.responses[0].partition_responses[0]
        assert early.error_code == NOT_ENOUGH_REPLICAS, early
        assert "COORDINATOR_NOT_AVAILABLE" in (early.error_message or ""), early
        c.wait_coordinator("hang")
        pid = c.init("hang").producer_id
        # Partition 1 never added: INVALID_TXN_STATE, nothing written.
        assert c.produce("hang", topic, pid, 0, 0, [b"h1"], partition=1) == INVALID_TXN_STATE
        assert c.add("hang", pid, 0, topic, [0]) == NONE
        assert c.produce("hang", topic, pid, 0, 0, [b"c1"]) == NONE
        assert c.produce("hang", topic, pid, 0, 0, [b"h1"], partition=1) == INVALID_TXN_STATE
        # An id the coordinator does not know is its own answer.
        assert c.produce("nobody", topic, pid, 0, 0, [b"n"], partition=1) == (
            INVALID_PRODUCER_ID_MAPPING
        )
        assert c.end("hang", pid, 0, True) == NONE
        wait_for(lambda: c.describe("hang").transaction_state == "CompleteCommit", "the commit")
        wait_for(lambda: c.offsets(topic) == (2, 2), "the COMMIT marker")
        # A late batch after the commit would open a transaction no marker
        # ends: refused.
        assert c.produce("hang", topic, pid, 0, 1, [b"late"]) == INVALID_TXN_STATE
        # A fenced producer (the epoch moved on): INVALID_PRODUCER_EPOCH.
        assert c.init("hang").producer_epoch == 1
        assert c.produce("hang", topic, pid, 0, 1, [b"z"], partition=1) == INVALID_PRODUCER_EPOCH
        assert c.offsets(topic) == (2, 2)
        assert c.offsets(topic, 1) == (0, 0)
        # Verification off: the same unadded batch lands and hangs.
        _set_verification(broker.bootstrap, False)
        try:
            wait_for(
                lambda: c.produce("hang", topic, pid, 1, 0, [b"h"], partition=1) == NONE,
                "an unverified append once verification is off",
            )
            assert c.offsets(topic, 1) == (0, 1)  # the LSO stays at the hanging batch
        finally:
            _set_verification(broker.bootstrap, True)
    finally:
        c.close()


def test_add_partitions_to_txn_manager_asks_over_the_wire(broker: BrokerProcess) -> None:
    """The leaders' side of KIP-890 part 1 against a real coordinator: the
    questions asked at once go in one AddPartitionsToTxn v5 request, each
    transaction gets its own answer translated as Kafka's manager does, and
    two questions for one id follow Kafka's rules (the same epoch: the older
    one NETWORK_EXCEPTION; an older epoch: INVALID_PRODUCER_EPOCH at once)."""
    topic = topic_name("txn-verify-wire")
    create_topic(broker.bootstrap, topic, 2)
    c = TxnClient(broker.bootstrap)
    try:
        c.wait_coordinator("w1")
        pid1 = c.init("w1").producer_id
        assert c.add("w1", pid1, 0, topic, [0]) == NONE
        pid2 = c.init("w2").producer_id
    finally:
        c.close()
    host, port = broker.bootstrap.rsplit(":", 1)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)

    async def ask() -> list[dict[TopicPartition, int]]:
        m = AddPartitionsToTxnManager(-1, lambda _id: CoordinatorNode(0, host, int(port)))
        try:
            return list(
                await asyncio.gather(
                    m.verify_transaction("w1", pid1, 0, [tp0, tp1]),
                    m.verify_transaction("w2", pid2, 0, [tp0]),
                    m.verify_transaction("w3", 77, 0, [tp0]),
                    m.verify_transaction("w3", 77, 0, [tp0]),  # a retry: the first goes
                    m.verify_transaction("w4", 78, 1, [tp1]),
                    m.verify_transaction("w4", 78, 0, [tp1]),  # older than the one waiting
                )
            )
        finally:
            await m.shutdown()

    got = asyncio.run(ask())
    assert got == [
        {tp1: INVALID_TXN_STATE},
        {tp0: INVALID_TXN_STATE},
        {tp0: NETWORK_EXCEPTION},
        {tp0: INVALID_PRODUCER_ID_MAPPING},
        {tp1: INVALID_PRODUCER_ID_MAPPING},
        {tp1: INVALID_PRODUCER_EPOCH},
    ]


def transaction_log_records(data: Path) -> list[tuple[str, Any]]:
    """Every (transactional id, value) in the broker's __transaction_state
    segments, read with Kafka's layout."""
    out = []
    for d in sorted(data.glob(f"{TRANSACTION_STATE_TOPIC}-*")):
        for seg in sorted(d.glob("*.log")):
            batches, _ = _native.decode_batches(seg.read_bytes())
            for _batch, records in batches:
                for rec in records:
                    assert rec.key is not None
                    txn_id = read_key(rec.key)
                    out.append((txn_id, None if rec.value is None else read_value(rec.value)))
    return out


def test_coordinator_errors_state_log_and_restart(broker: BrokerProcess) -> None:
    topic = topic_name("txn-proto")
    create_topic(broker.bootstrap, topic, 1)
    c = TxnClient(broker.bootstrap)
    try:
        c.wait_coordinator("p1")
        assert c.init("p1", timeout_ms=900_001).error_code == INVALID_TRANSACTION_TIMEOUT
        assert c.end("nobody", 5, 0, True) == INVALID_PRODUCER_ID_MAPPING
        assert c.describe("nobody").error_code == TRANSACTIONAL_ID_NOT_FOUND
        r = c.init("p1")
        assert (r.error_code, r.producer_epoch) == (NONE, 0)
        pid = r.producer_id
        # EndTxn with nothing begun: INVALID_TXN_STATE.
        assert c.end("p1", pid, 0, True) == INVALID_TXN_STATE
        assert c.add("p1", pid, 0, topic, [0]) == NONE
        assert c.produce("p1", topic, pid, 0, 0, [b"x1", b"x2"]) == NONE
        d = c.describe("p1")
        assert (d.transaction_state, d.producer_id) == ("Ongoing", pid)
        assert [(t.topic, t.partitions) for t in d.topics] == [(topic, [0])]
        lso, hw = c.offsets(topic)
        assert (lso, hw) == (0, 2)  # the open transaction holds the LSO
        # A producer with a stale epoch: PRODUCER_FENCED (v2+), INVALID_PRODUCER_EPOCH before.
        assert c.add("p1", pid, 7, topic, [0], version=3) == PRODUCER_FENCED
        assert c.add("p1", pid, 7, topic, [0], version=1) == INVALID_PRODUCER_EPOCH
        assert c.add("p1", pid + 1000, 0, topic, [0]) == INVALID_PRODUCER_ID_MAPPING
        assert c.end("p1", pid, 0, True) == NONE
        wait_for(lambda: c.describe("p1").transaction_state == "CompleteCommit", "CompleteCommit")
        wait_for(lambda: c.offsets(topic)[0] == 3, "the LSO past the COMMIT marker")
        # A retried commit is answered OK, an abort of it INVALID_TXN_STATE.
        assert c.end("p1", pid, 0, True) == NONE
        assert c.end("p1", pid, 0, False) == INVALID_TXN_STATE
        # A new producer for the id: the epoch goes up, the old one is fenced.
        r = c.init("p1")
        assert (r.error_code, r.producer_id, r.producer_epoch) == (NONE, pid, 1)
        assert c.add("p1", pid, 0, topic, [0]) == PRODUCER_FENCED
        # KIP-360: the producer names its id and current epoch: bumped, not fenced;
        # a stale one is fenced.
        r = c.init("p1", pid=pid, epoch=1)
        assert (r.error_code, r.producer_epoch) == (NONE, 2)
        assert c.init("p1", pid=pid, epoch=0).error_code == PRODUCER_FENCED
        assert c.init("p1", pid=pid, epoch=0, version=3).error_code == INVALID_PRODUCER_EPOCH
        lt = c.conn.request(ApiKey.LIST_TRANSACTIONS, 1,
                            {"state_filters": ["Empty"], "producer_id_filters": [],
                             "duration_filter": -1}, ListTransactionsResponse)  # fmt: skip
        assert [(t.transactional_id, t.transaction_state) for t in lt.transaction_states] == [
            ("p1", "Empty")
        ]
    finally:
        c.close()
    # On disk: Kafka's records, one per transition.
    states = [(tid, v.state, v.producer_epoch) for tid, v in
              transaction_log_records(broker.data) if tid == "p1"]  # fmt: skip
    S = TransactionState
    assert states == [
        ("p1", S.EMPTY, 0), ("p1", S.ONGOING, 0), ("p1", S.PREPARE_COMMIT, 0),
        ("p1", S.COMPLETE_COMMIT, 0), ("p1", S.EMPTY, 1), ("p1", S.EMPTY, 2),
    ]  # fmt: skip
    # A restart loads the state back from __transaction_state.
    broker.stop()
    broker.start()
    c = TxnClient(broker.bootstrap)
    try:
        c.wait_coordinator("p1")

        def loaded() -> bool:
            d = c.describe("p1")
            return d.error_code == NONE and (d.transaction_state, d.producer_epoch) == ("Empty", 2)

        wait_for(loaded, "the state reloaded")
        assert c.add("p1", pid, 1, topic, [0]) == PRODUCER_FENCED
    finally:
        c.close()


def _offset_fetch(c: TxnClient, group: str, topic: str, stable: bool = True) -> tuple[int, int]:
    """(error, offset) of the group's partition 0 (with require_stable): the
    group's error first (COORDINATOR_LOAD_IN_PROGRESS while it loads after a
    restart), as a client reads it, then the partition's."""
    r = c.conn.request(
        ApiKey.OFFSET_FETCH, 7,
        {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}],
         "require_stable": stable},
    )  # fmt: skip
    if r.error_code:  # type: ignore[attr-defined]
        return r.error_code, -1  # type: ignore[attr-defined]
    p = r.topics[0].partitions[0]  # type: ignore[attr-defined]
    return p.error_code, p.committed_offset


def _txn_offset_commit(c: TxnClient, txn: str, pid: int, group: str, topic: str, off: int) -> int:
    # CONCURRENT_TRANSACTIONS until the last transaction's markers are all
    # written and it is complete: retried, as every client does.
    def added() -> bool:
        code = c.conn.request(
            ApiKey.ADD_OFFSETS_TO_TXN, 3,
            {"transactional_id": txn, "producer_id": pid, "producer_epoch": 0,
             "group_id": group},
        ).error_code  # type: ignore[attr-defined]  # fmt: skip
        assert code in (NONE, CONCURRENT_TRANSACTIONS), code
        return bool(code == NONE)

    wait_for(added, f"AddOffsetsToTxn of {txn}")
    r = c.conn.request(
        ApiKey.TXN_OFFSET_COMMIT, 3,
        {"transactional_id": txn, "group_id": group, "producer_id": pid, "producer_epoch": 0,
         "generation_id": -1, "member_id": "", "group_instance_id": None,
         "topics": [{"name": topic, "partitions": [
             {"partition_index": 0, "committed_offset": off, "committed_leader_epoch": -1,
              "committed_metadata": ""}]}]},
    )  # fmt: skip
    return int(r.topics[0].partitions[0].error_code)  # type: ignore[attr-defined]


def test_txn_offset_commit_pending_until_the_marker(broker: BrokerProcess) -> None:
    """TxnOffsetCommit's offsets: pending (require_stable: UNSTABLE_OFFSET_COMMIT)
    until the COMMIT marker, dropped by an ABORT; the group loader honours
    the markers after a restart, and an open transaction's offsets stay
    pending across it."""
    topic, group = topic_name("txn-offsets"), "txn-offsets-group"
    create_topic(broker.bootstrap, topic, 1)
    UNSTABLE = 88
    c = TxnClient(broker.bootstrap)
    try:
        c.wait_coordinator("o1")
        c.conn.request(ApiKey.FIND_COORDINATOR, 3, {"key": group, "key_type": 0})
        pid = c.init("o1").producer_id
        wait_for(lambda: _offset_fetch(c, group, topic)[0] == NONE, "the group coordinator")
        assert _txn_offset_commit(c, "o1", pid, group, topic, 5) == NONE
        assert _offset_fetch(c, group, topic) == (UNSTABLE, -1)
        assert c.end("o1", pid, 0, True) == NONE
        wait_for(lambda: _offset_fetch(c, group, topic) == (NONE, 5), "offset 5 committed")
        assert _txn_offset_commit(c, "o1", pid, group, topic, 9) == NONE
        assert c.end("o1", pid, 0, False) == NONE
        wait_for(lambda: _offset_fetch(c, group, topic) == (NONE, 5), "offset 9 dropped")
        assert _txn_offset_commit(c, "o1", pid, group, topic, 12) == NONE  # left open
    finally:
        c.close()
    broker.stop(signal.SIGKILL)
    broker.start()
    c = TxnClient(broker.bootstrap)
    try:
        wait_for(lambda: _offset_fetch(c, group, topic)[0] in (NONE, UNSTABLE), "the group")
        # 5 committed (its COMMIT marker read), 9 aborted, 12 still pending.
        assert _offset_fetch(c, group, topic) == (UNSTABLE, -1)
        assert _offset_fetch(c, group, topic, stable=False) == (NONE, 5)
        c.wait_coordinator("o1")
        wait_for(lambda: c.describe("o1").transaction_state == "Ongoing", "the reloaded txn")
        assert c.end("o1", pid, 0, True) == NONE
        wait_for(lambda: _offset_fetch(c, group, topic) == (NONE, 12), "offset 12 committed")
    finally:
        c.close()


def test_idle_transactional_id_expires(tmp_path: Path) -> None:
    """transactional.id.expiration.ms: an idle id is removed (a tombstone in
    __transaction_state); a new InitProducerId starts it afresh."""
    b = BrokerProcess(
        tmp_path / "data",
        {"transactional.id.expiration.ms": 1000,
         "transaction.remove.expired.transaction.cleanup.interval.ms": 300},
        log_path=tmp_path / "broker.log",
    ).start()  # fmt: skip
    c = TxnClient(b.bootstrap)
    try:
        c.wait_coordinator("short-lived")
        first = c.init("short-lived").producer_id
        wait_for(lambda: c.describe("short-lived").error_code == TRANSACTIONAL_ID_NOT_FOUND,
                 "the id expired")  # fmt: skip
        assert ("short-lived", None) in transaction_log_records(b.data)
        r = c.init("short-lived")
        assert r.error_code == NONE and r.producer_epoch == 0 and r.producer_id != first
    finally:
        c.close()
        b.stop()


def test_timed_out_transaction_is_aborted(broker: BrokerProcess) -> None:
    topic = topic_name("txn-timeout")
    create_topic(broker.bootstrap, topic, 1)
    c = TxnClient(broker.bootstrap)
    try:
        c.wait_coordinator("slow")
        r = c.init("slow", timeout_ms=1000)
        pid = r.producer_id
        assert c.add("slow", pid, 0, topic, [0]) == NONE
        assert c.produce("slow", topic, pid, 0, 0, [b"never"]) == NONE
        # transaction.abort.timed.out.transaction.cleanup.interval.ms=500
        wait_for(lambda: c.describe("slow").transaction_state == "CompleteAbort", "the abort")
        d = c.describe("slow")
        # Bumped: the producer is fenced. With transaction.version 2 finalized
        # the abort is written at the cluster's level, which bumps it once
        # more (the fence's epoch, then the abort's), as Kafka 4 does.
        assert d.producer_epoch == 2
        assert c.end("slow", pid, 0, True) == PRODUCER_FENCED
        wait_for(lambda: c.offsets(topic) == (2, 2), "the LSO past the ABORT marker")
    finally:
        c.close()


def test_kafka_tools_read_the_coordinator(broker: BrokerProcess, tmp_path: Path) -> None:
    """Kafka's kafka-transactions lists and describes pylog's transactional
    ids; kafka-dump-log --transaction-log-decoder reads its
    __transaction_state segments, and pylog dump-log prints them as it does."""
    ck = pytest.importorskip("confluent_kafka")
    from kafka_tools import TOOLS, run_tool

    TOOLS.setdefault("kafka-transactions", "org.apache.kafka.tools.TransactionsCommand")
    topic = topic_name("txn-tools")
    create_topic(broker.bootstrap, topic, 1)
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "tools-txn"})
    p.init_transactions(WAIT)
    p.begin_transaction()
    p.produce(topic, value=b"v")
    p.commit_transaction(WAIT)
    work = tmp_path / "tools"
    work.mkdir()
    listed = run_tool("kafka-transactions", "--bootstrap-server", broker.bootstrap, "list",
                      workdir=work).stdout  # fmt: skip
    assert "tools-txn" in listed and "CompleteCommit" in listed, listed
    described = run_tool(
        "kafka-transactions", "--bootstrap-server", broker.bootstrap, "describe",
        "--transactional-id", "tools-txn", workdir=work,
    ).stdout  # fmt: skip
    assert "tools-txn" in described and "CompleteCommit" in described, described
    segments = [
        str(seg)
        for seg in sorted(broker.data.glob(f"{TRANSACTION_STATE_TOPIC}-*/*.log"))
        if seg.stat().st_size > 0
    ]
    assert segments
    dumped = run_tool(
        "kafka-dump-log", "--files", ",".join(segments), "--transaction-log-decoder",
        workdir=work,
    ).stdout  # fmt: skip
    # Kafka 4.3 prints the schemas' fields as JSON: every transition of the
    # id, Empty (0), Ongoing (1), PrepareCommit (2), CompleteCommit (4).
    assert '"data":{"transactionalId":"tools-txn"}' in dumped, dumped[-2000:]
    for status in (0, 1, 2, 4):
        assert f'"transactionStatus":{status},' in dumped, dumped[-3000:]
    assert f'"transactionPartitions":[{{"topic":"{topic}","partitionIds":[0]}}]' in dumped
    # pylog dump-log --transaction-log-decoder prints the same, line for line.
    from broker_process import PYLOG

    ours = subprocess.run(
        [PYLOG, "dump-log", "--transaction-log-decoder", "--files", *segments],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert ours.returncode == 0, ours.stderr
    assert ours.stdout.splitlines() == dumped.splitlines()


def test_acls_on_transactions(tmp_path: Path) -> None:
    """With an authorizer, as Kafka checks: WRITE on the TransactionalId (and
    DESCRIBE to find its coordinator), WRITE on the topics added. The broker
    sends its markers to itself on its inter-broker listener as the super
    user the listener's JAAS logs in with (ClusterAction, as Kafka needs)."""
    ck = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )
    from security_support import listener_ports, plain_jaas

    users = {"admin": "admin-secret", "bob": "bob-secret"}
    b = BrokerProcess(
        tmp_path / "data",
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            "inter.broker.listener.name": "SASL_PLAINTEXT",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas(users),
            "sasl.enabled.mechanisms": "PLAIN",
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:admin",
        },
        log_path=tmp_path / "broker.log",
    ).start()
    try:
        port = listener_ports(b.start_line)["SASL_PLAINTEXT"]

        def conf(user: str) -> dict[str, Any]:
            return {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_PLAINTEXT",
                    "sasl.mechanism": "PLAIN", "sasl.username": user,
                    "sasl.password": users[user]}  # fmt: skip

        topic = topic_name("txn-acl")
        admin = ck.admin.AdminClient(conf("admin"))
        admin.create_topics([ck.admin.NewTopic(topic, 1, 1)])[topic].result(WAIT)

        def allow(rtype: Any, name: str, op: Any) -> Any:
            return AclBinding(rtype, name, ResourcePatternType.LITERAL, "User:bob", "*", op,
                              AclPermissionType.ALLOW)  # fmt: skip

        refused = ck.Producer({**conf("bob"), "transactional.id": "bob-txn"})
        with pytest.raises(ck.KafkaException) as e:
            refused.init_transactions(20)
        assert e.value.args[0].code() == ck.KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        for f in admin.create_acls([
            allow(ResourceType.TRANSACTIONAL_ID, "bob-txn", AclOperation.WRITE),
            allow(ResourceType.TRANSACTIONAL_ID, "bob-txn", AclOperation.DESCRIBE),
            allow(ResourceType.TOPIC, topic, AclOperation.WRITE),
        ]).values():  # fmt: skip
            f.result(WAIT)
        p = ck.Producer({**conf("bob"), "transactional.id": "bob-txn"})
        p.init_transactions(WAIT)
        p.begin_transaction()
        p.produce(topic, value=b"bob-1")
        p.commit_transaction(WAIT)
        c = ck.Consumer(
            {**conf("admin"), "group.id": "acl-reader", "isolation.level": "read_committed"}
        )
        try:
            c.assign([ck.TopicPartition(topic, 0, 0)])
            got: list[bytes] = []
            deadline = time.monotonic() + WAIT
            while not got and time.monotonic() < deadline:
                m = c.poll(0.5)
                if m is not None and m.error() is None:
                    got.append(m.value())
            assert got == [b"bob-1"]
        finally:
            c.close()
    finally:
        b.stop()


# ---------------------------------------------------------------- the cluster


@pytest.fixture(scope="module")
def txn_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(
        3, directory=str(tmp_path_factory.mktemp("txn-cluster")), log_level="INFO"
    ) as cluster:
        yield cluster


def test_cluster_transactions_and_coordinator_killed(
    txn_cluster: LocalCluster, tmp_path: Path
) -> None:
    jc = _java()
    cluster = txn_cluster
    topic = topic_name("txn-cluster")
    create_topic(cluster.bootstrap_servers, topic, 3, rf=3)
    for p in range(3):
        cluster.wait_for_full_isr(topic, p)
    r = jc.run_java(
        "txn", "produce", "--bootstrap", cluster.bootstrap_servers, "--topic", topic,
        "--transactional-id", "cl-txn", "--commit", "4", "--abort", "2", "--per-txn", "10",
        timeout=180,
    )  # fmt: skip
    assert r.returncode == 0, (r.lines[-3:], r.stderr[-3000:])
    check_produced(read_committed_values(cluster.bootstrap_servers, topic, 3), 4, 10)

    # The coordinator's broker dies between the records and the commit.
    held = topic_name("txn-held")
    create_topic(cluster.bootstrap_servers, held, 1, rf=3)
    cluster.wait_for_full_isr(held)
    c = TxnClient(cluster.bootstrap_servers)
    try:
        c.wait_coordinator("held-1")
    finally:
        c.close()
    proc = jc.start_java(
        "txn", "hold", "--bootstrap", cluster.bootstrap_servers, "--topic", held,
        "--transactional-id", "held-1", "--count", "10", stderr=tmp_path / "hold.err",
    )  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stdin is not None
        line = proc.stdout.readline()
        assert '"sent"' in line, (line, (tmp_path / "hold.err").read_text()[-2000:])
        c = TxnClient(cluster.bootstrap_servers)
        try:
            coordinator = c.wait_coordinator("held-1")
        finally:
            c.close()
        cluster.broker(coordinator).kill()
        proc.stdin.write("commit\n")
        proc.stdin.flush()
        out, _ = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert '"committed"' in out, (out, (tmp_path / "hold.err").read_text()[-3000:])
    alive = ",".join(b.bootstrap_servers for i, b in cluster.brokers.items()
                     if i != coordinator)  # fmt: skip
    values = read_committed_values(alive, held, 1)
    assert sorted(values) == sorted(f"held-{j}" for j in range(10))
    c = TxnClient(alive)
    try:
        leader = cluster.wait_for_leader(held)
        lc = TxnClient(cluster.broker(leader).bootstrap_servers)
        try:
            wait_for(lambda: lc.offsets(held)[0] == lc.offsets(held)[1], "LSO == HW")
        finally:
            lc.close()
        # DescribeTransactions is answered by the coordinator only: ask
        # the broker that took the id's __transaction_state partition.
        successor = c.wait_coordinator("held-1")
        assert successor != coordinator
        sc = TxnClient(cluster.broker(successor).bootstrap_servers)
        try:
            wait_for(lambda: sc.describe("held-1").transaction_state == "CompleteCommit",
                     "CompleteCommit at the new coordinator")  # fmt: skip
        finally:
            sc.close()
    finally:
        c.close()
    cluster.broker(coordinator).start()


def _end_v5(c: TxnClient, txn: str, pid: int, epoch: int, commit: bool) -> tuple[int, int, int]:
    r = c.conn.request(
        ApiKey.END_TXN, 5,
        {"transactional_id": txn, "producer_id": pid, "producer_epoch": epoch,
         "committed": commit},
        EndTxnResponse,
    )  # fmt: skip
    return r.error_code, r.producer_id, r.producer_epoch


def test_cluster_markers_held_below_min_insync_then_resent(txn_cluster: LocalCluster) -> None:
    """A commit's markers cannot be written while their partition's ISR is
    below min.insync.replicas (an RF-3 topic with min.insync.replicas=3, one
    follower down): the transaction stays PrepareCommit. Meanwhile every
    EndTxn v5 and AddPartitionsToTxn is CONCURRENT_TRANSACTIONS before its
    producer id and epoch are judged, as Kafka 4.3's coordinator answers
    (franz-go's TestTxnEtl aborts at once at the new epoch, and
    PRODUCER_FENCED there was fatal to it). The coordinator's broker is then
    SIGKILLed: the broker taking its __transaction_state partition loads
    PrepareCommit and sends the markers again; they land once the ISR is
    full, and the abort at the bumped epoch then goes through.
    (min.insync.replicas is capped at the replica count, Kafka's
    effectiveMinIsr, so only a missing replica holds markers.)"""
    cluster = txn_cluster
    for b in cluster.brokers.values():
        if not b.running:
            b.start()
    txn = "resend"
    probe = TxnClient(cluster.bootstrap_servers)
    try:
        coordinator = probe.wait_coordinator(txn)
    finally:
        probe.close()
    # Every __transaction_state replica back in sync after the previous
    # test's kill: with the follower down below, each state partition keeps
    # transaction.state.log.min.isr (2) in sync.
    cluster.wait_for_full_isr(TRANSACTION_STATE_TOPIC, 50)
    others = sorted(i for i in cluster.brokers if i != coordinator)
    follower = others[1]
    topic = topic_name("txn-resend")
    with KafkaConnection(cluster.bootstrap_servers, timeout=WAIT) as conn:
        t = {"name": topic, "num_partitions": -1, "replication_factor": -1,
             "assignments": [{"partition_index": 0,
                              "broker_ids": [coordinator, others[0], follower]}],
             "configs": [{"name": "min.insync.replicas", "value": "3"}]}  # fmt: skip
        r = conn.request(ApiKey.CREATE_TOPICS, 5, {"topics": [t], "timeout_ms": 30000})
        assert r.topics[0].error_code == 0, r  # type: ignore[attr-defined]
    cluster.wait_for_full_isr(topic)

    c = TxnClient(cluster.broker(coordinator).bootstrap_servers)
    try:
        inits: list[InitProducerIdResponse] = []
        # The coordinator may still be loading its partitions after the
        # previous test's restart: COORDINATOR_LOAD_IN_PROGRESS, retried.
        wait_for(
            lambda: inits.append(c.init(txn)) or inits[-1].error_code == NONE, "InitProducerId"
        )
        pid = inits[-1].producer_id
        assert c.add(txn, pid, 0, topic, [0]) == NONE
        leader = TxnClient(cluster.broker(cluster.wait_for_leader(topic)).bootstrap_servers)
        try:
            assert leader.produce(txn, topic, pid, 0, 0, [b"r1", b"r2", b"r3"], acks=1) == NONE
        finally:
            leader.close()
        # The follower goes: the partition's ISR falls below its
        # min.insync.replicas, and the commit's markers are refused.
        cluster.broker(follower).kill()
        cluster.wait_for(lambda: follower not in cluster.isr(topic), "the ISR without the follower")
        # The controller's ISR change bumps the leader epochs of the state
        # partitions the follower was in, and the coordinator loads them
        # again under the new coordinator epoch, as Kafka's does:
        # COORDINATOR_LOAD_IN_PROGRESS meanwhile, which a client retries.
        ends: list[tuple[int, int, int]] = []
        wait_for(
            lambda: ends.append(_end_v5(c, txn, pid, 0, True)) or ends[-1][0] != LOAD_IN_PROGRESS,
            "EndTxn past the state partition's reload",
        )
        assert ends[-1] == (NONE, pid, 1), ends
        # Its completion is pending behind the markers, which are refused.
        assert c.describe(txn).transaction_state == "PrepareCommit"
        # The next transaction's abort, a commit at the new epoch, the
        # commit's retry, an epoch never handed out, a v1-style add.
        assert _end_v5(c, txn, pid, 1, False)[0] == CONCURRENT_TRANSACTIONS
        assert _end_v5(c, txn, pid, 1, True)[0] == CONCURRENT_TRANSACTIONS
        assert _end_v5(c, txn, pid, 0, True)[0] == CONCURRENT_TRANSACTIONS
        assert _end_v5(c, txn, pid, 7, False)[0] == CONCURRENT_TRANSACTIONS
        assert c.add(txn, pid, 0, topic, [0]) == CONCURRENT_TRANSACTIONS
    finally:
        c.close()

    cluster.broker(coordinator).kill()
    probe = TxnClient(",".join(cluster.broker(i).bootstrap_servers for i in others))
    try:
        cluster.wait_for(
            lambda: (
                probe.find_coordinator(txn).error_code == NONE
                and probe.find_coordinator(txn).node_id != coordinator
            ),
            "another coordinator",
        )
        successor = probe.find_coordinator(txn).node_id
    finally:
        probe.close()
    s = TxnClient(cluster.broker(successor).bootstrap_servers)
    try:
        wait_for(
            lambda: s.describe(txn).transaction_state == "PrepareCommit", "PrepareCommit loaded"
        )
    finally:
        s.close()
    cluster.broker(follower).start()
    cluster.broker(coordinator).start()
    cluster.wait_for_full_isr(topic)
    c = TxnClient(cluster.bootstrap_servers)
    try:
        now = c.wait_coordinator(txn)
    finally:
        c.close()
    c = TxnClient(cluster.broker(now).bootstrap_servers)
    try:
        wait_for(lambda: c.describe(txn).transaction_state == "CompleteCommit",
                 "CompleteCommit after the markers were resent")  # fmt: skip
        assert _end_v5(c, txn, pid, 7, False)[0] == PRODUCER_FENCED  # judged now
        assert _end_v5(c, txn, pid, 1, False) == (NONE, pid, 2)
        wait_for(lambda: c.describe(txn).transaction_state == "CompleteAbort", "the abort")
        assert c.describe(txn).producer_epoch == 2
    finally:
        c.close()
    lc = TxnClient(cluster.broker(cluster.wait_for_leader(topic)).bootstrap_servers)
    try:
        # three records and the COMMIT marker (the abort added no partition)
        wait_for(lambda: lc.offsets(topic) == (4, 4), "the LSO past the COMMIT marker")
    finally:
        lc.close()
    logs = Path(cluster.broker(successor).log_file).read_text()
    assert f"resending the COMMIT markers of '{txn}'" in logs


@pytest.mark.skipif(shutil.which("kcat") is None, reason="no kcat")
def test_kcat_reads_committed(broker: BrokerProcess) -> None:
    ck = pytest.importorskip("confluent_kafka")
    topic = topic_name("txn-kcat")
    create_topic(broker.bootstrap, topic, 1)
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "kc"})
    p.init_transactions(WAIT)
    p.begin_transaction()
    p.produce(topic, value=b"kept")
    p.commit_transaction(WAIT)
    p.begin_transaction()
    p.produce(topic, value=b"dropped")
    p.flush(WAIT)
    p.abort_transaction(WAIT)
    out = subprocess.run(
        ["kcat", "-b", broker.bootstrap, "-C", "-t", topic, "-e", "-q", "-f", "%s\n",
         "-X", "isolation.level=read_committed"],
        capture_output=True, text=True, timeout=WAIT, env={**os.environ},
    ).stdout.split()  # fmt: skip
    assert out == ["kept"]
