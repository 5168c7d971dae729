"""ScramSaslServer: SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677) on the
broker, over the ``scramp`` library's server.

scramp (PyPI, MIT-0; also pg8000's SCRAM) parses the messages and checks
them: the GS2 header (no channel binding: Kafka has none), the client-first
message, the client-final message's channel-binding field, that its nonce is
the client's nonce followed by the server's (a mismatch fails), and the
client's proof against the stored key; it writes server-first
(``r=<nonce>,s=<salt>,i=<iterations>``) and server-final (``v=<signature>``).
It also refuses credentials of fewer than 4096 iterations, as Kafka does.

What this class adds is Kafka's behaviour around it: the credentials come
from the broker's store (:class:`~pylog.security.credential_cache.CredentialCache`),
and a failure answers the client with Kafka's messages — the generic
"invalid credentials" one for everything (unknown user, wrong proof, nonce
mismatch, malformed message) except an authorization id other than the user
name, which Kafka names. The log line says which it was.

Differences from Kafka's ScramSaslServer, each in what clients never send:
an authorization id equal to the user name (``n,a=alice,``) is refused like
any other (scramp allows none); SCRAM extensions (Kafka's ``tokenauth`` for
delegation tokens) are not supported; user names pass through SASLprep.
"""

from __future__ import annotations

from collections.abc import Callable

from scramp import ScramException
from scramp import ScramMechanism as _ScrampMechanism

from pylog.logsafe import quoted
from pylog.security.sasl_server import SaslAuthenticationError
from pylog.security.scram_credential import ScramCredential
from pylog.security.scram_mechanism import ScramMechanism

__all__ = ["ScramSaslServer"]

#: scramp's server-error names, as the log says them.
_REASONS = {
    "unknown-user": "unknown user",
    "invalid-proof": "wrong password (invalid client proof)",
    "invalid-encoding": "a malformed message",
    "channel-bindings-dont-match": "a channel-binding mismatch",
    "extensions-not-supported": "an unsupported extension",
    "invalid-username-encoding": "a malformed user name",
    "no-resources": "its credential could not be read",
}


class ScramSaslServer:
    def __init__(
        self,
        mechanism: ScramMechanism,
        credential: Callable[[str, ScramMechanism], ScramCredential | None],
    ) -> None:
        self.mechanism = mechanism.mechanism_name
        self._mech = mechanism
        self._credential = credential
        self._server = _ScrampMechanism(mechanism.mechanism_name).make_server(self._auth_info)
        self._user: str | None = None
        self._step = 0
        self._complete = False

    @property
    def complete(self) -> bool:
        return self._complete

    @property
    def authorization_id(self) -> str:
        if not self._complete or self._user is None:
            raise RuntimeError("the SCRAM exchange is not complete")
        return self._user

    def _auth_info(self, username: str) -> tuple[bytes, bytes, bytes, int] | None:
        self._user = username
        cred = self._credential(username, self._mech)
        if cred is None:
            return None
        return cred.salt, cred.stored_key, cred.server_key, cred.iterations

    def _failed(self, e: ScramException, step: str) -> SaslAuthenticationError:
        code = e.server_error.value if e.server_error is not None else ""
        reason = _REASONS.get(code)
        text = str(e.args[0]) if e.args else ""
        if reason is None:
            if "nonce" in text.lower():
                reason = "a nonce mismatch"
            elif "iteration" in text.lower():
                reason = f"a stored credential below {self._mech.min_iterations} iterations"
            else:
                reason = f"a malformed {step} message"
        user = f" for user {quoted(self._user)}" if self._user is not None else ""
        if "authzid" in text:
            return SaslAuthenticationError(
                f"an authorization id in the client-first message{user}",
                "Authentication failed: Client requested an authorization id that is "
                "different from username",
            )
        return SaslAuthenticationError(f"{reason}{user}")

    def evaluate(self, token: bytes) -> bytes:
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslAuthenticationError("a SCRAM message that is not UTF-8") from None
        if self._step == 0:
            self._step = 1
            try:
                self._server.set_client_first(text)
                return str(self._server.get_server_first()).encode("utf-8")
            except ScramException as e:
                raise self._failed(e, "client-first") from None
        if self._step == 1:
            self._step = 2
            try:
                self._server.set_client_final(text)
                final = str(self._server.get_server_final()).encode("utf-8")
            except ScramException as e:
                raise self._failed(e, "client-final") from None
            self._complete = True
            return final
        raise SaslAuthenticationError("a SCRAM message after the exchange completed")
