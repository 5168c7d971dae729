"""Apache Kafka and pylog, started once for the session with the same
configuration, for the differential tests (diff_harness.py says how responses
are compared)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from broker_process import BrokerProcess
from kafka_tools import start_kafka

from pylog.protocol import ApiKey
from pylog.protocol.client import KafkaConnection

from .diff_harness import CONFIG, Pair


@dataclass
class Brokers:
    kafka: str
    pylog: str
    kafka_versions: dict[int, tuple[int, int]]
    pylog_versions: dict[int, tuple[int, int]]

    def pair(self, client_id: str = "differential") -> Pair:
        return Pair(self.kafka, self.pylog, client_id)


def advertised(bootstrap: str) -> dict[int, tuple[int, int]]:
    with KafkaConnection(bootstrap, client_id="differential") as c:
        r = c.request(
            ApiKey.API_VERSIONS,
            3,
            {"client_software_name": "pylog-differential", "client_software_version": "1"},
        )
    assert r.error_code == 0, r
    return {a.api_key: (a.min_version, a.max_version) for a in r.api_keys}


def warm_up(bootstrap: str, timeout: float = 60) -> None:
    """Until the broker's coordinators answer: Kafka's producer-id manager
    fetches its first block from the controller, and both brokers create
    __consumer_offsets on the first FindCoordinator. Start-up, not behaviour."""
    deadline = time.monotonic() + timeout
    with KafkaConnection(bootstrap, client_id="differential-warm-up") as c:
        while True:
            pid = c.request(
                ApiKey.INIT_PRODUCER_ID,
                4,
                {"transactional_id": None, "transaction_timeout_ms": 60000},
            )
            fc = c.request(
                ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["warm-up"]}
            )
            if pid.error_code == 0 and fc.coordinators[0].error_code == 0:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"{bootstrap}: coordinators not ready: {pid} {fc}")
            time.sleep(0.2)


def ready(kafka: str, pylog: str) -> Brokers:
    for b in (kafka, pylog):
        warm_up(b)
    return Brokers(kafka, pylog, advertised(kafka), advertised(pylog))


@pytest.fixture(scope="session")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Brokers]:
    """Kafka (KRaft, one JVM) and a pylog broker, up for the whole session.

    PYLOG_DIFFERENTIAL_BROKERS=<kafka host:port>,<pylog host:port> uses two
    brokers already running (while writing a scenario; topic names carry a
    per-session suffix, so runs do not collide)."""
    running = os.environ.get("PYLOG_DIFFERENTIAL_BROKERS")
    if running:
        k, p = running.split(",")
        yield ready(k, p)
        return
    work: Path = tmp_path_factory.mktemp("differential")
    pylog = BrokerProcess(
        work / "pylog",
        {"node.id": 1, **CONFIG},
        log_path=work / "pylog.log",
    ).start()
    kafka: Any = None
    try:
        kafka = start_kafka(work, extra=CONFIG)
        yield ready(kafka.bootstrap, pylog.bootstrap)
    finally:
        if kafka is not None:
            kafka.stop()
        pylog.stop()
        if os.environ.get("PYLOG_DIFFERENTIAL_KEEP"):
            print(f"differential: data kept in {work}")


@pytest.fixture
def pair(brokers: Brokers) -> Iterator[Pair]:
    with brokers.pair() as p:
        yield p
