"""KIP-599's controller mutation quota over a real JsonMetadataStore, on a
clock the test sets: the token bucket (full at first, refilled at the rate,
never above the burst), the strict quota (a mutation is refused only once the
bucket is below zero) and the permissive one (everything passes, the
throttle grows), and the time until the bucket is back at zero."""

from __future__ import annotations

from pathlib import Path

import pytest

from pylog.common.metrics.token_bucket import TokenBucket
from pylog.errors import ThrottlingQuotaExceededError
from pylog.metadata.client_quota_entity import CONTROLLER_MUTATION_RATE, ClientQuotaEntity
from pylog.metadata.json_store import JsonMetadataStore
from pylog.security.kafka_principal import KafkaPrincipal
from pylog.server.controller_mutation_quota_manager import (
    UNBOUNDED,
    ControllerMutationQuotaManager,
    PermissiveControllerMutationQuota,
    StrictControllerMutationQuota,
)

ALICE = KafkaPrincipal("User", "alice")


class Clock:
    def __init__(self) -> None:
        self.ms = 5_000_000

    def __call__(self) -> int:
        return self.ms


@pytest.fixture
def store(tmp_path: Path) -> JsonMetadataStore:
    return JsonMetadataStore(str(tmp_path))


def manager(store: JsonMetadataStore, clock: Clock) -> ControllerMutationQuotaManager:
    return ControllerMutationQuotaManager(lambda: store.client_quotas, clock=clock)


def test_token_bucket_refills_at_the_rate_up_to_the_burst() -> None:
    b = TokenBucket(samples=11, window_ms=1000)
    assert b.measure(2.0, 0) == 22.0  # full at first: 11 windows of 2/s
    b.record(30, 2.0, 0)
    assert b.measure(2.0, 0) == -8.0
    assert b.measure(2.0, 3000) == pytest.approx(-2.0)
    assert b.measure(2.0, 100_000) == 22.0  # never above the burst
    b.record(-100, 2.0, 100_000)
    assert b.measure(2.0, 100_000) == 22.0


def test_no_quota_is_unbounded(store: JsonMetadataStore) -> None:
    m = manager(store, Clock())
    assert m.new_quota_for(ALICE, "app", strict=True) is UNBOUNDED
    store.alter_client_quotas(
        {ClientQuotaEntity.of(client_id="app"): {CONTROLLER_MUTATION_RATE: 1}}
    )
    assert isinstance(m.new_quota_for(ALICE, "app", strict=True), StrictControllerMutationQuota)
    assert m.new_quota_for(ALICE, "other", strict=True) is UNBOUNDED
    assert m.new_quota_for(ALICE, "app", strict=True, exempt=True) is UNBOUNDED


def test_strict_refuses_once_below_zero_with_the_time_to_refill(store: JsonMetadataStore) -> None:
    clock = Clock()
    store.alter_client_quotas({ClientQuotaEntity.of("alice"): {CONTROLLER_MUTATION_RATE: 2}})
    m = manager(store, clock)
    q = m.new_quota_for(ALICE, "x", strict=True)
    q.record(10)  # 22 -> 12
    q.record(12)  # 12 -> 0
    q.record(5)  # found at 0: passes, 0 -> -5
    assert q.throttle_time() == 0  # nothing refused yet
    with pytest.raises(ThrottlingQuotaExceededError) as e:
        q.record(1)
    assert e.value.code == 89 and e.value.throttle_time_ms == 2500  # 5 credits at 2/s
    assert q.throttle_time() == 2500
    clock.ms += 1000
    assert q.throttle_time() == 1500  # the time since counts
    # a later request of the same user shares the bucket
    q2 = m.new_quota_for(ALICE, "y", strict=True)
    with pytest.raises(ThrottlingQuotaExceededError):
        q2.record(1)
    clock.ms += 1500
    q2.record(1)  # back at zero


def test_permissive_takes_everything_and_throttles(store: JsonMetadataStore) -> None:
    clock = Clock()
    store.alter_client_quotas({ClientQuotaEntity.of(client_id="x"): {CONTROLLER_MUTATION_RATE: 1}})
    m = manager(store, clock)
    q = m.new_quota_for(ALICE, "x", strict=False)
    assert isinstance(q, PermissiveControllerMutationQuota)
    q.record(11)
    assert q.throttle_time() == 0
    q.record(4)
    q.record(3)
    assert q.throttle_time() == 7000  # 7 credits short at 1/s


def test_a_changed_quota_applies_to_the_same_bucket(store: JsonMetadataStore) -> None:
    clock = Clock()
    entity = ClientQuotaEntity.of(client_id="x")
    store.alter_client_quotas({entity: {CONTROLLER_MUTATION_RATE: 1}})
    m = manager(store, clock)
    m.new_quota_for(ALICE, "x", strict=True).record(15)  # 11 -> -4
    store.alter_client_quotas({entity: {CONTROLLER_MUTATION_RATE: 4}})
    q = m.new_quota_for(ALICE, "x", strict=True)
    with pytest.raises(ThrottlingQuotaExceededError) as e:
        q.record(1)
    assert e.value.throttle_time_ms == 1000  # 4 credits at the new 4/s
    values = {tuple(sorted(labels.items())): v for labels, v in m.metric_values(clock.ms, "tokens")}
    assert values == {(("client_id", "x"), ("user", "")): -4.0}
