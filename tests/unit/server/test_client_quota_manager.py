"""The client quota managers over a real JsonMetadataStore: Kafka's order of
precedence between the eight quota entities, the metric tags usage is
measured under, the Rate's windows and the throttle time they give."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from pylog.common.metrics.sampled_stat import Avg, Rate
from pylog.metadata.client_quota_entity import (
    CONNECTION_CREATION_RATE,
    DEFAULT,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    ClientQuotaEntity,
)
from pylog.metadata.json_store import JsonMetadataStore
from pylog.security.kafka_principal import KafkaPrincipal
from pylog.server.client_quota_manager import ClientQuotaManager, QuotaType

ALICE = KafkaPrincipal("User", "alice")
BOB = KafkaPrincipal("User", "bob")


@pytest.fixture
def store(tmp_path: Path) -> JsonMetadataStore:
    return JsonMetadataStore(str(tmp_path))


def produce_manager(store: JsonMetadataStore) -> ClientQuotaManager:
    return ClientQuotaManager(QuotaType.PRODUCE, lambda: store.client_quotas)


def test_precedence_is_kafkas(store: JsonMetadataStore) -> None:
    """Each level set (values 1..8 in Kafka's order); removing the most
    specific one at a time hands the quota to the next, with its metric tags."""
    levels = [
        (ClientQuotaEntity.of("alice", "app"), ("alice", "app")),
        (ClientQuotaEntity.of("alice", None), ("alice", "app")),
        (ClientQuotaEntity.of("alice"), ("alice", "")),
        (ClientQuotaEntity.of(None, "app"), ("alice", "app")),
        (ClientQuotaEntity.of(None, None), ("alice", "app")),
        (ClientQuotaEntity.of(None), ("alice", "")),
        (ClientQuotaEntity.of(client_id="app"), ("", "app")),
        (ClientQuotaEntity.of(client_id=None), ("", "app")),
    ]
    store.alter_client_quotas(
        {e: {PRODUCER_BYTE_RATE: float(i + 1)} for i, (e, _) in enumerate(levels)}
    )
    m = produce_manager(store)
    for i, (entity, tags) in enumerate(levels):
        assert m.quota(ALICE, "app") == (tags, float(i + 1)), entity
        store.alter_client_quotas({entity: {PRODUCER_BYTE_RATE: None}})
    assert m.quota(ALICE, "app") == (("", "app"), math.inf)
    assert store.client_quotas == {}


def test_a_quota_of_another_type_does_not_apply(store: JsonMetadataStore) -> None:
    store.alter_client_quotas(
        {
            ClientQuotaEntity.of("alice"): {REQUEST_PERCENTAGE: 50.0},
            ClientQuotaEntity.of(None): {PRODUCER_BYTE_RATE: 1000.0},
        }
    )
    m = produce_manager(store)
    # alice's own entity has no producer_byte_rate: the default user's applies
    assert m.quota(ALICE, "x") == (("alice", ""), 1000.0)
    assert ClientQuotaManager(QuotaType.REQUEST, lambda: store.client_quotas).quota(ALICE, "x") == (
        ("alice", ""),
        50.0,
    )
    assert not ClientQuotaManager(QuotaType.FETCH, lambda: store.client_quotas).quotas_enabled()


def test_names_are_sanitized_as_kafka_does(store: JsonMetadataStore) -> None:
    odd = KafkaPrincipal("User", "CN=alice,OU=eng")
    entity = ClientQuotaEntity.of("CN=alice,OU=eng", "my app")
    assert entity.path() == ("users", "CN%3Dalice%2COU%3Deng/clients/my%20app")
    assert ClientQuotaEntity.from_path(*entity.path()) == entity
    assert entity.components() == [("user", "CN=alice,OU=eng"), ("client-id", "my app")]
    # a user literally named <default> is not the default user
    literal = ClientQuotaEntity.of("<default>")
    assert literal.user != DEFAULT and literal.path() == ("users", "%3Cdefault%3E")
    store.alter_client_quotas({entity: {PRODUCER_BYTE_RATE: 5.0}})
    assert produce_manager(store).quota(odd, "my app") == (
        ("CN%3Dalice%2COU%3Deng", "my app"),
        5.0,
    )


def test_quotas_survive_a_restart(tmp_path: Path) -> None:
    store = JsonMetadataStore(str(tmp_path))
    store.alter_client_quotas(
        {
            ClientQuotaEntity.of("alice"): {PRODUCER_BYTE_RATE: 1024.0},
            ClientQuotaEntity.of(None, "app"): {REQUEST_PERCENTAGE: 12.5},
        }
    )
    store.alter_client_quotas({ClientQuotaEntity.of("alice"): {"consumer_byte_rate": 2048.0}})
    store.close()
    again = JsonMetadataStore(str(tmp_path))
    assert again.client_quotas == {
        ClientQuotaEntity.of("alice"): {PRODUCER_BYTE_RATE: 1024.0, "consumer_byte_rate": 2048.0},
        ClientQuotaEntity.of(None, "app"): {REQUEST_PERCENTAGE: 12.5},
    }


def test_ip_entities_are_kept_apart_and_survive_a_restart(tmp_path: Path) -> None:
    """KIP-612's IP entities: their own znode names (``ips/<ip>``, IPv6
    sanitized as Kafka's Sanitizer does), stored beside the client quotas and
    never mistaken for one."""
    store = JsonMetadataStore(str(tmp_path))
    v4, v6, default = (ClientQuotaEntity.of_ip("127.0.0.1"), ClientQuotaEntity.of_ip("::1"),
                       ClientQuotaEntity.of_ip(None))  # fmt: skip
    assert v4.path() == ("ips", "127.0.0.1") and v6.path() == ("ips", "%3A%3A1")
    assert default.path() == ("ips", DEFAULT) and default.components() == [("ip", None)]
    assert ClientQuotaEntity.from_path("ips", "%3A%3A1") == v6
    assert v6.components() == [("ip", "::1")]
    store.alter_client_quotas(
        {v4: {CONNECTION_CREATION_RATE: 5.0}, default: {CONNECTION_CREATION_RATE: 50.0}}
    )
    store.alter_client_quotas({ClientQuotaEntity.of(client_id=None): {PRODUCER_BYTE_RATE: 10.0}})
    store.close()
    again = JsonMetadataStore(str(tmp_path))
    assert again.client_quotas == {
        v4: {CONNECTION_CREATION_RATE: 5.0},
        default: {CONNECTION_CREATION_RATE: 50.0},
        ClientQuotaEntity.of(client_id=None): {PRODUCER_BYTE_RATE: 10.0},
    }
    # the client quotas' precedence never lands on an IP entity
    m = produce_manager(again)
    assert m.quota(ALICE, "app") == (("", "app"), 10.0)


def test_rate_is_measured_over_at_least_samples_minus_one_windows() -> None:
    r = Rate(11, 1000)
    r.record(10_000, 0)
    assert r.window_size_ms(0) == 10_000  # one value: measured over 10 windows
    assert r.measure(0) == 1000.0
    r.record(10_000, 20_000)  # the first sample is forgotten (older than 11 windows)
    assert r.measure(20_000) == 1000.0
    for t in range(21_000, 36_000, 1000):
        r.record(1000, t)
    # 11 samples over 11 s (oldest started at 25 s): 11 * 1000 bytes / 10.x s
    assert r.window_size_ms(35_500) == 10_500
    assert r.measure(35_500) == pytest.approx(11_000 / 10.5)
    a = Avg(2, 30_000)
    assert a.measure(0) == 0.0
    a.record(100, 0)
    a.record(300, 10)
    assert a.measure(10) == 200.0


def test_throttle_time_is_what_brings_the_rate_back_to_the_quota(
    store: JsonMetadataStore,
) -> None:
    store.alter_client_quotas(
        {
            ClientQuotaEntity.of("alice"): {PRODUCER_BYTE_RATE: 1000.0},
            ClientQuotaEntity.of("bob"): {PRODUCER_BYTE_RATE: 1_000_000.0},
        }
    )
    m = produce_manager(store)
    # 20,000 bytes over the 10 s minimum window: 2,000 B/s, twice the quota;
    # 10 s more of silence bring it back to 1,000 B/s
    assert m.maybe_record_and_get_throttle_time_ms(ALICE, "p1", 20_000, 1_000) == 10_000
    # a second client of alice shares her user quota
    assert m.maybe_record_and_get_throttle_time_ms(ALICE, "p2", 0, 1_000) == 10_000
    assert m.maybe_record_and_get_throttle_time_ms(BOB, "p1", 20_000, 1_000) == 0
    m.record_throttle(ALICE, "p1", 10_000, 1_000)
    rates = dict(
        ((labels["user"], labels["client_id"]), v) for labels, v in m.metric_values(1_000, "rate")
    )
    assert rates == {("alice", ""): 2000.0, ("bob", ""): 2000.0}
    throttles = {labels["user"]: v for labels, v in m.metric_values(1_000, "throttle")}
    assert throttles == {"alice": 10_000.0, "bob": 0.0}
    # a Fetch answered without data takes its bytes back
    m.unrecord(ALICE, "p1", 20_000, 1_000)
    assert m.maybe_record_and_get_throttle_time_ms(ALICE, "p1", 0, 1_000) == 0


def test_the_request_quota_throttles_at_most_one_window(store: JsonMetadataStore) -> None:
    store.alter_client_quotas({ClientQuotaEntity.of(None): {REQUEST_PERCENTAGE: 1.0}})
    m = ClientQuotaManager(QuotaType.REQUEST, lambda: store.client_quotas)
    # 5 s of handler time (500 % of a second) against 1 %: bounded to one window
    assert m.maybe_record_and_get_throttle_time_ms(ALICE, "c", 500.0, 0) == 1000


def test_no_quotas_no_sensors(store: JsonMetadataStore) -> None:
    m = produce_manager(store)
    assert m.maybe_record_and_get_throttle_time_ms(ALICE, "c", 10**9, 0) == 0
    assert list(m.metric_values(0, "rate")) == []
