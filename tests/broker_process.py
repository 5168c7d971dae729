"""A real broker process for the integration tests: `pylog broker start` on an
ephemeral loopback port, restartable on the same port and data, and the small
confluent-kafka helpers the tests share."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

PYLOG = str(Path(sys.executable).with_name("pylog"))


class BrokerProcess:
    """`pylog broker start` on an ephemeral port; restartable on the same port and data."""

    def __init__(
        self,
        data: Path,
        overrides: dict[str, object] | None = None,
        *,
        log_path: Path | None = None,
        log_level: str | None = None,
    ) -> None:
        self.data = data
        self.overrides = dict(overrides or {})
        #: Where the broker's log (stderr) goes; inherited when None.
        self.log_path = log_path
        self.log_level = log_level or os.environ.get("PYLOG_TEST_BROKER_LOG_LEVEL", "WARNING")
        self.port = 0
        self.proc: subprocess.Popen[str] | None = None
        #: The broker's "started: <listeners>" line (every bound port).
        self.start_line = ""

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, env: dict[str, str] | None = None) -> BrokerProcess:
        cmd = [
            PYLOG, "broker", "start",
            "--log-level", self.log_level,
            "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
            "--override", f"log.dirs={self.data}",
            "--override", "socket.request.max.bytes=10000000",
            "--override", "group.initial.rebalance.delay.ms=0",
        ]  # fmt: skip
        for k, v in self.overrides.items():
            cmd += ["--override", f"{k}={v}"]
        log = open(self.log_path, "a") if self.log_path is not None else None  # noqa: SIM115
        try:
            self.proc = subprocess.Popen(
                cmd,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                env={**os.environ, **(env or {})},
            )
        finally:
            if log is not None:
                log.close()
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert "started: PLAINTEXT://127.0.0.1:" in line, f"broker did not start: {line!r}"
        self.start_line = line
        self.port = int(line.split("127.0.0.1:")[1].split()[0].rstrip(","))
        return self

    def stop(self, sig: int = signal.SIGTERM) -> int:
        assert self.proc is not None
        self.proc.send_signal(sig)
        code = self.proc.wait(30)
        self.proc = None
        return code


@contextlib.contextmanager
def metrics_broker(
    data: Path, overrides: dict[str, object] | None = None
) -> Iterator[tuple[BrokerProcess, int]]:
    """A broker process with its /metrics endpoint on a free loopback port:
    (the broker, that port); SIGKILLed at the end."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    config = {"metrics.port": port, "metrics.host": "127.0.0.1", **(overrides or {})}
    b = BrokerProcess(data, config).start()
    try:
        yield b, port
    finally:
        if b.proc is not None:
            b.stop(signal.SIGKILL)


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# ---------------------------------------------------------------- confluent-kafka


def ck_produce(
    bootstrap: str, topic: str, records: list[tuple], timeout: float = 20, **conf: object
) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf})
    errors: list[object] = []
    for key, value, headers in records:
        p.produce(topic, value=value, key=key, headers=headers,
                  on_delivery=lambda err, msg: errors.append(err) if err else None)  # fmt: skip
    assert p.flush(timeout) == 0
    assert errors == []


def ck_consume(bootstrap: str, topic: str, count: int, timeout: float = 20) -> list:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    c.assign([TopicPartition(topic, 0, 0)])
    out = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < count and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            assert m.error() is None, m.error()
            out.append((m.key(), m.value(), m.headers(), m.offset()))
    finally:
        c.close()
    return out
