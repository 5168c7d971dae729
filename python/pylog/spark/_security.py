"""The ``kafka.*`` security options of Spark's Kafka source, for every
connection the readers open to a broker (driver and executors).

Spark passes ``kafka.``-prefixed options to its Kafka consumer as they are,
so the names are the Java client's: ``kafka.security.protocol`` (PLAINTEXT,
SSL, SASL_PLAINTEXT, SASL_SSL), ``kafka.sasl.mechanism`` (PLAIN,
SCRAM-SHA-256, SCRAM-SHA-512), ``kafka.sasl.jaas.config`` (the login module's
``username`` and ``password``), ``kafka.ssl.truststore.location`` /
``.type`` / ``.password`` / ``.certificates``, ``kafka.ssl.keystore.*``,
``kafka.ssl.key.password`` and ``kafka.ssl.endpoint.identification.algorithm``;
librdkafka's ``kafka.ssl.ca.location``, ``kafka.ssl.certificate.location`` /
``kafka.ssl.key.location`` and ``kafka.sasl.username`` / ``kafka.sasl.password``
are taken too, as the same job's writer (confluent-kafka) takes them.

The options travel to executors as strings (an SSL context does not pickle):
each connection builds its :class:`ClientSecurity` from them. Nothing here
puts an option's value in a message: they hold passwords.
"""

from __future__ import annotations

from collections.abc import Mapping

from pylog.errors import KafkaError
from pylog.security.jaas_config import JaasConfig
from pylog.security.sasl_client_authenticator import ClientSecurity
from pylog.security.ssl_factory import SslConfig, client_context

__all__ = ["SECURITY_OPTIONS", "SecurityOptionError", "client_security", "security_options"]

_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
SECURITY_OPTIONS = (
    "kafka.security.protocol",
    "kafka.sasl.mechanism",
    "kafka.sasl.jaas.config",
    "kafka.sasl.username",
    "kafka.sasl.password",
    "kafka.ssl.truststore.location",
    "kafka.ssl.truststore.type",
    "kafka.ssl.truststore.password",
    "kafka.ssl.truststore.certificates",
    "kafka.ssl.ca.location",
    "kafka.ssl.keystore.location",
    "kafka.ssl.keystore.type",
    "kafka.ssl.keystore.password",
    "kafka.ssl.key.password",
    "kafka.ssl.certificate.location",
    "kafka.ssl.key.location",
    "kafka.ssl.endpoint.identification.algorithm",
)


class SecurityOptionError(ValueError):
    """A security option that cannot be used; raised at planning."""


def security_options(opts: Mapping[str, str]) -> dict[str, str]:
    """The security options among ``opts`` (lower-cased keys), checked: the
    protocol and mechanism known, SASL with a user and password. The
    context is built once here so a bad truststore fails at planning."""
    conf = {k: v for k, v in opts.items() if k in SECURITY_OPTIONS}
    client_security(conf)
    return conf


def client_security(conf: Mapping[str, str]) -> ClientSecurity:
    """The TLS and SASL settings of one connection, from :func:`security_options`."""
    protocol = conf.get("kafka.security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in _PROTOCOLS:
        raise SecurityOptionError(
            f"option 'kafka.security.protocol' must be one of {', '.join(_PROTOCOLS)}"
        )
    context = None
    if protocol.endswith("SSL"):
        pem_key = pem_chain = None
        cert, key = conf.get("kafka.ssl.certificate.location"), conf.get("kafka.ssl.key.location")
        if cert and key and not conf.get("kafka.ssl.keystore.location"):
            try:
                with open(key, encoding="ascii") as k, open(cert, encoding="ascii") as c:
                    pem_key, pem_chain = k.read(), c.read()
            except OSError as e:
                raise SecurityOptionError(
                    f"options 'kafka.ssl.certificate.location' / 'kafka.ssl.key.location': {e}"
                ) from None
        try:
            context = client_context(
                SslConfig(
                    where="kafka.ssl options",
                    keystore_type=conf.get("kafka.ssl.keystore.type"),
                    keystore_location=conf.get("kafka.ssl.keystore.location"),
                    keystore_password=conf.get("kafka.ssl.keystore.password"),
                    keystore_key=pem_key,
                    keystore_certificate_chain=pem_chain,
                    key_password=conf.get("kafka.ssl.key.password"),
                    truststore_type=conf.get("kafka.ssl.truststore.type"),
                    truststore_location=conf.get("kafka.ssl.truststore.location")
                    or conf.get("kafka.ssl.ca.location"),
                    truststore_password=conf.get("kafka.ssl.truststore.password"),
                    truststore_certificates=conf.get("kafka.ssl.truststore.certificates"),
                    # the Java client's default since Kafka 2.0 (KIP-294)
                    endpoint_identification_algorithm=conf.get(
                        "kafka.ssl.endpoint.identification.algorithm", "https"
                    ),
                )
            )
        except KafkaError as e:
            raise SecurityOptionError(str(e)) from None
    if not protocol.startswith("SASL_"):
        return ClientSecurity(protocol, context)
    mechanism = conf.get("kafka.sasl.mechanism", "GSSAPI").strip().upper()
    if mechanism not in _MECHANISMS:
        raise SecurityOptionError(
            f"option 'kafka.sasl.mechanism' must be one of {', '.join(_MECHANISMS)} "
            "(the Java client's default, GSSAPI, is not supported)"
        )
    username, password = conf.get("kafka.sasl.username"), conf.get("kafka.sasl.password")
    if "kafka.sasl.jaas.config" in conf:
        try:
            jaas = JaasConfig.parse(conf["kafka.sasl.jaas.config"], "kafka.sasl.jaas.config")
        except ValueError as e:
            raise SecurityOptionError(f"option {e}") from None
        username = jaas.options.get("username", username)
        password = jaas.options.get("password", password)
    if username is None or password is None:
        raise SecurityOptionError(
            f"{protocol} needs a user: option 'kafka.sasl.jaas.config' with username and "
            "password (or 'kafka.sasl.username' and 'kafka.sasl.password')"
        )
    return ClientSecurity(protocol, context, mechanism, username, password)
