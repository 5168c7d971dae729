"""A blocking connection to one broker on pylog's codec: what the Spark
source's executors and the benchmarks use to speak Kafka without a client
library. Requests may be pipelined: ``send`` several, then ``recv`` their
responses in the same order."""

from __future__ import annotations

import socket
import struct
from typing import Any, TypeVar

from pylog.errors import KafkaError

from .codec import decode_response, encode_request

__all__ = ["KafkaConnection"]

_SIZE = struct.Struct(">i")
_C = TypeVar("_C", bound="KafkaConnection")


class KafkaConnection:
    """Connects to the first reachable ``host:port`` of the comma-separated
    ``servers``; KafkaError (naming every address tried) when none is."""

    def __init__(
        self, servers: str, *, timeout: float | None = 30.0, client_id: str = "pylog"
    ) -> None:
        self.client_id = client_id
        self._correlation_id = 0
        errors = []
        for server in (s.strip() for s in servers.split(",") if s.strip()):
            host, _, port = server.rpartition(":")
            try:
                self.sock = socket.create_connection((host, int(port)), timeout=timeout)
                break
            except (OSError, ValueError) as e:
                errors.append(f"{server}: {e}")
        else:
            raise KafkaError(f"cannot connect to any of {servers!r}: {errors}")
        # Small requests answered one by one: no Nagle delay.
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

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

    def send(self, api_key: int, version: int, body: dict[str, Any]) -> None:
        self._correlation_id += 1
        self.sock.sendall(
            encode_request(api_key, version, self._correlation_id, self.client_id, body)
        )

    def recv(self, api_key: int, version: int) -> Any:
        """The next response, decoded as ``api_key`` at ``version``."""
        (size,) = _SIZE.unpack(self._recv_exactly(4))
        return decode_response(api_key, version, self._recv_exactly(size))

    def request(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        self.send(api_key, version, body)
        return self.recv(api_key, version)
