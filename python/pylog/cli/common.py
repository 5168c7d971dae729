"""What the client commands (``pylog topics``, ``produce``, ``consume``,
``configs describe|alter``, ``groups``) share: the ``--bootstrap-server``
option, opening a :class:`~pylog.cli.client.ClusterClient`, ``k=v`` parsing,
and turning Kafka errors into one clear line on stderr and exit status 1.

The commands speak the Kafka protocol only (pylog's own client in
:mod:`pylog.cli.client`), so they work against any Kafka cluster as well as a
pylog broker.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import click

from pylog.cli.client import (
    BrokerError,
    BrokerUnreachableError,
    ClusterClient,
    describe,
    error_name,
)
from pylog.errors import KafkaError, RequestTimedOutError
from pylog.security.sasl_client_authenticator import ClientSecurity

DEFAULT_BOOTSTRAP = "localhost:9092"
# How long a command waits for the cluster before giving up.
DEFAULT_TIMEOUT_MS = 30_000

F = TypeVar("F", bound=Callable[..., Any])


class CommandError(click.ClickException):
    """Printed as ``Error: <message>`` on stderr; exit status 1."""


def bootstrap_option(f: F) -> F:
    return click.option(
        "--bootstrap-server",
        "bootstrap_server",
        default=DEFAULT_BOOTSTRAP,
        show_default=True,
        envvar="PYLOG_BOOTSTRAP_SERVER",
        metavar="HOST:PORT[,...]",
        help="Brokers to connect to (also $PYLOG_BOOTSTRAP_SERVER).",
    )(f)


def timeout_option(f: F) -> F:
    return click.option(
        "--timeout-ms",
        "request_timeout_ms",
        type=click.IntRange(min=1),
        default=DEFAULT_TIMEOUT_MS,
        show_default=True,
        help="How long to wait for the cluster's answers.",
    )(f)


def bootstrap_list(bootstrap_server: str) -> list[str]:
    servers = [s.strip() for s in bootstrap_server.split(",") if s.strip()]
    if not servers:
        raise click.BadParameter("no servers given", param_hint="--bootstrap-server")
    return servers


@contextmanager
def client_errors() -> Iterator[None]:
    """Report the client's exceptions as a one-line error (exit status 1)."""
    try:
        yield
    except (BrokerUnreachableError, RequestTimedOutError) as e:
        raise CommandError(
            f"{describe_exception(e)} (is --bootstrap-server right and the cluster up?)"
        ) from None
    except KafkaError as e:
        raise CommandError(describe_exception(e)) from None


def describe_exception(e: BaseException) -> str:
    """``Name: description`` for an error: the exception class, or for a code
    pylog has no class for the name Kafka gives the code."""
    name = error_name(e.code) if isinstance(e, BrokerError) else type(e).__name__
    text = str(e)
    return f"{name}: {text}" if text else name


def error_for_code(code: int, message: str | None = None) -> str:
    """The error name and the broker's message (or the code's standard text)."""
    return describe(code, message)


def admin_client(
    bootstrap_server: str,
    request_timeout_ms: int = DEFAULT_TIMEOUT_MS,
    client_id: str = "pylog-cli",
    command_config: str | None = None,
) -> ClusterClient:
    """A :class:`ClusterClient` connected to the first reachable bootstrap
    server, secured as the ``--command-config`` file says."""
    security = client_security(command_config) if command_config else None
    with client_errors():
        return ClusterClient(
            ",".join(bootstrap_list(bootstrap_server)),
            timeout_ms=request_timeout_ms,
            client_id=client_id,
            security=security,
        )


def command_config_option(f: F) -> F:
    return click.option(
        "--command-config",
        "command_config",
        type=click.Path(exists=True, dir_okay=False),
        envvar="PYLOG_COMMAND_CONFIG",
        help="A client properties file, as Kafka's tools take: security.protocol, "
        "sasl.mechanism, sasl.jaas.config (or sasl.username / sasl.password), "
        "ssl.truststore.location (or ssl.ca.location), ssl.keystore.location / "
        "ssl.key.password (or ssl.certificate.location / ssl.key.location) "
        "(also $PYLOG_COMMAND_CONFIG).",
    )(f)


def client_security(path: str, *, need_credentials: bool = True) -> ClientSecurity:
    """The TLS and SASL settings of a Kafka client properties file (Java's
    keys, and librdkafka's where they differ; SASL's mechanism PLAIN unless
    named). ``need_credentials`` False: SASL without a user name and password
    is fine (the console's sign-in supplies each person's)."""
    from pylog.config import parse_properties
    from pylog.security.client_properties import ClientPropertyError, client_security_from

    try:
        with open(path, encoding="utf-8") as f:
            props = parse_properties(f.read())
    except OSError as e:
        raise CommandError(f"cannot read --command-config {path}: {e}") from None
    try:
        return client_security_from(
            props, where=path, need_credentials=need_credentials, default_mechanism="PLAIN"
        )
    except ClientPropertyError as e:
        raise CommandError(f"{path}: {e}") from None


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """Split on ``sep`` outside square brackets: ``a=1,b=[x,y]`` -> ``a=1``, ``b=[x,y]``."""
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(0, depth - 1)
        if ch == sep and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


def parse_key_values(items: Iterable[str], param_hint: str) -> dict[str, str]:
    """``k=v`` pairs, each item possibly a comma-separated list of them.

    A value in square brackets is a list value: ``k=[a,b]`` sets ``k`` to ``a,b``
    (the way Kafka's config tool writes lists inside a comma-separated list).
    """
    result: dict[str, str] = {}
    for item in items:
        for pair in split_top_level(item):
            key, sep, value = pair.partition("=")
            key, value = key.strip(), value.strip()
            if not sep or not key:
                raise click.BadParameter(f"{pair!r} is not KEY=VALUE", param_hint=param_hint)
            if value.startswith("[") and value.endswith("]"):
                value = value[1:-1]
            result[key] = value
    return result


def parse_properties_option(items: Iterable[str], param_hint: str) -> dict[str, str]:
    """Repeatable ``--property key=value`` (one pair each; the value may hold commas)."""
    result: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", param_hint=param_hint)
        result[key.strip()] = value
    return result


def unescape(text: str) -> str:
    """``\\t``, ``\\n``, ``\\r`` and ``\\\\`` in separators given on the command line."""
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            mapped = {"t": "\t", "n": "\n", "r": "\r", "\\": "\\"}.get(nxt)
            if mapped is not None:
                out.append(mapped)
                i += 2
                continue
        out.append(ch)
        i += 1
    return "".join(out)


def _bool(raw: str) -> bool:
    if raw.strip().lower() not in ("true", "false"):
        raise ValueError("not true or false")
    return raw.strip().lower() == "true"


#: How a client property's text becomes its value: int, bool or str.
PROPERTY_TYPES: dict[type, Callable[[str], Any]] = {int: int, bool: _bool, str: str.strip}


def client_properties(
    props: dict[str, str], known: dict[str, tuple[str, type]], param_hint: str
) -> dict[str, Any]:
    """Kafka client keys (``linger.ms=5``) as the settings they name
    (``known``: key -> (setting, type)), converted; an unknown key or a value
    of the wrong type is a usage error."""
    out: dict[str, Any] = {}
    for key, raw in props.items():
        if key not in known:
            raise click.BadParameter(
                f"{key!r} is not a setting this client has (it knows {', '.join(sorted(known))})",
                param_hint=param_hint,
            )
        setting, kind = known[key]
        try:
            out[setting] = PROPERTY_TYPES[kind](raw)
        except ValueError:
            raise click.BadParameter(
                f"{key}={raw!r}: not a {kind.__name__}", param_hint=param_hint
            ) from None
    return out
