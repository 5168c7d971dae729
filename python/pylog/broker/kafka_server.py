"""KafkaServer: one broker's lifecycle, from start-up to a clean shutdown.

Its states are Kafka's ``BrokerState`` values (:mod:`pylog.broker.broker_state`,
reported by the ``kafka.server:type=KafkaServer,name=BrokerState`` gauge).

Start-up: the LogManager loads (and, after a crash, recovers) every log; the
listeners are bound (so an advertised port 0 is known before anything reports
it); the MetadataStore, ReplicaManager and KafkaApis are built; the
SocketServer starts accepting; the metrics endpoint starts if ``metrics.port``
is set. A failure on the way undoes what was started.

With ``zookeeper.connect`` (docs/cluster.md) the broker connects to ZooKeeper
once its listeners are bound, keeps its metadata there (ZkMetadataStore) and
registers ``/brokers/ids/<broker.id>`` with its bound endpoints
(KafkaHealthcheck), before it serves a request; another live broker with the
same id fails the start-up. It then joins the controller election
(KafkaController); its partitions come from the controller's LeaderAndIsr.
Without it nothing of this runs: a lone broker keeps its metadata in its
first log directory (JsonMetadataStore).

Shutdown (SIGTERM, SIGINT, or :meth:`KafkaServer.shutdown`): on a cluster,
first a controlled shutdown (PendingControlledShutdown: the controller moves
this broker's leaderships to other in-sync replicas and takes it out of the
ISRs while it still serves, ``controlled.shutdown.*``); then deregister from
ZooKeeper, stop accepting,
stop reading requests, answer every request already received (bounded by
``shutdown.timeout.ms``), close connections, shut the request handlers and the
purgatory down, then the LogManager flushes every log and writes the
checkpoints and the clean-shutdown marker, so the next start skips recovery;
last, the ZooKeeper session is closed. After ``kill -9`` there is no marker and
the next start recovers (and ZooKeeper drops the registration when the session
times out).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import os
import signal
import ssl
import time
from collections.abc import Awaitable, Callable, Mapping

from pylog.broker.auth_helper import authorizer_from_config
from pylog.broker.broker_state import BrokerState, IllegalBrokerStateTransition
from pylog.broker.channel_builders import (
    inter_broker_security,
    listener_sasl_configs,
    listener_specs,
    listener_ssl_context,
)
from pylog.broker.kafka_apis import KafkaApis
from pylog.broker.kafka_healthcheck import KafkaHealthcheck
from pylog.common.topic_partition import TopicPartition
from pylog.common.transaction_version import TransactionVersion
from pylog.config import parse_host_counts
from pylog.controller.kafka_controller import KafkaController
from pylog.coordinator.group_coordinator import GroupCoordinator
from pylog.errors import ErrorCode, InvalidConfigurationError
from pylog.log.log import Log
from pylog.log.manager import CLEAN_SHUTDOWN_FILE, LogManager
from pylog.metadata import JsonMetadataStore, MetadataStore
from pylog.metadata.client_quota_entity import CONNECTION_CREATION_RATE, desanitize
from pylog.metadata.client_quota_entity import DEFAULT as DEFAULT_QUOTA_ENTITY
from pylog.metadata.finalized_feature_cache import FinalizedFeatureCache
from pylog.metadata.kafka_zk_client import KafkaZkClient
from pylog.metadata.metadata_cache import MetadataCache
from pylog.metadata.zk_store import ZkMetadataStore
from pylog.network.connection_quotas import UNLIMITED, ConnectionQuotas
from pylog.network.metrics import MetricsRegistry, MetricsServer, register_process_metrics
from pylog.network.request_channel import RequestHandler
from pylog.network.socket_server import SocketServer
from pylog.protocol import ApiKey
from pylog.protocol.client import KafkaConnection
from pylog.protocol.messages import ControlledShutdownRequest, ControlledShutdownResponse
from pylog.security.acl_authorizer import AclAuthorizer
from pylog.security.sasl_client_authenticator import ClientSecurity, authenticate_blocking
from pylog.security.scram_credential import ScramCredential
from pylog.security.scram_mechanism import ScramMechanism
from pylog.server.add_partitions_to_txn_manager import AddPartitionsToTxnManager, CoordinatorNode
from pylog.server.alter_isr_manager import AlterIsrManager, InProcessAlterIsrManager
from pylog.server.broker_metadata_checkpoint import (
    BrokerMetadata,
    InconsistentBrokerMetadataError,
    resolve_broker_metadata,
    write_broker_metadata,
)
from pylog.server.config import KafkaConfig
from pylog.server.dynamic_broker_config import DEFAULT_ENTITY, DynamicBrokerConfig
from pylog.server.producer_id_manager import ProducerIdManager
from pylog.server.quota_factory import QuotaManagers
from pylog.server.replica_fetcher_thread import ReplicaFetcherConfig
from pylog.server.replica_manager import ReplicaManager
from pylog.server.replication_quota_manager import QuotaType, ReplicationQuotaManager
from pylog.server.zk_alter_isr_manager import ZkAlterIsrManager
from pylog.transaction.transaction_coordinator import TransactionCoordinator
from pylog.transaction.transaction_marker_channel_manager import (
    BrokerAddress,
    TransactionMarkerChannelManager,
)
from pylog.transaction.transaction_state_manager import (
    TRANSACTION_STATE_TOPIC,
    TransactionStateManager,
)

__all__ = ["KafkaServer"]

_log = logging.getLogger("pylog.broker")

#: The ControlledShutdown version a broker sends (with its broker epoch, KIP-380).
CONTROLLED_SHUTDOWN_VERSION = 3


HandlerFactory = Callable[["KafkaServer"], "RequestHandler | Awaitable[RequestHandler]"]


def _dynamic_broker_config(server: KafkaServer, store: MetadataStore) -> DynamicBrokerConfig:
    """The broker's dynamic configuration: the stored layers applied now, and
    every later change (made here or on another broker) applied as heard."""
    assert server.log_manager is not None and server.socket_server is not None
    dynamic = DynamicBrokerConfig(server.config)
    log_manager, socket_server = server.log_manager, server.socket_server

    def follow(_old: KafkaConfig, new: KafkaConfig) -> None:
        server.config = new

    def connections(_old: KafkaConfig, new: KafkaConfig) -> None:
        socket_server.max_connections = new.max_connections
        _apply_connection_limits(socket_server.connection_quotas, new)

    def tls_contexts(config: KafkaConfig) -> dict[str, ssl.SSLContext]:
        # Building a context loads the keystore and truststore: what fails
        # here refuses the change (Kafka's SslFactory.validateReconfiguration).
        return {
            ep.listener_name: listener_ssl_context(config, ep.listener_name)
            for ep in config.listeners
            if ep.security_protocol in ("SSL", "SASL_SSL")
        }

    def check_tls(new: KafkaConfig) -> None:
        try:
            tls_contexts(new)
        except (InvalidConfigurationError, OSError, ssl.SSLError, ValueError) as e:
            raise InvalidConfigurationError(
                f"Validation of dynamic config update of SSLFactory failed: {e}"
            ) from None

    def rotate_tls(_old: KafkaConfig, new: KafkaConfig) -> None:
        for listener, context in tls_contexts(new).items():
            socket_server.update_ssl_context(listener, context)

    def check_sasl(new: KafkaConfig) -> None:
        # A JAAS text that does not parse, or names another login module than
        # its mechanism's, or a mechanism pylog does not serve: refused whole.
        try:
            listener_sasl_configs(new, server._scram_credential)
        except InvalidConfigurationError as e:
            raise InvalidConfigurationError(
                f"Validation of dynamic config update of SaslChannelBuilder failed: {e}"
            ) from None

    def sasl_settings(old: KafkaConfig, new: KafkaConfig) -> None:
        before = listener_sasl_configs(old, server._scram_credential)
        for listener, sasl in listener_sasl_configs(new, server._scram_credential).items():
            if sasl != before.get(listener):
                # New connections authenticate with it; open ones keep theirs.
                socket_server.update_sasl_config(listener, sasl)

    dynamic.add_reconfigurable("KafkaServer", follow)
    dynamic.add_reconfigurable("SslFactory", rotate_tls, check_tls)
    dynamic.add_reconfigurable("SaslChannelBuilder", sasl_settings, check_sasl)
    dynamic.add_reconfigurable("LogManager", lambda _old, new: log_manager.reconfigure(new.log))
    dynamic.add_reconfigurable("SocketServer", connections)
    store.add_broker_config_listener(
        lambda entity, configs: (
            dynamic.update(entity, configs)
            if entity in (DEFAULT_ENTITY, str(server.config.broker_id))
            else None
        )
    )
    own = str(server.config.broker_id)
    again = dynamic.reencoded(store.broker_config(own))
    if again is not None:
        # password.encoder.secret rotated: the stored passwords move to the
        # new secret (Kafka's maybeReEncodePasswords), heard like any change
        store.set_broker_config(own, again)
        _log.info("dynamic passwords of broker %s encrypted again with the new secret", own)
    for entity in (DEFAULT_ENTITY, own):
        layer = store.broker_config(entity)
        if layer:
            dynamic.update(entity, layer)
    return dynamic


def _apply_connection_limits(quotas: ConnectionQuotas, config: KafkaConfig) -> None:
    """``max.connections.per.ip`` (and its overrides) and the connection
    creation rates, broker-wide and per listener (Kafka's SocketServer and
    ListenerConnectionQuota reconfiguration)."""
    quotas.max_connections_per_ip = config.max_connections_per_ip
    quotas.update_max_connections_per_ip_overrides(
        parse_host_counts(str(config.get("max.connections.per.ip.overrides") or ""))
    )
    quotas.update_broker_connection_rate(int(config.get("max.connection.creation.rate")))
    for ep in config.listeners:
        scoped = config.listener_values.get(ep.listener_name, {})
        rate = scoped.get("max.connection.creation.rate")
        quotas.update_listener_connection_rate(
            ep.listener_name, UNLIMITED if rate is None else int(rate)
        )
        most = scoped.get("max.connections")
        if most is None:
            quotas.listener_max_connections.pop(ep.listener_name, None)
        else:
            quotas.listener_max_connections[ep.listener_name] = int(most)


def _ip_connection_rates(store: MetadataStore) -> Callable[[], Mapping[str | None, int]]:
    """The ``connection_creation_rate`` of each IP entity in the store (None:
    the default entity), for the ConnectionQuotas (Kafka's IpConfigHandler):
    the same mapping while the store's quotas are unchanged."""
    seen: list[object] = [None]
    rates: list[Mapping[str | None, int]] = [{}]

    def read() -> Mapping[str | None, int]:
        quotas = store.client_quotas
        if quotas is not seen[0]:
            out: dict[str | None, int] = {}
            for entity, values in quotas.items():
                if entity.ip is not None and CONNECTION_CREATION_RATE in values:
                    ip = None if entity.ip == DEFAULT_QUOTA_ENTITY else desanitize(entity.ip)
                    out[ip] = int(values[CONNECTION_CREATION_RATE])
            seen[0], rates[0] = quotas, out
        return rates[0]

    return read


def _replication_quotas(
    replica_manager: ReplicaManager, config: KafkaConfig, dynamic: DynamicBrokerConfig
) -> None:
    """The leader's and the follower's replication throttles and the one of
    moves between log directories, following the dynamic
    ``*.replication.throttled.rate`` and
    ``replica.alter.log.dirs.io.max.bytes.per.second`` keys (Kafka's
    BrokerConfigHandler)."""

    def quota(key: str, quota_type: QuotaType, window: str) -> ReplicationQuotaManager:
        return ReplicationQuotaManager(
            config.broker_id,
            int(config.get(key)),
            quota_type=quota_type,
            window_num=int(config.get(f"{window}.window.num")),
            window_size_seconds=int(config.get(f"{window}.window.size.seconds")),
        )

    leader, follower, moves = (
        "leader.replication.throttled.rate",
        "follower.replication.throttled.rate",
        "replica.alter.log.dirs.io.max.bytes.per.second",
    )
    rm = replica_manager
    rm.leader_quota = quota(leader, QuotaType.LEADER_REPLICATION, "replication.quota")
    rm.follower_quota = quota(follower, QuotaType.FOLLOWER_REPLICATION, "replication.quota")
    rm.alter_log_dirs_quota = quota(
        moves, QuotaType.ALTER_LOG_DIRS_REPLICATION, "alter.log.dirs.replication.quota"
    )

    def throttles(_old: KafkaConfig, new: KafkaConfig) -> None:
        rm.leader_quota.update_quota(int(new.get(leader)))
        rm.follower_quota.update_quota(int(new.get(follower)))
        rm.alter_log_dirs_quota.update_quota(int(new.get(moves)))

    dynamic.add_reconfigurable("ReplicationQuotaManager", throttles)


def _default_handler(server: KafkaServer) -> RequestHandler:
    """MetadataStore → ReplicaManager → GroupCoordinator → KafkaApis, the
    broker's request handler."""
    assert server.log_manager is not None
    store = server.metadata_store  # the ZooKeeper store, when zookeeper.connect is set
    if store is None:
        store = JsonMetadataStore(server.log_manager.log_dirs[0])
        server.metadata_store = store
    dynamic = _dynamic_broker_config(server, store)
    assert server.socket_server is not None
    server.socket_server.connection_quotas.ip_quotas = _ip_connection_rates(store)
    config = server.config
    replica_manager = ReplicaManager(
        server.log_manager,
        store,
        broker_id=config.broker_id,
        hw_checkpoint_interval_ms=int(config.get("replica.high.watermark.checkpoint.interval.ms")),
        max_partitions=int(config.get("max.broker.partitions")),
        metadata_cache=server.metadata_cache,
        alter_isr_manager=server.alter_isr_manager,
        fetcher_config=replica_fetcher_config(config, server.inter_broker_security),
        replica_lag_time_max_ms=int(config.get("replica.lag.time.max.ms")),
        alter_log_dirs_threads=config.get("num.replica.alter.log.dirs.threads"),
        broker_epoch=lambda: server.broker_epoch,
        inter_broker_listener=config.inter_broker_listener_name,
        # On ZooKeeper the KafkaController places partitions (LeaderAndIsr):
        # a restarted broker must not lead from its store. A lone broker
        # makes its partitions from the store.
        controller_managed=server.zk_client is not None,
    )
    _replication_quotas(replica_manager, config, dynamic)
    replica_manager.startup()
    replica_manager.register_metrics(server.metrics)
    replica_manager.log_dir_failure_hook = server.on_log_dir_failure
    server.replica_manager = replica_manager
    coordinator = GroupCoordinator(server.config, replica_manager, store)
    producer_ids = ProducerIdManager(store)
    txn_coordinator = _transaction_coordinator(server, replica_manager, store, producer_ids)
    server.authorizer = authorizer_from_config(config, store)
    quotas = QuotaManagers(config, store)
    quotas.register_metrics(server.metrics)
    apis = KafkaApis(
        server.config,
        replica_manager,
        store,
        coordinator,
        controller=lambda: server.controller,
        # On ZooKeeper only the active controller alters SCRAM credentials.
        is_controller=lambda: (
            server.zk_client is None
            or (server.controller is not None and server.controller.is_active)
        ),
        authorizer=server.authorizer,
        quotas=quotas,
        dynamic_config=dynamic,
        producer_id_manager=producer_ids,
        txn_coordinator=txn_coordinator,
    )
    shares = apis.share_groups
    if shares is not None and shares.persister is not None:
        # The share-partition leaders reach their share coordinators on the
        # inter-broker listener, with its TLS and SASL login.
        security = server.inter_broker_security
        if security.ssl_context is not None:
            shares.persister.connection_options["ssl_context"] = security.ssl_context
        if security.uses_sasl:
            shares.persister.connection_options["authenticate"] = lambda conn: (
                authenticate_blocking(conn.request, security)
            )
    apis.client_metrics.receiver.register_metrics(server.metrics)
    coordinator.register_metrics(server.metrics)
    coordinator.startup()
    server.group_coordinator = coordinator
    txn_coordinator.startup()
    server.txn_coordinator = txn_coordinator
    return apis


def _transaction_coordinator(
    server: KafkaServer,
    replica_manager: ReplicaManager,
    store: MetadataStore,
    producer_ids: ProducerIdManager,
) -> TransactionCoordinator:
    """The TransactionCoordinator and its marker sender, which reaches each
    partition's leader on the inter-broker listener: on a cluster the leader
    the controller's UpdateMetadata names, on a lone broker this one."""
    config = server.config
    listener = config.inter_broker_listener_name
    cache = replica_manager.metadata_cache
    on_cluster = server.zk_client is not None
    own = next(
        (ep for ep in config.advertised_listeners if ep.listener_name == listener),
        config.advertised_listeners[0],
    )

    def locate(tp: TopicPartition) -> BrokerAddress | None:
        if not on_cluster:
            meta = store.topic(tp.topic)
            if meta is None or not 0 <= tp.partition < meta.partitions:
                return None
            return BrokerAddress(config.broker_id, own.host, own.port)
        leader = cache.leader_of(tp.topic, tp.partition)
        if leader is None or leader < 0:
            return None
        ep = cache.broker_endpoint(leader, listener)
        return None if ep is None else BrokerAddress(leader, ep.host, ep.port)

    def topic_exists(topic: str) -> bool:
        return cache.contains_topic(topic) if on_cluster else store.topic(topic) is not None

    features = FinalizedFeatureCache(store)
    manager = TransactionStateManager(
        config, replica_manager, store, transaction_version=features.transaction_version
    )
    txn = TransactionCoordinator(
        manager,
        producer_ids.generate_producer_id,
        abort_interval_ms=int(
            config.get("transaction.abort.timed.out.transaction.cleanup.interval.ms")
        ),
        expiration_interval_ms=int(
            config.get("transaction.remove.expired.transaction.cleanup.interval.ms")
        ),
    )
    markers = TransactionMarkerChannelManager(
        config.broker_id,
        locate,
        topic_exists,
        txn.complete_transaction,
        socket_timeout_s=int(config.get("request.timeout.ms")) / 1000,
    )
    security = server.inter_broker_security
    if not on_cluster:
        # A lone broker sends its markers to itself, on its inter-broker
        # listener: with that listener's TLS and SASL login when it has them.
        try:
            security = inter_broker_security(config)
        except InvalidConfigurationError as e:
            _log.warning("transaction markers go out without inter-broker credentials: %s", e)
    if security.ssl_context is not None:
        markers.connection_options["ssl_context"] = security.ssl_context
    if security.uses_sasl:
        markers.connection_options["authenticate"] = lambda conn: authenticate_blocking(
            conn.request, security
        )
    txn.attach_marker_channel(markers)

    # KIP-890 part 1: the leaders' questions to the coordinators, on the
    # same inter-broker connection settings as the markers.
    def coordinator_of(transactional_id: str) -> CoordinatorNode | None:
        if not manager.topic_exists():
            return None
        partition = manager.partition_for(transactional_id)
        at = locate(TopicPartition(TRANSACTION_STATE_TOPIC, partition))
        return None if at is None else CoordinatorNode(at.broker_id, at.host, at.port)

    verifier = AddPartitionsToTxnManager(
        config.broker_id,
        coordinator_of,
        local=txn.handle_verify_partitions_in_transaction,
        local_add=lambda txn_id, pid, epoch, parts: txn.handle_add_partitions_to_transaction(
            txn_id, pid, epoch, set(parts), TransactionVersion.TV_2
        ),
        request_timeout_s=int(config.get("request.timeout.ms")) / 1000,
    )
    verifier.connection_options = markers.connection_options
    replica_manager.add_partitions_to_txn_manager = verifier
    replica_manager.verification_enabled = lambda: bool(
        server.config.get("transaction.partition.verification.enable")
    )
    replica_manager.add_partitions_max_timeout_ms = int(
        config.get("add.partitions.to.txn.max.timeout.ms")
    )
    replica_manager.add_partitions_retry_backoff_ms = int(
        config.get("add.partitions.to.txn.retry.backoff.ms")
    )
    return txn


def replica_fetcher_config(
    config: KafkaConfig, security: ClientSecurity | None = None
) -> ReplicaFetcherConfig:
    """The ``replica.*`` keys the follower's fetchers work by, and how they
    reach the leaders' inter-broker listener."""
    return ReplicaFetcherConfig(
        security=security or ClientSecurity(),
        broker_id=config.broker_id,
        num_fetchers=int(config.get("num.replica.fetchers")),
        fetch_max_bytes=int(config.get("replica.fetch.max.bytes")),
        fetch_min_bytes=int(config.get("replica.fetch.min.bytes")),
        fetch_wait_max_ms=int(config.get("replica.fetch.wait.max.ms")),
        fetch_response_max_bytes=int(config.get("replica.fetch.response.max.bytes")),
        fetch_backoff_ms=int(config.get("replica.fetch.backoff.ms")),
        socket_timeout_ms=int(config.get("replica.socket.timeout.ms")),
        socket_receive_buffer_bytes=int(config.get("replica.socket.receive.buffer.bytes")),
    )


class KafkaServer:
    """A broker: build with a KafkaConfig, ``await startup()``, ``await shutdown()``.

    ``handler_factory`` replaces KafkaApis (tests of the network layer and the
    lifecycle); it is called once the logs are loaded and the listeners bound
    and may return the handler or an awaitable of it.
    """

    def __init__(
        self, config: KafkaConfig, *, handler_factory: HandlerFactory | None = None
    ) -> None:
        self.config = config
        # Every listener's TLS context and SASL settings, built now so that a
        # bad keystore or JAAS text stops the start before anything is opened.
        self.listener_specs = listener_specs(config, self._scram_credential)
        #: How this broker reaches the others' inter-broker listener.
        self.inter_broker_security = (
            inter_broker_security(config) if config.get("zookeeper.connect") else ClientSecurity()
        )
        self.handler_factory = handler_factory or _default_handler
        self.state = BrokerState.NotRunning
        self.metrics = MetricsRegistry()
        self.log_manager: LogManager | None = None
        self.metadata_store: MetadataStore | None = None
        #: ACL checks (authorizer.class.name); None: every request allowed
        self.authorizer: AclAuthorizer | None = None
        self.zk_client: KafkaZkClient | None = None
        self.healthcheck: KafkaHealthcheck | None = None
        #: The controller election this broker takes part in (ZooKeeper mode).
        self.controller: KafkaController | None = None
        self.replica_manager: ReplicaManager | None = None
        self.group_coordinator: GroupCoordinator | None = None
        self.txn_coordinator: TransactionCoordinator | None = None
        self._broker_epoch = -1
        #: The cluster as the controller's UpdateMetadata describes it.
        self.metadata_cache = MetadataCache(config.broker_id)
        #: Where leaders write ISR changes: in memory until the ZooKeeper
        #: client replaces it with a conditional write of the partition state.
        self.alter_isr_manager: AlterIsrManager = InProcessAlterIsrManager()
        self.handler: RequestHandler | None = None
        self.socket_server: SocketServer | None = None
        self.metrics_server: MetricsServer | None = None
        self.started_at: float | None = None
        self.startup_ms: float | None = None
        self._shutdown_task: asyncio.Task[None] | None = None
        # Fire-and-forget tasks (the log dir event writes), kept from the GC.
        self._background: set[asyncio.Task[None]] = set()
        self._stopped = asyncio.Event()
        self._register_metrics()

    # ------------------------------------------------------------ state

    def _transition(self, new: BrokerState) -> None:
        self.state.check_transition(new)
        _log.debug("broker state %s -> %s", self.state.name, new.name)
        self.state = new

    @property
    def is_running(self) -> bool:
        return self.state in (BrokerState.RunningAsBroker, BrokerState.RunningAsController)

    @property
    def bound_ports(self) -> dict[str, int]:
        return self.socket_server.bound_ports if self.socket_server is not None else {}

    @property
    def port(self) -> int:
        """The first listener's bound port."""
        return self.bound_ports[self.config.listeners[0].listener_name]

    @property
    def bootstrap_servers(self) -> str:
        """``host:port`` of the advertised listeners, for a client's bootstrap.servers."""
        return ",".join(f"{ep.host}:{ep.port}" for ep in self.config.advertised_listeners)

    # ------------------------------------------------------------ start-up

    async def startup(self) -> None:
        t0 = time.perf_counter()
        self._transition(BrokerState.Starting)
        self._stopped.clear()
        try:
            if self._unclean_dirs():
                self._transition(BrokerState.RecoveringFromUncleanShutdown)
            # Loading may read whole segments after a crash: not on the event loop.
            self.log_manager = await asyncio.to_thread(LogManager, self.config.log)
            self.log_manager.startup()

            c = self.config
            self.socket_server = SocketServer(
                self.listener_specs,
                None,
                queued_max_requests=c.queued_max_requests,
                queued_max_request_bytes=int(c.get("queued.max.request.bytes")),
                socket_request_max_bytes=c.socket_request_max_bytes,
                connections_max_idle_ms=c.connections_max_idle_ms,
                max_connections=c.max_connections,
                max_connections_per_ip=c.max_connections_per_ip,
                connection_quotas=ConnectionQuotas(
                    protected_listener=c.inter_broker_listener_name,
                    samples=int(c.get("quota.window.num")),
                    window_seconds=int(c.get("quota.window.size.seconds")),
                ),
                send_buffer_bytes=int(c.get("socket.send.buffer.bytes")),
                network_threads=int(c.get("num.network.threads")),
                receive_buffer_bytes=int(c.get("socket.receive.buffer.bytes")),
                backlog=int(c.get("socket.listen.backlog.size")),
                metrics=self.metrics,
            )
            _apply_connection_limits(self.socket_server.connection_quotas, c)
            ports = await self.socket_server.bind()
            self.config = c.with_bound_ports(ports)
            if c.get("zookeeper.connect"):
                await self._start_zookeeper()

            made = self.handler_factory(self)
            self.handler = await made if inspect.isawaitable(made) else made
            if isinstance(self.metadata_store, ZkMetadataStore):
                self.metadata_store.start_watching()
            if self.authorizer is not None and self.metadata_store is not None:
                # the ACLs are loaded before the first request is read
                await asyncio.to_thread(self.metadata_store.start_acls)
            if self.zk_client is not None:
                await self._start_controller(self.zk_client)
            await _maybe_await(getattr(self.handler, "startup", None))
            await self.socket_server.start_processing(self.handler)

            if c.metrics_port:
                host = c.get("metrics.host") or self.config.listeners[0].host or None
                self.metrics_server = MetricsServer(self.metrics, host, c.metrics_port)
                await self.metrics_server.start()

            self._transition(BrokerState.RunningAsBroker)
            if self.controller is not None and self.controller.is_active:
                self._transition(BrokerState.RunningAsController)
        except BaseException:
            _log.exception("broker start-up failed")
            with contextlib.suppress(IllegalBrokerStateTransition):
                self._transition(BrokerState.BrokerShuttingDown)
            await self._stop_components(timeout=1.0)
            self.state = BrokerState.NotRunning
            self._stopped.set()
            raise
        self.started_at = time.time()
        self.startup_ms = (time.perf_counter() - t0) * 1000
        _log.info(
            "broker %d started in %.0f ms, listening on %s",
            self.config.broker_id,
            self.startup_ms,
            ", ".join(str(ep) for ep in self.config.listeners),
        )

    def _scram_credential(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        """A SCRAM login's credential lookup: the metadata store's cache (none
        before the store is open: no login succeeds that early)."""
        store = self.metadata_store
        return None if store is None else store.scram_credentials.get(user, mechanism)

    @property
    def broker_epoch(self) -> int:
        """This broker's registration epoch in ZooKeeper (the czxid of its
        /brokers/ids/<id> znode), read from the registration so it follows a
        re-registration after a session expiry; -1 before registering (and
        without ZooKeeper). Controller requests are checked against it
        (STALE_BROKER_EPOCH)."""
        if self.healthcheck is not None:
            return self.healthcheck.broker_epoch
        return self._broker_epoch

    @broker_epoch.setter
    def broker_epoch(self, epoch: int) -> None:
        self._broker_epoch = epoch

    async def _start_zookeeper(self) -> None:
        """Connect, load the metadata, register this broker (all off the loop)."""
        c = self.config
        session_ms = int(c.get("zookeeper.session.timeout.ms"))
        zk = KafkaZkClient(
            str(c.get("zookeeper.connect")),
            session_timeout_ms=session_ms,
            connection_timeout_ms=c.get("zookeeper.connection.timeout.ms") or session_ms,
            max_in_flight_requests=int(c.get("zookeeper.max.in.flight.requests")),
        )
        self.zk_client = zk
        await asyncio.to_thread(zk.start)
        # meta.properties of the live directories (a failed one cannot be read).
        live = self.log_manager.live_log_dirs if self.log_manager is not None else c.log_dirs
        stored = await asyncio.to_thread(resolve_broker_metadata, live)
        broker_id = await zk.run(self._resolve_broker_id, zk, stored)
        if broker_id != c.broker_id:
            c = self.config = c.with_broker_id(broker_id)
            self.metadata_cache = MetadataCache(broker_id)
        store = self.metadata_store = await zk.run(
            ZkMetadataStore,
            zk,
            c.broker_id,
            cluster_id=c.get("cluster.id"),
            loop=asyncio.get_running_loop(),
            controller_managed=True,
        )
        if stored.cluster_id is not None and stored.cluster_id != store.cluster_id:
            raise InconsistentBrokerMetadataError(
                f"the cluster id {store.cluster_id} in ZooKeeper does not match "
                f"{stored.cluster_id} in meta.properties of {', '.join(c.log_dirs)}: this "
                "broker is trying to join the wrong cluster (is zookeeper.connect, chroot "
                "included, right?)"
            )
        await asyncio.to_thread(write_broker_metadata, live, c.broker_id, store.cluster_id)
        # Leaders write ISR changes to the partition state znodes.
        self.alter_isr_manager = ZkAlterIsrManager(zk)
        healthcheck = KafkaHealthcheck(zk, self.config)
        self._broker_epoch = await zk.run(healthcheck.startup)
        self.healthcheck = healthcheck

    def _resolve_broker_id(self, zk: KafkaZkClient, stored: BrokerMetadata) -> int:
        """The configured broker.id, else the one meta.properties keeps, else
        a new one from ZooKeeper above reserved.broker.max.id (Kafka's order)."""
        c = self.config
        if c.broker_id >= 0:
            if stored.broker_id is not None and stored.broker_id != c.broker_id:
                raise InconsistentBrokerMetadataError(
                    f"the configured broker.id {c.broker_id} does not match broker.id "
                    f"{stored.broker_id} in meta.properties of {', '.join(c.log_dirs)}: these "
                    "log directories belong to another broker (to reuse them, set broker.id "
                    f"to {stored.broker_id}, or remove meta.properties)"
                )
            return c.broker_id
        if stored.broker_id is not None:
            return stored.broker_id
        broker_id = zk.generate_broker_sequence_id() + int(c.get("reserved.broker.max.id"))
        _log.info("generated broker.id %d (broker.id.generation.enable)", broker_id)
        return broker_id

    async def _start_controller(self, zk: KafkaZkClient) -> None:
        """Join the controller election (after registering: the controller
        counts this broker among the live ones)."""
        c = self.config
        controller = KafkaController(
            zk,
            c.broker_id,
            inter_broker_listener=c.inter_broker_listener_name,
            unclean_leader_election_default=str(c.get("unclean.leader.election.enable")).lower()
            == "true",
            auto_leader_rebalance=bool(c.get("auto.leader.rebalance.enable")),
            leader_imbalance_check_interval_s=float(
                c.get("leader.imbalance.check.interval.seconds")
            ),
            leader_imbalance_per_broker_percentage=int(
                c.get("leader.imbalance.per.broker.percentage")
            ),
            socket_timeout_s=int(c.get("controller.socket.timeout.ms")) / 1000,
            on_active_change=self._on_controller_change,
        )
        security = self.inter_broker_security
        if security.ssl_context is not None:
            controller.channel.connection_options["ssl_context"] = security.ssl_context
        if security.uses_sasl:
            controller.channel.connection_options["authenticate"] = lambda conn: (
                authenticate_blocking(conn.request, security)
            )
        controller.register_metrics(self.metrics)
        self.controller = controller
        await controller.startup()

    def _on_controller_change(self, active: bool) -> None:
        """BrokerState follows the controller's office once the broker runs."""
        if active and self.state is BrokerState.RunningAsBroker:
            self._transition(BrokerState.RunningAsController)
        elif not active and self.state is BrokerState.RunningAsController:
            self._transition(BrokerState.RunningAsBroker)

    def on_log_dir_failure(self, log_dir: str) -> None:
        """A log directory went offline (its partitions already are): the
        controller hears of it through ``/log_dir_event_notification`` and
        elects other leaders; with no directory left the broker stops (Kafka
        halts then)."""
        lm = self.log_manager
        if lm is not None and not lm.live_log_dirs:
            _log.error("every log directory is offline (the last: %s): the broker stops", log_dir)
            self.shutdown_soon()
            return
        zk = self.zk_client
        if zk is None:
            return
        broker_id = self.config.broker_id

        async def propagate() -> None:
            try:
                name = await asyncio.to_thread(zk.propagate_log_dir_event, broker_id)
                _log.info("told the controller of the failed log directory %s (%s)",
                          log_dir, name)  # fmt: skip
            except Exception:
                _log.exception("could not write the log dir event of %s", log_dir)

        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not on the loop (before it runs): nothing to tell yet
            _log.error("log directory %s failed before the broker ran", log_dir)
            return
        task = loop.create_task(propagate())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _unclean_dirs(self) -> list[str]:
        """Log directories holding data but no clean-shutdown marker."""
        out = []
        for d in self.config.log.log_dirs:
            if not os.path.isdir(d):
                continue
            entries = [e for e in os.listdir(d) if not e.startswith(".")]
            if entries and not os.path.exists(os.path.join(d, CLEAN_SHUTDOWN_FILE)):
                out.append(d)
        return out

    # ------------------------------------------------------------ shutdown

    def shutdown_soon(self) -> None:
        """Start a graceful shutdown from a signal handler or any coroutine."""
        if self._shutdown_task is None and self.state is not BrokerState.NotRunning:
            self._shutdown_task = asyncio.get_running_loop().create_task(self.shutdown())

    async def shutdown(self) -> None:
        """Graceful shutdown (see the module docstring). Idempotent."""
        if self.state in (
            BrokerState.NotRunning,
            BrokerState.PendingControlledShutdown,
            BrokerState.BrokerShuttingDown,
        ):
            await self._stopped.wait()
            return
        t0 = time.perf_counter()
        if self.state in (BrokerState.RunningAsBroker, BrokerState.RunningAsController):
            self._transition(BrokerState.PendingControlledShutdown)
            try:
                await self._controlled_shutdown()
            except Exception:
                _log.exception("controlled shutdown failed")
        self._transition(BrokerState.BrokerShuttingDown)
        if self.replica_manager is not None:
            # A topic creation on a worker thread stops now, so the in-flight
            # request it belongs to is answered before the drain times out.
            self.replica_manager.stop_creating()
        timeout = int(self.config.get("shutdown.timeout.ms")) / 1000
        try:
            await self._stop_components(timeout)
        finally:
            self._transition(BrokerState.NotRunning)
            self._stopped.set()
        _log.info("broker %d shut down in %.0f ms", self.config.broker_id,
                  (time.perf_counter() - t0) * 1000)  # fmt: skip

    async def _controlled_shutdown(self) -> None:
        """On a cluster, ask the controller to move this broker's leaderships
        to other in-sync replicas first (Kafka's controlled shutdown, up to
        ``controlled.shutdown.max.retries`` attempts ``controlled.shutdown.retry.backoff.ms``
        apart); when every attempt fails the broker stops anyway."""
        c = self.config
        if self.zk_client is None or self.controller is None or self.healthcheck is None:
            return
        if not c.get("controlled.shutdown.enable"):
            return
        retries = int(c.get("controlled.shutdown.max.retries"))
        backoff = int(c.get("controlled.shutdown.retry.backoff.ms")) / 1000
        _log.info("starting controlled shutdown")
        for remaining in range(retries - 1, -1, -1):
            try:
                done = await self._request_controlled_shutdown()
            except Exception as e:  # an unreachable controller: try again
                _log.warning("controlled shutdown request failed: %s", e)
                done = False
            if done:
                await self._await_leadership_moved()
                return
            if remaining:
                await asyncio.sleep(backoff)
                _log.info("retrying controlled shutdown (%d retries remaining)", remaining)
        _log.warning("proceeding to do an unclean shutdown as all the controlled shutdown "
                     "attempts failed")  # fmt: skip

    async def _await_leadership_moved(self) -> None:
        """Wait until the controller's LeaderAndIsr has made this broker a
        follower of every partition it led with other replicas (bounded by
        ``controller.socket.timeout.ms``): a produce waiting here for
        followers that follow another leader now would hold up the drain, and
        a controller's requests to itself would go with its resignation."""
        rm = self.replica_manager
        if rm is None:
            return
        deadline = time.monotonic() + int(self.config.get("controller.socket.timeout.ms")) / 1000
        while True:
            led = [
                f"{tp.topic}-{tp.partition} (leader epoch {p.leader_epoch})"
                for tp, p in rm.partitions().items()
                if p.is_leader and len(p.assigned_replicas) > 1
            ]
            if not led:
                return
            if time.monotonic() >= deadline:
                break
            await asyncio.sleep(0.01)
        _log.warning("still leading %s after the controlled shutdown", ", ".join(led[:10]))

    async def _request_controlled_shutdown(self) -> bool:
        """One attempt: True when the controller has moved every leadership."""
        controller = self.controller
        zk = self.zk_client
        assert controller is not None and zk is not None
        c = self.config
        t0 = time.perf_counter()
        if controller.is_active:  # this broker is the controller: no request to itself
            result = await controller.controlled_shutdown(c.broker_id, self.broker_epoch)
            code, message = result.error_code, result.message
            remaining = [f"{tp.topic}-{tp.partition}" for tp in result.remaining]
        else:
            cid = controller.active_controller_id
            if cid < 0:
                cid = self.metadata_cache.controller_id or -1
            if cid < 0:
                _log.info("no controller known for the controlled shutdown")
                return False
            ep = self.metadata_cache.broker_endpoint(cid, c.inter_broker_listener_name)
            if ep is not None:
                address = f"{ep.host}:{ep.port}"
            else:
                info = await zk.run(zk.get_broker, cid)
                found = info.endpoint(c.inter_broker_listener_name) if info else None
                if found is None:
                    _log.info("controller %d has no registration to reach it at", cid)
                    return False
                address = f"{found.host}:{found.port}"
            timeout = int(c.get("controller.socket.timeout.ms")) / 1000
            response = await asyncio.to_thread(
                _send_controlled_shutdown, address, c.broker_id, self.broker_epoch, timeout
            )
            code, message = response.error_code, None
            remaining = [
                f"{p.topic_name}-{p.partition_index}" for p in response.remaining_partitions
            ]
        ms = (time.perf_counter() - t0) * 1000
        if code != ErrorCode.NONE:
            _log.info("controlled shutdown request returned after %.0f ms with error %s%s", ms,
                      _error_name(code), f" ({message})" if message else "")  # fmt: skip
            return False
        if remaining:
            _log.info("controlled shutdown request returned after %.0f ms with %d partitions "
                      "remaining to move: %s", ms, len(remaining), remaining[:10])  # fmt: skip
            return False
        _log.info("controlled shutdown request returned successfully after %.0f ms", ms)
        return True

    async def _stop_components(self, timeout: float) -> None:
        if self.controller is not None:
            # First: another broker takes the controller's office at once.
            try:
                await self.controller.shutdown()
            except Exception:
                _log.exception("stopping the controller failed")
            self.controller = None
        if self.healthcheck is not None and self.zk_client is not None:
            # First: the cluster stops sending this broker work.
            self._broker_epoch = self.healthcheck.broker_epoch
            try:
                await self.zk_client.run(self.healthcheck.shutdown)
            except Exception:
                _log.exception("deregistering from ZooKeeper failed")
            self.healthcheck = None
        if self.group_coordinator is not None:
            # First: a JoinGroup may wait minutes for a rebalance; answered
            # now, it does not hold up the socket server's drain.
            try:
                await self.group_coordinator.shutdown()
            except Exception:
                _log.exception("stopping the group coordinator failed")
            self.group_coordinator = None
        if self.txn_coordinator is not None:
            try:
                await self.txn_coordinator.shutdown()
            except Exception:
                _log.exception("stopping the transaction coordinator failed")
            self.txn_coordinator = None
        verifier = getattr(self.replica_manager, "add_partitions_to_txn_manager", None)
        if verifier is not None:
            try:
                await verifier.shutdown()
            except Exception:
                _log.exception("stopping the AddPartitionsToTxnManager failed")
        if self.socket_server is not None:
            try:
                await self.socket_server.shutdown(timeout)
            except Exception:
                _log.exception("stopping the socket server failed")
        if self.handler is not None:
            try:
                await _maybe_await(getattr(self.handler, "shutdown", None))
            except Exception:
                _log.exception("stopping the request handlers failed")
            self.handler = None
        if self.replica_manager is not None:
            try:
                await asyncio.to_thread(self.replica_manager.shutdown)
            except Exception:
                _log.exception("stopping the replica manager failed")
            self.replica_manager = None
        if isinstance(self.alter_isr_manager, ZkAlterIsrManager):
            # After the replica manager: no leader proposes any more.
            manager = self.alter_isr_manager
            try:
                await asyncio.to_thread(manager.shutdown)
            except Exception:
                _log.exception("stopping the AlterIsrManager failed")
            self.alter_isr_manager = InProcessAlterIsrManager()
        if self.metadata_store is not None:
            with contextlib.suppress(Exception):
                self.metadata_store.close()
        if self.log_manager is not None:
            try:
                await asyncio.to_thread(self.log_manager.shutdown)
            except Exception:
                _log.exception("log manager shutdown failed")
        if self.metrics_server is not None:
            await self.metrics_server.stop()
            self.metrics_server = None
        if self.zk_client is not None:
            try:
                await asyncio.to_thread(self.zk_client.close)
            except Exception:
                _log.exception("closing the ZooKeeper session failed")
            self.zk_client = None
            self.metadata_store = None  # a restart reconnects and reloads

    async def wait_stopped(self) -> None:
        await self._stopped.wait()

    # ------------------------------------------------------------ running

    async def serve_forever(
        self,
        *,
        install_signal_handlers: bool = True,
        announce: Callable[[KafkaServer], None] | None = None,
    ) -> None:
        """Start, run until SIGTERM/SIGINT (or :meth:`shutdown_soon`), shut down.
        ``announce`` is called once the broker is serving."""
        loop = asyncio.get_running_loop()
        if install_signal_handlers:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, self._on_signal, sig)
        try:
            await self.startup()
            if announce is not None:
                announce(self)
            await self._stopped.wait()
            if self._shutdown_task is not None:
                await self._shutdown_task
        finally:
            if install_signal_handlers:
                for sig in (signal.SIGTERM, signal.SIGINT):
                    loop.remove_signal_handler(sig)

    def _on_signal(self, sig: int) -> None:
        _log.info("received %s: shutting down", signal.Signals(sig).name)
        self.shutdown_soon()

    # ------------------------------------------------------------ metrics

    def _register_metrics(self) -> None:
        m = self.metrics
        m.gauge(
            "kafka_server_kafkaserver_brokerstate",
            "Broker state (Kafka's values: 0 NotRunning, 1 Starting, 2 Recovering, "
            "3 RunningAsBroker, 4 RunningAsController, 6 PendingControlledShutdown, "
            "7 BrokerShuttingDown).",
            lambda: int(self.state),
        )
        m.gauge(
            "kafka_server_replicamanager_partitioncount",
            "Partitions on this broker.",
            lambda: len(self.log_manager) if self.log_manager is not None else 0,
        )
        m.gauge(
            "kafka_log_logmanager_size_bytes",
            "Bytes of every partition's log, per topic.",
            self._topic_sizes,
        )
        # Kafka's kafka.log:type=Log,name=<Name>,topic=,partition= gauges, as
        # the JMX exporter names them (kafka_log_log_size{topic,partition}).
        for name, doc, read in (
            ("size", "Bytes of each partition's log.", lambda log: log.size),
            ("numlogsegments", "Segments of each partition's log.", lambda log: log.num_segments),
            ("logendoffset", "Log end offset of each partition.", lambda log: log.log_end_offset),
            ("logstartoffset", "Log start offset of each partition.",
             lambda log: log.log_start_offset),
        ):  # fmt: skip
            m.gauge(f"kafka_log_log_{name}", doc, self._per_log(read))
        register_process_metrics(m)
        m.gauge(
            "kafka_server_kafkaserver_uptime_seconds",
            "Seconds since the broker finished starting.",
            lambda: time.time() - self.started_at if self.started_at else 0.0,
        )
        for key, help in _CLEANER_GAUGES.items():
            m.gauge(f"kafka_log_cleaner_{key}", help, self._cleaner_metric(key))

    def _cleaner_metric(self, key: str) -> Callable[[], float]:
        def read() -> float:
            lm = self.log_manager
            return lm.cleaner.metrics().get(key, 0.0) if lm is not None else 0.0

        return read

    def _per_log(
        self, read: Callable[[Log], int]
    ) -> Callable[[], list[tuple[dict[str, str], float]]]:
        def values() -> list[tuple[dict[str, str], float]]:
            if self.log_manager is None:
                return []
            out = []
            for tp, log in sorted(self.log_manager.all_logs().items()):
                with contextlib.suppress(Exception):  # a log being deleted
                    out.append(({"topic": tp.topic, "partition": str(tp.partition)},
                                float(read(log))))  # fmt: skip
            return out

        return values

    def _topic_sizes(self) -> list[tuple[dict[str, str], float]]:
        if self.log_manager is None:
            return []
        sizes: dict[str, int] = {}
        for tp, log in self.log_manager.all_logs().items():
            with contextlib.suppress(Exception):
                sizes[tp.topic] = sizes.get(tp.topic, 0) + int(log.size)
        return [({"topic": t}, float(v)) for t, v in sorted(sizes.items())]


_CLEANER_GAUGES = {
    "max_dirty_percent": "Highest dirty share (percent) of a compacted log at the last check.",
    "cleaner_recopy_percent": "Bytes written per byte read (percent) by the last clean.",
    "time_since_last_run_ms": "Milliseconds since a cleaner thread last looked for work.",
    "max_clean_time_secs": "Duration of the last clean.",
    "bytes_cleaned": "Bytes read by cleans since start-up.",
}


def _send_controlled_shutdown(
    address: str, broker_id: int, broker_epoch: int, timeout: float
) -> ControlledShutdownResponse:
    """ControlledShutdown v3 to the controller at ``address`` (blocking)."""
    with KafkaConnection(address, timeout=timeout, client_id=f"broker-{broker_id}") as conn:
        return conn.request(
            ApiKey.CONTROLLED_SHUTDOWN,
            CONTROLLED_SHUTDOWN_VERSION,
            ControlledShutdownRequest(broker_id=broker_id, broker_epoch=broker_epoch),
            ControlledShutdownResponse,
        )


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


async def _maybe_await(method: Callable[[], object] | None) -> None:
    """Call the handler's optional hook (startup, shutdown), sync or async."""
    if method is None:
        return
    result = method()
    if inspect.isawaitable(result):
        await result
