"""Hostile and broken input on the secured listeners, against a real broker
process, spoken with pylog's own protocol client so each byte is the test's.

Each probe closes only its own connection, with one log line naming it, and
the broker keeps serving an authenticated client: a request before
authentication, a SCRAM client-final whose nonce is not the server's, SASL
exchanges cut short, garbage instead of a TLS handshake. Also: the unframed
tokens of SaslHandshake v0, and KIP-368 sessions (the lifetime a
SaslAuthenticate v1 answer gives, re-authentication on the same connection,
and the close of a connection that let its session expire).
"""

from __future__ import annotations

import base64
import contextlib
import os
import socket
import ssl
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from broker_process import BrokerProcess
from security_support import PLAIN_USERS, Certs, listener_ports, make_certs, secure_listeners

from pylog.errors import ErrorCode, KafkaError
from pylog.protocol import ApiKey
from pylog.protocol.client import KafkaConnection
from pylog.protocol.messages import (
    MetadataResponse,
    SaslAuthenticateResponse,
    SaslHandshakeResponse,
)
from pylog.security.sasl_client_authenticator import ClientSecurity, authenticate_blocking
from pylog.security.scram_credential import ScramCredential, salted_password
from pylog.security.scram_mechanism import ScramMechanism

SCRAM_USER, SCRAM_PASSWORD = "alice", "alice-scram-secret"
REAUTH_MS = 1500
GENERIC_SCRAM = (
    "Authentication failed during authentication due to invalid credentials with SASL "
    "mechanism SCRAM-SHA-512"
)


class Hardened:
    def __init__(self, broker: BrokerProcess, certs: Certs, log: Path) -> None:
        self.broker = broker
        self.certs = certs
        self.log = log
        self.ports = listener_ports(broker.start_line)

    def address(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    def tls(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.certs.ca))
        return ctx

    def connect(self, listener: str, *, client_id: str = "probe") -> KafkaConnection:
        return KafkaConnection(
            self.address(listener),
            timeout=20,
            client_id=client_id,
            ssl_context=self.tls() if listener.endswith("SSL") else None,
        )

    def lines_about(self, port: int, wait_for: str | None = None) -> list[str]:
        """The broker's log lines about the connection from ``port``
        (waiting up to 10 s for one holding ``wait_for``)."""
        deadline = time.monotonic() + 10
        while True:
            lines = [
                line
                for line in self.log.read_text().splitlines()
                if f":{port}," in line or f":{port})" in line
            ]
            if wait_for is None or any(wait_for in line for line in lines):
                return lines
            if time.monotonic() > deadline:
                return lines
            time.sleep(0.05)

    def still_serving(self) -> None:
        """A PLAIN login and a Metadata request on SASL_PLAINTEXT still work."""
        with KafkaConnection(
            self.address("SASL_PLAINTEXT"),
            timeout=20,
            authenticate=lambda c: authenticate_blocking(
                c.request,
                ClientSecurity(
                    "SASL_PLAINTEXT",
                    sasl_mechanism="PLAIN",
                    username="alice",
                    password=PLAIN_USERS["alice"],
                ),
            ),
        ) as conn:
            r = conn.request(ApiKey.METADATA, 9, {"topics": []}, MetadataResponse)
            assert r.brokers


@pytest.fixture(scope="module")
def hardened(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hardened]:
    base = tmp_path_factory.mktemp("hardened")
    certs = make_certs(base / "certs")
    log = base / "broker.log"
    b = BrokerProcess(
        base / "data",
        secure_listeners(
            certs,
            **{"listener.name.sasl_plaintext.plain.connections.max.reauth.ms": REAUTH_MS},
        ),
        log_path=log,
        log_level="INFO",
    ).start()
    h = Hardened(b, certs, log)
    cred = ScramCredential.from_password(ScramMechanism.SCRAM_SHA_512, SCRAM_PASSWORD, 4096)
    salt = cred.salt
    with h.connect("PLAINTEXT") as conn:
        r = conn.request(
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
            0,
            {
                "deletions": [],
                "upsertions": [
                    {
                        "name": SCRAM_USER,
                        "mechanism": ScramMechanism.SCRAM_SHA_512.type_id,
                        "iterations": 4096,
                        "salt": salt,
                        "salted_password": salted_password(
                            ScramMechanism.SCRAM_SHA_512, SCRAM_PASSWORD, salt, 4096
                        ),
                    }
                ],
            },
        )
        assert [(x.user, x.error_code) for x in r.results] == [(SCRAM_USER, 0)]
    try:
        yield h
    finally:
        b.stop()


def closed(conn: KafkaConnection) -> bool:
    """Whether the broker closed the connection (reads until EOF, 10 s at most)."""
    conn.sock.settimeout(10)
    try:
        return conn.sock.recv(1) == b""
    except (ConnectionError, ssl.SSLError):
        return True
    except TimeoutError:
        return False


def handshake(conn: KafkaConnection, mechanism: str, version: int = 1) -> SaslHandshakeResponse:
    return conn.request(ApiKey.SASL_HANDSHAKE, version, {"mechanism": mechanism},
                        SaslHandshakeResponse)  # fmt: skip


def authenticate(conn: KafkaConnection, token: bytes, version: int = 1) -> SaslAuthenticateResponse:
    return conn.request(ApiKey.SASL_AUTHENTICATE, version, {"auth_bytes": token},
                        SaslAuthenticateResponse)  # fmt: skip


def plain(user: str, password: str) -> bytes:
    return f"\0{user}\0{password}".encode()


# ---------------------------------------------------------------- probes


@pytest.mark.parametrize("listener", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_a_request_before_authentication_closes_that_connection(
    hardened: Hardened, listener: str
) -> None:
    conn = hardened.connect(listener)
    port = conn.sock.getsockname()[1]
    conn.send(ApiKey.METADATA, 9, {"topics": None})
    assert closed(conn)
    conn.close()
    lines = hardened.lines_about(port, "during SASL handshake")
    assert len(lines) == 1, lines
    assert "Unexpected Kafka request of type METADATA during SASL handshake" in lines[0]
    hardened.still_serving()


def test_a_request_between_handshake_and_authenticate_closes_that_connection(
    hardened: Hardened,
) -> None:
    conn = hardened.connect("SASL_PLAINTEXT")
    port = conn.sock.getsockname()[1]
    assert handshake(conn, "PLAIN").error_code == 0
    conn.send(ApiKey.PRODUCE, 9, {"acks": 1, "timeout_ms": 1000, "topic_data": []})
    assert closed(conn)
    conn.close()
    lines = hardened.lines_about(port, "during SASL authentication")
    assert len(lines) == 1, lines
    assert "Unexpected Kafka request of type PRODUCE during SASL authentication" in lines[0]
    hardened.still_serving()


def test_a_scram_nonce_mismatch_fails_that_login(hardened: Hardened) -> None:
    conn = hardened.connect("SASL_SSL")
    port = conn.sock.getsockname()[1]
    assert handshake(conn, "SCRAM-SHA-512").error_code == 0
    client_nonce = base64.b64encode(os.urandom(18)).decode().replace("+", "-")
    first = authenticate(conn, f"n,,n={SCRAM_USER},r={client_nonce}".encode())
    assert first.error_code == 0
    server_first = bytes(first.auth_bytes).decode()
    fields = dict(kv.split("=", 1) for kv in server_first.split(","))
    assert fields["r"].startswith(client_nonce) and len(fields["r"]) > len(client_nonce)
    # A well-formed client-final with the right proof for a nonce the server
    # never gave: refused before the proof matters.
    forged = client_nonce + "forged-server-part"
    mech = ScramMechanism.SCRAM_SHA_512
    salted = salted_password(mech, SCRAM_PASSWORD, base64.b64decode(fields["s"]), int(fields["i"]))
    import hashlib
    import hmac

    without_proof = f"c=biws,r={forged}"
    auth_message = f"n={SCRAM_USER},r={client_nonce},{server_first},{without_proof}".encode()
    client_key = hmac.digest(salted, b"Client Key", "sha512")
    signature = hmac.digest(hashlib.sha512(client_key).digest(), auth_message, "sha512")
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    final = authenticate(conn, f"{without_proof},p={base64.b64encode(proof).decode()}".encode())
    assert (final.error_code, final.error_message) == (
        ErrorCode.SASL_AUTHENTICATION_FAILED,
        GENERIC_SCRAM,
    )
    assert closed(conn)
    conn.close()
    lines = hardened.lines_about(port, "nonce mismatch")
    assert len(lines) == 1, lines
    assert "a nonce mismatch for user 'alice'" in lines[0]
    assert SCRAM_PASSWORD not in hardened.log.read_text()
    hardened.still_serving()


@pytest.mark.parametrize(
    ("token", "why"),
    [
        (b"n,,n=ali", "a malformed client-first message"),
        (b"n,,", "a malformed client-first message"),
        (b"", "a malformed client-first message"),
        (b"\xff\xfe", "not ASCII"),
    ],
)
def test_a_truncated_scram_message_fails_that_login(
    hardened: Hardened, token: bytes, why: str
) -> None:
    conn = hardened.connect("SASL_SSL")
    port = conn.sock.getsockname()[1]
    assert handshake(conn, "SCRAM-SHA-512").error_code == 0
    r = authenticate(conn, token)
    assert (r.error_code, r.error_message) == (ErrorCode.SASL_AUTHENTICATION_FAILED, GENERIC_SCRAM)
    assert closed(conn)
    conn.close()
    lines = hardened.lines_about(port, why)
    assert len(lines) == 1 and why in lines[0], lines
    hardened.still_serving()


def test_a_sasl_exchange_cut_off_mid_frame_leaves_the_broker_serving(
    hardened: Hardened,
) -> None:
    # SaslAuthenticate's frame promises 200 bytes, 20 arrive, the client goes.
    conn = hardened.connect("SASL_SSL")
    ports = [conn.sock.getsockname()[1]]
    assert handshake(conn, "SCRAM-SHA-512").error_code == 0
    conn.sock.sendall(struct.pack(">i", 200) + b"\x00\x24\x00\x01" + b"x" * 16)
    conn.close()
    # the unframed form (SaslHandshake v0): a token frame cut short
    conn = hardened.connect("SASL_PLAINTEXT")
    ports.append(conn.sock.getsockname()[1])
    assert handshake(conn, "PLAIN", version=0).error_code == 0
    conn.sock.sendall(struct.pack(">i", 100) + b"\0alice\0")
    conn.close()
    for port in ports:  # one line each, naming the abandoned login
        lines = hardened.lines_about(port, "closed by the client during SASL authentication")
        assert len(lines) == 1, lines
        assert "during SASL authentication (authenticating" in lines[0]
    hardened.still_serving()
    assert "Traceback" not in hardened.log.read_text()


def test_bad_input_closes_only_its_own_connection(hardened: Hardened) -> None:
    """A client logged in before the bad input keeps its connection through
    all of it: a request before authenticating, a truncated SCRAM exchange,
    garbage instead of a TLS handshake."""
    keeper = KafkaConnection(
        hardened.address("SASL_PLAINTEXT"),
        timeout=20,
        authenticate=lambda c: authenticate_blocking(
            c.request,
            ClientSecurity("SASL_PLAINTEXT", sasl_mechanism="PLAIN", username="alice",
                           password=PLAIN_USERS["alice"]),
        ),
    )  # fmt: skip
    with keeper:
        assert keeper.request(ApiKey.METADATA, 9, {"topics": []}, MetadataResponse).brokers
        early = hardened.connect("SASL_SSL")
        early.send(ApiKey.METADATA, 9, {"topics": None})
        truncated = hardened.connect("SASL_SSL")
        assert handshake(truncated, "SCRAM-SHA-512").error_code == 0
        assert authenticate(truncated, b"n,,n=ali").error_code == (
            ErrorCode.SASL_AUTHENTICATION_FAILED
        )
        with socket.create_connection(("127.0.0.1", hardened.ports["SSL"]), timeout=10) as s:
            s.sendall(os.urandom(64))
            s.settimeout(10)
            with contextlib.suppress(ConnectionError):
                while s.recv(4096):
                    pass
        assert closed(early) and closed(truncated)
        early.close()
        truncated.close()
        # the same socket as before, still answered
        assert keeper.request(ApiKey.METADATA, 9, {"topics": []}, MetadataResponse).brokers


def test_a_plain_token_without_separators_is_refused(hardened: Hardened) -> None:
    conn = hardened.connect("SASL_PLAINTEXT")
    port = conn.sock.getsockname()[1]
    assert handshake(conn, "PLAIN").error_code == 0
    r = authenticate(conn, b"alice-and-nothing-else", version=2)
    assert r.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert r.error_message == "Invalid SASL/PLAIN response: expected 3 tokens, got 1"
    assert closed(conn)
    conn.close()
    assert len(hardened.lines_about(port, "malformed PLAIN token")) == 1
    hardened.still_serving()


@pytest.mark.parametrize("listener", ["SSL", "SASL_SSL"])
def test_garbage_instead_of_a_tls_handshake_closes_that_connection(
    hardened: Hardened, listener: str
) -> None:
    with socket.create_connection(("127.0.0.1", hardened.ports[listener]), timeout=10) as s:
        port = s.getsockname()[1]
        # a Kafka request where a TLS ClientHello belongs, then noise
        s.sendall(struct.pack(">i", 12) + b"\x00\x12\x00\x03" + b"\x00" * 8 + os.urandom(300))
        s.settimeout(10)
        data = b""
        try:
            while chunk := s.recv(4096):
                data += chunk
        except ConnectionError:
            pass
    lines = hardened.lines_about(port, "TLS handshake failed")
    assert len(lines) == 1, lines
    assert "TLS handshake failed" in lines[0]
    hardened.still_serving()


def test_unsupported_mechanism_is_answered_then_closed(hardened: Hardened) -> None:
    conn = hardened.connect("SASL_PLAINTEXT")
    port = conn.sock.getsockname()[1]
    r = handshake(conn, "GSSAPI")
    assert (r.error_code, r.mechanisms) == (ErrorCode.UNSUPPORTED_SASL_MECHANISM, ["PLAIN"])
    assert closed(conn)
    conn.close()
    assert len(hardened.lines_about(port, "Unsupported SASL mechanism")) == 1


# ---------------------------------------------------------------- working exchanges


def test_the_unframed_tokens_of_handshake_v0(hardened: Hardened) -> None:
    conn = hardened.connect("SASL_PLAINTEXT")
    assert handshake(conn, "PLAIN", version=0).error_code == 0
    token = plain("alice", PLAIN_USERS["alice"])
    conn.sock.sendall(struct.pack(">i", len(token)) + token)
    assert conn._recv_exactly(4) == b"\0\0\0\0"  # PLAIN's empty challenge, bare
    r = conn.request(ApiKey.METADATA, 9, {"topics": []}, MetadataResponse)
    assert r.brokers
    conn.close()


def test_sessions_expire_and_clients_reauthenticate(hardened: Hardened) -> None:
    """KIP-368 on the SASL_PLAINTEXT listener (PLAIN's connections.max.reauth.ms
    is 1500): the lifetime is announced, a re-authentication renews it, a
    re-authentication as another user is refused, and a request after the
    session expired closes the connection."""
    conn = hardened.connect("SASL_PLAINTEXT")
    port = conn.sock.getsockname()[1]
    assert handshake(conn, "PLAIN").error_code == 0
    r = authenticate(conn, plain("alice", PLAIN_USERS["alice"]), version=1)
    assert (r.error_code, r.session_lifetime_ms) == (0, REAUTH_MS)
    # v0 carries no lifetime; the client that used v1 may re-authenticate
    for _ in range(2):
        time.sleep(REAUTH_MS / 2000)
        assert handshake(conn, "PLAIN").error_code == 0
        r = authenticate(conn, plain("alice", PLAIN_USERS["alice"]), version=2)
        assert (r.error_code, r.session_lifetime_ms) == (0, REAUTH_MS)
        assert conn.request(ApiKey.METADATA, 9, {"topics": []}, MetadataResponse).brokers
    # the same connection cannot become someone else
    assert handshake(conn, "PLAIN").error_code == 0
    r = authenticate(conn, plain("admin", PLAIN_USERS["admin"]), version=2)
    assert r.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert (
        r.error_message
        == "Cannot change principals during re-authentication from User:alice: User:admin"
    )
    assert closed(conn)
    conn.close()
    assert len(hardened.lines_about(port, "re-authentication as")) == 1

    conn = hardened.connect("SASL_PLAINTEXT")
    port = conn.sock.getsockname()[1]
    assert handshake(conn, "PLAIN").error_code == 0
    assert authenticate(conn, plain("alice", PLAIN_USERS["alice"])).error_code == 0
    time.sleep(REAUTH_MS / 1000 + 0.3)
    conn.send(ApiKey.METADATA, 9, {"topics": []})
    assert closed(conn)
    conn.close()
    lines = hardened.lines_about(port, "expired")
    assert len(lines) == 1 and "connections.max.reauth.ms" in lines[0], lines


def test_a_broker_login_from_pylogs_own_client(hardened: Hardened) -> None:
    """The inter-broker client (SCRAM over TLS) against the SASL_SSL listener;
    a wrong password is a KafkaError naming Kafka's message."""

    def login(password: str) -> None:
        security = ClientSecurity("SASL_SSL", hardened.tls(), "SCRAM-SHA-512", SCRAM_USER,
                                  password)  # fmt: skip
        with KafkaConnection(
            hardened.address("SASL_SSL"),
            timeout=20,
            ssl_context=security.ssl_context,
            authenticate=lambda c: authenticate_blocking(c.request, security),
        ) as conn:
            assert conn.request(ApiKey.METADATA, 9, {"topics": []}, MetadataResponse).brokers

    login(SCRAM_PASSWORD)
    with pytest.raises(KafkaError, match="SASL_AUTHENTICATION_FAILED"):
        login("wrong")


def test_librdkafka_reauthenticates_before_its_session_ends(hardened: Hardened) -> None:
    """confluent-kafka producing for three sessions' time on the listener
    whose PLAIN sessions last 1.5 s: every record is delivered and no
    connection is closed for an expired session (the client re-authenticated
    in time each time, KIP-368)."""
    from confluent_kafka import Producer

    before = hardened.log.read_text().count("expired")
    p = Producer({
        "bootstrap.servers": hardened.address("SASL_PLAINTEXT"),
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
        "sasl.username": "alice", "sasl.password": PLAIN_USERS["alice"], "linger.ms": 5,
    })  # fmt: skip
    errors: list[object] = []
    sent = 0
    deadline = time.monotonic() + 3 * REAUTH_MS / 1000 + 0.5
    while time.monotonic() < deadline:
        p.produce("reauth", value=b"x", on_delivery=lambda e, m: errors.append(e) if e else None)
        sent += 1
        p.poll(0.05)
    assert p.flush(20) == 0 and errors == []
    assert sent > 20
    assert hardened.log.read_text().count("expired") == before
