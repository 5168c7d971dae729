"""``pylog broker start``: run a broker until SIGTERM or SIGINT."""

from __future__ import annotations

import sys
from typing import Any

import click

from pylog.errors import KafkaError

DEFAULT_LOG_DIRS = "./pylog-data"


@click.group("broker")
def broker() -> None:
    """Run a pylog broker."""


@broker.command("start")
@click.option(
    "--config",
    "config_path",
    type=click.Path(exists=True, dir_okay=False),
    help="A server.properties file (Kafka's keys; `pylog configs keys --broker` lists them).",
)
@click.option(
    "--override",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="A broker key set on top of the file; repeatable.",
)
@click.option(
    "--log-level",
    default="INFO",
    show_default=True,
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
)
def broker_start(config_path: str | None, overrides: tuple[str, ...], log_level: str) -> None:
    """Start a broker and serve until SIGTERM or SIGINT (then shut down cleanly).

    Without a config it listens on PLAINTEXT://127.0.0.1:9092 and keeps its
    data in ./pylog-data. A line "pylog broker <id> started: <listeners>" on
    stdout says it is serving (a listener port 0 shows the bound port).
    """
    import asyncio
    import logging

    from pylog.broker.kafka_server import KafkaServer
    from pylog.config import parse_properties
    from pylog.server.config import KafkaConfig

    logging.basicConfig(
        level=getattr(logging, log_level.upper()),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    props: dict[str, str] = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", param_hint="--override")
        props[key.strip()] = value.strip()
    try:
        file_props: dict[str, str] = {}
        if config_path is not None:
            with open(config_path, encoding="utf-8") as f:
                file_props = parse_properties(f.read())
        if not any(k in file_props or k in props for k in ("log.dirs", "log.dir")):
            props["log.dirs"] = DEFAULT_LOG_DIRS
        config = KafkaConfig.from_properties(config_path, props)
        server = KafkaServer(config)
    except (OSError, KafkaError) as e:
        click.echo(f"Error: {e}", err=True)
        sys.exit(2)

    try:
        asyncio.run(_serve(server))
    except KeyboardInterrupt:  # a second Ctrl-C during shutdown
        sys.exit(130)
    except (OSError, KafkaError) as e:
        click.echo(f"Error: the broker could not start: {e}", err=True)
        sys.exit(1)


async def _serve(server: Any) -> None:
    """The broker, and the web console beside it when ``console.port`` is set
    (docs/console.md)."""
    consoles: list[Any] = []

    def announce(server: Any) -> None:
        if server.config.get("console.port"):
            try:
                from pylog.console.broker_console import BrokerConsole

                manager = getattr(server.handler, "client_metrics", None)
                console = BrokerConsole(
                    server.config,
                    getattr(manager, "receiver", None),  # KIP-714 telemetry
                )
            except ImportError as e:
                click.echo(
                    f"Error: console.port: the console needs its extra, pip install "
                    f"'pylog-broker[console]' ({e}); the broker serves no console",
                    err=True,
                )
            except ValueError as e:
                click.echo(f"Error: {e}; the broker serves no console", err=True)
            else:
                console.start()
                consoles.append(console)
        _announce(server)

    try:
        await server.serve_forever(announce=announce)
    finally:
        for console in consoles:
            await console.stop()


def _announce(server: Any) -> None:
    listeners = ", ".join(str(ep) for ep in server.config.listeners)
    click.echo(
        f"pylog broker {server.config.broker_id} started: {listeners} "
        f"(log.dirs {','.join(server.config.log_dirs)})"
    )
    sys.stdout.flush()
