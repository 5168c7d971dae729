"""Log.append_as_leader of 1 MiB batches against plain os.write of the same
bytes to the same disk, in the same run; prints both rates and their ratio.

    .venv/bin/python -m pytest -q -s bench/test_log_bench.py

Target: the log appends at >= 80% of os.write's throughput (one native
validate-and-assign call and one pwrite per batch; index entries only at
index.interval.bytes).
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from pylog import _native
from pylog.log.config import LogConfig
from pylog.log.log import Log

BATCH_BYTES = 1 << 20
BATCHES = 256  # 256 MiB per round
ROUNDS = 5


def one_mib_batch() -> bytearray:
    """One v2 batch of about 1 MiB: 64 records of 16 KiB."""
    value = os.urandom(16 * 1024 - 64)
    records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]] = [
        (b"key-%d" % i, value, [], int(time.time() * 1000)) for i in range(64)
    ]
    return bytearray(_native.build_batch(records))


def rate(fn: Callable[[], int]) -> float:
    """MiB/s of one round."""
    start = time.perf_counter()
    written = fn()
    return written / (1 << 20) / (time.perf_counter() - start)


def validate_rate(batch: bytearray) -> float:
    zero = bytes(8)
    n = 200
    start = time.perf_counter()
    for i in range(n):
        batch[0:8] = zero
        _native.validate_and_assign_offsets(
            batch,
            base_offset=i * 64,
            partition_leader_epoch=0,
            now_ms=int(time.time() * 1000),
            log_append_time=False,
            max_batch_size=2 * BATCH_BYTES,
            timestamp_before_max_ms=2**63 - 1,
            timestamp_after_max_ms=2**63 - 1,
            require_keys=False,
        )
    return n * len(batch) / (1 << 20) / (time.perf_counter() - start)


def crc_rate(data: bytes) -> float:
    n = 200
    start = time.perf_counter()
    for _ in range(n):
        _native.crc32c(data)
    return n * len(data) / (1 << 20) / (time.perf_counter() - start)


def test_log_append_vs_os_write(tmp_path: Path) -> None:
    batch = one_mib_batch()
    data = bytes(batch)
    config = LogConfig.from_props({"max.message.bytes": 2 * BATCH_BYTES})
    log_rates: list[float] = []
    raw_rates: list[float] = []
    for round_ in range(ROUNDS):
        log_dir = tmp_path / f"bench-{round_}"
        log = Log.open(str(log_dir), config)

        def append(log: Log = log) -> int:
            zero = bytes(8)
            for _ in range(BATCHES):
                # A client sends base offset 0; the append rewrote it in place.
                batch[0:8] = zero
                log.append_as_leader(batch, 0)
            return BATCHES * len(batch)

        raw_path = tmp_path / f"raw-{round_}.log"
        fd = os.open(raw_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)

        def write(fd: int = fd) -> int:
            for _ in range(BATCHES):
                os.write(fd, data)
            return BATCHES * len(data)

        # Alternate which goes first so page-cache pressure falls on both alike.
        if round_ % 2:
            raw_rates.append(rate(write))
            log_rates.append(rate(append))
        else:
            log_rates.append(rate(append))
            raw_rates.append(rate(write))
        assert log.log_end_offset == BATCHES * 64
        log.close()
        os.close(fd)
        for p in log_dir.iterdir():
            p.unlink()
        raw_path.unlink()
    log_mib = statistics.median(log_rates)
    raw_mib = statistics.median(raw_rates)
    ratio = log_mib / raw_mib
    validate_mib = validate_rate(batch)
    # Validation and the write run one after the other, so this is the best
    # the append can do with the native validator as fast as it is today.
    ceiling = 1 / (1 / validate_mib + 1 / raw_mib) / raw_mib
    print(
        f"\nLog.append_as_leader 1 MiB batches: {log_mib:8.0f} MiB/s"
        f"\nos.write same bytes:               {raw_mib:8.0f} MiB/s"
        f"\nratio: {ratio:.2f} (target >= 0.80; medians of {ROUNDS} rounds of "
        f"{BATCHES} MiB)"
        f"\nnative validate_and_assign_offsets alone: {validate_mib:8.0f} MiB/s, "
        f"crc32c alone: {crc_rate(data):8.0f} MiB/s"
        f"\nceiling for validate-then-write at these rates: {ceiling:.2f}; "
        f"the append reaches {ratio / ceiling:.0%} of it"
    )
