"""``pylog user-scram add|describe|delete``: the SCRAM users of a cluster.

What Kafka's ``kafka-configs --entity-type users --alter --add-config
'SCRAM-SHA-512=[iterations=8192,password=...]'`` does, over the Kafka
protocol (AlterUserScramCredentials, DescribeUserScramCredentials), so it
works against any Kafka cluster as well as pylog. The password is salted and
hashed here (PBKDF2, a random 32-byte salt) and only the salted form is sent;
the broker stores the keys derived from it, never the password. Alterations
go to the controller, as Kafka's ZooKeeper-mode brokers require.

Without ``--password`` the password is read from the terminal (or
``$PYLOG_SCRAM_PASSWORD``), so it does not land in the shell history or in
``ps``. To run these against a secured listener, give ``--command-config``
(a Kafka client properties file).

``add --zookeeper HOST:PORT/chroot`` writes ``/config/users/<user>`` in
ZooKeeper directly, as Kafka's ``kafka-configs --zookeeper`` does: how the
brokers' own inter-broker SCRAM user is made before a SASL cluster starts
(no broker can answer until it exists).
"""

from __future__ import annotations

import os
from typing import Any

import click

from pylog.cli.client import ClusterClient, error_for
from pylog.cli.common import (
    CommandError,
    admin_client,
    bootstrap_option,
    client_errors,
    command_config_option,
    timeout_option,
)
from pylog.protocol import ApiKey
from pylog.security.scram_credential import salted_password
from pylog.security.scram_mechanism import MAX_ITERATIONS, MIN_ITERATIONS, ScramMechanism

MECHANISMS = ScramMechanism.names()


@click.group("user-scram")
def user_scram() -> None:
    """Add, describe and delete SCRAM users (SCRAM-SHA-256, SCRAM-SHA-512)."""


def _mechanism(name: str) -> ScramMechanism:
    m = ScramMechanism.by_name(name.upper())
    assert m is not None  # click.Choice
    return m


def _alter(client: ClusterClient, body: dict[str, object]) -> None:
    def attempt() -> None:
        r = client.request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, body, client.controller())
        for result in r.results:
            if result.error_code:
                raise error_for(result.error_code, f"{result.user}: {result.error_message}")

    client.retrying(attempt)


@user_scram.command("add")
@bootstrap_option
@command_config_option
@timeout_option
@click.option("--user", required=True, help="The user name.")
@click.option(
    "--mechanism",
    type=click.Choice(MECHANISMS, case_sensitive=False),
    multiple=True,
    default=("SCRAM-SHA-512",),
    show_default=True,
    help="Mechanism(s) to store a credential for (repeat for both).",
)
@click.option(
    "--iterations",
    type=click.IntRange(MIN_ITERATIONS, MAX_ITERATIONS),
    default=8192,
    show_default=True,
    help="PBKDF2 iterations (Kafka accepts 4096..16384).",
)
@click.option(
    "--password",
    envvar="PYLOG_SCRAM_PASSWORD",
    prompt=True,
    hide_input=True,
    confirmation_prompt=True,
    help="The password (prompted for when not given; also $PYLOG_SCRAM_PASSWORD).",
)
@click.option(
    "--zookeeper",
    metavar="HOST:PORT[/CHROOT]",
    help="Write the credential to ZooKeeper directly instead (before a SASL cluster's "
    "brokers start).",
)
def add(
    bootstrap_server: str,
    command_config: str | None,
    request_timeout_ms: int,
    user: str,
    mechanism: tuple[str, ...],
    iterations: int,
    password: str,
    zookeeper: str | None,
) -> None:
    """Add a user, or change its password (upsert)."""
    upsertions: list[dict[str, Any]] = []
    for name in dict.fromkeys(m.upper() for m in mechanism):
        m = _mechanism(name)
        salt = os.urandom(32)
        upsertions.append(
            {
                "name": user,
                "mechanism": m.type_id,
                "iterations": iterations,
                "salt": salt,
                "salted_password": salted_password(m, password, salt, iterations),
            }
        )
    if zookeeper:
        _write_to_zookeeper(zookeeper, user, upsertions, request_timeout_ms)
    else:
        with (
            client_errors(),
            admin_client(bootstrap_server, request_timeout_ms, command_config=command_config) as c,
        ):
            _alter(c, {"deletions": [], "upsertions": upsertions})
    names = ", ".join(dict.fromkeys(m.upper() for m in mechanism))
    click.echo(f"SCRAM credentials of {user}: {names} set ({iterations} iterations)")


def _write_to_zookeeper(
    connect: str, user: str, upsertions: list[dict[str, Any]], timeout_ms: int
) -> None:
    from pylog.metadata.kafka_zk_client import KafkaZkClient, ZkError
    from pylog.metadata.zk_store import sanitize
    from pylog.security.scram_credential import ScramCredential

    zk = KafkaZkClient(connect, connection_timeout_ms=timeout_ms)
    try:
        zk.start()
        zk.create_top_level_paths()
        config = zk.get_entity_config("users", sanitize(user))
        for u in upsertions:
            m = ScramMechanism.by_type(u["mechanism"])
            assert m is not None
            cred = ScramCredential.from_salted_password(
                m, u["salt"], u["salted_password"], u["iterations"]
            )
            config[m.mechanism_name] = cred.to_string()
        zk.set_entity_config("users", sanitize(user), config)
    except (ZkError, OSError) as e:
        raise CommandError(f"ZooKeeper {connect}: {e}") from None
    finally:
        zk.close()


@user_scram.command("delete")
@bootstrap_option
@command_config_option
@timeout_option
@click.option("--user", required=True, help="The user name.")
@click.option(
    "--mechanism",
    type=click.Choice(MECHANISMS, case_sensitive=False),
    multiple=True,
    default=MECHANISMS,
    show_default=True,
    help="Mechanism(s) whose credential to delete.",
)
def delete(
    bootstrap_server: str,
    command_config: str | None,
    request_timeout_ms: int,
    user: str,
    mechanism: tuple[str, ...],
) -> None:
    """Delete a user's credentials (every mechanism unless --mechanism)."""
    with (
        client_errors(),
        admin_client(bootstrap_server, request_timeout_ms, command_config=command_config) as c,
    ):
        if not mechanism or set(mechanism) == set(MECHANISMS):
            # only the mechanisms the user has: deleting a missing one is an error
            r = c.request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, {"users": [{"name": user}]})
            (result,) = r.results
            if result.error_code:
                raise error_for(result.error_code, result.error_message)
            types = [i.mechanism for i in result.credential_infos]
        else:
            types = [_mechanism(m).type_id for m in dict.fromkeys(m.upper() for m in mechanism)]
        _alter(
            c,
            {"upsertions": [], "deletions": [{"name": user, "mechanism": t} for t in types]},
        )
    names = ", ".join(ScramMechanism.by_type(t).mechanism_name for t in types)  # type: ignore[union-attr]
    click.echo(f"SCRAM credentials of {user}: {names} deleted")


@user_scram.command("describe")
@bootstrap_option
@command_config_option
@timeout_option
@click.option("--user", "users", multiple=True, help="Only these users (repeatable).")
def describe(
    bootstrap_server: str,
    command_config: str | None,
    request_timeout_ms: int,
    users: tuple[str, ...],
) -> None:
    """List users with SCRAM credentials: mechanisms and iterations."""
    with (
        client_errors(),
        admin_client(bootstrap_server, request_timeout_ms, command_config=command_config) as c,
    ):
        body = {"users": [{"name": u} for u in users] if users else None}
        r = c.request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, body)
        if r.error_code:
            raise error_for(r.error_code, r.error_message)
    failed = False
    for result in r.results:
        if result.error_code:
            click.echo(f"{result.user}: {result.error_message}", err=True)
            failed = True
            continue
        infos = ", ".join(
            f"{ScramMechanism.by_type(i.mechanism).mechanism_name}"  # type: ignore[union-attr]
            f" (iterations {i.iterations})"
            for i in result.credential_infos
        )
        click.echo(f"User: {result.user}\t{infos}")
    if failed:
        raise CommandError("some users have no SCRAM credentials")
