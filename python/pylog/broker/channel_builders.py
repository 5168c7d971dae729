"""ChannelBuilders: each listener's security from the broker's configuration,
and the security of the broker's own connections to other brokers.

Kafka's ``ChannelBuilders``. For every listener of ``listeners``, by its
protocol in ``listener.security.protocol.map``:

* SSL, SASL_SSL: a TLS server context from the ``ssl.*`` keys, each read as
  ``listener.name.<listener>.ssl.*`` first (:class:`~pylog.security.SslConfig`),
  and the ``ssl.principal.mapping.rules`` that name certificate holders;
* SASL_PLAINTEXT, SASL_SSL: ``sasl.enabled.mechanisms`` (PLAIN,
  SCRAM-SHA-256, SCRAM-SHA-512), PLAIN's users from
  ``listener.name.<listener>.plain.sasl.jaas.config``, the SCRAM credentials
  from the metadata store, ``connections.max.reauth.ms`` (also per
  mechanism), ``connection.failed.authentication.delay.ms`` and
  ``sasl.server.max.receive.size``.

The inter-broker side (:func:`inter_broker_security`) follows
``inter.broker.listener.name``'s protocol: the TLS client context of that
listener's ``ssl.*`` keys (the truststore checks the other broker), and on
SASL ``sasl.mechanism.inter.broker.protocol`` with the ``username`` and
``password`` of that listener's JAAS configuration for the mechanism.

Everything here raises InvalidConfigurationError naming the key (never a
secret) at start-up, not at the first connection.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable

from pylog.errors import InvalidConfigurationError
from pylog.network.socket_server import ListenerSpec
from pylog.security.jaas_config import PLAIN_LOGIN_MODULE, SCRAM_LOGIN_MODULE, JaasConfig
from pylog.security.sasl_client_authenticator import ClientSecurity
from pylog.security.sasl_server_authenticator import SASL_MECHANISMS, SaslServerConfig
from pylog.security.scram_credential import ScramCredential
from pylog.security.scram_mechanism import ScramMechanism
from pylog.security.ssl_factory import SslConfig, client_context, server_context
from pylog.security.ssl_principal_mapper import SslPrincipalMapper
from pylog.server.config import EndPoint, KafkaConfig

__all__ = ["inter_broker_security", "listener_sasl_configs", "listener_specs"]

Credentials = Callable[[str, ScramMechanism], "ScramCredential | None"]


def _ssl_config(config: KafkaConfig, listener: str) -> SslConfig:
    return SslConfig.from_getter(
        f"listener {listener}", lambda key: config.listener_get(listener, key)
    )


def listener_ssl_context(config: KafkaConfig, listener: str) -> ssl.SSLContext:
    """The TLS server context of an SSL / SASL_SSL listener, as ``config`` has it now."""
    return server_context(_ssl_config(config, listener))


def _jaas(config: KafkaConfig, listener: str, mechanism: str) -> JaasConfig | None:
    key = f"{mechanism.lower()}.sasl.jaas.config"
    text = config.listener_get(listener, key)
    if text is None:
        return None
    full = f"listener.name.{listener.lower()}.{key}"
    try:
        return JaasConfig.parse(str(text), full)
    except ValueError as e:
        raise InvalidConfigurationError(f"Invalid value for configuration {e}") from None


def _mechanisms(config: KafkaConfig, listener: str) -> tuple[str, ...]:
    mechanisms = tuple(config.listener_get(listener, "sasl.enabled.mechanisms") or ())
    unknown = [m for m in mechanisms if m not in SASL_MECHANISMS]
    if not mechanisms or unknown:
        what = (
            "GSSAPI (Kerberos) is not supported"
            if "GSSAPI" in unknown
            else f"{', '.join(unknown) or 'none'} is not a mechanism pylog serves"
        )
        raise InvalidConfigurationError(
            f"listener {listener} uses SASL but sasl.enabled.mechanisms is "
            f"{','.join(mechanisms) or 'empty'}: {what}; set it (or "
            f"listener.name.{listener.lower()}.sasl.enabled.mechanisms) to any of "
            f"{', '.join(SASL_MECHANISMS)}"
        )
    return mechanisms


def _sasl_config(config: KafkaConfig, ep: EndPoint, credentials: Credentials) -> SaslServerConfig:
    listener = ep.listener_name
    mechanisms = _mechanisms(config, listener)
    plain_users: dict[str, str] = {}
    for mechanism in mechanisms:
        jaas = _jaas(config, listener, mechanism)
        module = PLAIN_LOGIN_MODULE if mechanism == "PLAIN" else SCRAM_LOGIN_MODULE
        key = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
        if jaas is not None and jaas.login_module != module:
            raise InvalidConfigurationError(
                f"Invalid value for configuration {key}: {mechanism} needs {module}"
            )
        if mechanism == "PLAIN":
            if jaas is None:
                raise InvalidConfigurationError(
                    f"listener {listener} enables PLAIN but {key} is not set: PLAIN's users "
                    f'are its user_<name>="<password>" options'
                )
            plain_users = jaas.plain_users()
    max_reauth = {
        m: int(config.listener_get(listener, f"{m.lower()}.connections.max.reauth.ms") or 0)
        for m in mechanisms
    }
    return SaslServerConfig(
        listener=listener,
        mechanisms=mechanisms,
        plain_users=plain_users,
        credentials=credentials,
        max_reauth_ms=max_reauth,
        failed_authentication_delay_ms=int(config.get("connection.failed.authentication.delay.ms")),
        max_receive_size=int(config.listener_get(listener, "sasl.server.max.receive.size")),
    )


def listener_sasl_configs(
    config: KafkaConfig, credentials: Credentials
) -> dict[str, SaslServerConfig]:
    """The SASL settings of every SASL_PLAINTEXT / SASL_SSL listener as
    ``config`` has them now (a dynamic JAAS text or mechanism list checked
    and applied: InvalidConfigurationError names the key, never the secret)."""
    return {
        ep.listener_name: _sasl_config(config, ep, credentials)
        for ep in config.listeners
        if ep.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")
    }


def listener_specs(config: KafkaConfig, credentials: Credentials) -> list[ListenerSpec]:
    """What the SocketServer binds, each listener with its security."""
    specs = []
    for ep in config.listeners:
        protocol = ep.security_protocol
        context = mapper = sasl = None
        if protocol in ("SSL", "SASL_SSL"):
            context = listener_ssl_context(config, ep.listener_name)
            rules = config.listener_get(ep.listener_name, "ssl.principal.mapping.rules")
            try:
                mapper = SslPrincipalMapper(rules)
            except ValueError as e:
                raise InvalidConfigurationError(
                    f"Invalid value {rules!r} for configuration ssl.principal.mapping.rules: {e}"
                ) from None
        if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
            sasl = _sasl_config(config, ep, credentials)
        specs.append(
            ListenerSpec(
                ep.listener_name,
                ep.bind_host,
                ep.port,
                protocol,
                ssl_context=context,
                principal_mapper=mapper,
                sasl=sasl,
            )
        )
    return specs


def inter_broker_security(config: KafkaConfig) -> ClientSecurity:
    """How this broker connects to the others' inter-broker listener."""
    listener = config.inter_broker_listener_name
    ep = config.listener(listener)
    protocol = ep.security_protocol if ep is not None else "PLAINTEXT"
    context = None
    if protocol in ("SSL", "SASL_SSL"):
        context = client_context(_ssl_config(config, listener))
    if protocol not in ("SASL_PLAINTEXT", "SASL_SSL"):
        return ClientSecurity(protocol, context)
    mechanism = str(config.get("sasl.mechanism.inter.broker.protocol"))
    if mechanism not in _mechanisms(config, listener):
        raise InvalidConfigurationError(
            f"sasl.mechanism.inter.broker.protocol {mechanism} is not enabled on the "
            f"inter-broker listener {listener} (sasl.enabled.mechanisms); brokers log in to "
            f"each other with it"
        )
    jaas = _jaas(config, listener, mechanism)
    key = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
    if jaas is None or "username" not in jaas.options or "password" not in jaas.options:
        raise InvalidConfigurationError(
            f"{key} must give the username and password this broker logs in to other "
            f"brokers with ({mechanism}, the inter-broker mechanism)"
        )
    return ClientSecurity(
        protocol,
        context,
        sasl_mechanism=mechanism,
        username=jaas.options["username"],
        password=jaas.options["password"],
    )
