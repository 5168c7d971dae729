"""GetTelemetrySubscriptions (api key 71) and PushTelemetry (72), KIP-714's
client telemetry, and ListConfigResources (74; ListClientMetricsResources
until Kafka 4.1, KIP-1142), which ``kafka-client-metrics --list`` and
``--describe`` send (Kafka's ``KafkaApis.handleGetTelemetrySubscriptionsRequest``
and ``handlePushTelemetryRequest``): both answered by the broker's
ClientMetricsManager (:mod:`pylog.server.client_metrics_manager`); neither
needs an ACL, as in Kafka. Any failure inside the manager is INVALID_REQUEST,
as Kafka answers it; the broker goes on serving.

ListConfigResources needs DESCRIBE_CONFIGS on the cluster (else
CLUSTER_AUTHORIZATION_FAILED); v0 lists the client metrics subscriptions, v1
the resources of the types asked for (none: all it lists). pylog lists
client-metrics subscriptions and topics; another type is INVALID_REQUEST.

Unlike Kafka, which advertises these APIs only when a MetricsReporter takes
client metrics, pylog always does: its receiver keeps them itself.
"""

from __future__ import annotations

import logging

from pylog.broker.auth_helper import AuthHelper
from pylog.errors import ErrorCode
from pylog.metadata.store import MetadataStore
from pylog.network import Request
from pylog.protocol.messages import (
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
    ListConfigResourcesRequest,
    ListConfigResourcesResponse,
    PushTelemetryRequest,
    PushTelemetryResponse,
)
from pylog.protocol.messages.list_config_resources_response import ConfigResource
from pylog.security.acl_operation import AclOperation
from pylog.server.client_metrics_manager import ClientMetricsManager

__all__ = ["ClientMetricsApis"]

_log = logging.getLogger("pylog.broker.client_metrics_apis")


_TOPIC, _CLIENT_METRICS = 2, 16


class ClientMetricsApis:
    #: Who may do what (KafkaApis sets the broker's; none: everything allowed).
    auth: AuthHelper = AuthHelper()

    def __init__(self, manager: ClientMetricsManager, store: MetadataStore) -> None:
        self.manager = manager
        self.store = store

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
            return await self.manager.process_push_telemetry(request, body)
        except Exception:
            _log.exception("PushTelemetry failed")
            return PushTelemetryResponse(error_code=ErrorCode.INVALID_REQUEST)

    async def handle_list_config_resources_request(
        self, request: Request, body: ListConfigResourcesRequest
    ) -> ListConfigResourcesResponse:
        if not self.auth.authorize_cluster(request, AclOperation.DESCRIBE_CONFIGS):
            return ListConfigResourcesResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        types = set(body.resource_types) if request.header.api_version >= 1 else {_CLIENT_METRICS}
        types = types or {_TOPIC, _CLIENT_METRICS}
        if types - {_TOPIC, _CLIENT_METRICS}:
            return ListConfigResourcesResponse(error_code=ErrorCode.INVALID_REQUEST)
        out = []
        if _CLIENT_METRICS in types:
            out += [
                ConfigResource(resource_name=n, resource_type=_CLIENT_METRICS)
                for n in self.manager.subscription_names()
            ]
        if _TOPIC in types:
            out += [
                ConfigResource(resource_name=t.name, resource_type=_TOPIC)
                for t in sorted(self.store.topics(), key=lambda t: t.name)
            ]
        return ListConfigResourcesResponse(error_code=ErrorCode.NONE, config_resources=out)
