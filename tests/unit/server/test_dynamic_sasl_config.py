"""Dynamic SASL settings of a listener: ``listener.name.<l>.<mechanism>.sasl.jaas.config``
and ``listener.name.<l>.sasl.enabled.mechanisms`` (KIP-226's listener keys), checked
before they are stored, encrypted as the PASSWORD they are, and applied."""

from __future__ import annotations

import pytest

from pylog.broker.channel_builders import listener_sasl_configs
from pylog.errors import InvalidConfigurationError
from pylog.server.config import KafkaConfig
from pylog.server.dynamic_broker_config import (
    DEFAULT_ENTITY,
    DynamicBrokerConfig,
    is_password_config,
    listener_sasl_key,
)

JAAS = "listener.name.sasl_plaintext.plain.sasl.jaas.config"
MECHANISMS = "listener.name.sasl_plaintext.sasl.enabled.mechanisms"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"


def _dynamic() -> DynamicBrokerConfig:
    static = KafkaConfig.from_props(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
            JAAS: f'{PLAIN} required user_alice="a";',
            "password.encoder.secret": "s3cret",
        }
    )
    dynamic = DynamicBrokerConfig(static)
    dynamic.add_reconfigurable(
        "SaslChannelBuilder",
        lambda _old, _new: None,
        lambda new: (listener_sasl_configs(new, lambda _u, _m: None), None)[1],
    )
    return dynamic


def test_the_keys_are_listener_scoped_and_the_jaas_text_is_a_password() -> None:
    assert listener_sasl_key(JAAS) == ("SASL_PLAINTEXT", "plain.sasl.jaas.config")
    assert listener_sasl_key(MECHANISMS) == ("SASL_PLAINTEXT", "sasl.enabled.mechanisms")
    assert listener_sasl_key("listener.name.x.scram-sha-512.sasl.jaas.config") is not None
    assert listener_sasl_key("listener.name.x.gssapi.sasl.jaas.config") is None
    assert listener_sasl_key("sasl.enabled.mechanisms") is None
    assert is_password_config(JAAS) and not is_password_config(MECHANISMS)


def test_a_valid_change_is_applied_and_stored_encrypted() -> None:
    dynamic = _dynamic()
    text = f'{PLAIN} required user_alice="a" user_carol="c";'
    dynamic.validate("0", {JAAS: text, MECHANISMS: "PLAIN"})
    stored = dynamic.to_persistent("0", {JAAS: text, MECHANISMS: "PLAIN"})
    assert "carol" not in stored[JAAS] and stored[MECHANISMS] == "PLAIN"
    dynamic.update("0", stored)
    sasl = listener_sasl_configs(dynamic.current, lambda _u, _m: None)["SASL_PLAINTEXT"]
    assert sasl.mechanisms == ("PLAIN",)
    assert dict(sasl.plain_users) == {"alice": "a", "carol": "c"}


@pytest.mark.parametrize(
    ("configs", "message"),
    [
        ({JAAS: f'{PLAIN} required user_carol="c"'}, "semi-colon|;"),
        ({JAAS: "   "}, "JAAS|login module|Login module"),
        ({JAAS: f'{SCRAM} required user_carol="c";'}, "PLAIN needs"),
        ({MECHANISMS: "PLAIN,GSSAPI"}, "GSSAPI"),
        ({MECHANISMS: "SCRAM-SHA-256,PLAIN"} | {JAAS: ""}, "JAAS|login module|Login module"),
        ({"listener.name.nope.plain.sasl.jaas.config": f"{PLAIN} required;"}, "no listener"),
    ],
)
def test_a_bad_change_is_refused_and_nothing_applied(configs: dict[str, str], message: str) -> None:
    dynamic = _dynamic()
    before = dynamic.current
    with pytest.raises(InvalidConfigurationError, match=message):
        dynamic.validate("0", configs)
    assert dynamic.current is before and dynamic.dynamic_broker() == {}


def test_per_broker_only() -> None:
    with pytest.raises(InvalidConfigurationError, match="broker id must be specified"):
        _dynamic().validate(DEFAULT_ENTITY, {MECHANISMS: "PLAIN"})
    with pytest.raises(InvalidConfigurationError, match="only at broker level"):
        _dynamic().to_persistent(DEFAULT_ENTITY, {JAAS: f"{PLAIN} required;"})
    with pytest.raises(InvalidConfigurationError, match="Cannot update these configs"):
        _dynamic().validate("0", {"sasl.enabled.mechanisms": "PLAIN"})
