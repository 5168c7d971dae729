"""GetTelemetrySubscriptions (api key 71) and PushTelemetry (72), KIP-714's
client telemetry (Kafka's ``KafkaApis.handleGetTelemetrySubscriptionsRequest``
and ``handlePushTelemetryRequest``): both answered by the broker's
ClientMetricsManager (:mod:`pylog.server.client_metrics_manager`); neither
needs an ACL, as in Kafka. Any failure inside the manager is INVALID_REQUEST,
as Kafka answers it; the broker goes on serving.

Unlike Kafka, which advertises these APIs only when a MetricsReporter takes
client metrics, pylog always does: its receiver keeps them itself.
"""

from __future__ import annotations

import logging

from pylog.errors import ErrorCode
from pylog.network import Request
from pylog.protocol.messages import (
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
    PushTelemetryRequest,
    PushTelemetryResponse,
)
from pylog.server.client_metrics_manager import ClientMetricsManager

__all__ = ["ClientMetricsApis"]

_log = logging.getLogger("pylog.broker.client_metrics_apis")


class ClientMetricsApis:
    def __init__(self, manager: ClientMetricsManager) -> None:
        self.manager = manager

    async def handle_get_telemetry_subscriptions_request(
        self, request: Request, body: GetTelemetrySubscriptionsRequest
    ) -> GetTelemetrySubscriptionsResponse:
        try:
            return self.manager.process_get_telemetry_subscriptions(request, body)
        except Exception:
            _log.exception("GetTelemetrySubscriptions failed")
            return GetTelemetrySubscriptionsResponse(error_code=ErrorCode.INVALID_REQUEST)

    async def handle_push_telemetry_request(
        self, request: Request, body: PushTelemetryRequest
    ) -> PushTelemetryResponse:
        try:
            return self.manager.process_push_telemetry(request, body)
        except Exception:
            _log.exception("PushTelemetry failed")
            return PushTelemetryResponse(error_code=ErrorCode.INVALID_REQUEST)
