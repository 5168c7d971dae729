"""A blocking connection to one broker on pylog's codec: what the Spark
source's executors and the benchmarks use to speak Kafka without a client
library. Requests may be pipelined: ``send`` several, then ``recv`` their
responses in the same order.

On an SSL or SASL_SSL listener pass ``ssl_context`` (the socket is wrapped,
the server's name checked as the context says); on a SASL listener
``authenticate`` is called with the connection once it is open, to log in
(pylog.security's ``authenticate_blocking``: this layer knows no SASL)."""

from __future__ import annotations

import socket
import ssl
import struct
from collections.abc import Callable
from typing import TypeVar, overload

from pylog.errors import KafkaError

from ._runtime import Body
from ._struct import Struct
from .codec import decode_response, encode_request
from .messages import Response

__all__ = ["KafkaConnection"]

_SIZE = struct.Struct(">i")
_C = TypeVar("_C", bound="KafkaConnection")
_R = TypeVar("_R", bound=Response)


class KafkaConnection:
    """Connects to the first reachable ``host:port`` of the comma-separated
    ``servers`` (from ``source_address`` when given: a loopback alias, say);
    KafkaError (naming every address tried) when none is."""

    def __init__(
        self,
        servers: str,
        *,
        timeout: float | None = 30.0,
        client_id: str = "pylog",
        ssl_context: ssl.SSLContext | None = None,
        authenticate: Callable[[KafkaConnection], None] | None = None,
        source_address: tuple[str, int] | None = None,
    ) -> None:
        self.client_id = client_id
        self._correlation_id = 0
        errors: list[str] = []
        for server in (s.strip() for s in servers.split(",") if s.strip()):
            host, _, port = server.rpartition(":")
            try:
                sock = socket.create_connection(
                    (host, int(port)), timeout=timeout, source_address=source_address
                )
            except (OSError, ValueError) as e:
                errors.append(f"{server}: {e}")
                continue
            try:
                # Small requests answered one by one: no Nagle delay.
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if ssl_context is not None:
                    sock = ssl_context.wrap_socket(sock, server_hostname=host.strip("[]"))
            except (OSError, ValueError) as e:
                sock.close()
                errors.append(f"{server}: TLS: {e}")
                continue
            self.sock = sock
            break
        else:
            raise KafkaError(f"cannot connect to any of {servers!r}: {errors}")
        if authenticate is not None:
            try:
                authenticate(self)
            except BaseException:
                self.sock.close()
                raise

    def close(self) -> None:
        self.sock.close()

    def __enter__(self: _C) -> _C:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _recv_exactly(self, n: int) -> bytearray:
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            k = self.sock.recv_into(view[got:])
            if k == 0:
                raise KafkaError("broker closed the connection")
            got += k
        return buf

    def send(self, api_key: int, version: int, body: Body) -> None:
        """Write one request: ``body`` is the request's class or a mapping of its fields."""
        self._correlation_id += 1
        self.sock.sendall(
            encode_request(api_key, version, self._correlation_id, self.client_id, body)
        )

    @overload
    def recv(self, api_key: int, version: int) -> Struct: ...
    @overload
    def recv(self, api_key: int, version: int, expect: type[_R]) -> _R: ...
    def recv(self, api_key: int, version: int, expect: type[_R] | None = None) -> Struct:
        """The next response, decoded as ``api_key`` at ``version``: typed as
        ``expect`` (``MetadataResponse``, ...) when given, else as a ``Struct``,
        whose fields the type checker takes on trust."""
        (size,) = _SIZE.unpack(self._recv_exactly(4))
        frame = self._recv_exactly(size)
        if expect is None:
            return decode_response(api_key, version, frame)
        return decode_response(api_key, version, frame, expect=expect)

    @overload
    def request(self, api_key: int, version: int, body: Body) -> Struct: ...
    @overload
    def request(self, api_key: int, version: int, body: Body, expect: type[_R]) -> _R: ...
    def request(
        self, api_key: int, version: int, body: Body, expect: type[_R] | None = None
    ) -> Struct:
        """``send`` then ``recv``."""
        self.send(api_key, version, body)
        if expect is None:
            return self.recv(api_key, version)
        return self.recv(api_key, version, expect)
