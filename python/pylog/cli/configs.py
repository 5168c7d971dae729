"""``pylog configs describe|alter|keys``: topic and broker configs.

``describe`` and ``alter`` talk to a cluster (DescribeConfigs and
IncrementalAlterConfigs); ``keys`` prints the config keys pylog knows, with
Kafka's defaults, without connecting anywhere.
"""

from __future__ import annotations

from typing import Any

import click

from pylog.cli.client import (
    CONFIG_RESOURCE_BROKER,
    CONFIG_RESOURCE_TOPIC,
    CONFIG_SOURCES,
    UNMODIFIED_SOURCES,
    ClusterClient,
)
from pylog.cli.common import (
    CommandError,
    admin_client,
    bootstrap_option,
    client_errors,
    command_config_option,
    error_for_code,
    parse_key_values,
    split_top_level,
    timeout_option,
)

ENTITY_TYPES = {"topics": "TOPIC", "brokers": "BROKER"}
RESOURCE_TYPES = {"TOPIC": CONFIG_RESOURCE_TOPIC, "BROKER": CONFIG_RESOURCE_BROKER}


@click.group("configs")
def configs() -> None:
    """Describe and change topic and broker configs; list the known keys."""


@configs.command("keys")
@click.option("--broker", is_flag=True, help="The broker's keys instead of topic keys.")
@click.option("--markdown", is_flag=True, help="A Markdown table (name, type, default, ...).")
def keys(broker: bool, markdown: bool) -> None:
    """List the topic (or broker) config keys with Kafka's defaults."""
    from pylog.log.config import TOPIC_CONFIG, cli_help, config_docs
    from pylog.server.config import ALL_BROKER_CONFIG

    table = ALL_BROKER_CONFIG if broker else TOPIC_CONFIG
    click.echo(config_docs(table) if markdown else "\n".join(cli_help(table)))


def entity_options(f: Any) -> Any:
    f = click.option("--topic", help="Shorthand for --entity-type topics --entity-name TOPIC.")(f)
    f = click.option(
        "--broker", "broker_id", help="Shorthand for --entity-type brokers --entity-name ID."
    )(f)
    f = click.option(
        "--entity-type",
        type=click.Choice(sorted(ENTITY_TYPES)),
        help="The kind of resource: topics or brokers.",
    )(f)
    f = click.option("--entity-name", help="The topic name or broker id.")(f)
    return f


def resolve_entity(
    topic: str | None, broker_id: str | None, entity_type: str | None, entity_name: str | None
) -> tuple[str, str]:
    """(resource type name, TOPIC or BROKER; resource name) from the options."""
    given: list[tuple[str, str]] = []
    if topic is not None:
        given.append(("topics", topic))
    if broker_id is not None:
        given.append(("brokers", broker_id))
    if entity_type is not None or entity_name is not None:
        if entity_type is None or not entity_name:
            raise click.UsageError("--entity-type and --entity-name go together")
        given.append((entity_type, entity_name))
    if len(given) != 1:
        raise click.UsageError(
            "name exactly one resource: --topic NAME, --broker ID, "
            "or --entity-type topics|brokers --entity-name NAME"
        )
    kind, name = given[0]
    if kind == "brokers" and not name.isdigit():
        raise click.BadParameter(f"a broker is named by its id, not {name!r}")
    return ENTITY_TYPES[kind], name


def _label(resource_type: str, name: str) -> str:
    return f"{'topic' if resource_type == 'TOPIC' else 'broker'} {name}"


def _check_topic_exists(admin: ClusterClient, name: str) -> None:
    if admin.partitions(name) is None:
        raise CommandError(f"topic '{name}' does not exist")


@configs.command("describe")
@bootstrap_option
@command_config_option
@timeout_option
@entity_options
@click.option(
    "--all",
    "show_all",
    is_flag=True,
    help="Every config with its current value, not just the overrides.",
)
def describe(
    bootstrap_server: str,
    request_timeout_ms: int,
    topic: str | None,
    broker_id: str | None,
    entity_type: str | None,
    entity_name: str | None,
    show_all: bool,
    command_config: str | None,
) -> None:
    """Print a topic's or broker's configs: by default the ones set on it
    (dynamic overrides), with --all every config and where its value comes from."""
    resource_type, name = resolve_entity(topic, broker_id, entity_type, entity_name)
    with (
        admin_client(bootstrap_server, request_timeout_ms, command_config=command_config) as admin,
        client_errors(),
    ):
        if resource_type == "TOPIC":
            _check_topic_exists(admin, name)
        found = admin.describe_configs(RESOURCE_TYPES[resource_type], name, synonyms=True)
    entries: dict[str, Any] = {
        e.name: e for e in found if show_all or e.config_source not in UNMODIFIED_SOURCES
    }
    heading = "All" if show_all else "Dynamic"
    click.echo(f"{heading} configs for {_label(resource_type, name)} are:")
    for key in sorted(entries):
        click.echo("  " + format_entry(key, entries[key]))


def format_entry(key: str, entry: Any) -> str:
    """One DescribeConfigs entry: ``key=value sensitive=... synonyms={SOURCE:key=value, ...}``."""
    sensitive = bool(entry.is_sensitive)
    value = None if sensitive else entry.value
    synonyms = ", ".join(
        f"{CONFIG_SOURCES.get(s.source, s.source)}:{s.name}={'null' if sensitive else s.value}"
        for s in entry.synonyms or []
    )
    return (
        f"{key}={'null' if value is None else value} "
        f"sensitive={str(sensitive).lower()} synonyms={{{synonyms}}}"
    )


@configs.command("alter")
@bootstrap_option
@command_config_option
@timeout_option
@entity_options
@click.option(
    "--add-config",
    "add_configs",
    multiple=True,
    metavar="K=V[,K=V...]",
    help="Configs to set; a list value goes in brackets: k=[a,b]. Repeatable.",
)
@click.option(
    "--delete-config",
    "delete_configs",
    multiple=True,
    metavar="K[,K...]",
    help="Configs to remove (back to the default). Repeatable.",
)
@click.option("--validate-only", is_flag=True, help="Ask the broker to check, not apply.")
def alter(
    bootstrap_server: str,
    request_timeout_ms: int,
    topic: str | None,
    broker_id: str | None,
    entity_type: str | None,
    entity_name: str | None,
    add_configs: tuple[str, ...],
    delete_configs: tuple[str, ...],
    validate_only: bool,
    command_config: str | None,
) -> None:
    """Set or remove configs on a topic or broker. Other configs are left as
    they are (an incremental change)."""
    resource_type, name = resolve_entity(topic, broker_id, entity_type, entity_name)
    to_set = parse_key_values(add_configs, "--add-config")
    to_delete = [k for item in delete_configs for k in split_top_level(item)]
    if not to_set and not to_delete:
        raise click.UsageError("give --add-config and/or --delete-config")
    both = sorted(set(to_set) & set(to_delete))
    if both:
        raise click.UsageError(f"both added and deleted: {', '.join(both)}")
    changes: dict[str, str | None] = dict(to_set)
    changes.update(dict.fromkeys(to_delete))

    with (
        admin_client(bootstrap_server, request_timeout_ms, command_config=command_config) as admin,
        client_errors(),
    ):
        code, message = admin.alter_configs(
            RESOURCE_TYPES[resource_type], name, changes, validate_only=validate_only
        )
    if code:
        raise CommandError(f"{_label(resource_type, name)}: {error_for_code(code, message)}")
    verb = "Validated" if validate_only else "Completed updating"
    click.echo(f"{verb} config for {_label(resource_type, name)}.")
