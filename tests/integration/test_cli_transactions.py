"""`pylog transactions` (list, describe, describe-producers, abort,
find-hanging) as subprocesses against a real broker, with a real
transactional producer (librdkafka) and a hanging transaction made the way
one used to arise: a transactional batch appended while the leader does not
verify it with the coordinator (KIP-890 off), so no coordinator will ever
end it."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from pylog import _native
from pylog.protocol import ApiKey
from pylog.protocol.client import KafkaConnection
from pylog.protocol.messages import InitProducerIdResponse, ProduceResponse
from pylog.testing import EmbeddedBroker, broker

pytestmark = pytest.mark.integration

TOPIC = "cli-txns"


@pytest.fixture(scope="module")
def cluster() -> Iterator[EmbeddedBroker]:
    with broker(num_partitions=1) as b:
        yield b


def pylog(b: EmbeddedBroker, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "pylog.cli", "transactions", *args,
         "--bootstrap-server", b.bootstrap_servers],
        capture_output=True,
        timeout=60,
    )  # fmt: skip


def ok(result: subprocess.CompletedProcess[bytes]) -> list[list[str]]:
    """The rows of a command's table, its header first."""
    assert result.returncode == 0, result.stderr.decode()
    return [line.split() for line in result.stdout.decode().splitlines()]


def hanging_batch(b: EmbeddedBroker) -> tuple[int, int]:
    """A transactional batch of a producer id no coordinator has a
    transaction for, appended with verification switched off: (its
    producer id, its offset)."""
    with KafkaConnection(b.bootstrap_servers, timeout=30) as conn:
        r = conn.request(
            ApiKey.INCREMENTAL_ALTER_CONFIGS, 1,
            {"resources": [{"resource_type": 4, "resource_name": "", "configs": [
                {"name": "transaction.partition.verification.enable", "config_operation": 0,
                 "value": "false"}]}],
             "validate_only": False},
        )  # fmt: skip
        assert r.responses[0].error_code == 0, r  # type: ignore[attr-defined]
        init = conn.request(
            ApiKey.INIT_PRODUCER_ID, 4,
            {"transactional_id": None, "transaction_timeout_ms": 60000},
            InitProducerIdResponse,
        )  # fmt: skip
        pid = init.producer_id
        batch = _native.build_batch(
            [(None, b"ghost", [], int(time.time() * 1000))],
            producer_id=pid, producer_epoch=0, base_sequence=0, is_transactional=True,
        )  # fmt: skip
        produced = conn.request(
            ApiKey.PRODUCE, 9,
            {"transactional_id": "ghost", "acks": -1, "timeout_ms": 30000,
             "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}]},
            ProduceResponse,
        )  # fmt: skip
        part = produced.responses[0].partition_responses[0]
        assert part.error_code == 0, part
        return pid, part.base_offset


def test_list_describe_find_hanging_and_abort(cluster: EmbeddedBroker) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": "cli-txn"})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(TOPIC, b"open-1")
    p.produce(TOPIC, b"open-2")
    p.flush(30)

    rows = ok(pylog(cluster, "list"))
    assert rows[0] == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    (mine,) = [r for r in rows[1:] if r[0] == "cli-txn"]
    assert mine[1] == "0" and mine[3] == "Ongoing"
    pid = int(mine[2])
    assert [r[0] for r in ok(pylog(cluster, "list", "--state", "CompleteCommit"))[1:]] == []

    rows = ok(pylog(cluster, "describe", "--transactional-id", "cli-txn"))
    assert rows[0][:5] == [
        "CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
    ]  # fmt: skip
    assert rows[1][:5] == ["0", "cli-txn", str(pid), "0", "Ongoing"]
    assert rows[1][-1] == f"{TOPIC}-0"

    rows = ok(pylog(cluster, "describe-producers", "--topic", TOPIC, "--partition", "0"))
    assert rows[0][-1] == "CurrentTransactionStartOffset"
    assert [(r[0], r[-1]) for r in rows[1:]] == [(str(pid), "0")]

    # Its coordinator has it as ongoing: not hanging, however old.
    found = ok(pylog(cluster, "find-hanging", "--topic", TOPIC, "--max-transaction-timeout", "0"))
    assert found[1:] == []

    ghost, offset = hanging_batch(cluster)
    found = ok(pylog(cluster, "find-hanging", "--topic", TOPIC, "--max-transaction-timeout", "0"))
    assert [(r[2], r[5]) for r in found[1:]] == [(str(ghost), str(offset))]
    by_broker = ok(pylog(cluster, "find-hanging", "--broker-id", "0",
                         "--max-transaction-timeout", "0"))  # fmt: skip
    assert [r[:3] for r in by_broker[1:]] == [[TOPIC, "0", str(ghost)]]
    # The default bound (15 minutes) leaves a fresh one alone.
    assert ok(pylog(cluster, "find-hanging", "--topic", TOPIC))[1:] == []

    out = pylog(cluster, "abort", "--topic", TOPIC, "--partition", "0",
                "--start-offset", str(offset))  # fmt: skip
    assert out.returncode == 0, out.stderr.decode()
    assert f"producer {ghost}" in out.stdout.decode()
    rows = ok(pylog(cluster, "describe-producers", "--topic", TOPIC, "--partition", "0"))
    starts = {r[0]: r[-1] for r in rows[1:]}
    assert starts == {str(pid): "0", str(ghost): "None"}
    found = ok(pylog(cluster, "find-hanging", "--topic", TOPIC, "--max-transaction-timeout", "0"))
    assert found[1:] == []

    # The real transaction still commits.
    p.commit_transaction(30)
    rows = ok(pylog(cluster, "describe", "--transactional-id", "cli-txn"))
    assert rows[1][4] == "CompleteCommit"

    # Errors: one line, exit 1; usage: exit 2.
    missing = pylog(cluster, "describe", "--transactional-id", "nobody")
    assert missing.returncode == 1 and missing.stderr.decode().startswith("Error: ")
    assert "Traceback" not in missing.stderr.decode()
    none_open = pylog(cluster, "abort", "--topic", TOPIC, "--partition", "0",
                      "--start-offset", "999")  # fmt: skip
    assert none_open.returncode == 1 and "no producer" in none_open.stderr.decode()
    assert pylog(cluster, "abort", "--topic", TOPIC, "--partition", "0").returncode == 2
    assert pylog(cluster, "find-hanging").returncode == 2
