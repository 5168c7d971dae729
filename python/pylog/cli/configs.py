"""``pylog configs describe|alter|keys``: the configs of every entity type
Kafka's ``kafka-configs`` tool (ConfigCommand) takes.

Topics and brokers (a broker's own, or with ``--entity-default`` the
cluster-wide default) go through DescribeConfigs and IncrementalAlterConfigs;
users, clients and IPs are quota entities (KIP-546's DescribeClientQuotas and
AlterClientQuotas; a user and a client together name the pair). ``keys``
prints the config keys pylog knows, with Kafka's defaults, without
connecting anywhere. SCRAM credentials of users are ``pylog user-scram``'s.
Broker loggers (Kafka's ``broker-loggers``) are not served by pylog.
"""

from __future__ import annotations

import ipaddress
import math
import socket
from decimal import Decimal
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
from pylog.protocol import ApiKey

ENTITY_TYPES = {"topics": "TOPIC", "brokers": "BROKER"}
RESOURCE_TYPES = {"TOPIC": CONFIG_RESOURCE_TOPIC, "BROKER": CONFIG_RESOURCE_BROKER}
#: The quota entity types, as --entity-type names them -> ClientQuotaEntity's.
QUOTA_ENTITY_TYPES = {"users": "user", "clients": "client-id", "ips": "ip"}
#: The keys each quota entity takes (Kafka's QuotaConfig).
CLIENT_QUOTA_KEYS = (
    "producer_byte_rate",
    "consumer_byte_rate",
    "request_percentage",
    "controller_mutation_rate",
)
IP_QUOTA_KEYS = ("connection_creation_rate",)
# DescribeClientQuotas' match types.
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2


@click.group("configs")
def configs() -> None:
    """Describe and change the configs of topics and brokers and the quotas of
    users, clients and IPs; list the known keys."""


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
    f = click.option("--user", help="Shorthand for --entity-type users --entity-name USER.")(f)
    f = click.option(
        "--client", help="Shorthand for --entity-type clients --entity-name CLIENT_ID."
    )(f)
    f = click.option("--ip", help="Shorthand for --entity-type ips --entity-name IP.")(f)
    f = click.option(
        "--entity-type",
        "entity_types",
        multiple=True,
        type=click.Choice(sorted([*ENTITY_TYPES, *QUOTA_ENTITY_TYPES])),
        help="The kind of entity: topics, brokers, users, clients or ips. Given twice "
        "(users, then clients) it names a user and client pair.",
    )(f)
    f = click.option(
        "--entity-name",
        "entity_names",
        multiple=True,
        help="The entity's name (topic, broker id, user, client id or IP), one per --entity-type.",
    )(f)
    f = click.option(
        "--entity-default",
        is_flag=True,
        help="The default entity of the (last) --entity-type without a name: the cluster-wide "
        "broker config, or the default user, client or IP quota.",
    )(f)
    return f


#: (entity type as --entity-type names it, name; "" for the default entity)
Entity = tuple[str, str]


def resolve_entities(
    topic: str | None,
    broker_id: str | None,
    user: str | None,
    client: str | None,
    ip: str | None,
    entity_types: tuple[str, ...],
    entity_names: tuple[str, ...],
    entity_default: bool,
    *,
    names_needed: bool = True,
) -> list[Entity]:
    """The entities the options name: one topic or broker, or one or two
    quota entities (a user, a client, both, or an IP). ``names_needed``
    False: a quota entity type without a name means every entity of it
    (describe)."""
    given: list[tuple[str, str | None]] = []
    for kind, name in (
        ("topics", topic), ("brokers", broker_id), ("users", user), ("clients", client),
        ("ips", ip),
    ):  # fmt: skip
        if name is not None:
            given.append((kind, name))
    names: list[str | None] = list(entity_names)
    if len(names) > len(entity_types):
        raise click.UsageError("more --entity-name than --entity-type")
    if entity_default:
        if len(names) == len(entity_types):
            raise click.UsageError("--entity-default needs an --entity-type without a name")
        names.append("")
    names += [None] * (len(entity_types) - len(names))
    given += list(zip(entity_types, names, strict=True))
    if not given:
        raise click.UsageError(
            "name what to describe or alter: --topic NAME, --broker ID, --user, --client, --ip, "
            "or --entity-type TYPE with --entity-name NAME or --entity-default"
        )
    kinds = sorted(k for k, _ in given)
    if len(set(kinds)) != len(kinds):
        raise click.UsageError(f"{kinds[0]} named twice")
    if len(given) > 1 and kinds != ["clients", "users"]:
        raise click.UsageError(
            "name one entity, or a user and a client together "
            "(--entity-type users --entity-type clients)"
        )
    out: list[Entity] = []
    for kind, name in given:
        if name is None:
            if names_needed:
                raise click.UsageError(
                    f"--entity-type {kind} needs an --entity-name or --entity-default"
                )
            name = "*"  # every entity of the type (describe only)
        if kind == "brokers" and name not in ("", "*") and not name.isdigit():
            raise click.BadParameter(
                f"The entity name for brokers must be a valid integer broker id, found: {name}"
            )
        if kind == "ips" and name not in ("", "*") and not valid_ip_entity(name):
            raise click.BadParameter(
                f"The entity name for ips must be a valid IP or resolvable host, but it is: {name}"
            )
        if kind == "topics" and not name:
            raise click.UsageError("topics have no default entity")
        out.append((kind, name))
    # Kafka orders a pair user first, client second.
    return sorted(out, key=lambda e: ("users", "clients", "ips", "topics", "brokers").index(e[0]))


def valid_ip_entity(name: str) -> bool:
    """An IP address, or a host name that resolves (Kafka's isValidIpEntity)."""
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        pass
    try:
        socket.getaddrinfo(name, None)
    except (OSError, UnicodeError):
        return False
    return True


def _label(resource_type: str, name: str) -> str:
    return f"{'topic' if resource_type == 'TOPIC' else 'broker'} {name}"


def java_double(value: float) -> str:
    """A quota value as Kafka's tool prints it (Java's Double.toString):
    plain between 10^-3 and 10^7, ``d.dddE<n>`` outside."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return repr(float(value))
    sign, digits, exponent = Decimal(repr(float(value))).as_tuple()
    assert isinstance(exponent, int)
    scientific = exponent + len(digits) - 1
    rest = "".join(map(str, digits[1:])).rstrip("0") or "0"
    return f"{'-' if sign else ''}{digits[0]}.{rest}E{scientific}"


def _check_topic_exists(admin: ClusterClient, name: str) -> None:
    if admin.partitions(name) is None:
        raise CommandError(f"topic '{name}' does not exist")


def _check_broker_exists(admin: ClusterClient, broker_id: str) -> None:
    live = admin.metadata([]).brokers
    if int(broker_id) not in live:
        raise CommandError(
            f"broker {broker_id} is not in the cluster (its brokers: "
            f"{', '.join(map(str, sorted(live)))})"
        )


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
    user: str | None,
    client: str | None,
    ip: str | None,
    entity_types: tuple[str, ...],
    entity_names: tuple[str, ...],
    entity_default: bool,
    show_all: bool,
    command_config: str | None,
) -> None:
    """Print a topic's or broker's configs (by default the ones set on it, with
    --all every config and where its value comes from), or the quotas of users,
    clients or IPs (a quota entity type without a name: every one of them)."""
    entities = resolve_entities(
        topic, broker_id, user, client, ip, entity_types, entity_names, entity_default,
        names_needed=False,
    )  # fmt: skip
    with (
        admin_client(bootstrap_server, request_timeout_ms, command_config=command_config) as admin,
        client_errors(),
    ):
        if entities[0][0] in QUOTA_ENTITY_TYPES:
            for entity, values in describe_quotas(admin, entities):
                click.echo(
                    f"Quota configs for {quota_label(entity)} are "
                    + ", ".join(f"{k}={java_double(v)}" for k, v in sorted(values.items()))
                )
            return
        ((kind, wanted),) = entities
        resource_type = ENTITY_TYPES[kind]
        if wanted != "*":
            names = [wanted]
        elif resource_type == "TOPIC":  # every topic, as Kafka's tool lists them
            names = sorted(admin.metadata(None).topics)
        else:  # every broker, then the cluster-wide default
            names = [*map(str, sorted(admin.metadata([]).brokers)), ""]
        described: list[tuple[str, list[Any]]] = []
        for name in names:
            if resource_type == "TOPIC":
                _check_topic_exists(admin, name)
            elif name:
                _check_broker_exists(admin, name)
            found = admin.describe_configs(RESOURCE_TYPES[resource_type], name, synonyms=True)
            described.append((name, found))
    for name, found in described:
        if not name:  # the brokers' cluster-wide default
            entries = {e.name: e for e in found if show_all or e.config_source == 3}
            click.echo("Default configs for brokers in the cluster are:")
        else:
            entries = {
                e.name: e for e in found if show_all or e.config_source not in UNMODIFIED_SOURCES
            }
            heading = "All" if show_all else "Dynamic"
            click.echo(f"{heading} configs for {_label(resource_type, name)} are:")
        for key in sorted(entries):
            click.echo("  " + format_entry(key, entries[key]))


def quota_components(entities: list[Entity]) -> list[dict[str, Any]]:
    """DescribeClientQuotas' filter: each entity by name, as the default, or
    (``*``) any entity of the type."""
    out = []
    for kind, name in entities:
        etype = QUOTA_ENTITY_TYPES[kind]
        if name == "*":
            out.append({"entity_type": etype, "match_type": MATCH_SPECIFIED, "match": None})
        elif name == "":
            out.append({"entity_type": etype, "match_type": MATCH_DEFAULT, "match": None})
        else:
            out.append({"entity_type": etype, "match_type": MATCH_EXACT, "match": name})
    return out


def describe_quotas(
    admin: ClusterClient, entities: list[Entity]
) -> list[tuple[dict[str, str | None], dict[str, float]]]:
    """The quota entities matching exactly these components (Kafka's
    ClientQuotaFilter.containsOnly) and their values."""
    body = {"components": quota_components(entities), "strict": True}
    resp = admin.request(ApiKey.DESCRIBE_CLIENT_QUOTAS, body, admin.any_node())
    if resp.error_code:
        raise CommandError(error_for_code(resp.error_code, resp.error_message))
    return [
        (
            {e.entity_type: e.entity_name for e in entry.entity},
            {v.key: float(v.value) for v in entry.values},
        )
        for entry in resp.entries or []
    ]


def quota_label(entity: dict[str, str | None]) -> str:
    """``user-principal 'alice', client-id 'app'``; ``the default ip``."""
    labels = {"user": "user-principal", "client-id": "client-id", "ip": "ip"}
    return ", ".join(
        f"{labels[t]} '{entity[t]}'" if entity[t] is not None else f"the default {labels[t]}"
        for t in ("user", "client-id", "ip")
        if t in entity
    )


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
    user: str | None,
    client: str | None,
    ip: str | None,
    entity_types: tuple[str, ...],
    entity_names: tuple[str, ...],
    entity_default: bool,
    add_configs: tuple[str, ...],
    delete_configs: tuple[str, ...],
    validate_only: bool,
    command_config: str | None,
) -> None:
    """Set or remove configs on a topic or broker (or the brokers' cluster-wide
    default), or quotas of a user, client, user and client pair, or IP. Other
    configs are left as they are (an incremental change)."""
    entities = resolve_entities(
        topic, broker_id, user, client, ip, entity_types, entity_names, entity_default
    )
    to_set = parse_key_values(add_configs, "--add-config")
    to_delete = [k for item in delete_configs for k in split_top_level(item)]
    if not to_set and not to_delete:
        raise click.UsageError("give --add-config and/or --delete-config")
    both = sorted(set(to_set) & set(to_delete))
    if both:
        raise click.UsageError(f"both added and deleted: {', '.join(both)}")
    changes: dict[str, str | None] = dict(to_set)
    changes.update(dict.fromkeys(to_delete))
    kind, name = entities[0]
    if kind in QUOTA_ENTITY_TYPES:
        quota_changes = check_quota_changes(entities, changes)
        with (
            admin_client(
                bootstrap_server, request_timeout_ms, command_config=command_config
            ) as admin,
            client_errors(),
        ):
            alter_quotas(admin, entities, quota_changes, validate_only=validate_only)
    else:
        resource_type = ENTITY_TYPES[kind]
        with (
            admin_client(
                bootstrap_server, request_timeout_ms, command_config=command_config
            ) as admin,
            client_errors(),
        ):
            if resource_type == "BROKER" and name:
                _check_broker_exists(admin, name)
            code, message = admin.alter_configs(
                RESOURCE_TYPES[resource_type], name, changes, validate_only=validate_only
            )
        if code:
            label = _label(resource_type, name) if name else "the brokers' default"
            raise CommandError(f"{label}: {error_for_code(code, message)}")
    verb = "Validated" if validate_only else "Completed updating"
    if name:
        click.echo(f"{verb} config for {kind[:-1]} {name}.")
    else:
        click.echo(f"{verb} default config for {kind} in the cluster.")


def check_quota_changes(
    entities: list[Entity], changes: dict[str, str | None]
) -> dict[str, float | None]:
    """Kafka's tool's checks of a quota change: only the entity's quota keys
    (SCRAM credentials are ``pylog user-scram``'s), and numbers."""
    kinds = {k for k, _ in entities}
    allowed = IP_QUOTA_KEYS if kinds == {"ips"} else CLIENT_QUOTA_KEYS
    unknown = sorted(k for k in changes if k not in allowed)
    if unknown:
        if kinds == {"ips"}:
            raise CommandError(
                "Only connection quota configs can be added for 'ips' using "
                f"--bootstrap-server. Unexpected config names: {','.join(unknown)}"
            )
        scram = [k for k in unknown if k.startswith("SCRAM-")]
        hint = " (SCRAM credentials: pylog user-scram)" if scram else ""
        raise CommandError(
            f"Only quota configs can be added for '{sorted(kinds)[0]}' using "
            f"--bootstrap-server. Unexpected config names: {','.join(unknown)}{hint}"
        )
    out: dict[str, float | None] = {}
    for key, raw in changes.items():
        if raw is None:
            out[key] = None
            continue
        try:
            out[key] = float(raw)
        except ValueError:
            raise CommandError(f"Cannot parse quota configuration value for {key}: {raw}") from None
    return out


def alter_quotas(
    admin: ClusterClient,
    entities: list[Entity],
    changes: dict[str, float | None],
    *,
    validate_only: bool,
) -> None:
    """AlterClientQuotas of one entity; deleting a key the entity does not
    have is refused first, as Kafka's tool refuses it."""
    current = describe_quotas(admin, entities)
    have = current[0][1] if current else {}
    missing = sorted(k for k, v in changes.items() if v is None and k not in have)
    if missing:
        raise CommandError(f"Invalid config(s): {','.join(missing)}")
    body = {
        "entries": [
            {
                "entity": [
                    {"entity_type": QUOTA_ENTITY_TYPES[k], "entity_name": n or None}
                    for k, n in entities
                ],
                "ops": [
                    {"key": k, "value": 0.0 if v is None else v, "remove": v is None}
                    for k, v in changes.items()
                ],
            }
        ],
        "validate_only": validate_only,
    }
    resp = admin.request(ApiKey.ALTER_CLIENT_QUOTAS, body, admin.any_node())
    for entry in resp.entries:
        if entry.error_code:
            raise CommandError(error_for_code(entry.error_code, entry.error_message))
