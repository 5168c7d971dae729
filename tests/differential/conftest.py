"""Apache Kafka and pylog, started once for the session with the same
configuration, for the differential tests (diff_harness.py says how responses
are compared)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from broker_process import BrokerProcess
from diff_harness import CONFIG, Pair
from kafka_tools import start_kafka

from pylog.protocol import ApiKey
from pylog.protocol.client import KafkaConnection

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
        r = c.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "pylog-differential",
                                               "client_software_version": "1"})
    assert r.error_code == 0, r
    return {a.api_key: (a.min_version, a.max_version) for a in r.api_keys}


@pytest.fixture(scope="session")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Brokers]:
    """Kafka (KRaft, one JVM) and a pylog broker, up for the whole session.

    PYLOG_DIFFERENTIAL_BROKERS=<kafka host:port>,<pylog host:port> uses two
    brokers already running (while writing a scenario; topic names carry a
    per-session suffix, so runs do not collide)."""
    running = os.environ.get("PYLOG_DIFFERENTIAL_BROKERS")
    if running:
        k, p = running.split(",")
        yield Brokers(k, p, advertised(k), advertised(p))
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
        yield Brokers(
            kafka.bootstrap,
            pylog.bootstrap,
            advertised(kafka.bootstrap),
            advertised(pylog.bootstrap),
        )
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
