"""End-to-end storage figures for `make bench`, each beside a baseline measured
in the same run on the same bytes and disk.

    .venv/bin/python bench/storage_bench.py [--recovery-gib 2] [--dir DIR]

Prints one table: validate + assign offsets (1 MiB batches, one core) against
a pure-Python parse + CRC32C; Log.append of 1 MiB batches against os.write;
an offset-index lookup called from Python against the cheapest native call;
recovery of N GiB of segments against `cat` of the same files; the RSS of a
LogManager holding 1,000 idle partitions. Nothing here fails on timing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pylog import _native

MiB = 1 << 20


@dataclass
class Figure:
    name: str
    value: str
    baseline: str
    ratio: str
    target: str


def best_of(fn: Callable[[], object], repeat: int = 5, number: int = 1) -> float:
    """Fastest wall time of ``number`` calls, over ``repeat`` tries, per call."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - start) / number)
    return best


def one_mib_batch(record_size: int = 1024) -> bytes:
    """An uncompressed v2 batch of ~1 MiB made of ``record_size``-byte values."""
    count = MiB // (record_size + 16)
    value = os.urandom(record_size)
    records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]] = [
        (None, value, [], 1_700_000_000_000 + i) for i in range(count)
    ]
    return _native.build_batch(records)


# ---------------------------------------------------------------- validate + assign


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7


def python_validate(buf: bytes) -> int:
    """The baseline: parse a v2 batch's header and every record's framing in
    Python, and check its CRC32C with the C extension of the `crc32c` package."""
    import crc32c

    (_base, length, _epoch, magic, crc, _attrs, last_delta) = struct.unpack_from(">qiibIhi", buf, 0)
    count: int = struct.unpack_from(">i", buf, 57)[0]
    assert magic == 2 and count == last_delta + 1
    if crc32c.crc32c(buf[21 : 12 + length]) != crc:
        raise ValueError("crc")
    pos = 61
    for _ in range(count):
        size, pos = _read_varint(buf, pos)
        end = pos + size
        pos += 1  # attributes
        _ts, pos = _read_varint(buf, pos)
        _od, pos = _read_varint(buf, pos)
        klen, pos = _read_varint(buf, pos)
        pos += max(klen, 0)
        vlen, pos = _read_varint(buf, pos)
        pos += max(vlen, 0)
        headers, pos = _read_varint(buf, pos)
        assert headers == 0 and pos == end
    return count


def bench_validate() -> Figure:
    batch = one_mib_batch()
    buf = bytearray(batch)

    zero = bytes(8)

    def native() -> None:
        buf[0:8] = zero  # a client's batch arrives with base offset 0 (Kafka checks)
        _native.validate_and_assign_offsets(
            buf,
            base_offset=1000,
            partition_leader_epoch=3,
            now_ms=1_700_000_000_000,
            log_append_time=False,
            max_batch_size=1048588,
            timestamp_before_max_ms=2**63 - 1,
            timestamp_after_max_ms=2**63 - 1,
            require_keys=False,
        )

    t_native = best_of(native, repeat=7, number=20)
    t_python = best_of(lambda: python_validate(batch), repeat=3)
    gbps = len(batch) / t_native / 1e9
    return Figure(
        "validate + assign offsets, 1 MiB batch",
        f"{gbps:.2f} GB/s",
        f"pure-Python parse + CRC32C {len(batch) / t_python / 1e9:.3f} GB/s",
        f"{t_python / t_native:.0f}x",
        ">= 3 GB/s",
    )


# ---------------------------------------------------------------- Log.append vs os.write


def bench_append(workdir: str, total_mib: int = 512) -> Figure:
    """Log.append_as_leader against os.write of the same 1 MiB batches.

    Each batch is copied into a fresh bytearray just before it is written, as
    a request buffer arrives from the socket (hot in cache); only the append
    or the write itself is timed, for both alike.
    """
    from pylog.log import Log, LogConfig

    batch = one_mib_batch()
    n = total_mib
    plain_path = os.path.join(workdir, "plain.bin")
    log_dir = os.path.join(workdir, "bench-0")

    def plain() -> float:
        fd = os.open(plain_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        spent = 0.0
        try:
            for _ in range(n):
                buf = bytearray(batch)
                start = time.perf_counter()
                os.write(fd, buf)
                spent += time.perf_counter() - start
        finally:
            os.close(fd)
        return spent

    def via_log() -> float:
        shutil.rmtree(log_dir, ignore_errors=True)
        log = Log.open(log_dir, LogConfig())
        spent = 0.0
        try:
            for _ in range(n):
                buf = bytearray(batch)
                start = time.perf_counter()
                log.append_as_leader(buf, leader_epoch=0)
                spent += time.perf_counter() - start
        finally:
            log.close()
        return spent

    # alternate, so page-cache and writeback pressure hit both alike
    t_plain = t_log = float("inf")
    for _ in range(3):
        t_plain = min(t_plain, plain())
        t_log = min(t_log, via_log())
    size = n * len(batch)
    return Figure(
        f"Log.append, {n} x 1 MiB batches",
        f"{size / t_log / 1e9:.2f} GB/s",
        f"os.write {size / t_plain / 1e9:.2f} GB/s",
        f"{t_plain / t_log:.2f}",
        ">= 0.80 of os.write",
    )


# ---------------------------------------------------------------- offset lookup


def bench_lookup(workdir: str) -> Figure:
    path = os.path.join(workdir, "00000000000000000000.index")
    index = _native.OffsetIndex(path, 0, max_index_size=10 * MiB)
    for i in range(index.max_entries):
        index.append(i * 10, i * 1024)
    targets = [(i * 7919) % (index.max_entries * 10) for i in range(10_000)]
    lookup = index.lookup
    cheapest = _native.crc32c

    def lookups() -> None:
        for t in targets:
            lookup(t)

    def trivial() -> None:
        for _ in targets:
            cheapest(b"")

    t_lookup = best_of(lookups, repeat=7) / len(targets)
    t_trivial = best_of(trivial, repeat=7) / len(targets)
    index.close()
    return Figure(
        f"OffsetIndex.lookup from Python ({index.entries:,} entries)",
        f"{t_lookup * 1e9:.0f} ns",
        f"trivial native call {t_trivial * 1e9:.0f} ns",
        f"{t_lookup / t_trivial:.2f}",
        "<= 1 us",
    )


# ---------------------------------------------------------------- recovery vs cat


def write_segments(workdir: str, gib: float) -> list[str]:
    batch = bytearray(one_mib_batch())
    records = struct.unpack_from(">i", batch, 57)[0]
    per_segment = 1024  # 1 GiB segments, Kafka's default segment.bytes
    total = int(gib * 1024)
    paths = []
    offset = 0
    for s in range(0, total, per_segment):
        path = os.path.join(workdir, f"{offset:020d}.log")
        with open(path, "wb") as f:
            for _ in range(min(per_segment, total - s)):
                struct.pack_into(">q", batch, 0, offset)  # outside the CRC's range
                f.write(batch)
                offset += records
        paths.append(path)
    return paths


def bench_recovery(workdir: str, gib: float) -> Figure:
    paths = write_segments(workdir, gib)
    size = sum(os.path.getsize(p) for p in paths)

    def cat() -> None:
        subprocess.run(["cat", *paths], stdout=subprocess.DEVNULL, check=True)

    def recover() -> None:
        for p in paths:
            base = int(os.path.basename(p)[:20])
            oi = _native.OffsetIndex(p[:-4] + ".index", base, max_index_size=10 * MiB)
            ti = _native.TimeIndex(p[:-4] + ".timeindex", base, max_index_size=10 * MiB)
            result = _native.recover_segment(
                p, oi, ti, index_interval_bytes=4096, max_batch_size=2**31 - 1
            )
            assert result.error is None and result.valid_bytes == os.path.getsize(p)
            oi.close()
            ti.close()

    cat()  # both read from the page cache
    t_cat = best_of(cat, repeat=3)
    t_recover = best_of(recover, repeat=3)
    return Figure(
        f"recovery of {size / (1 << 30):.1f} GiB of segments",
        f"{size / t_recover / 1e9:.2f} GB/s",
        f"cat {size / t_cat / 1e9:.2f} GB/s",
        f"{t_cat / t_recover:.2f}",
        ">= 1 GB/s",
    )


# ---------------------------------------------------------------- idle partitions RSS


def bench_idle_partitions(workdir: str) -> Figure:
    # the harness of bench/test_manager_bench.py: partitions loaded from disk in a
    # fresh process after a clean shutdown, against that process before loading
    from test_manager_bench import PARTITIONS, measure

    r = measure(Path(workdir) / "idle")["clean"]
    after, before = r["rss_kb"] / 1024, r["baseline_kb"] / 1024
    return Figure(
        f"LogManager RSS, {PARTITIONS:,} idle partitions",
        f"{after:.0f} MB",
        f"interpreter + pylog, no logs {before:.0f} MB",
        f"+{(after - before) * 1024 / PARTITIONS:.1f} KB/partition",
        "< 200 MB",
    )


def print_table(figures: list[Figure]) -> None:
    """The figures as one aligned table (shared by bench/broker_bench.py)."""
    headers = ("figure", "pylog", "baseline (same run)", "ratio", "target")
    rows = [headers] + [(f.name, f.value, f.baseline, f.ratio, f.target) for f in figures]
    widths = [max(len(r[i]) for r in rows) for i in range(len(headers))]
    print()
    for n, row in enumerate(rows):
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)))
        if n == 0:
            print("  ".join("-" * w for w in widths))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recovery-gib", type=float, default=2.0)
    parser.add_argument("--dir", default=None, help="scratch directory (default: a temp dir)")
    args = parser.parse_args()

    workdir = tempfile.mkdtemp(prefix="pylog-bench-", dir=args.dir)
    figures = []
    try:
        for step in (
            bench_validate,
            lambda: bench_append(workdir),
            lambda: bench_lookup(workdir),
            lambda: bench_recovery(workdir, args.recovery_gib),
            lambda: bench_idle_partitions(workdir),
        ):
            fig = step()
            figures.append(fig)
            print(f"  {fig.name}: {fig.value} ({fig.baseline})", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    print_table(figures)


if __name__ == "__main__":
    main()
