"""``pylog topics create|list|describe|alter|delete|elect-leaders``: topic
administration over the Kafka protocol (CreateTopics, Metadata,
DescribeConfigs, CreatePartitions, DeleteTopics, ElectLeaders), with output
laid out like Kafka's topic and leader-election tools."""

from __future__ import annotations

from typing import Any

import click

from pylog.cli.client import (
    CONFIG_RESOURCE_TOPIC,
    UNMODIFIED_SOURCES,
    ClusterClient,
    TopicMetadata,
)
from pylog.cli.common import (
    CommandError,
    admin_client,
    bootstrap_option,
    client_errors,
    command_config_option,
    error_for_code,
    parse_key_values,
    timeout_option,
)

UNKNOWN_TOPIC_OR_PARTITION = 3
TOPIC_ALREADY_EXISTS = 36


@click.group("topics")
def topics() -> None:
    """Create, list, describe, alter and delete topics."""


@topics.command("create")
@bootstrap_option
@command_config_option
@timeout_option
@click.option("--topic", "names", multiple=True, required=True, help="Topic name; repeatable.")
@click.option(
    "--partitions",
    type=click.IntRange(min=1),
    default=None,
    help="Partition count (default: the broker's num.partitions).",
)
@click.option(
    "--replication-factor",
    type=click.IntRange(min=1),
    default=None,
    help="Replicas per partition (default: the broker's default.replication.factor).",
)
@click.option(
    "--config",
    "configs",
    multiple=True,
    metavar="KEY=VALUE[,...]",
    help="A topic config override; repeatable or comma-separated.",
)
@click.option("--if-not-exists", is_flag=True, help="Succeed if the topic already exists.")
def create(
    bootstrap_server: str,
    request_timeout_ms: int,
    names: tuple[str, ...],
    partitions: int | None,
    replication_factor: int | None,
    configs: tuple[str, ...],
    if_not_exists: bool,
    command_config: str | None,
) -> None:
    """Create topics."""
    overrides = parse_key_values(configs, "--config")
    request = [
        {
            "name": name,
            "num_partitions": -1 if partitions is None else partitions,
            "replication_factor": -1 if replication_factor is None else replication_factor,
            "assignments": [],
            "configs": [{"name": k, "value": v} for k, v in overrides.items()],
        }
        for name in names
    ]
    with (
        admin_client(bootstrap_server, request_timeout_ms, command_config=command_config) as admin,
        client_errors(),
    ):
        result = admin.create_topics(request)
    failures = []
    for topic in result:
        code, name = topic.error_code, topic.name
        if code == 0:
            click.echo(f"Created topic {name}.")
        elif code == TOPIC_ALREADY_EXISTS and if_not_exists:
            click.echo(f"Topic {name} already exists.")
        else:
            failures.append(f"topic {name}: {error_for_code(code, topic.error_message)}")
    if failures:
        raise CommandError("; ".join(failures))


@topics.command("list")
@bootstrap_option
@command_config_option
@timeout_option
@click.option("--exclude-internal", is_flag=True, help="Leave out internal topics.")
def list_topics(
    bootstrap_server: str,
    request_timeout_ms: int,
    exclude_internal: bool,
    command_config: str | None,
) -> None:
    """Print the cluster's topic names, one per line."""
    with (
        admin_client(bootstrap_server, request_timeout_ms, command_config=command_config) as admin,
        client_errors(),
    ):
        described = admin.metadata(None).topics
    for name in sorted(described):
        if not (exclude_internal and described[name].is_internal):
            click.echo(name)


@topics.command("describe")
@bootstrap_option
@command_config_option
@timeout_option
@click.option("--topic", "names", multiple=True, help="Topic name; repeatable (default: all).")
@click.option("--exclude-internal", is_flag=True, help="Leave out internal topics.")
def describe(
    bootstrap_server: str,
    request_timeout_ms: int,
    names: tuple[str, ...],
    exclude_internal: bool,
    command_config: str | None,
) -> None:
    """Print each topic's id, partition count, config overrides, and one line per
    partition with its leader, replicas and in-sync replicas."""
    with (
        admin_client(bootstrap_server, request_timeout_ms, command_config=command_config) as admin,
        client_errors(),
    ):
        described = admin.metadata(list(names) if names else None).topics
        if names:
            absent = [n for n in names if n not in described]
            if absent:
                raise CommandError(", ".join(f"topic '{n}' does not exist" for n in absent))
        missing = [t for t in described.values() if t.error_code == UNKNOWN_TOPIC_OR_PARTITION]
        if missing:
            raise CommandError(", ".join(f"topic '{t.name}' does not exist" for t in missing))
        failed = [t for t in described.values() if t.error_code != 0]
        if failed:
            raise CommandError(
                "; ".join(f"topic {t.name}: {error_for_code(t.error_code)}" for t in failed)
            )
        shown = [
            described[n]
            for n in sorted(described)
            if not (exclude_internal and described[n].is_internal)
        ]
        configs = {t.name: _overrides(admin, t.name) for t in shown}
    for topic in shown:
        click.echo(format_topic(topic, configs[topic.name]))


def _overrides(admin: ClusterClient, topic: str) -> dict[str, Any]:
    """The configs set on the topic (not the defaults): name -> entry."""
    entries = admin.describe_configs(CONFIG_RESOURCE_TOPIC, topic, synonyms=False)
    return {e.name: e for e in entries if e.config_source not in UNMODIFIED_SOURCES}


def _ids(nodes: list[int]) -> str:
    return ",".join(str(n) for n in nodes)


def format_topic(topic: TopicMetadata, configs: dict[str, Any]) -> str:
    name = topic.name
    partitions = [topic.partitions[i] for i in sorted(topic.partitions)]
    replication = len(partitions[0].replicas) if partitions else 0
    config_text = ",".join(
        f"{key}={'<sensitive>' if entry.is_sensitive else entry.value}"
        for key, entry in sorted(configs.items())
    )
    lines = [
        f"Topic: {name}\tTopicId: {topic.topic_id or 'none'}\t"
        f"PartitionCount: {len(partitions)}\tReplicationFactor: {replication}\t"
        f"Configs: {config_text}"
    ]
    for p in partitions:
        leader = p.leader
        line = (
            f"\tTopic: {name}\tPartition: {p.partition}\t"
            f"Leader: {'none' if leader < 0 else leader}\t"
            f"Replicas: {_ids(p.replicas)}\tIsr: {_ids(p.isr)}"
        )
        if p.offline:
            line += f"\tOffline: {_ids(p.offline)}"
        if p.error_code:
            line += f"\tError: {error_for_code(p.error_code)}"
        lines.append(line)
    return "\n".join(lines)


@topics.command("alter")
@bootstrap_option
@command_config_option
@timeout_option
@click.option("--topic", "name", required=True, help="Topic name.")
@click.option(
    "--partitions",
    type=click.IntRange(min=1),
    required=True,
    help="The new, larger partition count.",
)
def alter(
    bootstrap_server: str,
    request_timeout_ms: int,
    name: str,
    partitions: int,
    command_config: str | None,
) -> None:
    """Add partitions to a topic (the count can only grow).

    Topic configs are changed with `pylog configs alter --topic`.
    """
    with (
        admin_client(bootstrap_server, request_timeout_ms, command_config=command_config) as admin,
        client_errors(),
    ):
        response = admin.create_partitions({name: partitions})
    for result in response:
        if result.error_code != 0:
            raise CommandError(
                f"topic {result.name}: {error_for_code(result.error_code, result.error_message)}"
            )
    click.echo(f"Topic {name} now has {partitions} partitions.")


@topics.command("delete")
@bootstrap_option
@command_config_option
@timeout_option
@click.option("--topic", "names", multiple=True, required=True, help="Topic name; repeatable.")
@click.option("--if-exists", is_flag=True, help="Succeed if the topic does not exist.")
def delete(
    bootstrap_server: str,
    request_timeout_ms: int,
    names: tuple[str, ...],
    if_exists: bool,
    command_config: str | None,
) -> None:
    """Delete topics and their data."""
    with (
        admin_client(bootstrap_server, request_timeout_ms, command_config=command_config) as admin,
        client_errors(),
    ):
        result = admin.delete_topics(list(names))
    failures = []
    for topic in result:
        code, name = topic.error_code, topic.name
        if code == 0:
            click.echo(f"Deleted topic {name}.")
        elif code == UNKNOWN_TOPIC_OR_PARTITION:
            if not if_exists:
                failures.append(f"topic '{name}' does not exist")
        else:
            failures.append(f"topic {name}: {error_for_code(code, topic.error_message)}")
    if failures:
        raise CommandError("; ".join(failures))


ELECTION_TYPES = {"preferred": 0, "unclean": 1}
ELECTION_NOT_NEEDED = 84


@topics.command("elect-leaders")
@bootstrap_option
@command_config_option
@timeout_option
@click.option(
    "--election-type",
    type=click.Choice(sorted(ELECTION_TYPES), case_sensitive=False),
    required=True,
    help="preferred: give leadership back to each partition's first replica (if in "
    "sync); unclean: elect a leader for partitions without a live one, from outside "
    "the ISR if need be.",
)
@click.option("--topic", "name", default=None, help="Only this topic's partitions.")
@click.option(
    "--partition", "partition", type=click.IntRange(min=0), default=None,
    help="Only this partition of --topic.",
)  # fmt: skip
@click.option(
    "--all-topic-partitions", "everything", is_flag=True, help="Every partition of every topic."
)
def elect_leaders(
    bootstrap_server: str,
    request_timeout_ms: int,
    election_type: str,
    name: str | None,
    partition: int | None,
    everything: bool,
    command_config: str | None,
) -> None:
    """Elect partition leaders (Kafka's kafka-leader-election.sh)."""
    if everything == (name is not None):
        raise click.UsageError("give either --topic or --all-topic-partitions")
    if partition is not None and name is None:
        raise click.UsageError("--partition needs --topic")
    kind = election_type.lower()
    with (
        admin_client(bootstrap_server, request_timeout_ms, command_config=command_config) as admin,
        client_errors(),
    ):
        wanted: dict[str, list[int]] | None = None
        if name is not None:
            if partition is not None:
                wanted = {name: [partition]}
            else:
                found = admin.partitions(name)
                if found is None:
                    raise CommandError(f"topic '{name}' does not exist")
                wanted = {name: sorted(found)}
        results = admin.elect_leaders(ELECTION_TYPES[kind], wanted)
    done = [f"{t}-{p}" for t, p, code, _ in results if code == 0]
    needless = [f"{t}-{p}" for t, p, code, _ in results if code == ELECTION_NOT_NEEDED]
    failed = [
        f"{t}-{p}: {error_for_code(code, message)}"
        for t, p, code, message in results
        if code not in (0, ELECTION_NOT_NEEDED)
    ]
    label = kind.upper()
    if done:
        click.echo(f"Successfully completed leader election ({label}) for partitions "
                   f"{', '.join(done)}")  # fmt: skip
    if needless:
        click.echo(f"Valid replica already elected for partitions {', '.join(needless)}")
    if not results:
        click.echo(f"No partition needed a leader election ({label}).")
    if failed:
        raise CommandError(f"leader election ({label}) failed for " + "; ".join(failed))
