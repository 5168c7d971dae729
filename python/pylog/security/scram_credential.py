"""ScramCredential: what a broker stores for a SCRAM user, never the password.

RFC 5802: SaltedPassword = Hi(password, salt, iterations) (PBKDF2-HMAC);
StoredKey = H(HMAC(SaltedPassword, "Client Key")); ServerKey =
HMAC(SaltedPassword, "Server Key"). The broker keeps salt, StoredKey,
ServerKey and the iteration count — enough to check a client's proof and
sign the server's answer, not enough to log in as the user.

Kafka's string form (``/config/users/<user>`` in ZooKeeper, one key per
mechanism; the embedded store of a lone broker keeps the same string)::

    SCRAM-SHA-512 = salt=<base64>,stored_key=<base64>,server_key=<base64>,iterations=4096

AlterUserScramCredentials carries the salt and the *salted* password (the
client salts it), from which :meth:`ScramCredential.from_salted_password`
derives the keys. Passwords are UTF-8 encoded as Kafka's ScramFormatter does
(no SASLprep).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
from dataclasses import dataclass

from pylog.security.scram_mechanism import ScramMechanism

__all__ = ["ScramCredential", "salted_password"]


def salted_password(
    mechanism: ScramMechanism, password: str, salt: bytes, iterations: int
) -> bytes:
    """Hi(password, salt, i) of RFC 5802: PBKDF2 with HMAC of the mechanism's hash."""
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode("utf-8"), salt, iterations)


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @classmethod
    def from_salted_password(
        cls, mechanism: ScramMechanism, salt: bytes, salted: bytes, iterations: int
    ) -> ScramCredential:
        client_key = hmac.digest(salted, b"Client Key", mechanism.hash_name)
        return cls(
            salt=salt,
            stored_key=hashlib.new(mechanism.hash_name, client_key).digest(),
            server_key=hmac.digest(salted, b"Server Key", mechanism.hash_name),
            iterations=iterations,
        )

    @classmethod
    def from_password(
        cls,
        mechanism: ScramMechanism,
        password: str,
        iterations: int,
        salt: bytes | None = None,
    ) -> ScramCredential:
        """A new credential (a random 32-byte salt unless given)."""
        salt = os.urandom(32) if salt is None else salt
        return cls.from_salted_password(
            mechanism, salt, salted_password(mechanism, password, salt, iterations), iterations
        )

    def to_string(self) -> str:
        """Kafka's ``ScramCredentialUtils.credentialToString`` form."""
        b64 = base64.b64encode
        return (
            f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
            f"server_key={b64(self.server_key).decode()},iterations={self.iterations}"
        )

    @classmethod
    def from_string(cls, text: str) -> ScramCredential:
        """The string form back; ValueError when a field is missing or malformed."""
        fields: dict[str, str] = {}
        for part in text.split(","):
            name, sep, value = part.partition("=")
            if not sep:
                raise ValueError("a SCRAM credential field is not name=value")
            fields[name.strip()] = value.strip()
        try:
            return cls(
                salt=base64.b64decode(fields["salt"], validate=True),
                stored_key=base64.b64decode(fields["stored_key"], validate=True),
                server_key=base64.b64decode(fields["server_key"], validate=True),
                iterations=int(fields["iterations"]),
            )
        except (KeyError, ValueError, binascii.Error) as e:
            raise ValueError(f"not a SCRAM credential: {e}") from None
