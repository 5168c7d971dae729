"""``pylog log-dirs --describe``: every broker's log directories and the
replicas in them, with their sizes, as Kafka's ``kafka-log-dirs`` tool
(LogDirsCommand) prints them, over DescribeLogDirs sent to each broker.

:func:`describe_log_dirs` is also what ``pylog reassign-partitions`` asks to
check a plan's ``log_dirs`` and to follow moves between directories.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import click

from pylog.cli.client import ClusterClient, check, error_name
from pylog.cli.common import (
    CommandError,
    admin_client,
    bootstrap_option,
    client_errors,
    command_config_option,
    timeout_option,
)
from pylog.protocol import ApiKey

#: The Java exception Kafka's tool prints as a directory's ``error`` (the
#: class its admin client raises for the code); other codes by their name.
_ERROR_CLASSES = {
    56: "org.apache.kafka.common.errors.KafkaStorageException",
    57: "org.apache.kafka.common.errors.LogDirNotFoundException",
    29: "org.apache.kafka.common.errors.ClusterAuthorizationException",
}


@dataclass(frozen=True)
class ReplicaInfo:
    size: int
    offset_lag: int
    is_future: bool


@dataclass
class LogDirDescription:
    """One directory of a broker, as DescribeLogDirs answers it."""

    error_code: int
    #: (topic, partition, is_future) -> the replica (a move's future log is
    #: listed beside the current one, as Kafka lists it).
    replicas: dict[tuple[str, int, bool], ReplicaInfo] = field(default_factory=dict)
    total_bytes: int = -1
    usable_bytes: int = -1


def describe_log_dirs(
    admin: ClusterClient, broker: int, partitions: Mapping[str, Iterable[int]] | None = None
) -> dict[str, LogDirDescription]:
    """DescribeLogDirs at ``broker``: its directories (path -> description),
    for ``partitions`` only when given (None: every replica it holds)."""
    body = {
        "topics": None
        if partitions is None
        else [{"topic": t, "partitions": sorted(set(ps))} for t, ps in partitions.items()]
    }
    resp = admin.request(ApiKey.DESCRIBE_LOG_DIRS, body, broker)
    check(resp.get("error_code", 0))
    found: dict[str, LogDirDescription] = {}
    for d in resp.results:
        desc = LogDirDescription(
            d.error_code,
            total_bytes=d.get("total_bytes", -1),
            usable_bytes=d.get("usable_bytes", -1),
        )
        for t in d.topics:
            for p in t.partitions:
                desc.replicas[(t.name, p.partition_index, bool(p.is_future_key))] = ReplicaInfo(
                    p.partition_size, p.offset_lag, bool(p.is_future_key)
                )
        found[d.log_dir] = desc
    return found


def error_class(code: int) -> str | None:
    if not code:
        return None
    return _ERROR_CLASSES.get(code, error_name(code))


def parse_id_list(text: str, option: str) -> list[int]:
    """``1,2,3`` (empty items skipped, as Kafka's tools skip them)."""
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise click.BadParameter(
            f"{text!r} is not a list of broker ids", param_hint=option
        ) from None


@click.command("log-dirs")
@bootstrap_option
@command_config_option
@timeout_option
@click.option(
    "--describe", is_flag=True, required=True, help="Describe the brokers' log directories."
)
@click.option(
    "--broker-list",
    default="",
    metavar="ID[,ID...]",
    help="The brokers to ask (default: every broker in the cluster).",
)
@click.option(
    "--topic-list",
    default="",
    metavar="TOPIC[,TOPIC...]",
    help="Only these topics' replicas (default: every topic).",
)
def log_dirs(
    bootstrap_server: str,
    request_timeout_ms: int,
    command_config: str | None,
    describe: bool,
    broker_list: str,
    topic_list: str,
) -> None:
    """Print each broker's log directories and the size, lag and kind of
    every replica in them, as JSON (Kafka's kafka-log-dirs.sh)."""
    wanted = set(parse_id_list(broker_list, "--broker-list"))
    topics = {t.strip() for t in topic_list.split(",") if t.strip()}
    with (
        admin_client(bootstrap_server, request_timeout_ms, command_config=command_config) as admin,
        client_errors(),
    ):
        live = set(admin.metadata([]).brokers)
        unknown = wanted - live
        if unknown:
            raise CommandError(
                "The given brokers do not exist from --broker-list: "
                f"{_ids(unknown)}. Current existent brokers: {_ids(live)}"
            )
        brokers = sorted(wanted or live)
        click.echo("Querying brokers for log directories information")
        described = {b: describe_log_dirs(admin, b) for b in brokers}
    click.echo(f"Received log directory information from brokers {_ids(brokers)}")
    click.echo(json.dumps(format_log_dirs(described, topics), separators=(",", ":")))


def format_log_dirs(
    described: Mapping[int, Mapping[str, LogDirDescription]], topics: set[str]
) -> dict[str, Any]:
    """Kafka's tool's JSON: version 1, per broker its directories, per
    directory its error (a Java exception class name, or null) and replicas."""
    return {
        "version": 1,
        "brokers": [
            {
                "broker": broker,
                "logDirs": [
                    {
                        "logDir": path,
                        "error": error_class(d.error_code),
                        "partitions": [
                            {
                                "partition": f"{t}-{p}",
                                "size": info.size,
                                "offsetLag": info.offset_lag,
                                "isFuture": info.is_future,
                            }
                            for (t, p, _), info in sorted(d.replicas.items())
                            if not topics or t in topics
                        ],
                    }
                    for path, d in sorted(dirs.items())
                ],
            }
            for broker, dirs in sorted(described.items())
        ],
    }


def _ids(ids: Iterable[int]) -> str:
    return ",".join(str(i) for i in sorted(ids))
