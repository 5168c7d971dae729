"""``pylog transactions``: transactions as Kafka's kafka-transactions.sh shows
and repairs them (KIP-664).

* ``list`` — every transactional id of every coordinator, with its producer
  id and state (``--state``, ``--producer-id``, ``--duration-filter`` narrow it);
* ``describe --transactional-id ID`` — the coordinator's view: producer id
  and epoch, state, timeout, start time, duration and partitions;
* ``describe-producers --topic T --partition P`` — the partition's producers
  as its leader (or ``--broker-id``) remembers them, with the open
  transaction's first offset;
* ``abort --topic T --partition P`` — write an ABORT marker for a producer's
  open transaction on the partition: named by ``--start-offset`` (the
  producer whose transaction starts there, found with DescribeProducers), or
  by ``--producer-id``, ``--producer-epoch`` and ``--coordinator-epoch``;
* ``find-hanging`` — open transactions on partitions (``--topic`` [
  ``--partition``] or ``--broker-id``) older than ``--max-transaction-timeout``
  minutes that their coordinator does not know as ongoing on that partition:
  the candidates for ``abort``.

Kafka-protocol clients only (pylog's own, :mod:`pylog.cli.client`), so they work
against any cluster. ``abort`` needs CLUSTER_ACTION (or ALTER) on the cluster.
"""

from __future__ import annotations

import time
from typing import Any

import click

from pylog.cli.client import ClusterClient
from pylog.cli.common import (
    CommandError,
    admin_client,
    bootstrap_option,
    client_errors,
    command_config_option,
    timeout_option,
)

__all__ = ["transactions"]

#: Kafka's transaction.max.timeout.ms default, find-hanging's default bound.
DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN = 15
_OPEN_STATES = {"Ongoing", "PrepareCommit", "PrepareAbort"}


@click.group("transactions")
def transactions() -> None:
    """List, describe and abort transactions; find hanging ones."""


def _table(header: list[str], rows: list[list[str]]) -> None:
    """Kafka's tool prints a header row and tab-free, aligned columns."""
    lines = [header, *rows]
    widths = [max(len(r[i]) for r in lines) for i in range(len(header))]
    for r in lines:
        click.echo("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())


@transactions.command("list")
@bootstrap_option
@timeout_option
@command_config_option
@click.option("--state", "states", multiple=True, help="Only transactions in this state.")
@click.option("--producer-id", "producer_ids", type=int, multiple=True, help="Only this producer.")
@click.option(
    "--duration-filter",
    "duration_ms",
    type=int,
    default=-1,
    help="Only transactions running longer than this many ms.",
)
def list_transactions(
    bootstrap_server: str,
    request_timeout_ms: int,
    command_config: str | None,
    states: tuple[str, ...],
    producer_ids: tuple[int, ...],
    duration_ms: int,
) -> None:
    """TransactionalId, Coordinator, ProducerId, TransactionState of each."""
    with (
        admin_client(bootstrap_server, request_timeout_ms, command_config=command_config) as admin,
        client_errors(),
    ):
        found = admin.list_transactions(states, producer_ids, duration_ms)
    _table(
        ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"],
        [[txn, str(node), str(pid), state] for node, txn, pid, state in found],
    )


@transactions.command("describe")
@bootstrap_option
@timeout_option
@command_config_option
@click.option("--transactional-id", "transactional_id", required=True)
def describe(
    bootstrap_server: str,
    request_timeout_ms: int,
    command_config: str | None,
    transactional_id: str,
) -> None:
    """The coordinator's state of one transactional id."""
    with (
        admin_client(bootstrap_server, request_timeout_ms, command_config=command_config) as admin,
        client_errors(),
    ):
        node, t = admin.describe_transaction(transactional_id)
    start = int(t.transaction_start_time_ms)
    duration = str(int(time.time() * 1000) - start) if start >= 0 else "None"
    partitions = ",".join(f"{x.topic}-{p}" for x in t.topics for p in x.partitions)
    _table(
        [
            "CoordinatorId",
            "TransactionalId",
            "ProducerId",
            "ProducerEpoch",
            "TransactionState",
            "CurrentTransactionTimeoutMs",
            "CurrentTransactionStartTimeMs",
            "TransactionDurationMs",
            "TopicPartitions",
        ],
        [
            [
                str(node),
                t.transactional_id,
                str(t.producer_id),
                str(t.producer_epoch),
                t.transaction_state,
                str(t.transaction_timeout_ms),
                str(start) if start >= 0 else "None",
                duration,
                partitions,
            ]
        ],
    )


@transactions.command("describe-producers")
@bootstrap_option
@timeout_option
@command_config_option
@click.option("--topic", required=True)
@click.option("--partition", type=click.IntRange(min=0), required=True)
@click.option("--broker-id", type=int, default=None, help="Ask this replica, not the leader.")
def describe_producers(
    bootstrap_server: str,
    request_timeout_ms: int,
    command_config: str | None,
    topic: str,
    partition: int,
    broker_id: int | None,
) -> None:
    """The producers a partition's replica remembers."""
    with (
        admin_client(bootstrap_server, request_timeout_ms, command_config=command_config) as admin,
        client_errors(),
    ):
        p = admin.describe_producers(topic, partition, broker_id)
    _table(
        [
            "ProducerId",
            "ProducerEpoch",
            "LatestCoordinatorEpoch",
            "LastSequence",
            "LastTimestamp",
            "CurrentTransactionStartOffset",
        ],
        [
            [
                str(s.producer_id),
                str(s.producer_epoch),
                str(s.coordinator_epoch),
                str(s.last_sequence),
                str(s.last_timestamp),
                str(s.current_txn_start_offset) if s.current_txn_start_offset >= 0 else "None",
            ]
            for s in p.active_producers
        ],
    )


@transactions.command("abort")
@bootstrap_option
@timeout_option
@command_config_option
@click.option("--topic", required=True)
@click.option("--partition", type=click.IntRange(min=0), required=True)
@click.option("--start-offset", type=click.IntRange(min=0), default=None)
@click.option("--producer-id", type=int, default=None)
@click.option("--producer-epoch", type=int, default=None)
@click.option("--coordinator-epoch", type=int, default=None)
def abort(
    bootstrap_server: str,
    request_timeout_ms: int,
    command_config: str | None,
    topic: str,
    partition: int,
    start_offset: int | None,
    producer_id: int | None,
    producer_epoch: int | None,
    coordinator_epoch: int | None,
) -> None:
    """Abort a producer's open transaction on one partition (an ABORT marker)."""
    named = (producer_id, producer_epoch, coordinator_epoch)
    if (start_offset is None) == all(v is None for v in named):
        raise click.UsageError(
            "give --start-offset, or --producer-id, --producer-epoch and --coordinator-epoch"
        )
    if start_offset is None and any(v is None for v in named):
        raise click.UsageError("--producer-id, --producer-epoch and --coordinator-epoch together")
    with (
        admin_client(bootstrap_server, request_timeout_ms, command_config=command_config) as admin,
        client_errors(),
    ):
        if start_offset is not None:
            found = [
                s
                for s in admin.describe_producers(topic, partition).active_producers
                if s.current_txn_start_offset == start_offset
            ]
            if not found:
                raise CommandError(
                    f"no producer of {topic}-{partition} has a transaction open at offset "
                    f"{start_offset}"
                )
            s = found[0]
            # A producer whose coordinator epoch is unknown (-1) is aborted
            # under epoch 0, as Kafka's tool does.
            named = (s.producer_id, s.producer_epoch, max(0, s.coordinator_epoch))
        pid, epoch, coordinator = (int(v) for v in named)  # type: ignore[arg-type]
        admin.abort_transaction(topic, partition, pid, epoch, coordinator)
    click.echo(f"Aborted the transaction of producer {pid} (epoch {epoch}) on {topic}-{partition}.")


def _partitions(
    admin: ClusterClient, topic: str | None, partition: int | None, broker_id: int | None
) -> list[tuple[str, int, int | None]]:
    """(topic, partition, broker to ask) of what find-hanging looks at."""
    if topic is not None:
        parts = admin.partitions(topic)
        if parts is None:
            raise CommandError(f"topic {topic} does not exist")
        chosen = sorted(parts) if partition is None else [partition]
        return [(topic, p, broker_id) for p in chosen]
    out: list[tuple[str, int, int | None]] = []
    cluster = admin.metadata(None)
    for name, t in sorted(cluster.topics.items()):
        for p, meta in sorted(t.partitions.items()):
            if broker_id in meta.replicas:
                out.append((name, p, broker_id))
    return out


@transactions.command("find-hanging")
@bootstrap_option
@timeout_option
@command_config_option
@click.option("--topic", default=None)
@click.option("--partition", type=click.IntRange(min=0), default=None)
@click.option("--broker-id", type=int, default=None, help="Every partition this broker holds.")
@click.option(
    "--max-transaction-timeout",
    "max_minutes",
    type=click.IntRange(min=0),
    default=DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN,
    show_default=True,
    help="Minutes after which an open transaction is a candidate (transaction.max.timeout.ms).",
)
def find_hanging(
    bootstrap_server: str,
    request_timeout_ms: int,
    command_config: str | None,
    topic: str | None,
    partition: int | None,
    broker_id: int | None,
    max_minutes: int,
) -> None:
    """Open transactions older than the longest transaction timeout that no
    coordinator has as ongoing on their partition."""
    if topic is None and broker_id is None:
        raise click.UsageError("give --topic (and maybe --partition) or --broker-id")
    if partition is not None and topic is None:
        raise click.UsageError("--partition goes with --topic")
    now = int(time.time() * 1000)
    limit = max_minutes * 60_000
    with (
        admin_client(bootstrap_server, request_timeout_ms, command_config=command_config) as admin,
        client_errors(),
    ):
        candidates: list[tuple[str, int, Any]] = []
        for name, p, ask in _partitions(admin, topic, partition, broker_id):
            for s in admin.describe_producers(name, p, ask).active_producers:
                if s.current_txn_start_offset >= 0 and now - s.last_timestamp >= limit:
                    candidates.append((name, p, s))
        hanging = _not_ongoing(admin, candidates)
    _table(
        [
            "Topic",
            "Partition",
            "ProducerId",
            "ProducerEpoch",
            "CoordinatorEpoch",
            "StartOffset",
            "LastTimestamp",
            "Duration(min)",
        ],
        [
            [
                name,
                str(p),
                str(s.producer_id),
                str(s.producer_epoch),
                str(s.coordinator_epoch),
                str(s.current_txn_start_offset),
                str(s.last_timestamp),
                str((now - s.last_timestamp) // 60_000),
            ]
            for name, p, s in hanging
        ],
    )


def _not_ongoing(
    admin: ClusterClient, candidates: list[tuple[str, int, Any]]
) -> list[tuple[str, int, Any]]:
    """The candidates whose producer's coordinator has no open transaction
    holding their partition (or whose producer no coordinator knows)."""
    if not candidates:
        return []
    pids = sorted({int(s.producer_id) for _, _, s in candidates})
    ids: dict[int, list[str]] = {}
    for _node, txn_id, pid, _state in admin.list_transactions((), pids):
        ids.setdefault(pid, []).append(txn_id)
    hanging = []
    for name, p, s in candidates:
        ongoing = False
        for txn_id in ids.get(int(s.producer_id), []):
            _, t = admin.describe_transaction(txn_id)
            holds = any(x.topic == name and p in x.partitions for x in t.topics)
            if t.producer_id == s.producer_id and t.transaction_state in _OPEN_STATES and holds:
                ongoing = True
        if not ongoing:
            hanging.append((name, p, s))
    return hanging
