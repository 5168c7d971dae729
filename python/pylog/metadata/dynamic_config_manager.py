"""DynamicConfigManager: applies the config changes others announce under
``/config/changes`` (Kafka's ``kafka.server.DynamicConfigManager``).

An entity's config overrides live at ``/config/<entity type>/<name>``
(``topics/<topic>``, ``clients/<id>``, ``users/<user>``,
``users/<user>/clients/<id>``, ``brokers/<id>``); whoever changes one also
creates a sequential ``/config/changes/config_change_<seq>`` naming the entity
(:class:`~pylog.metadata.zk_data.ConfigEntityChangeNotificationZNode`), so
every broker need watch one znode's children instead of every entity. On each
new notification the manager re-reads the entity's config and hands it to the
handler of its entity type — Kafka's ``ConfigHandler``s: ``TopicConfigHandler``,
``ClientIdConfigHandler``, ``UserConfigHandler``, ``BrokerConfigHandler`` — a
type without a handler is skipped (IP configs are not dynamic in
pylog yet). Notifications are processed in sequence order, each once: those
present at start-up are covered by the start-up read of every entity, and a
change this broker made itself (and applied already) is marked as seen.

Notifications older than ``change_expiration_ms`` (Kafka's changeExpirationMs,
15 minutes) are deleted by the next broker that processes a change, as Kafka's
ZkNodeChangeNotificationListener does: every broker has read them long since,
and ``/config/changes`` would otherwise grow by one znode per change forever.

Kafka keeps this class in ``kafka.server``; here it sits in the metadata layer
beside the ZooKeeper view it keeps current (:class:`ZkMetadataStore` owns one
and registers the handlers), and knows nothing of what a handler does.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import threading
from collections.abc import Callable, Mapping

from pylog.common.utils.time import Clock, now_ms
from pylog.metadata.kafka_zk_client import KafkaZkClient, ZkError
from pylog.metadata.zk_data import ConfigEntityChangeNotificationZNode as _Changes
from pylog.metadata.zk_data import ZkDataError

__all__ = ["CHANGE_EXPIRATION_MS", "ConfigHandler", "ConfigType", "DynamicConfigManager"]

_log = logging.getLogger("pylog.metadata")

#: Config change notifications older than this are deleted by the next broker
#: that processes a change (Kafka's changeExpirationMs, 15 minutes).
CHANGE_EXPIRATION_MS = 15 * 60 * 1000

#: ``handler(entity_name, configs)``: the entity's whole config as it is now in
#: ZooKeeper (Kafka's ``ConfigHandler.processConfigChanges``). For ``users`` the
#: name is the sanitized user, or ``<user>/clients/<client id>``.
ConfigHandler = Callable[[str, Mapping[str, str]], None]


class ConfigType:
    """The entity types of ``/config`` (Kafka's ``ConfigType``)."""

    TOPIC = "topics"
    CLIENT = "clients"
    USER = "users"
    BROKER = "brokers"
    IP = "ips"
    #: Per-group configs: not in Kafka's ZooKeeper mode (which had none); pylog
    #: keeps them as the other entities, ``/config/groups/<group id>``.
    GROUP = "groups"
    #: KIP-714's client metrics subscriptions (Kafka's ConfigType.ClientMetrics,
    #: ``kafka-configs --entity-type client-metrics``).
    CLIENT_METRICS = "client-metrics"


class DynamicConfigManager:
    """Follows ``/config/changes`` and dispatches each change to its entity type's
    handler. Processing runs on ``executor`` (one thread: one change at a time,
    never on kazoo's thread) under ``lock`` (the lock of the view the handlers
    update)."""

    def __init__(
        self,
        zk: KafkaZkClient,
        handlers: Mapping[str, ConfigHandler],
        *,
        executor: concurrent.futures.Executor,
        lock: threading.RLock,
        change_expiration_ms: int = CHANGE_EXPIRATION_MS,
        clock: Clock = now_ms,
    ) -> None:
        self.zk = zk
        self.handlers = dict(handlers)
        self.change_expiration_ms = change_expiration_ms
        self._executor = executor
        self._lock = lock
        self._clock = clock
        self._last_seq = -1
        self._stop_watch: Callable[[], None] | None = None
        self._closed = False

    def skip_existing(self) -> None:
        """Mark every notification present now as processed: the caller has just
        read every entity's config, which already reflects them."""
        changes = self.zk.get_config_change_notifications()
        if changes:
            self._last_seq = max(self._last_seq, _Changes.sequence_number(changes[-1]))

    def mark_processed(self, change_path: str) -> None:
        """A change this broker made and applied itself: its notification
        (``change_path`` or its name) is not processed again."""
        seq = _Changes.sequence_number(change_path.rsplit("/", 1)[-1])
        with self._lock:
            self._last_seq = max(self._last_seq, seq)

    def start(self) -> None:
        """Watch ``/config/changes``; each change of its children is processed."""
        self._stop_watch = self.zk.watch_children(_Changes.parent(), self._on_changes)

    def close(self) -> None:
        self._closed = True
        if self._stop_watch is not None:
            self._stop_watch()
            self._stop_watch = None

    def _on_changes(self, children: list[str]) -> None:
        # On kazoo's thread: hand over, never block here.
        if not self._closed:
            with contextlib.suppress(RuntimeError):  # the executor is shut down
                self._executor.submit(self.process_notifications, children)

    def process_notifications(self, children: list[str]) -> None:
        """Apply each notification of ``children`` not processed yet, in
        sequence order, then purge the expired ones."""
        try:
            names = sorted(
                (c for c in children if c.startswith(_Changes.PREFIX)),
                key=_Changes.sequence_number,
            )
            with self._lock:
                for name in names:
                    seq = _Changes.sequence_number(name)
                    if seq <= self._last_seq:
                        continue
                    self._last_seq = seq
                    self._process(name)
            self._purge_obsolete(names)
        except (ZkError, ZkDataError):
            _log.exception("reading the config changes from ZooKeeper failed")

    def _process(self, name: str) -> None:
        entity = self.zk.get_config_change_notification(name)
        if entity is None:
            return  # gone, or not a notification pylog or Kafka writes
        entity_type, entity_name = entity
        handler = self.handlers.get(entity_type)
        if handler is None:
            _log.debug("config change of %s/%s: no handler for %s", entity_type,
                       entity_name, entity_type)  # fmt: skip
            return
        handler(entity_name, self.zk.get_entity_config(entity_type, entity_name))

    def _purge_obsolete(self, names: list[str]) -> None:
        now = self._clock()
        old = []
        for name in names:
            if _Changes.sequence_number(name) > self._last_seq:
                break
            got = self.zk.get_config_change_notification_with_stat(name)
            if got is not None and now - got[1].ctime_ms > self.change_expiration_ms:
                old.append(name)
        if old:
            self.zk.delete_config_change_notifications(old)
            _log.info("purged %d config change notifications", len(old))
