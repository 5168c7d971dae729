"""Where the console's Clients pages read KIP-714 client telemetry from.

Clients push their metrics to a broker, which keeps the latest of each client
instance in memory (``pylog.server.client_metrics_receiver_plugin``); no Kafka
API reads them back. So:

* the console a broker serves (``console.port``) reads its own broker's
  receiver, in process (:class:`ReceiverTelemetry`);
* ``pylog console --metrics-url URL`` (one per broker) reads each pylog
  broker's Prometheus endpoint, where the same metrics are
  ``pylog_client_telemetry`` samples (:class:`PrometheusTelemetry`);
* otherwise the page says where telemetry can be seen.

A client pushes to one broker at a time (the one its connection chose), so
the console shows each instance as the broker that has it last saw it.
"""

from __future__ import annotations

import re
import urllib.request
from typing import Protocol

from pylog.server.client_metrics_receiver_plugin import (
    ClientMetricsReceiverPlugin,
    ClientTelemetry,
    TelemetryPoint,
)

__all__ = ["ClientTelemetrySource", "PrometheusTelemetry", "ReceiverTelemetry"]

#: Labels of a pylog_client_telemetry sample that are not the point's attributes.
_IDENTITY = ("client_instance_id", "client_id", "client_software_name", "client_software_version")
_SAMPLE = re.compile(r"^(pylog_client_telemetry(?:_last_push_timestamp_seconds)?)\{(.*)\} (\S+)$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
_UNESCAPE = {"\\\\": "\\", "\\n": "\n", '\\"': '"'}
#: A scrape larger than this is cut there (a console must not swallow anything).
_MAX_SCRAPE = 32 * 1024 * 1024


class ClientTelemetrySource(Protocol):
    #: What the Clients page says about where its data comes from.
    description: str

    def clients(self) -> list[ClientTelemetry]:
        """Every client instance known, the latest push first (blocking: a
        worker thread's call)."""
        ...


class ReceiverTelemetry:
    """The broker's own receiver (the console a broker serves)."""

    def __init__(self, receiver: ClientMetricsReceiverPlugin, broker_id: int) -> None:
        self.receiver = receiver
        self.description = f"pushed to broker {broker_id}, which serves this console"

    def clients(self) -> list[ClientTelemetry]:
        return self.receiver.clients()


def _unescape(value: str) -> str:
    return re.sub(r"\\[\\n\"]", lambda m: _UNESCAPE[m.group(0)], value)


def parse_exposition(text: str) -> list[ClientTelemetry]:
    """The client instances in one broker's /metrics text."""
    found: dict[str, ClientTelemetry] = {}
    points: dict[str, list[TelemetryPoint]] = {}
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if m is None:
            continue
        family, labels_text, value_text = m.groups()
        labels = {k: _unescape(v) for k, v in _LABEL.findall(labels_text)}
        instance = labels.get("client_instance_id")
        if not instance:
            continue
        try:
            value = float(value_text)
        except ValueError:
            continue
        client = found.get(instance)
        if client is None:
            client = found[instance] = ClientTelemetry(
                client_instance_id=instance,
                client_id=labels.get("client_id", ""),
                software_name=labels.get("client_software_name", ""),
                software_version=labels.get("client_software_version", ""),
                source_address="",
                principal="",
            )
        if family.endswith("_seconds"):
            client.last_push_ms = int(value * 1000)
            continue
        attrs = tuple(
            sorted((k, v) for k, v in labels.items() if k not in _IDENTITY and k != "metric")
        )
        points.setdefault(instance, []).append(
            TelemetryPoint(labels.get("metric", ""), "", attrs, value, value, 0, 0)
        )
    for instance, client in found.items():
        client.points = tuple(points.get(instance, ()))
    return list(found.values())


class PrometheusTelemetry:
    """pylog brokers' Prometheus endpoints (``pylog console --metrics-url``)."""

    def __init__(self, urls: list[str], timeout_s: float = 5.0) -> None:
        self.urls = urls
        self.timeout_s = timeout_s
        self.description = "read from the brokers' metrics endpoints: " + ", ".join(urls)
        #: The endpoints that did not answer at the last read, with why.
        self.errors: list[str] = []

    def clients(self) -> list[ClientTelemetry]:
        newest: dict[str, ClientTelemetry] = {}
        errors = []
        for url in self.urls:
            try:
                with urllib.request.urlopen(url, timeout=self.timeout_s) as r:
                    text = r.read(_MAX_SCRAPE).decode("utf-8", "replace")
            except (OSError, ValueError) as e:
                errors.append(f"{url}: {e}")
                continue
            for c in parse_exposition(text):
                seen = newest.get(c.client_instance_id)
                if seen is None or c.last_push_ms > seen.last_push_ms:
                    newest[c.client_instance_id] = c
        self.errors = errors
        return sorted(newest.values(), key=lambda c: -c.last_push_ms)
