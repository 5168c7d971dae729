"""KIP-714's broker side (Kafka's ``ClientMetricsManager``): which metrics
each client instance is asked for, how often, and what becomes of a push.

GetTelemetrySubscriptions gives a client (with a zero id: a new random one)
its instance id, the union of the metric prefixes of every subscription it
matches (``*`` if any asks for all), the shortest of their push intervals
(five minutes when none matches), the compression types the broker takes
(zstd, lz4, gzip, snappy, as Kafka lists them), ``telemetry.max.bytes`` and
delta temporality, and a subscription id that changes whenever that set
changes. PushTelemetry is checked in Kafka's order: after a terminating push
nothing more (INVALID_REQUEST); sooner than the push interval after the last
push, unless the client just fetched its subscription, THROTTLING_QUOTA_EXCEEDED;
a subscription id that is not the instance's current one
UNKNOWN_SUBSCRIPTION_ID (the client fetches again); an unknown compression
type UNSUPPORTED_COMPRESSION_TYPE; more than ``telemetry.max.bytes`` (as sent,
compressed) TELEMETRY_TOO_LARGE. The payload is then decompressed and handed
to the receiver (:mod:`client_metrics_receiver_plugin`); one that does not
decode is INVALID_RECORD, as Kafka answers when its plugin fails.

Instances live in an LRU of 16,384 (Kafka's size) and expire after
max(60 s, 3 push intervals) without a request. A change of the subscriptions
bumps a version: each instance's subscription is worked out again at its
next request, so a client gets the new one at once (its old subscription id
is then unknown).

pylog keeps a connection's ApiVersions software name and version
(:meth:`record_client_information`) in a bounded map keyed by connection, as
Kafka's RequestContext carries them; ``match`` may select on them.
"""

from __future__ import annotations

import asyncio
import logging
import time
import zlib
from collections import OrderedDict
from collections.abc import Callable, Mapping

from pylog import _native
from pylog.errors import ErrorCode
from pylog.logsafe import quoted
from pylog.metadata.store import MetadataStore, new_uuid
from pylog.network import Request
from pylog.protocol.messages import (
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
    PushTelemetryRequest,
    PushTelemetryResponse,
)
from pylog.server.client_metrics_configs import (
    ALL_SUBSCRIBED_METRICS,
    DEFAULT_INTERVAL_MS,
    SubscriptionInfo,
    parse_subscription,
)
from pylog.server.client_metrics_instance import (
    ClientMetricsInstance,
    ClientMetricsInstanceMetadata,
)
from pylog.server.client_metrics_receiver_plugin import (
    ClientMetricsReceiverPlugin,
    ClientTelemetry,
)

__all__ = ["CACHE_MAX_SIZE", "SUPPORTED_COMPRESSION_TYPES", "ClientMetricsManager"]

_log = logging.getLogger("pylog.server.client_metrics")

CACHE_MAX_SIZE = 16_384
CACHE_EXPIRY_MS = 60_000
#: zstd, lz4, gzip, snappy: the record codecs' ids, in Kafka's order of preference.
SUPPORTED_COMPRESSION_TYPES = [4, 3, 1, 2]
_KNOWN_COMPRESSION_TYPES = frozenset({0, 1, 2, 3, 4})
#: Kafka's reserved Uuids (ZERO_UUID, ONE_UUID): never a client instance's.
_RESERVED_IDS = frozenset({"AAAAAAAAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAAAAAAQ"})
#: A decompressed payload larger than this is refused (a zip bomb is not telemetry).
_MAX_DECOMPRESSED = 32 * 1024 * 1024
#: An uncompressed payload up to this size decodes on the event loop (a
#: client's usual push, a few KiB, takes a millisecond or two).
_INLINE_BYTES = 4 * 1024


def _now_ms() -> int:
    return int(time.time() * 1000)


class ClientMetricsManager:
    def __init__(
        self,
        telemetry_max_bytes: int,
        store: MetadataStore | None = None,
        receiver: ClientMetricsReceiverPlugin | None = None,
        clock: Callable[[], int] = _now_ms,
        cache_max_size: int = CACHE_MAX_SIZE,
    ) -> None:
        self.telemetry_max_bytes = telemetry_max_bytes
        self.receiver = receiver or ClientMetricsReceiverPlugin()
        self._clock = clock
        self._cache_max_size = cache_max_size
        self._instances: OrderedDict[str, ClientMetricsInstance] = OrderedDict()
        self._subscriptions: dict[str, SubscriptionInfo] = {}
        self._version = 0
        #: connection id -> (software name, version) from its ApiVersions
        self._client_information: OrderedDict[str, tuple[str, str]] = OrderedDict()
        if store is not None:
            for name, configs in store.client_metrics_configs().items():
                self.update_subscription(name, configs)
            store.add_client_metrics_listener(self.update_subscription)

    # ------------------------------------------------------------------ subscriptions

    def update_subscription(self, name: str, configs: Mapping[str, str]) -> None:
        """A subscription was set (or, with no configs, removed): every
        instance's subscription is worked out again at its next request."""
        # Called on the store's thread (ZooKeeper's change notifications):
        # a new dict swapped in whole, never one the event loop iterates.
        subscriptions = dict(self._subscriptions)
        try:
            if configs:
                subscriptions[name] = parse_subscription(name, configs)
            elif subscriptions.pop(name, None) is None:
                return
        except Exception as e:  # written by a tool that skipped the checks
            _log.warning("client metrics subscription %s ignored: %s", quoted(name), e)
            subscriptions.pop(name, None)
        self._subscriptions = subscriptions
        self._version += 1

    def subscription_names(self) -> list[str]:
        """The subscriptions' names (ListClientMetricsResources)."""
        return sorted(self._subscriptions)

    def record_client_information(self, connection_id: str, name: str, version: str) -> None:
        """The software name and version a connection's ApiVersions gave."""
        info = self._client_information
        info[connection_id] = (name, version)
        info.move_to_end(connection_id)
        while len(info) > self._cache_max_size:
            info.popitem(last=False)

    # ------------------------------------------------------------------ instances

    def _expire(self, now: int) -> None:
        # the LRU's front is the instance idle longest
        while self._instances:
            first = next(iter(self._instances.values()))
            if first.expires_ms > now:
                break
            self._instances.popitem(last=False)

    def _metadata(self, instance_id: str, request: Request) -> ClientMetricsInstanceMetadata:
        software = self._client_information.get(request.connection_id)
        return ClientMetricsInstanceMetadata(
            client_instance_id=instance_id,
            client_id=request.header.client_id or "",
            client_software_name=software[0] if software else None,
            client_software_version=software[1] if software else None,
            client_source_address=request.client_host,
            client_source_port=str(request.client_port),
            principal=str(request.principal),
        )

    def _create(
        self, instance_id: str, metadata: ClientMetricsInstanceMetadata
    ) -> ClientMetricsInstance:
        # the version before the subscriptions: a change in between makes
        # this instance stale, to be worked out again at its next request
        version = self._version
        interval = DEFAULT_INTERVAL_MS
        metrics: set[str] = set()
        everything = False
        for info in self._subscriptions.values():
            if metadata.is_match(info.match):
                everything = everything or ALL_SUBSCRIBED_METRICS in info.metrics
                metrics |= info.metrics
                interval = min(interval, info.interval_ms)
        wanted = [ALL_SUBSCRIBED_METRICS] if everything else sorted(metrics)
        # Any hash that changes with the set, the interval and the instance
        # will do; Kafka's is a CRC32C XORed with the instance id's hash.
        digest = zlib.crc32(f"{','.join(wanted)}|{interval}|{instance_id}".encode())
        subscription_id = digest - (1 << 32) if digest >= 1 << 31 else digest
        return ClientMetricsInstance(metadata, subscription_id, version, wanted, interval)

    def _instance(self, instance_id: str, request: Request, now: int) -> ClientMetricsInstance:
        self._expire(now)
        instance = self._instances.get(instance_id)
        if instance is None:
            instance = self._create(instance_id, self._metadata(instance_id, request))
        elif instance.subscription_version < self._version:
            instance = self._create(instance_id, instance.metadata)
        self._instances[instance_id] = instance
        self._instances.move_to_end(instance_id)
        instance.expires_ms = now + max(CACHE_EXPIRY_MS, 3 * instance.push_interval_ms)
        while len(self._instances) > self._cache_max_size:
            self._instances.popitem(last=False)
        return instance

    def instance(self, instance_id: str) -> ClientMetricsInstance | None:
        return self._instances.get(instance_id)

    # ------------------------------------------------------------------ the two APIs

    def process_get_telemetry_subscriptions(
        self, request: Request, body: GetTelemetrySubscriptionsRequest
    ) -> GetTelemetrySubscriptionsResponse:
        now = self._clock()
        instance_id = body.client_instance_id
        if instance_id in _RESERVED_IDS:
            instance_id = new_uuid()
            while instance_id in self._instances:
                instance_id = new_uuid()
        instance = self._instance(instance_id, request, now)
        # Early again: throttled, unless the last push was refused for a
        # stale subscription or a codec (Kafka means to let those re-fetch).
        if not instance.maybe_update_get_request_timestamp(now) and (
            instance.last_known_error
            not in (ErrorCode.UNKNOWN_SUBSCRIPTION_ID, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)
        ):
            return GetTelemetrySubscriptionsResponse(error_code=ErrorCode.THROTTLING_QUOTA_EXCEEDED)
        if instance.last_known_error != ErrorCode.NONE:
            instance.last_get_ms = now
            instance.fetched_since_push = True
        instance.last_known_error = ErrorCode.NONE
        return GetTelemetrySubscriptionsResponse(
            error_code=ErrorCode.NONE,
            client_instance_id=instance_id,
            subscription_id=instance.subscription_id,
            accepted_compression_types=list(SUPPORTED_COMPRESSION_TYPES),
            push_interval_ms=instance.push_interval_ms,
            telemetry_max_bytes=self.telemetry_max_bytes,
            delta_temporality=True,
            requested_metrics=list(instance.metrics),
        )

    async def process_push_telemetry(
        self, request: Request, body: PushTelemetryRequest
    ) -> PushTelemetryResponse:
        instance_id = body.client_instance_id
        if instance_id in _RESERVED_IDS:
            return PushTelemetryResponse(error_code=ErrorCode.INVALID_REQUEST)
        now = self._clock()
        instance = self._instance(instance_id, request, now)
        code = self._check_push(instance, body, now)
        instance.terminating = instance.terminating or bool(body.terminating)
        if code != ErrorCode.NONE:
            instance.last_known_error = code
            return PushTelemetryResponse(error_code=code)
        if body.metrics:
            who = self._who(instance)
            try:
                if len(body.metrics) <= _INLINE_BYTES and not body.compression_type:
                    made = self._decode(who, bytes(body.metrics), 0, now)
                else:  # a large payload decodes on a worker thread
                    made = await asyncio.to_thread(
                        self._decode, who, bytes(body.metrics), body.compression_type, now
                    )
                self.receiver.keep(made)
            except Exception as e:  # InvalidTelemetryError, a codec's error
                _log.info(
                    "client instance %s (client id %s) pushed metrics that do not decode: %s",
                    instance_id,
                    quoted(instance.metadata.client_id),
                    quoted(str(e), 200),
                )
                self.receiver.errors += 1
                instance.last_known_error = ErrorCode.INVALID_RECORD
                return PushTelemetryResponse(error_code=ErrorCode.INVALID_RECORD)
        instance.last_known_error = ErrorCode.NONE
        return PushTelemetryResponse(error_code=ErrorCode.NONE)

    def _decode(
        self, who: ClientTelemetry, payload: bytes, compression_type: int, now: int
    ) -> ClientTelemetry:
        if compression_type:
            payload = _native.decompress(compression_type, payload, max_size=_MAX_DECOMPRESSED)
        return self.receiver.prepare(who, payload, now)

    def _check_push(
        self, instance: ClientMetricsInstance, body: PushTelemetryRequest, now: int
    ) -> int:
        if instance.terminating:
            return ErrorCode.INVALID_REQUEST
        if not instance.maybe_update_push_request_timestamp(now) and not body.terminating:
            return ErrorCode.THROTTLING_QUOTA_EXCEEDED
        if body.subscription_id != instance.subscription_id:
            return ErrorCode.UNKNOWN_SUBSCRIPTION_ID
        if body.compression_type not in _KNOWN_COMPRESSION_TYPES:
            return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        if body.metrics and len(body.metrics) > self.telemetry_max_bytes:
            return ErrorCode.TELEMETRY_TOO_LARGE
        return ErrorCode.NONE

    @staticmethod
    def _who(instance: ClientMetricsInstance) -> ClientTelemetry:
        m = instance.metadata
        return ClientTelemetry(
            client_instance_id=m.client_instance_id,
            client_id=m.client_id,
            software_name=m.client_software_name or "",
            software_version=m.client_software_version or "",
            source_address=f"{m.client_source_address}:{m.client_source_port}",
            principal=m.principal,
        )
