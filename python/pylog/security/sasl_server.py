"""The server side of one SASL exchange: the interface every mechanism's
server implements (Kafka's use of ``javax.security.sasl.SaslServer``), and the
error that ends an exchange.

A mechanism's server is fed the client's tokens in order
(:meth:`SaslServer.evaluate`) and answers each with a challenge; once
:attr:`SaslServer.complete`, :attr:`SaslServer.authorization_id` is the user
the connection's principal is made from. A failed exchange raises
:class:`SaslAuthenticationError`, which carries two texts: what the broker
logs (never a secret) and what the client is told — either a message Kafka
itself sends for that case, or (None) Kafka's generic "invalid credentials"
message, which reveals nothing about which part was wrong.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["SaslAuthenticationError", "SaslServer"]


class SaslAuthenticationError(Exception):
    """An exchange failed: ``reason`` for the log, ``client_message`` (None:
    Kafka's generic one) for the SaslAuthenticate response."""

    def __init__(self, reason: str, client_message: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.client_message = client_message


class SaslServer(Protocol):
    mechanism: str

    @property
    def complete(self) -> bool: ...

    @property
    def authorization_id(self) -> str:
        """The authenticated user (only once :attr:`complete`)."""
        ...

    def evaluate(self, token: bytes) -> bytes:
        """The challenge answering the client's ``token``; raises
        SaslAuthenticationError when the exchange fails."""
        ...
