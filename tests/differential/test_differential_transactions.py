"""A transaction's requests, in order, to Kafka and pylog alike: the
coordinator's answers (Kafka's error codes at each step, the described and
listed state) compared field by field. Producer ids and timestamps are each
broker's own."""

from __future__ import annotations

import time
from typing import Any

import pytest

from pylog import _native
from pylog.protocol import ApiKey

from .conftest import Brokers
from .diff_harness import TS, Oracle, Pair, Rule, name
from .test_differential_data import produce_body

PID = [Rule("producer_id", "each broker allocates its own producer ids")]
DESCRIBED = [
    Rule("transaction_states[*].producer_id", "each broker allocates its own producer ids"),
    Rule("transaction_states[*].transaction_start_time_ms", "each broker's clock"),
]


@pytest.fixture
def oracle(pair: Pair) -> Oracle:
    return Oracle(pair)


def test_a_transactions_life(brokers: Brokers, oracle: Oracle) -> None:
    t, txn = name("txn-life"), name("txn-life-id")
    oracle.create({t: 2})
    find = {"key_type": 1, "coordinator_keys": [txn]}
    found = lambda r: r.coordinators[0].error_code == 0  # noqa: E731
    oracle.until(ApiKey.FIND_COORDINATOR, 4, find, found)

    # Until both coordinators have loaded the id's partition (unknown to
    # them: TRANSACTIONAL_ID_NOT_FOUND), asked without changing anything.
    unknown = {"transactional_ids": [txn]}
    loaded = lambda r: r.transaction_states[0].error_code == 105  # noqa: E731
    oracle.until(ApiKey.DESCRIBE_TRANSACTIONS, 0, unknown, loaded)

    def init(timeout_ms: int = 60000) -> Any:
        body = {"transactional_id": txn, "transaction_timeout_ms": timeout_ms,
                "producer_id": -1, "producer_epoch": -1}  # fmt: skip
        return oracle.send(ApiKey.INIT_PRODUCER_ID, 4, body, allow=PID)

    # INVALID_TRANSACTION_TIMEOUT: past transaction.max.timeout.ms.
    oracle.send(
        ApiKey.INIT_PRODUCER_ID, 4,
        {"transactional_id": txn, "transaction_timeout_ms": 3_600_000,
         "producer_id": -1, "producer_epoch": -1},
    )  # fmt: skip
    x = init()
    pids = {"kafka": x.kafka.producer_id, "pylog": x.pylog.producer_id}

    def add(epoch: int, version: int = 3, partitions: tuple[int, ...] = (0,)) -> None:
        oracle.send(
            ApiKey.ADD_PARTITIONS_TO_TXN, version,
            lambda side: {
                "v3_and_below_transactional_id": txn,
                "v3_and_below_producer_id": pids[side],
                "v3_and_below_producer_epoch": epoch,
                "v3_and_below_topics": [{"name": t, "partitions": list(partitions)}],
            },
        )  # fmt: skip

    def end(epoch: int, commit: bool, version: int = 3) -> None:
        oracle.send(
            ApiKey.END_TXN, version,
            lambda side: {"transactional_id": txn, "producer_id": pids[side],
                          "producer_epoch": epoch, "committed": commit},
        )  # fmt: skip

    def describe() -> None:
        oracle.send(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [txn]}, allow=DESCRIBED)

    end(0, True)  # nothing begun: INVALID_TXN_STATE
    add(0)
    add(0, partitions=(0, 5))  # a partition the topic lacks: the whole request fails
    add(3)  # a stale epoch: PRODUCER_FENCED
    add(3, version=1)  # INVALID_PRODUCER_EPOCH before v2

    def records(side: str) -> bytes:
        return _native.build_batch(
            [(None, v, [], TS) for v in (b"t0", b"t1")],
            producer_id=pids[side], producer_epoch=0, base_sequence=0, is_transactional=True,
        )  # fmt: skip

    # KIP-890 part 1: partition 1 was never added, so its leader (asking the
    # coordinator first) refuses the batch: INVALID_TXN_STATE, "Partition
    # was not added to the transaction", nothing written.
    refused = oracle.send(
        ApiKey.PRODUCE, 9,
        lambda side: {**produce_body(t, records(side), partition=1), "transactional_id": txn},
    )  # fmt: skip
    assert refused.kafka.responses[0].partition_responses[0].error_code == 48  # INVALID_TXN_STATE
    oracle.send(
        ApiKey.PRODUCE, 9,
        lambda side: {**produce_body(t, records(side)), "transactional_id": txn},
    )  # fmt: skip
    describe()  # Ongoing, with its partition
    end(0, True)
    done = {"transactional_ids": [txn]}
    complete = lambda r: r.transaction_states[0].transaction_state == "CompleteCommit"  # noqa: E731
    oracle.until(ApiKey.DESCRIBE_TRANSACTIONS, 0, done, complete)
    describe()
    oracle.send(
        ApiKey.LIST_TRANSACTIONS, 1,
        {"state_filters": ["CompleteCommit"], "producer_id_filters": [], "duration_filter": -1},
        allow=[Rule("transaction_states[*].producer_id", "each broker's own producer ids")],
    )  # fmt: skip
    # v2 (KIP-1152): by a pattern of the id, the whole id to match; and one
    # that does not compile
    for pattern in (txn, txn[:-3], txn[:-3] + ".*", "(unclosed"):
        oracle.send(
            ApiKey.LIST_TRANSACTIONS, 2,
            {"state_filters": [], "producer_id_filters": [], "duration_filter": -1,
             "transactional_id_pattern": pattern},
            allow=[Rule("transaction_states[*].producer_id", "each broker's own producer ids")],
        )  # fmt: skip
    end(0, True)  # a retried commit: NONE
    end(0, False)  # an abort of a committed transaction: INVALID_TXN_STATE
    init()  # the epoch goes up: 1
    add(0)  # the old producer: PRODUCER_FENCED
    end(0, False, version=1)  # INVALID_PRODUCER_EPOCH before v2
    oracle.verify()


def test_a_v2_transactions_life(brokers: Brokers, oracle: Oracle) -> None:
    """Transactions v2 (KIP-890 part 2; both brokers finalize transaction.version
    2 by default): Produce v12 adds the partition, EndTxn v5 bumps the epoch
    and names it, a retry names the old one, a stale batch and a stale EndTxn
    are refused, an abort of a transaction never begun bumps it again."""
    t, txn = name("txn-v2"), name("txn-v2-id")
    oracle.create({t: 1})
    find = {"key_type": 1, "coordinator_keys": [txn]}
    oracle.until(ApiKey.FIND_COORDINATOR, 4, find, lambda r: r.coordinators[0].error_code == 0)
    unknown = {"transactional_ids": [txn]}
    loaded = lambda r: r.transaction_states[0].error_code == 105  # noqa: E731
    oracle.until(ApiKey.DESCRIBE_TRANSACTIONS, 0, unknown, loaded)
    x = oracle.send(
        ApiKey.INIT_PRODUCER_ID, 5,
        {"transactional_id": txn, "transaction_timeout_ms": 60000,
         "producer_id": -1, "producer_epoch": -1},
        allow=PID,
    )  # fmt: skip
    pids = {"kafka": x.kafka.producer_id, "pylog": x.pylog.producer_id}

    def produce(epoch: int, seq: int) -> None:
        oracle.send(
            ApiKey.PRODUCE, 12,
            lambda side: {
                **produce_body(t, _native.build_batch(
                    [(None, b"v2", [], TS)], producer_id=pids[side], producer_epoch=epoch,
                    base_sequence=seq, is_transactional=True)),
                "transactional_id": txn,
            },
        )  # fmt: skip

    def end(epoch: int, commit: bool) -> None:
        oracle.send(
            ApiKey.END_TXN, 5,
            lambda side: {"transactional_id": txn, "producer_id": pids[side],
                          "producer_epoch": epoch, "committed": commit},
            allow=PID,
        )  # fmt: skip

    def settled(state: str) -> None:
        done = {"transactional_ids": [txn]}
        oracle.until(ApiKey.DESCRIBE_TRANSACTIONS, 0, done,
                     lambda r: r.transaction_states[0].transaction_state == state)  # fmt: skip
        oracle.send(ApiKey.DESCRIBE_TRANSACTIONS, 0, done, allow=DESCRIBED)

    produce(0, 0)  # added by the leader: no AddPartitionsToTxn
    oracle.send(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [txn]}, allow=DESCRIBED)
    end(0, True)  # the answer names epoch 1
    settled("CompleteCommit")
    end(0, True)  # a retry: the answer it had
    end(0, False)  # an abort of it: INVALID_TXN_STATE
    end(7, True)  # PRODUCER_FENCED
    produce(0, 1)  # a late batch of the committed transaction: refused
    end(1, True)  # a commit of nothing: INVALID_TXN_STATE
    end(1, False)  # an abort of a transaction never begun: epoch 2
    settled("CompleteAbort")
    oracle.verify()


def test_a_v2_abort_right_after_a_commit(brokers: Brokers, oracle: Oracle) -> None:
    """franz-go's TestTxnEtl: a v2 producer whose next transaction's produces
    all failed aborts at the new epoch at once, while the commit's markers
    may still be on their way. Kafka answers CONCURRENT_TRANSACTIONS until
    they are written (a transition in flight comes before the epoch is
    judged), then takes the abort; pylog answered PRODUCER_FENCED, fatal to
    franz-go. Whether the first abort meets the markers is a race on each
    broker, so each side's answers are checked for that shape, not compared
    one by one; what follows is compared."""
    t, txn = name("txn-v2-next"), name("txn-v2-next-id")
    oracle.create({t: 1})
    find = {"key_type": 1, "coordinator_keys": [txn]}
    oracle.until(ApiKey.FIND_COORDINATOR, 4, find, lambda r: r.coordinators[0].error_code == 0)
    described = {"transactional_ids": [txn]}
    loaded = lambda r: r.transaction_states[0].error_code == 105  # noqa: E731
    oracle.until(ApiKey.DESCRIBE_TRANSACTIONS, 0, described, loaded)
    x = oracle.send(
        ApiKey.INIT_PRODUCER_ID, 5,
        {"transactional_id": txn, "transaction_timeout_ms": 60000,
         "producer_id": -1, "producer_epoch": -1},
        allow=PID,
    )  # fmt: skip
    pids = {"kafka": x.kafka.producer_id, "pylog": x.pylog.producer_id}

    def end_body(side: str, epoch: int, commit: bool) -> dict[str, Any]:
        return {"transactional_id": txn, "producer_id": pids[side],
                "producer_epoch": epoch, "committed": commit}  # fmt: skip

    oracle.send(
        ApiKey.PRODUCE, 12,
        lambda side: {
            **produce_body(t, _native.build_batch(
                [(None, b"next", [], TS)], producer_id=pids[side], producer_epoch=0,
                base_sequence=0, is_transactional=True)),
            "transactional_id": txn,
        },
    )  # fmt: skip
    oracle.send(ApiKey.END_TXN, 5, lambda side: end_body(side, 0, True), allow=PID)  # epoch 1
    # Each side asked in turn, from right after the commit, until it takes it.
    conns = {"kafka": oracle.pair.kafka, "pylog": oracle.pair.pylog}
    answers: dict[str, list[int]] = {side: [] for side in conns}
    last: dict[str, Any] = {}
    deadline = time.monotonic() + 30
    while len(last) < len(conns) and time.monotonic() < deadline:
        for side in conns.keys() - last.keys():
            r = conns[side].request(ApiKey.END_TXN, 5, end_body(side, 1, False))
            answers[side].append(r.error_code)
            if r.error_code != 51:  # CONCURRENT_TRANSACTIONS: the markers are on their way
                last[side] = r
        time.sleep(0.01)
    for side, codes in answers.items():
        assert codes[-1] == 0 and set(codes[:-1]) <= {51}, (side, answers)
        assert (last[side].producer_id, last[side].producer_epoch) == (pids[side], 2), last
    aborted = lambda r: r.transaction_states[0].transaction_state == "CompleteAbort"  # noqa: E731
    oracle.until(ApiKey.DESCRIBE_TRANSACTIONS, 0, described, aborted)
    oracle.send(ApiKey.DESCRIBE_TRANSACTIONS, 0, described, allow=DESCRIBED)
    oracle.send(ApiKey.END_TXN, 5, lambda side: end_body(side, 1, False), allow=PID)  # a retry
    oracle.send(ApiKey.END_TXN, 5, lambda side: end_body(side, 2, True))  # nothing to commit
    oracle.verify()
