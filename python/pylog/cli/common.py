"""What the client commands (``pylog topics``, ``produce``, ``consume``,
``configs describe|alter``) share: the ``--bootstrap-server`` option, the
kafka-python clients, ``k=v`` parsing, and turning Kafka errors into one clear
line on stderr and exit status 1.

The commands speak the Kafka protocol only, through kafka-python, so they work
against any Kafka cluster as well as a pylog broker. kafka-python is imported
when a command runs, so ``pylog dump-log`` and ``pylog broker`` don't pay for it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import click

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
def kafka_errors() -> Iterator[None]:
    """Report kafka-python's exceptions as a one-line error (exit status 1)."""
    import kafka.errors  # type: ignore[import-untyped,unused-ignore]

    # kafka-python 3 reports an unreachable cluster as a bootstrap timeout.
    try:
        yield
    except kafka.errors.KafkaTimeoutError as e:
        raise CommandError(
            f"{describe_exception(e)} (is --bootstrap-server right and the cluster up?)"
        ) from None
    except kafka.errors.KafkaError as e:
        raise CommandError(describe_exception(e)) from None


def describe_exception(e: BaseException) -> str:
    """``Name: description`` for a Kafka error, without kafka-python's request dump."""
    description = getattr(e, "description", None)
    name = type(e).__name__
    if description:
        return f"{name}: {description}"
    text = str(e)
    if not text or text.startswith(name):
        return text or name
    return f"{name}: {text}"


def error_for_code(code: int, message: str | None = None) -> str:
    """The error name and the broker's message (or the code's standard text)."""
    import kafka.errors

    cls = kafka.errors.for_code(code)
    text = message or getattr(cls, "description", None) or f"error code {code}"
    return f"{cls.__name__}: {text}"


def admin_client(bootstrap_server: str, request_timeout_ms: int = DEFAULT_TIMEOUT_MS) -> Any:
    from kafka.admin import KafkaAdminClient  # type: ignore[import-untyped,unused-ignore]

    with kafka_errors():
        return KafkaAdminClient(
            bootstrap_servers=bootstrap_list(bootstrap_server),
            client_id="pylog-cli",
            request_timeout_ms=request_timeout_ms,
            bootstrap_timeout_ms=request_timeout_ms,
        )


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


def client_properties(props: dict[str, str]) -> dict[str, Any]:
    """Kafka client keys (``linger.ms=5``) as kafka-python keyword arguments
    (``linger_ms=5``), numbers and booleans converted."""
    out: dict[str, Any] = {}
    for key, raw in props.items():
        value: Any = raw
        if raw.lower() in ("true", "false"):
            value = raw.lower() == "true"
        else:
            try:
                value = int(raw)
            except ValueError:
                try:
                    value = float(raw)
                except ValueError:
                    value = raw
        out[key.replace(".", "_").replace("-", "_")] = value
    return out
