"""The /metrics endpoint (metrics.port) of a real broker process against
hostile HTTP: an oversized request line is refused with a status, a request
dribbled a header line at a time is cut off, a crowd of idle connections
holds neither the endpoint nor the broker, and scrapes keep working."""

from __future__ import annotations

import socket
import time
import urllib.request
from collections.abc import Iterator

import pytest
from broker_process import BrokerProcess, metrics_broker

from pylog.protocol.client import KafkaConnection


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, int]]:
    with metrics_broker(tmp_path_factory.mktemp("metrics") / "data") as started:
        yield started


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        return str(r.read().decode())


def answer_of(sock: socket.socket, timeout: float) -> bytes:
    """Everything the server sends until it closes (or ``timeout`` passes)."""
    sock.settimeout(timeout)
    out = b""
    try:
        while chunk := sock.recv(65536):
            out += chunk
    except (TimeoutError, ConnectionResetError):
        pass
    return out


def test_scrape(broker: tuple[BrokerProcess, int]) -> None:
    text = scrape(broker[1])
    assert "# TYPE kafka_server_socketservermetrics_connection_count gauge" in text


def test_an_oversized_request_line_is_refused(broker: tuple[BrokerProcess, int]) -> None:
    _, port = broker
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = answer_of(s, 10)
    assert answer.startswith(b"HTTP/1.") and b" 414 " in answer.split(b"\r\n")[0]
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"GET /metrics HTTP/1.1\r\n" + b"X-Big: " + b"b" * 70_000 + b"\r\n\r\n")
        answer = answer_of(s, 10)
    assert answer.startswith(b"HTTP/1.") and b" 431 " in answer.split(b"\r\n")[0]
    assert scrape(port)


def test_a_dribbled_request_is_cut_off(broker: tuple[BrokerProcess, int]) -> None:
    _, port = broker
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(0.5)
    started = time.monotonic()
    try:
        s.sendall(b"GET /metrics HTTP/1.1\r\n")
        cut = False
        # A header line every half second: each within any per-read timeout.
        while time.monotonic() - started < 30:
            try:
                s.sendall(b"X-Slow: 1\r\n")
                if s.recv(65536) == b"":
                    cut = True
                    break
            except TimeoutError:
                continue
            except OSError:
                cut = True
                break
        assert cut, "a request dribbled for 30 s is still being read"
    finally:
        s.close()
    assert scrape(port)


def test_idle_connections_hold_neither_the_endpoint_nor_the_broker(
    broker: tuple[BrokerProcess, int],
) -> None:
    b, port = broker
    idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(200)]
    try:
        with KafkaConnection(b.bootstrap, timeout=10) as conn:
            assert conn.request(18, 0, {}).error_code == 0
        # Refused or served, the endpoint answers within its deadline.
        deadline = time.monotonic() + 30
        while True:
            try:
                assert scrape(port)
                break
            except OSError:
                assert time.monotonic() < deadline, "the endpoint stayed unavailable"
                time.sleep(0.5)
    finally:
        for s in idle:
            s.close()
    assert scrape(port)
