"""pylog's partition suite: three real broker processes on a real ZooKeeper,
every link through a fault proxy (``LocalCluster(network_faults=True)``),
stock clients recording every operation, a nemesis cutting, resetting,
pausing and killing, and a Jepsen-style checker over the history and the
brokers' segment files (tests/partition_workload.py says what it checks: lost writes, reused
offsets, duplicates, diverging replicas, phantom and aborted reads, and
acks=all below min.insync.replicas).

``make test`` runs each fault once, in a fixed order; ``make soak`` runs
random faults for ``PYLOG_SOAK_SECONDS`` (an hour) with the seed printed, so
a failing schedule can be run again with ``PYLOG_SOAK_SEED``."""

from __future__ import annotations

import os
import random
import time
from collections import Counter
from pathlib import Path

import pytest
from partition_workload import Nemesis, run_schedule

from pylog.testing import LocalCluster, ZooKeeperServer

#: Shorter than the test cluster's defaults so that a fault held for HOLD
#: seconds outlasts both: a cut follower leaves the ISR, a broker cut from
#: ZooKeeper loses its session. Socket timeouts of 10 s (30 s in Kafka) bound
#: how long a severed connection goes unnoticed.
OVERRIDES = {
    "replica.lag.time.max.ms": "5000",
    "zookeeper.session.timeout.ms": "6000",
    "replica.socket.timeout.ms": "10000",
    "controller.socket.timeout.ms": "10000",
    # the transaction coordinator's marker channel (Kafka's request.timeout.ms)
    "request.timeout.ms": "10000",
    "offsets.topic.replication.factor": "3",
}
HOLD = float(os.environ.get("PYLOG_PARTITION_HOLD", "8"))

SCHEDULE = list(Nemesis.ALL)
#: ``PYLOG_PARTITION_FAULTS=kill_follower*6,isolate_leader`` runs those faults
#: in that order instead (to repeat one while chasing it).
if os.environ.get("PYLOG_PARTITION_FAULTS"):
    SCHEDULE = [
        name
        for item in os.environ["PYLOG_PARTITION_FAULTS"].split(",")
        for name in [item.partition("*")[0].strip()] * int(item.partition("*")[2] or 1)
    ]


def _report(line: str) -> None:
    print(line, flush=True)


def test_every_fault_once_loses_nothing_and_recovers(
    pylog_zookeeper: ZooKeeperServer, tmp_path: Path
) -> None:
    # In tmp_path, which pytest keeps: a failed run's broker logs stay readable.
    with LocalCluster(
        3, OVERRIDES, zookeeper=pylog_zookeeper, network_faults=True, directory=str(tmp_path)
    ) as cluster:
        problems, recoveries, history = run_schedule(
            cluster, list(SCHEDULE), hold=HOLD, report=_report
        )
    assert len(history.acks) > 1000, f"only {len(history.acks)} records acknowledged"
    assert history.polls, "the consumer read nothing"
    assert history.commits, "the consumer committed nothing"
    outcomes = set(history.outcome.values())
    assert {"committed", "aborted"} <= outcomes, f"transactions ended only {outcomes}"
    assert [r.fault for r in recoveries] == SCHEDULE
    assert not problems, "\n".join(problems[:50])


@pytest.mark.skipif(
    not os.environ.get("PYLOG_SOAK_SECONDS"), reason="make soak sets PYLOG_SOAK_SECONDS"
)
def test_soak_random_faults(pylog_zookeeper: ZooKeeperServer, tmp_path: Path) -> None:
    seconds = float(os.environ["PYLOG_SOAK_SECONDS"])
    seed = int(os.environ.get("PYLOG_SOAK_SEED") or time.time())
    print(f"soak: {seconds:.0f} s, PYLOG_SOAK_SEED={seed}", flush=True)
    rng = random.Random(seed)
    deadline = time.monotonic() + seconds

    def next_fault() -> str | None:
        return rng.choice(Nemesis.ALL) if time.monotonic() < deadline else None

    with LocalCluster(
        3, OVERRIDES, zookeeper=pylog_zookeeper, network_faults=True, directory=str(tmp_path)
    ) as cluster:
        # Holds from under a follower's lag time to past the socket timeouts
        # (replica.socket.timeout.ms, 30 s), so requests time out mid-cut too.
        problems, recoveries, history = run_schedule(
            cluster, next_fault, hold=(HOLD / 2, 5 * HOLD), seed=seed, report=_report
        )
    ended = Counter(history.outcome.values())
    print(f"soak: {len(recoveries)} faults, {len(history.acks)} acks, "
          f"{len(history.polls)} polls, {len(history.commits)} commits, "
          f"transactional records {dict(ended)}", flush=True)  # fmt: skip
    for fault in sorted({r.fault for r in recoveries}):
        isr = sorted(r.isr_full for r in recoveries if r.fault == fault)
        print(f"  {fault}: {len(isr)} times, full ISR after {isr[0]:.1f}-{isr[-1]:.1f} s")
    assert not problems, "\n".join(problems[:50])
