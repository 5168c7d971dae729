"""Certificates and broker settings for the security tests, made fresh in a
temporary directory by each test session (never committed): a CA, the
broker's certificate (localhost, 127.0.0.1) and a client certificate, as PEM
(and PKCS12) files, with the cryptography package.

:func:`secure_listeners` gives the overrides of a broker with one listener of
each protocol — PLAINTEXT (for setting users up), SSL with mutual TLS,
SASL_PLAINTEXT with PLAIN, SASL_SSL with SCRAM-SHA-256/512 and PLAIN — each
on an ephemeral port; :func:`listener_ports` reads the bound ports from the
broker's start line."""

from __future__ import annotations

import datetime
import ipaddress
import re
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID

__all__ = [
    "ADMIN",
    "PLAIN_MODULE",
    "PLAIN_USERS",
    "SCRAM_MODULE",
    "Certs",
    "listener_ports",
    "make_certs",
    "secure_listeners",
]

#: PLAIN's users on the test broker (and the broker's own login).
PLAIN_USERS = {"admin": "admin-secret", "alice": "alice-secret"}
ADMIN = ("admin", "admin-secret")
KEY_PASSWORD = "key-secret"
STORE_PASSWORD = "store-secret"


@dataclass(frozen=True)
class Certs:
    dir: Path
    ca: Path  # the CA certificate (PEM): every truststore
    broker_keystore: Path  # PEM: encrypted key + certificate chain (ssl.key.password)
    broker_p12: Path  # the same as PKCS12 (STORE_PASSWORD)
    client_cert: Path  # client certificate chain (PEM), subject CN=alice,OU=eng,O=pylog
    client_key: Path  # its key (PEM, unencrypted)
    client_dn: str  # the subject as RFC 2253
    client_p12: Path  # client key and chain as PKCS12 (STORE_PASSWORD)
    client_keystore: Path  # client key (unencrypted) + chain in one PEM file: Java's ssl.keystore


def _name(**parts: str) -> x509.Name:
    oids = {"CN": NameOID.COMMON_NAME, "OU": NameOID.ORGANIZATIONAL_UNIT_NAME,
            "O": NameOID.ORGANIZATION_NAME, "C": NameOID.COUNTRY_NAME}  # fmt: skip
    return x509.Name([x509.NameAttribute(oids[k], v) for k, v in parts.items()])


def _cert(
    subject: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Name,
    issuer_key: ec.EllipticCurvePrivateKey,
    *,
    ca: bool = False,
    san: list[x509.GeneralName] | None = None,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.timezone.utc)
    b = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if san:
        b = b.add_extension(x509.SubjectAlternativeName(san), critical=False)
    return b.sign(issuer_key, hashes.SHA256())


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def make_certs(directory: Path) -> Certs:
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name(CN="pylog-test-ca", O="pylog")
    ca = _cert(ca_name, ca_key, ca_name, ca_key, ca=True)
    broker_key = ec.generate_private_key(ec.SECP256R1())
    broker = _cert(
        _name(CN="localhost", O="pylog"),
        broker_key,
        ca_name,
        ca_key,
        san=[x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))],
    )
    client_key = ec.generate_private_key(ec.SECP256R1())
    client = _cert(_name(O="pylog", OU="eng", CN="alice"), client_key, ca_name, ca_key)

    (directory / "ca.pem").write_bytes(_pem(ca))
    encrypted = broker_key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(KEY_PASSWORD.encode()),
    )
    (directory / "broker.keystore.pem").write_bytes(encrypted + _pem(broker) + _pem(ca))
    (directory / "broker.p12").write_bytes(
        pkcs12.serialize_key_and_certificates(
            b"broker",
            broker_key,
            broker,
            [ca],
            serialization.BestAvailableEncryption(STORE_PASSWORD.encode()),
        )
    )
    (directory / "client.pem").write_bytes(_pem(client) + _pem(ca))
    (directory / "client.key").write_bytes(
        client_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    (directory / "client.keystore.pem").write_bytes(
        (directory / "client.key").read_bytes() + (directory / "client.pem").read_bytes()
    )
    (directory / "client.p12").write_bytes(
        pkcs12.serialize_key_and_certificates(
            b"alice",
            client_key,
            client,
            [ca],
            serialization.BestAvailableEncryption(STORE_PASSWORD.encode()),
        )
    )
    return Certs(
        dir=directory,
        ca=directory / "ca.pem",
        broker_keystore=directory / "broker.keystore.pem",
        broker_p12=directory / "broker.p12",
        client_cert=directory / "client.pem",
        client_key=directory / "client.key",
        client_dn="CN=alice,OU=eng,O=pylog",
        client_p12=directory / "client.p12",
        client_keystore=directory / "client.keystore.pem",
    )


def _jaas(module: str, **options: str) -> str:
    opts = " ".join(f'{k}="{v}"' for k, v in options.items())
    return f"{module} required {opts};"


PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


def plain_jaas(users: dict[str, str] = PLAIN_USERS, login: tuple[str, str] = ADMIN) -> str:
    return _jaas(
        PLAIN_MODULE,
        username=login[0],
        password=login[1],
        **{f"user_{u}": p for u, p in users.items()},
    )


def secure_listeners(certs: Certs, **extra: object) -> dict[str, object]:
    """Overrides for a broker with PLAINTEXT, SSL (mutual TLS), SASL_PLAINTEXT
    (PLAIN) and SASL_SSL (SCRAM-SHA-256/512, PLAIN) listeners, ports 0."""
    return {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,"
        "SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs.broker_keystore),
        "ssl.key.password": KEY_PASSWORD,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs.ca),
        "listener.name.ssl.ssl.client.auth": "required",
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]*),.*$/$1/L,DEFAULT",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas(),
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": plain_jaas(),
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": _jaas(
            SCRAM_MODULE, username="admin", password="admin-secret"
        ),
        "sasl.enabled.mechanisms": "PLAIN",
        "connection.failed.authentication.delay.ms": 100,
        **extra,
    }


_START = re.compile(r"([A-Z_]+)://127\.0\.0\.1:(\d+)")


def listener_ports(start_line: str) -> dict[str, int]:
    """Listener name → bound port, from ``pylog broker ... started: ...``."""
    return {name: int(port) for name, port in _START.findall(start_line)}
