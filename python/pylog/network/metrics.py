"""Broker metrics in Prometheus' text format, and the tiny HTTP endpoint serving them.

Kafka publishes its request metrics over JMX as
``kafka.network:type=RequestMetrics,name=<Name>,request=<Api>``; here the same
names become Prometheus families, one label per API:

* ``kafka_network_requestmetrics_requests_total{request="Produce"}`` —
  RequestsPerSec (a counter: Prometheus derives the rate);
* ``kafka_network_requestmetrics_{requestqueuetimems,localtimems,remotetimems,
  responsequeuetimems,responsesendtimems,totaltimems}`` — histograms in
  milliseconds, same buckets for every API;
* ``kafka_server_kafkaserver_brokerstate`` and the other gauges the broker
  registers (bytes in/out, partition count, connection count, request queue
  size) — each a callable read at scrape time, so nothing is updated on the
  hot path that nobody reads.

No dependency: the format is a few lines of text; the endpoint is the standard
library's ``http.server`` on a thread, held to a deadline per exchange and a
bound on concurrent exchanges (:class:`MetricsServer`).
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import logging
import math
import os
import re
import socket
import socketserver
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = [
    "REQUEST_TIMES",
    "Counter",
    "Histogram",
    "MetricsRegistry",
    "MetricsServer",
    "RequestMetrics",
    "api_display_name",
    "register_process_metrics",
]

_log = logging.getLogger("pylog.network")

# Each read or write of a /metrics exchange (the whole exchange has a deadline).
_IO_TIMEOUT = 5.0

# Bucket bounds (ms): sub-millisecond resolution where the latency goal lives
# (p99 <= 2 ms), then up to the longest Fetch max_wait a client asks for.
BUCKETS_MS: tuple[float, ...] = (
    0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0,
    1000.0, 2500.0, 5000.0, 10000.0, 30000.0,
)  # fmt: skip

# The phases of a request, named as Kafka's RequestMetrics names them
# (kafka.network.RequestMetrics: RequestQueueTimeMs … TotalTimeMs).
REQUEST_TIMES = (
    "RequestQueueTimeMs",
    "LocalTimeMs",
    "RemoteTimeMs",
    "ResponseQueueTimeMs",
    "ResponseSendTimeMs",
    "TotalTimeMs",
)

# The per-API counters: family, help, RequestMetrics attribute.
_REQUEST_COUNTERS = (
    (
        "kafka_network_requestmetrics_requests_total",
        "Requests received, per API (RequestsPerSec).",
        "requests",
    ),
    (
        "kafka_network_requestmetrics_errors_total",
        "Requests that closed their connection, per API.",
        "errors",
    ),
    (
        "kafka_network_requestmetrics_requestbytes_total",
        "Request bytes received, per API.",
        "bytes_in",
    ),
)


def api_display_name(api_key: int) -> str:
    """``Produce``, ``ApiVersions``… (Kafka's request label); ``Api<n>`` if unknown."""
    from pylog.protocol import ApiKey

    try:
        name = ApiKey(api_key).name
    except ValueError:
        return f"Api{api_key}"
    return "".join(part.capitalize() for part in name.split("_"))


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(labels: Iterable[tuple[str, str]]) -> str:
    inner = ",".join(f'{k}="{_escape(v)}"' for k, v in labels)
    return "{" + inner + "}" if inner else ""


def _number(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if float(value).is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(float(value))


@dataclass(slots=True)
class Counter:
    value: float = 0.0

    def inc(self, amount: float = 1.0) -> None:
        self.value += amount


# Kafka's histogram percentiles (Yammer's 50th ... 999th) as the JMX
# exporter's rules label them: quantile="0.<n>".
QUANTILES = (
    ("0.50", 0.50), ("0.75", 0.75), ("0.95", 0.95), ("0.98", 0.98), ("0.99", 0.99),
    ("0.999", 0.999),
)  # fmt: skip
# Kafka's histograms weigh the last five minutes (an exponentially decaying
# reservoir); here the percentiles are over the observations since a snapshot
# of the bucket counts 1 to 5 minutes old.
RECENT_WINDOW_S = 300
SNAPSHOT_EVERY_S = 60


def _bucket_quantile(bounds: tuple[float, ...], counts: list[int], q: float) -> float:
    """The ``q`` quantile of bucketed observations, linear inside its bucket
    (0 below the first bound; the last bound for the overflow bucket)."""
    total = sum(counts)
    if total <= 0:
        return 0.0
    rank = q * total
    seen = 0
    for i, c in enumerate(counts):
        if c and seen + c >= rank:
            if i >= len(bounds):
                return bounds[-1]
            lower = bounds[i - 1] if i else 0.0
            return lower + (bounds[i] - lower) * (rank - seen) / c
        seen += c
    return bounds[-1]


@dataclass(slots=True)
class Histogram:
    """Cumulative-on-render bucket counts plus sum and count (Prometheus histogram)."""

    bounds: tuple[float, ...] = BUCKETS_MS
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    count: int = 0
    #: (monotonic time, counts then), oldest first: the recent window's start
    snapshots: deque[tuple[float, tuple[int, ...]]] = field(default_factory=deque)

    def __post_init__(self) -> None:
        if not self.counts:
            self.counts = [0] * (len(self.bounds) + 1)

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.total += value
        self.count += 1

    def recent_quantiles(self, now: float) -> list[tuple[str, float]]:
        """Kafka's percentiles (:data:`QUANTILES`) of the observations since
        the oldest snapshot kept (1-5 minutes old; all of them until then),
        interpolated inside their bucket as Prometheus' histogram_quantile
        does. A snapshot of the counts is kept every :data:`SNAPSHOT_EVERY_S`
        of scrapes."""
        snaps = self.snapshots
        if not snaps or now - snaps[-1][0] >= SNAPSHOT_EVERY_S:
            snaps.append((now, tuple(self.counts)))
        while len(snaps) > 1 and now - snaps[1][0] >= RECENT_WINDOW_S:
            snaps.popleft()
        base = snaps[0][1] if now - snaps[0][0] >= SNAPSHOT_EVERY_S else None
        window = (
            self.counts if base is None else [c - b for c, b in zip(self.counts, base, strict=True)]
        )
        return [(name, _bucket_quantile(self.bounds, window, q)) for name, q in QUANTILES]

    def quantile(self, q: float) -> float:
        """Upper bound of the bucket holding the ``q`` quantile (inf past the last)."""
        if self.count == 0:
            return 0.0
        rank = q * self.count
        seen = 0
        for i, c in enumerate(self.counts):
            seen += c
            if seen >= rank:
                return self.bounds[i] if i < len(self.bounds) else math.inf
        return math.inf


class RequestMetrics:
    """The RequestMetrics of one API: a request counter and one histogram per phase."""

    __slots__ = ("bytes_in", "errors", "name", "requests", "times")

    def __init__(self, name: str) -> None:
        self.name = name
        self.requests = Counter()
        self.errors = Counter()
        self.bytes_in = Counter()
        self.times: dict[str, Histogram] = {t: Histogram() for t in REQUEST_TIMES}

    def record(
        self,
        *,
        queue_ms: float,
        local_ms: float,
        remote_ms: float,
        response_queue_ms: float,
        send_ms: float,
        total_ms: float,
    ) -> None:
        t = self.times
        self.requests.inc()
        t["RequestQueueTimeMs"].observe(queue_ms)
        t["LocalTimeMs"].observe(local_ms)
        t["RemoteTimeMs"].observe(remote_ms)
        t["ResponseQueueTimeMs"].observe(response_queue_ms)
        t["ResponseSendTimeMs"].observe(send_ms)
        t["TotalTimeMs"].observe(total_ms)


_NAME_OK = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")


@dataclass(slots=True)
class _Gauge:
    name: str
    help: str
    read: Callable[[], float | str | Iterable[tuple[dict[str, str], float]]]
    kind: str = "gauge"


class MetricsRegistry:
    """Everything ``/metrics`` shows: per-API request metrics and named gauges."""

    def __init__(self) -> None:
        self._requests: dict[str, RequestMetrics] = {}
        self._gauges: dict[str, _Gauge] = {}

    def request(self, api_name: str) -> RequestMetrics:
        m = self._requests.get(api_name)
        if m is None:
            m = self._requests[api_name] = RequestMetrics(api_name)
        return m

    def requests(self) -> dict[str, RequestMetrics]:
        return dict(self._requests)

    def gauge(
        self,
        name: str,
        help: str,
        read: Callable[[], float | str | Iterable[tuple[dict[str, str], float]]],
        *,
        kind: str = "gauge",
    ) -> None:
        """Register (or replace) a value read at scrape time: a number,
        ``(labels, value)`` pairs, or the family's sample lines already
        rendered (a large family rendered once, not per scrape). ``kind``
        "counter" for monotonic totals."""
        if not _NAME_OK.match(name):
            raise ValueError(f"invalid metric name {name!r}")
        self._gauges[name] = _Gauge(name, help, read, kind)

    def render(self) -> str:
        out: list[str] = []
        reqs = sorted(self._requests.values(), key=lambda m: m.name)
        for fam, doc, counter in _REQUEST_COUNTERS:
            out.append(f"# HELP {fam} {doc}")
            out.append(f"# TYPE {fam} counter")
            for m in reqs:
                value = getattr(m, counter).value
                out.append(f"{fam}{_labels([('request', m.name)])} {_number(value)}")
        now = time.monotonic()
        for phase in REQUEST_TIMES:
            # The JMX exporter's form of Kafka's Yammer histogram: percentiles
            # as ``quantile`` samples and a ``_count`` (plus ``_sum``).
            fam = f"kafka_network_requestmetrics_{phase.lower()}"
            out.append(
                f"# HELP {fam} {phase} of requests, per API, in milliseconds: percentiles "
                f"of the last {RECENT_WINDOW_S // 60} minutes or so (Kafka's are decaying)."
            )
            out.append(f"# TYPE {fam} summary")
            for m in reqs:
                h = m.times[phase]
                lab = [("request", m.name)]
                for q, value in h.recent_quantiles(now):
                    out.append(f"{fam}{_labels([*lab, ('quantile', q)])} {_number(value)}")
                out.append(f"{fam}_sum{_labels(lab)} {_number(h.total)}")
                out.append(f"{fam}_count{_labels(lab)} {h.count}")
        for phase in REQUEST_TIMES:
            # The same observations in buckets, for histogram_quantile() over
            # any window and any set of brokers.
            fam = f"pylog_network_requestmetrics_{phase.lower()}"
            out.append(f"# HELP {fam} {phase} of requests, per API, in milliseconds.")
            out.append(f"# TYPE {fam} histogram")
            for m in reqs:
                h = m.times[phase]
                cumulative = 0
                for bound, c in zip((*h.bounds, math.inf), h.counts, strict=True):
                    cumulative += c
                    labels = _labels([("request", m.name), ("le", _number(bound))])
                    out.append(f"{fam}_bucket{labels} {cumulative}")
                lab_text = _labels([("request", m.name)])
                out.append(f"{fam}_sum{lab_text} {_number(h.total)}")
                out.append(f"{fam}_count{lab_text} {h.count}")
        for g in sorted(self._gauges.values(), key=lambda g: g.name):
            try:
                value = g.read()
            except Exception:
                _log.exception("metric %s could not be read", g.name)
                continue
            out.append(f"# HELP {g.name} {g.help}")
            out.append(f"# TYPE {g.name} {g.kind}")
            if isinstance(value, (int, float)):
                out.append(f"{g.name} {_number(value)}")
            elif isinstance(value, str):  # sample lines its owner rendered already
                if value:
                    out.append(value)
            else:
                for label_map, v in value:
                    out.append(f"{g.name}{_labels(sorted(label_map.items()))} {_number(v)}")
        return "\n".join(out) + "\n"


def register_process_metrics(registry: MetricsRegistry) -> None:
    """The process' CPU, memory and descriptors under the names every
    Prometheus client (and the JMX exporter's agent) gives them, and the
    event loop's idle share under Kafka's handler and processor idle names.

    The loop is pylog's request handler pool and network processors in one
    thread: it is idle while its thread is off the CPU (waiting in select, or
    blocked in a system call). Read on the loop's thread (``/metrics`` is
    rendered there), ``time.thread_time()`` is that thread's CPU time.
    ``..._requesthandleravgidle_percent`` is the share since start (the
    JMX exporter reads Kafka's meter's MeanRate), ``..._count`` the idle
    nanoseconds (the meter's Count): ``rate(..._count[1m]) / 1e9`` is the
    recent share."""
    start_wall = time.monotonic()
    start_cpu = time.thread_time()
    started = time.time()

    def idle_ns() -> float:
        busy = time.thread_time() - start_cpu
        return max(0.0, (time.monotonic() - start_wall - busy) * 1e9)

    def idle_share() -> float:
        wall = time.monotonic() - start_wall
        return min(1.0, idle_ns() / 1e9 / wall) if wall > 0 else 1.0

    def resident() -> float:
        with open("/proc/self/statm") as f:
            return float(int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE"))

    for name, doc, read, kind in (
        ("process_cpu_seconds_total", "CPU seconds of the broker process, user and system.",
         time.process_time, "counter"),
        ("process_resident_memory_bytes", "Resident memory of the broker process.",
         resident, "gauge"),
        ("process_open_fds", "Open file descriptors of the broker process.",
         lambda: float(len(os.listdir("/proc/self/fd"))), "gauge"),
        ("process_start_time_seconds", "When the broker process' metrics began (Unix time).",
         lambda: started, "gauge"),
        ("kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent",
         "Share of time (0-1) the event loop, which handles requests, was idle since start.",
         idle_share, "gauge"),
        ("kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent_count",
         "Nanoseconds the event loop was idle (rate / 1e9: the idle share).", idle_ns, "counter"),
        ("kafka_network_socketserver_networkprocessoravgidlepercent",
         "Share of time (0-1) the event loop, which also reads and writes the sockets, was idle.",
         idle_share, "gauge"),
    ):  # fmt: skip
        registry.gauge(name, doc, read, kind=kind)


class _MetricsHandler(BaseHTTPRequestHandler):
    """``GET``/``HEAD`` of ``/metrics`` (or ``/``); anything else a 404.

    ``BaseHTTPRequestHandler`` refuses a request line over 64 KiB (414), a
    header line over 64 KiB or more than 100 headers (431); ``timeout`` bounds
    each read and write, and the server's watchdog the whole exchange."""

    server: _MetricsHTTPServer
    timeout = _IO_TIMEOUT
    server_version = "pylog-metrics"
    sys_version = ""

    def setup(self) -> None:
        super().setup()
        self._watchdog = threading.Timer(self.server.deadline, self._expire)
        self._watchdog.daemon = True
        self._watchdog.start()

    def _expire(self) -> None:
        # Unblocks a read or write in progress; the handler then ends.
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def finish(self) -> None:
        self._watchdog.cancel()
        with contextlib.suppress(OSError):
            super().finish()

    def do_GET(self) -> None:
        self._answer(head=False)

    def do_HEAD(self) -> None:
        self._answer(head=True)

    def _answer(self, *, head: bool) -> None:
        if self.path.split("?", 1)[0] not in ("/metrics", "/"):
            self._send(404, "text/plain", b"not found\n", head)
            return
        try:
            body = self.server.render()
        except Exception:
            _log.warning("metrics could not be rendered", exc_info=True)
            self._send(503, "text/plain", b"unavailable\n", head)
            return
        self._send(200, "text/plain; version=0.0.4; charset=utf-8", body, head)

    def _send(self, status: int, ctype: str, body: bytes, head: bool) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        _log.debug("metrics endpoint %s: %s", self.client_address[0], format % args)


class _MetricsHTTPServer(ThreadingHTTPServer):
    """The stdlib threading server, bounded: at most ``max_connections``
    exchanges at once (more are closed on arrival), none longer than
    ``deadline`` seconds."""

    daemon_threads = True
    block_on_close = False

    def __init__(
        self,
        address: tuple[str, int],
        family: socket.AddressFamily,
        render: Callable[[], bytes],
        *,
        deadline: float,
        max_connections: int,
    ) -> None:
        self.address_family = family
        self.render = render
        self.deadline = deadline
        self.max_connections = max_connections
        self._active = 0
        self._lock = threading.Lock()
        super().__init__(address, _MetricsHandler)

    def server_bind(self) -> None:
        # HTTPServer's own also looks the bound address up in DNS (getfqdn),
        # which can block start-up; the name is only used in CGI variables.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name, self.server_port = str(host), int(port)

    def process_request(
        self, request: socket.socket | tuple[bytes, socket.socket], client_address: object
    ) -> None:
        with self._lock:
            admitted = self._active < self.max_connections
            if admitted:
                self._active += 1
        if not admitted:
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            with self._lock:
                self._active -= 1
            raise

    def process_request_thread(
        self, request: socket.socket | tuple[bytes, socket.socket], client_address: object
    ) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._lock:
                self._active -= 1


class MetricsServer:
    """``GET /metrics`` on ``host:port``; anything else is a 404.

    Served by the standard library's ``http.server`` (ThreadingHTTPServer) on
    threads of its own, so HTTP parsing and its limits are CPython's, and a
    slow or hostile scraper never runs on the broker's event loop. Each
    exchange has ``deadline`` seconds in all (a request dribbled a header line
    at a time is cut off), at most ``max_connections`` run at once. The text is
    rendered on the event loop (the registry's gauges read loop-owned state)."""

    def __init__(
        self,
        registry: MetricsRegistry,
        host: str | None,
        port: int,
        *,
        deadline: float = 10.0,
        max_connections: int = 16,
    ) -> None:
        self.registry = registry
        self.host = host
        self.port = port
        self.deadline = deadline
        self.max_connections = max_connections
        self._server: _MetricsHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def start(self) -> int:
        self._loop = asyncio.get_running_loop()
        infos = await self._loop.getaddrinfo(
            self.host, self.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
        family, _, _, _, address = infos[0]
        self._server = _MetricsHTTPServer(
            (str(address[0]), self.port),
            family,
            self._render_from_thread,
            deadline=self.deadline,
            max_connections=self.max_connections,
        )
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.25},
            name="pylog-metrics-http",
            daemon=True,
        )
        self._thread.start()
        return self.port

    async def _render(self) -> bytes:
        return self.registry.render().encode()

    def _render_from_thread(self) -> bytes:
        loop = self._loop
        if loop is None or loop.is_closed():
            raise RuntimeError("the broker's event loop is gone")
        future = asyncio.run_coroutine_threadsafe(self._render(), loop)
        try:
            return future.result(timeout=self.deadline)
        finally:
            future.cancel()

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            await asyncio.to_thread(server.shutdown)
            server.server_close()
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, 5)
            self._thread = None
