"""PasswordEncoder: dynamic password configs encrypted as Kafka's
EncryptingPasswordEncoder encrypts them — values Kafka 3.9.1's class encoded
(secret ``pylog-secret``) decode here, pylog's own round-trip, and a wrong
secret or a damaged value is refused."""

from __future__ import annotations

import pytest

from pylog.errors import InvalidConfigurationError
from pylog.security.password_encoder import PasswordEncoder, _parse_csv_map

pytest.importorskip("cryptography")

# Encoded by org.apache.kafka.security.EncryptingPasswordEncoder (Kafka 3.9.1),
# secret "pylog-secret", password "keystore-päss".
KAFKA_CBC = (
    "initializationVector:EmDPPMQRJE5cW2kLsa9CCA==,keyLength:128,salt:9myoULoCI2p7NufNkNEf3vNeZ8"
    "zyjtsDu6Qc+sVNHG9Dd2CmuszA97GJ+OrYm0yWDElnwA/as78YMvBBskEOT8SUdKnNLFyRRnBS4HBa1qs18ZQHJEfm"
    "G1iZgtipkqfrp5TSp92k4z4tfM/q7+MeWj6FiNeK755flS+2FQuFGSmazL58g9Hjo+Wt37sXhmD392glNjg+m4Saeq"
    "udzYKdK5clbEEUS1iOUZJgSes+eaSjzB6vXmre58WVZCdju1gzeclKY0QeZbCLctQxWlzda2kDholypKHpuafiIl4Q"
    "fME/OyVPQAaQFLvky95hMwr4zypt5pvCGSQ+llF5PrSLhg==,keyFactoryAlgorithm:PBKDF2WithHmacSHA512,"
    "cipherAlgorithm:AES/CBC/PKCS5Padding,iterations:4096,passwordLength:13,"
    "encryptedPassword:ZSsVi6NZ/atNjLAIQZhQ3g=="
)
KAFKA_GCM = (
    "initializationVector:t0lw8FeVy+Kf9toP,keyLength:128,salt:VspwIIRdQ56+ZsUQeYcOrYUBCfdXqNfYi"
    "JVNYUY3swxOYCTcsTl0VfoL41Lxj8nwdumXUvIiT/tsQsjTi3yhjR4Yp4jZs7iLiEXmFXYP2LAZ0txieNl/uWkNEcL"
    "LqMhyCzReSBEwTEQXVU0yeJa1UkQBrl1OA1H8kBJdSJME3i6/qeK3azqbsd4lVlulp6L9qNL1i4I2IPumbN6hgKxjU"
    "3Hr54ulyR+Lfm1zIVE/8ECy5tL0BrOdm8aRhRrFkg9OOvWi/1AK8ctd6x4JwUcp7Y27BgHal0ZzhYxQlmo/jHEu+Z3"
    "rX9dz8+dMaTJWJNKO8HDzu/Omnxz4mpaCi9CnWg==,keyFactoryAlgorithm:PBKDF2WithHmacSHA512,"
    "cipherAlgorithm:AES/GCM/NoPadding,authenticationTagLength:128,iterations:4096,"
    "passwordLength:13,encryptedPassword:5ot4uYp98guwanXfZP+baoESvGSCcFd/l6u2alXF"
)


@pytest.mark.parametrize("encoded", [KAFKA_CBC, KAFKA_GCM])
def test_decodes_what_kafka_encoded(encoded: str) -> None:
    assert PasswordEncoder("pylog-secret").decode(encoded) == "keystore-päss"


@pytest.mark.parametrize("cipher", ["AES/CBC/PKCS5Padding", "AES/GCM/NoPadding"])
def test_round_trip_in_kafkas_format(cipher: str) -> None:
    enc = PasswordEncoder("s3cret", cipher_algorithm=cipher, key_length=256, iterations=1024)
    encoded = enc.encode("pässword-😀")
    fields = _parse_csv_map(encoded)
    assert fields["cipherAlgorithm"] == cipher and fields["keyLength"] == "256"
    assert fields["passwordLength"] == "11"  # Java's String.length(): the emoji is two units
    assert len(fields["salt"]) == 344  # 256 bytes in base64
    assert "pässword" not in encoded
    # another encoder with the same secret (other settings) decodes it
    assert PasswordEncoder("s3cret").decode(encoded) == "pässword-😀"


def test_a_wrong_secret_or_a_damaged_value_is_refused() -> None:
    encoded = PasswordEncoder("right").encode("pw-1!")
    with pytest.raises(InvalidConfigurationError, match="Password could not be decoded"):
        PasswordEncoder("wrong").decode(KAFKA_GCM)
    with pytest.raises(InvalidConfigurationError, match="Password could not be decoded"):
        PasswordEncoder("right").decode(encoded.replace("iterations:4096", "iterations:4097"))
    with pytest.raises(InvalidConfigurationError, match="Password could not be decoded"):
        PasswordEncoder("right").decode("not an encoded password")
    with pytest.raises(InvalidConfigurationError):
        PasswordEncoder("x", cipher_algorithm="DES/ECB/NoPadding")


def test_dynamic_config_encrypts_decrypts_and_moves_to_a_new_secret() -> None:
    """DynamicBrokerConfig's persistent form: a listener password encrypted
    with password.encoder.secret, refused at the cluster default or without
    a secret, decoded again, and at start-up with a rotated secret encrypted
    again from password.encoder.old.secret (Kafka's maybeReEncodePasswords)."""
    from pylog.server.config import KafkaConfig
    from pylog.server.dynamic_broker_config import DEFAULT_ENTITY, DynamicBrokerConfig

    def dynamic(**secrets: str) -> DynamicBrokerConfig:
        props = {"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0"}
        props.update({f"password.encoder.{k.replace('_', '.')}": v for k, v in secrets.items()})
        return DynamicBrokerConfig(KafkaConfig.from_props(props))

    key = "listener.name.ssl.ssl.keystore.password"
    first = dynamic(secret="one")
    stored = first.to_persistent("0", {key: "pw-1!", "message.max.bytes": "5000"})
    assert stored["message.max.bytes"] == "5000" and "pw-1!" not in stored[key]
    assert first.from_persistent(stored) == {key: "pw-1!", "message.max.bytes": "5000"}
    with pytest.raises(InvalidConfigurationError, match="only at broker level"):
        first.to_persistent(DEFAULT_ENTITY, {key: "pw-1!"})
    with pytest.raises(InvalidConfigurationError, match="secret not configured"):
        dynamic().to_persistent("0", {key: "pw-1!"})
    assert first.reencoded(stored) is None  # no old secret: nothing to move

    rotated = dynamic(secret="two", old_secret="one")
    again = rotated.reencoded(stored)
    assert again is not None and again[key] != stored[key]
    assert dynamic(secret="two").from_persistent(again)[key] == "pw-1!"
    assert rotated.reencoded(again) is None  # already on the new secret
    # a password neither secret decodes is left out
    assert dynamic(secret="three").from_persistent(stored) == {"message.max.bytes": "5000"}
