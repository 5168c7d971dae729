"""SaslHandshake. No SASL mechanism is enabled until security lands, so every
handshake answers UNSUPPORTED_SASL_MECHANISM with no mechanisms, as a Kafka
listener without SASL would."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pylog.errors import ErrorCode
from pylog.network import Request

__all__ = ["SaslApis"]


class SaslApis:
    """SaslHandshake (SaslAuthenticate joins it with the first mechanism)."""

    async def handle_sasl_handshake_request(self, request: Request, body: Any) -> Mapping[str, Any]:
        return {"error_code": ErrorCode.UNSUPPORTED_SASL_MECHANISM, "mechanisms": []}
