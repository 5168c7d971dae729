"""ScramSaslServer: SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677) on the
broker, as Kafka's ScramSaslServer speaks it.

Two exchanges. The client-first message ``n,[a=<authzid>],n=<user>,r=<nonce>``
(no channel binding: only the ``n`` GS2 flag; user names escape ``,`` and
``=`` as ``=2C`` and ``=3D``; extensions after the nonce are ignored) is
answered with server-first, ``r=<client nonce><server nonce>,s=<salt>,i=<iterations>``
from the user's stored credential. The client-final message
``c=<base64 GS2 header>,r=<nonce>,p=<proof>`` must repeat the GS2 header, carry
a nonce ending with the one server-first gave (Kafka's check; librdkafka 2.0,
which Debian's kcat uses, sends the client nonce before it), and prove the
password: H(proof XOR HMAC(StoredKey, AuthMessage)) = StoredKey. The answer is
server-final, ``v=<HMAC(ServerKey, AuthMessage)>``, so the client knows the
broker holds the credential too.

Every failure — unknown user, wrong proof, nonce mismatch, malformed message,
a credential below 4096 iterations, delegation tokens (``tokenauth``, not
served) — gives the client Kafka's generic "invalid credentials" message;
only an authorization id other than the user name is named, as Kafka names
it. The log line says which it was, never a secret.

Why not the ``scramp`` library here (it does serve SCRAM, and pylog uses its
client for inter-broker logins): its server requires the client-final nonce
to equal server-first's, which refuses librdkafka 2.0's logins that Kafka
accepts, refuses an authorization id even when it is the user name, and
SASLprep-normalises user names, which Kafka does not.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable

from pylog.logsafe import quoted
from pylog.security.sasl_server import SaslAuthenticationError
from pylog.security.scram_credential import ScramCredential
from pylog.security.scram_mechanism import ScramMechanism

__all__ = ["ScramSaslServer", "sasl_name_to_user"]

# RFC 5802's grammar as Kafka's ScramMessages reads it (ASCII; ``,`` ends a field).
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_VALUE = r"[\x01-\x2b\x2d-\x7f]+"
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"
_BASE64 = r"(?:[A-Za-z0-9/+]{4})*(?:[A-Za-z0-9/+]{3}=|[A-Za-z0-9/+]{2}==)?"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"
_CLIENT_FIRST = re.compile(
    rf"(?P<gs2>n,(?:a=(?P<authzid>{_SASLNAME}))?,)(?P<bare>(?:m={_VALUE},)?"
    rf"n=(?P<name>{_SASLNAME}),r=(?P<nonce>{_PRINTABLE})(?P<ext>{_EXTENSIONS}))"
)
_CLIENT_FINAL = re.compile(
    rf"(?P<without_proof>c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS})"
    rf",p=(?P<proof>{_BASE64})"
)


def sasl_name_to_user(name: str) -> str:
    """A SCRAM ``saslname`` as the user name (``=2C`` → ``,``, ``=3D`` → ``=``)."""
    return name.replace("=2C", ",").replace("=3D", "=")


class ScramSaslServer:
    def __init__(
        self,
        mechanism: ScramMechanism,
        credential: Callable[[str, ScramMechanism], ScramCredential | None],
    ) -> None:
        self.mechanism = mechanism.mechanism_name
        self._mech = mechanism
        self._credential = credential
        self._user: str | None = None
        self._gs2 = ""
        self._first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._cred: ScramCredential | None = None
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

    def _fail(self, reason: str) -> SaslAuthenticationError:
        who = f" for user {quoted(self._user)}" if self._user is not None else ""
        self._cred = None
        return SaslAuthenticationError(f"{reason}{who}")

    def evaluate(self, token: bytes) -> bytes:
        try:
            text = token.decode("ascii")
        except UnicodeDecodeError:
            raise self._fail("a SCRAM message that is not ASCII") from None
        if self._step == 0:
            self._step = 1
            return self._client_first(text)
        if self._step == 1:
            self._step = 2
            return self._client_final(text)
        raise self._fail("a SCRAM message after the exchange ended")

    def _client_first(self, text: str) -> bytes:
        m = _CLIENT_FIRST.fullmatch(text)
        if m is None:
            raise self._fail("a malformed client-first message")
        self._user = user = sasl_name_to_user(m["name"])
        if "=" in m["name"].replace("=2C", "").replace("=3D", ""):
            raise self._fail("a malformed user name")
        extensions = dict(part.split("=", 1) for part in m["ext"].split(",")[1:])
        if extensions.get("tokenauth", "").lower() == "true":
            raise self._fail("a delegation-token login (not supported)")
        cred = self._credential(user, self._mech)
        if cred is None:
            raise self._fail("unknown user")
        authzid = m["authzid"]
        if authzid and sasl_name_to_user(authzid) != user:
            raise SaslAuthenticationError(
                f"user {quoted(user)} asked to act as {quoted(sasl_name_to_user(authzid))}",
                "Authentication failed: Client requested an authorization id that is "
                "different from username",
            )
        if cred.iterations < self._mech.min_iterations:
            raise self._fail(
                f"a stored credential of {cred.iterations} iterations "
                f"(below {self._mech.min_iterations})"
            )
        self._cred = cred
        self._gs2 = m["gs2"]
        self._first_bare = m["bare"]
        self._nonce = m["nonce"] + secrets.token_urlsafe(24)
        salt = base64.b64encode(cred.salt).decode("ascii")
        self._server_first = f"r={self._nonce},s={salt},i={cred.iterations}"
        return self._server_first.encode("ascii")

    def _client_final(self, text: str) -> bytes:
        cred = self._cred
        if cred is None:
            raise self._fail("a client-final message before client-first")
        m = _CLIENT_FINAL.fullmatch(text)
        if m is None:
            raise self._fail("a malformed client-final message")
        try:
            channel = base64.b64decode(m["channel"], validate=True)
            proof = base64.b64decode(m["proof"], validate=True)
        except (binascii.Error, ValueError):
            raise self._fail("a malformed client-final message") from None
        if channel != self._gs2.encode("ascii"):
            raise self._fail("a channel-binding field that does not repeat the GS2 header")
        if not m["nonce"].endswith(self._nonce):
            raise self._fail("a nonce mismatch")
        auth_message = f"{self._first_bare},{self._server_first},{m['without_proof']}".encode(
            "ascii"
        )
        name = self._mech.hash_name
        signature = hmac.digest(cred.stored_key, auth_message, name)
        if len(proof) != len(signature):
            raise self._fail("wrong password (a client proof of the wrong length)")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(name, client_key).digest(), cred.stored_key):
            raise self._fail("wrong password (invalid client proof)")
        server_signature = hmac.digest(cred.server_key, auth_message, name)
        self._complete = True
        self._cred = None
        return b"v=" + base64.b64encode(server_signature)
