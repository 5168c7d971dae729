"""SaslHandshake and SaslAuthenticate as the broker's handlers answer them.

On a SASL listener the connection's authenticator (the network layer, as in
Kafka) answers both, before and after authentication (re-authentication,
KIP-368); these handlers see them only on the other listeners — PLAINTEXT
and SSL, which authenticate no one by SASL — and answer as Kafka's KafkaApis
does there: ILLEGAL_SASL_STATE.
"""

from __future__ import annotations

from pylog.errors import ErrorCode
from pylog.network import Request
from pylog.protocol.messages import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

__all__ = ["SaslApis"]


class SaslApis:
    async def handle_sasl_handshake_request(
        self, request: Request, body: SaslHandshakeRequest
    ) -> SaslHandshakeResponse:
        return SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])

    async def handle_sasl_authenticate_request(
        self, request: Request, body: SaslAuthenticateRequest
    ) -> SaslAuthenticateResponse:
        return SaslAuthenticateResponse(
            error_code=ErrorCode.ILLEGAL_SASL_STATE,
            error_message="SaslAuthenticate request received after successful authentication",
            auth_bytes=b"",
        )
