"""An embedded broker for tests: ``with pylog.testing.broker() as b:`` or the
``pylog_broker`` pytest fixture.

The broker runs in a background thread with its own event loop, in this
process, on an ephemeral loopback port and a temporary log directory, and is
shut down cleanly (and the directory removed) on exit. A thread rather than a
subprocess because it starts in tens of milliseconds (a subprocess pays an
interpreter start and pylog's imports, ~0.3-0.5 s, before it can bind), it
reports its bound port and any start-up error directly rather than through a
pipe, and the test can reach into it (``b.server.log_manager``). The cost: the
broker shares the test's GIL, so a pure-Python client in the same process is
slower than against a separate broker; the C clients (librdkafka) barely notice.
Tests that need a broker to die (kill -9) use a cluster of
``pylog broker start`` processes instead: ``with pylog.testing.cluster() as c:``
starts a real ZooKeeper and three brokers (:class:`LocalCluster`).

As a pytest plugin (registered through the ``pytest11`` entry point):

* ``pylog_broker`` — a running broker per test; ``pylog_broker.bootstrap_servers``
  goes to the client;
* ``pylog_broker_factory`` — ``factory(**overrides)`` for brokers with other
  settings (several per test if needed), all stopped at the end;
* ``pylog_zookeeper`` — a real ZooKeeper server (Debian's ``zookeeper``
  package, run with ``java``) for the session, and ``pylog_zookeeper_factory``
  for servers a test stops and restarts. :class:`ZooKeeperServer` is the same
  server outside pytest. Without ZooKeeper installed these fail, saying that
  ``make tools`` (``apt-get install zookeeper``) installs it;
* ``pylog_cluster`` — a :class:`LocalCluster` of three broker processes on the
  session's ZooKeeper (a chroot per test), and ``pylog_cluster_factory`` —
  ``factory(brokers=3, **overrides)`` for clusters of other shapes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from pylog.testing.cluster import CLUSTER_TEST_DEFAULTS, ClusterBroker, LocalCluster, cluster
from pylog.testing.embedded_broker import TEST_DEFAULTS, EmbeddedBroker, broker
from pylog.testing.zookeeper import ZooKeeperServer, ZooKeeperUnavailable, zookeeper

__all__ = [
    "CLUSTER_TEST_DEFAULTS",
    "TEST_DEFAULTS",
    "ClusterBroker",
    "EmbeddedBroker",
    "LocalCluster",
    "ZooKeeperServer",
    "ZooKeeperUnavailable",
    "broker",
    "cluster",
    "zookeeper",
]


# ---------------------------------------------------------------- pytest plugin

try:
    import pytest
except ImportError:  # pragma: no cover - pylog.testing without pytest
    pass
else:

    @pytest.fixture
    def pylog_broker() -> Iterator[EmbeddedBroker]:
        """A running pylog broker; clients use ``pylog_broker.bootstrap_servers``."""
        with broker() as b:
            yield b

    @pytest.fixture
    def pylog_broker_factory() -> Iterator[Callable[..., EmbeddedBroker]]:
        """``factory(overrides=None, **keys)`` starts brokers, all stopped at teardown."""
        made: list[EmbeddedBroker] = []

        def factory(overrides: Mapping[str, Any] | None = None, **keys: Any) -> EmbeddedBroker:
            props = dict(overrides or {})
            props.update({k.replace("_", "."): v for k, v in keys.items()})
            b = EmbeddedBroker(props).start()
            made.append(b)
            return b

        yield factory
        for b in made:
            b.close()

    @pytest.fixture(scope="session")
    def pylog_zookeeper() -> Iterator[ZooKeeperServer]:
        """A ZooKeeper server shared by the session's tests; give each test its
        own chroot (``f"{pylog_zookeeper.connect}/{name}"``) to keep them apart."""
        try:
            server = ZooKeeperServer().start()
        except ZooKeeperUnavailable as e:
            pytest.fail(str(e), pytrace=False)
        try:
            yield server
        finally:
            server.close()

    @pytest.fixture
    def pylog_zookeeper_factory() -> Iterator[Callable[..., ZooKeeperServer]]:
        """``factory(tick_ms=500)`` starts a ZooKeeper server of the test's own
        (to stop or restart), all closed at teardown."""
        made: list[ZooKeeperServer] = []

        def factory(*, tick_ms: int = 500) -> ZooKeeperServer:
            server = ZooKeeperServer(tick_ms=tick_ms)
            made.append(server)
            try:
                return server.start()
            except ZooKeeperUnavailable as e:
                pytest.fail(str(e), pytrace=False)

        yield factory
        for server in made:
            server.close()

    @pytest.fixture
    def pylog_cluster_factory(
        pylog_zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
    ) -> Iterator[Callable[..., LocalCluster]]:
        """``factory(brokers=3, overrides=None, racks=None, per_broker=None,
        **keys)`` starts a
        cluster of broker processes on the session's ZooKeeper (a chroot of
        its own); all are stopped at teardown. Their data and broker logs
        stay in pytest's temporary directory (``<dir>/broker-<id>/broker.log``)."""
        made: list[LocalCluster] = []

        def factory(
            brokers: int = 3,
            overrides: Mapping[str, Any] | None = None,
            *,
            racks: list[str] | None = None,
            per_broker: Mapping[int, Mapping[str, Any]] | None = None,
            **keys: Any,
        ) -> LocalCluster:
            props = dict(overrides or {})
            props.update({k.replace("_", "."): v for k, v in keys.items()})
            c = LocalCluster(
                brokers,
                props,
                zookeeper=pylog_zookeeper,
                racks=racks,
                per_broker=per_broker,
                directory=str(tmp_path_factory.mktemp("cluster")),
            )
            made.append(c)
            return c.start()

        yield factory
        for c in made:
            c.close()

    @pytest.fixture
    def pylog_cluster(
        pylog_cluster_factory: Callable[..., LocalCluster],
    ) -> LocalCluster:
        """Three broker processes on a real ZooKeeper; clients use
        ``pylog_cluster.bootstrap_servers``."""
        return pylog_cluster_factory(3)
