"""Start-up and shutdown of an embedded broker (``pylog.testing.broker``).

Run: ``.venv/bin/python -m pytest -q bench/test_embedded_bench.py``. Each round
starts a broker on an ephemeral loopback port with a fresh temporary log dir,
waits until it answers ApiVersions on its socket, and closes it. Target: well
under a second, so a test suite can start one per test.
"""

from __future__ import annotations

from typing import Any

from pylog.protocol.client import KafkaConnection
from pylog.testing import broker

CLIENT = {"client_software_name": "pylog-bench", "client_software_version": "1"}


def test_embedded_broker_start_serve_stop(benchmark: Any) -> None:
    def cycle() -> None:
        with broker(num_partitions=1) as b, KafkaConnection(b.bootstrap_servers) as conn:
            # ApiVersions v3: the broker answers on its socket
            assert conn.request(18, 3, CLIENT)["error_code"] == 0

    benchmark.pedantic(cycle, rounds=10, warmup_rounds=1)
