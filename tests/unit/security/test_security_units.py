"""The security layer on its own: principal mapping rules, JAAS text, SCRAM
credentials in Kafka's string form, the SCRAM and PLAIN servers against an
independent SCRAM client (scramp's), the authenticator's states, TLS context
construction from Kafka's keys, and the broker's listener-prefixed keys."""

from __future__ import annotations

import base64
import ssl
from pathlib import Path

import pytest

from pylog.errors import ErrorCode, InvalidConfigurationError
from pylog.protocol import ApiKey, encode_request, parse_request_header
from pylog.protocol.codec import decode_response
from pylog.protocol.messages import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from pylog.security import (
    CredentialCache,
    JaasConfig,
    KafkaPrincipal,
    SaslServerAuthenticator,
    SaslServerConfig,
    ScramCredential,
    ScramMechanism,
    SslConfig,
    SslPrincipalMapper,
    rfc2253_name,
    server_context,
)
from pylog.security.plain_sasl_server import PlainSaslServer
from pylog.security.sasl_client_authenticator import SaslClient
from pylog.security.sasl_server import SaslAuthenticationError
from pylog.security.scram_sasl_server import ScramSaslServer
from pylog.security.ssl_principal_mapper import NoMatchingRule
from pylog.server.config import KafkaConfig

# ---------------------------------------------------------------- principals


@pytest.mark.parametrize(
    ("rules", "dn", "name"),
    [
        ("DEFAULT", "CN=alice,OU=eng,O=pylog", "CN=alice,OU=eng,O=pylog"),
        ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT", "CN=svc,OU=ServiceUsers,O=x", "svc"),
        ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT", "CN=bob,OU=eng", "CN=bob,OU=eng"),
        ("RULE:^CN=(.*?),OU=(.*?),O=(.*?)$/$1@$3/L", "CN=Alice,OU=eng,O=Pylog", "alice@pylog"),
        ("RULE:^CN=(.*?),.*$/$1/U", "CN=alice,O=x", "ALICE"),
        ("RULE:^CN=([^,]*).*$/user-$1-$2/", "CN=a,O=x", "user-a-$2"),  # no group 2: literal
        ("RULE:^CN=(.*?)\\,O=(.*)$/$2\\/$1/", "CN=a,O=x", "x/a"),  # escaped , and /
    ],
)
def test_principal_mapping_rules(rules: str, dn: str, name: str) -> None:
    assert SslPrincipalMapper(rules).name(dn) == name


def test_no_rule_applying_and_bad_rules() -> None:
    with pytest.raises(NoMatchingRule):
        SslPrincipalMapper("RULE:^CN=x$/y/").name("CN=alice")
    for bad in ("RULE:abc", "DEFAULT,junk", "RULE:a/b/Lx", "RULE:(/x/"):
        with pytest.raises(ValueError):
            SslPrincipalMapper(bad)


def test_rfc2253_names_from_getpeercert() -> None:
    subject = (
        (("countryName", "US"),),
        (("organizationName", "Ac,me"),),
        (("commonName", "alice"), ("emailAddress", "a@b.c")),
    )
    # most specific first; escaped comma; email as its OID and DER IA5String
    assert rfc2253_name(subject) == "CN=alice+1.2.840.113549.1.9.1=#16056140622e63,O=Ac\\,me,C=US"
    assert str(KafkaPrincipal.user("alice")) == "User:alice"
    assert KafkaPrincipal.parse("User:CN=a:b") == KafkaPrincipal("User", "CN=a:b")


# ---------------------------------------------------------------- JAAS


def test_jaas_config() -> None:
    j = JaasConfig.parse(
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="admin" password="a \\"quoted\\" pw" user_admin="x" user_bob=bare;'
    )
    assert j.control_flag == "required"
    assert j.options["password"] == 'a "quoted" pw'
    assert j.plain_users() == {"admin": "x", "bob": "bare"}
    for bad in ('m required a="b"', "m whatever;", "m required a;", "a required; b required;"):
        with pytest.raises(ValueError) as e:
            JaasConfig.parse(bad)
        assert '"b"' not in str(e.value)  # values never in messages


# ---------------------------------------------------------------- SCRAM


def test_credential_string_is_kafkas_and_round_trips() -> None:
    m = ScramMechanism.SCRAM_SHA_256
    cred = ScramCredential.from_password(m, "pencil", 4096, salt=b"salt-of-the-earth")
    text = cred.to_string()
    assert text.startswith(f"salt={base64.b64encode(b'salt-of-the-earth').decode()},stored_key=")
    assert text.endswith(",iterations=4096")
    assert ScramCredential.from_string(text) == cred
    with pytest.raises(ValueError):
        ScramCredential.from_string("salt=???,iterations=1")


def scram_login(
    server: ScramSaslServer, user: str, password: str, mechanism: str = "SCRAM-SHA-512"
) -> None:
    client = SaslClient(mechanism, user, password)
    token: bytes | None = client.first()
    while token is not None:
        token = client.evaluate(server.evaluate(token))


@pytest.mark.parametrize("mechanism", list(ScramMechanism))
def test_scram_server_against_scramps_client(mechanism: ScramMechanism) -> None:
    creds = {"al,ice=": ScramCredential.from_password(mechanism, "secret", 4096)}
    lookup = lambda user, m: creds.get(user) if m is mechanism else None  # noqa: E731
    server = ScramSaslServer(mechanism, lookup)
    scram_login(server, "al,ice=", "secret", mechanism.mechanism_name)  # checks server-final
    assert server.complete and server.authorization_id == "al,ice="
    for user, password, why in (
        ("al,ice=", "wrong", "wrong password"),
        ("nobody", "secret", "unknown user"),
    ):
        with pytest.raises(SaslAuthenticationError) as e:
            scram_login(
                ScramSaslServer(mechanism, lookup), user, password, mechanism.mechanism_name
            )
        assert why in e.value.reason and e.value.client_message is None


def test_scram_server_kafka_rules() -> None:
    m = ScramMechanism.SCRAM_SHA_512
    cred = ScramCredential.from_password(m, "pw", 4096)
    server = ScramSaslServer(m, lambda user, mech: cred)
    # an authorization id that is not the user: Kafka's own message
    with pytest.raises(SaslAuthenticationError) as e:
        server.evaluate(b"n,a=bob,n=alice,r=abc")
    assert e.value.client_message == (
        "Authentication failed: Client requested an authorization id that is different "
        "from username"
    )
    # the same user as authorization id, and extensions, are fine
    first = ScramSaslServer(m, lambda u, mech: cred).evaluate(b"n,a=alice,n=alice,r=abc,ext=1")
    assert first.startswith(b"r=abc") and b",i=4096" in first
    # channel binding asked for: refused (Kafka has none)
    with pytest.raises(SaslAuthenticationError, match="malformed client-first"):
        ScramSaslServer(m, lambda u, mech: cred).evaluate(b"p=tls-unique,,n=alice,r=abc")
    # too few iterations in the store
    weak = ScramCredential.from_password(m, "pw", 1000)
    with pytest.raises(SaslAuthenticationError, match="below 4096"):
        ScramSaslServer(m, lambda u, mech: weak).evaluate(b"n,,n=alice,r=abc")
    # delegation tokens are not served
    with pytest.raises(SaslAuthenticationError, match="delegation-token"):
        ScramSaslServer(m, lambda u, mech: cred).evaluate(b"n,,n=alice,r=abc,tokenauth=true")


def test_plain_server() -> None:
    s = PlainSaslServer({"alice": "pw"})
    assert s.evaluate(b"\0alice\0pw") == b"" and s.authorization_id == "alice"
    cases = {
        b"\0alice\0bad": "Authentication failed: Invalid username or password",
        b"\0nobody\0pw": "Authentication failed: Invalid username or password",
        b"\0\0pw": "Authentication failed: username not specified",
        b"\0alice\0": "Authentication failed: password not specified",
        b"alice": "Invalid SASL/PLAIN response: expected 3 tokens, got 1",
        b"bob\0alice\0pw": "Authentication failed: Client requested an authorization id "
        "that is different from username",
    }
    for token, message in cases.items():
        with pytest.raises(SaslAuthenticationError) as e:
            PlainSaslServer({"alice": "pw"}).evaluate(token)
        assert e.value.client_message == message
        assert "pw" not in e.value.reason.replace("password", "")


# ---------------------------------------------------------------- the authenticator


class Clock:
    def __init__(self) -> None:
        self.ns = 1_000_000_000

    def __call__(self) -> int:
        return self.ns


def exchange(
    auth: SaslServerAuthenticator, api_key: int, version: int, body: object, expect: type
) -> tuple[object, str | None]:
    frame = memoryview(encode_request(api_key, version, 7, "t", body)[4:])
    result = auth.handle(parse_request_header(frame), frame)
    data = b"".join(bytes(c) for c in result.chunks)
    return decode_response(api_key, version, memoryview(data[4:]), expect=expect), result.failure


def test_authenticator_states_and_reauthentication() -> None:
    cache = CredentialCache()
    m = ScramMechanism.SCRAM_SHA_512
    cache.set_user("alice", {m: ScramCredential.from_password(m, "secret", 4096)})
    clock = Clock()
    config = SaslServerConfig.from_cache(
        cache,
        listener="SASL_SSL",
        mechanisms=("SCRAM-SHA-512", "PLAIN"),
        plain_users={"bob": "pw"},
        max_reauth_ms={"SCRAM-SHA-512": 1000},
    )
    auth = SaslServerAuthenticator(config, clock)
    assert auth.admit(ApiKey.API_VERSIONS) is None
    assert auth.admit(ApiKey.METADATA) == (
        "Unexpected Kafka request of type METADATA during SASL handshake"
    )
    hs, failure = exchange(
        auth,
        ApiKey.SASL_HANDSHAKE,
        1,
        SaslHandshakeRequest(mechanism="SCRAM-SHA-512"),
        SaslHandshakeResponse,
    )
    assert failure is None and hs.error_code == 0  # type: ignore[attr-defined]
    assert auth.admit(ApiKey.API_VERSIONS) is not None  # only SaslAuthenticate now

    def login(password: str) -> SaslAuthenticateResponse:
        client = SaslClient("SCRAM-SHA-512", "alice", password)
        token: bytes | None = client.first()
        resp: object = None
        while token is not None:
            resp, _ = exchange(
                auth,
                ApiKey.SASL_AUTHENTICATE,
                1,
                SaslAuthenticateRequest(auth_bytes=token),
                SaslAuthenticateResponse,
            )
            assert isinstance(resp, SaslAuthenticateResponse)
            if resp.error_code:
                return resp
            token = client.evaluate(bytes(resp.auth_bytes))
        assert isinstance(resp, SaslAuthenticateResponse)
        return resp

    r = login("secret")
    assert (r.error_code, r.session_lifetime_ms) == (0, 1000)
    assert auth.principal == KafkaPrincipal.user("alice") and auth.complete
    assert auth.admit(ApiKey.PRODUCE) is None
    clock.ns += 900_000_000
    # re-authentication on the same connection renews the session
    hs, _ = exchange(
        auth,
        ApiKey.SASL_HANDSHAKE,
        1,
        SaslHandshakeRequest(mechanism="SCRAM-SHA-512"),
        SaslHandshakeResponse,
    )
    assert hs.error_code == 0  # type: ignore[attr-defined]
    assert login("secret").error_code == 0 and auth.reauthentications == 1
    clock.ns += 900_000_000
    assert auth.admit(ApiKey.PRODUCE) is None
    clock.ns += 200_000_000
    assert "expired" in (auth.admit(ApiKey.PRODUCE) or "")
    assert auth.admit(ApiKey.SASL_HANDSHAKE) is None  # re-authenticating is still allowed
    # another mechanism for re-authentication: refused and the connection ends
    hs, failure = exchange(
        auth,
        ApiKey.SASL_HANDSHAKE,
        1,
        SaslHandshakeRequest(mechanism="PLAIN"),
        SaslHandshakeResponse,
    )
    assert hs.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM  # type: ignore[attr-defined]
    assert failure is not None and "re-authentication of mechanism SCRAM-SHA-512" in failure


def test_authenticator_after_completion_and_wrong_passwords() -> None:
    config = SaslServerConfig(listener="L", mechanisms=("PLAIN",), plain_users={"bob": "pw"})
    auth = SaslServerAuthenticator(config)
    exchange(
        auth,
        ApiKey.SASL_HANDSHAKE,
        1,
        SaslHandshakeRequest(mechanism="PLAIN"),
        SaslHandshakeResponse,
    )
    r, failure = exchange(
        auth,
        ApiKey.SASL_AUTHENTICATE,
        0,
        SaslAuthenticateRequest(auth_bytes=b"\0bob\0pw"),
        SaslAuthenticateResponse,
    )
    assert failure is None and r.error_code == 0  # type: ignore[attr-defined]
    # v0 clients cannot re-authenticate: a later handshake is ILLEGAL_SASL_STATE
    hs, failure = exchange(
        auth,
        ApiKey.SASL_HANDSHAKE,
        1,
        SaslHandshakeRequest(mechanism="PLAIN"),
        SaslHandshakeResponse,
    )
    assert hs.error_code == ErrorCode.ILLEGAL_SASL_STATE and failure is None  # type: ignore[attr-defined]
    r, _ = exchange(
        auth,
        ApiKey.SASL_AUTHENTICATE,
        2,
        SaslAuthenticateRequest(auth_bytes=b"\0bob\0pw"),
        SaslAuthenticateResponse,
    )
    assert r.error_code == ErrorCode.ILLEGAL_SASL_STATE  # type: ignore[attr-defined]

    auth = SaslServerAuthenticator(config)
    exchange(
        auth,
        ApiKey.SASL_HANDSHAKE,
        1,
        SaslHandshakeRequest(mechanism="PLAIN"),
        SaslHandshakeResponse,
    )
    r, failure = exchange(
        auth,
        ApiKey.SASL_AUTHENTICATE,
        2,
        SaslAuthenticateRequest(auth_bytes=b"\0bob\0nope"),
        SaslAuthenticateResponse,
    )
    assert r.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED  # type: ignore[attr-defined]
    assert failure == "wrong password 'bob'" and auth.principal is None
    assert auth.admit(ApiKey.SASL_AUTHENTICATE) == "its authentication failed"


# ---------------------------------------------------------------- TLS


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    pytest.importorskip("cryptography")
    from security_support import make_certs

    return make_certs(tmp_path_factory.mktemp("certs"))


def test_server_contexts_from_pem_and_pkcs12(certs) -> None:  # type: ignore[no-untyped-def]
    from security_support import KEY_PASSWORD, STORE_PASSWORD

    pem = SslConfig(
        keystore_type="PEM",
        keystore_location=str(certs.broker_keystore),
        key_password=KEY_PASSWORD,
        truststore_location=str(certs.ca),
        client_auth="required",
    )
    ctx = server_context(pem)
    assert ctx.verify_mode == ssl.CERT_REQUIRED
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_2
    # the type left at Kafka's default JKS: the PEM file is read as PEM
    server_context(
        SslConfig(
            keystore_type="JKS",
            keystore_location=str(certs.broker_keystore),
            key_password=KEY_PASSWORD,
        )
    )
    p12 = SslConfig(
        keystore_type="PKCS12",
        keystore_location=str(certs.broker_p12),
        keystore_password=STORE_PASSWORD,
    )
    assert server_context(p12).verify_mode == ssl.CERT_NONE
    # inline key and chain
    text = certs.broker_keystore.read_text()
    key_end = text.index("-----END ENCRYPTED PRIVATE KEY-----") + 35
    server_context(
        SslConfig(
            keystore_key=text[:key_end],
            keystore_certificate_chain=text[key_end:],
            key_password=KEY_PASSWORD,
        )
    )


def test_tls_configuration_errors(certs, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    jks = tmp_path / "broker.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed" + b"\0" * 64)
    cases = {
        "Java KeyStore": SslConfig(keystore_location=str(jks)),
        "needs a keystore": SslConfig(),
        "ssl.key.password for an encrypted key": SslConfig(
            keystore_type="PEM", keystore_location=str(certs.broker_keystore)
        ),
        "wrong password": SslConfig(
            keystore_type="PKCS12",
            keystore_location=str(certs.broker_p12),
            keystore_password="nope",
        ),
        "does not hold PKCS12": SslConfig(
            keystore_type="PKCS12", keystore_location=str(certs.broker_keystore)
        ),
        "ssl.enabled.protocols": SslConfig(
            keystore_location=str(certs.broker_keystore), enabled_protocols=("SSLv3",)
        ),
        "ssl.cipher.suites": SslConfig(
            keystore_location=str(certs.broker_keystore), cipher_suites=("TLS_AES_128_GCM_SHA256",)
        ),
    }
    for fragment, cfg in cases.items():
        with pytest.raises(InvalidConfigurationError) as e:
            server_context(cfg)
        assert fragment in str(e.value)


# ---------------------------------------------------------------- broker keys


def test_listener_prefixed_keys_and_sensitive_values() -> None:
    c = KafkaConfig.from_props(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
            "ssl.client.auth": "none",
            "listener.name.sasl_ssl.ssl.client.auth": "required",
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": "m required;",
            "connections.max.reauth.ms": "7",
            "listener.name.sasl_ssl.plain.connections.max.reauth.ms": "5",
        }
    )
    assert c.listener_get("SASL_SSL", "ssl.client.auth") == "required"
    assert c.listener_get("PLAINTEXT", "ssl.client.auth") == "none"
    assert c.listener_get("SASL_SSL", "scram-sha-512.sasl.jaas.config") == "m required;"
    assert c.listener_get("SASL_SSL", "plain.connections.max.reauth.ms") == 5
    assert c.listener_get("SASL_SSL", "scram-sha-512.connections.max.reauth.ms") == 7
    assert c.unknown == ()
    with pytest.raises(
        InvalidConfigurationError, match=r"listener\.name\.sasl_ssl\.ssl\.client\.auth"
    ):
        KafkaConfig.from_props({"listener.name.sasl_ssl.ssl.client.auth": "sometimes"})
    with pytest.raises(InvalidConfigurationError, match="Only one of"):
        KafkaConfig.from_props(
            {
                "inter.broker.listener.name": "PLAINTEXT",
                "security.inter.broker.protocol": "PLAINTEXT",
            }
        )


def test_sasl_listener_configuration_errors() -> None:
    from pylog.broker.channel_builders import inter_broker_security, listener_specs

    def specs(**props: object) -> object:
        config = KafkaConfig.from_props({"listeners": "SASL_PLAINTEXT://127.0.0.1:0", **props})
        return listener_specs(config, lambda user, mechanism: None)

    with pytest.raises(InvalidConfigurationError, match="GSSAPI"):
        specs()  # Kafka's default mechanism, Kerberos, is not served
    with pytest.raises(InvalidConfigurationError, match=r"plain\.sasl\.jaas\.config is not set"):
        specs(**{"sasl.enabled.mechanisms": "PLAIN"})
    (spec,) = specs(
        **{  # type: ignore[misc]
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": (
                'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="b";'
            ),
        }
    )
    assert spec.sasl.mechanisms == ("PLAIN", "SCRAM-SHA-256") and spec.sasl.plain_users == {
        "a": "b"
    }
    config = KafkaConfig.from_props(
        {
            "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
            "zookeeper.connect": "x:1",
            "broker.id": 1,
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        }
    )
    with pytest.raises(InvalidConfigurationError, match="username and password"):
        inter_broker_security(config)


def test_a_broker_with_no_config_is_plaintext_on_loopback_only() -> None:
    from pylog.broker.channel_builders import listener_specs

    c = KafkaConfig.from_props({})
    (spec,) = listener_specs(c, lambda user, mechanism: None)
    assert (spec.name, spec.host, spec.port, spec.security_protocol) == (
        "PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT",
    )  # fmt: skip
    assert spec.ssl_context is None and spec.sasl is None
