"""ConnectionQuotas' arithmetic (Kafka's ConnectionQuotas, KIP-612), on a
clock the test sets: an IP's ``connection_creation_rate`` measured over the
quota window, the throttle it calls for, un-recording a refused connection,
the default IP entity, the broker's and a listener's creation rates, and the
per-IP counts with their overrides."""

from __future__ import annotations

from pylog.config import parse_host_counts
from pylog.network.connection_quotas import UNLIMITED, ConnectionQuotas, normalize_host

T0 = 1_000_000  # ms


def quotas_with(ips: dict[str | None, int], **kwargs: object) -> ConnectionQuotas:
    q = ConnectionQuotas(**kwargs)  # type: ignore[arg-type]
    q.ip_quotas = lambda: ips
    return q


def test_an_ips_burst_is_ten_windows_of_its_rate_then_closed_for_a_window() -> None:
    """rate 2/s, 11 windows of 1 s: measured over at least 10 s, so 20
    connections pass at once; the 21st is refused with a throttle of at most
    one window (Kafka bounds it by quota.window.size.seconds)."""
    q = quotas_with({"127.0.0.1": 2})
    passed = [q.record_ip_connection_and_get_throttle_ms("PLAINTEXT", "127.0.0.1", T0 + i)
              for i in range(20)]  # fmt: skip
    assert passed == [0] * 20
    throttle = q.record_ip_connection_and_get_throttle_ms("PLAINTEXT", "127.0.0.1", T0 + 20)
    # (21/10.02 - 2) / 2 * 10.02 s = 0.5 s
    assert 400 <= throttle <= 1000
    assert q.ip_throttled == 1
    # a refused connection is taken back: the next one is refused alike, not worse
    again = q.record_ip_connection_and_get_throttle_ms("PLAINTEXT", "127.0.0.1", T0 + 21)
    assert 0 < again <= throttle + 5
    # other addresses have no quota
    assert q.record_ip_connection_and_get_throttle_ms("PLAINTEXT", "127.0.0.2", T0 + 22) == 0
    # 11 s later the first window has expired: room again
    assert q.record_ip_connection_and_get_throttle_ms("PLAINTEXT", "127.0.0.1", T0 + 11_500) == 0


def test_the_default_entity_applies_to_every_ip_without_its_own() -> None:
    ips: dict[str | None, int] = {None: 1, "10.0.0.1": 100}
    q = quotas_with(ips)
    assert q.connection_rate_for_ip("10.0.0.2") == 1
    assert q.connection_rate_for_ip("10.0.0.1") == 100
    for i in range(10):
        assert q.record_ip_connection_and_get_throttle_ms("L", "10.0.0.2", T0 + i) == 0
    assert q.record_ip_connection_and_get_throttle_ms("L", "10.0.0.2", T0 + 10) > 0
    assert q.record_ip_connection_and_get_throttle_ms("L", "10.0.0.1", T0 + 10) == 0


def test_a_zero_rate_refuses_every_connection_for_one_window() -> None:
    q = quotas_with({"127.0.0.1": 0}, window_seconds=2)
    assert q.record_ip_connection_and_get_throttle_ms("L", "127.0.0.1", T0) == 2000


def test_removing_a_quota_restores_the_ip_at_once() -> None:
    ips: dict[str | None, int] = {"127.0.0.1": 0}
    q = quotas_with({})
    q.ip_quotas = lambda: ips
    assert q.record_ip_connection_and_get_throttle_ms("L", "127.0.0.1", T0) > 0
    ips = {}  # the store's quotas replaced: a new mapping
    assert q.connection_rate_for_ip("127.0.0.1") == UNLIMITED
    assert q.record_ip_connection_and_get_throttle_ms("L", "127.0.0.1", T0 + 1) == 0


def test_a_changed_quota_keeps_the_ips_history() -> None:
    ips: dict[str | None, int] = {"127.0.0.1": 5}
    q = quotas_with({})
    q.ip_quotas = lambda: ips
    for i in range(20):
        assert q.record_ip_connection_and_get_throttle_ms("L", "127.0.0.1", T0 + i) == 0
    ips = {"127.0.0.1": 1}  # 20 in ~10 s is over 1/s
    assert q.record_ip_connection_and_get_throttle_ms("L", "127.0.0.1", T0 + 30) > 0


def test_broker_and_listener_rates_delay_and_the_protected_listener_is_exempt() -> None:
    q = ConnectionQuotas(
        max_connection_creation_rate=1,
        listener_connection_rates={"external": 3},
        protected_listener="INTERNAL",
    )
    q.listener_count = 2
    delays = [q.record_connection_and_get_delay_ms("EXTERNAL", T0 + i) for i in range(11)]
    assert delays[:10] == [0] * 10 and 0 < delays[10] <= 1000
    # the inter-broker listener does not count in the broker-wide rate
    assert all(q.record_connection_and_get_delay_ms("INTERNAL", T0 + 20 + i) == 0
               for i in range(20))  # fmt: skip
    q.update_broker_connection_rate(UNLIMITED)
    # the listener's own rate (3/s: 30 at once) still holds
    delays = [q.record_connection_and_get_delay_ms("EXTERNAL", T0 + 50 + i) for i in range(25)]
    assert delays[:19] == [0] * 19 and delays[-1] > 0
    assert q.rate_delayed >= 2


def test_an_ip_throttled_connection_is_taken_out_of_the_broker_rate() -> None:
    q = quotas_with({"127.0.0.1": 0}, max_connection_creation_rate=1)
    for i in range(30):
        q.record_connection_and_get_delay_ms("L", T0 + i)
        if i >= 9:
            # the broker rate counted it; the IP refusal takes it back out
            assert q.record_ip_connection_and_get_throttle_ms("L", "127.0.0.1", T0 + i) > 0
    # 9 recorded (then 21 taken back): the broker's rate has room for one more
    assert q.record_connection_and_get_delay_ms("L", T0 + 40) == 0


def test_counts_and_overrides() -> None:
    q = ConnectionQuotas(
        max_connections_per_ip=2,
        max_connections_per_ip_overrides=parse_host_counts("127.0.0.2:5, localhost:7"),
    )
    assert q.max_connections_for("127.0.0.3") == 2
    assert q.max_connections_for("127.0.0.2") == 5
    # a host name is resolved, as Kafka's InetAddress.getByName does
    assert q.max_connections_for(normalize_host("localhost", resolve=True)) == 7
    q.listener_max_connections["EXTERNAL"] = 2
    q.inc("127.0.0.1", "external")
    assert q.listener_full("EXTERNAL") is None
    q.inc("127.0.0.1", "external")
    assert q.listener_full("external") == 2 and q.listener_full("INTERNAL") is None
    q.dec("127.0.0.1", "external")
    assert q.get("127.0.0.1") == 1 and q.get("127.0.0.3") == 0
    assert q.listener_full("EXTERNAL") is None


def test_addresses_are_normalized_as_java_does() -> None:
    assert normalize_host("::ffff:127.0.0.1") == "127.0.0.1"
    assert normalize_host("[::1]") == "::1"
    assert normalize_host("0:0:0:0:0:0:0:1") == "::1"
    assert normalize_host("not-an-address") == "not-an-address"


def test_overrides_parse_as_kafkas_map() -> None:
    assert parse_host_counts("") == {}
    assert parse_host_counts("a:1,b.example:2, ::1:3") == {"a": 1, "b.example": 2, "::1": 3}
    for bad in ("a", "a:x", ":3"):
        try:
            parse_host_counts(bad)
        except ValueError:
            continue
        raise AssertionError(f"{bad!r} parsed")
