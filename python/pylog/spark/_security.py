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

from pylog.security.client_properties import ClientPropertyError, client_security_from
from pylog.security.sasl_client_authenticator import ClientSecurity

__all__ = ["SECURITY_OPTIONS", "SecurityOptionError", "client_security", "security_options"]

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
    try:
        return client_security_from(conf, where="kafka.ssl options", prefix="kafka.")
    except ClientPropertyError as e:
        raise SecurityOptionError(str(e)) from None
