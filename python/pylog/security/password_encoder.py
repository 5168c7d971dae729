"""PasswordEncoder: how a ZooKeeper-mode Kafka broker keeps a dynamic password
config (``listener.name.<l>.ssl.keystore.password``, …) in
``/config/brokers/<id>``: encrypted with ``password.encoder.secret``
(Kafka's ``org.apache.kafka.security.EncryptingPasswordEncoder``), so pylog
and Kafka brokers sharing the secret read each other's values.

The stored value is a comma-separated ``key:value`` map: ``keyFactoryAlgorithm``
(PBKDF2WithHmacSHA512 unless ``password.encoder.keyfactory.algorithm`` says
otherwise), ``cipherAlgorithm`` (``password.encoder.cipher.algorithm``,
AES/CBC/PKCS5Padding by default, or AES/GCM/NoPadding), ``keyLength`` (bits,
``password.encoder.key.length``, 128), ``iterations`` (4096), ``salt`` (256
random bytes, base64), ``initializationVector`` (base64; with GCM also
``authenticationTagLength``, 128), ``encryptedPassword`` (base64) and
``passwordLength`` (the password's length in Java characters, UTF-16 units,
checked after decryption). The key is PBKDF2 of the secret's UTF-8 bytes over
the salt. Decoding takes the algorithms from the stored map, not from the
configuration, so a value encoded with other settings still decodes.

AES needs the ``cryptography`` package (pylog's ``tls`` extra).
"""

from __future__ import annotations

import base64
import hashlib
import os

from pylog.errors import InvalidConfigurationError

__all__ = ["DEFAULT_CIPHER_ALGORITHM", "PasswordEncoder"]

DEFAULT_CIPHER_ALGORITHM = "AES/CBC/PKCS5Padding"
_GCM = "AES/GCM/NoPadding"
_KEY_FACTORIES = {
    "PBKDF2WithHmacSHA512": "sha512",
    "PBKDF2WithHmacSHA256": "sha256",
    "PBKDF2WithHmacSHA1": "sha1",
}
_SALT_BYTES = 256


def _java_length(text: str) -> int:
    """String.length() in Java: UTF-16 code units."""
    return len(text.encode("utf-16-le")) // 2


def _parse_csv_map(text: str) -> dict[str, str]:
    """Kafka's Csv.parseCsvMap: ``k:v`` entries split at their last colon."""
    out: dict[str, str] = {}
    for entry in (e.strip() for e in text.split(",")):
        if entry:
            key, _, value = entry.rpartition(":")
            out[key.strip()] = value.strip()
    return out


class PasswordEncoder:
    def __init__(
        self,
        secret: str,
        *,
        key_factory_algorithm: str | None = None,
        cipher_algorithm: str = DEFAULT_CIPHER_ALGORITHM,
        key_length: int = 128,
        iterations: int = 4096,
    ) -> None:
        self.secret = secret
        self.key_factory_algorithm = key_factory_algorithm or "PBKDF2WithHmacSHA512"
        self.cipher_algorithm = cipher_algorithm
        self.key_length = key_length
        self.iterations = iterations
        if self.key_factory_algorithm not in _KEY_FACTORIES:
            raise InvalidConfigurationError(
                f"Invalid value {self.key_factory_algorithm} for configuration "
                f"password.encoder.keyfactory.algorithm: one of {', '.join(_KEY_FACTORIES)}"
            )
        if cipher_algorithm not in (DEFAULT_CIPHER_ALGORITHM, _GCM):
            raise InvalidConfigurationError(
                f"Invalid value {cipher_algorithm} for configuration "
                f"password.encoder.cipher.algorithm: {DEFAULT_CIPHER_ALGORITHM} or {_GCM}"
            )

    def _key(self, factory: str, salt: bytes, iterations: int, key_length: int) -> bytes:
        digest = _KEY_FACTORIES.get(factory)
        if digest is None:
            raise InvalidConfigurationError(f"Unknown key factory algorithm {factory}")
        return hashlib.pbkdf2_hmac(
            digest, self.secret.encode("utf-8"), salt, iterations, dklen=key_length // 8
        )

    def encode(self, password: str) -> str:
        """``password`` encrypted, as the stored ``key:value`` map."""
        _require_cryptography()
        from cryptography.hazmat.primitives import padding
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        salt = os.urandom(_SALT_BYTES)
        key = self._key(self.key_factory_algorithm, salt, self.iterations, self.key_length)
        fields = {
            "keyFactoryAlgorithm": self.key_factory_algorithm,
            "cipherAlgorithm": self.cipher_algorithm,
            "keyLength": str(self.key_length),
            "salt": base64.b64encode(salt).decode(),
            "iterations": str(self.iterations),
        }
        plain = password.encode("utf-8")
        if self.cipher_algorithm == _GCM:
            iv = os.urandom(12)
            encrypted = AESGCM(key).encrypt(iv, plain, None)  # ciphertext || tag
            fields["authenticationTagLength"] = "128"
        else:
            iv = os.urandom(16)
            padder = padding.PKCS7(128).padder()
            data = padder.update(plain) + padder.finalize()
            enc = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
            encrypted = enc.update(data) + enc.finalize()
        fields["initializationVector"] = base64.b64encode(iv).decode()
        fields["encryptedPassword"] = base64.b64encode(encrypted).decode()
        fields["passwordLength"] = str(_java_length(password))
        return ",".join(f"{k}:{v}" for k, v in fields.items())

    def decode(self, encoded: str) -> str:
        """The password of a stored value; InvalidConfigurationError ("Password
        could not be decoded") with another secret or a damaged value."""
        _require_cryptography()
        from cryptography.hazmat.primitives import padding
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        try:
            p = _parse_csv_map(encoded)
            salt = base64.b64decode(p["salt"], validate=True)
            key = self._key(
                p.get("keyFactoryAlgorithm") or "PBKDF2WithHmacSHA512",
                salt,
                int(p["iterations"]),
                int(p["keyLength"]),
            )
            iv = base64.b64decode(p["initializationVector"], validate=True)
            encrypted = base64.b64decode(p["encryptedPassword"], validate=True)
            cipher = p["cipherAlgorithm"]
            if cipher == _GCM:
                if int(p.get("authenticationTagLength", "128")) != 128:
                    raise ValueError("only 128-bit GCM tags are supported")
                plain = AESGCM(key).decrypt(iv, encrypted, None)
            elif cipher == DEFAULT_CIPHER_ALGORITHM:
                dec = Cipher(algorithms.AES(key), modes.CBC(iv)).decryptor()
                data = dec.update(encrypted) + dec.finalize()
                unpadder = padding.PKCS7(128).unpadder()
                plain = unpadder.update(data) + unpadder.finalize()
            else:
                raise ValueError(f"unsupported cipher algorithm {cipher}")
            password = plain.decode("utf-8")
        except InvalidConfigurationError:
            raise
        except Exception as e:  # a wrong secret fails the padding or the tag
            raise InvalidConfigurationError(
                f"Password could not be decoded: {e or type(e).__name__}"
            ) from None
        if _java_length(password) != int(p["passwordLength"]):
            raise InvalidConfigurationError(
                "Password could not be decoded, sanity check of length failed"
            )
        return password


def _require_cryptography() -> None:
    try:
        import cryptography  # noqa: F401
    except ImportError:
        raise InvalidConfigurationError(
            "dynamic password configs are encrypted with AES, which needs the cryptography "
            "package: pip install 'pylog-broker[tls]'"
        ) from None
