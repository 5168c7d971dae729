"""What TLS costs: produce and consume throughput over SSL (and SASL_SSL with
SCRAM-SHA-512) against PLAINTEXT, one broker, the same run (issue 15).

    .venv/bin/python bench/tls_bench.py [--seconds 5] [--dir DIR]

One `pylog broker start` subprocess with a PLAINTEXT, an SSL and a SASL_SSL
listener (certificates made in the temp dir, as the tests make them), driven
by librdkafka (confluent-kafka) in this process:

1. produce 1 KiB records, acks=1, a throughput-tuned producer, for --seconds
   per listener: MB/s, and the broker's CPU seconds per GB received;
2. consume everything one listener's producer wrote, from the beginning,
   over each listener: MB/s and broker CPU per GB sent. Over PLAINTEXT the
   records go from the segment file to the socket with sendfile; over TLS
   they are read into the broker and written through the TLS transport
   (sendfile cannot encrypt), which is the cost measured here.

Each TLS figure is printed beside the PLAINTEXT one of the same run. Loads
are bounded in time; nothing fails on timing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from broker_bench import THROUGHPUT_PRODUCER, KiB, MiB  # noqa: E402
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from security_support import listener_ports, make_certs, secure_listeners  # noqa: E402
from storage_bench import Figure, print_table  # noqa: E402

USER, PASSWORD = "bench", "bench-scram-secret"


class Broker:
    def __init__(self, workdir: Path) -> None:
        certs = make_certs(workdir / "certs")
        self.certs = certs
        overrides = secure_listeners(certs, **{"log.dirs": str(workdir / "data"),
                                              "num.partitions": 1})  # fmt: skip
        overrides["listener.name.ssl.ssl.client.auth"] = "none"
        cmd = [str(Path(sys.executable).with_name("pylog")), "broker", "start",
               "--log-level", "WARNING"]  # fmt: skip
        for k, v in overrides.items():
            cmd += ["--override", f"{k}={v}"]
        self.stderr = open(workdir / "broker.stderr", "w+b")  # noqa: SIM115
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.stderr)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().decode()
        if "started:" not in line:
            self.proc.kill()
            raise RuntimeError(f"broker did not start: {line!r}")
        self.ports = listener_ports(line)
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{self.ports['PLAINTEXT']}"})
        for f in admin.alter_user_scram_credentials([
            UserScramCredentialUpsertion(
                USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), PASSWORD.encode()
            )
        ]).values():  # fmt: skip
            f.result(timeout=20)

    def conf(self, listener: str) -> dict[str, Any]:
        conf: dict[str, Any] = {"bootstrap.servers": f"127.0.0.1:{self.ports[listener]}",
                                "security.protocol": listener}  # fmt: skip
        if listener != "PLAINTEXT":
            conf["ssl.ca.location"] = str(self.certs.ca)
        if listener == "SASL_SSL":
            conf.update({"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": USER,
                         "sasl.password": PASSWORD})  # fmt: skip
        return conf

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def create_topic(self, name: str) -> None:
        admin = AdminClient(self.conf("PLAINTEXT"))
        for fut in admin.create_topics([NewTopic(name, 1, 1)]).values():
            fut.result(timeout=15)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.stderr.close()


def produce_for(conf: dict[str, Any], topic: str, seconds: float) -> tuple[int, float]:
    """1 KiB records for ``seconds`` (then flush): (bytes, elapsed)."""
    errors: list[KafkaError] = []
    p = Producer({**conf, **THROUGHPUT_PRODUCER,
                  "on_delivery": lambda err, _m: errors.append(err) if err else None})  # fmt: skip
    messages = [{"value": os.urandom(KiB)} for _ in range(64)] * 4
    p.produce_batch(topic, messages[:1], partition=0)
    p.flush(15)
    sent, start = 0, time.perf_counter()
    while time.perf_counter() < start + seconds:
        if len(p) > 64 * 1024:
            p.poll(0.001)
            continue
        sent += p.produce_batch(topic, messages, partition=0)
        p.poll(0)
    left = p.flush(60)
    elapsed = time.perf_counter() - start
    if left or errors:
        raise RuntimeError(f"{left} records not delivered, errors: {errors[:3]}")
    return (sent + 1) * KiB, elapsed


def consume_all(
    conf: dict[str, Any], topic: str, expected: int, seconds: float
) -> tuple[int, float]:
    """Read every record from the beginning: (bytes, elapsed)."""
    c = Consumer({**conf, "group.id": "tls-bench", "enable.auto.commit": False,
                  "fetch.max.bytes": 64 * MiB, "max.partition.fetch.bytes": 16 * MiB,
                  "fetch.wait.max.ms": 100, "queued.max.messages.kbytes": 256 * KiB,
                  "queued.min.messages": 1_000_000, "check.crcs": False})  # fmt: skip
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got, size, start = 0, 0, time.perf_counter()
    try:
        while got < expected and time.perf_counter() < start + seconds:
            for m in c.consume(num_messages=100_000, timeout=0.5):
                if m.error() is not None:
                    raise RuntimeError(f"consume error: {m.error()}")
                got += 1
                size += len(m.value() or b"")
        return size, time.perf_counter() - start
    finally:
        c.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--dir", default=None, help="scratch directory (default: a temp dir)")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="pylog-tls-bench-", dir=args.dir))
    broker = Broker(workdir)
    figures: list[Figure] = []
    try:
        listeners = ("PLAINTEXT", "SSL", "SASL_SSL")
        produced: dict[str, tuple[float, float]] = {}
        topic = "tls-bench-PLAINTEXT"
        counts: dict[str, int] = {}
        for listener in listeners:
            name = f"tls-bench-{listener}"
            broker.create_topic(name)
            cpu = broker.cpu_seconds()
            n, elapsed = produce_for(broker.conf(listener), name, args.seconds)
            cpu = broker.cpu_seconds() - cpu
            counts[name] = n // KiB
            produced[listener] = (n / elapsed / MiB, cpu / (n / (1 << 30)))
            print(f"  produce over {listener}: {produced[listener][0]:.1f} MB/s", file=sys.stderr)
        consumed: dict[str, tuple[float, float]] = {}
        for listener in listeners:
            cpu = broker.cpu_seconds()
            size, elapsed = consume_all(broker.conf(listener), topic, counts[topic],
                                        max(30.0, 4 * args.seconds))  # fmt: skip
            cpu = broker.cpu_seconds() - cpu
            consumed[listener] = (size / elapsed / MiB, cpu / (size / (1 << 30)))
            print(f"  consume over {listener}: {consumed[listener][0]:.1f} MB/s", file=sys.stderr)
        for what, table in (("produce 1 KiB acks=1", produced), ("consume", consumed)):
            base, base_cpu = table["PLAINTEXT"]
            for listener in ("SSL", "SASL_SSL"):
                rate, cpu = table[listener]
                figures.append(
                    Figure(
                        f"{what} over {listener}",
                        f"{rate:.1f} MB/s ({cpu:.1f} broker CPU s/GB)",
                        f"PLAINTEXT {base:.1f} MB/s ({base_cpu:.1f} CPU s/GB)",
                        f"{rate / base:.2f}x",
                        "measured (issue 15)",
                    )
                )
    finally:
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    print_table(figures)


if __name__ == "__main__":
    main()
