"""Broker-side recompression (a topic whose compression.type differs from the
producer's codec, issue 14): records/s of one ~1 MiB request recompressed from
lz4 to zstd, with 1 KiB and 100 B records, the former Python path (every record
decoded to Python objects and each batch built again) beside the native
``recompress_batches`` — measured alternately (A, B, A, B...) in one process so
machine load falls on both; medians printed with the load average.

    .venv/bin/python bench/recompress_bench.py [--rounds 7] [--source lz4] [--target zstd]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

from pylog import _native

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
NOW = 1_700_000_000_000
LIMIT = 256 << 20


def request(count: int, value_len: int, codec: int) -> bytearray:
    records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]] = [
        (
            b"key-%06d" % i,
            bytes((i * 31 + j * 7) % 251 for j in range(value_len)),
            [("trace", b"abc")],
            NOW + i,
        )
        for i in range(count)
    ]
    return bytearray(
        _native.build_batch(
            records, compression=codec, producer_id=7, producer_epoch=0, base_sequence=0
        )
    )


def python_path(buf: bytearray, codec: int) -> bytearray:
    """pylog.log.log._recompress before the native call (its code, verbatim)."""
    info = _native.analyze_records(
        buf, max_batch_size=LIMIT, deep=True, max_decompressed_size=LIMIT
    )
    if all(b.compression == codec for b in info.batches):
        return buf
    view = memoryview(buf).cast("B")
    out = bytearray()
    for b in info.batches:
        records = _native.decode_records(view[b.position : b.position + b.size])
        out += _native.build_batch(
            [(r.key, r.value, r.headers, r.timestamp) for r in records],
            compression=codec,
            producer_id=b.producer_id,
            producer_epoch=b.producer_epoch,
            base_sequence=b.base_sequence,
            is_transactional=b.is_transactional,
            timestamp_type=b.timestamp_type,
        )
    return out


def native_path(buf: bytearray, codec: int) -> bytearray:
    out = _native.recompress_batches(buf, codec, max_batch_size=LIMIT, max_decompressed_size=LIMIT)
    return buf if out is None else out


def rate(fn: Callable[[bytearray, int], bytearray], buf: bytearray, codec: int, n: int) -> float:
    """records/s over at least 0.5 s of calls."""
    calls, start = 0, time.perf_counter()
    while True:
        fn(buf, codec)
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= 0.5:
            return calls * n / elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--source", choices=CODECS, default="lz4")
    ap.add_argument("--target", choices=CODECS, default="zstd")
    args = ap.parse_args()
    source, target = CODECS[args.source], CODECS[args.target]
    print(f"{args.source} -> {args.target}, load average before: {os.getloadavg()}")
    for count, value_len in ((1000, 1024), (10_000, 100)):
        buf = request(count, value_len, source)
        assert python_path(buf, target) == native_path(buf, target), "outputs differ"
        py: list[float] = []
        native: list[float] = []
        for _ in range(args.rounds):
            py.append(rate(python_path, buf, target, count))
            native.append(rate(native_path, buf, target, count))
        p, nv = statistics.median(py), statistics.median(native)
        print(
            f"{value_len:>5} B records ({count} per {len(buf)} B request): "
            f"python {p:,.0f} rec/s, native {nv:,.0f} rec/s, x{nv / p:.2f} "
            f"(python {min(py):,.0f}..{max(py):,.0f}, "
            f"native {min(native):,.0f}..{max(native):,.0f})"
        )
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
