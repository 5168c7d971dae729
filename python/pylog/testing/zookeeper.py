"""A real ZooKeeper server for tests: Debian's ``zookeeper`` package run with
``java`` on a free loopback port and a temporary data directory."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator

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
        self,
        *,
        data_dir: str | None = None,
        port: int = 0,
        tick_ms: int = 500,
        startup_timeout: float = 30.0,
    ) -> None:
        self._own_dir = data_dir is None
        self.dir = data_dir if data_dir is not None else tempfile.mkdtemp(prefix="pylog-zk-")
        self.tick_ms = tick_ms
        self.startup_timeout = startup_timeout
        self.port = port  # 0: a free port, chosen at the first start
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
            self.proc = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
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
