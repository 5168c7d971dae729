"""RequestChannel: between the processors that read requests and the handlers that answer.

In Kafka (``kafka.network.RequestChannel``) processors put every parsed request into one bounded
queue (``queued.max.requests``) and ``num.io.threads`` handler threads take them
out; a full queue blocks the processors, so sockets stop being read — that is
the broker's back-pressure. Each connection is muted while one of its requests
is being handled, so a connection's requests are handled in order.

Here the same contract on one event loop:

* a :class:`Request` enters the channel when its last byte arrives
  (:meth:`RequestChannel.send_request`) and leaves when a handler takes it
  (:meth:`RequestChannel.receive`) — that interval is RequestQueueTimeMs;
* at most ``queued.max.requests`` requests are in the channel; at that size
  every processor stops reading (``pause_reading``) until it drains below;
* ``queued.max.request.bytes`` (Kafka's key; -1, the default, is unbounded)
  bounds the bytes of requests read or being read and not yet answered, from
  the buffer a frame's first bytes go into until its response is written:
  while they are at the bound, no connection starts a new frame or grows the
  buffer of one it is reading (:meth:`RequestChannel.take_bytes`,
  :meth:`RequestChannel.give_bytes`). Unlike ``queued.max.requests`` this also
  counts requests a handler has taken and is still answering (a large append
  waiting for the append threads, an acks=all Produce in the purgatory);
* a connection's requests are handled one after another, but only their *local*
  part is serialised: a handler about to wait on something outside the request
  (the purgatory: acks=all, a Fetch's max_wait) calls
  :meth:`Request.mark_local_complete`, and the connection's next request starts
  while the response is still pending. Responses are still written in request
  order. Appends from one connection therefore keep their order (idempotent
  sequences stay in sequence) while long polls do not stall a pipeline.

Timestamps on the request give Kafka's RequestMetrics phases:
received → dequeued (queue) → local complete (local) → response ready (remote)
→ send started (response queue) → sent (send); total = sent - received.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, TypeAlias

from pylog.errors import CloseConnection
from pylog.protocol import RequestHeader
from pylog.security.kafka_principal import ANONYMOUS, KafkaPrincipal

if TYPE_CHECKING:
    from pylog.network.metrics import MetricsRegistry
    from pylog.records import FileRecords

__all__ = [
    "Chunk",
    "Request",
    "RequestChannel",
    "RequestHandler",
    "Response",
]

_log = logging.getLogger("pylog.network")
# One line per answered request at DEBUG (Kafka's kafka.request.logger):
# who asked what, on which listener, and how long it took.
_request_log = logging.getLogger("pylog.request")

_FETCH = 1  # ApiKey.FETCH

Chunk: TypeAlias = "bytes | bytearray | memoryview | FileRecords"

# How long after another connection's prompt request (anything but a bulk
# Produce) a request counts as having others about (Request.others_active).
# Long enough to span a client's linger and a consumer's turn around; a
# follower's or a consumer's long poll keeps a connection active through it.
SOLE_CONNECTION_NS = 100_000_000
# A Produce frame this large is bulk: its sender waits on its own 1-3 ms
# append, so one more behind another producer's append costs it little (the
# ReplicaManager's default append_offload_bytes).
BULK_PRODUCE_BYTES = 128 * 1024


@dataclass(slots=True, eq=False)
class Request:
    """One request as the handlers see it (docs/internals/request-path.md)."""

    header: RequestHeader
    frame: memoryview  # the whole request after the size prefix
    connection_id: str
    client_host: str
    listener: str
    received_ns: int  # time.monotonic_ns() when the last byte arrived
    client_port: int = 0
    security_protocol: str = "PLAINTEXT"
    api_name: str = ""
    #: Who sent it (Kafka's RequestContext.principal): User:ANONYMOUS unless the
    #: connection authenticated (SASL, or a TLS client certificate).
    principal: KafkaPrincipal = ANONYMOUS
    #: Close the connection once this request's response is written (a failed
    #: authentication: the answer goes out, then the connection closes).
    close_after_response: bool = False
    #: A client quota was exceeded: after the response (or, with none, after
    #: handling) the connection is not read for this long (KIP-219's muting).
    throttle_ms: int = 0
    #: Not subject to client quotas (a follower's Fetch: Kafka exempts replication).
    quota_exempt: bool = False
    #: Another connection sent a prompt request (not a bulk Produce) within
    #: SOLE_CONNECTION_NS before this one (set by the Processor): a long append
    #: on the event loop would make such requests wait, so large appends go to
    #: a worker thread; with only producers about, they run inline.
    others_active: bool = True
    dequeued_ns: int = 0
    local_complete_ns: int = 0
    response_ready_ns: int = 0
    _on_local_complete: Callable[[], None] | None = field(default=None, repr=False)

    @property
    def size(self) -> int:
        return len(self.frame)

    def mark_local_complete(self) -> None:
        """The handler is done with its own work and will now wait on something
        else (the purgatory). Ends LocalTimeMs, and lets this connection's next
        request start. Idempotent; implied when ``handle`` returns."""
        if self.local_complete_ns:
            return
        self.local_complete_ns = time.monotonic_ns()
        callback, self._on_local_complete = self._on_local_complete, None
        if callback is not None:
            callback()


class RequestHandler(Protocol):
    async def handle(self, request: Request) -> list[Chunk] | None:
        """The response frame's chunks, or None for no response (acks=0 Produce).

        Raising CloseConnection closes the connection (malformed or unsupported
        request); any other exception is a bug: logged, the connection closed,
        other clients unaffected."""
        ...


@dataclass(slots=True, eq=False)
class Response:
    """A request's place in its connection's response order."""

    request: Request
    chunks: list[Chunk] | None = None
    close: bool = False  # close the connection when this response's turn comes
    done: bool = False
    size: int = 0


def _chunk_size(chunk: Chunk) -> int:
    if isinstance(chunk, memoryview):
        return chunk.nbytes
    return len(chunk)


def _wake(waiters: list[Callable[[], None]]) -> None:
    for resume in waiters:
        try:
            resume()
        except Exception:  # a closed transport; nothing to resume
            _log.debug("resume after back-pressure failed", exc_info=True)


class RequestChannel:
    """The bounded set of requests received and not yet taken by a handler."""

    def __init__(
        self,
        handler: RequestHandler | None,
        queue_size: int,
        metrics: MetricsRegistry | None = None,
        max_request_bytes: int = -1,
    ) -> None:
        if queue_size < 1:
            raise ValueError("queued.max.requests must be at least 1")
        self.handler = handler
        self.queue_size = queue_size
        self.metrics = metrics
        self._size = 0
        self._waiters: list[Callable[[], None]] = []
        # queued.max.request.bytes: <= 0 is unbounded, as in Kafka.
        self.max_request_bytes = max_request_bytes
        self.request_bytes = 0
        self._byte_waiters: list[Callable[[], None]] = []
        self.requests_total = 0
        self.bytes_in = 0
        self.bytes_out = 0

    # -- the bound

    @property
    def size(self) -> int:
        """Requests waiting for a handler (Kafka's RequestQueueSize)."""
        return self._size

    @property
    def is_full(self) -> bool:
        return self._size >= self.queue_size

    def send_request(self, request: Request) -> bool:
        """A processor hands over a request; returns False when the channel is now
        full and the caller must stop reading (see :meth:`when_not_full`)."""
        self._size += 1
        self.requests_total += 1
        self.bytes_in += len(request.frame) + 4
        return self._size < self.queue_size

    def when_not_full(self, resume: Callable[[], None]) -> None:
        """Call ``resume`` once the channel has room again."""
        if not self.is_full:
            resume()
        else:
            self._waiters.append(resume)

    def receive(self, request: Request) -> None:
        """A handler takes ``request`` out of the channel."""
        request.dequeued_ns = time.monotonic_ns()
        self.forget(request)

    def forget(self, request: Request) -> None:
        """``request`` leaves the channel without being handled (connection gone)."""
        self._size -= 1
        if self._waiters and not self.is_full:
            waiters, self._waiters = self._waiters, []
            _wake(waiters)

    # -- the byte bound (queued.max.request.bytes)

    @property
    def bytes_exhausted(self) -> bool:
        """No new frame may start and no frame buffer may grow."""
        return 0 < self.max_request_bytes <= self.request_bytes

    def take_bytes(self, n: int) -> None:
        """A processor now holds ``n`` more bytes of requests (checked
        :attr:`bytes_exhausted` first; a holder may pass the bound by one step)."""
        self.request_bytes += n

    def give_bytes(self, n: int) -> None:
        """``n`` bytes held are answered (or dropped with their connection)."""
        self.request_bytes -= n
        if self._byte_waiters and not self.bytes_exhausted:
            waiters, self._byte_waiters = self._byte_waiters, []
            _wake(waiters)

    def when_bytes_available(self, resume: Callable[[], None]) -> None:
        """Call ``resume`` once :attr:`bytes_exhausted` is over."""
        if not self.bytes_exhausted:
            resume()
        else:
            self._byte_waiters.append(resume)

    # -- handling

    async def handle(
        self, request: Request, response: Response, handler: RequestHandler | None = None
    ) -> None:
        """Run the handler for ``request`` (``handler``, else the channel's)
        and fill ``response`` (never raises)."""
        try:
            handler = handler or self.handler
            if handler is None:
                raise CloseConnection("the broker is not serving requests yet")
            chunks = await handler.handle(request)
        except CloseConnection as e:
            _log.info(
                "closing connection %s: %s (api %s v%s, correlation id %s)",
                request.connection_id,
                e or "request refused",
                request.header.api_key,
                request.header.api_version,
                request.header.correlation_id,
            )
            response.close = True
            chunks = None
        except asyncio.CancelledError:
            response.close = True
            chunks = None
        except Exception:
            _log.exception(
                "closing connection %s: handling api %s v%s (correlation id %s) failed",
                request.connection_id,
                request.header.api_key,
                request.header.api_version,
                request.header.correlation_id,
            )
            response.close = True
            chunks = None
        finally:
            request.mark_local_complete()
        response.chunks = chunks
        if chunks:
            response.size = sum(_chunk_size(c) for c in chunks)
        request.response_ready_ns = time.monotonic_ns()
        response.done = True

    def record_sent(self, response: Response, send_start_ns: int, sent_ns: int) -> None:
        """Metrics for a response written (or dropped, or never due)."""
        self.bytes_out += response.size
        r = response.request
        if _request_log.isEnabledFor(logging.DEBUG):
            _request_log.debug(
                "Completed request %s v%d correlation id %d from %s:%d (connection %s, "
                "listener %s) principal %s: %d bytes in, %d out, %.2f ms",
                r.api_name or r.header.api_key,
                r.header.api_version,
                r.header.correlation_id,
                r.client_host,
                r.client_port,
                r.connection_id,
                r.listener,
                r.principal,
                len(r.frame) + 4,
                response.size,
                (sent_ns - r.received_ns) / 1e6,
            )
        if self.metrics is None:
            return
        names = [r.api_name or f"Api{r.header.api_key}"]
        if r.header.api_key == _FETCH:
            # Kafka's RequestChannel also counts a Fetch as FetchFollower
            # (a replica's: the handler marks it quota-exempt) or FetchConsumer.
            names.append("FetchFollower" if r.quota_exempt else "FetchConsumer")
        dequeued = r.dequeued_ns or r.received_ns
        local = r.local_complete_ns or dequeued
        ready = r.response_ready_ns or local
        for name in names:
            m = self.metrics.request(name)
            m.bytes_in.inc(len(r.frame) + 4)
            if response.close:
                m.errors.inc()
            m.record(
                queue_ms=(dequeued - r.received_ns) / 1e6,
                local_ms=(local - dequeued) / 1e6,
                remote_ms=(ready - local) / 1e6,
                response_queue_ms=max(0, send_start_ns - ready) / 1e6,
                send_ms=max(0, sent_ns - send_start_ns) / 1e6,
                total_ms=(sent_ns - r.received_ns) / 1e6,
            )
