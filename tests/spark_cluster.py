"""A Spark standalone cluster on this machine for the tests: one master and two
workers started from the PySpark installation's own classes
(``bin/spark-class org.apache.spark.deploy.master.Master`` / ``...worker.Worker``)
on 127.0.0.1, each worker offering one core and a small memory, their
executors running Python with this interpreter and this checkout's pylog.

Drivers run in their own processes (:meth:`SparkStandalone.driver`): a test
process holds at most one SparkContext, the local[2] one of spark_support, and
a driver a test kills must be a process of its own. Executors are found
through the worker that launched them (:meth:`SparkStandalone.executors`), so
a test only ever signals a JVM this cluster started.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

_MASTER_URL = re.compile(r"Starting Spark master at (spark://\S+)")


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def python_path() -> str:
    """The executors' PYTHONPATH: this checkout's pylog, then the tests'
    helpers (drivers import them; pickled functions may name them)."""
    parts = [str(ROOT / "python"), str(ROOT / "tests"), str(ROOT / "tests" / "spark")]
    if os.environ.get("PYTHONPATH"):
        parts.append(os.environ["PYTHONPATH"])
    return os.pathsep.join(parts)


def _children(pid: int) -> list[int]:
    # every thread's children: a JVM starts processes from threads other than its main one
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and _parent(int(entry)) == pid:
            out.append(int(entry))
    return out


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _parent(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as f:
            # the command may hold spaces and parentheses: the fields follow the last ')'
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


class SparkStandalone:
    """A master and ``workers`` workers; :meth:`close` stops them (and so their
    executors)."""

    def __init__(self, directory: Path, workers: int = 2, memory: str = "1g") -> None:
        self.dir = directory
        self.n_workers = workers
        self.memory = memory
        self.master: subprocess.Popen[bytes] | None = None
        self.workers: list[subprocess.Popen[bytes]] = []
        self.url = ""

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            SPARK_HOME=str(spark_home()),
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_LOCAL_HOSTNAME="127.0.0.1",
            SPARK_DAEMON_MEMORY="256m",
            SPARK_LOG_DIR=str(self.dir / "logs"),
            PYSPARK_PYTHON=sys.executable,
            PYSPARK_DRIVER_PYTHON=sys.executable,
            PYTHONPATH=python_path(),
        )
        return env

    def _daemon(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        log = open(self.dir / f"{name}.log", "wb")  # noqa: SIM115 - the process keeps it
        cls = spark_home() / "bin" / "spark-class"
        return subprocess.Popen(
            [str(cls), *args], stdout=log, stderr=subprocess.STDOUT, env=self.env(), cwd=self.dir
        )

    def _wait_log(self, name: str, pattern: str, proc: subprocess.Popen[bytes]) -> str:
        deadline = time.monotonic() + 120
        path = self.dir / f"{name}.log"
        while time.monotonic() < deadline:
            text = path.read_text(errors="replace") if path.exists() else ""
            m = re.search(pattern, text)
            if m:
                return m.group(1) if m.groups() else m.group(0)
            if proc.poll() is not None:
                raise RuntimeError(f"spark {name} exited {proc.returncode}: {text[-2000:]}")
            time.sleep(0.2)
        raise RuntimeError(f"spark {name} did not log {pattern!r} in 120 s")

    def start(self) -> SparkStandalone:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.master = self._daemon(
            "master",
            "org.apache.spark.deploy.master.Master",
            *("--host", "127.0.0.1", "--port", "0", "--webui-port", "0"),
        )
        self.url = self._wait_log("master", _MASTER_URL.pattern, self.master)
        for i in range(self.n_workers):
            work = self.dir / f"work-{i}"
            work.mkdir(exist_ok=True)
            self.workers.append(
                self._daemon(
                    f"worker-{i}",
                    "org.apache.spark.deploy.worker.Worker",
                    *("--host", "127.0.0.1", "--webui-port", "0", "--cores", "1"),
                    *("--memory", self.memory, "--work-dir", str(work), self.url),
                )
            )
        for i, w in enumerate(self.workers):
            self._wait_log(f"worker-{i}", r"Successfully registered with master", w)
        return self

    def close(self) -> None:
        for p in [*self.workers, *([self.master] if self.master else [])]:
            if p.poll() is None:
                p.terminate()
        for p in [*self.workers, *([self.master] if self.master else [])]:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def executors(self) -> dict[int, int]:
        """The executor JVMs running now: pid -> the worker index that launched it
        (a worker starts each executor as its own child process)."""
        out = {}
        for i, w in enumerate(self.workers):
            for child in _children(w.pid):
                if "CoarseGrainedExecutorBackend" in _cmdline(child):
                    out[child] = i
        return out

    def executor_of(self, pid: int) -> int | None:
        """The executor JVM of this cluster that ``pid`` (a Python worker) runs
        under, found by walking up its parents; None if it is not one of ours."""
        ours = self.executors()
        while pid > 1:
            if pid in ours:
                return pid
            pid = _parent(pid)
        return None

    def kill_executor(self, pid: int) -> None:
        if pid not in self.executors():
            raise AssertionError(f"{pid} is not an executor this cluster started")
        os.kill(pid, signal.SIGKILL)

    def driver_conf(self, app: str) -> dict[str, str]:
        """What a driver of this cluster sets: small executors of one core each,
        this interpreter on both sides, quick task retries."""
        return {
            "spark.master": self.url,
            "spark.app.name": app,
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.driver.memory": "512m",
            "spark.executor.memory": "512m",
            "spark.executor.cores": "1",
            "spark.cores.max": str(self.n_workers),
            "spark.pyspark.python": sys.executable,
            "spark.executorEnv.PYTHONPATH": python_path(),
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.sql.session.timeZone": "UTC",
        }

    def driver(
        self, script: Path, *args: str, log: Path, conf: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        """Start ``script`` as a driver process of this cluster, in a session
        of its own so that :func:`kill_driver` takes its JVM with it. The
        script reads its Spark settings from ``PYLOG_SPARK_CONF`` (k=v lines)."""
        env = self.env()
        settings = {**self.driver_conf(script.stem), **(conf or {})}
        env["PYLOG_SPARK_CONF"] = "\n".join(f"{k}={v}" for k, v in settings.items())
        out = open(log, "ab")  # noqa: SIM115 - the process keeps it
        return subprocess.Popen(
            [sys.executable, str(script), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )


def kill_driver(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL a driver started by :meth:`SparkStandalone.driver`: its Python
    process and the JVM it launched (its process group, which it leads)."""
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def session_from_env() -> object:
    """In a driver script: the SparkSession ``PYLOG_SPARK_CONF`` describes,
    with pylog's format registered."""
    from pyspark.sql import SparkSession

    import pylog.spark

    b = SparkSession.builder
    for line in os.environ["PYLOG_SPARK_CONF"].splitlines():
        k, _, v = line.partition("=")
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    pylog.spark.register(spark)
    return spark


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkStandalone]:
    c = SparkStandalone(tmp_path_factory.mktemp("spark-standalone")).start()
    try:
        yield c
    finally:
        c.close()
