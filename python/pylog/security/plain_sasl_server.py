"""PlainSaslServer: SASL/PLAIN (RFC 4616) against the broker's configured users.

The client's one token is ``[authzid] NUL authcid NUL passwd`` (UTF-8). The
users are the ``user_<name>="<password>"`` options of the listener's
``listener.name.<l>.plain.sasl.jaas.config`` (Kafka's PlainLoginModule).
Passwords are compared in constant time, and the messages the client gets are
Kafka's PlainSaslServer's. PLAIN sends the password itself: use it over
SASL_SSL, or on a network you trust.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from pylog.logsafe import quoted
from pylog.security.sasl_server import SaslAuthenticationError

__all__ = ["PlainSaslServer"]


class PlainSaslServer:
    mechanism = "PLAIN"

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self._authorization_id: str | None = None

    @property
    def complete(self) -> bool:
        return self._authorization_id is not None

    @property
    def authorization_id(self) -> str:
        if self._authorization_id is None:
            raise RuntimeError("the PLAIN exchange is not complete")
        return self._authorization_id

    def evaluate(self, token: bytes) -> bytes:
        if self.complete:
            raise SaslAuthenticationError("a PLAIN token after the exchange completed")
        parts = token.decode("utf-8", errors="replace").split("\0")
        if len(parts) != 3:
            message = f"Invalid SASL/PLAIN response: expected 3 tokens, got {min(len(parts), 4)}"
            raise SaslAuthenticationError("a malformed PLAIN token", message)
        authzid, username, password = parts
        if not username:
            raise SaslAuthenticationError(
                "no user name", "Authentication failed: username not specified"
            )
        if not password:
            raise SaslAuthenticationError(
                f"no password for user {quoted(username)}",
                "Authentication failed: password not specified",
            )
        expected = self._users.get(username)
        # Compare something even for an unknown user: the answer takes as long.
        good = hmac.compare_digest(
            password.encode("utf-8"), (expected if expected is not None else "\0").encode("utf-8")
        )
        if expected is None or not good:
            why = "unknown user" if expected is None else "wrong password"
            raise SaslAuthenticationError(
                f"{why} {quoted(username)}", "Authentication failed: Invalid username or password"
            )
        if authzid and authzid != username:
            raise SaslAuthenticationError(
                f"user {quoted(username)} asked to act as {quoted(authzid)}",
                "Authentication failed: Client requested an authorization id that is "
                "different from username",
            )
        self._authorization_id = username
        return b""
