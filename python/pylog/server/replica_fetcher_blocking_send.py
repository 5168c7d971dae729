"""ReplicaFetcherBlockingSend: one connection from a follower to a leader,
one request at a time (Kafka's ``ReplicaFetcherBlockingSend``), on asyncio.

Requests are encoded and responses decoded with pylog's own codec; a Fetch
response's records stay memoryviews into the response frame, which the
follower hands to the native append. Any I/O error or timeout closes the
connection; the next request reconnects.

The socket's receive buffer is ``replica.socket.receive.buffer.bytes``, set
before connecting as Kafka does (the window scale is agreed in the
handshake). It bounds how much of a Fetch response one socket round trip
between the leader's and the follower's event loops carries. The reader
never stops reading partway through a response (its buffer limit is the
largest frame taken): the whole frame is wanted anyway, and a pause would
cost the transfer a round trip per 128 KiB.

The connection speaks the inter-broker listener's security protocol
(:class:`~pylog.security.ClientSecurity`): TLS with the broker's client
context on SSL / SASL_SSL, and on SASL_* a login (SaslHandshake,
SaslAuthenticate) with ``sasl.mechanism.inter.broker.protocol`` and the
broker's own credentials before the first request.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import struct
from typing import Any, TypeVar

from pylog.errors import KafkaError
from pylog.protocol import Struct, decode_response, encode_request
from pylog.protocol.messages import Response
from pylog.security.sasl_client_authenticator import ClientSecurity, authenticate_async

__all__ = ["BrokerEndPoint", "ReplicaFetcherBlockingSend"]

_R = TypeVar("_R", bound=Response)
_SIZE = struct.Struct(">i")


class BrokerEndPoint:
    """A leader to fetch from: its id and inter-broker address."""

    __slots__ = ("host", "id", "port")

    def __init__(self, id: int, host: str, port: int) -> None:
        self.id = id
        self.host = host
        self.port = port

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BrokerEndPoint) and (self.id, self.host, self.port) == (
            other.id,
            other.host,
            other.port,
        )

    def __hash__(self) -> int:
        return hash((self.id, self.host, self.port))

    def __repr__(self) -> str:
        return f"BrokerEndPoint({self.id}, {self.host}:{self.port})"


class ReplicaFetcherBlockingSend:
    def __init__(
        self,
        source: BrokerEndPoint,
        *,
        client_id: str,
        socket_timeout_ms: int,
        max_response_bytes: int,
        security: ClientSecurity | None = None,
        receive_buffer_bytes: int = -1,
    ) -> None:
        self.source = source
        self.security = security or ClientSecurity()
        self.client_id = client_id
        self.timeout_s = socket_timeout_ms / 1000
        # A frame larger than this is a broken peer: the connection closes.
        self.max_response_bytes = max_response_bytes
        # SO_RCVBUF; -1 (or 0) leaves the OS default and its autotuning.
        self.receive_buffer_bytes = receive_buffer_bytes
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._correlation_id = 0

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self._reader is not None and self._writer is not None:
            return self._reader, self._writer
        context = self.security.ssl_context
        reader, writer = await asyncio.wait_for(self._open(context), self.timeout_s)
        self._reader, self._writer = reader, writer
        if self.security.uses_sasl:
            try:
                await authenticate_async(self._roundtrip, self.security)
            except KafkaError as e:
                raise ConnectionError(f"logging in to {self.source} failed: {e}") from e
        return reader, writer

    async def _open(
        self, context: ssl.SSLContext | None
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(self.source.host, self.source.port, type=socket.SOCK_STREAM)
        error: OSError = OSError(f"no address for {self.source}")
        for family, kind, proto, _, address in infos:
            sock = socket.socket(family, kind, proto)
            try:
                sock.setblocking(False)
                if self.receive_buffer_bytes > 0:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.receive_buffer_bytes)
                await loop.sock_connect(sock, address)
            except OSError as e:
                sock.close()
                error = e
                continue
            except BaseException:
                sock.close()
                raise
            return await asyncio.open_connection(
                sock=sock,
                ssl=context,
                server_hostname=self.source.host if context is not None else None,
                limit=self.max_response_bytes,
            )
        raise error

    async def send_request(self, api_key: int, version: int, body: Struct, expect: type[_R]) -> _R:
        """Send one request and return its decoded response; OSError (a
        TimeoutError included) or the codec's error closes the connection."""
        try:
            await self._connect()
            return await self._roundtrip(api_key, version, body, expect)
        except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError) as e:
            await self.close()
            raise ConnectionError(f"{self.source}: {e!r}") from e
        except BaseException:
            await self.close()
            raise

    async def _roundtrip(self, api_key: int, version: int, body: Any, expect: type[_R]) -> _R:
        reader, writer = self._reader, self._writer
        assert reader is not None and writer is not None
        self._correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        writer.write(encode_request(api_key, version, self._correlation_id, self.client_id, body))
        # Bounded like the reads: a peer that stops reading (a stalled route,
        # a paused process) must not hold the fetcher past the socket timeout.
        await asyncio.wait_for(writer.drain(), self.timeout_s)
        head = await asyncio.wait_for(reader.readexactly(4), self.timeout_s)
        size = _SIZE.unpack(head)[0]
        if size < 4 or size > self.max_response_bytes:
            raise ConnectionError(f"response frame of {size} bytes from {self.source}")
        frame = await asyncio.wait_for(reader.readexactly(size), self.timeout_s)
        if _SIZE.unpack_from(frame, 0)[0] != self._correlation_id:
            raise ConnectionError(f"correlation id mismatch from {self.source}")
        return decode_response(api_key, version, memoryview(frame), expect=expect)

    async def close(self) -> None:
        writer, self._reader, self._writer = self._writer, None, None
        if writer is not None:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
