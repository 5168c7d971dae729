"""SocketServer: the broker's listeners and the connections on them.

Kafka's ``kafka.network.SocketServer`` runs an ``Acceptor`` thread per listener
(``listeners``) that hands new sockets round-robin to ``num.network.threads``
``Processor`` threads, each multiplexing its connections with a selector. On
asyncio the event loop is the selector, so the same roles become:

* :class:`Acceptor` — one per listener: the listening socket and the accept
  callback (asyncio's protocol factory), which enforces ``max.connections``
  (KIP-402) and the :class:`~pylog.network.connection_quotas.ConnectionQuotas`
  (connection creation rates, KIP-612's IP quotas, ``max.connections.per.ip``)
  and tunes the new socket (``socket.send.buffer.bytes``,
  ``socket.receive.buffer.bytes``);
* :class:`~pylog.network.processor.Processor` — one per connection: framing,
  request hand-off to the RequestChannel, in-order responses, sendfile;
* the SocketServer itself — binding before serving (so a port 0 is known
  before it is advertised), the connection counts, the reaper of connections
  idle past ``connections.max.idle.ms``, an orderly shutdown that answers what
  was received, and the SocketServerMetrics gauges.

A bad frame (negative or larger than ``socket.request.max.bytes``, an
unparsable header) closes that connection with one log line; nothing a client
sends can stop the others being served.

Memory a client can make the broker hold is bounded: a frame's buffer grows as
its bytes arrive (a size prefix alone reserves nothing); a connection holding
``CONNECTION_MAX_REQUEST_BYTES`` of requests read and not yet answered reads no
new request until responses are written; ``queued.max.request.bytes`` bounds
the same over every connection; and a frame must arrive whole within
``connections.max.idle.ms`` of its first byte, or its connection is closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import logging
import socket
import ssl
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from pylog.network.connection_quotas import ConnectionHold, ConnectionQuotas, normalize_host
from pylog.network.metrics import MetricsRegistry, api_display_name
from pylog.network.processor import FrameBuffers, Processor
from pylog.network.request_channel import SOLE_CONNECTION_NS, RequestChannel, RequestHandler
from pylog.protocol import RequestHeader, parse_request_header
from pylog.security.sasl_server_authenticator import SaslServerConfig
from pylog.security.ssl_principal_mapper import SslPrincipalMapper

__all__ = [
    "CONNECTION_MAX_REQUEST_BYTES",
    "Acceptor",
    "ListenerSpec",
    "SocketServer",
    "default_header_parser",
]

_log = logging.getLogger("pylog.network")

HeaderParser = Callable[[memoryview], RequestHeader]

# A connection starts reading no new request while it holds this many bytes of
# requests read and not yet answered: small requests pipeline freely, large
# ones (a 1 MB Produce) two at a time. Kafka mutes a connection while one of
# its requests is in progress; this is that, with room for pipelining.
CONNECTION_MAX_REQUEST_BYTES = 1024 * 1024


def default_header_parser() -> HeaderParser:
    """``pylog.protocol.parse_request_header``."""
    return parse_request_header


@dataclass(frozen=True, slots=True)
class ListenerSpec:
    """What to bind: listener name, host ("" or None = every interface), port
    (0 = any); and its security: the TLS context of an SSL / SASL_SSL listener
    (with the mapping of client certificates to principals), the SASL settings
    of a SASL_PLAINTEXT / SASL_SSL one."""

    name: str
    host: str | None
    port: int
    security_protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    principal_mapper: SslPrincipalMapper | None = None
    sasl: SaslServerConfig | None = None


class Acceptor:
    """One listener's socket; its accept callback builds a Processor per connection."""

    def __init__(self, server: SocketServer, spec: ListenerSpec) -> None:
        self.server = server
        self.spec = spec
        self._server: asyncio.Server | None = None
        self.port = spec.port

    async def bind(self) -> int:
        """Bind the listening socket (connections wait in the backlog until
        :meth:`start_serving`); returns the bound port."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            self._new_processor,
            self.spec.host or None,
            self.spec.port,
            backlog=self.server.backlog,
            reuse_address=True,
            start_serving=False,
        )
        self.port = int(self._server.sockets[0].getsockname()[1])
        _log.info("listener %s bound to %s:%s", self.spec.name, self.spec.host or "*", self.port)
        return self.port

    async def start_serving(self) -> None:
        if self._server is not None:
            await self._server.start_serving()

    def update_ssl_context(self, context: ssl.SSLContext) -> None:
        """Handshakes from now on present ``context``'s certificate and trust
        its CAs (a rotated keystore); connections made before keep theirs."""
        self.spec = dataclasses.replace(self.spec, ssl_context=context)

    def update_sasl_config(self, sasl: SaslServerConfig) -> None:
        """Connections from now on authenticate with ``sasl`` (a dynamic JAAS
        text or mechanism list); connections made before keep theirs."""
        self.spec = dataclasses.replace(self.spec, sasl=sasl)

    def _new_processor(self) -> Processor:
        return Processor(self.server, self, self.server._next_connection_id(self))

    def stop_accepting(self) -> None:
        if self._server is not None:
            self._server.close()

    async def wait_closed(self) -> None:
        # Not Server.wait_closed: from 3.12 it also waits for every connection.
        self._server = None


class SocketServer:
    """Every listener and connection of the broker."""

    def __init__(
        self,
        listeners: Sequence[ListenerSpec],
        handler: RequestHandler | None,
        *,
        queued_max_requests: int = 500,
        queued_max_request_bytes: int = -1,
        connection_max_request_bytes: int = CONNECTION_MAX_REQUEST_BYTES,
        socket_request_max_bytes: int = 100 * 1024 * 1024,
        connections_max_idle_ms: int = 600_000,
        max_connections: int = 2**31 - 1,
        max_connections_per_ip: int = 2**31 - 1,
        connection_quotas: ConnectionQuotas | None = None,
        send_buffer_bytes: int = 100 * 1024,
        receive_buffer_bytes: int = 100 * 1024,
        backlog: int = 50,
        metrics: MetricsRegistry | None = None,
        parse_header: HeaderParser | None = None,
        direct_sendfile: bool = True,
        network_threads: int = 3,
    ) -> None:
        if not listeners:
            raise ValueError("a SocketServer needs at least one listener")
        self.metrics = metrics
        self.channel = RequestChannel(
            handler, queued_max_requests, metrics, max_request_bytes=queued_max_request_bytes
        )
        self.connection_max_request_bytes = connection_max_request_bytes
        self.max_request_size = socket_request_max_bytes
        self.connections_max_idle_ms = connections_max_idle_ms
        self.max_connections = max_connections
        self.connection_quotas = connection_quotas or ConnectionQuotas()
        self.connection_quotas.max_connections_per_ip = max_connections_per_ip
        self.connection_quotas.listener_count = len(listeners)
        #: Connections held unread before being served or closed (ConnectionHold).
        self.held: set[Processor] = set()
        self.send_buffer_bytes = send_buffer_bytes
        self.receive_buffer_bytes = receive_buffer_bytes
        self.backlog = backlog
        self.direct_sendfile = direct_sendfile
        #: Threads that send what of a large response the socket did not take
        #: at once (``num.network.threads``; 0: the event loop sends it all).
        self.network_executor: ThreadPoolExecutor | None = (
            ThreadPoolExecutor(network_threads, thread_name_prefix="pylog-network")
            if network_threads > 0
            else None
        )
        self.network_threads = network_threads
        #: Responses a network thread is sending or has queued now (Processor).
        self.network_sends_running = 0
        self._parse_header = parse_header
        self.acceptors = [Acceptor(self, spec) for spec in listeners]
        self.processors: dict[str, Processor] = {}
        self._ids = itertools.count()
        self._reaper: asyncio.Task[None] | None = None
        self._api_names: dict[int, str] = {}
        self.accepting = False
        self.connections_total = 0
        self.connections_refused = 0
        self.bad_frames = 0
        # Recycled buffers for the large frames of every connection.
        self.frame_buffers = FrameBuffers()
        #: The connection the last prompt request came from (not a bulk
        #: Produce), when, and when the last before it from another connection
        #: came (Processor; Request.others_active).
        self.prompt_connection = ""
        self.prompt_ns = self.prompt_other_ns = -SOLE_CONNECTION_NS
        self.sendfile_bytes = 0
        #: Responses whose rest a network thread sent (the socket was full).
        self.network_thread_sends = 0
        #: ... of which a slow reader made the thread hand part back to the loop.
        self.network_thread_handbacks = 0
        #: TLS: handshakes that failed; record bytes written through TLS (no sendfile).
        self.tls_handshake_failures = 0
        self.tls_copied_bytes = 0
        #: SASL: logins that succeeded, failed, and re-authentications (KIP-368).
        self.successful_authentications = 0
        self.failed_authentications = 0
        self.successful_reauthentications = 0
        # loop.sendfile exists (asyncio); uvloop raises NotImplementedError.
        self.loop_sendfile = True
        if metrics is not None:
            self._register_metrics(metrics)

    # ------------------------------------------------------------ start / stop

    async def bind(self) -> dict[str, int]:
        """Bind every listener without accepting yet; listener name → bound port
        (what an advertised port 0 becomes)."""
        ports: dict[str, int] = {}
        try:
            for acceptor in self.acceptors:
                ports[acceptor.spec.name] = await acceptor.bind()
        except BaseException:
            for acceptor in self.acceptors:
                acceptor.stop_accepting()
            raise
        return ports

    async def start_processing(self, handler: RequestHandler | None = None) -> None:
        """Start accepting connections and handing their requests to ``handler``
        (or the one given at construction)."""
        if handler is not None:
            self.channel.handler = handler
        if self.channel.handler is None:
            raise RuntimeError("no request handler")
        if self._parse_header is None:
            self._parse_header = default_header_parser()
        if any(a._server is None for a in self.acceptors):
            await self.bind()
        self.accepting = True
        for acceptor in self.acceptors:
            await acceptor.start_serving()
        self._reaper = asyncio.get_running_loop().create_task(self._reap_idle())

    async def startup(self) -> dict[str, int]:
        """Bind every listener and start serving; listener name → bound port."""
        ports = await self.bind()
        await self.start_processing()
        return ports

    @property
    def bound_ports(self) -> dict[str, int]:
        return {a.spec.name: a.port for a in self.acceptors}

    def update_ssl_context(self, listener: str, context: ssl.SSLContext) -> None:
        """The TLS context new connections of ``listener`` get (dynamic keystores)."""
        for a in self.acceptors:
            if a.spec.name == listener and a.spec.ssl_context is not None:
                a.update_ssl_context(context)

    def update_sasl_config(self, listener: str, sasl: SaslServerConfig) -> None:
        """The SASL settings new connections of ``listener`` get."""
        for a in self.acceptors:
            if a.spec.name == listener and a.spec.sasl is not None:
                a.update_sasl_config(sasl)

    @property
    def max_connections_per_ip(self) -> int:
        return self.connection_quotas.max_connections_per_ip

    @max_connections_per_ip.setter
    def max_connections_per_ip(self, value: int) -> None:
        self.connection_quotas.max_connections_per_ip = value

    def stop_accepting(self) -> None:
        self.accepting = False
        for acceptor in self.acceptors:
            acceptor.stop_accepting()
        for p in list(self.held):
            p.close(abort=True)
        self.held.clear()

    async def shutdown(self, timeout: float = 30.0) -> None:
        """Stop accepting, stop reading, answer what was received, close everything."""
        self.stop_accepting()
        for p in list(self.processors.values()):
            p.stop_reading()
        pending = [p.wait_idle() for p in self.processors.values()]
        if pending:
            done = asyncio.gather(*pending)
            try:
                await asyncio.wait_for(done, timeout)
            except asyncio.TimeoutError:
                left = sum(p.in_flight for p in self.processors.values())
                _log.warning("shutdown: %d requests still in flight after %.1fs; closing",
                             left, timeout)  # fmt: skip
        for p in list(self.processors.values()):
            p.close()
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
            self._reaper = None
        for acceptor in self.acceptors:
            await acceptor.wait_closed()
        # Let the transports deliver their close.
        await asyncio.sleep(0)
        if self.network_executor is not None:
            # A send still running returns within SEND_TIMEOUT.
            self.network_executor.shutdown(wait=False, cancel_futures=True)

    # ------------------------------------------------------------ connections

    def parse_header(self, frame: memoryview) -> RequestHeader:
        assert self._parse_header is not None
        return self._parse_header(frame)

    def api_name(self, api_key: int) -> str:
        name = self._api_names.get(api_key)
        if name is None:
            name = self._api_names[api_key] = api_display_name(api_key)
        return name

    def _next_connection_id(self, acceptor: Acceptor) -> str:
        return f"{acceptor.spec.name}-{acceptor.port}-{next(self._ids)}"

    def admit(self, p: Processor, *, rate_checked: bool = False) -> str | ConnectionHold | None:
        """Whether a new connection is served: None (registered), a refusal
        (close it now) or a ConnectionHold. ``rate_checked``: the connection
        was held for the broker's or its listener's rate already, and is
        not counted in them again."""
        if not self.accepting:
            self.connections_refused += 1
            return "the broker is shutting down"
        if len(self.processors) >= self.max_connections:
            self.connections_refused += 1
            return f"max.connections ({self.max_connections}) reached"
        quotas = self.connection_quotas
        listener = p.acceptor.spec.name
        now = time.monotonic_ns() // 1_000_000
        if not rate_checked:
            delay = quotas.record_connection_and_get_delay_ms(listener, now)
            if delay > 0:
                return ConnectionHold(delay, False, "max.connection.creation.rate")
        ip = normalize_host(p.client_host)
        throttle = quotas.record_ip_connection_and_get_throttle_ms(listener, ip, now)
        if throttle > 0:
            return ConnectionHold(
                throttle,
                True,
                f"connection_creation_rate of {ip} ({quotas.connection_rate_for_ip(ip)}/s) "
                "exceeded",
            )
        full = quotas.listener_full(listener)
        if full is not None:
            self.connections_refused += 1
            return f"listener.name.{listener.lower()}.max.connections ({full}) reached"
        limit = quotas.max_connections_for(ip)
        if quotas.get(ip) >= limit:
            self.connections_refused += 1
            return (
                f"max.connections.per.ip ({limit}) reached"
                if limit == quotas.max_connections_per_ip
                else f"max.connections.per.ip.overrides ({ip}:{limit}) reached"
            )
        self.processors[p.connection_id] = p
        quotas.inc(ip, listener)
        self.connections_total += 1
        return None

    def forget(self, p: Processor) -> None:
        self.held.discard(p)
        if self.processors.pop(p.connection_id, None) is not None:
            self.connection_quotas.dec(normalize_host(p.client_host), p.acceptor.spec.name)

    def tune_socket(self, sock: socket.socket) -> None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.send_buffer_bytes > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.send_buffer_bytes)
            if self.receive_buffer_bytes > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.receive_buffer_bytes)

    async def _reap_idle(self) -> None:
        """Close connections idle longer than ``connections.max.idle.ms``, and
        those whose current request frame, started that long ago, is still not
        whole (a frame trickled in is no less idle for its bytes)."""
        limit_ns = self.connections_max_idle_ms * 1_000_000
        period = min(max(self.connections_max_idle_ms / 4000, 0.01), 30.0)
        while True:
            await asyncio.sleep(period)
            now = time.monotonic_ns()
            for p in list(self.processors.values()):
                if p.frame_started_ns and now - p.frame_started_ns > limit_ns:
                    p.close(
                        f"a request frame still incomplete after "
                        f"{self.connections_max_idle_ms} ms (connections.max.idle.ms)",
                        abort=True,
                    )
                elif not p.in_flight and now - p.last_active_ns > limit_ns:
                    p.close(f"idle for more than {self.connections_max_idle_ms} ms")

    # ------------------------------------------------------------ metrics

    def _register_metrics(self, m: MetricsRegistry) -> None:
        m.gauge(
            "kafka_network_requestchannel_requestqueuesize",
            "Requests waiting for a handler.",
            lambda: self.channel.size,
        )
        m.gauge(
            "kafka_network_socketserver_memorypoolused",
            "Bytes of requests read or being read and not yet answered "
            "(bounded by queued.max.request.bytes).",
            lambda: self.channel.request_bytes,
        )
        m.gauge(
            "kafka_server_socketservermetrics_connection_count",
            "Open client connections, per listener.",
            lambda: [
                ({"listener": a.spec.name}, sum(
                    1 for p in self.processors.values() if p.acceptor is a
                ))
                for a in self.acceptors
            ],
        )  # fmt: skip
        m.gauge(
            "kafka_server_socketservermetrics_connection_creation_total",
            "Connections accepted.",
            lambda: self.connections_total,
            kind="counter",
        )
        m.gauge(
            "kafka_server_socketservermetrics_connection_refused_total",
            "Connections closed on arrival (max.connections, shutting down).",
            lambda: self.connections_refused,
            kind="counter",
        )
        m.gauge(
            "kafka_network_socketserver_ip_connection_throttled_total",
            "Connections closed for their address's connection_creation_rate (KIP-612).",
            lambda: self.connection_quotas.ip_throttled,
            kind="counter",
        )
        m.gauge(
            "kafka_network_socketserver_connection_rate_delayed_total",
            "Connections held for the broker's or a listener's max.connection.creation.rate.",
            lambda: self.connection_quotas.rate_delayed,
            kind="counter",
        )
        m.gauge(
            "kafka_network_socketserver_bad_frames_total",
            "Connections closed for a malformed or oversized frame.",
            lambda: self.bad_frames,
            kind="counter",
        )
        m.gauge(
            "kafka_server_socketservermetrics_incoming_byte_total",
            "Request bytes received (incoming-byte-total).",
            lambda: self.channel.bytes_in,
            kind="counter",
        )
        m.gauge(
            "kafka_server_socketservermetrics_outgoing_byte_total",
            "Response bytes sent (outgoing-byte-total).",
            lambda: self.channel.bytes_out,
            kind="counter",
        )
        for name, doc, read in (
            ("successful_authentication_total", "SASL logins that succeeded.",
             lambda: self.successful_authentications),
            ("failed_authentication_total", "SASL logins that failed (and TLS handshakes "
             "refused a client certificate).", lambda: self.failed_authentications),
            ("successful_reauthentication_total", "SASL re-authentications (KIP-368).",
             lambda: self.successful_reauthentications),
            ("tls_handshake_failures_total", "TLS handshakes that failed.",
             lambda: self.tls_handshake_failures),
        ):  # fmt: skip
            m.gauge(f"kafka_server_socketservermetrics_{name}", doc, read, kind="counter")
        m.gauge(
            "kafka_network_socketserver_tls_copied_bytes_total",
            "Record bytes read from segment files and written through TLS (sendfile "
            "cannot encrypt).",
            lambda: self.tls_copied_bytes,
            kind="counter",
        )
        m.gauge(
            "kafka_network_socketserver_sendfile_bytes_total",
            "Record bytes sent from segment files with sendfile.",
            lambda: self.sendfile_bytes,
            kind="counter",
        )
        m.gauge(
            "kafka_network_socketserver_network_thread_sends_total",
            "Responses whose rest a network thread sent once the socket was full.",
            lambda: self.network_thread_sends,
            kind="counter",
        )
        m.gauge(
            "kafka_network_socketserver_network_thread_handbacks_total",
            "Of those, the ones a slow reader made the thread hand back to the event loop.",
            lambda: self.network_thread_handbacks,
            kind="counter",
        )
