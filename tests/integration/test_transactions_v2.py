"""Transactions v2 (KIP-890 part 2) on the wire, against a real broker process.

pylog's protocol client speaks as a transactions-v2 producer would (Produce
v12, EndTxn v5, TxnOffsetCommit v5) and as a v1 one beside it, and checks
Kafka's answers: the finalized ``transaction.version`` in ApiVersions, the
implicit adds (no AddPartitionsToTxn, no AddOffsetsToTxn), the epoch bumped
by every EndTxn with the new one in the answer, retries and stale epochs
(CONCURRENT_TRANSACTIONS, PRODUCER_FENCED, INVALID_PRODUCER_EPOCH,
INVALID_TXN_STATE), an abort the coordinator never saw begin, TxnOffsetCommit
verified with the transaction coordinator (KIP-890 part 1 for offsets), and
``__transaction_state`` values written at version 1 with the client's
transaction version. The Java client's use of v2 is checked in
test_transactions_coordinator.py (its runs there are v2 runs).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from broker_process import BrokerProcess, topic_name
from test_transactions_coordinator import (
    CONCURRENT_TRANSACTIONS,
    INVALID_PRODUCER_EPOCH,
    INVALID_TXN_STATE,
    NONE,
    PRODUCER_FENCED,
    TxnClient,
    create_topic,
    transaction_log_records,
    wait_for,
)

from pylog import _native
from pylog.protocol import ApiKey
from pylog.protocol.messages import ApiVersionsResponse, EndTxnResponse, ProduceResponse
from pylog.transaction.transaction_metadata import TransactionState

pytestmark = pytest.mark.integration

OFFSETS_TOPIC = "__consumer_offsets"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    tmp: Path = tmp_path_factory.mktemp("txn-v2")
    b = BrokerProcess(tmp / "data", {}, log_path=tmp / "broker.log", log_level="INFO").start()
    try:
        yield b
    finally:
        b.stop()


def _end(c: TxnClient, txn: str, pid: int, epoch: int, commit: bool) -> tuple[int, int, int]:
    r = c.conn.request(
        ApiKey.END_TXN, 5,
        {"transactional_id": txn, "producer_id": pid, "producer_epoch": epoch,
         "committed": commit},
        EndTxnResponse,
    )  # fmt: skip
    return r.error_code, r.producer_id, r.producer_epoch


def _produce(
    c: TxnClient, txn: str, topic: str, pid: int, epoch: int, seq: int, acks: int = -1
) -> int:
    batch = _native.build_batch(
        [(None, b"v", [], int(time.time() * 1000))],
        producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=True,
    )  # fmt: skip
    r = c.conn.request(
        ApiKey.PRODUCE, 12,
        {"transactional_id": txn, "acks": acks, "timeout_ms": 30000,
         "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]},
        ProduceResponse,
    )  # fmt: skip
    return r.responses[0].partition_responses[0].error_code


def _txn_offset_commit(
    c: TxnClient, version: int, txn: str, pid: int, epoch: int, group: str, topic: str, off: int
) -> int:
    r = c.conn.request(
        ApiKey.TXN_OFFSET_COMMIT, version,
        {"transactional_id": txn, "group_id": group, "producer_id": pid,
         "producer_epoch": epoch, "generation_id": -1, "member_id": "",
         "group_instance_id": None,
         "topics": [{"name": topic, "partitions": [
             {"partition_index": 0, "committed_offset": off, "committed_leader_epoch": -1,
              "committed_metadata": ""}]}]},
    )  # fmt: skip
    return int(r.topics[0].partitions[0].error_code)  # type: ignore[attr-defined]


def _complete(c: TxnClient, txn: str) -> None:
    wait_for(
        lambda: c.describe(txn).transaction_state in ("CompleteCommit", "CompleteAbort"),
        f"{txn}'s markers written",
    )


def _partitions(d: Any) -> set[tuple[str, int]]:
    return {(t.topic, p) for t in d.topics for p in t.partitions}


def test_api_versions_finalizes_transaction_version_2(broker: BrokerProcess) -> None:
    c = TxnClient(broker.bootstrap)
    try:
        r = c.conn.request(ApiKey.API_VERSIONS, 3,
                           {"client_software_name": "t", "client_software_version": "1"},
                           ApiVersionsResponse)  # fmt: skip
    finally:
        c.close()
    supported = {f.name: (f.min_version, f.max_version) for f in r.supported_features}
    finalized = {f.name: f.max_version_level for f in r.finalized_features}
    assert supported["transaction.version"] == (0, 2)
    assert finalized["transaction.version"] == 2
    versions = {k.api_key: k.max_version for k in r.api_keys}
    # Produce 12 is transactions v2's; 13 (KIP-516's topic ids) keeps its meaning
    assert (versions[ApiKey.PRODUCE], versions[ApiKey.END_TXN]) == (13, 5)
    assert versions[ApiKey.TXN_OFFSET_COMMIT] == 5


def test_v2_epoch_bumps_implicit_adds_and_stale_epochs(broker: BrokerProcess) -> None:
    topic, group = topic_name("txn-v2"), "txn-v2-group"
    create_topic(broker.bootstrap, topic, 1)
    c = TxnClient(broker.bootstrap)
    try:
        c.wait_coordinator("v2")
        r = c.init("v2")
        pid, epoch = r.producer_id, r.producer_epoch
        assert (r.error_code, epoch) == (NONE, 0)
        # Produce v12 adds the partition: no AddPartitionsToTxn.
        assert _produce(c, "v2", topic, pid, 0, 0) == NONE
        d = c.describe("v2")
        assert (d.transaction_state, _partitions(d)) == ("Ongoing", {(topic, 0)})
        # EndTxn v5: the epoch goes up and the answer names it.
        assert _end(c, "v2", pid, 0, True) == (NONE, pid, 1)
        # A retry names the epoch it had: CONCURRENT_TRANSACTIONS while the
        # markers go out, then the answer it got.
        assert _end(c, "v2", pid, 0, True)[0] in (NONE, CONCURRENT_TRANSACTIONS)
        _complete(c, "v2")
        assert _end(c, "v2", pid, 0, True) == (NONE, pid, 1)
        assert _end(c, "v2", pid, 0, False)[0] == INVALID_TXN_STATE
        assert _end(c, "v2", pid, 7, True)[0] == PRODUCER_FENCED
        # A late batch of the committed transaction: refused, nothing written.
        assert _produce(c, "v2", topic, pid, 0, 1) == INVALID_PRODUCER_EPOCH
        # The next transaction at the new epoch (sequences start again at 0),
        # its offsets committed with TxnOffsetCommit v5: no AddOffsetsToTxn.
        assert _produce(c, "v2", topic, pid, 1, 0) == NONE
        c.conn.request(ApiKey.FIND_COORDINATOR, 3, {"key": group, "key_type": 0})
        wait_for(
            lambda: _txn_offset_commit(c, 5, "v2", pid, 1, group, topic, 7) == NONE,
            "TxnOffsetCommit v5",
        )
        d = c.describe("v2")
        assert {tp[0] for tp in _partitions(d)} == {topic, OFFSETS_TOPIC}
        assert _end(c, "v2", pid, 1, False) == (NONE, pid, 2)
        _complete(c, "v2")
        wait_for(lambda: c.offsets(topic)[0] == c.offsets(topic)[1], "the LSO at the HW")
        # An abort of a transaction the coordinator never saw begin (v2
        # clients send it when unsure): the epoch goes up all the same.
        assert _end(c, "v2", pid, 2, False) == (NONE, pid, 3)
        _complete(c, "v2")
        assert c.describe("v2").producer_epoch == 3
        # A commit of nothing is still INVALID_TXN_STATE.
        assert _end(c, "v2", pid, 3, True)[0] == INVALID_TXN_STATE
        # A transactions-v1 producer beside it: TxnOffsetCommit below v5 is
        # verified, not added (KIP-890 part 1 for offsets): refused before
        # AddOffsetsToTxn, taken after it; its EndTxn keeps the epoch.
        c.wait_coordinator("v1")
        p1 = c.init("v1").producer_id
        assert c.add("v1", p1, 0, topic, [0]) == NONE
        assert _txn_offset_commit(c, 3, "v1", p1, 0, group, topic, 9) == INVALID_TXN_STATE
        code = c.conn.request(
            ApiKey.ADD_OFFSETS_TO_TXN, 3,
            {"transactional_id": "v1", "producer_id": p1, "producer_epoch": 0,
             "group_id": group},
        ).error_code  # type: ignore[attr-defined]  # fmt: skip
        assert code == NONE
        assert _txn_offset_commit(c, 3, "v1", p1, 0, group, topic, 9) == NONE
        assert c.end("v1", p1, 0, True) == NONE
        _complete(c, "v1")
        assert c.describe("v1").producer_epoch == 0
    finally:
        c.close()
    # On disk: value version 1 (transaction.version 2 is finalized) with the
    # client's version; the v2 id's epoch one up at each Prepare*.
    S = TransactionState
    v2 = [(v.state, v.producer_epoch, v.client_transaction_version)
          for tid, v in transaction_log_records(broker.data) if tid == "v2" and v]  # fmt: skip
    prepared = [(s, e) for s, e, _ in v2 if s in (S.PREPARE_COMMIT, S.PREPARE_ABORT)]
    assert prepared == [(S.PREPARE_COMMIT, 1), (S.PREPARE_ABORT, 2), (S.PREPARE_ABORT, 3)]
    assert all(tv == 2 for s, _, tv in v2 if s != S.EMPTY)
    v1 = [(v.state, v.producer_epoch, v.client_transaction_version)
          for tid, v in transaction_log_records(broker.data) if tid == "v1" and v]  # fmt: skip
    assert (S.PREPARE_COMMIT, 0, 0) in v1


def _finalized(bootstrap: str) -> int:
    c = TxnClient(bootstrap)
    try:
        r = c.conn.request(ApiKey.API_VERSIONS, 3,
                           {"client_software_name": "t", "client_software_version": "1"},
                           ApiVersionsResponse)  # fmt: skip
    finally:
        c.close()
    return {f.name: f.max_version_level for f in r.finalized_features}["transaction.version"]


def test_kafka_features_lowers_transaction_version(broker: BrokerProcess, tmp_path: Path) -> None:
    """kafka-features.sh (UpdateFeatures) lowers transaction.version to 1: the
    broker's ApiVersions says so, and Kafka's Java client goes back to
    transactions v1 (AddPartitionsToTxn, the epoch kept across EndTxn);
    a level the broker does not support is refused; an upgrade restores 2.
    Runs last in the module: it changes the broker's finalized level."""
    from kafka_tools import TOOLS, run_tool
    from test_transactions_coordinator import _java

    TOOLS.setdefault("kafka-features", "org.apache.kafka.tools.FeatureCommand")
    boot = ("--bootstrap-server", broker.bootstrap)
    run_tool("kafka-features", *boot, "downgrade", "--feature", "transaction.version=1",
             workdir=tmp_path)  # fmt: skip
    assert _finalized(broker.bootstrap) == 1
    described = run_tool("kafka-features", *boot, "describe", workdir=tmp_path).stdout
    line = next(x for x in described.splitlines() if "transaction.version" in x)
    assert "FinalizedVersionLevel: 1" in line and "SupportedMaxVersion: 2" in line, line
    bad = run_tool("kafka-features", *boot, "upgrade", "--feature", "transaction.version=3",
                   workdir=tmp_path, check=False)  # fmt: skip
    assert bad.returncode != 0 and _finalized(broker.bootstrap) == 1
    jc = _java()
    topic = topic_name("txn-tv1")
    create_topic(broker.bootstrap, topic, 1)
    r = jc.run_java(
        "txn", "produce", "--bootstrap", broker.bootstrap, "--topic", topic,
        "--transactional-id", "java-tv1", "--commit", "2", "--abort", "1", "--per-txn", "3",
    )  # fmt: skip
    assert r.returncode == 0, (r.lines[-3:], r.stderr[-3000:])
    log = [v for tid, v in transaction_log_records(broker.data) if tid == "java-tv1" and v]
    assert {v.producer_epoch for v in log} == {0}
    assert {v.client_transaction_version for v in log} == {0}
    run_tool("kafka-features", *boot, "upgrade", "--feature", "transaction.version=2",
             workdir=tmp_path)  # fmt: skip
    assert _finalized(broker.bootstrap) == 2
