"""``pylog console``: serve the web console for a cluster reached through
its bootstrap servers, with the client security of the other client
commands (``--command-config``)."""

from __future__ import annotations

import logging

import click

from pylog.cli.common import (
    CommandError,
    bootstrap_list,
    bootstrap_option,
    client_security,
    command_config_option,
    timeout_option,
)

__all__ = ["console"]

DEFAULT_PORT = 9021  # the port Kafka operators know a web console on


@click.command("console")
@bootstrap_option
@command_config_option
@timeout_option
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to serve on (0.0.0.0: every interface; put TLS and sign-in in front).",
)
@click.option("--port", type=click.IntRange(0, 65535), default=DEFAULT_PORT, show_default=True)
@click.option("--read-only", is_flag=True, help="Show the cluster; refuse every change.")
@click.option(
    "--sign-in",
    is_flag=True,
    help="Each person signs in with their SASL user and password and the console acts as "
    "them (the cluster's ACLs decide what they see); --command-config names the protocol "
    "and mechanism.",
)
@click.option(
    "--refresh",
    "refresh_s",
    type=click.IntRange(min=0),
    default=0,
    help="Pages reload themselves every N seconds (0: never).",
)
@click.option(
    "--zookeeper",
    default=None,
    metavar="HOST:PORT[/CHROOT]",
    help="The cluster's ZooKeeper (ZooKeeper mode): the cluster page shows the ensemble "
    "and the cluster's znodes.",
)
@click.option(
    "--lag-interval",
    "lag_interval_s",
    type=click.FloatRange(min=0),
    default=10.0,
    show_default=True,
    help="Seconds between samples of a watched group's lag, for its chart (0: only on views).",
)
@click.option(
    "--metrics-url",
    "metrics_urls",
    multiple=True,
    metavar="URL",
    help="A pylog broker's metrics endpoint (http://HOST:PORT/metrics), one per broker: "
    "the Clients pages read the client telemetry pushed to it.",
)
def console(
    bootstrap_server: str,
    command_config: str | None,
    request_timeout_ms: int,
    host: str,
    port: int,
    read_only: bool,
    sign_in: bool,
    refresh_s: int,
    lag_interval_s: float,
    zookeeper: str | None,
    metrics_urls: tuple[str, ...],
) -> None:
    """Serve the web console: the cluster, topics, messages and consumer
    groups of any Kafka-protocol cluster, on http://HOST:PORT/."""
    try:
        import uvicorn

        from pylog.console.admin import ConsoleAdmin
        from pylog.console.app import ConsoleSettings, create_app
        from pylog.console.client_telemetry import PrometheusTelemetry
    except ImportError as e:
        raise CommandError(
            f"the console needs its extra: pip install 'pylog-broker[console]' ({e})"
        ) from None
    security = (
        client_security(command_config, need_credentials=not sign_in) if command_config else None
    )
    if sign_in and (security is None or not security.uses_sasl):
        raise CommandError(
            "--sign-in needs a --command-config with security.protocol SASL_PLAINTEXT or "
            "SASL_SSL and its sasl.mechanism"
        )
    admin = ConsoleAdmin(
        ",".join(bootstrap_list(bootstrap_server)),
        security=security,
        timeout_ms=request_timeout_ms,
        zookeeper=zookeeper,
    )
    app = create_app(
        admin,
        ConsoleSettings(
            read_only=read_only,
            refresh_s=refresh_s,
            lag_interval_s=lag_interval_s,
            sign_in=sign_in,
        ),
        PrometheusTelemetry(list(metrics_urls)) if metrics_urls else None,
    )
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    click.echo(
        f"pylog console for {bootstrap_server} on http://{host}:{port}/"
        + (" (read-only)" if read_only else "")
        + (" (sign-in)" if sign_in else "")
    )
    uvicorn.run(app, host=host, port=port, log_level="info", access_log=False)
