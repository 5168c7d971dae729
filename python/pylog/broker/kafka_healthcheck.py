"""KafkaHealthcheck: a ZooKeeper-mode broker's registration under
``/brokers/ids/<broker.id>`` (Kafka's ``kafka.server.KafkaHealthcheck``, folded
into KafkaZkClient.registerBroker in later Kafka versions).

The znode is ephemeral: it lives as long as the broker's ZooKeeper session, so
the controller learns of a broker's death when ZooKeeper expires the session.
Its content is the broker's advertised endpoints, rack and features (version 5
of Kafka's format, :class:`pylog.metadata.zk_data.BrokerIdZNode`); its czxid is
the broker epoch (KIP-380), larger for each new registration, which the
controller sends in its requests so that a broker can tell an old incarnation's
requests from the current one's.

* start-up: register once the listeners are bound (the endpoints carry the real
  ports). Another live broker holding the same id is an error that stops the
  start-up (BrokerIdInUseError names the holder).
* session expiry (a long GC or network pause; kazoo reports LOST, then
  connects a new session): register again, with a new broker epoch.
* clean shutdown: delete the znode at once, so the controller need not wait
  for the session timeout.
"""

from __future__ import annotations

import logging
import threading
import time

from pylog.common.transaction_version import FEATURE_NAME, MAX_TRANSACTION_VERSION
from pylog.metadata.kafka_zk_client import BrokerIdInUseError, KafkaZkClient, ZkError
from pylog.metadata.zk_data import BrokerInfo, EndPointInfo
from pylog.server.config import KafkaConfig

__all__ = ["KafkaHealthcheck", "broker_info"]

_log = logging.getLogger("pylog.broker")

_HANDLER = "broker-registration"


def broker_info(config: KafkaConfig) -> BrokerInfo:
    """What ``/brokers/ids/<id>`` says of this broker (``config`` with bound ports)."""
    return BrokerInfo(
        id=config.broker_id,
        endpoints=tuple(
            EndPointInfo(ep.listener_name, ep.host, ep.port, ep.security_protocol)
            for ep in config.advertised_listeners
        ),
        rack=config.get("broker.rack"),
        timestamp_ms=int(time.time() * 1000),
        # The features this broker supports (KIP-584): a feature is finalized
        # only at a level every registered broker supports.
        features={FEATURE_NAME: (0, int(MAX_TRANSACTION_VERSION))},
    )


class KafkaHealthcheck:
    """Registers this broker and keeps it registered. Blocking methods: call
    them off the event loop."""

    def __init__(self, zk: KafkaZkClient, config: KafkaConfig) -> None:
        self.zk = zk
        self.config = config
        self.broker_epoch = -1
        self._lock = threading.Lock()
        self._stopped = False

    def startup(self) -> int:
        """Register; returns the broker epoch. BrokerIdInUseError if another
        live broker has this id."""
        with self._lock:
            self.broker_epoch = self.zk.register_broker(broker_info(self.config))
        self.zk.register_state_change_handler(_HANDLER, after_initializing_session=self._reregister)
        _log.info(
            "registered broker %d at %s with broker epoch %d",
            self.config.broker_id,
            self.zk.connect_string,
            self.broker_epoch,
        )
        return self.broker_epoch

    def _reregister(self) -> None:
        """A new session replaced an expired one: the old znode went with it."""
        delay = 0.1
        while not self._stopped:
            try:
                with self._lock:
                    if self._stopped:
                        return
                    self.broker_epoch = self.zk.register_broker(broker_info(self.config))
                _log.info(
                    "re-registered broker %d after its ZooKeeper session expired; "
                    "new broker epoch %d",
                    self.config.broker_id,
                    self.broker_epoch,
                )
                return
            except BrokerIdInUseError as e:
                # The expired session's znode should be gone; another broker
                # took the id meanwhile. Keep trying: it may be the old session
                # still being cleaned up.
                _log.error("%s", e)
            except ZkError as e:
                _log.warning("re-registering broker %d failed: %s", self.config.broker_id, e)
            time.sleep(delay)
            delay = min(delay * 2, 2.0)

    def shutdown(self) -> None:
        """Deregister (only our own session's znode)."""
        with self._lock:
            self._stopped = True
            self.zk.unregister_state_change_handler(_HANDLER)
            try:
                if self.zk.deregister_broker(self.config.broker_id):
                    _log.info("deregistered broker %d", self.config.broker_id)
            except ZkError as e:
                _log.warning("deregistering broker %d failed: %s", self.config.broker_id, e)
