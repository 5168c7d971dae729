"""A local pylog cluster for tests: a real ZooKeeper server and N
``pylog broker start`` processes on loopback, each with its own log directory.

Processes rather than threads (unlike :class:`~pylog.testing.EmbeddedBroker`)
because a cluster test wants brokers to die: :meth:`ClusterBroker.kill` is a
real SIGKILL, :meth:`ClusterBroker.pause` a real SIGSTOP, and a restarted
broker comes back on the same port and data, as a machine would."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import IO, Any

from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss, SessionExpiredError

from pylog.testing.network_faults import CLIENT, ZOOKEEPER, FaultProxy, NetworkFaults, kafka_peer
from pylog.testing.zookeeper import ZooKeeperServer

#: What a test cluster changes from Kafka's defaults: loopback, a fast first
#: rebalance, and short timeouts, so a killed broker is noticed in seconds
#: (its ZooKeeper session) rather than Kafka's 18 s, and a stopped follower
#: leaves the ISR after 10 s rather than 30 s.
CLUSTER_TEST_DEFAULTS: dict[str, str] = {
    "group.initial.rebalance.delay.ms": "0",
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "10000",
    "shutdown.timeout.ms": "10000",
}

_STARTED = "started: "


class ClusterBroker:
    """One ``pylog broker start`` process of a :class:`LocalCluster`. A restart
    keeps its port and log directory; its log goes to ``<dir>/broker.log``."""

    def __init__(
        self,
        broker_id: int,
        directory: str,
        overrides: Mapping[str, object],
        *,
        port: int = 0,
        log_level: str = "INFO",
        startup_timeout: float = 60.0,
    ) -> None:
        self.broker_id = broker_id
        self.dir = directory
        self.log_dir = os.path.join(directory, "data")
        self.overrides = dict(overrides)
        self.port = port
        self.log_level = log_level
        self.startup_timeout = startup_timeout
        self.proc: subprocess.Popen[str] | None = None
        #: each listener's bound port, by listener name, from the start-up line
        self.listener_ports: dict[str, int] = {}
        #: where clients reach the broker when not on its own port (a proxy)
        self.client_address: str | None = None
        #: called after each start with the broker (a proxy learns the new ports)
        self.on_started: Callable[[ClusterBroker], None] | None = None

    @property
    def bootstrap_servers(self) -> str:
        return self.client_address or f"127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def log_file(self) -> str:
        return os.path.join(self.dir, "broker.log")

    def command(self) -> list[str]:
        cmd = [
            sys.executable, "-m", "pylog.cli", "broker", "start",
            "--log-level", self.log_level,
            "--override", f"broker.id={self.broker_id}",
            "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
            "--override", f"log.dirs={self.log_dir}",
        ]  # fmt: skip
        for key, value in self.overrides.items():
            cmd += ["--override", f"{key}={value}"]
        return cmd

    def start(self) -> ClusterBroker:
        if self.running:
            raise RuntimeError(f"broker {self.broker_id} is already running")
        os.makedirs(self.dir, exist_ok=True)
        log = open(self.log_file, "a")  # noqa: SIM115 - handed to the child
        log_start = log.tell()
        try:
            proc = subprocess.Popen(
                self.command(),
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                bufsize=1,
                # Its own session: a Ctrl-C at the terminal reaches the owner,
                # which stops the brokers in order, not every broker at once.
                start_new_session=True,
            )
        finally:
            log.close()
        assert proc.stdout is not None
        line = _read_line(proc.stdout, self.startup_timeout)
        if _STARTED not in line:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            proc.wait(10)
            raise RuntimeError(
                f"broker {self.broker_id} did not start ({line.strip() or 'no output'}"
                f"{_last_error(self.log_file, log_start)}); see {self.log_file}"
            )
        # "pylog broker 1 started: NAME://host:port, NAME://host:port (log.dirs …)"
        listeners = line.split(_STARTED, 1)[1].split(" (", 1)[0]
        self.listener_ports = {
            ep.split("://", 1)[0]: int(ep.rsplit(":", 1)[1]) for ep in listeners.split(", ")
        }
        self.port = next(iter(self.listener_ports.values()))
        # Drain stdout so the broker never blocks on a full pipe.
        threading.Thread(target=_drain, args=(proc.stdout,), daemon=True).start()
        self.proc = proc
        if self.on_started is not None:
            self.on_started(self)
        return self

    def _signal(self, sig: int) -> None:
        if self.proc is None or self.proc.poll() is not None:
            raise RuntimeError(f"broker {self.broker_id} is not running")
        self.proc.send_signal(sig)

    def stop(self, timeout: float = 60.0) -> int:
        """A clean shutdown (SIGTERM); returns the exit status."""
        proc, self.proc = self.proc, None
        if proc is None:
            return 0
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGCONT)  # a paused broker cannot stop
                proc.terminate()
            try:
                return proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
        return proc.wait(timeout)

    def kill(self) -> None:
        """SIGKILL: the broker dies with no shutdown at all."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
        if proc is not None:
            proc.wait(30)

    def pause(self) -> None:
        """SIGSTOP: alive but silent (no heartbeats, no fetches)."""
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)

    def restart(self) -> ClusterBroker:
        if self.running:
            self.stop()
        return self.start()

    def __repr__(self) -> str:
        state = self.bootstrap_servers if self.running else "stopped"
        return f"ClusterBroker({self.broker_id}, {state})"


def _read_line(stream: IO[str], timeout: float) -> str:
    out: list[str] = []
    reader = threading.Thread(target=lambda: out.append(stream.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    return out[0] if out else ""


def _last_error(log_file: str, start: int) -> str:
    """``: <why>`` from the last ``Error:`` line a failed start-up wrote to
    its log past ``start`` (the CLI's one line on stderr), or nothing."""
    try:
        with open(log_file, "rb") as f:
            f.seek(max(start, os.fstat(f.fileno()).st_size - 16384))
            tail = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return ""
    errors = [ln for ln in tail if ln.startswith("Error:")]
    return f": {errors[-1]}" if errors else ""


def _drain(stream: IO[str]) -> None:
    with contextlib.suppress(OSError, ValueError):
        for _ in stream:
            pass


def _knows_brokers(bootstrap: str, count: int) -> bool:
    """Whether the broker at ``bootstrap`` lists ``count`` brokers in its
    Metadata; True when it cannot be asked in plain text (a listener needing
    TLS or SASL), which leaves those clusters' readiness to their tests."""
    from pylog.errors import KafkaError
    from pylog.protocol.client import KafkaConnection
    from pylog.protocol.messages.metadata_response import MetadataResponse

    try:
        with KafkaConnection(bootstrap, timeout=5.0) as conn:
            # Metadata v1 with no topics: only the brokers.
            answer = conn.request(3, 1, {"topics": []}, MetadataResponse)
    except (KafkaError, OSError, EOFError, ValueError):
        return True
    return len(answer.brokers) >= count


class LocalCluster:
    """ZooKeeper and ``brokers`` pylog brokers (ids 1..N) on loopback.

    ``zookeeper`` is a running :class:`ZooKeeperServer` or a ``host:port``
    connect string to share (each cluster takes a chroot of its own); without
    one the cluster starts its own server (on ``zookeeper_port``, or a free
    one). ``chroot`` is where the brokers' znodes go (a new random one by
    default; give a fixed one to find a kept cluster again). ``base_port`` puts broker i on
    ``base_port + i - 1`` (ephemeral ports otherwise); ``racks`` sets
    ``broker.rack`` per broker and ``per_broker`` any key per broker id
    (``{1: {"metrics.port": 9404}}``). ``directory`` keeps the data (a temporary
    directory, removed on :meth:`close`, otherwise)."""

    def __init__(
        self,
        brokers: int = 3,
        overrides: Mapping[str, object] | None = None,
        *,
        zookeeper: ZooKeeperServer | str | None = None,
        directory: str | None = None,
        chroot: str | None = None,
        base_port: int = 0,
        zookeeper_port: int = 0,
        racks: Sequence[str] | None = None,
        per_broker: Mapping[int, Mapping[str, object]] | None = None,
        log_level: str = "INFO",
        startup_timeout: float = 60.0,
        network_faults: bool = False,
    ) -> None:
        if brokers < 1:
            raise ValueError("a cluster needs at least one broker")
        if racks is not None and len(racks) != brokers:
            raise ValueError(f"{len(racks)} racks for {brokers} brokers")
        self._own_dir = directory is None
        self.dir = directory if directory is not None else tempfile.mkdtemp(prefix="pylog-cluster-")
        self._own_zk = zookeeper is None
        self._zk_server: ZooKeeperServer | None = (
            zookeeper if isinstance(zookeeper, ZooKeeperServer) else None
        )
        self._zk_connect = zookeeper if isinstance(zookeeper, str) else None
        self.chroot = chroot if chroot is not None else f"/pylog-{uuid.uuid4().hex[:10]}"
        if not self.chroot.startswith("/") or self.chroot == "/":
            raise ValueError(f"chroot {self.chroot!r} is not a ZooKeeper path below /")
        self.zookeeper_port = zookeeper_port
        self.startup_timeout = startup_timeout
        props: dict[str, object] = {
            **CLUSTER_TEST_DEFAULTS,
            "offsets.topic.replication.factor": str(min(3, brokers)),
        }
        props.update(overrides or {})
        self.overrides = props
        self.brokers: dict[int, ClusterBroker] = {}
        for i in range(1, brokers + 1):
            extra = dict(props)
            if racks is not None:
                extra["broker.rack"] = racks[i - 1]
            extra.update((per_broker or {}).get(i, {}))
            self.brokers[i] = ClusterBroker(
                i,
                os.path.join(self.dir, f"broker-{i}"),
                extra,
                port=base_port + i - 1 if base_port else 0,
                log_level=log_level,
                startup_timeout=startup_timeout,
            )
        self.zk: KazooClient | None = None
        #: With ``network_faults``: every link through a proxy a test can cut
        #: (:class:`~pylog.testing.network_faults.NetworkFaults`), set up at start.
        self.network_faults = network_faults
        self.faults: NetworkFaults | None = None

    # -- where it is

    @property
    def zookeeper_connect(self) -> str:
        """``zookeeper.connect`` of the brokers, chroot included."""
        if self._zk_server is not None:
            return self._zk_server.connect + self.chroot
        if self._zk_connect is None:
            raise RuntimeError("the cluster has not started")
        return self._zk_connect + self.chroot

    @property
    def bootstrap_servers(self) -> str:
        """The running brokers, for a client's ``bootstrap.servers``."""
        return ",".join(b.bootstrap_servers for b in self.brokers.values() if b.running)

    def broker(self, broker_id: int) -> ClusterBroker:
        return self.brokers[broker_id]

    # -- lifecycle

    def start(self) -> LocalCluster:
        if self._zk_server is None and self._zk_connect is None:
            self._zk_server = ZooKeeperServer(
                data_dir=os.path.join(self.dir, "zookeeper"), port=self.zookeeper_port
            )
            self._zk_server.start()
        root = self._zk_server.connect if self._zk_server is not None else self._zk_connect
        boot = KazooClient(hosts=root)
        boot.start(timeout=self.startup_timeout)
        try:
            boot.ensure_path(self.chroot)
        finally:
            boot.stop()
            boot.close()
        self.zk = KazooClient(hosts=self.zookeeper_connect)
        self.zk.start(timeout=self.startup_timeout)
        try:
            for b in self.brokers.values():
                b.overrides["zookeeper.connect"] = self.zookeeper_connect
            if self.network_faults:
                self._route_through_proxies(str(root))
            for b in self.brokers.values():
                b.start()
            ids = sorted(self.brokers)
            self.wait_for(lambda: self.registered() == ids, "every broker to register")
            self.wait_for(lambda: self.controller() is not None, "a controller")
            # Registered is not ready: a broker answers clients from its
            # MetadataCache, which the controller's UpdateMetadata fills a
            # moment later. Until then it knows no live broker, and a client's
            # first FindCoordinator there fails; librdkafka retries that only
            # twice, then waits for its request timeout.
            for b in self.brokers.values():
                self.wait_for(
                    functools.partial(_knows_brokers, b.bootstrap_servers, len(ids)),
                    f"broker {b.broker_id} to learn of every broker",
                )
        except BaseException:
            self.close()
            raise
        return self

    def _route_through_proxies(self, zk_root: str) -> None:
        """Each broker's links through proxies: ZooKeeper through one of its
        own, its client listener and its inter-broker listener through one
        each, advertised in their place (so clients and the other brokers
        dial the proxies)."""
        faults = self.faults = NetworkFaults()
        zk_host, zk_port = zk_root.split(",", 1)[0].rsplit(":", 1)
        for b in self.brokers.values():
            node = str(b.broker_id)
            zk = faults.proxy(ZOOKEEPER, node, (zk_host, int(zk_port)))
            client = faults.proxy(node, CLIENT)
            internal = faults.proxy(node, kafka_peer)
            b.overrides.update(
                {
                    "zookeeper.connect": f"{zk.address}{self.chroot}",
                    "listeners": "CLIENT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
                    "advertised.listeners": (
                        f"CLIENT://{client.address},INTERNAL://{internal.address}"
                    ),
                    "listener.security.protocol.map": "CLIENT:PLAINTEXT,INTERNAL:PLAINTEXT",
                    "inter.broker.listener.name": "INTERNAL",
                }
            )
            b.client_address = client.address

            def started(
                broker: ClusterBroker, client: FaultProxy = client, internal: FaultProxy = internal
            ) -> None:
                client.upstream = ("127.0.0.1", broker.listener_ports["CLIENT"])
                internal.upstream = ("127.0.0.1", broker.listener_ports["INTERNAL"])

            b.on_started = started

    def close(self) -> None:
        """Stop every broker cleanly (SIGTERM), then ZooKeeper if it is the
        cluster's own; remove a temporary directory."""
        try:
            if self.faults is not None:
                self.faults.heal()  # a cut broker could not shut down cleanly
            for b in self.brokers.values():
                with contextlib.suppress(Exception):
                    b.stop()
            if self.zk is not None:
                with contextlib.suppress(Exception):
                    self.zk.stop()
                    self.zk.close()
                self.zk = None
            if self._own_zk and self._zk_server is not None:
                self._zk_server.stop()
            if self.faults is not None:
                self.faults.close()
                self.faults = None
        finally:
            if self._own_dir:
                shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> LocalCluster:
        if self.zk is None:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- what ZooKeeper says

    def _zk(self) -> KazooClient:
        if self.zk is None:
            raise RuntimeError("the cluster has not started")
        return self.zk

    def _json(self, path: str) -> dict[str, Any] | None:
        zk = self._zk()
        try:
            data = zk.get(path)[0]
        except Exception as e:  # kazoo's NoNodeError
            if type(e).__name__ == "NoNodeError":
                return None
            raise
        doc = json.loads(data)
        return doc if isinstance(doc, dict) else None

    def registered(self) -> list[int]:
        """Broker ids registered in ``/brokers/ids`` (the live ones)."""
        zk = self._zk()
        if zk.exists("/brokers/ids") is None:
            return []
        return sorted(int(c) for c in zk.get_children("/brokers/ids"))

    def controller(self) -> int | None:
        """The active controller's broker id (``/controller``), if any."""
        doc = self._json("/controller")
        return int(doc["brokerid"]) if doc is not None else None

    def partition_state(self, topic: str, partition: int = 0) -> dict[str, Any] | None:
        """The partition's ``state`` znode: leader, leader_epoch, isr, controller_epoch."""
        return self._json(f"/brokers/topics/{topic}/partitions/{partition}/state")

    def replicas(self, topic: str, partition: int = 0) -> list[int]:
        """The partition's assigned replicas (``/brokers/topics/<topic>``)."""
        doc = self._json(f"/brokers/topics/{topic}")
        if doc is None:
            return []
        return [int(r) for r in doc["partitions"].get(str(partition), [])]

    def leader(self, topic: str, partition: int = 0) -> int | None:
        state = self.partition_state(topic, partition)
        if state is None or int(state["leader"]) < 0:
            return None
        return int(state["leader"])

    def isr(self, topic: str, partition: int = 0) -> list[int]:
        state = self.partition_state(topic, partition)
        return sorted(int(r) for r in state["isr"]) if state is not None else []

    # -- waiting

    def wait_for(
        self, predicate: Callable[[], object], what: str, timeout: float | None = None
    ) -> None:
        """Poll ``predicate`` until true; TimeoutError naming ``what`` after
        ``timeout`` seconds (the cluster's start-up timeout by default)."""
        deadline = time.monotonic() + (self.startup_timeout if timeout is None else timeout)
        pause = threading.Event()
        while not self._holds(predicate):
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out waiting for {what}")
            pause.wait(0.05)

    @staticmethod
    def _holds(predicate: Callable[[], object]) -> bool:
        # This cluster's own ZooKeeper client loses its connection (or, on a
        # loaded machine, its session) while ZooKeeper restarts; kazoo
        # reconnects, and until then the condition is simply not met yet.
        try:
            return bool(predicate())
        except (ConnectionLoss, SessionExpiredError):
            return False

    def wait_for_leader(
        self, topic: str, partition: int = 0, *, timeout: float | None = None
    ) -> int:
        """Wait until the partition has a leader that is alive; return it."""

        def ok() -> bool:
            leader = self.leader(topic, partition)
            return leader is not None and leader in self.registered()

        self.wait_for(ok, f"a leader of {topic}-{partition}", timeout)
        leader = self.leader(topic, partition)
        assert leader is not None
        return leader

    def wait_for_full_isr(
        self, topic: str, partitions: int = 1, *, timeout: float | None = None
    ) -> None:
        """Wait until every replica of the topic's first ``partitions``
        partitions is in their ISR."""

        def ok() -> bool:
            return all(
                (r := self.replicas(topic, p)) and self.isr(topic, p) == sorted(r)
                for p in range(partitions)
            )

        self.wait_for(ok, f"the full ISR of {topic}", timeout)


@contextlib.contextmanager
def cluster(
    brokers: int = 3,
    overrides: Mapping[str, object] | None = None,
    *,
    zookeeper: ZooKeeperServer | str | None = None,
    racks: Sequence[str] | None = None,
    per_broker: Mapping[int, Mapping[str, object]] | None = None,
    network_faults: bool = False,
    **keys: object,
) -> Iterator[LocalCluster]:
    """A running local cluster for the ``with`` block.

    ``overrides`` (or keyword arguments with ``_`` for ``.``:
    ``cluster(min_insync_replicas=2)``) are broker keys in Kafka's names,
    given to every broker."""
    props = dict(overrides or {})
    props.update({k.replace("_", "."): v for k, v in keys.items()})
    with LocalCluster(
        brokers,
        props,
        zookeeper=zookeeper,
        racks=racks,
        per_broker=per_broker,
        network_faults=network_faults,
    ) as c:
        yield c
