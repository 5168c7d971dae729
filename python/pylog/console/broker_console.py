"""The console served by a broker itself (``console.port``): ``pylog broker
start`` runs it on the broker's event loop once the broker is serving, as a
client of the broker's own PLAINTEXT listener (so it sees the whole cluster
as any client does, and a SASL or TLS listener is never entered with the
broker's own credentials). Read-only unless ``console.read.only=false``.
Its Clients pages show the telemetry clients pushed to this broker, read from
the broker's receiver in process (``client_telemetry``)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING

import uvicorn

from pylog.console.admin import ConsoleAdmin
from pylog.console.app import ConsoleSettings, create_app
from pylog.console.client_telemetry import ReceiverTelemetry

if TYPE_CHECKING:
    from pylog.server.client_metrics_receiver_plugin import ClientMetricsReceiverPlugin
    from pylog.server.config import KafkaConfig

__all__ = ["BrokerConsole"]

log = logging.getLogger(__name__)


class _Server(uvicorn.Server):
    """uvicorn on a loop it does not own: the broker handles the signals."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class BrokerConsole:
    def __init__(
        self, config: KafkaConfig, telemetry: ClientMetricsReceiverPlugin | None = None
    ) -> None:
        plain = [ep for ep in config.listeners if ep.security_protocol == "PLAINTEXT"]
        if not plain:
            raise ValueError("console.port needs a PLAINTEXT listener for the console to use")
        ep = plain[0]
        self.bootstrap = f"{ep.host or '127.0.0.1'}:{ep.port}"
        self.host = config.get("console.host") or config.listeners[0].host or "127.0.0.1"
        self.port = int(config.get("console.port"))
        self.read_only = bool(config.get("console.read.only"))
        zk = config.get("zookeeper.connect")
        self._admin = ConsoleAdmin(
            self.bootstrap,
            client_id=f"pylog-console-{config.broker_id}",
            # The broker's own ensemble: the cluster page shows its state.
            zookeeper=str(zk) if zk else None,
        )
        app = create_app(
            self._admin,
            ConsoleSettings(read_only=self.read_only),
            ReceiverTelemetry(telemetry, config.broker_id) if telemetry is not None else None,
        )
        self._server = _Server(
            uvicorn.Config(
                app, host=self.host, port=self.port, log_level="warning", access_log=False
            )
        )
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Serve on the running loop (a task beside the broker's)."""
        self._task = asyncio.get_running_loop().create_task(self._server.serve())
        log.info(
            "web console on http://%s:%d/ for %s%s",
            self.host,
            self.port,
            self.bootstrap,
            " (read-only)" if self.read_only else "",
        )

    async def stop(self) -> None:
        self._server.should_exit = True
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
