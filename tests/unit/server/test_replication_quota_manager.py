"""ReplicationQuotaManager's arithmetic on a manual clock: the
AlterLogDirsReplication quota (``replica.alter.log.dirs.io.max.bytes.per.second``)
measured as Kafka's SimpleRate, the wait it asks of a throttled copy, a
bound changed on the fly; the ReplicaAlterLogDirsManager's spread of
partitions over its threads and the truncations it keeps for them."""

from __future__ import annotations

from pathlib import Path

from support.clock import ManualClock

from pylog.common.metrics.sampled_stat import Rate, SimpleRate
from pylog.common.topic_partition import TopicPartition
from pylog.log.manager import LogManager
from pylog.metadata.json_store import JsonMetadataStore
from pylog.server.replica_alter_log_dirs_thread import Truncation
from pylog.server.replica_manager import ReplicaManager
from pylog.server.replication_quota_manager import UNBOUNDED, QuotaType, ReplicationQuotaManager

MB = 1_000_000


def moves_quota(bound: int, clock: ManualClock) -> ReplicationQuotaManager:
    return ReplicationQuotaManager(
        1, bound, quota_type=QuotaType.ALTER_LOG_DIRS_REPLICATION, clock=clock
    )


def test_simple_rate_counts_the_first_window_whole_then_the_time_since_the_oldest() -> None:
    simple, windowed = SimpleRate(11, 1000), Rate(11, 1000)
    for stat in (simple, windowed):
        stat.record(4 * MB, 0)
    # 100 ms in: a SimpleRate measures over one window, Kafka's Rate over ten.
    assert simple.measure(100) == 4 * MB
    assert windowed.measure(100) == 4 * MB / 10.1
    # 2.5 s in: the time since the oldest sample began.
    simple.record(6 * MB, 2500)
    assert simple.measure(2500) == 10 * MB / 2.5
    # Past samples * window (11 s) the first sample is forgotten.
    assert simple.measure(11_000) == 6 * MB / 8.5


def test_a_copy_waits_until_the_bytes_copied_fit_the_bound() -> None:
    clock = ManualClock(0)
    q = moves_quota(4 * MB, clock)
    assert q.throttle_time_ms() == 0  # nothing copied yet
    q.record(4 * MB)  # one window's worth at once: exactly at the bound
    assert not q.is_quota_exceeded() and q.throttle_time_ms() == 0
    q.record(2 * MB)  # 6 MB over the first window: 1.5 s' worth
    assert q.is_quota_exceeded()
    wait = q.throttle_time_ms()
    assert 1500 <= wait <= 1501  # 6 MB at 4 MB/s: 1.5 s from the start
    clock.advance(wait)
    assert not q.is_quota_exceeded() and q.throttle_time_ms() == 0
    # Copying only when the wait is 0 keeps the bytes within bound * time
    # (plus the last round): the lower bound test_jbod asserts on a move.
    copied, rounds = 6 * MB, 0
    while clock.now_ms < 10_000:
        if q.throttle_time_ms() == 0:
            q.record(400_000)
            copied += 400_000
            rounds += 1
        clock.advance(10)
    assert copied <= 4 * MB * 10 + 400_000
    assert copied >= 4 * MB * 10 - 400_000  # and it does move at the bound
    assert rounds > 0


def test_an_unbounded_quota_never_waits_and_a_new_bound_applies_at_once() -> None:
    clock = ManualClock(0)
    q = moves_quota(UNBOUNDED, clock)
    q.record(10**12)
    assert not q.is_quota_exceeded() and q.throttle_time_ms() == 0
    assert q.rate() == 10**12  # measured all the same: a bound set later counts it
    q.update_quota(1 * MB)
    assert q.is_quota_exceeded()
    assert q.throttle_time_ms() > 0
    q.update_quota(UNBOUNDED)  # kafka-configs --delete-config: back to the default
    assert q.throttle_time_ms() == 0


def test_a_zero_bound_lets_one_round_through_per_measured_span() -> None:
    """As Kafka's (a rate of 0 is within a bound of 0): nothing recorded
    in the live samples, one round may go."""
    clock = ManualClock(0)
    q = moves_quota(0, clock)
    assert q.throttle_time_ms() == 0
    q.record(1)
    for _ in range(10):
        clock.advance(1000)
        assert q.throttle_time_ms() > 0
    clock.advance(1000)  # 11 s: the sample is forgotten
    assert q.throttle_time_ms() == 0


def test_moves_have_no_replica_list() -> None:
    """Leader and follower throttles apply to listed replicas; the moves'
    quota is asked for every move (is_throttled is not consulted)."""
    q = ReplicationQuotaManager(1, 5 * MB)
    tp = TopicPartition("t", 0)
    assert not q.is_throttled(tp, ())
    assert q.is_throttled(tp, ("0:1",)) and not q.is_throttled(tp, ("0:2",))


def test_moves_spread_over_the_threads_and_truncations_add_up(tmp_path: Path) -> None:
    dirs = [tmp_path / d for d in "abc"]
    with LogManager({"log.dirs": [str(d) for d in dirs]}) as lm:
        store = JsonMetadataStore(str(dirs[0]))
        # Unset: one thread per log directory (Kafka's getNumReplicaAlterLogDirsThreads).
        rm = ReplicaManager(lm, store)
        assert rm.alter_log_dirs_manager.num_threads == 3
        rm = ReplicaManager(lm, store, alter_log_dirs_threads=2)
        m = rm.alter_log_dirs_manager
        assert len(m.threads) == 2
        ids = {m.fetcher_id(TopicPartition("orders", p)) for p in range(8)}
        assert ids == {0, 1}
        # Off the event loop partitions are only noted (started on it).
        tps = [TopicPartition("orders", p) for p in range(8)]
        m.add_partitions(tps)
        assert m.partitions == set(tps)
        for tp in tps:
            assert tp in m.threads[m.fetcher_id(tp)].partitions
        m.remove_partitions(tps[:4])
        assert m.partitions == set(tps[4:])

        tp = tps[0]
        m.mark_partitions_for_truncation(tp, 90)
        m.mark_partitions_for_truncation(tp, 120)
        assert m.take_truncation(tp) == Truncation(90, False)
        assert m.take_truncation(tp) is None
        m.mark_partitions_for_truncation(tp, 80)
        m.mark_partitions_for_truncation(tp, 50, full=True)
        m.mark_partitions_for_truncation(tp, 70)
        assert m.take_truncation(tp) == Truncation(50, True)
        m.shutdown()
        store.close()
