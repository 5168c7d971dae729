"""Network faults for a :class:`~pylog.testing.LocalCluster`: every link of
the cluster (broker to broker, broker to ZooKeeper, client to broker) runs
through a TCP proxy of this module, which a test tells to cut, one way or
both ways, and to heal.

A cut *holds* the bytes rather than dropping them: the proxy stops reading
from the sending side, so the sender's data waits in kernel buffers as it
would behind a dropped route, and the peers see what a real partition shows
them — requests that get no answer, sockets that stay open (half-open once
one end gives up and closes; its FIN waits behind the cut too), new
connections that are accepted and then carry nothing. When the cut heals the
held bytes flow again, as TCP's retransmissions would deliver them, so a
peer that kept its connection gets a late answer to an old request. A
*reset* is the other kind of fault: every connection between the two ends is
closed with an RST and new ones are refused until it heals (a firewall's
reject, a restarted middlebox).

Who is talking is known from the connection itself: a proxy in front of a
broker's inter-broker listener reads the first request's header and takes
the peer broker from its client id (``broker-<id>-fetcher-<n>`` for a
fetcher, ``controller-<id>-to-broker-<n>`` for the controller's channel);
anything else on a broker's listener is a client. Each broker reaches
ZooKeeper through a proxy of its own.

Nodes are named ``"1"``, ``"2"``, … for brokers, ``"zk"`` and ``"client"``.
All proxies of a cluster run on one event loop in a background thread; the
test's calls are thread-safe and take effect before they return.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import socket
import struct
import threading
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from typing import TypeVar

__all__ = ["FaultProxy", "NetworkFaults", "kafka_peer"]

_T = TypeVar("_T")
_log = logging.getLogger("pylog.testing.network_faults")

CLIENT = "client"
ZOOKEEPER = "zk"
_CHUNK = 64 * 1024
_PEER = re.compile(r"^(?:broker-(\d+)-|controller-(\d+)-)")
#: size, api key, api version, correlation id, client id length
_HEADER = struct.Struct(">ihhih")


def kafka_peer(first_bytes: bytes) -> str | None:
    """The node that opened a connection, from its first Kafka request:
    a broker id for pylog's fetchers and controller, ``"client"`` for anyone
    else; None while the header is not whole yet."""
    if len(first_bytes) < _HEADER.size:
        return None
    _size, _key, _version, _corr, n = _HEADER.unpack_from(first_bytes)
    if n < 0:
        return CLIENT
    if len(first_bytes) < _HEADER.size + n:
        return None
    client_id = first_bytes[_HEADER.size : _HEADER.size + n].decode("utf-8", "replace")
    m = _PEER.match(client_id)
    if m is None:
        return CLIENT
    return m.group(1) or m.group(2)


@dataclass(eq=False)
class _Link:
    """One proxied connection: who opened it (``source``) to whom (``target``)."""

    source: str
    target: str
    downstream: socket.socket
    upstream: socket.socket | None = None
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    #: Lost by the network for good: its bytes never move again, healed or not.
    severed: bool = False


class _Rules:
    """Which flows are held and which pairs are refused; the loop's side."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.held: set[tuple[str, str]] = set()  # bytes from a to b wait
        # connections a opened to b: both of their directions wait
        self.held_links: set[tuple[str, str]] = set()
        self.refused: set[frozenset[str]] = set()  # connections between a and b reset
        self.changed = asyncio.Event()

    def flows(self, src: str, dst: str, link: tuple[str, str]) -> bool:
        return (src, dst) not in self.held and link not in self.held_links

    def refuses(self, a: str, b: str) -> bool:
        return frozenset((a, b)) in self.refused

    def touch(self) -> None:
        # Wake every pump waiting on a rule, then arm a new event for the next change.
        self.changed.set()
        self.changed = asyncio.Event()


class FaultProxy:
    """A TCP proxy in front of one node (``target``), bound on loopback.

    ``source`` names who connects: a fixed node name, or a function of the
    connection's first bytes (:func:`kafka_peer`). ``upstream`` is where the
    target really listens; it may change (a restarted broker binds anew)."""

    def __init__(
        self,
        faults: NetworkFaults,
        target: str,
        source: str | Callable[[bytes], str | None],
        upstream: tuple[str, int] | None = None,
    ) -> None:
        self.faults = faults
        self.target = target
        self.source = source
        self.upstream = upstream
        self.links: set[_Link] = set()
        self._listener: socket.socket | None = None
        self._acceptor: asyncio.Task[None] | None = None
        self.port = 0

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def _start(self) -> None:
        lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        lsock.bind(("127.0.0.1", 0))
        lsock.listen(128)
        lsock.setblocking(False)
        self._listener = lsock
        self.port = lsock.getsockname()[1]
        self._acceptor = asyncio.get_running_loop().create_task(self._accept_loop(lsock))

    async def _close(self) -> None:
        if self._acceptor is not None:
            self._acceptor.cancel()
        if self._listener is not None:
            self._listener.close()
        for link in list(self.links):
            _abort(link)
        self.links.clear()

    async def _accept_loop(self, lsock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        handlers: set[asyncio.Task[None]] = set()
        while True:
            try:
                raw, _ = await loop.sock_accept(lsock)
            except OSError as e:
                _log.warning("proxy to %s: accept failed: %s", self.target, e)
                await asyncio.sleep(0.1)
                continue
            raw.setblocking(False)
            task = loop.create_task(self._accept(raw))
            handlers.add(task)
            task.add_done_callback(handlers.discard)

    async def _accept(self, raw: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        rules = self.faults._rules
        assert rules is not None
        first = b""
        source = self.source if isinstance(self.source, str) else None
        try:
            while source is None:
                chunk = await loop.sock_recv(raw, _CHUNK)
                if not chunk:
                    raw.close()
                    return
                first += chunk
                assert not isinstance(self.source, str)
                source = self.source(first)
                if source is None and len(first) > 1 << 16:
                    source = CLIENT
        except OSError:
            raw.close()
            return
        link = _Link(source, self.target, raw)
        if rules.refuses(source, self.target) or self.upstream is None:
            _abort(link)
            return
        self.links.add(link)
        try:
            up = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            up.setblocking(False)
            link.upstream = up
            # While a connection's first bytes are held, so is the connect:
            # a peer cut off from its target must not reach it at all.
            while not rules.flows(source, self.target, (source, self.target)):
                await rules.changed.wait()
                if link not in self.links:
                    return
            await loop.sock_connect(up, self.upstream)
        except OSError:
            self.links.discard(link)
            _abort(link)
            return
        link.tasks = [
            loop.create_task(self._pump(link, raw, up, source, self.target, first)),
            loop.create_task(self._pump(link, up, raw, self.target, source, b"")),
        ]

    async def _pump(
        self,
        link: _Link,
        src: socket.socket,
        dst: socket.socket,
        src_node: str,
        dst_node: str,
        pending: bytes,
    ) -> None:
        """Copy ``src`` to ``dst`` while the flow is allowed; hold it (no reads,
        so the sender's buffers fill) while it is not. EOF is forwarded as a
        half-close, in order behind the data."""
        loop = asyncio.get_running_loop()
        rules = self.faults._rules
        assert rules is not None
        try:
            while True:
                data = pending if pending else await loop.sock_recv(src, _CHUNK)
                pending = b""
                while link.severed or not rules.flows(
                    src_node, dst_node, (link.source, link.target)
                ):
                    await rules.changed.wait()
                if not data:
                    with contextlib.suppress(OSError):
                        dst.shutdown(socket.SHUT_WR)
                    break
                await loop.sock_sendall(dst, data)
        except (OSError, asyncio.CancelledError):
            _abort(link)
            self.links.discard(link)
            return
        # This direction is done; the link closes when the other one is too.
        if all(t.done() or t is asyncio.current_task() for t in link.tasks):
            for s in (link.downstream, link.upstream):
                if s is not None:
                    with contextlib.suppress(OSError):
                        s.close()
            self.links.discard(link)

    def _sever(self, a: str, b: str) -> None:
        pair = {a, b}
        for link in self.links:
            if {link.source, link.target} == pair:
                link.severed = True

    def _reset(self, a: str, b: str) -> None:
        pair = {a, b}
        for link in list(self.links):
            if {link.source, link.target} == pair:
                self.links.discard(link)
                _abort(link)


def _abort(link: _Link) -> None:
    """Close both sockets with an RST (SO_LINGER 0) and stop the pumps."""
    for t in link.tasks:
        if t is not asyncio.current_task():
            t.cancel()
    for s in (link.downstream, link.upstream):
        if s is None:
            continue
        with contextlib.suppress(OSError):
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        with contextlib.suppress(OSError):
            s.close()


class NetworkFaults:
    """The proxies of one cluster and the faults applied to them.

    ``cut(a, b)`` holds the bytes between nodes ``a`` and ``b`` both ways,
    ``cut(a, b, one_way=True)`` only those from ``a`` to ``b``; ``reset(a, b)``
    closes their connections with an RST and refuses new ones;
    ``sever(a, b)`` loses their open connections for good (new ones flow
    once healed); ``stall_connections(a, b)`` holds the connections ``a`` opens to ``b``
    (a listener that stopped answering); ``isolate(a)`` cuts ``a`` from every
    other broker (its inter-broker links); ``heal()`` undoes everything."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="pylog-network-faults", daemon=True
        )
        self._thread.start()
        self._rules: _Rules | None = self._call(self._make_rules())
        self.proxies: list[FaultProxy] = []
        self.brokers: set[str] = set()

    async def _make_rules(self) -> _Rules:
        return _Rules(asyncio.get_running_loop())

    def _call(self, coro: Coroutine[object, object, _T]) -> _T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(30)

    # -- proxies

    def proxy(
        self,
        target: str,
        source: str | Callable[[bytes], str | None],
        upstream: tuple[str, int] | None = None,
    ) -> FaultProxy:
        """A new proxy in front of ``target``; its ``port`` is bound on return."""
        p = FaultProxy(self, target, source, upstream)
        self._call(p._start())
        self.proxies.append(p)
        if target not in (ZOOKEEPER, CLIENT):
            self.brokers.add(target)
        return p

    def close(self) -> None:
        async def close_all() -> None:
            for p in self.proxies:
                await p._close()

        with contextlib.suppress(Exception):
            self._call(close_all())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    # -- faults

    def cut(self, a: object, b: object, *, one_way: bool = False) -> None:
        """Hold the bytes from ``a`` to ``b`` (and back, unless ``one_way``)."""
        flows = {(str(a), str(b))} if one_way else {(str(a), str(b)), (str(b), str(a))}
        self._apply(lambda r: r.held.update(flows))

    def stall_connections(self, opener: object, target: object) -> None:
        """Hold both ways the connections ``opener`` opens to ``target`` (a
        stalled listener), while those ``target`` opens to ``opener`` flow."""
        link = (str(opener), str(target))
        self._apply(lambda r: r.held_links.add(link))

    def isolate(self, node: object, others: Iterable[object] | None = None) -> None:
        """Cut broker ``node`` from the other brokers (or ``others``) both ways."""
        n = str(node)
        peers = [str(o) for o in others] if others is not None else sorted(self.brokers - {n})
        for p in peers:
            self.cut(n, p)

    def reset(self, a: object, b: object) -> None:
        """RST every connection between ``a`` and ``b``; refuse new ones until healed."""
        pair = (str(a), str(b))

        def apply(r: _Rules) -> None:
            r.refused.add(frozenset(pair))
            for p in self.proxies:
                p._reset(*pair)

        self._apply(apply)

    def sever(self, a: object, b: object) -> None:
        """The connections now open between ``a`` and ``b`` are lost for good
        (a middlebox forgot them: a request in flight never arrives, neither
        end hears of it until its own timeout); new ones are held both ways
        until healed, then flow."""
        pair = (str(a), str(b))

        def apply(r: _Rules) -> None:
            r.held.update({pair, (pair[1], pair[0])})
            for p in self.proxies:
                p._sever(*pair)

        self._apply(apply)

    def heal(self) -> None:
        """Every cut and refusal lifted; held bytes flow again."""

        def apply(r: _Rules) -> None:
            r.held.clear()
            r.held_links.clear()
            r.refused.clear()

        self._apply(apply)

    def _apply(self, change: Callable[[_Rules], None]) -> None:
        async def run() -> None:
            rules = self._rules
            assert rules is not None
            change(rules)
            rules.touch()

        self._call(run())

    def describe(self) -> str:
        r = self._rules
        assert r is not None
        held = ", ".join(f"{a}->{b}" for a, b in sorted(r.held)) or "none"
        links = ", ".join(f"{a}=>{b}" for a, b in sorted(r.held_links)) or "none"
        refused = ", ".join("<->".join(sorted(p)) for p in r.refused) or "none"
        return f"held: {held}; stalled connections: {links}; refused: {refused}"
