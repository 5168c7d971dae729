"""SaslClientAuthenticator: a broker logging in to another broker
(replica fetchers, the controller's channel) on a SASL listener.

Kafka's inter-broker client: ``sasl.mechanism.inter.broker.protocol`` with the
broker's own credentials, the ``username`` and ``password`` options of
``listener.name.<inter-broker listener>.<mechanism>.sasl.jaas.config``. The
exchange is SaslHandshake v1 then SaslAuthenticate v1 until the mechanism is
done: PLAIN in one token, SCRAM in two (client-first, client-final; the
server's signature in server-final is checked, scramp's client).

:class:`ClientSecurity` is everything a connection to another broker needs:
the TLS context (SSL, SASL_SSL) and the SASL login (SASL_*). The drivers run
the exchange on a blocking socket (:func:`authenticate_blocking`, over a
request function) or on asyncio streams (:func:`authenticate_async`).
"""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from scramp import ScramClient, ScramException

from pylog.errors import ErrorCode, KafkaError
from pylog.protocol import ApiKey
from pylog.protocol.messages import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

__all__ = [
    "ClientSecurity",
    "SaslClient",
    "authenticate_async",
    "authenticate_blocking",
]

HANDSHAKE_VERSION = 1
AUTHENTICATE_VERSION = 1


class SaslClient:
    """One client-side exchange: :meth:`first` then :meth:`evaluate` each challenge."""

    def __init__(self, mechanism: str, username: str, password: str) -> None:
        self.mechanism = mechanism
        self._username = username
        self._password = password
        self._scram: ScramClient | None = None
        self._step = 0
        self.complete = False

    def first(self) -> bytes:
        if self.mechanism == "PLAIN":
            self.complete = True
            return f"\0{self._username}\0{self._password}".encode()
        try:
            self._scram = ScramClient([self.mechanism], self._username, self._password)
            return str(self._scram.get_client_first()).encode()
        except ScramException as e:
            raise KafkaError(f"SCRAM login as {self._username!r}: {e}") from None

    def evaluate(self, challenge: bytes) -> bytes | None:
        """The next token, or None when the exchange is over (server-final checked)."""
        scram = self._scram
        if scram is None:
            return None
        try:
            if self._step == 0:
                self._step = 1
                scram.set_server_first(challenge.decode())
                return str(scram.get_client_final()).encode()
            scram.set_server_final(challenge.decode())
        except (ScramException, UnicodeDecodeError) as e:
            raise KafkaError(f"SCRAM login as {self._username!r}: {e}") from None
        self.complete = True
        return None


@dataclass(frozen=True)
class ClientSecurity:
    """How this broker connects to another broker's inter-broker listener."""

    security_protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = field(default=None, repr=False)
    sasl_mechanism: str | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")

    def sasl_client(self) -> SaslClient:
        if not self.sasl_mechanism or self.username is None or self.password is None:
            raise KafkaError(
                f"{self.security_protocol}: no SASL mechanism or credentials for "
                "inter-broker connections"
            )
        return SaslClient(self.sasl_mechanism, self.username, self.password)


def _check_handshake(resp: SaslHandshakeResponse, mechanism: str) -> None:
    if resp.error_code:
        raise KafkaError(
            f"SaslHandshake for {mechanism} refused ({ErrorCode(resp.error_code).name}); "
            f"the broker enables {', '.join(resp.mechanisms) or 'none'}"
        )


def _check_authenticate(resp: SaslAuthenticateResponse) -> bytes:
    if resp.error_code:
        raise KafkaError(
            f"SASL authentication failed ({ErrorCode(resp.error_code).name}): {resp.error_message}"
        )
    return bytes(resp.auth_bytes)


def authenticate_blocking(request: Callable[..., object], security: ClientSecurity) -> None:
    """Run the exchange over ``request(api_key, version, body, expect)``, which
    sends one request and returns its decoded response. KafkaError on failure."""
    client = security.sasl_client()
    hs = request(
        ApiKey.SASL_HANDSHAKE,
        HANDSHAKE_VERSION,
        SaslHandshakeRequest(mechanism=client.mechanism),
        SaslHandshakeResponse,
    )
    assert isinstance(hs, SaslHandshakeResponse)
    _check_handshake(hs, client.mechanism)
    token: bytes | None = client.first()
    while token is not None:
        resp = request(
            ApiKey.SASL_AUTHENTICATE,
            AUTHENTICATE_VERSION,
            SaslAuthenticateRequest(auth_bytes=token),
            SaslAuthenticateResponse,
        )
        assert isinstance(resp, SaslAuthenticateResponse)
        challenge = _check_authenticate(resp)
        token = None if client.complete else client.evaluate(challenge)


async def authenticate_async(
    request: Callable[..., Awaitable[object]], security: ClientSecurity
) -> None:
    """:func:`authenticate_blocking` over an awaitable ``request``."""
    client = security.sasl_client()
    hs = await request(
        ApiKey.SASL_HANDSHAKE,
        HANDSHAKE_VERSION,
        SaslHandshakeRequest(mechanism=client.mechanism),
        SaslHandshakeResponse,
    )
    assert isinstance(hs, SaslHandshakeResponse)
    _check_handshake(hs, client.mechanism)
    token: bytes | None = client.first()
    while token is not None:
        resp = await request(
            ApiKey.SASL_AUTHENTICATE,
            AUTHENTICATE_VERSION,
            SaslAuthenticateRequest(auth_bytes=token),
            SaslAuthenticateResponse,
        )
        assert isinstance(resp, SaslAuthenticateResponse)
        challenge = _check_authenticate(resp)
        token = None if client.complete else client.evaluate(challenge)
