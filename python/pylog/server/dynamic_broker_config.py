"""DynamicBrokerConfig: broker keys changed while the broker runs (Kafka's
``kafka.server.DynamicBrokerConfig``).

A broker's configuration has four layers, highest first, as Kafka reports them
in DescribeConfigs: DYNAMIC_BROKER_CONFIG (``/config/brokers/<id>``, this broker
only), DYNAMIC_DEFAULT_BROKER_CONFIG (``/config/brokers/<default>``, every
broker), STATIC_BROKER_CONFIG (``server.properties``) and DEFAULT_CONFIG (the
key's default). ``kafka-configs --entity-type brokers --entity-name 1`` and
``--entity-default`` write the two dynamic layers through AlterConfigs or
IncrementalAlterConfigs; every broker hears the change (``/config/changes``, or
the embedded store of a lone broker) and hands this object the layer's whole
new content.

A listener's TLS passwords (``listener.name.<l>.ssl.keystore.password``,
``….ssl.key.password``, ``….ssl.truststore.password``, ``….ssl.keystore.key``)
are stored encrypted with ``password.encoder.secret`` as Kafka stores them
(:class:`~pylog.security.password_encoder.PasswordEncoder`):
:meth:`DynamicBrokerConfig.to_persistent` before the store,
:meth:`~DynamicBrokerConfig.from_persistent` after it; without a secret they
are refused ("Password encoder secret not configured"), and a stored one
that does not decode (another secret) is left out with an error, as Kafka does.

Only the keys Kafka lists as dynamic may be set (``DYNAMIC_BROKER_CONFIGS``):
the log defaults topics inherit (DynamicLogConfig), the cleaner's keys, thread
counts, connection limits, producer-id expiry and the replication throttles.
Anything else is refused with Kafka's "Cannot update these configs
dynamically"; a value is checked by the same parser ``server.properties`` goes
through. A change is applied by building the whole new :class:`KafkaConfig` and
handing old and new to each registered reconfigurable (Kafka's
BrokerReconfigurable), which picks out what concerns it.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import threading
from collections.abc import Callable, Mapping

from pylog.errors import InvalidConfigurationError
from pylog.log.config import TOPIC_CONFIG
from pylog.security.password_encoder import PasswordEncoder
from pylog.server.config import ALL_BROKER_CONFIG, KafkaConfig

__all__ = [
    "DEFAULT_ENTITY",
    "DYNAMIC_BROKER_CONFIGS",
    "BrokerReconfigurable",
    "DynamicBrokerConfig",
    "ReconfigurationValidator",
    "is_password_config",
    "listener_sasl_key",
    "listener_socket_key",
    "listener_ssl_key",
]

_log = logging.getLogger("pylog.server.dynamic_broker_config")

#: The entity name of the cluster-wide layer (Kafka's ``ZooKeeperInternals.DEFAULT_STRING``).
DEFAULT_ENTITY = "<default>"

# The broker keys behind topic configs (Kafka's DynamicLogConfig: every
# ServerTopicConfigSynonyms value), with the other spellings of the same value.
_LOG_KEYS = frozenset(k.server_default for k in TOPIC_CONFIG.values() if k.server_default) | {
    "log.roll.hours",
    "log.roll.jitter.hours",
    "log.retention.minutes",
    "log.retention.hours",
}
# Kafka's LogCleaner.ReconfigurableConfigs (message.max.bytes is a log key too).
_CLEANER_KEYS = frozenset(
    {
        "log.cleaner.threads",
        "log.cleaner.dedupe.buffer.size",
        "log.cleaner.io.buffer.load.factor",
        "log.cleaner.io.buffer.size",
        "log.cleaner.io.max.bytes.per.second",
        "log.cleaner.backoff.ms",
    }
)
# Kafka's DynamicThreadPool and SocketServer reconfigurable keys.
_THREAD_KEYS = frozenset(
    {"num.io.threads", "num.network.threads", "num.replica.fetchers",
     "num.recovery.threads.per.data.dir", "background.threads"}
)  # fmt: skip
_SOCKET_KEYS = frozenset(
    {"max.connections", "max.connections.per.ip", "max.connections.per.ip.overrides",
     "max.connection.creation.rate"}
)  # fmt: skip
# Kafka's SocketServer.ListenerReconfigurableConfigs: dynamic per listener
# (``listener.name.<listener>.<key>``), per broker or cluster-wide.
_LISTENER_SOCKET_KEYS = frozenset({"max.connections", "max.connection.creation.rate"})
# DynamicProducerStateManagerConfig.
_PRODUCER_STATE_KEYS = frozenset(
    {"producer.id.expiration.ms", "transaction.partition.verification.enable"}
)

# Kafka's broker quota configs of DynamicConfig.Broker (what
# kafka-reassign-partitions --throttle and --replica-alter-log-dirs-throttle set).
_REPLICATION_QUOTA_KEYS = frozenset(
    {"leader.replication.throttled.rate", "follower.replication.throttled.rate",
     "replica.alter.log.dirs.io.max.bytes.per.second"}
)  # fmt: skip

# DynamicListenerConfig's SASL keys pylog has (GSSAPI's, stored, inert here).
_SASL_KEYS = frozenset(
    {"sasl.kerberos.service.name", "sasl.kerberos.kinit.cmd",
     "sasl.kerberos.ticket.renew.window.factor", "sasl.kerberos.ticket.renew.jitter",
     "sasl.kerberos.min.time.before.relogin", "sasl.kerberos.principal.to.local.rules"}
)  # fmt: skip

#: Every key a dynamic layer may hold (Kafka's DynamicBrokerConfig.AllDynamicConfigs,
#: as far as pylog has the keys).
DYNAMIC_BROKER_CONFIGS = frozenset(
    k
    for k in _LOG_KEYS
    | _CLEANER_KEYS
    | _THREAD_KEYS
    | _SOCKET_KEYS
    | _PRODUCER_STATE_KEYS
    | _REPLICATION_QUOTA_KEYS
    | _SASL_KEYS
    if k in ALL_BROKER_CONFIG
)

# Kafka's SslConfigs.RECONFIGURABLE_CONFIGS: dynamic per listener
# (``listener.name.<listener>.<key>``) and per broker only, never unprefixed.
_SSL_FILE_KEYS = frozenset(
    {"ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.certificate.chain",
     "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.certificates"}
)  # fmt: skip
_SSL_PASSWORD_KEYS = frozenset(
    {"ssl.keystore.password", "ssl.key.password", "ssl.truststore.password", "ssl.keystore.key"}
)
_LISTENER_KEY = re.compile(r"^listener\.name\.([^.]+)\.(.+)$")
# A SASL listener's mechanisms and each mechanism's JAAS text, named as
# Kafka's ListenerName.saslMechanismConfigPrefix names them
# (``listener.name.<listener>.<mechanism, lower case>.sasl.jaas.config``).
_SASL_MECHANISM_KEY = re.compile(r"^(plain|scram-sha-256|scram-sha-512)\.sasl\.jaas\.config$")
_SASL_ENABLED_MECHANISMS = "sasl.enabled.mechanisms"


def listener_ssl_key(name: str) -> tuple[str, str] | None:
    """(listener, ssl key) of a ``listener.name.<listener>.ssl.*`` key Kafka
    lets change at run time, else None."""
    m = _LISTENER_KEY.match(name)
    if m is None or m.group(2) not in _SSL_FILE_KEYS | _SSL_PASSWORD_KEYS:
        return None
    return m.group(1).upper(), m.group(2)


def listener_socket_key(name: str) -> tuple[str, str] | None:
    """(listener, key) of a ``listener.name.<listener>.max.connections`` or
    ``….max.connection.creation.rate`` key, else None."""
    m = _LISTENER_KEY.match(name)
    if m is None or m.group(2) not in _LISTENER_SOCKET_KEYS:
        return None
    return m.group(1).upper(), m.group(2)


def listener_sasl_key(name: str) -> tuple[str, str] | None:
    """(listener, key) of a ``listener.name.<listener>.sasl.enabled.mechanisms``
    or ``listener.name.<listener>.<mechanism>.sasl.jaas.config`` key, else None.

    Kafka accepts these per broker (they are in DynamicListenerConfig's
    ReconfigurableConfigs, prefixed so per-broker only) but its
    SaslChannelBuilder does not reconfigure an existing listener: the change
    waits for a restart. pylog applies it to the listener's next connections."""
    m = _LISTENER_KEY.match(name)
    if m is None:
        return None
    key = m.group(2)
    if key != _SASL_ENABLED_MECHANISMS and _SASL_MECHANISM_KEY.match(key) is None:
        return None
    return m.group(1).upper(), key


def is_password_config(name: str) -> bool:
    """A dynamic key whose value is a secret, stored encrypted (Kafka's
    DynamicBrokerConfig.isPasswordConfig, of the keys pylog makes dynamic):
    the TLS passwords and a JAAS text (``sasl.jaas.config`` is PASSWORD)."""
    scoped = listener_ssl_key(name)
    if scoped is not None:
        return scoped[1] in _SSL_PASSWORD_KEYS
    sasl = listener_sasl_key(name)
    return sasl is not None and sasl[1].endswith(".sasl.jaas.config")


def _password_encoder(config: KafkaConfig, key: str) -> PasswordEncoder | None:
    secret = config.get(key)
    if secret is None or str(secret) == "":
        return None
    algorithm = config.get("password.encoder.keyfactory.algorithm")
    return PasswordEncoder(
        str(secret),
        key_factory_algorithm=None if algorithm is None else str(algorithm),
        cipher_algorithm=str(config.get("password.encoder.cipher.algorithm")),
        key_length=int(config.get("password.encoder.key.length")),
        iterations=int(config.get("password.encoder.iterations")),
    )


def _is_dynamic(name: str) -> bool:
    return (
        name in DYNAMIC_BROKER_CONFIGS
        or listener_ssl_key(name) is not None
        or listener_socket_key(name) is not None
        or listener_sasl_key(name) is not None
    )


#: Called with the old and the new configuration after a change was applied
#: (Kafka's BrokerReconfigurable.reconfigure); it acts on the keys it owns.
BrokerReconfigurable = Callable[[KafkaConfig, KafkaConfig], None]
#: Raises InvalidConfigurationError if the new configuration cannot be applied
#: (Kafka's Reconfigurable.validateReconfiguration): a keystore that does not load.
ReconfigurationValidator = Callable[[KafkaConfig], None]


class DynamicBrokerConfig:
    """The static configuration with the two dynamic layers on top, and the
    reconfigurables that follow it. Thread-safe: changes arrive on the
    metadata store's thread or a request's worker thread."""

    def __init__(self, static: KafkaConfig) -> None:
        self.static = static
        self._default: dict[str, str] = {}
        self._per_broker: dict[str, str] = {}
        self._current = static
        self._reconfigurables: list[tuple[str, BrokerReconfigurable]] = []
        self._validators: list[ReconfigurationValidator] = []
        self._lock = threading.RLock()
        #: Encrypts and decrypts the stored passwords (password.encoder.secret;
        #: the old secret still decodes while it is being rotated).
        self.password_encoder = _password_encoder(static, "password.encoder.secret")
        self._old_password_encoder = _password_encoder(static, "password.encoder.old.secret")

    # ------------------------------------------------------------------ passwords

    def to_persistent(self, entity: str, configs: Mapping[str, str]) -> dict[str, str]:
        """``configs`` as the store keeps them: passwords encrypted (Kafka's
        toPersistentProps)."""
        out = dict(configs)
        for name, value in configs.items():
            if not is_password_config(name):
                continue
            if entity == DEFAULT_ENTITY:
                raise InvalidConfigurationError(
                    "Password config can be defined only at broker level"
                )
            if self.password_encoder is None:
                raise InvalidConfigurationError("Password encoder secret not configured")
            out[name] = self.password_encoder.encode(value)
        return out

    def reencoded(self, configs: Mapping[str, str]) -> dict[str, str] | None:
        """A stored layer whose passwords only ``password.encoder.old.secret``
        decodes, encrypted again with the current secret (what Kafka writes
        back at start-up while the secret is rotated); None when none needs it."""
        current, old = self.password_encoder, self._old_password_encoder
        if current is None or old is None:
            return None
        out = dict(configs)
        changed = False
        for name, value in configs.items():
            if not is_password_config(name):
                continue
            try:
                current.decode(value)
                continue
            except InvalidConfigurationError:
                pass
            try:
                out[name] = current.encode(old.decode(value))
                changed = True
            except InvalidConfigurationError:
                continue  # neither decodes it: from_persistent leaves it out
        return out if changed else None

    def from_persistent(self, configs: Mapping[str, str]) -> dict[str, str]:
        """A stored layer with its passwords decrypted; one that does not
        decode is left out, with an error (Kafka's fromPersistentProps)."""
        out = dict(configs)
        for name, value in configs.items():
            if not is_password_config(name):
                continue
            decoded = None
            for encoder in (self.password_encoder, self._old_password_encoder):
                if encoder is None:
                    continue
                try:
                    decoded = encoder.decode(value)
                    break
                except InvalidConfigurationError:
                    continue
            if decoded is None:
                _log.error("dynamic password config %s could not be decoded, ignoring", name)
                del out[name]
            else:
                out[name] = decoded
        return out

    @property
    def current(self) -> KafkaConfig:
        """The configuration in effect: static keys under the dynamic layers."""
        return self._current

    def add_reconfigurable(
        self,
        name: str,
        reconfigure: BrokerReconfigurable,
        validate: ReconfigurationValidator | None = None,
    ) -> None:
        with self._lock:
            self._reconfigurables.append((name, reconfigure))
            if validate is not None:
                self._validators.append(validate)

    def dynamic_default(self) -> dict[str, str]:
        with self._lock:
            return dict(self._default)

    def dynamic_broker(self) -> dict[str, str]:
        with self._lock:
            return dict(self._per_broker)

    # ------------------------------------------------------------------ checks

    def validate(self, entity: str, configs: Mapping[str, str]) -> None:
        """InvalidConfigurationError unless ``configs`` may become ``entity``'s
        whole dynamic layer (``DEFAULT_ENTITY`` or this broker's id): every key
        dynamic, every value one its key accepts, and the result a valid
        broker configuration."""

        def refuse(names: list[str], why: str) -> None:
            if names:
                # Kafka's messages, naming the keys as its Scala Set prints them.
                raise InvalidConfigurationError(f"{why}: Set({', '.join(sorted(names))})")

        unprefixed = _SSL_FILE_KEYS | _SSL_PASSWORD_KEYS
        refuse([k for k in configs if not _is_dynamic(k) and k not in unprefixed],
               "Cannot update these configs dynamically")  # fmt: skip
        refuse([k for k in configs if k in unprefixed],
               "These security configs can be dynamically updated only per-listener using "
               "the listener prefix")  # fmt: skip
        listener_keys = [
            k for k in configs if listener_ssl_key(k) is not None or listener_sasl_key(k)
        ]
        if entity == DEFAULT_ENTITY:
            refuse(listener_keys, "Cannot update these configs at default cluster level, "
                   "broker id must be specified")  # fmt: skip
        if self.password_encoder is None and any(is_password_config(k) for k in configs):
            raise InvalidConfigurationError("Password encoder secret not configured")
        socket_keys = [k for k in configs if listener_socket_key(k) is not None]
        for k in [*listener_keys, *socket_keys]:
            listener = (
                listener_ssl_key(k) or listener_sasl_key(k) or listener_socket_key(k) or ("", "")
            )[0]
            if self.static.listener(listener) is None:
                raise InvalidConfigurationError(f"Invalid listener name in {k}: no listener "
                                                f"is named {listener}")  # fmt: skip
        for k in socket_keys:
            # Kafka's ListenerConnectionQuota.validateReconfiguration: above 0.
            try:
                value = int(str(configs[k]).strip())
            except ValueError:
                raise InvalidConfigurationError(
                    f"Invalid value {configs[k]} for configuration {k}: Not a number of type INT"
                ) from None
            if value <= 0:
                raise InvalidConfigurationError(
                    f"Invalid {(listener_socket_key(k) or ('', k))[1]} {value}"
                )
        with self._lock:
            default, broker = dict(self._default), dict(self._per_broker)
            validators = list(self._validators)
        if entity == DEFAULT_ENTITY:
            default = dict(configs)
        else:
            broker = dict(configs)
        new = self._build(default, broker)
        for check in validators:
            check(new)

    def _build(self, default: Mapping[str, str], broker: Mapping[str, str]) -> KafkaConfig:
        merged: dict[str, object] = {**self.static.originals, **default, **broker}
        built = KafkaConfig.from_props(merged)
        # The id and the bound ports found at start-up stay the running broker's.
        return dataclasses.replace(
            built,
            broker_id=self.static.broker_id,
            listeners=self.static.listeners,
            advertised_listeners=self.static.advertised_listeners,
        )

    # ------------------------------------------------------------------ changes

    def update(self, entity: str, configs: Mapping[str, str]) -> None:
        """``entity``'s dynamic layer is now ``configs`` (as the metadata store
        holds it): rebuild the configuration and reconfigure. Keys pylog does
        not treat as dynamic (written by another tool) are left out with a
        warning, as Kafka ignores them; a value that does not parse leaves the
        layer as it was."""
        wanted = {k: v for k, v in self.from_persistent(configs).items() if _is_dynamic(k)}
        if len(wanted) != len(configs):
            _log.warning(
                "dynamic config of %s: ignoring keys that are not dynamic: %s",
                entity,
                ", ".join(sorted(set(configs) - set(wanted))),
            )
        with self._lock:
            default, broker = dict(self._default), dict(self._per_broker)
            if entity == DEFAULT_ENTITY:
                default = wanted
            else:
                broker = wanted
            try:
                new = self._build(default, broker)
            except InvalidConfigurationError as e:
                _log.error("dynamic config of %s not applied: %s", entity, e)
                return
            old = self._current
            self._default, self._per_broker, self._current = default, broker, new
            reconfigurables = list(self._reconfigurables)
        changed = sorted(k for k in DYNAMIC_BROKER_CONFIGS if old.get(k) != new.get(k))
        # A keystore or truststore named again is read again, changed or not:
        # rotating a certificate in place is how operators renew it (Kafka's
        # ReloadableFileConfigs).
        changed += sorted(k for k in {**default, **broker} if listener_ssl_key(k) is not None)
        changed += sorted(
            k
            for k in {**old.originals, **new.originals}
            if (listener_socket_key(k) is not None or listener_sasl_key(k) is not None)
            and old.originals.get(k) != new.originals.get(k)
        )
        if not changed:
            return
        _log.info("dynamic config of %s: %s", entity,
                  ", ".join(f"{k}={new.describe().get(k, '')}" for k in changed))  # fmt: skip
        for name, reconfigure in reconfigurables:
            try:
                reconfigure(old, new)
            except Exception:
                # One component failing to follow must not stop the others.
                _log.exception("reconfiguring %s failed", name)

    def source_layers(self, name: str) -> list[tuple[int, str]]:
        """(ConfigSource id, value) of each dynamic layer holding ``name``,
        highest first (2 DYNAMIC_BROKER_CONFIG, 3 DYNAMIC_DEFAULT_BROKER_CONFIG)."""
        with self._lock:
            out = []
            if name in self._per_broker:
                out.append((2, self._per_broker[name]))
            if name in self._default:
                out.append((3, self._default[name]))
            return out
