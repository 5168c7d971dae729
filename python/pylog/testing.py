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
Tests that need a broker to die (kill -9) should start ``pylog broker start``
as a subprocess instead.

As a pytest plugin (registered through the ``pytest11`` entry point):

* ``pylog_broker`` — a running broker per test; ``pylog_broker.bootstrap_servers``
  goes to the client;
* ``pylog_broker_factory`` — ``factory(**overrides)`` for brokers with other
  settings (several per test if needed), all stopped at the end;
* ``pylog_zookeeper`` — a real ZooKeeper server (Debian's ``zookeeper``
  package, run with ``java``) for the session, and ``pylog_zookeeper_factory``
  for servers a test stops and restarts. :class:`ZooKeeperServer` is the same
  server outside pytest. Without ZooKeeper installed these fail, saying that
  ``make tools`` (``apt-get install zookeeper``) installs it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the broker is imported when one starts, not when pytest loads the plugin
    from pylog.broker.kafka_server import HandlerFactory, KafkaServer

__all__ = [
    "TEST_DEFAULTS",
    "EmbeddedBroker",
    "ZooKeeperServer",
    "ZooKeeperUnavailable",
    "broker",
    "zookeeper",
]

# What a test broker changes from a production one: loopback and an ephemeral
# port; no waiting before a new group's first rebalance; one partition for the
# offsets topic (created at the first commit, so it should be quick).
TEST_DEFAULTS: dict[str, str] = {
    "listeners": "PLAINTEXT://127.0.0.1:0",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "1",
    "shutdown.timeout.ms": "5000",
}


class EmbeddedBroker:
    """A KafkaServer on a thread of its own. ``start()``/``stop()``, or use as a
    context manager; ``restart()`` keeps the log directory."""

    def __init__(
        self,
        overrides: Mapping[str, Any] | None = None,
        *,
        log_dir: str | None = None,
        handler_factory: HandlerFactory | None = None,
        startup_timeout: float = 30.0,
    ) -> None:
        self._own_dir = log_dir is None
        self.log_dir = log_dir if log_dir is not None else tempfile.mkdtemp(prefix="pylog-test-")
        props: dict[str, Any] = {**TEST_DEFAULTS, "log.dirs": self.log_dir}
        props.update(overrides or {})
        from pylog.server.config import KafkaConfig

        self.config = KafkaConfig.from_props(props)
        self.handler_factory = handler_factory
        self.startup_timeout = startup_timeout
        self.server: KafkaServer | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._port: int | None = None

    # -- where it is

    @property
    def port(self) -> int:
        if self.server is None or self._port is None:
            raise RuntimeError("the broker is not running")
        return self._port

    @property
    def host(self) -> str:
        return self.config.listeners[0].host or "127.0.0.1"

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            raise RuntimeError("the broker is not running")
        return self._loop

    # -- lifecycle

    def start(self) -> EmbeddedBroker:
        if self._thread is not None:
            raise RuntimeError("already started")
        started = threading.Event()
        failure: list[BaseException] = []
        config = self.config
        if self._port is not None:  # a restart keeps the port clients know
            ep = config.listeners[0]
            if ep.port == 0:
                config = config.with_bound_ports({ep.listener_name: self._port})
        from pylog.broker.kafka_server import KafkaServer

        server = KafkaServer(config, handler_factory=self.handler_factory)

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(server.startup())
            except BaseException as e:
                failure.append(e)
                started.set()
                loop.close()
                return
            started.set()
            try:
                loop.run_until_complete(server.wait_stopped())
                # Let callbacks scheduled by the shutdown run before closing.
                loop.run_until_complete(asyncio.sleep(0))
            finally:
                with contextlib.suppress(Exception):
                    loop.run_until_complete(loop.shutdown_asyncgens())
                loop.close()

        thread = threading.Thread(target=run, name="pylog-test-broker", daemon=True)
        thread.start()
        if not started.wait(self.startup_timeout):
            raise TimeoutError(f"the test broker did not start in {self.startup_timeout}s")
        if failure:
            thread.join(5)
            raise failure[0]
        self.server, self._thread = server, thread
        self._port = server.port
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Graceful shutdown; the log directory is kept until :meth:`close`."""
        server, thread, loop = self.server, self._thread, self._loop
        if server is None or thread is None or loop is None:
            return
        try:
            if not loop.is_closed():
                fut = asyncio.run_coroutine_threadsafe(server.shutdown(), loop)
                fut.result(timeout)
        finally:
            thread.join(timeout)
            self.server, self._thread, self._loop = None, None, None

    def restart(self) -> EmbeddedBroker:
        """Stop cleanly and start again on the same directory and port."""
        self.stop()
        return self.start()

    def close(self) -> None:
        """Stop and remove the temporary log directory (if this broker made it)."""
        try:
            self.stop()
        finally:
            if self._own_dir:
                shutil.rmtree(self.log_dir, ignore_errors=True)

    def __enter__(self) -> EmbeddedBroker:
        if self.server is None:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        where = self.bootstrap_servers if self.server is not None else "stopped"
        return f"EmbeddedBroker({where}, log_dir={self.log_dir!r})"


@contextlib.contextmanager
def broker(
    overrides: Mapping[str, Any] | None = None,
    *,
    log_dir: str | None = None,
    handler_factory: HandlerFactory | None = None,
    **keys: Any,
) -> Iterator[EmbeddedBroker]:
    """A running broker for the ``with`` block.

    ``overrides`` (or keyword arguments with ``_`` for ``.``:
    ``broker(num_partitions=3)``) are broker keys in Kafka's names.
    """
    props = dict(overrides or {})
    props.update({k.replace("_", "."): v for k, v in keys.items()})
    b = EmbeddedBroker(props, log_dir=log_dir, handler_factory=handler_factory)
    b.start()
    try:
        yield b
    finally:
        b.close()


# ---------------------------------------------------------------- ZooKeeper

#: Where Debian's ``zookeeper`` package puts the server (its manifest names the
#: jars it needs); ``PYLOG_ZOOKEEPER_CLASSPATH`` points elsewhere.
ZOOKEEPER_CLASSPATH = ("/usr/share/java/zookeeper.jar",)
_ZOOKEEPER_MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"


class ZooKeeperUnavailable(RuntimeError):
    """No ZooKeeper server (or no java) on this machine."""


def _zookeeper_command() -> list[str]:
    java = shutil.which("java")
    env_cp = os.environ.get("PYLOG_ZOOKEEPER_CLASSPATH")
    jars = env_cp.split(os.pathsep) if env_cp else list(ZOOKEEPER_CLASSPATH)
    missing = [j for j in jars if not os.path.exists(j)]
    if java is None or missing or not jars:
        raise ZooKeeperUnavailable(
            "no ZooKeeper server to run: "
            + ("java is not installed" if java is None else f"{', '.join(missing)} missing")
            + ". `make tools` installs it (Debian's zookeeper package: "
            "apt-get install zookeeper), or set PYLOG_ZOOKEEPER_CLASSPATH to its jars"
        )
    return [
        java,
        "-Xms32m",
        "-Xmx256m",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",  # starts faster; a test server does little work
        "-Dzookeeper.admin.enableServer=false",
        "-Dzookeeper.jmx.log4j.disable=true",
        "-cp",
        os.pathsep.join(jars),
        _ZOOKEEPER_MAIN,
    ]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ZooKeeperServer:
    """A standalone ZooKeeper server on a loopback port, its data in a temporary
    directory. ``start()``/``stop()`` (or a ``with`` block); ``restart()`` keeps
    the port and, unless ``wipe=True``, the data — sessions survive a restart
    that is shorter than their timeout, as with a real ensemble.

    ``tick_ms`` is ZooKeeper's tickTime: sessions may be as short as two ticks,
    so tests can use session timeouts of a second or two."""

    def __init__(
        self, *, data_dir: str | None = None, tick_ms: int = 500, startup_timeout: float = 30.0
    ) -> None:
        self._own_dir = data_dir is None
        self.dir = data_dir if data_dir is not None else tempfile.mkdtemp(prefix="pylog-zk-")
        self.tick_ms = tick_ms
        self.startup_timeout = startup_timeout
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def connect(self) -> str:
        """``host:port`` for ``zookeeper.connect`` (append ``/chroot`` to isolate)."""
        if not self.port:
            raise RuntimeError("the ZooKeeper server has not started")
        return f"127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _write_config(self) -> str:
        data = os.path.join(self.dir, "data")
        os.makedirs(data, exist_ok=True)
        cfg = os.path.join(self.dir, "zoo.cfg")
        with open(cfg, "w") as f:
            f.write(
                f"tickTime={self.tick_ms}\n"
                f"dataDir={data}\n"
                f"clientPort={self.port}\n"
                "clientPortAddress=127.0.0.1\n"
                "maxClientCnxns=0\n"
                f"minSessionTimeout={2 * self.tick_ms}\n"
                "maxSessionTimeout=60000\n"
                "4lw.commands.whitelist=ruok,srvr,stat,cons\n"
                "admin.enableServer=false\n"
                "autopurge.purgeInterval=0\n"
            )
        return cfg

    def four_letter(self, word: str, timeout: float = 2.0) -> str:
        """ZooKeeper's four-letter command (``ruok``, ``srvr``, ``cons``)."""
        with socket.create_connection(("127.0.0.1", self.port), timeout) as s:
            s.sendall(word.encode("ascii"))
            chunks = []
            while chunk := s.recv(4096):
                chunks.append(chunk)
        return b"".join(chunks).decode("utf-8", "replace")

    def start(self) -> ZooKeeperServer:
        if self.running:
            raise RuntimeError("already started")
        cmd = _zookeeper_command()
        if not self.port:
            self.port = _free_port()
        cmd.append(self._write_config())
        log = open(os.path.join(self.dir, "zookeeper.log"), "ab")  # noqa: SIM115
        try:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        finally:
            log.close()
        deadline = time.monotonic() + self.startup_timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"ZooKeeper exited with {self.proc.returncode}; see "
                    f"{os.path.join(self.dir, 'zookeeper.log')}"
                )
            with contextlib.suppress(OSError):
                # imok comes before the server serves: wait for a real answer too
                if self.four_letter("ruok", 1.0) == "imok" and "Mode:" in self.four_letter(
                    "srvr", 1.0
                ):
                    return self
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"ZooKeeper did not answer in {self.startup_timeout}s")
            time.sleep(0.1)

    def stop(self, timeout: float = 15.0) -> None:
        """Stop the server (SIGTERM, then SIGKILL)."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout)

    def restart(self, *, down_for: float = 0.0, wipe: bool = False) -> ZooKeeperServer:
        """Stop, stay down ``down_for`` seconds, start on the same port; ``wipe``
        drops the data (every znode and session is gone, as on a new ensemble)."""
        self.stop()
        if down_for > 0:
            time.sleep(down_for)
        if wipe:
            shutil.rmtree(os.path.join(self.dir, "data"), ignore_errors=True)
        return self.start()

    def close(self) -> None:
        try:
            self.stop()
        finally:
            if self._own_dir:
                shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> ZooKeeperServer:
        if not self.running:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        where = self.connect if self.running else "stopped"
        return f"ZooKeeperServer({where}, dir={self.dir!r})"


@contextlib.contextmanager
def zookeeper(*, tick_ms: int = 500) -> Iterator[ZooKeeperServer]:
    """A running ZooKeeper server for the ``with`` block."""
    with ZooKeeperServer(tick_ms=tick_ms) as zk:
        yield zk


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
