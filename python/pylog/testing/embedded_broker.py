"""An embedded broker for tests: a KafkaServer on a thread of this process
(see the package's docstring for why a thread and not a subprocess)."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
import threading
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the broker is imported when one starts, not when pytest loads the plugin
    from pylog.broker.kafka_server import HandlerFactory, KafkaServer

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
