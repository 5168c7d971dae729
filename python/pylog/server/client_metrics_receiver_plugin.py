"""Where pushed client metrics go (KIP-714): Kafka hands each PushTelemetry
payload to the ``ClientTelemetryReceiver`` of a configured MetricsReporter
(its ``ClientMetricsReceiverPlugin``) and keeps nothing itself. pylog has no
reporter plugins: this receiver decodes the OTLP payload (``MetricsData`` of
opentelemetry-proto, the protobuf classes the OpenTelemetry project publishes)
and keeps the latest metrics of each client instance in memory, for the
broker's Prometheus endpoint (``pylog_client_telemetry``) and its console.

Bounded: at most :data:`MAX_INSTANCES` client instances and
:data:`MAX_TOTAL_POINTS` data points over all of them (the least recently
pushed instance goes first), :data:`MAX_POINTS` data points each, names and
attribute values cut to :data:`MAX_TEXT` characters. Each instance's
``pylog_client_telemetry`` samples are rendered once, when it pushes (on a
worker thread for a large push), so a scrape only joins them. A payload that does not
decode (or decompress) is refused: the manager answers INVALID_RECORD, as
Kafka does when its plugin fails.

Sums: the broker asks clients for delta temporality (as Kafka does), so a
pushed sum is the change since the previous push; each point keeps the pushed
value and the running total of its deltas (a cumulative sum replaces the
total), which Prometheus reads as a counter.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import re
import time
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field

from google.protobuf.message import DecodeError
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    AGGREGATION_TEMPORALITY_DELTA,
    MetricsData,
    NumberDataPoint,
)

from pylog.network.metrics import MetricsRegistry

__all__ = [
    "MAX_INSTANCES",
    "MAX_POINTS",
    "ClientMetricsReceiverPlugin",
    "ClientTelemetry",
    "InvalidTelemetryError",
    "TelemetryPoint",
]

_log = logging.getLogger("pylog.server.client_metrics")

MAX_INSTANCES = 1024
MAX_POINTS = 4096
#: Data points kept over every instance: what bounds the memory (a few
#: hundred bytes a point) and the time /metrics takes to render.
MAX_TOTAL_POINTS = 65_536
MAX_TEXT = 256
#: Labels every ``pylog_client_telemetry`` sample carries; a point's own
#: attribute of the same name is left out of its labels (it stays on the page).
_FIXED_LABELS = ("client_instance_id", "client_id", "client_software_name",
                 "client_software_version", "metric")  # fmt: skip
_LABEL_BAD = re.compile(r"[^a-zA-Z0-9_]")


class InvalidTelemetryError(ValueError):
    """The payload is not OTLP metrics."""


@dataclass(frozen=True, slots=True)
class TelemetryPoint:
    """One data point of one metric, as last pushed."""

    name: str
    kind: str  # gauge, sum, histogram, exponential_histogram, summary
    attributes: tuple[tuple[str, str], ...]
    value: float  # a gauge's or sum's value; a histogram's or summary's sum
    total: float  # a sum's running total (deltas added up); else the value
    count: int  # a histogram's or summary's count; else 0
    time_unix_nano: int
    unit: str = ""


@dataclass(slots=True)
class ClientTelemetry:
    """The latest metrics of one client instance, and who it is."""

    client_instance_id: str
    client_id: str
    software_name: str
    software_version: str
    source_address: str
    principal: str
    last_push_ms: int = 0
    pushes: int = 0
    resource: tuple[tuple[str, str], ...] = ()
    points: tuple[TelemetryPoint, ...] = field(default_factory=tuple)
    #: Its pylog_client_telemetry sample lines, rendered when it pushed.
    exposition: str = ""


def _text(value: str) -> str:
    return value if len(value) <= MAX_TEXT else value[: MAX_TEXT - 1] + "…"


def _any_text(v: AnyValue) -> str:
    kind = v.WhichOneof("value")
    if kind == "string_value":
        return _text(v.string_value)
    if kind == "bool_value":
        return "true" if v.bool_value else "false"
    if kind == "int_value":
        return str(v.int_value)
    if kind == "double_value":
        return repr(v.double_value)
    if kind == "bytes_value":
        return _text(v.bytes_value.hex())
    if kind == "array_value":
        return _text(",".join(_any_text(x) for x in v.array_value.values))
    if kind == "kvlist_value":
        return _text(",".join(f"{kv.key}={_any_text(kv.value)}" for kv in v.kvlist_value.values))
    return ""


def _attributes(kvs: Iterable[KeyValue]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((_text(kv.key), _any_text(kv.value)) for kv in kvs))


def _number(p: NumberDataPoint) -> float:
    return float(p.as_double if p.WhichOneof("value") == "as_double" else p.as_int)


def decode_metrics(
    payload: bytes,
) -> tuple[tuple[tuple[str, str], ...], list[tuple[TelemetryPoint, bool]]]:
    """An OTLP ``MetricsData`` → (resource attributes, [(point, is a delta sum)]),
    at most MAX_POINTS points. InvalidTelemetryError if it is not one."""
    data = MetricsData()
    try:
        data.ParseFromString(payload)
    except DecodeError as e:
        raise InvalidTelemetryError(f"not an OTLP MetricsData: {e}") from e
    if payload and not data.resource_metrics:
        # protobuf skips fields it does not know: bytes that happen to parse
        # but carry no metrics are not telemetry either
        raise InvalidTelemetryError("not an OTLP MetricsData: no resource metrics")
    resource: tuple[tuple[str, str], ...] = ()
    out: list[tuple[TelemetryPoint, bool]] = []
    for rm in data.resource_metrics:
        resource = resource or _attributes(rm.resource.attributes)
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                name, unit = _text(m.name), _text(m.unit)
                kind = m.WhichOneof("data") or ""
                if kind in ("gauge", "sum"):
                    body = m.gauge if kind == "gauge" else m.sum
                    delta = (
                        kind == "sum"
                        and m.sum.aggregation_temporality == AGGREGATION_TEMPORALITY_DELTA
                    )
                    for p in body.data_points:
                        v = _number(p)
                        attrs = _attributes(p.attributes)
                        point = TelemetryPoint(name, kind, attrs, v, v, 0, p.time_unix_nano, unit)
                        out.append((point, delta))
                elif kind in ("histogram", "exponential_histogram", "summary"):
                    points = getattr(m, kind).data_points
                    for hp in points:
                        attrs = _attributes(hp.attributes)
                        s = float(hp.sum)
                        n = int(hp.count)
                        point = TelemetryPoint(name, kind, attrs, s, s, n, hp.time_unix_nano, unit)
                        out.append((point, False))
                if len(out) >= MAX_POINTS:
                    return resource, out[:MAX_POINTS]
    return resource, out


class ClientMetricsReceiverPlugin:
    """The latest pushed metrics per client instance (bounded; see the module)."""

    def __init__(
        self, max_instances: int = MAX_INSTANCES, max_total_points: int = MAX_TOTAL_POINTS
    ) -> None:
        self.max_instances = max_instances
        self.max_total_points = max_total_points
        self._clients: OrderedDict[str, ClientTelemetry] = OrderedDict()
        self._points = 0  # data points kept, over every instance
        #: Payloads refused because they did not decompress or decode (counted
        #: by the manager; Kafka's plugin error count).
        self.errors = 0

    def export_metrics(
        self,
        client: ClientTelemetry,
        payload: bytes,
        now_ms: int | None = None,
    ) -> ClientTelemetry:
        """Decode ``payload`` (already decompressed) and keep it as ``client``'s
        latest metrics. InvalidTelemetryError (nothing kept) if it is not OTLP."""
        return self.keep(self.prepare(client, payload, now_ms))

    def prepare(
        self, client: ClientTelemetry, payload: bytes, now_ms: int | None = None
    ) -> ClientTelemetry:
        """The decoding half of :meth:`export_metrics`, which changes nothing:
        a worker thread's, for a large payload (the event loop keeps serving)."""
        resource, decoded = decode_metrics(payload)
        key = client.client_instance_id
        previous = self._clients.get(key)
        totals: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
        if previous is not None:
            totals = {(p.name, p.attributes): p.total for p in previous.points if p.kind == "sum"}
        points = []
        for point, delta in decoded:
            if delta:
                total = totals.get((point.name, point.attributes), 0.0) + point.value
                point = dataclasses.replace(point, total=total)
            points.append(point)
        made = ClientTelemetry(
            client_instance_id=key,
            client_id=client.client_id,
            software_name=client.software_name,
            software_version=client.software_version,
            source_address=client.source_address,
            principal=client.principal,
            last_push_ms=now_ms if now_ms is not None else int(time.time() * 1000),
            pushes=(previous.pushes if previous is not None else 0) + 1,
            resource=resource or (previous.resource if previous is not None else ()),
            points=tuple(points),
        )
        made.exposition = _exposition(made)
        return made

    def keep(self, made: ClientTelemetry) -> ClientTelemetry:
        """Keep ``made`` (from :meth:`prepare`) as its instance's latest, within
        the bounds: the least recently pushed instances go first."""
        key = made.client_instance_id
        previous = self._clients.get(key)
        if previous is not None:  # pushed meanwhile (a slower decode): counted
            made.pushes = max(made.pushes, previous.pushes + 1)
            self._points -= len(previous.points)
        # one reference swap: a reader on another thread sees the old or the new
        self._clients[key] = made
        self._clients.move_to_end(key)
        self._points += len(made.points)
        while len(self._clients) > 1 and (
            len(self._clients) > self.max_instances or self._points > self.max_total_points
        ):
            _, dropped = self._clients.popitem(last=False)
            self._points -= len(dropped.points)
        return made

    def clients(self) -> list[ClientTelemetry]:
        """Every client instance kept, the most recent push first."""
        return sorted(list(self._clients.values()), key=lambda c: -c.last_push_ms)

    def client(self, client_instance_id: str) -> ClientTelemetry | None:
        return self._clients.get(client_instance_id)

    # ------------------------------------------------------------------ Prometheus

    def register_metrics(self, registry: MetricsRegistry) -> None:
        registry.gauge(
            "pylog_client_telemetry",
            "Metrics clients pushed (KIP-714), as last pushed: one sample per client "
            "instance, metric and attributes (a sum's running total).",
            self._samples,
        )
        registry.gauge(
            "pylog_client_telemetry_last_push_timestamp_seconds",
            "When each client instance last pushed its metrics (Unix time).",
            lambda: [(self._identity(c), c.last_push_ms / 1000) for c in self.clients()],
        )
        registry.gauge(
            "pylog_client_telemetry_decode_errors_total",
            "Pushed payloads that were not OTLP metrics (answered INVALID_RECORD).",
            lambda: float(self.errors),
            kind="counter",
        )

    @staticmethod
    def _identity(c: ClientTelemetry) -> dict[str, str]:
        return {
            "client_instance_id": c.client_instance_id,
            "client_id": c.client_id,
            "client_software_name": c.software_name,
            "client_software_version": c.software_version,
        }

    def _samples(self) -> str:
        return "\n".join(c.exposition for c in self.clients() if c.exposition)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _value(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return str(int(v)) if v.is_integer() and abs(v) < 2**53 else repr(v)


def _exposition(c: ClientTelemetry) -> str:
    """``c``'s pylog_client_telemetry sample lines (Prometheus' text format):
    the client's labels, the metric's name, the point's attributes as labels
    (named as Prometheus allows; one clashing with a label above is left out)."""
    base = {
        "client_instance_id": c.client_instance_id,
        "client_id": c.client_id,
        "client_software_name": c.software_name,
        "client_software_version": c.software_version,
    }
    lines = []
    for p in c.points:
        labels = dict(base, metric=p.name)
        for k, v in p.attributes:
            name = _LABEL_BAD.sub("_", k)
            if name and not name[0].isdigit() and name not in _FIXED_LABELS:
                labels.setdefault(name, v)
        text = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels.items()))
        lines.append(f"pylog_client_telemetry{{{text}}} {_value(p.total)}")
    return "\n".join(lines)
