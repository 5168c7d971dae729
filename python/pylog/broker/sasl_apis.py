"""SaslHandshake. No SASL mechanism is enabled until security lands, so every
handshake answers UNSUPPORTED_SASL_MECHANISM with no mechanisms, as a Kafka
listener without SASL would."""

from __future__ import annotations

from pylog.errors import ErrorCode
from pylog.network import Request
from pylog.protocol.messages import SaslHandshakeRequest, SaslHandshakeResponse

__all__ = ["SaslApis"]


class SaslApis:
    """SaslHandshake (SaslAuthenticate joins it with the first mechanism)."""

    async def handle_sasl_handshake_request(
        self, request: Request, body: SaslHandshakeRequest
    ) -> SaslHandshakeResponse:
        return SaslHandshakeResponse(error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=[])
