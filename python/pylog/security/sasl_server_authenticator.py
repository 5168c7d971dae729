"""SaslServerAuthenticator: one connection's SASL authentication on a
SASL_PLAINTEXT or SASL_SSL listener (Kafka's ``SaslServerAuthenticator``,
with the session lifetime of KIP-368).

The network layer shows it every request as it arrives (:meth:`admit`) and
hands it the SASL requests to answer (:meth:`handle`). The exchange, as
Kafka's clients drive it:

1. optionally ApiVersions (answered by the broker as usual);
2. SaslHandshake naming a mechanism of ``sasl.enabled.mechanisms``
   (UNSUPPORTED_SASL_MECHANISM, listing the enabled ones, closes otherwise);
3. the mechanism's tokens — in SaslAuthenticate requests after a v1
   handshake, or after a v0 handshake as bare size-prefixed frames with
   bare size-prefixed answers (:attr:`unframed`);
4. authenticated: the principal is ``User:<name>`` and every API is open.

Before authentication only ApiVersions, SaslHandshake and SaslAuthenticate
may come; anything else closes the connection (:meth:`admit` says why). A
failed exchange answers SASL_AUTHENTICATION_FAILED with Kafka's message and
closes the connection; the network layer delays that answer by
``connection.failed.authentication.delay.ms``.

Re-authentication (KIP-368): with ``connections.max.reauth.ms`` > 0 a
successful SaslAuthenticate (v1+) tells the client its session lifetime; a
client that speaks v1+ re-authenticates on the same connection before then
(SaslHandshake, then SaslAuthenticate, with the same mechanism and ending as
the same principal). Once the session has expired, any request but a
SaslHandshake closes the connection (:meth:`admit`).
"""

from __future__ import annotations

import enum
import struct
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pylog.errors import ErrorCode
from pylog.logsafe import quoted
from pylog.protocol import ApiKey, RequestHeader, decode_request, encode_response
from pylog.protocol.messages import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from pylog.security.credential_cache import CredentialCache
from pylog.security.kafka_principal import KafkaPrincipal
from pylog.security.plain_sasl_server import PlainSaslServer
from pylog.security.sasl_server import SaslAuthenticationError, SaslServer
from pylog.security.scram_credential import ScramCredential
from pylog.security.scram_mechanism import ScramMechanism
from pylog.security.scram_sasl_server import ScramSaslServer

__all__ = [
    "SASL_MECHANISMS",
    "SaslResult",
    "SaslServerAuthenticator",
    "SaslServerConfig",
]

#: The mechanisms pylog serves.
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_SIZE = struct.Struct(">i")
_BEFORE_HANDSHAKE = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE})


@dataclass(frozen=True)
class SaslServerConfig:
    """A SASL listener's settings."""

    listener: str
    mechanisms: tuple[str, ...]
    #: PLAIN's users (``user_<name>`` of the PlainLoginModule): name → password.
    plain_users: Mapping[str, str] = field(default_factory=dict, repr=False)
    #: SCRAM credentials by user and mechanism (the metadata store's).
    credentials: Callable[[str, ScramMechanism], ScramCredential | None] = field(
        default=lambda user, mechanism: None, repr=False
    )
    #: connections.max.reauth.ms per mechanism (0: sessions do not expire).
    max_reauth_ms: Mapping[str, int] = field(default_factory=dict)
    #: connection.failed.authentication.delay.ms
    failed_authentication_delay_ms: int = 100
    #: sasl.server.max.receive.size: largest frame before authentication.
    max_receive_size: int = 524_288

    @classmethod
    def from_cache(cls, cache: CredentialCache, **kwargs: Any) -> SaslServerConfig:
        return cls(credentials=cache.get, **kwargs)

    def new_server(self, mechanism: str) -> SaslServer:
        if mechanism == "PLAIN":
            return PlainSaslServer(self.plain_users)
        scram = ScramMechanism.by_name(mechanism)
        if scram is None:
            raise ValueError(f"no SASL server for {mechanism}")
        return ScramSaslServer(scram, self.credentials)


class _State(enum.Enum):
    HANDSHAKE = "waiting for SaslHandshake"
    AUTHENTICATE = "authenticating"
    COMPLETE = "authenticated"
    REAUTHENTICATE = "re-authenticating"
    FAILED = "failed"


@dataclass(slots=True)
class SaslResult:
    """What to write back (encoded response chunks; none for a failed
    unframed exchange) and, on failure, why (the log line) — the connection
    then closes once the answer is written."""

    chunks: list[Any]
    failure: str | None = None


class SaslServerAuthenticator:
    def __init__(
        self, config: SaslServerConfig, clock_ns: Callable[[], int] = time.monotonic_ns
    ) -> None:
        self.config = config
        self._clock = clock_ns
        self._state = _State.HANDSHAKE
        self._server: SaslServer | None = None
        self.mechanism: str | None = None
        #: After a v0 SaslHandshake, tokens come as bare frames.
        self.unframed = False
        self.principal: KafkaPrincipal | None = None
        #: When the session ends (monotonic ns), or None: never.
        self.session_expiry_ns: int | None = None
        #: The client used SaslAuthenticate v1+ (and so can re-authenticate).
        self.supports_reauthentication = False
        self.reauthentications = 0

    # ------------------------------------------------------------ state

    @property
    def complete(self) -> bool:
        """Authenticated, including while a re-authentication is under way."""
        return self.principal is not None and self._state is not _State.FAILED

    @property
    def state(self) -> str:
        return self._state.value

    def session_expired(self, now_ns: int | None = None) -> bool:
        expiry = self.session_expiry_ns
        return expiry is not None and (now_ns or self._clock()) > expiry

    def admit(self, api_key: int, now_ns: int | None = None) -> str | None:
        """Why a request with ``api_key`` arriving now closes the connection, or None."""
        state = self._state
        if state is _State.COMPLETE:
            if api_key != ApiKey.SASL_HANDSHAKE and self.session_expired(now_ns):
                return (
                    f"its session (connections.max.reauth.ms) expired and a "
                    f"{_api_name(api_key)} request came instead of a re-authentication"
                )
            return None
        if state is _State.HANDSHAKE:
            if api_key in _BEFORE_HANDSHAKE:
                return None
            return f"Unexpected Kafka request of type {_api_name(api_key)} during SASL handshake"
        if state in (_State.AUTHENTICATE, _State.REAUTHENTICATE):
            if api_key == ApiKey.SASL_AUTHENTICATE and not self.unframed:
                return None
            return (
                f"Unexpected Kafka request of type {_api_name(api_key)} during SASL "
                f"{'re-' if state is _State.REAUTHENTICATE else ''}authentication"
            )
        return "its authentication failed"

    def handles(self, api_key: int) -> bool:
        """Whether this authenticator, not the broker's handlers, answers ``api_key``."""
        return api_key in (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE)

    # ------------------------------------------------------------ requests

    def handle(self, header: RequestHeader, frame: memoryview) -> SaslResult:
        """Answer a SaslHandshake or SaslAuthenticate request (``header`` of
        api version -1: an unframed token, ``frame`` the token itself).
        KafkaError from the codec (a malformed request) propagates."""
        if header.api_version < 0:
            return self._token(bytes(frame))
        if header.api_key == ApiKey.SASL_HANDSHAKE:
            body = decode_request(header, frame, SaslHandshakeRequest)
            return self._handshake(header, body.mechanism)
        auth = decode_request(header, frame, SaslAuthenticateRequest)
        return self._authenticate(header, bytes(auth.auth_bytes))

    def _handshake(self, header: RequestHeader, mechanism: str) -> SaslResult:
        enabled = list(self.config.mechanisms)
        if self._state is _State.COMPLETE:
            if not self.supports_reauthentication:
                # Kafka's KafkaApis answer to a handshake on an authenticated connection.
                return SaslResult(
                    encode_response(
                        header,
                        SaslHandshakeResponse(
                            error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[]
                        ),
                    )
                )
            if mechanism != self.mechanism:
                return SaslResult(
                    encode_response(
                        header,
                        SaslHandshakeResponse(
                            error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=enabled
                        ),
                    ),
                    failure=(
                        f"SASL mechanism {quoted(mechanism)} requested by client is not "
                        f"supported for re-authentication of mechanism {self.mechanism}"
                    ),
                )
            self._state = _State.REAUTHENTICATE
            self._server = self.config.new_server(mechanism)
            return SaslResult(
                encode_response(header, SaslHandshakeResponse(error_code=0, mechanisms=enabled))
            )
        if mechanism not in enabled:
            self._state = _State.FAILED
            return SaslResult(
                encode_response(
                    header,
                    SaslHandshakeResponse(
                        error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=enabled
                    ),
                ),
                failure=f"Unsupported SASL mechanism {quoted(mechanism)}",
            )
        self.mechanism = mechanism
        self._server = self.config.new_server(mechanism)
        self._state = _State.AUTHENTICATE
        self.unframed = header.api_version == 0
        return SaslResult(
            encode_response(header, SaslHandshakeResponse(error_code=0, mechanisms=enabled))
        )

    def _generic_message(self) -> str:
        what = "re-authentication" if self._state is _State.REAUTHENTICATE else "authentication"
        return (
            f"Authentication failed during {what} due to invalid credentials with SASL "
            f"mechanism {self.mechanism}"
        )

    def _evaluate(self, token: bytes) -> tuple[bytes, bool]:
        """(challenge, exchange complete); SaslAuthenticationError on failure."""
        server = self._server
        if server is None:
            raise SaslAuthenticationError("a SASL token before SaslHandshake")
        challenge = server.evaluate(token)
        if not server.complete:
            return challenge, False
        principal = KafkaPrincipal.user(server.authorization_id)
        if self._state is _State.REAUTHENTICATE and principal != self.principal:
            raise SaslAuthenticationError(
                f"re-authentication as {quoted(str(principal))} on a connection of "
                f"{quoted(str(self.principal))}",
                f"Cannot change principals during re-authentication from "
                f"{self.principal}: {principal}",
            )
        if self._state is _State.REAUTHENTICATE:
            self.reauthentications += 1
        self.principal = principal
        self._state = _State.COMPLETE
        self._server = None
        return challenge, True

    def _session_lifetime_ms(self) -> int:
        """Starts the session: its lifetime (0: unbounded) from now."""
        lifetime = max(0, int(self.config.max_reauth_ms.get(self.mechanism or "", 0)))
        self.session_expiry_ns = self._clock() + lifetime * 1_000_000 if lifetime else None
        return lifetime

    def _authenticate(self, header: RequestHeader, token: bytes) -> SaslResult:
        if self._state is _State.COMPLETE:
            return SaslResult(
                encode_response(
                    header,
                    SaslAuthenticateResponse(
                        error_code=ErrorCode.ILLEGAL_SASL_STATE,
                        error_message="SaslAuthenticate request received after successful "
                        "authentication",
                        auth_bytes=b"",
                    ),
                )
            )
        if header.api_version > 0:
            self.supports_reauthentication = True
        try:
            challenge, done = self._evaluate(token)
        except SaslAuthenticationError as e:
            message = e.client_message or self._generic_message()
            self._state = _State.FAILED
            return SaslResult(
                encode_response(
                    header,
                    SaslAuthenticateResponse(
                        error_code=ErrorCode.SASL_AUTHENTICATION_FAILED,
                        error_message=message,
                        auth_bytes=b"",
                    ),
                ),
                failure=e.reason,
            )
        lifetime = self._session_lifetime_ms() if done else 0
        return SaslResult(
            encode_response(
                header,
                SaslAuthenticateResponse(
                    error_code=0,
                    error_message=None,
                    auth_bytes=challenge,
                    session_lifetime_ms=lifetime,
                ),
            )
        )

    def _token(self, token: bytes) -> SaslResult:
        """An unframed token (after SaslHandshake v0): the answer is the bare
        challenge; a failure answers nothing (Kafka closes the connection)."""
        try:
            challenge, done = self._evaluate(token)
        except SaslAuthenticationError as e:
            self._state = _State.FAILED
            return SaslResult([], failure=e.reason)
        if done:
            self._session_lifetime_ms()
            self.unframed = False
        return SaslResult([_SIZE.pack(len(challenge)) + challenge])


def _api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return f"api key {api_key}"
