"""SocketServer: the broker's listeners, their connections and the bytes on them.

Kafka's SocketServer (seed 004 §2) runs an Acceptor thread per listener that
hands new sockets round-robin to ``num.network.threads`` Processor threads,
each multiplexing its connections with a selector. On asyncio the event loop
is the selector, so the same roles become:

* :class:`Acceptor` — one per listener: the listening socket and the accept
  callback (asyncio's protocol factory), which enforces ``max.connections`` and
  ``max.connections.per.ip`` and tunes the new socket;
* :class:`Processor` — one per connection, an ``asyncio.BufferedProtocol``:
  reads straight into its receive buffer (large frames into a buffer of their
  own size, so a 1 MiB Produce is copied once, by the kernel), splits 4-byte
  size-prefixed frames, parses the request header, hands requests to the
  :class:`~pylog.network.request_channel.RequestChannel`, and writes responses
  in request order — ``writelines`` for bytes, ``os.sendfile`` for
  :class:`~pylog.records.FileRecords` (segment bytes never enter Python).

A bad frame (negative or larger than ``socket.request.max.bytes``, an
unparsable header) closes that connection with one log line; nothing a client
sends can stop the others being served.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import itertools
import logging
import os
import socket
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import IO, Any, cast

from pylog.errors import KafkaError
from pylog.network.metrics import MetricsRegistry, api_display_name
from pylog.network.request_channel import (
    Chunk,
    Request,
    RequestChannel,
    RequestHandler,
    Response,
)
from pylog.protocol import RequestHeader, parse_request_header
from pylog.records import FileRecords

__all__ = ["Acceptor", "ListenerSpec", "Processor", "SocketServer", "default_header_parser"]

_log = logging.getLogger("pylog.network")

HeaderParser = Callable[[memoryview], RequestHeader]

RECEIVE_BUFFER = 64 * 1024
# Frames at least this large get a buffer of their own (filled by recv_into).
LARGE_FRAME = 16 * 1024
# FileRecords below this size are read and written like bytes: one pread beats
# the event-loop round trips of a sendfile that has to wait for the socket.
SENDFILE_MIN = 4096
WRITE_HIGH_WATER = 4 * 1024 * 1024


def default_header_parser() -> HeaderParser:
    """``pylog.protocol.parse_request_header``."""
    return parse_request_header


@dataclass(frozen=True, slots=True)
class ListenerSpec:
    """What to bind: listener name, host ("" or None = every interface), port (0 = any)."""

    name: str
    host: str | None
    port: int
    security_protocol: str = "PLAINTEXT"


def _as_bytes(chunks: list[Chunk]) -> list[bytes | bytearray | memoryview]:
    return [c.read_bytes() if isinstance(c, FileRecords) else c for c in chunks]


class _FileView:
    """The file object ``loop.sendfile`` wants, over a FileRecords' descriptor
    (its fallback path — uvloop — reads through ``readinto``)."""

    __slots__ = ("_fd", "_pos")

    def __init__(self, fd: int, position: int) -> None:
        self._fd = fd
        self._pos = position

    def fileno(self) -> int:
        return self._fd

    def seek(self, offset: int, whence: int = 0) -> int:
        self._pos = offset if whence == 0 else self._pos + offset
        return self._pos

    def tell(self) -> int:
        return self._pos

    def readinto(self, buf: Any) -> int:
        view = memoryview(buf)
        n = os.preadv(self._fd, [view], self._pos)
        self._pos += n
        return n


class Processor(asyncio.BufferedProtocol):
    """One connection: framing, request hand-off, in-order responses."""

    def __init__(self, server: SocketServer, acceptor: Acceptor, connection_id: str) -> None:
        self.server = server
        self.acceptor = acceptor
        self.channel = server.channel
        self.connection_id = connection_id
        self.transport: asyncio.Transport | None = None
        self.client_host = ""
        self.client_port = 0
        self._buf = bytearray(RECEIVE_BUFFER)
        self._start = 0
        self._end = 0
        self._large: bytearray | None = None
        self._large_filled = 0
        self._pending: deque[Request] = deque()  # in the channel, not yet handled
        self._responses: deque[Response] = deque()  # handled or in handling, in order
        self._wakeup: asyncio.Event = asyncio.Event()
        self._handler_task: asyncio.Task[None] | None = None
        self._writer_task: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._write_paused = False
        self._write_resumed: asyncio.Event = asyncio.Event()
        self._write_resumed.set()
        self._reading_paused_for: set[str] = set()
        self._closing = False
        self._idle_event: asyncio.Event = asyncio.Event()
        self._idle_event.set()
        self.last_active_ns = time.monotonic_ns()
        self.bytes_in = 0
        self.bytes_out = 0

    # ------------------------------------------------------------ lifecycle

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, only alike.
        transport = cast(asyncio.Transport, transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple) and len(peer) >= 2:
            self.client_host, self.client_port = str(peer[0]), int(peer[1])
        refusal = self.server._admit(self)
        if refusal is not None:
            _log.warning("closing connection from %s:%s: %s", *peer[:2], refusal)
            self._closing = True
            transport.abort()
            return
        sock = transport.get_extra_info("socket")
        if sock is not None:
            self.server._tune_socket(sock)
        transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)
        self._handler_task = asyncio.get_running_loop().create_task(self._handle_loop())

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        self.server._forget(self)
        for request in self._pending:
            self.channel.forget(request)
        self._pending.clear()
        self._responses.clear()
        self._idle_event.set()
        self._write_resumed.set()
        if self._handler_task is not None:
            self._handler_task.cancel()
        if self._writer_task is not None:
            self._writer_task.cancel()

    def close(self, reason: str | None = None, *, abort: bool = False) -> None:
        """Close the connection (buffered writes flushed unless ``abort``)."""
        if reason:
            _log.info("closing connection %s (%s:%s): %s", self.connection_id,
                      self.client_host, self.client_port, reason)  # fmt: skip
        self._closing = True
        if self.transport is not None and not self.transport.is_closing():
            if abort:
                self.transport.abort()
            else:
                self.transport.close()

    @property
    def in_flight(self) -> int:
        """Requests received and not yet answered."""
        return len(self._pending) + len(self._responses)

    def _pause_reading(self, why: str) -> None:
        if not self._reading_paused_for and self.transport is not None:
            self.transport.pause_reading()
        self._reading_paused_for.add(why)

    def _resume_reading(self, why: str) -> None:
        self._reading_paused_for.discard(why)
        if (
            not self._reading_paused_for
            and self.transport is not None
            and not self.transport.is_closing()
        ):
            self.transport.resume_reading()

    def stop_reading(self) -> None:
        """Shutdown: read no more requests from this connection."""
        self._pause_reading("shutdown")

    async def wait_idle(self) -> None:
        """Until every request received so far is answered."""
        while self.in_flight and not self._closing:
            self._idle_event.clear()
            await self._idle_event.wait()

    # ------------------------------------------------------------ reading

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._large is not None:
            return memoryview(self._large)[self._large_filled :]
        if self._end == len(self._buf):
            # Unparsed bytes of a small frame at the end: move them to the front.
            remaining = self._end - self._start
            self._buf[:remaining] = self._buf[self._start : self._end]
            self._start, self._end = 0, remaining
        return memoryview(self._buf)[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        self.last_active_ns = now = time.monotonic_ns()
        self.bytes_in += nbytes
        if self._large is not None:
            self._large_filled += nbytes
            if self._large_filled == len(self._large):
                frame, self._large = self._large, None
                self._frame_received(memoryview(frame), now)
            return
        self._end += nbytes
        self._split_frames(now)

    def _split_frames(self, now: int) -> None:
        buf = self._buf
        limit = self.server.max_request_size
        # Once the channel is full, frames already read stay in the buffer too.
        while not self._closing and "queue" not in self._reading_paused_for:
            available = self._end - self._start
            if available < 4:
                break
            size = int.from_bytes(buf[self._start : self._start + 4], "big", signed=True)
            if size < 0 or size > limit:
                self.server.bad_frames += 1
                self.close(
                    f"frame size {size} outside 0..{limit} (socket.request.max.bytes)",
                    abort=True,
                )
                return
            if available - 4 >= size:
                begin = self._start + 4
                frame = bytes(buf[begin : begin + size])
                self._start = begin + size
                self._frame_received(memoryview(frame), now)
                continue
            if size >= LARGE_FRAME or size > len(buf) - 4:
                large = bytearray(size)
                have = available - 4
                large[:have] = buf[self._start + 4 : self._end]
                self._large, self._large_filled = large, have
                self._start = self._end = 0
                return
            break
        if self._start == self._end:
            self._start = self._end = 0

    def _frame_received(self, frame: memoryview, now: int) -> None:
        if self._closing:
            return
        try:
            header = self.server.parse_header(frame)
        except (KafkaError, ValueError, IndexError, UnicodeDecodeError) as e:
            self.server.bad_frames += 1
            self.close(f"unparsable request header ({len(frame)} byte frame): {e}", abort=True)
            return
        except Exception:
            self.server.bad_frames += 1
            _log.exception("closing connection %s: parsing a request header failed",
                           self.connection_id)  # fmt: skip
            self.close(abort=True)
            return
        request = Request(
            header=header,
            frame=frame,
            connection_id=self.connection_id,
            client_host=self.client_host,
            listener=self.acceptor.spec.name,
            received_ns=now,
            client_port=self.client_port,
            security_protocol=self.acceptor.spec.security_protocol,
            api_name=self.server.api_name(header.api_key),
        )
        self._pending.append(request)
        self._wakeup.set()
        if not self.channel.send_request(request):
            self._pause_reading("queue")
            self.channel.when_not_full(self._channel_has_room)

    def _channel_has_room(self) -> None:
        asyncio.get_running_loop().call_soon(self._continue_after_back_pressure)

    def _continue_after_back_pressure(self) -> None:
        if self._closing:
            return
        self._reading_paused_for.discard("queue")
        self._split_frames(time.monotonic_ns())  # the frames already buffered first
        if "queue" not in self._reading_paused_for:
            self._reading_paused_for.add("queue")
            self._resume_reading("queue")

    def eof_received(self) -> bool | None:
        # The client half-closed: answer what it sent (a partial frame never
        # completes), then close.
        self._large = None
        if self.in_flight:
            self._pause_reading("eof")
            return True
        return None

    # ------------------------------------------------------------ handling

    async def _handle_loop(self) -> None:
        loop = asyncio.get_running_loop()
        channel = self.channel
        try:
            while True:
                while not self._pending:
                    self._wakeup.clear()
                    await self._wakeup.wait()
                request = self._pending.popleft()
                channel.receive(request)
                response = Response(request)
                self._responses.append(response)
                local_done = loop.create_future()

                def finish_local(f: asyncio.Future[None] = local_done) -> None:
                    if not f.done():
                        f.set_result(None)

                request._on_local_complete = finish_local
                task = loop.create_task(self._run(request, response))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
                await local_done
        except asyncio.CancelledError:
            pass

    async def _run(self, request: Request, response: Response) -> None:
        await self.channel.handle(request, response)
        self._send_responses()

    # ------------------------------------------------------------ writing

    def _send_responses(self) -> None:
        """Write every response at the head of the order that is ready."""
        if self._writer_task is not None or self._closing:
            return
        transport = self.transport
        if transport is None:
            return
        while self._responses and self._responses[0].done:
            if self._write_paused:
                self._writer_task = asyncio.get_running_loop().create_task(self._write_async())
                return
            response = self._responses[0]
            if response.close:
                self._finish(response, time.monotonic_ns())
                self.close()
                return
            chunks = response.chunks
            if chunks and any(
                isinstance(c, FileRecords) and c.size >= SENDFILE_MIN for c in chunks
            ):
                self._writer_task = asyncio.get_running_loop().create_task(self._write_async())
                return
            start = time.monotonic_ns()
            if chunks:
                transport.writelines(_as_bytes(chunks))
            self._finish(response, start)
        self._maybe_idle()

    def _finish(self, response: Response, send_start_ns: int) -> None:
        self._responses.popleft()
        self.bytes_out += response.size
        self.last_active_ns = sent = time.monotonic_ns()
        self.channel.record_sent(response, send_start_ns, sent)

    def _maybe_idle(self) -> None:
        if not self.in_flight:
            self._idle_event.set()
            if "eof" in self._reading_paused_for:
                self.close()

    async def _write_async(self) -> None:
        """The slow path: waits for the socket (flow control) and sendfiles."""
        transport = self.transport
        assert transport is not None
        loop = asyncio.get_running_loop()
        try:
            while self._responses and self._responses[0].done and not self._closing:
                await self._write_resumed.wait()
                if self._closing:
                    return
                response = self._responses[0]
                start = time.monotonic_ns()
                if response.close:
                    self._finish(response, start)
                    self.close()
                    return
                pending: list[bytes | bytearray | memoryview] = []
                for chunk in response.chunks or ():
                    if isinstance(chunk, FileRecords):
                        if chunk.size == 0:
                            continue
                        if chunk.size < SENDFILE_MIN:
                            pending.append(chunk.read_bytes())
                            continue
                        if pending:
                            transport.writelines(pending)
                            pending = []
                        await self._sendfile(loop, transport, chunk)
                    else:
                        pending.append(chunk)
                if pending:
                    transport.writelines(pending)
                self._finish(response, start)
        except (ConnectionError, OSError) as e:
            self.close(f"sending a response failed: {e}", abort=True)
        except asyncio.CancelledError:
            return
        except Exception:
            _log.exception("closing connection %s: sending a response failed",
                           self.connection_id)  # fmt: skip
            self.close(abort=True)
        finally:
            self._writer_task = None
        if not self._closing:
            self._send_responses()

    async def _sendfile(
        self, loop: asyncio.AbstractEventLoop, transport: asyncio.Transport, records: FileRecords
    ) -> None:
        fd = records.fileno()
        position, remaining = records.position, records.size
        sock = transport.get_extra_info("socket")
        if (
            transport.get_write_buffer_size() == 0
            and sock is not None
            and self.server.direct_sendfile
        ):
            # Nothing queued before us: send straight from the page cache now;
            # only what the socket does not take goes through loop.sendfile.
            try:
                sent = os.sendfile(sock.fileno(), fd, position, remaining)
            except BlockingIOError:
                sent = 0
            except OSError as e:
                if e.errno not in (errno.EAGAIN, errno.EWOULDBLOCK):
                    raise
                sent = 0
            position += sent
            remaining -= sent
            self.server.sendfile_bytes += sent
            if remaining == 0:
                return
        if self.server.loop_sendfile:
            view = cast("IO[bytes]", _FileView(fd, position))
            try:
                sent = await loop.sendfile(transport, view, position, remaining)
            except NotImplementedError:  # uvloop: no sendfile at all
                self.server.loop_sendfile = False
            else:
                self.server.sendfile_bytes += sent
                if sent < remaining:
                    raise ConnectionError(
                        f"segment {records.path} shorter than the slice being sent"
                    )
                return
        # Copying fallback: pread and write, 256 KiB at a time, with flow control.
        while remaining > 0:
            await self._write_resumed.wait()
            if self._closing:
                raise ConnectionError("connection closed while sending")
            data = os.pread(fd, min(remaining, 256 * 1024), position)
            if not data:
                raise ConnectionError(f"segment {records.path} shorter than the slice being sent")
            transport.write(data)
            position += len(data)
            remaining -= len(data)

    def pause_writing(self) -> None:
        self._write_paused = True
        self._write_resumed.clear()

    def resume_writing(self) -> None:
        self._write_paused = False
        self._write_resumed.set()
        if not self._closing:
            self._send_responses()


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
        socket_request_max_bytes: int = 100 * 1024 * 1024,
        connections_max_idle_ms: int = 600_000,
        max_connections: int = 2**31 - 1,
        max_connections_per_ip: int = 2**31 - 1,
        send_buffer_bytes: int = 100 * 1024,
        receive_buffer_bytes: int = 100 * 1024,
        backlog: int = 50,
        metrics: MetricsRegistry | None = None,
        parse_header: HeaderParser | None = None,
        direct_sendfile: bool = True,
    ) -> None:
        if not listeners:
            raise ValueError("a SocketServer needs at least one listener")
        self.metrics = metrics
        self.channel = RequestChannel(handler, queued_max_requests, metrics)
        self.max_request_size = socket_request_max_bytes
        self.connections_max_idle_ms = connections_max_idle_ms
        self.max_connections = max_connections
        self.max_connections_per_ip = max_connections_per_ip
        self.send_buffer_bytes = send_buffer_bytes
        self.receive_buffer_bytes = receive_buffer_bytes
        self.backlog = backlog
        self.direct_sendfile = direct_sendfile
        self._parse_header = parse_header
        self.acceptors = [Acceptor(self, spec) for spec in listeners]
        self.processors: dict[str, Processor] = {}
        self._per_ip: dict[str, int] = {}
        self._ids = itertools.count()
        self._reaper: asyncio.Task[None] | None = None
        self._api_names: dict[int, str] = {}
        self.accepting = False
        self.connections_total = 0
        self.connections_refused = 0
        self.bad_frames = 0
        self.sendfile_bytes = 0
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

    def stop_accepting(self) -> None:
        self.accepting = False
        for acceptor in self.acceptors:
            acceptor.stop_accepting()

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

    def _admit(self, p: Processor) -> str | None:
        if not self.accepting:
            self.connections_refused += 1
            return "the broker is shutting down"
        if len(self.processors) >= self.max_connections:
            self.connections_refused += 1
            return f"max.connections ({self.max_connections}) reached"
        if self._per_ip.get(p.client_host, 0) >= self.max_connections_per_ip:
            self.connections_refused += 1
            return f"max.connections.per.ip ({self.max_connections_per_ip}) reached"
        self.processors[p.connection_id] = p
        self._per_ip[p.client_host] = self._per_ip.get(p.client_host, 0) + 1
        self.connections_total += 1
        return None

    def _forget(self, p: Processor) -> None:
        if self.processors.pop(p.connection_id, None) is not None:
            n = self._per_ip.get(p.client_host, 1) - 1
            if n:
                self._per_ip[p.client_host] = n
            else:
                self._per_ip.pop(p.client_host, None)

    def _tune_socket(self, sock: socket.socket) -> None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.send_buffer_bytes > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.send_buffer_bytes)
            if self.receive_buffer_bytes > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.receive_buffer_bytes)

    async def _reap_idle(self) -> None:
        """Close connections idle longer than ``connections.max.idle.ms``."""
        limit_ns = self.connections_max_idle_ms * 1_000_000
        period = min(max(self.connections_max_idle_ms / 4000, 0.01), 30.0)
        while True:
            await asyncio.sleep(period)
            now = time.monotonic_ns()
            for p in list(self.processors.values()):
                if not p.in_flight and now - p.last_active_ns > limit_ns:
                    p.close(f"idle for more than {self.connections_max_idle_ms} ms")

    # ------------------------------------------------------------ metrics

    def _register_metrics(self, m: MetricsRegistry) -> None:
        m.gauge(
            "kafka_network_requestchannel_requestqueuesize",
            "Requests waiting for a handler.",
            lambda: self.channel.size,
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
            "kafka_network_socketserver_bad_frames_total",
            "Connections closed for a malformed or oversized frame.",
            lambda: self.bad_frames,
            kind="counter",
        )
        m.gauge(
            "kafka_server_brokertopicmetrics_bytesin_total",
            "Request bytes received (BytesInPerSec).",
            lambda: self.channel.bytes_in,
            kind="counter",
        )
        m.gauge(
            "kafka_server_brokertopicmetrics_bytesout_total",
            "Response bytes sent (BytesOutPerSec).",
            lambda: self.channel.bytes_out,
            kind="counter",
        )
        m.gauge(
            "kafka_network_socketserver_sendfile_bytes_total",
            "Record bytes sent from segment files with sendfile.",
            lambda: self.sendfile_bytes,
            kind="counter",
        )
