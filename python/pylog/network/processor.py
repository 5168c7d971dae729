"""Processor: one client connection of the SocketServer.

Kafka's ``kafka.network.Processor`` is a thread multiplexing many connections
with a selector; on asyncio the event loop is the selector, so a Processor here
is one connection, an ``asyncio.BufferedProtocol`` that

* reads straight into its receive buffer (large frames into a buffer of their
  own: of the frame's size up to 1 MiB, beyond that 1 MiB at first and doubled
  as it fills up to the frame's size, so a size prefix alone costs at most
  1 MiB; frames of 512 KiB to 1 MiB into a recycled 1 MiB buffer, see
  :class:`FrameBuffers`) and splits the 4-byte size-prefixed frames,
  closing the connection on a frame outside ``0..socket.request.max.bytes`` or
  an unparsable request header;
* holds back: starts no new frame while its own requests read and not yet
  answered (responses written) reach ``connection_max_request_bytes``, nor
  while the broker's reach ``queued.max.request.bytes`` (then it also grows
  no frame buffer); a frame started is timed from its first byte
  (``frame_started_ns``, which the SocketServer's reaper holds to
  ``connections.max.idle.ms``);
* hands each request to the :class:`~pylog.network.request_channel.RequestChannel`
  (reading pauses while the channel is full: ``queued.max.requests``), one
  request's local part at a time, so a connection's requests keep their order;
* writes the responses in request order, pipelined: ``writelines`` for bytes,
  ``os.sendfile`` for :class:`~pylog.records.FileRecords` (segment bytes never
  enter Python);
* keeps the time of its last traffic, which the SocketServer's reaper compares
  with ``connections.max.idle.ms``.

Security (docs/security.md). On an SSL or SASL_SSL listener the connection
first completes a TLS handshake (``loop.start_tls``; a failed one closes the
connection with one log line), and a client certificate, when the listener
asks for one, names the principal. TLS cannot use sendfile: record bytes are
read from the segment and written through the TLS transport. On a SASL
listener a :class:`~pylog.security.SaslServerAuthenticator` sees every request
as it arrives: until the client has authenticated only ApiVersions,
SaslHandshake and SaslAuthenticate pass (anything else closes the connection),
frames are held to ``sasl.server.max.receive.size``, and the SASL requests
(and the bare tokens after a v0 SaslHandshake) are answered by the
authenticator rather than the broker. A failed login is answered after
``connection.failed.authentication.delay.ms`` and the connection closed.
Each request carries the connection's principal.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import logging
import os
import socket
import ssl
import struct
import sys
import time
from collections import deque
from collections.abc import Callable, Coroutine
from concurrent.futures import Executor
from typing import IO, TYPE_CHECKING, Any, cast

from pylog.errors import CloseConnection, KafkaError
from pylog.logsafe import quoted
from pylog.network.connection_quotas import ConnectionHold
from pylog.network.eager_future import EagerFuture
from pylog.network.request_channel import (
    BULK_PRODUCE_BYTES,
    SOLE_CONNECTION_NS,
    Chunk,
    Request,
    Response,
)
from pylog.protocol import ApiKey, RequestHeader
from pylog.records import FileRecords
from pylog.security.kafka_principal import ANONYMOUS, KafkaPrincipal
from pylog.security.sasl_server_authenticator import SaslServerAuthenticator
from pylog.security.ssl_principal_mapper import NoMatchingRule, rfc2253_name

if TYPE_CHECKING:
    from pylog.network.socket_server import Acceptor, SocketServer

__all__ = ["FrameBuffers", "Processor"]

_log = logging.getLogger("pylog.network")

RECEIVE_BUFFER = 64 * 1024
# Frames at least this large get a buffer of their own (filled by recv_into):
# of the frame's size up to LARGE_INITIAL (a producer's request, 1 MiB by
# default, is read into its final buffer, never grown or copied), else first
# that big and doubled as it fills up to the frame's size.
LARGE_FRAME = 16 * 1024
LARGE_INITIAL = 1024 * 1024
# Frames from this size up to LARGE_INITIAL are read into a recycled buffer of
# LARGE_INITIAL bytes (at most twice the frame, which is what it is charged).
RECYCLED_MIN = LARGE_INITIAL // 2
# Idle recycled buffers a SocketServer keeps (memory beyond the request budget).
RECYCLED_KEEP = 4
# Reasons reading is paused that also stop the frames already buffered.
_HOLD_BACK = frozenset({"queue", "connection", "memory"})
# FileRecords below this size are read and written like bytes: one pread beats
# the event-loop round trips of a sendfile that has to wait for the socket.
SENDFILE_MIN = 4096
WRITE_HIGH_WATER = 4 * 1024 * 1024
# Segment bytes left of a response, once the socket is full, from which a
# network thread sends them. The socket takes ~256 KiB a round (Kafka's 100 KiB
# socket.send.buffer.bytes) and each round waits for the client to read: on
# the event loop every round is a wake of the interpreter, which on a busy
# machine left the Java consumer's 1 MiB fetches at 0.5-0.7x Kafka's rate
# (docs/internals/performance.md, "The Java consumer's fetches"); a blocking
# sendfile on a thread is woken by the kernel alone.
THREAD_MIN = 64 * 1024
# ... and from which such a response waits for a busy network thread rather
# than going through the event loop's rounds (below it, only a free thread).
THREAD_QUEUE_MIN = 4 * 1024 * 1024
# Record bytes read at a time for a TLS connection (no sendfile through TLS).
TLS_COPY_CHUNK = 256 * 1024
# How long a connection whose last answer ends it (a failed login) stays open
# for the client to read that answer, unless the client closes first.
CLOSE_AFTER_ANSWER_S = 1.0


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


class FrameBuffers:
    """Recycled LARGE_INITIAL-byte buffers for the large frames of a
    SocketServer's connections (one event loop: no lock).

    A fresh ``bytearray`` of 1 MiB is zero-filled and its pages faulted in
    again for each frame (6-7% of the broker's CPU producing 1 MiB requests);
    a recycled one is neither. A buffer goes back here as soon as its frame is
    complete, and is handed out again only when nothing else refers to it: a
    request, a view of its records, a Py_buffer held by native code all hold a
    reference to the bytearray, so its reference count says when the last one
    is gone — record bytes are never overwritten while anything can read them.
    """

    __slots__ = ("_idle",)

    def __init__(self) -> None:
        self._idle: deque[bytearray] = deque()

    def take(self) -> bytearray:
        """A buffer no one else refers to: a recycled one, else a new one."""
        idle = self._idle
        for _ in range(len(idle)):
            buf = idle.popleft()
            # References: buf, the argument.
            if sys.getrefcount(buf) == 2:
                return buf
            idle.append(buf)  # still read somewhere: look again later
        return bytearray(LARGE_INITIAL)

    def give(self, buf: bytearray) -> None:
        """``buf``'s frame is read: it may be reused once nothing refers to it."""
        if len(self._idle) < RECYCLED_KEEP:
            self._idle.append(buf)


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
        # The buffer of the large frame being read (a view of a recycled one).
        self._large: bytearray | memoryview | None = None
        self._recycled: bytearray | None = None
        self._large_filled = 0
        self._large_size = 0
        # Bytes of requests this connection holds: the buffer of the frame being
        # read plus every frame read and not yet answered.
        self._held = 0
        # When the first byte of a frame still incomplete was read (0: none).
        self.frame_started_ns = 0
        self._pending: deque[Request] = deque()  # in the channel, not yet handled
        self._responses: deque[Response] = deque()  # handled or in handling, in order
        # A request of this connection is in its local part (the next waits).
        self._local_busy = False
        self._dispatching = False
        # A TLS listener: no request starts before the handshake is done and
        # the TLS transport is ours to answer on (see _start_tls).
        self._tls_pending = False
        self._writer_task: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._write_paused = False
        self._write_resumed: asyncio.Event = asyncio.Event()
        self._write_resumed.set()
        self._reading_paused_for: set[str] = set()
        self._throttled: asyncio.TimerHandle | None = None
        # A connection held unread on arrival (ConnectionQuotas' rates).
        self._hold: asyncio.TimerHandle | None = None
        self._closing = False
        # The duplicate socket a network thread is sending on, while it is.
        self._thread_sock: socket.socket | None = None
        self._idle_event: asyncio.Event = asyncio.Event()
        self._idle_event.set()
        self.last_active_ns = time.monotonic_ns()
        self.bytes_in = 0
        self.bytes_out = 0
        spec = acceptor.spec
        #: TLS is up (an SSL / SASL_SSL listener, once the handshake is done).
        self.tls = False
        #: The principal of the client certificate (SSL), else ANONYMOUS.
        self._tls_principal: KafkaPrincipal = ANONYMOUS
        #: SASL listeners: the connection's authentication.
        self.authenticator = SaslServerAuthenticator(spec.sasl) if spec.sasl is not None else None
        self._sasl_handler = _SaslHandler(self) if self.authenticator is not None else None

    # ------------------------------------------------------------ lifecycle

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, only alike.
        transport = cast(asyncio.Transport, transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple) and len(peer) >= 2:
            self.client_host, self.client_port = str(peer[0]), int(peer[1])
        self._admit(transport, rate_checked=False)

    def _admit(self, transport: asyncio.Transport, *, rate_checked: bool) -> None:
        """Serve the connection, refuse it, or hold it unread first
        (ConnectionQuotas: a connection rate over its bound)."""
        if self._closing:
            return
        refusal = self.server.admit(self, rate_checked=rate_checked)
        if isinstance(refusal, ConnectionHold):
            transport.pause_reading()
            self.server.held.add(self)
            loop = asyncio.get_running_loop()
            if refusal.close:
                # Kafka's Acceptor keeps an IP-throttled socket, unread, for
                # the throttle time and then closes it: a client reconnecting
                # in a loop is slowed down, not spun.
                self._closing = True
                _log.info("closing connection from %s:%s after %d ms: %s", self.client_host,
                          self.client_port, refusal.ms, refusal.reason)  # fmt: skip
                self._hold = loop.call_later(refusal.ms / 1000, self._end_hold_close, transport)
            else:
                _log.debug("delaying connection from %s:%s for %d ms: %s", self.client_host,
                           self.client_port, refusal.ms, refusal.reason)  # fmt: skip
                self._hold = loop.call_later(refusal.ms / 1000, self._end_hold_admit, transport)
            return
        if refusal is not None:
            _log.warning("closing connection from %s:%s: %s", self.client_host,
                         self.client_port, refusal)  # fmt: skip
            self._closing = True
            transport.abort()
            return
        self._serve(transport)

    def _end_hold_close(self, transport: asyncio.Transport) -> None:
        self._hold = None
        self.server.held.discard(self)
        transport.abort()

    def _end_hold_admit(self, transport: asyncio.Transport) -> None:
        self._hold = None
        self.server.held.discard(self)
        if self._closing or transport.is_closing():
            return
        transport.resume_reading()
        self._admit(transport, rate_checked=True)

    def _serve(self, transport: asyncio.Transport) -> None:
        sock = transport.get_extra_info("socket")
        if sock is not None:
            self.server.tune_socket(sock)
        transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)
        loop = asyncio.get_running_loop()
        context = self.acceptor.spec.ssl_context
        if context is not None:
            # Nothing is read as a request until the TLS handshake is done.
            transport.pause_reading()
            self._tls_pending = True
            task = loop.create_task(self._start_tls(transport, context))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    @property
    def principal(self) -> KafkaPrincipal:
        """Who the connection is: its SASL user, else its certificate's name."""
        auth = self.authenticator
        if auth is not None and auth.principal is not None:
            return auth.principal
        return self._tls_principal

    async def _start_tls(self, transport: asyncio.Transport, context: ssl.SSLContext) -> None:
        loop = asyncio.get_running_loop()
        timeout = max(1.0, self.server.connections_max_idle_ms / 1000)
        try:
            tls = await loop.start_tls(
                transport, self, context, server_side=True, ssl_handshake_timeout=timeout
            )
        except asyncio.CancelledError:
            raise
        except (OSError, ssl.SSLError, asyncio.TimeoutError, ConnectionError) as e:
            self.server.tls_handshake_failures += 1
            if not self._closing:
                self.close(f"TLS handshake failed: {_tls_reason(e)}", abort=True)
            return
        if tls is None or self._closing:
            return
        self.transport = tls
        self.tls = True
        self.transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)
        ssl_object = tls.get_extra_info("ssl_object")
        cert = ssl_object.getpeercert() if ssl_object is not None else None
        if cert:
            mapper = self.acceptor.spec.principal_mapper
            dn = rfc2253_name(cert.get("subject", ()))
            try:
                name = mapper.name(dn) if mapper is not None else dn
            except NoMatchingRule as e:
                self.server.failed_authentications += 1
                self.close(f"client certificate refused: {e}", abort=True)
                return
            self._tls_principal = KafkaPrincipal.user(name)
            _log.debug("connection %s: TLS client certificate %s is %s",
                       self.connection_id, dn, self._tls_principal)  # fmt: skip
        if self._reading_paused_for:  # paused during the handshake (shutdown, back-pressure)
            self.transport.pause_reading()
        # Requests read with the handshake's last flight, before this task
        # resumed, wait for this: they are answered through the TLS transport,
        # and carry the certificate's principal.
        self._tls_pending = False
        for request in self._pending:
            request.principal = self.principal
        self._dispatch()

    def connection_lost(self, exc: Exception | None) -> None:
        auth = self.authenticator
        if (
            not self._closing
            and auth is not None
            and not auth.complete
            and auth.state != "failed"
            and (auth.mechanism is not None or self.frame_started_ns)
        ):
            # A login the client abandoned (a truncated SASL exchange): one
            # line, as for a login that fails.
            _log.info(
                "connection %s (%s:%s, listener %s) closed by the client during SASL "
                "authentication (%s%s)",
                self.connection_id, self.client_host, self.client_port,
                self.acceptor.spec.name, auth.state,
                ", in the middle of a frame" if self.frame_started_ns else "",
            )  # fmt: skip
        self._closing = True
        self.server.forget(self)
        for request in self._pending:
            self.channel.forget(request)
        self._pending.clear()
        self._responses.clear()
        self._large = None
        self._give_back_recycled()
        self.frame_started_ns = 0
        held, self._held = self._held, 0
        self.channel.give_bytes(held)
        self._idle_event.set()
        self._write_resumed.set()
        if self._writer_task is not None:
            self._writer_task.cancel()
        if self._throttled is not None:
            self._throttled.cancel()
            self._throttled = None
        if self._hold is not None:
            self._hold.cancel()
            self._hold = None

    def close(self, reason: str | None = None, *, abort: bool = False) -> None:
        """Close the connection (buffered writes flushed unless ``abort``)."""
        if reason:
            _log.info("closing connection %s (%s:%s, %s): %s", self.connection_id,
                      self.client_host, self.client_port, self.principal, reason)  # fmt: skip
        self._closing = True
        own = self._thread_sock
        if abort and own is not None:
            # A network thread blocked sending to this socket returns now.
            with contextlib.suppress(OSError):
                own.shutdown(socket.SHUT_RDWR)
        if self.transport is not None and not self.transport.is_closing():
            if abort:
                self.transport.abort()
            else:
                self.transport.close()

    def _drop_large(self) -> None:
        if self._large is not None:
            self._held -= len(self._large)
            self.channel.give_bytes(len(self._large))
            self._large = None
            self._give_back_recycled()
        self.frame_started_ns = 0

    def _give_back_recycled(self) -> None:
        recycled, self._recycled = self._recycled, None
        if recycled is not None:
            self.server.frame_buffers.give(recycled)

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
        large = self._large
        if large is not None:
            self._large_filled += nbytes
            if self._large_filled == len(large):
                if self._large_filled == self._large_size:
                    self._large = None
                    self.frame_started_ns = 0
                    recycled, self._recycled = self._recycled, None
                    self._frame_received(memoryview(large), now)
                    if recycled is not None:
                        del large
                        self.server.frame_buffers.give(recycled)
                else:
                    self._grow_large()
            return
        self._end += nbytes
        self._split_frames(now)

    def _split_frames(self, now: int) -> None:
        buf = self._buf
        limit = self.server.max_request_size
        auth = self.authenticator
        if auth is not None and not auth.complete:
            # Kafka's sasl.server.max.receive.size: small until the client is known.
            assert self.acceptor.spec.sasl is not None
            limit = min(limit, self.acceptor.spec.sasl.max_receive_size)
        # While reading is held back, frames already read stay in the buffer too.
        while not self._closing and not self._reading_paused_for & _HOLD_BACK:
            available = self._end - self._start
            if available < 4:
                break
            size = int.from_bytes(buf[self._start : self._start + 4], "big", signed=True)
            if size < 0 or size > limit:
                self.server.bad_frames += 1
                key = (
                    "socket.request.max.bytes"
                    if limit == self.server.max_request_size
                    else "sasl.server.max.receive.size, before authentication"
                )
                self.close(f"frame size {size} outside 0..{limit} ({key})", abort=True)
                return
            if not self._may_start_frame():
                break
            if available - 4 >= size:
                begin = self._start + 4
                frame = bytes(memoryview(buf)[begin : begin + size])  # one copy
                self._start = begin + size
                self._take(size)
                self.frame_started_ns = 0
                self._frame_received(memoryview(frame), now)
                continue
            if size >= LARGE_FRAME or size > len(buf) - 4:
                # A buffer of the frame's own, grown as its bytes arrive: a size
                # prefix alone is not worth megabytes.
                have = available - 4
                large: bytearray | memoryview
                if RECYCLED_MIN <= size <= LARGE_INITIAL:
                    self._recycled = self.server.frame_buffers.take()
                    large = memoryview(self._recycled)[:size]
                else:
                    large = bytearray(min(size, max(LARGE_INITIAL, 2 * have)))
                large[:have] = memoryview(buf)[self._start + 4 : self._end]
                self._take(len(large))
                self._large, self._large_filled, self._large_size = large, have, size
                self._start = self._end = 0
                if not self.frame_started_ns:
                    self.frame_started_ns = now
                return
            break
        if self._start == self._end:
            self._start = self._end = 0
        elif self._reading_paused_for & _HOLD_BACK:
            self.frame_started_ns = 0  # waiting on the broker, not on the client
        elif not self.frame_started_ns:
            self.frame_started_ns = now  # part of a frame: it must arrive in time

    def _may_start_frame(self) -> bool:
        """Whether the next frame may be read now; if not, reading pauses until
        this connection's answered bytes or the broker's budget allow it."""
        if self._held and self._held >= self.server.connection_max_request_bytes:
            self._pause_reading("connection")  # resumed by _finish
            return False
        if self.channel.bytes_exhausted:
            self._wait_for_bytes()
            return False
        return True

    def _grow_large(self) -> bool:
        """Double the buffer of the frame being read (up to its size)."""
        large = self._large
        assert large is not None
        if self.channel.bytes_exhausted:
            self._wait_for_bytes()
            return False
        grown = bytearray(min(self._large_size, 2 * len(large)))
        grown[: len(large)] = large
        self._take(len(grown) - len(large))
        self._large = grown
        return True

    def _wait_for_bytes(self) -> None:
        self._pause_reading("memory")
        self.channel.when_bytes_available(self._bytes_available)

    def _bytes_available(self) -> None:
        asyncio.get_running_loop().call_soon(self._continue_after_back_pressure, "memory")

    def _take(self, n: int) -> None:
        self._held += n
        self.channel.take_bytes(n)

    def _give(self, n: int) -> None:
        self._held -= n
        self.channel.give_bytes(n)
        if (
            "connection" in self._reading_paused_for
            and self._held < self.server.connection_max_request_bytes
        ):
            asyncio.get_running_loop().call_soon(self._continue_after_back_pressure, "connection")

    def _frame_received(self, frame: memoryview, now: int) -> None:
        if self._closing:
            return
        auth = self.authenticator
        if auth is not None and auth.unframed:
            # After SaslHandshake v0 the client's tokens come as bare frames.
            self._request_received(_UNFRAMED_TOKEN, frame, now)
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
        if auth is not None:
            refused = auth.admit(header.api_key, now)
            if refused is not None:
                self.close(f"{refused} (correlation id {header.correlation_id}, client id "
                           f"{quoted(header.client_id)})", abort=True)  # fmt: skip
                return
        self._request_received(header, frame, now)

    def _request_received(self, header: RequestHeader, frame: memoryview, now: int) -> None:
        server = self.server
        cid = self.connection_id
        if header.api_key != ApiKey.PRODUCE or len(frame) < BULK_PRODUCE_BYTES:
            # A request a stalled loop would delay (a bulk Produce waits on its
            # own append anyway): remember when, and the last from another.
            if server.prompt_connection != cid:
                server.prompt_other_ns = server.prompt_ns
                server.prompt_connection = cid
            server.prompt_ns = now
        other_ns = server.prompt_other_ns if server.prompt_connection == cid else server.prompt_ns
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
            principal=self.principal,
            others_active=now - other_ns < SOLE_CONNECTION_NS,
        )
        self._pending.append(request)
        if not self.channel.send_request(request):
            self._pause_reading("queue")
            self.channel.when_not_full(self._channel_has_room)
        self._dispatch()

    def _channel_has_room(self) -> None:
        asyncio.get_running_loop().call_soon(self._continue_after_back_pressure, "queue")

    def _continue_after_back_pressure(self, why: str) -> None:
        if self._closing or why not in self._reading_paused_for:
            return
        self._reading_paused_for.discard(why)
        if self._large is not None:
            # Paused mid-frame for the budget to grow its buffer.
            if self._large_filled == len(self._large) and not self._grow_large():
                return
        else:
            self._split_frames(time.monotonic_ns())  # the frames already buffered first
        if why not in self._reading_paused_for:
            self._reading_paused_for.add(why)
            self._resume_reading(why)

    def eof_received(self) -> bool | None:
        # The client half-closed: answer what it sent (a partial frame never
        # completes), then close. TLS has no half-close: asyncio closes it.
        self._drop_large()
        if self.in_flight and not self.tls:
            self._pause_reading("eof")
            return True
        return None

    # ------------------------------------------------------------ handling

    def _dispatch(self) -> None:
        """Start this connection's next requests, one local part at a time.

        A request starts at once, in the callback that read it, and runs until
        it first waits (most never do: the answer is written before the
        callback returns). Starting it as a task instead costs a turn of the
        event loop before it runs, and the answer is that much later."""
        if self._dispatching or self._tls_pending:
            return  # a request ending its local part inside the loop below; TLS
        self._dispatching = True
        try:
            while self._pending and not self._local_busy:
                request = self._pending.popleft()
                self.channel.receive(request)
                response = Response(request)
                self._responses.append(response)
                self._local_busy = True
                request._on_local_complete = self._local_done
                self._begin(self._run(request, response))
        finally:
            self._dispatching = False

    def _local_done(self) -> None:
        """The request in its local part is done with it (answered, or now
        waiting on the purgatory): the next may start."""
        self._local_busy = False
        if self._pending and not self._dispatching:
            # Called inside the request's own task: the next starts outside it.
            asyncio.get_running_loop().call_soon(self._dispatch)

    def _begin(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run ``coro`` up to its first wait here; a task carries it on from
        there (what Python 3.12's eager tasks do). A wait on an EagerFuture
        (the purgatory's) needs no task: the future resumes ``coro`` here when
        its result is set, so the answer goes out in that same call."""
        try:
            waiting_on = coro.send(None)
        except StopIteration:
            return
        except Exception:
            _log.exception("connection %s: handling a request failed", self.connection_id)
            self.close(abort=True)
            return
        if _park_on(waiting_on, functools.partial(self._begin, coro)):
            return
        task = asyncio.get_running_loop().create_task(_carry_on(coro, waiting_on, self._begin))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, request: Request, response: Response) -> None:
        handler = self._sasl_handler
        auth = self.authenticator
        if handler is not None and auth is not None:
            header = request.header
            if header.api_version >= 0 and not auth.handles(header.api_key):
                handler = None
        await self.channel.handle(request, response, handler)
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
            start = time.monotonic_ns()
            if chunks and any(
                isinstance(c, FileRecords) and c.size >= SENDFILE_MIN for c in chunks
            ):
                if not self._sendfile_now(transport, response):
                    if not self._closing:
                        self._writer_task = asyncio.get_running_loop().create_task(
                            self._write_async()
                        )
                    return
            elif chunks:
                transport.writelines(_as_bytes(chunks))
            self._finish(response, start)
            if response.request.close_after_response:
                self._close_after_answer()
                return
        self._maybe_idle()

    def _sendfile_now(self, transport: asyncio.Transport, response: Response) -> bool:
        """Send a response holding segment slices here, in the callback that
        completed it, while the socket takes it: bytes through the transport,
        slices by sendfile(2) straight to the socket — no writer task and no
        turn of the loop before a woken Fetch's records go out. False when
        the socket filled (the response's chunks are cut to what is left, for
        the writer task) or the connection closed."""
        sock = transport.get_extra_info("socket")
        if (
            self.tls
            or sock is None
            or not self.server.direct_sendfile
            or transport.get_write_buffer_size()
        ):
            return False
        chunks = response.chunks or []
        pending: list[bytes | bytearray | memoryview] = []
        try:
            for i, chunk in enumerate(chunks):
                if not isinstance(chunk, FileRecords):
                    pending.append(chunk)
                    continue
                if chunk.size < SENDFILE_MIN:
                    if chunk.size:
                        pending.append(chunk.read_bytes())
                    continue
                if pending:
                    transport.writelines(pending)
                    pending = []
                    if transport.get_write_buffer_size():
                        response.chunks = chunks[i:]
                        return False
                try:
                    sent = os.sendfile(sock.fileno(), chunk.fileno(), chunk.position, chunk.size)
                except (BlockingIOError, InterruptedError):
                    sent = 0
                self.server.sendfile_bytes += sent
                if sent < chunk.size:
                    rest = FileRecords(chunk.source, chunk.position + sent, chunk.size - sent)
                    response.chunks = [rest, *chunks[i + 1 :]]
                    return False
        except OSError as e:
            self.close(f"sending a response failed: {e}", abort=True)
            return False
        if pending:
            transport.writelines(pending)
        return True

    def _finish(self, response: Response, send_start_ns: int) -> None:
        self._responses.popleft()
        self._give(response.request.size)
        self.bytes_out += response.size
        self.last_active_ns = sent = time.monotonic_ns()
        self.channel.record_sent(response, send_start_ns, sent)
        if response.request.throttle_ms > 0:
            self._throttle(response.request.throttle_ms)

    def _throttle(self, throttle_ms: int) -> None:
        """A client over its quota: read nothing from it for ``throttle_ms``
        once its answer is out (Kafka's ThrottledChannel, KIP-219); the answer
        told the client to wait as long."""
        loop = asyncio.get_running_loop()
        until = loop.time() + throttle_ms / 1000
        if self._throttled is not None:
            if self._throttled.when() >= until:
                return
            self._throttled.cancel()
        self._pause_reading("throttle")
        self._throttled = loop.call_at(until, self._end_throttle)

    def _end_throttle(self) -> None:
        self._throttled = None
        self._resume_reading("throttle")

    def _close_after_answer(self) -> None:
        """The answer that ends the connection (a failed login) is written:
        read nothing more, and close once the client has had time to read it
        (a client that sees the answer and the close in one read may report
        only the close) — sooner if the client closes first."""
        self._pause_reading("closing")
        self._closing = True
        asyncio.get_running_loop().call_later(CLOSE_AFTER_ANSWER_S, self.close)

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
                chunks = response.chunks or []
                pending: list[bytes | bytearray | memoryview] = []
                i = 0
                threads = True  # until a network thread hands a slow send back
                while i < len(chunks):
                    chunk = chunks[i]
                    i += 1
                    if not isinstance(chunk, FileRecords):
                        pending.append(chunk)
                        continue
                    if chunk.size == 0:
                        continue
                    if chunk.size < SENDFILE_MIN:
                        pending.append(chunk.read_bytes())
                        continue
                    if pending:
                        transport.writelines(pending)
                        pending = []
                    rest = await self._sendfile(loop, transport, chunk, chunks[i:], threads)
                    if rest is not None:  # a network thread sent the rest but these
                        chunks, i, threads = rest, 0, False
                if pending:
                    transport.writelines(pending)
                self._finish(response, start)
                if response.request.close_after_response:
                    self._close_after_answer()
                    return
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
        self,
        loop: asyncio.AbstractEventLoop,
        transport: asyncio.Transport,
        records: FileRecords,
        after: list[Chunk],
        threads: bool = True,
    ) -> list[Chunk] | None:
        """Send ``records``; or, with ``threads``, hand it and the chunks
        ``after`` it to a network thread and return what that left unsent."""
        fd = records.fileno()
        position, remaining = records.position, records.size
        if self.tls:
            # sendfile would put the file's bytes on the socket unencrypted
            # (the TLS transport's "socket" is the raw one): copy through TLS.
            await self._copy_file(transport, records, position, remaining, TLS_COPY_CHUNK)
            self.server.tls_copied_bytes += remaining
            return None
        sock = transport.get_extra_info("socket")
        if (
            transport.get_write_buffer_size() == 0
            and sock is not None
            and self.server.direct_sendfile
        ):
            # Nothing queued before us: send straight from the page cache now;
            # only what the socket does not take goes on.
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
                return None
            executor = self.server.network_executor
            left = remaining + sum(c.size for c in after if isinstance(c, FileRecords))
            if (
                executor is not None
                and threads
                and left >= THREAD_MIN
                and (
                    left >= THREAD_QUEUE_MIN
                    or self.server.network_sends_running < self.server.network_threads
                )
            ):
                # The socket is full: a network thread sends the rest of the
                # response in blocking calls (one sendfile per slice), not
                # the event loop a round trip per socket buffer.
                rest = [FileRecords(records.source, position, remaining), *after]
                return await self._send_on_thread(loop, executor, sock, rest)
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
                return None
        # Copying fallback: pread and write, 256 KiB at a time, with flow control.
        await self._copy_file(transport, records, position, remaining, 256 * 1024)
        return None

    async def _send_on_thread(
        self,
        loop: asyncio.AbstractEventLoop,
        executor: Executor,
        sock: socket.socket,
        chunks: list[Chunk],
    ) -> list[Chunk]:
        """Send ``chunks`` on a network thread over a duplicate of the socket,
        made blocking for the while: reading pauses (the event loop must not
        read a blocking socket) and the transport has nothing queued, so the
        thread is the socket's only user until it is done. Returns what a slow
        reader left unsent."""
        own = socket.socket(fileno=os.dup(sock.fileno()))
        self._pause_reading("sendfile")
        self._thread_sock = own
        future = executor.submit(send_blocking, own, chunks)
        self.server.network_thread_sends += 1
        self.server.network_sends_running += 1
        try:
            sent, rest = await asyncio.wrap_future(future, loop=loop)
        except asyncio.CancelledError:
            if future.cancel():  # never started: the duplicate is still ours
                own.close()
            raise
        finally:
            self.server.network_sends_running -= 1
            self._thread_sock = None
            self._resume_reading("sendfile")
        self.server.sendfile_bytes += sent
        if rest:
            self.server.network_thread_handbacks += 1
        return rest

    async def _copy_file(
        self,
        transport: asyncio.Transport,
        records: FileRecords,
        position: int,
        remaining: int,
        chunk: int,
    ) -> None:
        """Write ``remaining`` bytes of the segment from ``position`` through the
        transport: pread and write, ``chunk`` at a time, with flow control."""
        fd = records.fileno()
        while remaining > 0:
            await self._write_resumed.wait()
            if self._closing:
                raise ConnectionError("connection closed while sending")
            data = os.pread(fd, min(remaining, chunk), position)
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


# How long a network thread's blocking send may wait for the socket before it
# hands the rest of the response back to the event loop (SO_SNDTIMEO, 0.1 s).
SEND_TIMEOUT = struct.pack("@ll", 0, 100_000)
# Buffers per sendmsg (Linux's IOV_MAX is 1024).
IOV_MAX = 1024


def send_blocking(sock: socket.socket, chunks: list[Chunk]) -> tuple[int, list[Chunk]]:
    """On a network thread: write ``chunks`` to ``sock`` (a duplicate of a
    connection's socket, which it closes), bytes with ``sendmsg`` — held back
    with MSG_MORE to leave in the same segments as the file bytes after them —
    and each FileRecords with one blocking ``sendfile``, the GIL released for
    the whole slice. A call the socket does not finish within SEND_TIMEOUT (a
    reader that does not keep up) ends it: what is left goes back to the
    event loop, so no reader holds a thread longer. Returns (bytes sent from
    files, chunks left)."""
    from_files = 0
    try:
        sock.setblocking(True)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, SEND_TIMEOUT)
        out = sock.fileno()
        pending: list[bytes | bytearray | memoryview] = []
        for i, chunk in enumerate(chunks):
            if not isinstance(chunk, FileRecords):
                pending.append(chunk)
                continue
            if chunk.size < SENDFILE_MIN:
                pending.append(chunk.read_bytes())
                continue
            if pending:
                left = _send_within(sock, pending, socket.MSG_MORE)
                pending = []
                if left:
                    return from_files, [*left, *chunks[i:]]
            try:
                sent = os.sendfile(out, chunk.fileno(), chunk.position, chunk.size)
            except BlockingIOError:  # SO_SNDTIMEO passed with nothing taken
                sent = 0
            else:
                if sent == 0:
                    raise ConnectionError(f"segment {chunk.path} shorter than the slice being sent")
            from_files += sent
            if sent < chunk.size:
                rest = FileRecords(chunk.source, chunk.position + sent, chunk.size - sent)
                return from_files, [rest, *chunks[i + 1 :]]
        return from_files, list(_send_within(sock, pending, 0))
    finally:
        with contextlib.suppress(OSError):
            sock.setblocking(False)  # the event loop's socket again
        sock.close()


def _send_within(
    sock: socket.socket, buffers: list[bytes | bytearray | memoryview], flags: int
) -> list[memoryview]:
    """Send ``buffers`` in blocking ``sendmsg`` calls; what is left once a
    call stops short (SO_SNDTIMEO passed)."""
    views = [v for v in (memoryview(b).cast("B") for b in buffers) if len(v)]
    while views:
        batch = views[:IOV_MAX]
        want = sum(len(v) for v in batch)
        try:
            n = sock.sendmsg(batch, (), flags)
        except BlockingIOError:  # SO_SNDTIMEO passed with nothing taken
            n = 0
        whole = n == want
        while n:
            head = len(views[0])
            if n >= head:
                n -= head
                views.pop(0)
            else:
                views[0] = views[0][n:]
                n = 0
        if not whole:
            return views
    return views


def _park_on(waiting_on: object, resume: Callable[[], None]) -> bool:
    """If ``waiting_on`` is an EagerFuture not yet done, have its
    ``set_result`` call ``resume()`` (no task needed) and say so."""
    if isinstance(waiting_on, EagerFuture) and not waiting_on.done():
        waiting_on._asyncio_future_blocking = False
        waiting_on.add_eager_callback(resume)
        return True
    return False


async def _carry_on(
    coro: Coroutine[Any, Any, None],
    waiting_on: object,
    resume: Callable[[Coroutine[Any, Any, None]], None],
) -> None:
    """Drive ``coro``, started outside a task and now waiting on ``waiting_on``
    (a future, or None for a bare yield such as ``asyncio.sleep(0)``), from this
    task: wait for that future here, then resume the coroutine, which reads
    the future's outcome (result, exception or cancellation) itself. A wait on
    an EagerFuture leaves the task: its ``set_result`` calls ``resume(coro)``."""
    while True:
        if _park_on(waiting_on, functools.partial(resume, coro)):
            return
        if isinstance(waiting_on, asyncio.Future):
            waiting_on._asyncio_future_blocking = False
            try:
                await waiting_on
            except asyncio.CancelledError:
                if not waiting_on.done():  # this task was cancelled, not the future
                    try:
                        waiting_on = coro.throw(asyncio.CancelledError())
                    except StopIteration:
                        return
                    continue
            except BaseException:  # the coroutine sees it as it resumes
                pass
        else:
            await asyncio.sleep(0)
        try:
            waiting_on = coro.send(None)
        except StopIteration:
            return


# The header an unframed SASL token (after SaslHandshake v0) travels under:
# api version -1 tells the authenticator the frame is the bare token.
_UNFRAMED_TOKEN = RequestHeader(
    api_key=ApiKey.SASL_AUTHENTICATE, api_version=-1, correlation_id=-1, client_id=None,
    header_size=0,
)  # fmt: skip


def _tls_reason(e: BaseException) -> str:
    if isinstance(e, ssl.SSLError):
        return e.reason or str(e)
    if isinstance(e, asyncio.TimeoutError):
        return "timed out"
    return str(e) or type(e).__name__


class _SaslHandler:
    """The RequestHandler of a connection's SASL requests: its authenticator.
    A failed login is logged (one line, no secret), answered after
    ``connection.failed.authentication.delay.ms``, and the connection closed
    once the answer is written."""

    def __init__(self, processor: Processor) -> None:
        self.processor = processor

    async def handle(self, request: Request) -> list[Chunk] | None:
        p = self.processor
        auth = p.authenticator
        assert auth is not None and p.acceptor.spec.sasl is not None
        was_complete = auth.complete
        reauths = auth.reauthentications
        try:
            result = auth.handle(request.header, request.frame)
        except (KafkaError, ValueError, IndexError, UnicodeDecodeError) as e:
            raise CloseConnection(f"malformed {request.api_name} request: {e}") from e
        server = p.server
        if result.failure is not None:
            server.failed_authentications += 1
            _log.warning(
                "authentication failed on connection %s (%s:%s, listener %s, mechanism %s): %s",
                p.connection_id,
                p.client_host,
                p.client_port,
                p.acceptor.spec.name,
                auth.mechanism or "-",
                result.failure,
            )
            delay_ms = p.acceptor.spec.sasl.failed_authentication_delay_ms
            if delay_ms > 0:
                await asyncio.sleep(delay_ms / 1000)
            request.close_after_response = True
        elif auth.reauthentications > reauths:
            server.successful_reauthentications += 1
            _log.debug("connection %s re-authenticated as %s", p.connection_id, auth.principal)
        elif auth.complete and not was_complete:
            server.successful_authentications += 1
            _log.debug("connection %s authenticated as %s (%s)",
                       p.connection_id, auth.principal, auth.mechanism)  # fmt: skip
        return result.chunks or None
