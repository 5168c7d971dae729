"""Security: who a connection is, and how it proves it.

TLS contexts from Kafka's ``ssl.*`` keys (``ssl_factory``), the principal
(``kafka_principal``; a client certificate's DN mapped by
``ssl.principal.mapping.rules``: ``ssl_principal_mapper``), SASL on the
server (``sasl_server_authenticator`` driving the PLAIN and SCRAM servers;
``credential_cache`` holding the SCRAM credentials the metadata store keeps)
and on the client side of inter-broker connections
(``sasl_client_authenticator``), and ``sasl.jaas.config`` text
(``jaas_config``). Below the network layer, which runs the authenticators,
and the metadata layer, which stores the credentials; it knows no socket.
"""

from pylog.security.credential_cache import CredentialCache
from pylog.security.jaas_config import JaasConfig
from pylog.security.kafka_principal import ANONYMOUS, KafkaPrincipal
from pylog.security.sasl_client_authenticator import ClientSecurity
from pylog.security.sasl_server_authenticator import (
    SASL_MECHANISMS,
    SaslServerAuthenticator,
    SaslServerConfig,
)
from pylog.security.scram_credential import ScramCredential
from pylog.security.scram_mechanism import ScramMechanism
from pylog.security.ssl_factory import SslConfig, client_context, server_context
from pylog.security.ssl_principal_mapper import SslPrincipalMapper, rfc2253_name

__all__ = [
    "ANONYMOUS",
    "SASL_MECHANISMS",
    "ClientSecurity",
    "CredentialCache",
    "JaasConfig",
    "KafkaPrincipal",
    "SaslServerAuthenticator",
    "SaslServerConfig",
    "ScramCredential",
    "ScramMechanism",
    "SslConfig",
    "SslPrincipalMapper",
    "client_context",
    "rfc2253_name",
    "server_context",
]
