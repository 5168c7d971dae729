"""SslFactory: the TLS contexts of a listener (server) and of a broker's own
connections to other brokers (client), from Kafka's ``ssl.*`` keys.

Key material, as Kafka configures it:

* ``ssl.keystore.type=PEM``: ``ssl.keystore.location`` names one file holding
  the private key (PKCS#8, encrypted with ``ssl.key.password`` or not) and
  the certificate chain; or the same two inline, ``ssl.keystore.key`` and
  ``ssl.keystore.certificate.chain``;
* ``ssl.keystore.type=PKCS12``: a ``.p12`` file and its
  ``ssl.keystore.password`` (read with the ``cryptography`` package);
* ``ssl.truststore.type=PEM``: ``ssl.truststore.location`` (CA certificates)
  or ``ssl.truststore.certificates`` inline; PKCS12 as above. No truststore:
  the system's CAs.
* JKS (Kafka's default type) is Java's own format: refused, saying to use PEM
  or PKCS12. A keystore whose type is left at that default is read by what
  its file holds, so a PEM or PKCS12 file works without the type set.

``ssl.enabled.protocols`` (TLSv1.2,TLSv1.3) bounds the versions;
``ssl.client.auth`` none / requested / required asks for a client certificate
(mutual TLS), checked against the truststore. ``ssl.cipher.suites`` (Java's
suite names) is refused when set: OpenSSL names suites differently, and a
restriction silently dropped would be worse than an error.

Python's ``ssl`` loads keys only from files: inline or PKCS12 keys are written
to a file in a private temporary directory (mode 0700) just for the load,
then removed.
"""

from __future__ import annotations

import contextlib
import os
import ssl
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from pylog.errors import InvalidConfigurationError

__all__ = [
    "SSL_CLIENT_AUTH",
    "SSL_PROTOCOLS",
    "SslConfig",
    "client_context",
    "server_context",
]

SSL_CLIENT_AUTH = ("none", "requested", "required")
SSL_PROTOCOLS = {
    "TLSv1": ssl.TLSVersion.TLSv1,
    "TLSv1.1": ssl.TLSVersion.TLSv1_1,
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
_JKS_MAGIC = (b"\xfe\xed\xfe\xed", b"\xce\xce\xce\xce")  # JKS, JCEKS


@dataclass(frozen=True)
class SslConfig:
    """The ``ssl.*`` settings of one listener (prefixed keys already applied).
    ``where`` names them in errors (``listener SSL``)."""

    where: str = "ssl"
    keystore_type: str | None = None
    keystore_location: str | None = None
    keystore_password: str | None = None
    keystore_key: str | None = None
    keystore_certificate_chain: str | None = None
    key_password: str | None = None
    truststore_type: str | None = None
    truststore_location: str | None = None
    truststore_password: str | None = None
    truststore_certificates: str | None = None
    enabled_protocols: tuple[str, ...] = ("TLSv1.2", "TLSv1.3")
    client_auth: str = "none"
    cipher_suites: tuple[str, ...] = ()
    endpoint_identification_algorithm: str | None = "https"

    @classmethod
    def from_getter(cls, where: str, get: Callable[[str], Any]) -> SslConfig:
        """From Kafka's key names (``get("ssl.keystore.location")``)."""

        def s(name: str) -> str | None:
            value = get(name)
            return None if value is None or value == "" else str(value)

        return cls(
            where=where,
            keystore_type=s("ssl.keystore.type"),
            keystore_location=s("ssl.keystore.location"),
            keystore_password=s("ssl.keystore.password"),
            keystore_key=s("ssl.keystore.key"),
            keystore_certificate_chain=s("ssl.keystore.certificate.chain"),
            key_password=s("ssl.key.password"),
            truststore_type=s("ssl.truststore.type"),
            truststore_location=s("ssl.truststore.location"),
            truststore_password=s("ssl.truststore.password"),
            truststore_certificates=s("ssl.truststore.certificates"),
            enabled_protocols=tuple(get("ssl.enabled.protocols") or ("TLSv1.2", "TLSv1.3")),
            client_auth=str(get("ssl.client.auth") or "none").lower(),
            cipher_suites=tuple(get("ssl.cipher.suites") or ()),
            endpoint_identification_algorithm=s("ssl.endpoint.identification.algorithm"),
        )

    @property
    def has_keystore(self) -> bool:
        return bool(self.keystore_location or self.keystore_key)


def _error(cfg: SslConfig, message: str) -> InvalidConfigurationError:
    return InvalidConfigurationError(f"{cfg.where}: {message}")


def _read(cfg: SslConfig, key: str, path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise _error(cfg, f"cannot read {key} {path}: {e.strerror or e}") from None


def _kind(data: bytes) -> str:
    """What a key or trust store file holds: PEM, JKS or PKCS12 (DER)."""
    if data[:4] in _JKS_MAGIC:
        return "JKS"
    if b"-----BEGIN" in data[:4096]:
        return "PEM"
    return "PKCS12"


def _store_kind(cfg: SslConfig, key: str, declared: str | None, data: bytes) -> str:
    found = _kind(data)
    declared = (declared or "JKS").upper()
    if found == "JKS":
        raise _error(
            cfg,
            f"{key} is a Java KeyStore (JKS), which pylog cannot read: use PEM "
            f"({key.rsplit('.', 1)[0]}.type=PEM) or PKCS12 — convert with "
            "`keytool -importkeystore -srckeystore <file> -destkeystore <file>.p12 "
            "-deststoretype PKCS12`",
        )
    if declared in ("JKS", "JCEKS"):
        return found  # the type left at Kafka's default: the file says what it is
    if declared not in ("PEM", "PKCS12"):
        raise _error(cfg, f"{key.rsplit('.', 1)[0]}.type {declared} is not PEM or PKCS12")
    if declared != found:
        raise _error(cfg, f"{key} does not hold {declared} data")
    return declared


def _pkcs12(
    cfg: SslConfig, key: str, data: bytes, password: str | None
) -> tuple[Any, Any, list[Any]]:
    try:
        from cryptography.hazmat.primitives.serialization import pkcs12
    except ImportError:  # pragma: no cover - the test extra installs it
        raise _error(
            cfg,
            f"{key} is PKCS12, which needs the cryptography package "
            "(pip install cryptography); or use PEM",
        ) from None
    try:
        got = pkcs12.load_key_and_certificates(
            data, password.encode("utf-8") if password is not None else None
        )
    except ValueError as e:
        raise _error(cfg, f"cannot open the PKCS12 {key} (wrong password?): {e}") from None
    return got[0], got[1], list(got[2])


def _pem_certs(certs: list[Any]) -> bytes:
    from cryptography.hazmat.primitives.serialization import Encoding

    return b"".join(c.public_bytes(Encoding.PEM) for c in certs)


@contextlib.contextmanager
def _private_file(data: bytes) -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="pylog-ssl-") as d:
        path = os.path.join(d, "keystore.pem")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        try:
            yield path
        finally:
            os.unlink(path)


def _no_password() -> bytes:
    # Without this OpenSSL would prompt on the terminal for an encrypted key.
    return b""


def _load_keystore(cfg: SslConfig, ctx: ssl.SSLContext) -> None:
    key_password: str | Callable[[], bytes] = (
        cfg.key_password if cfg.key_password is not None else _no_password
    )
    try:
        if cfg.keystore_key or cfg.keystore_certificate_chain:
            if not (cfg.keystore_key and cfg.keystore_certificate_chain):
                raise _error(
                    cfg,
                    "ssl.keystore.key and ssl.keystore.certificate.chain go together",
                )
            pem = (
                cfg.keystore_key.strip().encode()
                + b"\n"
                + cfg.keystore_certificate_chain.strip().encode()
                + b"\n"
            )
            with _private_file(pem) as path:
                ctx.load_cert_chain(path, password=key_password)
            return
        assert cfg.keystore_location is not None
        data = _read(cfg, "ssl.keystore.location", cfg.keystore_location)
        kind = _store_kind(cfg, "ssl.keystore.location", cfg.keystore_type, data)
        if kind == "PEM":
            ctx.load_cert_chain(cfg.keystore_location, password=key_password)
            return
        key, cert, extra = _pkcs12(cfg, "ssl.keystore.location", data, cfg.keystore_password)
        if key is None or cert is None:
            raise _error(cfg, "the PKCS12 ssl.keystore.location holds no private key entry")
        from cryptography.hazmat.primitives.serialization import (
            Encoding,
            NoEncryption,
            PrivateFormat,
        )

        pem = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
        with _private_file(pem + _pem_certs([cert, *extra])) as path:
            ctx.load_cert_chain(path)
    except ssl.SSLError as e:
        raise _error(
            cfg,
            f"cannot load the keystore (its key, its certificate chain, or "
            f"ssl.key.password for an encrypted key): {e}",
        ) from None


def _load_truststore(cfg: SslConfig, ctx: ssl.SSLContext) -> None:
    try:
        if cfg.truststore_certificates:
            ctx.load_verify_locations(cadata=cfg.truststore_certificates)
        elif cfg.truststore_location:
            data = _read(cfg, "ssl.truststore.location", cfg.truststore_location)
            kind = _store_kind(cfg, "ssl.truststore.location", cfg.truststore_type, data)
            if kind == "PEM":
                ctx.load_verify_locations(cafile=cfg.truststore_location)
            else:
                _, cert, extra = _pkcs12(
                    cfg, "ssl.truststore.location", data, cfg.truststore_password
                )
                certs = ([cert] if cert is not None else []) + extra
                if not certs:
                    raise _error(cfg, "the PKCS12 ssl.truststore.location holds no certificate")
                ctx.load_verify_locations(cadata=_pem_certs(certs).decode("ascii"))
        else:
            ctx.load_default_certs(
                ssl.Purpose.CLIENT_AUTH
                if ctx.protocol == ssl.PROTOCOL_TLS_SERVER
                else ssl.Purpose.SERVER_AUTH
            )
    except ssl.SSLError as e:
        raise _error(cfg, f"cannot load the truststore: {e}") from None


def _protocols(cfg: SslConfig, ctx: ssl.SSLContext) -> None:
    versions = []
    for name in cfg.enabled_protocols:
        v = SSL_PROTOCOLS.get(name.strip())
        if v is None:
            raise _error(
                cfg,
                f"ssl.enabled.protocols {name!r} is not one of {', '.join(SSL_PROTOCOLS)}",
            )
        versions.append(v)
    if not versions:
        raise _error(cfg, "ssl.enabled.protocols is empty")
    ctx.minimum_version = min(versions)
    ctx.maximum_version = max(versions)
    if cfg.cipher_suites:
        raise _error(
            cfg,
            "ssl.cipher.suites is not supported (Java's suite names do not map to "
            "OpenSSL's); leave it unset to use OpenSSL's defaults for the enabled protocols",
        )


def server_context(cfg: SslConfig) -> ssl.SSLContext:
    """The context of an SSL or SASL_SSL listener; InvalidConfigurationError
    (naming the key, never a password) when it cannot be built."""
    if not cfg.has_keystore:
        raise _error(
            cfg,
            "an SSL listener needs a keystore: ssl.keystore.location (PEM or PKCS12), "
            "or ssl.keystore.key with ssl.keystore.certificate.chain",
        )
    if cfg.client_auth not in SSL_CLIENT_AUTH:
        raise _error(
            cfg, f"ssl.client.auth {cfg.client_auth!r} is not one of none, requested, required"
        )
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _protocols(cfg, ctx)
    ctx.options |= ssl.OP_NO_COMPRESSION
    _load_keystore(cfg, ctx)
    if cfg.client_auth != "none":
        _load_truststore(cfg, ctx)
        ctx.verify_mode = ssl.CERT_REQUIRED if cfg.client_auth == "required" else ssl.CERT_OPTIONAL
    return ctx


def client_context(cfg: SslConfig) -> ssl.SSLContext:
    """The context this broker connects to another broker's SSL listener with:
    the server checked against the truststore, its host name too when
    ``ssl.endpoint.identification.algorithm`` is https; the keystore, if any,
    is offered as the client certificate."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _protocols(cfg, ctx)
    _load_truststore(cfg, ctx)
    ctx.check_hostname = (cfg.endpoint_identification_algorithm or "").lower() == "https"
    if cfg.has_keystore:
        _load_keystore(cfg, ctx)
    return ctx
