"""KafkaPrincipal: who a connection authenticated as.

Kafka's ``KafkaPrincipal`` is a type and a name, written ``User:alice``; the
authorizer (``authorizer.class.name``, ACLs) and quotas match on that string.
What a connection's principal is follows Kafka's DefaultKafkaPrincipalBuilder:

* PLAINTEXT, and SSL without a client certificate: ``User:ANONYMOUS``;
* SSL with a client certificate: ``User:`` + the certificate's subject DN
  (RFC 2253) passed through ``ssl.principal.mapping.rules``;
* SASL_PLAINTEXT / SASL_SSL: ``User:`` + the SASL authorization id (the user
  name the client authenticated with).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ANONYMOUS", "USER_TYPE", "KafkaPrincipal"]

USER_TYPE = "User"


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    """``principal_type:name`` (``User:alice``); hashable, compared by both."""

    principal_type: str
    name: str

    @classmethod
    def user(cls, name: str) -> KafkaPrincipal:
        return cls(USER_TYPE, name)

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """``Type:name`` (the name may hold colons); ValueError without a type."""
        principal_type, sep, name = text.partition(":")
        if not sep or not principal_type:
            raise ValueError(f"expected a principal as Type:name, got {text!r}")
        return cls(principal_type, name)

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"


#: The principal of an unauthenticated connection (Kafka's KafkaPrincipal.ANONYMOUS).
ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")
