"""KafkaZkClient: the typed ZooKeeper operations a ZooKeeper-mode broker and its
controller need, over the znodes of :mod:`pylog.metadata.zk_data` (Kafka's
``kafka.zk.KafkaZkClient``).

The client underneath is kazoo (https://kazoo.readthedocs.io), the maintained
pure-Python ZooKeeper client: sessions, reconnection across an ensemble, watches,
multi-op transactions and ZooKeeper 3.5's create2 (the new znode's stat, which
gives the broker epoch in one round trip). kazoo has no type information; this
module is the only one that touches it, so the rest of pylog stays typed.

Threads. kazoo's calls block, and kazoo runs watch and state callbacks on its
own thread. So:

* every method of :class:`KafkaZkClient` blocks — call it from a thread, or
  ``await zk.run(zk.method, ...)``, which runs it on the client's executor of
  ``zookeeper.max.in.flight.requests`` threads (that bounds the requests in
  flight, as Kafka's ZooKeeperClient bounds them);
* the watch helpers (:meth:`watch_children`, :meth:`watch_data`) take a
  ``loop`` and hand each event to it with ``call_soon_threadsafe``, so the
  callback runs on the event loop thread;
* a session that expires (kazoo ``LOST``) is replaced by kazoo with a new one;
  handlers registered with :meth:`register_state_change_handler` run on a
  thread of their own once the new session is connected (Kafka's
  ``StateChangeHandler.afterInitializingSession``), to re-create ephemeral
  znodes such as the broker registration.

Races. Every write that can race with another broker or controller is
conditional on the znode version it read (``expected_version``): a loser gets
:class:`ZkVersionMismatch` or a ``ConditionalUpdate(succeeded=False)``, never a
silent overwrite. Ephemeral creation checks the owner of an existing znode
(Kafka's ``checkedEphemeralCreate``): our own session's node is fine, another
live session's is an error.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, NamedTuple, TypeVar

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    BadVersionError,
    ConnectionClosedError,
    ConnectionLoss,
    KazooException,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionExpiredError,
    ZookeeperError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from pylog.errors import KafkaError
from pylog.metadata.zk_data import (
    PERSISTENT_ZK_PATHS,
    BrokerIdsZNode,
    BrokerIdZNode,
    BrokerInfo,
    BrokerSequenceIdZNode,
    ClusterIdZNode,
    ConfigEntityChangeNotificationZNode,
    ConfigEntityZNode,
    ControllerEpochZNode,
    ControllerZNode,
    DeleteTopicsTopicZNode,
    DeleteTopicsZNode,
    FeatureZNode,
    FinalizedFeatures,
    IsrChangeNotificationZNode,
    LeaderAndIsr,
    LogDirEventNotificationZNode,
    ProducerIdBlock,
    ProducerIdBlockZNode,
    TopicPartitionStateZNode,
    TopicPartitionsZNode,
    TopicPartitionZNode,
    TopicReplicaAssignment,
    TopicsZNode,
    TopicZNode,
    ZkAclStore,
    ZkDataError,
)
from pylog.security.pattern_type import PatternType
from pylog.security.resource_pattern import ResourcePattern

__all__ = [
    "BrokerIdInUseError",
    "ConditionalUpdate",
    "ControllerMovedError",
    "KafkaZkClient",
    "ZkConnectionError",
    "ZkError",
    "ZkNodeExists",
    "ZkVersionMismatch",
    "ZnodeStat",
]

_log = logging.getLogger("pylog.zookeeper")

T = TypeVar("T")

#: ZooKeeper's "any version" for a set or delete.
MATCH_ANY_VERSION = -1


class ZkError(KafkaError):
    """A ZooKeeper operation failed (connection, session, server error). A
    KafkaError, so a request it fails is answered (UNKNOWN_SERVER_ERROR with
    the message) and a start-up it fails says why."""


class ZkConnectionError(ZkError):
    """No ZooKeeper session: the server is unreachable or the session expired."""

    retriable = True


class ZkVersionMismatch(ZkError):
    """A conditional write lost: the znode changed since it was read."""


class ZkNodeExists(ZkError):
    """The znode already exists."""


class BrokerIdInUseError(ZkError):
    """``/brokers/ids/<id>`` is held by another live session: another broker
    runs with this ``broker.id``."""


class ControllerMovedError(ZkError):
    """Another broker is (or became) the controller, or the controller epoch
    moved past the one this write was fenced with."""


class ZnodeStat(NamedTuple):
    """The parts of a znode's stat pylog reads (kazoo's ZnodeStat, typed)."""

    czxid: int  # the transaction that created it: a broker epoch for /brokers/ids/<id>
    version: int  # data version, the condition of a conditional write
    ephemeral_owner: int  # the owning session of an ephemeral znode, else 0
    num_children: int
    ctime_ms: int = 0  # when it was created (ZooKeeper's clock, epoch milliseconds)

    @classmethod
    def of(cls, stat: Any) -> ZnodeStat:
        return cls(
            int(stat.czxid),
            int(stat.version),
            int(stat.ephemeralOwner),
            int(stat.numChildren),
            int(stat.ctime),
        )


class ConditionalUpdate(NamedTuple):
    """The result of a write conditional on a znode version: ``version`` is the
    znode's new version when it ``succeeded``, -1 otherwise."""

    succeeded: bool
    version: int


@dataclass(frozen=True)
class _Handler:
    name: str
    before: Callable[[], None] | None
    after: Callable[[], None] | None


def _translate(e: BaseException, what: str) -> ZkError:
    if isinstance(e, KazooTimeoutError):
        return ZkConnectionError(f"{what}: ZooKeeper did not answer in time")
    if isinstance(e, ConnectionLoss | SessionExpiredError | ConnectionClosedError):
        # No session to send it on: retriable once ZooKeeper is back.
        return ZkConnectionError(f"{what}: {type(e).__name__}")
    if isinstance(e, ZookeeperError | KazooException):
        return ZkError(f"{what}: {type(e).__name__} {e}".rstrip())
    return ZkError(f"{what}: {e}")


class KafkaZkClient:
    """Kafka's ZooKeeper operations on one ZooKeeper session (see the module
    docstring for threads and races).

    ``connect`` is ``zookeeper.connect`` (``host:port[,host:port…][/chroot]``).
    A chroot that does not exist is created, as Kafka does."""

    def __init__(
        self,
        connect: str,
        *,
        session_timeout_ms: int = 18_000,
        connection_timeout_ms: int | None = None,
        max_in_flight_requests: int = 10,
    ) -> None:
        self.connect_string = connect
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = connection_timeout_ms or session_timeout_ms
        self.max_in_flight_requests = max(1, max_in_flight_requests)
        hosts, _, chroot = connect.partition("/")
        self._chroot = "/" + chroot.strip("/") if chroot.strip("/") else ""
        self._hosts = hosts
        self._zk = KazooClient(
            hosts=connect,
            timeout=session_timeout_ms / 1000,
            connection_retry={"max_tries": -1, "delay": 0.1, "max_delay": 1.0},
            command_retry={"max_tries": 0},
        )
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=self.max_in_flight_requests, thread_name_prefix="pylog-zk"
        )
        self._handlers: dict[str, _Handler] = {}
        self._handlers_lock = threading.Lock()
        self._session_id: int | None = None
        self._session_thread: threading.Thread | None = None
        self._closed = False
        self._zk.add_listener(self._on_state)

    # ------------------------------------------------------------------ session

    def start(self) -> None:
        """Connect (blocks up to ``connection_timeout_ms``), create the chroot if
        missing. ZkConnectionError if ZooKeeper cannot be reached."""
        if self._chroot:
            bare = KazooClient(hosts=self._hosts, timeout=self.session_timeout_ms / 1000)
            try:
                bare.start(timeout=self.connection_timeout_ms / 1000)
                bare.ensure_path(self._chroot)
            except KazooTimeoutError as e:
                raise ZkConnectionError(
                    f"cannot connect to ZooKeeper at {self._hosts} within "
                    f"{self.connection_timeout_ms} ms"
                ) from e
            finally:
                with contextlib.suppress(Exception):
                    bare.stop()
                    bare.close()
        try:
            self._zk.start(timeout=self.connection_timeout_ms / 1000)
        except KazooTimeoutError as e:
            with contextlib.suppress(Exception):
                self._zk.stop()
            raise ZkConnectionError(
                f"cannot connect to ZooKeeper at {self.connect_string} within "
                f"{self.connection_timeout_ms} ms"
            ) from e
        self._session_id = self.session_id

    def close(self) -> None:
        """End the session (its ephemeral znodes go at once) and the executor."""
        if self._closed:
            return
        self._closed = True
        try:
            self._zk.stop()
            self._zk.close()
        finally:
            self._executor.shutdown(wait=False, cancel_futures=True)

    @property
    def session_id(self) -> int | None:
        cid = self._zk.client_id
        return int(cid[0]) if cid else None

    @property
    def session_password(self) -> bytes | None:
        cid = self._zk.client_id
        return bytes(cid[1]) if cid else None

    @property
    def connected(self) -> bool:
        return bool(self._zk.connected)

    def register_state_change_handler(
        self,
        name: str,
        *,
        before_initializing_session: Callable[[], None] | None = None,
        after_initializing_session: Callable[[], None] | None = None,
    ) -> None:
        """Call ``after_initializing_session`` (on a thread of its own, so it may
        use this client) each time a new session replaces an expired one;
        ``before_initializing_session`` when the old one is found expired."""
        with self._handlers_lock:
            self._handlers[name] = _Handler(
                name, before_initializing_session, after_initializing_session
            )

    def unregister_state_change_handler(self, name: str) -> None:
        with self._handlers_lock:
            self._handlers.pop(name, None)

    def _on_state(self, state: str) -> None:
        # kazoo's thread: no blocking calls here.
        if self._closed:
            return
        if state == KazooState.LOST:
            _log.warning("ZooKeeper session expired")
            self._run_handlers("before")
        elif state == KazooState.CONNECTED:
            sid = self.session_id
            if self._session_id is not None and sid != self._session_id:
                _log.info("new ZooKeeper session 0x%x", sid or 0)
                self._session_id = sid
                self._run_handlers("after")
            self._session_id = sid
        elif state == KazooState.SUSPENDED:
            _log.warning("ZooKeeper connection lost; waiting for it to come back")

    def _run_handlers(self, which: str) -> None:
        if self._closed:
            return
        with self._handlers_lock:
            fns = [h.before if which == "before" else h.after for h in self._handlers.values()]

        def run() -> None:
            for fn in fns:
                if fn is None:
                    continue
                try:
                    fn()
                except Exception:
                    _log.exception("ZooKeeper session handler failed")

        t = threading.Thread(target=run, name=f"pylog-zk-session-{which}", daemon=True)
        self._session_thread = t
        t.start()

    async def run(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """``await zk.run(zk.get_all_brokers)``: a blocking method on the
        client's executor, off the event loop."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, lambda: fn(*args, **kwargs))

    # ------------------------------------------------------------------ raw helpers

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except (NoNodeError, NodeExistsError, BadVersionError, NotEmptyError):
            raise
        except (KazooException, KazooTimeoutError) as e:
            raise _translate(e, what) from e

    def get_data(self, path: str) -> tuple[bytes, ZnodeStat] | None:
        """(data, stat) or None."""
        try:
            data, stat = self._call(f"get {path}", lambda: self._zk.get(path))
        except NoNodeError:
            return None
        return bytes(data or b""), ZnodeStat.of(stat)

    def get_children(self, path: str) -> list[str]:
        try:
            return sorted(self._call(f"children {path}", lambda: self._zk.get_children(path)))
        except NoNodeError:
            return []

    def exists(self, path: str) -> bool:
        return self._call(f"exists {path}", lambda: self._zk.exists(path)) is not None

    def ensure_path(self, path: str) -> None:
        self._call(f"ensure {path}", lambda: self._zk.ensure_path(path))

    def create_top_level_paths(self) -> None:
        """The persistent parents every broker expects (Kafka's PersistentZkPaths),
        created with no data (null), as Kafka's makeSurePersistentPathExists
        does: an empty byte string is data to Kafka, and a Kafka 3.x broker
        below IBP 3.0 fails to start on an empty ``/latest_producer_id_block``
        ("Expected JSON object"), where it takes null for "no block yet"."""
        for path in PERSISTENT_ZK_PATHS:
            parent = path.rsplit("/", 1)[0]
            if parent:
                self.ensure_path(parent)
            with contextlib.suppress(NodeExistsError):
                self._call(f"create {path}", partial(self._zk.create, path, None))

    def delete_recursive(self, path: str, expected_version: int = MATCH_ANY_VERSION) -> bool:
        """Delete ``path`` and everything below it; False if it did not exist."""
        try:
            self._call(
                f"delete {path}",
                lambda: self._zk.delete(path, version=expected_version, recursive=True),
            )
            return True
        except NoNodeError:
            return False

    def conditional_set(self, path: str, data: bytes, expected_version: int) -> ConditionalUpdate:
        """Set ``path`` if its version is still ``expected_version``."""
        try:
            stat = self._call(f"set {path}", lambda: self._zk.set(path, data, expected_version))
        except (BadVersionError, NoNodeError):
            return ConditionalUpdate(False, -1)
        return ConditionalUpdate(True, int(stat.version))

    def update_partition_states(
        self, updates: Sequence[tuple[str, int, LeaderAndIsr, int]]
    ) -> list[ConditionalUpdate]:
        """Each ``(topic, partition, state, expected_version)`` written if the
        state znode is still at that version, pipelined: the writes of a
        partition leader's ISR changes (Kafka's ZkIsrManager wrote them one
        round trip each). A lost race or a missing znode is that partition's
        ``succeeded=False``."""

        def request(topic: str, partition: int, state: LeaderAndIsr, expected: int) -> Any:
            return self._zk.set_async(
                TopicPartitionStateZNode.path(topic, partition),
                TopicPartitionStateZNode.encode(state),
                expected,
            )

        results = self._pipelined(
            "update partition states", [partial(request, *u) for u in updates]
        )
        return [
            ConditionalUpdate(False, -1)
            if isinstance(r, Exception)
            else ConditionalUpdate(True, int(r.version))
            for r in results
        ]

    def _pipelined(self, what: str, requests: Sequence[Callable[[], Any]]) -> list[Any]:
        """Run kazoo ``*_async`` requests with up to ``max_in_flight_requests``
        in flight at once on the session, rather than one round trip after
        another (Kafka's ZooKeeperClient.handleRequests). ZooKeeper answers a
        session's requests in order, so waiting on the oldest keeps the window
        full. Each result is the request's value, or its NoNode / NodeExists /
        BadVersion / NotEmpty error; any other error (the connection, the
        session) raises ZkError for the whole call."""
        results: list[Any] = [None] * len(requests)
        in_flight: deque[tuple[int, Any]] = deque()

        def settle() -> None:
            i, pending = in_flight.popleft()
            try:
                results[i] = pending.get()
            except (NoNodeError, NodeExistsError, BadVersionError, NotEmptyError) as e:
                results[i] = e
            except (KazooException, KazooTimeoutError) as e:
                raise _translate(e, what) from e

        for i, request in enumerate(requests):
            if len(in_flight) >= self.max_in_flight_requests:
                settle()
            try:
                in_flight.append((i, request()))
            except (KazooException, KazooTimeoutError) as e:
                raise _translate(e, what) from e
        while in_flight:
            settle()
        return results

    def _commit(self, what: str, build: Callable[[Any], None]) -> list[Any]:
        """Run a multi-op transaction; raise the first failed operation's error."""
        tx = self._zk.transaction()
        build(tx)
        results = self._call(what, tx.commit)
        for r in results:
            if isinstance(r, BadVersionError):
                raise ZkVersionMismatch(f"{what}: a znode changed since it was read")
            if isinstance(r, NodeExistsError):
                raise ZkNodeExists(f"{what}: a znode already exists")
            if isinstance(r, NoNodeError):
                raise ZkVersionMismatch(f"{what}: a znode it depends on is gone")
        for r in results:
            if isinstance(r, Exception) and type(r).__name__ != "RolledBackError":
                raise _translate(r, what)
        return list(results)

    # ------------------------------------------------------------------ cluster id

    def get_cluster_id(self) -> str | None:
        got = self.get_data(ClusterIdZNode.path())
        return ClusterIdZNode.decode(got[0]) if got else None

    def generate_broker_sequence_id(self) -> int:
        """A number no other call returns: each call writes ``/brokers/seqid``
        and returns its new data version (Kafka's generateBrokerSequenceId)."""
        path = BrokerSequenceIdZNode.path()
        self.ensure_path(path)
        stat = self._call(f"set {path}", lambda: self._zk.set(path, b""))
        return int(stat.version)

    def get_or_create_cluster_id(self, proposed: str) -> str:
        """The cluster's id; ``proposed`` becomes it if there is none yet (the
        first broker wins; the others read the winner's)."""
        existing = self.get_cluster_id()
        if existing is not None:
            return existing
        try:
            self._call(
                "create /cluster/id",
                lambda: self._zk.create(
                    ClusterIdZNode.path(), ClusterIdZNode.encode(proposed), makepath=True
                ),
            )
            return proposed
        except NodeExistsError:
            cid = self.get_cluster_id()
            if cid is None:
                raise ZkError("/cluster/id vanished while being created") from None
            return cid

    # ------------------------------------------------------------------ brokers

    def register_broker(self, info: BrokerInfo) -> int:
        """Create ``/brokers/ids/<id>`` (ephemeral) and return the broker epoch,
        the znode's czxid. BrokerIdInUseError if another live session holds it;
        our own session's znode (a retried registration) is reused."""
        path = BrokerIdZNode.path(info.id)
        data = BrokerIdZNode.encode(info)
        self.ensure_path(BrokerIdsZNode.path())
        try:
            _, stat = self._call(
                f"register {path}",
                lambda: self._zk.create(path, data, ephemeral=True, include_data=True),
            )
            return int(stat.czxid)
        except NodeExistsError:
            got = self.get_data(path)
            if got is None:  # gone between the two calls: try once more
                return self.register_broker(info)
            stat = got[1]
            if stat.ephemeral_owner == self.session_id:
                return stat.czxid
            existing = got[0].decode("utf-8", "replace")
            raise BrokerIdInUseError(
                f"broker.id {info.id} is already registered in ZooKeeper at "
                f"{self.connect_string} by another live broker (session "
                f"0x{stat.ephemeral_owner:x}): {existing}. Give each broker its own "
                "broker.id, or wait for the other session to end."
            ) from None

    def deregister_broker(self, broker_id: int) -> bool:
        """Delete our own ``/brokers/ids/<id>`` (never another session's)."""
        path = BrokerIdZNode.path(broker_id)
        got = self.get_data(path)
        if got is None or got[1].ephemeral_owner != self.session_id:
            return False
        return self.delete_recursive(path, got[1].version)

    def get_broker(self, broker_id: int) -> BrokerInfo | None:
        got = self.get_data(BrokerIdZNode.path(broker_id))
        if got is None:
            return None
        return BrokerIdZNode.decode(broker_id, got[0], got[1].czxid)

    def get_sorted_broker_list(self) -> list[int]:
        return sorted(int(c) for c in self.get_children(BrokerIdsZNode.path()) if c.isdigit())

    def get_all_brokers(self) -> list[BrokerInfo]:
        """Every live broker, by id, each with its epoch (czxid)."""
        out = []
        for bid in self.get_sorted_broker_list():
            info = self.get_broker(bid)
            if info is not None:
                out.append(info)
        return out

    # ------------------------------------------------------------------ topics

    def get_all_topics(self) -> list[str]:
        return self.get_children(TopicsZNode.path())

    def get_topic_assignment(self, topic: str) -> tuple[TopicReplicaAssignment, int] | None:
        """(assignment, znode version) or None."""
        got = self.get_data(TopicZNode.path(topic))
        if got is None:
            return None
        return TopicZNode.decode(topic, got[0]), got[1].version

    def create_topic(
        self,
        topic: str,
        assignment: TopicReplicaAssignment,
        configs: Mapping[str, str],
        initial_states: Mapping[int, LeaderAndIsr] | None = None,
    ) -> None:
        """One transaction: ``/config/topics/<topic>`` then ``/brokers/topics/<topic>``
        (Kafka's AdminZkClient writes them in that order: a watcher that sees
        the topic finds its config), and, if given, partition state znodes.
        ZkNodeExists if the topic (or its config) is there already."""
        cfg_path = ConfigEntityZNode.path("topics", topic)
        self.ensure_path(TopicsZNode.path())
        self.ensure_path("/config/topics")
        # A config left behind by a deleted topic (Kafka deletes it last) would
        # fail the create: drop it if its topic is gone.
        if not self.exists(TopicZNode.path(topic)) and self.exists(cfg_path):
            self.delete_recursive(cfg_path)

        def build(tx: Any) -> None:
            tx.create(cfg_path, ConfigEntityZNode.encode(configs))
            tx.create(TopicZNode.path(topic), TopicZNode.encode(assignment))
            if initial_states:
                tx.create(TopicPartitionsZNode.path(topic), b"")
                for p, state in sorted(initial_states.items()):
                    tx.create(TopicPartitionZNode.path(topic, p), b"")
                    tx.create(
                        TopicPartitionStateZNode.path(topic, p),
                        TopicPartitionStateZNode.encode(state),
                    )

        self._commit(f"create topic {topic}", build)

    def set_topic_assignment(
        self,
        topic: str,
        assignment: TopicReplicaAssignment,
        expected_version: int,
        new_states: Mapping[int, LeaderAndIsr] | None = None,
    ) -> int:
        """Replace the assignment if unchanged since read at ``expected_version``
        (adding partitions, a reassignment); returns the new version.
        ZkVersionMismatch if it changed."""
        path = TopicZNode.path(topic)
        if new_states:
            self.ensure_path(TopicPartitionsZNode.path(topic))

        def build(tx: Any) -> None:
            tx.set_data(path, TopicZNode.encode(assignment), expected_version)
            for p, state in sorted((new_states or {}).items()):
                tx.create(TopicPartitionZNode.path(topic, p), b"")
                tx.create(
                    TopicPartitionStateZNode.path(topic, p),
                    TopicPartitionStateZNode.encode(state),
                )

        results = self._commit(f"set assignment of {topic}", build)
        return int(results[0].version)

    def delete_topic_znodes(self, topic: str) -> None:
        """Remove a topic's assignment, partition states and config (what the
        controller does once every replica is deleted)."""
        self.delete_recursive(TopicZNode.path(topic))
        self.delete_recursive(ConfigEntityZNode.path("topics", topic))

    # ------------------------------------------------------------------ partition state

    def get_partition_state(self, topic: str, partition: int) -> LeaderAndIsr | None:
        """The state with the znode version it was read at (``zk_version``)."""
        got = self.get_data(TopicPartitionStateZNode.path(topic, partition))
        if got is None:
            return None
        return TopicPartitionStateZNode.decode(topic, partition, got[0], got[1].version)

    def create_partition_state(self, topic: str, partition: int, state: LeaderAndIsr) -> int:
        """Create the state znode (and its parents); ZkNodeExists if it is there.
        Returns its version (0)."""
        self.ensure_path(TopicPartitionZNode.path(topic, partition))
        path = TopicPartitionStateZNode.path(topic, partition)
        try:
            self._call(
                f"create {path}",
                lambda: self._zk.create(path, TopicPartitionStateZNode.encode(state)),
            )
        except NodeExistsError:
            raise ZkNodeExists(f"{path} already exists") from None
        return 0

    def update_leader_and_isr(
        self,
        topic: str,
        partition: int,
        state: LeaderAndIsr,
        expected_version: int,
        *,
        controller_epoch_zk_version: int | None = None,
    ) -> ConditionalUpdate:
        """Write a partition's state if its znode is still at ``expected_version``
        (a leader shrinking its ISR races the controller electing a new leader:
        the loser re-reads). With ``controller_epoch_zk_version``, the write is
        also fenced on ``/controller_epoch``'s version, so a controller that lost
        its office cannot write (Kafka's checkControllerAndIncrementVersion);
        ControllerMovedError then."""
        path = TopicPartitionStateZNode.path(topic, partition)
        data = TopicPartitionStateZNode.encode(state)
        if controller_epoch_zk_version is None:
            return self.conditional_set(path, data, expected_version)
        ce_version = controller_epoch_zk_version

        def build(tx: Any) -> None:
            tx.check(ControllerEpochZNode.path(), ce_version)
            tx.set_data(path, data, expected_version)

        tx = self._zk.transaction()
        build(tx)
        results = self._call(f"update {path}", tx.commit)
        if isinstance(results[0], Exception) and not _rolled_back(results[0]):
            raise ControllerMovedError(
                f"/controller_epoch is no longer at version {ce_version}: another controller"
            )
        if isinstance(results[1], Exception):
            return ConditionalUpdate(False, -1)
        return ConditionalUpdate(True, int(results[1].version))

    def get_partition_states(
        self, partitions: Sequence[tuple[str, int]]
    ) -> list[LeaderAndIsr | None]:
        """:meth:`get_partition_state` of many partitions, pipelined (Kafka's
        getTopicPartitionStatesRaw): what a controller reads before it elects
        leaders or shrinks ISRs for all of a dead broker's partitions."""
        paths = [TopicPartitionStateZNode.path(t, p) for t, p in partitions]
        got = self._pipelined(
            "get partition states",
            [partial(self._zk.get_async, path) for path in paths],
        )
        out: list[LeaderAndIsr | None] = []
        for (topic, partition), r in zip(partitions, got, strict=True):
            if isinstance(r, Exception):
                out.append(None)
            else:
                data, stat = r
                out.append(
                    TopicPartitionStateZNode.decode(
                        topic, partition, bytes(data or b""), int(stat.version)
                    )
                )
        return out

    def create_partition_states(
        self, states: Sequence[tuple[str, int, LeaderAndIsr]]
    ) -> list[bool]:
        """:meth:`create_partition_state` of many partitions, pipelined (Kafka's
        createTopicPartitionStatesRaw): each topic's ``partitions`` znode, each
        partition's znode, then the states. True where the state was created,
        False where one was there already."""
        what = "create partition states"
        topics = sorted({t for t, _, _ in states})
        self._pipelined(
            what,
            [
                partial(self._zk.create_async, TopicPartitionsZNode.path(t), b"", makepath=True)
                for t in topics
            ],
        )
        self._pipelined(
            what,
            [
                partial(self._zk.create_async, TopicPartitionZNode.path(t, p), b"", makepath=True)
                for t, p, _ in states
            ],
        )
        created = self._pipelined(
            what,
            [
                partial(
                    self._zk.create_async,
                    TopicPartitionStateZNode.path(t, p),
                    TopicPartitionStateZNode.encode(state),
                )
                for t, p, state in states
            ],
        )
        for r in created:
            if isinstance(r, Exception) and not isinstance(r, NodeExistsError):
                raise _translate(r, what)
        return [not isinstance(r, NodeExistsError) for r in created]

    def update_leader_and_isrs(
        self,
        updates: Sequence[tuple[str, int, LeaderAndIsr, int]],
        *,
        controller_epoch_zk_version: int,
    ) -> list[ConditionalUpdate]:
        """:meth:`update_leader_and_isr` of many partitions, pipelined (Kafka's
        updateLeaderAndIsr): each ``(topic, partition, state,
        expected_version)`` is one transaction fenced on ``/controller_epoch``'s
        version. A lost race is that partition's ``succeeded=False``; a moved
        controller epoch raises ControllerMovedError."""

        def request(topic: str, partition: int, state: LeaderAndIsr, expected: int) -> Any:
            tx = self._zk.transaction()
            tx.check(ControllerEpochZNode.path(), controller_epoch_zk_version)
            tx.set_data(
                TopicPartitionStateZNode.path(topic, partition),
                TopicPartitionStateZNode.encode(state),
                expected,
            )
            return tx.commit_async()

        results = self._pipelined(
            "update partition states", [partial(request, *u) for u in updates]
        )
        out: list[ConditionalUpdate] = []
        for r in results:
            if isinstance(r, Exception):  # not a transaction's answer: the znode is gone
                out.append(ConditionalUpdate(False, -1))
                continue
            if isinstance(r[0], Exception) and not _rolled_back(r[0]):
                raise ControllerMovedError(
                    f"/controller_epoch is no longer at version {controller_epoch_zk_version}: "
                    "another controller"
                )
            if isinstance(r[1], Exception):
                out.append(ConditionalUpdate(False, -1))
            else:
                out.append(ConditionalUpdate(True, int(r[1].version)))
        return out

    # ------------------------------------------------------------------ controller

    def get_controller_id(self) -> int | None:
        got = self.get_data(ControllerZNode.path())
        return ControllerZNode.decode(got[0]) if got else None

    def get_controller_epoch(self) -> tuple[int, int] | None:
        """(epoch, znode version) or None before the first controller."""
        got = self.get_data(ControllerEpochZNode.path())
        if got is None:
            return None
        return ControllerEpochZNode.decode(got[0]), got[1].version

    def create_controller_epoch_if_missing(self) -> None:
        """``/controller_epoch`` starts at 0 (Kafka's initial epoch)."""
        with contextlib.suppress(NodeExistsError):
            self._call(
                "create /controller_epoch",
                lambda: self._zk.create(
                    ControllerEpochZNode.path(), ControllerEpochZNode.encode(0)
                ),
            )

    def register_controller_and_increment_epoch(self, broker_id: int) -> tuple[int, int]:
        """Try to become the controller: one transaction creates the ephemeral
        ``/controller`` and raises ``/controller_epoch`` conditional on its
        version (Kafka's registerControllerAndIncrementControllerEpoch), so the
        winner's epoch is unique. Returns (new epoch, its znode version).
        ControllerMovedError if another broker won."""
        self.create_controller_epoch_if_missing()
        while True:
            current = self.get_controller_epoch()
            if current is None:
                self.create_controller_epoch_if_missing()
                continue
            epoch, version = current
            new_epoch = epoch + 1

            def build(tx: Any, e: int = new_epoch, v: int = version) -> None:
                tx.create(ControllerZNode.path(), ControllerZNode.encode(broker_id), ephemeral=True)
                tx.set_data(ControllerEpochZNode.path(), ControllerEpochZNode.encode(e), v)

            try:
                results = self._commit("controller election", build)
                return new_epoch, int(results[1].version)
            except ZkNodeExists:
                got = self.get_data(ControllerZNode.path())
                if got is not None and got[1].ephemeral_owner == self.session_id:
                    # our own earlier attempt (a retried call): we hold the office
                    again = self.get_controller_epoch()
                    if again is not None:
                        return again
                holder = ControllerZNode.decode(got[0]) if got else -1
                raise ControllerMovedError(f"broker {holder} is the controller") from None
            except ZkVersionMismatch:
                continue  # the epoch moved under us: re-read and retry

    def delete_controller(self) -> None:
        """Resign: delete ``/controller`` if it is our session's."""
        got = self.get_data(ControllerZNode.path())
        if got is None or got[1].ephemeral_owner != self.session_id:
            return
        self.delete_recursive(ControllerZNode.path(), got[1].version)

    # ------------------------------------------------------------------ delete topics

    def create_delete_topic_marker(self, topic: str) -> bool:
        """Ask the controller to delete ``topic``; False if already asked."""
        self.ensure_path(DeleteTopicsZNode.path())
        try:
            self._call(
                "create delete marker",
                lambda: self._zk.create(DeleteTopicsTopicZNode.path(topic), b""),
            )
            return True
        except NodeExistsError:
            return False

    def get_delete_topic_markers(self) -> list[str]:
        return self.get_children(DeleteTopicsZNode.path())

    def delete_delete_topic_marker(self, topic: str) -> None:
        self.delete_recursive(DeleteTopicsTopicZNode.path(topic))

    def is_topic_marked_for_deletion(self, topic: str) -> bool:
        return self.exists(DeleteTopicsTopicZNode.path(topic))

    # ------------------------------------------------------------------ ISR changes

    def create_isr_change_notification(self, partitions: Sequence[tuple[str, int]]) -> str:
        """A sequential ``isr_change_<seq>``; returns its name."""
        self.ensure_path(IsrChangeNotificationZNode.parent())
        path = self._call(
            "create ISR change notification",
            lambda: self._zk.create(
                IsrChangeNotificationZNode.path_prefix(),
                IsrChangeNotificationZNode.encode(partitions),
                sequence=True,
            ),
        )
        return str(path).rsplit("/", 1)[1]

    def get_isr_change_notifications(self) -> list[str]:
        """The pending notifications' names, oldest first."""
        names = self.get_children(IsrChangeNotificationZNode.parent())
        return sorted(
            (n for n in names if n.startswith(IsrChangeNotificationZNode.PREFIX)),
            key=IsrChangeNotificationZNode.sequence_number,
        )

    def get_isr_change_notification(self, name: str) -> list[tuple[str, int]]:
        got = self.get_data(f"{IsrChangeNotificationZNode.parent()}/{name}")
        return IsrChangeNotificationZNode.decode(got[0]) if got else []

    def delete_isr_change_notifications(self, names: Iterable[str]) -> None:
        for name in names:
            self.delete_recursive(f"{IsrChangeNotificationZNode.parent()}/{name}")

    # ------------------------------------------------------------------ log dir events

    def propagate_log_dir_event(self, broker_id: int) -> str:
        """A sequential ``log_dir_event_<seq>`` saying ``broker_id`` lost a log
        directory (Kafka's propagateLogDirEvent); returns its name."""
        self.ensure_path(LogDirEventNotificationZNode.parent())
        path = self._call(
            "create log dir event notification",
            lambda: self._zk.create(
                LogDirEventNotificationZNode.path_prefix(),
                LogDirEventNotificationZNode.encode(broker_id),
                sequence=True,
            ),
        )
        return str(path).rsplit("/", 1)[1]

    def get_log_dir_event_notifications(self) -> list[str]:
        """The pending notifications' names, oldest first."""
        names = self.get_children(LogDirEventNotificationZNode.parent())
        return sorted(
            (n for n in names if n.startswith(LogDirEventNotificationZNode.PREFIX)),
            key=LogDirEventNotificationZNode.sequence_number,
        )

    def get_log_dir_event_broker(self, name: str) -> int | None:
        """The broker a notification names; None when it is gone or unreadable."""
        got = self.get_data(f"{LogDirEventNotificationZNode.parent()}/{name}")
        if not got:
            return None
        try:
            return LogDirEventNotificationZNode.decode(got[0])
        except ZkDataError:
            return None

    def delete_log_dir_event_notifications(self, names: Iterable[str]) -> None:
        for name in names:
            self.delete_recursive(f"{LogDirEventNotificationZNode.parent()}/{name}")

    # ------------------------------------------------------------------ configs

    def get_entity_config(self, entity_type: str, entity_name: str) -> dict[str, str]:
        got = self.get_data(ConfigEntityZNode.path(entity_type, entity_name))
        return ConfigEntityZNode.decode(got[0]) if got else {}

    def get_entity_config_versioned(
        self, entity_type: str, entity_name: str
    ) -> tuple[dict[str, str], int] | None:
        got = self.get_data(ConfigEntityZNode.path(entity_type, entity_name))
        return (ConfigEntityZNode.decode(got[0]), got[1].version) if got else None

    def set_entity_config(
        self,
        entity_type: str,
        entity_name: str,
        config: Mapping[str, str],
        expected_version: int = MATCH_ANY_VERSION,
    ) -> str:
        """Write ``/config/<type>/<name>`` (created if missing) and announce it
        with a ``config_change_<seq>`` notification, in one transaction, so
        every broker applies it. Returns the notification's name.
        ZkVersionMismatch if ``expected_version`` is given and stale."""
        path = ConfigEntityZNode.path(entity_type, entity_name)
        data = ConfigEntityZNode.encode(config)
        self.ensure_path(ConfigEntityChangeNotificationZNode.parent())
        exists = self.exists(path)
        if not exists:
            self.ensure_path(path.rsplit("/", 1)[0])

        def build(tx: Any) -> None:
            if exists:
                tx.set_data(path, data, expected_version)
            else:
                tx.create(path, data)
            tx.create(
                ConfigEntityChangeNotificationZNode.path_prefix(),
                ConfigEntityChangeNotificationZNode.encode(entity_type, entity_name),
                sequence=True,
            )

        results = self._commit(f"set config {path}", build)
        return str(results[1]).rsplit("/", 1)[1]

    def get_config_change_notifications(self) -> list[str]:
        names = self.get_children(ConfigEntityChangeNotificationZNode.parent())
        return sorted(
            (n for n in names if n.startswith(ConfigEntityChangeNotificationZNode.PREFIX)),
            key=ConfigEntityChangeNotificationZNode.sequence_number,
        )

    def get_config_change_notification(self, name: str) -> tuple[str, str] | None:
        got = self.get_config_change_notification_with_stat(name)
        return got[0] if got else None

    def get_config_change_notification_with_stat(
        self, name: str
    ) -> tuple[tuple[str, str] | None, ZnodeStat] | None:
        """(entity, stat) of a notification (entity None if unreadable), or
        None if it is gone."""
        got = self.get_data(f"{ConfigEntityChangeNotificationZNode.parent()}/{name}")
        if got is None:
            return None
        try:
            entity: tuple[str, str] | None = ConfigEntityChangeNotificationZNode.decode(got[0])
        except ZkDataError:
            entity = None
        return entity, got[1]

    def delete_config_change_notifications(self, names: Iterable[str]) -> None:
        for name in names:
            self.delete_recursive(f"{ConfigEntityChangeNotificationZNode.parent()}/{name}")

    # ------------------------------------------------------------------ ACLs

    def create_acl_paths(self) -> None:
        """The ACL parents (Kafka's createAclPaths): both stores, both change paths."""
        for path in (
            ZkAclStore.LITERAL_PATH,
            ZkAclStore.acl_path(PatternType.PREFIXED),
            ZkAclStore.LITERAL_CHANGES,
            ZkAclStore.EXTENDED_CHANGES,
        ):
            self.ensure_path(path)

    def get_versioned_acls(self, pattern: ResourcePattern) -> tuple[bytes, int]:
        """The pattern's znode data and version; (b"", -1) when it has none."""
        got = self.get_data(ZkAclStore.path(pattern))
        return (got[0], got[1].version) if got else (b"", -1)

    def set_acls(self, pattern: ResourcePattern, data: bytes | None, expected_version: int) -> bool:
        """Write (``data``), create (``expected_version`` -1) or delete (``data``
        None) the pattern's znode, conditional on its version, with its change
        notification in the same transaction; False when the znode changed
        since it was read (the caller re-reads and retries)."""
        path = ZkAclStore.path(pattern)
        change = ZkAclStore.change_path(pattern.pattern_type)
        if data is not None and expected_version < 0:
            self.ensure_path(path.rsplit("/", 1)[0])

        def build(tx: Any) -> None:
            if data is None:
                tx.delete(path, expected_version)
            elif expected_version < 0:
                tx.create(path, data)
            else:
                tx.set_data(path, data, expected_version)
            tx.create(
                f"{change}/{ZkAclStore.CHANGE_PREFIX}",
                ZkAclStore.encode_change(pattern),
                sequence=True,
            )

        try:
            self._commit(f"set ACLs {path}", build)
        except (ZkVersionMismatch, ZkNodeExists):
            return False
        return True

    # ------------------------------------------------------------------ producer ids

    def allocate_producer_id_block(self, broker_id: int, size: int) -> ProducerIdBlock:
        """The next ``size`` producer ids for ``broker_id``: read the latest block,
        write the one after it conditional on the znode version, retry on a lost
        race (Kafka's ZkProducerIdManager)."""
        if size < 1:
            raise ValueError("a producer id block needs at least one id")
        path = ProducerIdBlockZNode.path()
        while True:
            got = self.get_data(path)
            if got is None:
                block = ProducerIdBlock(broker_id, 0, size)
                first = ProducerIdBlockZNode.encode(block)
                try:
                    self._call(
                        f"create {path}", partial(self._zk.create, path, first, makepath=True)
                    )
                    return block
                except NodeExistsError:
                    continue
            data, stat = got
            if data:
                last = ProducerIdBlockZNode.decode(data)
                block = ProducerIdBlock(broker_id, last.last + 1, size)
            else:  # the persistent path, created empty at start-up
                block = ProducerIdBlock(broker_id, 0, size)
            if self.conditional_set(
                path, ProducerIdBlockZNode.encode(block), stat.version
            ).succeeded:
                return block

    # ------------------------------------------------------------------ features

    def get_finalized_features(self) -> FinalizedFeatures | None:
        """``/feature`` (KIP-584), its znode version as the epoch; None when
        nobody finalized any feature."""
        got = self.get_data(FeatureZNode.path())
        if got is None or not got[0]:
            return None
        return FeatureZNode.decode(got[0], got[1].version)

    def set_finalized_features(self, features: Mapping[str, int], expected_epoch: int) -> int:
        """Write ``/feature`` if it is still at ``expected_epoch`` (-1: absent,
        created now), as Kafka's ZooKeeper controller wrote it; returns the new
        epoch, or -1 when another writer won the race."""
        path = FeatureZNode.path()
        data = FeatureZNode.encode(features)
        if expected_epoch < 0:
            try:
                self._call(f"create {path}", partial(self._zk.create, path, data))
            except NodeExistsError:
                return -1
            return 0
        update = self.conditional_set(path, data, expected_epoch)
        return update.version if update.succeeded else -1

    # ------------------------------------------------------------------ watches

    def watch_children(
        self,
        path: str,
        callback: Callable[[list[str]], None],
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> Callable[[], None]:
        """Call ``callback(children)`` now and on every change of ``path``'s
        children, re-armed across reconnections and new sessions; on ``loop``
        (via call_soon_threadsafe) if given, else on kazoo's thread (where it
        must not block). Returns a function that stops the watch."""
        stopped = threading.Event()
        self.ensure_path(path)

        def on_change(children: list[str] | None) -> bool | None:
            if stopped.is_set() or self._closed:
                return False  # ends kazoo's watch
            names = sorted(children or [])
            _deliver(loop, callback, names)
            return None

        ChildrenWatch(self._zk, path, on_change)
        return stopped.set

    def watch_data(
        self,
        path: str,
        callback: Callable[[bytes | None, int], None],
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> Callable[[], None]:
        """Call ``callback(data, version)`` now and on every change of ``path``
        (``(None, -1)`` while it does not exist: a deleted ``/controller`` is
        how brokers learn to run an election). Same threading as
        :meth:`watch_children`."""
        stopped = threading.Event()

        def on_change(data: bytes | None, stat: Any, *_: Any) -> bool | None:
            if stopped.is_set() or self._closed:
                return False
            version = int(stat.version) if stat is not None else -1
            _deliver(loop, callback, None if stat is None else bytes(data or b""), version)
            return None

        DataWatch(self._zk, path, on_change)
        return stopped.set

    def __repr__(self) -> str:
        return f"KafkaZkClient({self.connect_string!r}, session=0x{self.session_id or 0:x})"


def _rolled_back(e: BaseException) -> bool:
    return type(e).__name__ == "RolledBackError"


def _deliver(loop: asyncio.AbstractEventLoop | None, fn: Callable[..., None], *args: Any) -> None:
    if loop is None:
        fn(*args)
    elif not loop.is_closed():
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(fn, *args)
