"""A Kafka client's security properties turned into the TLS and SASL settings
of its connections (:class:`ClientSecurity`).

The keys are the Java client's (``security.protocol``, ``sasl.mechanism``,
``sasl.jaas.config``, ``ssl.truststore.*``, ``ssl.keystore.*``,
``ssl.key.password``, ``ssl.endpoint.identification.algorithm``), with
librdkafka's where they differ (``sasl.mechanisms``, ``sasl.username`` /
``sasl.password``, ``ssl.ca.location``, ``ssl.certificate.location`` /
``ssl.key.location``), under a prefix: none in a ``--command-config`` file,
``kafka.`` in Spark's Kafka-source options. One reading serves both, so a
file and a Spark job mean the same by the same key. No message here carries
a value: they hold passwords.
"""

from __future__ import annotations

from collections.abc import Mapping

from pylog.errors import KafkaError
from pylog.security.jaas_config import JaasConfig
from pylog.security.sasl_client_authenticator import ClientSecurity
from pylog.security.ssl_factory import SslConfig, client_context

__all__ = ["ClientPropertyError", "client_security_from"]

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


class ClientPropertyError(ValueError):
    """A security property that cannot be used; the message names the key."""


def client_security_from(
    props: Mapping[str, str],
    *,
    where: str,
    prefix: str = "",
    need_credentials: bool = True,
    default_mechanism: str | None = None,
) -> ClientSecurity:
    """The settings ``props`` ask for. ``where`` names the source in TLS
    errors; ``need_credentials`` False lets SASL go without a user (the
    console's sign-in supplies each person's); ``default_mechanism`` None
    makes an unnamed mechanism an error, as the Java client's default
    (GSSAPI) is not supported."""

    def get(key: str) -> str | None:
        return props.get(prefix + key)

    protocol = (get("security.protocol") or "PLAINTEXT").strip().upper()
    if protocol not in PROTOCOLS:
        raise ClientPropertyError(
            f"'{prefix}security.protocol' must be one of {', '.join(PROTOCOLS)}"
        )
    context = None
    if protocol.endswith("SSL"):
        pem_key = pem_chain = None
        cert, key = get("ssl.certificate.location"), get("ssl.key.location")
        if cert and key and not get("ssl.keystore.location"):
            try:
                with open(key, encoding="ascii") as k, open(cert, encoding="ascii") as c:
                    pem_key, pem_chain = k.read(), c.read()
            except OSError as e:
                raise ClientPropertyError(
                    f"'{prefix}ssl.certificate.location' / '{prefix}ssl.key.location': {e}"
                ) from None
        try:
            context = client_context(
                SslConfig(
                    where=where,
                    keystore_type=get("ssl.keystore.type"),
                    keystore_location=get("ssl.keystore.location"),
                    keystore_password=get("ssl.keystore.password"),
                    keystore_key=pem_key,
                    keystore_certificate_chain=pem_chain,
                    key_password=get("ssl.key.password"),
                    truststore_type=get("ssl.truststore.type"),
                    truststore_location=get("ssl.truststore.location") or get("ssl.ca.location"),
                    truststore_password=get("ssl.truststore.password"),
                    truststore_certificates=get("ssl.truststore.certificates"),
                    # the Java client's default since Kafka 2.0 (KIP-294); an
                    # empty value turns the host name check off
                    endpoint_identification_algorithm=props.get(
                        prefix + "ssl.endpoint.identification.algorithm", "https"
                    ),
                )
            )
        except KafkaError as e:
            raise ClientPropertyError(str(e)) from None
    if not protocol.startswith("SASL_"):
        return ClientSecurity(protocol, context)
    mechanism = get("sasl.mechanism") or get("sasl.mechanisms") or default_mechanism or "GSSAPI"
    mechanism = mechanism.strip().upper()
    if mechanism not in MECHANISMS:
        raise ClientPropertyError(
            f"'{prefix}sasl.mechanism' must be one of {', '.join(MECHANISMS)}"
            + (
                " (the Java client's default, GSSAPI, is not supported)"
                if mechanism == "GSSAPI"
                else ""
            )
        )
    username, password = get("sasl.username"), get("sasl.password")
    jaas_text = get("sasl.jaas.config")
    if jaas_text is not None:
        try:
            jaas = JaasConfig.parse(jaas_text, f"{prefix}sasl.jaas.config")
        except ValueError as e:
            raise ClientPropertyError(str(e)) from None
        username = jaas.options.get("username", username)
        password = jaas.options.get("password", password)
    if (username is None or password is None) and need_credentials:
        raise ClientPropertyError(
            f"{protocol} needs a user: '{prefix}sasl.jaas.config' with username and "
            f"password (or '{prefix}sasl.username' and '{prefix}sasl.password')"
        )
    return ClientSecurity(protocol, context, mechanism, username, password)
