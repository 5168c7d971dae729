"""ConnectionQuotas: how many connections the broker takes, from whom and how
fast (Kafka's ``kafka.network.ConnectionQuotas``, KIP-402 and KIP-612).

Three limits apply when a connection is accepted, in Kafka's order:

1. **The broker's and the listener's connection creation rate**
   (``max.connection.creation.rate`` and
   ``listener.name.<listener>.max.connection.creation.rate``): a connection
   that takes either rate over its bound is *delayed* — Kafka's Acceptor
   waits before it accepts more, so clients queue in the backlog; here the
   connection is held unread for the throttle time, then served. The
   inter-broker listener is exempt from the broker-wide rate when the broker
   has other listeners (Kafka's protected listener).
2. **The rate of the client's IP address** (the ``connection_creation_rate``
   quota of ``/config/ips/<ip>``, else of ``/config/ips/<default>``; none by
   default): a connection over it is not counted and not served — Kafka
   holds the accepted socket unread for the throttle time and then closes
   it, so a client reconnecting in a loop is slowed rather than spun. Its
   connection is taken back out of the broker's and listener's rates.
3. **The count per IP address** (``max.connections.per.ip``, with
   ``max.connections.per.ip.overrides`` per host or IP) and per listener
   (``listener.name.<listener>.max.connections``): one over it is closed at
   once (Kafka's Acceptor waits for a listener's slot instead; pylog treats
   it as it treats the broker-wide ``max.connections``).

The rates are Kafka's ``Rate`` over ``quota.window.num`` windows of
``quota.window.size.seconds`` (measured over at least ``num - 1`` windows, so
a fresh address may open ``10 * rate`` connections in its first second at the
defaults); a throttle is the time the rate needs to come back to its bound,
at most one window (``quota.window.size.seconds``), as Kafka bounds it.

Runs on the event loop; the quotas' sources may be replaced from other
threads (each is one reference swapped whole).
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from pylog.common.metrics.sampled_stat import Rate

__all__ = [
    "UNLIMITED",
    "ConnectionHold",
    "ConnectionQuotas",
    "normalize_host",
]

_log = logging.getLogger("pylog.network")

#: Kafka's "no limit" for the connection keys and the IP quota (Integer.MAX_VALUE).
UNLIMITED = 2**31 - 1

#: ``ip`` (None: the default entity) → connections per second.
IpQuotas = Mapping[str | None, int]


@dataclass(frozen=True, slots=True)
class ConnectionHold:
    """An accepted connection to hold unread for ``ms``: then served (a
    broker or listener connection rate, ``close`` False) or closed (its IP's
    ``connection_creation_rate``, ``close`` True), as Kafka's Acceptor
    delays or closes it."""

    ms: int
    close: bool
    reason: str


def normalize_host(host: str, *, resolve: bool = False) -> str:
    """An address as the connection counts key it: the canonical text of an
    IP (an IPv4-mapped IPv6 address as its IPv4 address, as Java's
    InetAddress makes it); with ``resolve`` a host name becomes its address
    (Kafka's ``InetAddress.getByName``), else it stays as given."""
    try:
        ip = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        if not resolve:
            return host
        try:
            return normalize_host(str(socket.getaddrinfo(host, None)[0][4][0]))
        except (OSError, IndexError):
            return host
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)


class _RateSensor:
    """A Rate with a bound (Kafka's quota sensor): recording a connection
    answers the throttle time the new rate calls for (0 within the bound)."""

    __slots__ = ("bound", "rate")

    def __init__(self, bound: int, samples: int, window_ms: int) -> None:
        self.bound = bound
        self.rate = Rate(samples, window_ms)

    def record_and_get_throttle_ms(self, now_ms: int, max_throttle_ms: int) -> int:
        self.rate.record(1.0, now_ms)
        measured = self.rate.measure(now_ms)
        if measured <= self.bound:
            return 0
        if self.bound <= 0:
            return max_throttle_ms  # Kafka divides by the bound: infinity, then bounded
        window = self.rate.window_size_ms(now_ms)
        throttle = round((measured - self.bound) / self.bound * window)
        return int(min(max(throttle, 1), max_throttle_ms))

    def unrecord(self, now_ms: int) -> None:
        self.rate.record(-1.0, now_ms)


class ConnectionQuotas:
    """The connection limits of one broker (see the module's docstring)."""

    def __init__(
        self,
        *,
        max_connections_per_ip: int = UNLIMITED,
        max_connections_per_ip_overrides: Mapping[str, int] | None = None,
        max_connection_creation_rate: int = UNLIMITED,
        listener_connection_rates: Mapping[str, int] | None = None,
        protected_listener: str | None = None,
        samples: int = 11,
        window_seconds: int = 1,
    ) -> None:
        self.samples = samples
        self.window_ms = window_seconds * 1000
        #: Kafka's maxThrottleTimeMs: one quota window.
        self.max_throttle_ms = self.window_ms
        self.max_connections_per_ip = max_connections_per_ip
        self._overrides: dict[str, int] = {}
        self.update_max_connections_per_ip_overrides(max_connections_per_ip_overrides or {})
        self._broker = _RateSensor(max_connection_creation_rate, samples, self.window_ms)
        self._listeners: dict[str, _RateSensor] = {}
        for listener, rate in (listener_connection_rates or {}).items():
            self.update_listener_connection_rate(listener, rate)
        #: The inter-broker listener: exempt from the broker-wide rate when
        #: the broker has other listeners (Kafka's protectedListener).
        self.protected_listener = protected_listener
        self.listener_count = 1
        #: Where the IP quotas come from (the metadata store, mapped by the
        #: broker): called on each accept, recomputed here when it returns a
        #: different object.
        self.ip_quotas: Callable[[], IpQuotas] = lambda: {}
        self._ip_source: IpQuotas | None = None
        self._ip_rates: dict[str, int] = {}
        self._default_ip_rate = UNLIMITED
        self._ip_sensors: dict[str, _RateSensor] = {}
        self.counts: dict[str, int] = {}
        self.listener_counts: dict[str, int] = {}
        self.listener_max_connections: dict[str, int] = {}
        #: Connections closed for their address's rate, and delayed for the
        #: broker's or a listener's (the throttle metrics' counts).
        self.ip_throttled = 0
        self.rate_delayed = 0

    # ------------------------------------------------------------ configuration

    def update_max_connections_per_ip_overrides(self, overrides: Mapping[str, int]) -> None:
        self._overrides = {normalize_host(h, resolve=True): n for h, n in overrides.items()}

    def update_broker_connection_rate(self, rate: int) -> None:
        self._broker.bound = rate

    def update_listener_connection_rate(self, listener: str, rate: int) -> None:
        sensor = self._listeners.get(listener.upper())
        if sensor is None:
            if rate >= UNLIMITED:
                return
            sensor = self._listeners[listener.upper()] = _RateSensor(
                rate, self.samples, self.window_ms
            )
        sensor.bound = rate

    def max_connections_for(self, ip: str) -> int:
        return self._overrides.get(ip, self.max_connections_per_ip)

    def connection_rate_for_ip(self, ip: str) -> int:
        """The IP's ``connection_creation_rate``: its own, else the default
        entity's, else none (UNLIMITED)."""
        self._refresh_ip_quotas()
        return self._ip_rates.get(ip, self._default_ip_rate)

    def _refresh_ip_quotas(self) -> None:
        source = self.ip_quotas()
        if source is self._ip_source:
            return
        rates: dict[str, int] = {}
        default = UNLIMITED
        for ip, rate in source.items():
            if ip is None:
                default = int(rate)
            else:
                rates[normalize_host(ip, resolve=True)] = int(rate)
        self._ip_rates, self._default_ip_rate, self._ip_source = rates, default, source
        # A sensor keeps its history and takes its address's new bound (Kafka
        # updates the metric's config); an address with no quota now drops it.
        for ip in list(self._ip_sensors):
            bound = rates.get(ip, default)
            if bound >= UNLIMITED:
                del self._ip_sensors[ip]
            else:
                self._ip_sensors[ip].bound = bound

    # ------------------------------------------------------------ accepting

    def _protected(self, listener: str) -> bool:
        return listener.upper() == self.protected_listener and self.listener_count > 1

    def record_connection_and_get_delay_ms(self, listener: str, now_ms: int) -> int:
        """Record a new connection against the broker's and its listener's
        rates; how long to hold it before serving (0: at once)."""
        delay = 0
        if not self._protected(listener) and self._broker.bound < UNLIMITED:
            delay = self._broker.record_and_get_throttle_ms(now_ms, self.max_throttle_ms)
        sensor = self._listeners.get(listener.upper())
        if sensor is not None:
            delay = max(delay, sensor.record_and_get_throttle_ms(now_ms, self.max_throttle_ms))
        if delay:
            self.rate_delayed += 1
        return delay

    def record_ip_connection_and_get_throttle_ms(self, listener: str, ip: str, now_ms: int) -> int:
        """Record a new connection from ``ip`` against its quota; > 0: it is
        over, taken back out of every rate, to be closed after that many ms."""
        bound = self.connection_rate_for_ip(ip)
        if bound >= UNLIMITED:
            return 0
        sensor = self._ip_sensors.get(ip)
        if sensor is None:
            sensor = self._ip_sensors[ip] = _RateSensor(bound, self.samples, self.window_ms)
        throttle = sensor.record_and_get_throttle_ms(now_ms, self.max_throttle_ms)
        if throttle:
            # Not accepted: it counts in no rate (Kafka's un-recording).
            sensor.unrecord(now_ms)
            if not self._protected(listener) and self._broker.bound < UNLIMITED:
                self._broker.unrecord(now_ms)
            listener_sensor = self._listeners.get(listener.upper())
            if listener_sensor is not None:
                listener_sensor.unrecord(now_ms)
            self.ip_throttled += 1
        return throttle

    def listener_full(self, listener: str) -> int | None:
        """The listener's ``max.connections`` when it has that many, else None."""
        limit = self.listener_max_connections.get(listener.upper(), UNLIMITED)
        return limit if self.listener_counts.get(listener.upper(), 0) >= limit else None

    def inc(self, ip: str, listener: str = "") -> None:
        self.counts[ip] = self.counts.get(ip, 0) + 1
        key = listener.upper()
        self.listener_counts[key] = self.listener_counts.get(key, 0) + 1

    def dec(self, ip: str, listener: str = "") -> None:
        n = self.counts.get(ip, 1) - 1
        if n > 0:
            self.counts[ip] = n
        else:
            self.counts.pop(ip, None)
        key = listener.upper()
        self.listener_counts[key] = max(self.listener_counts.get(key, 1) - 1, 0)

    def get(self, ip: str) -> int:
        return self.counts.get(ip, 0)
