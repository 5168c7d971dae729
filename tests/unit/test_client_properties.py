"""pylog.security.client_properties: one reading of a client's security keys
for a --command-config file (no prefix) and Spark's options (``kafka.``)."""

from __future__ import annotations

import pytest

from pylog.security.client_properties import ClientPropertyError, client_security_from

JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";'


@pytest.mark.parametrize("prefix", ["", "kafka."])
def test_the_same_keys_under_either_prefix(prefix: str) -> None:
    sec = client_security_from(
        {f"{prefix}security.protocol": "sasl_plaintext", f"{prefix}sasl.mechanism": "scram-sha-512",
         f"{prefix}sasl.jaas.config": JAAS},
        where="w", prefix=prefix,
    )  # fmt: skip
    assert (sec.security_protocol, sec.sasl_mechanism, sec.username, sec.password) == (
        "SASL_PLAINTEXT", "SCRAM-SHA-512", "u", "p",
    )  # fmt: skip


def test_a_key_without_the_prefix_is_not_read() -> None:
    sec = client_security_from({"security.protocol": "SSL"}, where="w", prefix="kafka.")
    assert (sec.security_protocol, sec.ssl_context) == ("PLAINTEXT", None)


def test_librdkafka_keys_and_the_default_mechanism() -> None:
    sec = client_security_from(
        {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN",
         "sasl.username": "a", "sasl.password": "b"},
        where="w",
    )  # fmt: skip
    assert (sec.sasl_mechanism, sec.username, sec.password) == ("PLAIN", "a", "b")
    sec = client_security_from(
        {"security.protocol": "SASL_PLAINTEXT"}, where="w", need_credentials=False,
        default_mechanism="PLAIN",
    )  # fmt: skip
    assert (sec.sasl_mechanism, sec.username) == ("PLAIN", None)


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"kafka.security.protocol": "TLS"}, "'kafka.security.protocol' must be one of PLAINTEXT"),
        ({"kafka.security.protocol": "SASL_SSL"},
         "'kafka.sasl.mechanism' must be one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (the Java"),
        ({"kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.mechanism": "OAUTHBEARER"},
         "'kafka.sasl.mechanism' must be one of"),
        ({"kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.mechanism": "PLAIN"},
         "SASL_PLAINTEXT needs a user: 'kafka.sasl.jaas.config'"),
        ({"kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.mechanism": "PLAIN",
          "kafka.sasl.jaas.config": "nonsense"}, "kafka.sasl.jaas.config"),
        ({"kafka.security.protocol": "SSL", "kafka.ssl.certificate.location": "/nowhere/c.pem",
          "kafka.ssl.key.location": "/nowhere/k.pem"},
         "'kafka.ssl.certificate.location' / 'kafka.ssl.key.location'"),
    ],
)  # fmt: skip
def test_errors_name_the_key_and_never_a_value(props: dict[str, str], message: str) -> None:
    with pytest.raises(ClientPropertyError) as info:
        client_security_from({**props, "kafka.sasl.password": "s3cret"}, where="w", prefix="kafka.")
    assert message in str(info.value)
    assert "s3cret" not in str(info.value)
