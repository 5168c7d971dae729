"""Log compaction throughput for `make bench`, beside a plain copy of the same
segment files in the same run.

    .venv/bin/python bench/cleaner_bench.py [--mb 1024] [--dir DIR]

Builds a dirty compacted log of ``--mb`` MiB (env PYLOG_BENCH_CLEANER_MB,
default 1024) whose records carry 10% unique keys (each key written 10 times,
~112-byte records, 1 MiB segments of uncompressed batches), then, in a fresh
process, runs one full clean (offset map + copy loop + swap) and reports its
throughput, its ratio to ``shutil.copyfile`` of the same segments, and the
peak RSS growth of the cleaning process beside the dedupe buffer size.
Nothing here fails on timing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

MiB = 1 << 20
TOPIC = "bench-compacted"
CHUNK_RECORDS = 8000  # ~1 MiB appended per call
DEDUPE = 64 * MiB

TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    "segment.bytes": 64 * MiB,
    "min.cleanable.dirty.ratio": 0.01,
    "file.delete.delay.ms": 0,
    "max.message.bytes": 2 * MiB,
}


def broker_props(d: str) -> dict[str, object]:
    return {
        "log.dirs": [d],
        "log.cleaner.enable": False,
        "log.cleaner.dedupe.buffer.size": DEDUPE,
        "log.cleaner.io.buffer.size": 2 * MiB,
    }


def generate(d: str, mb: int) -> int:
    """Write the dirty log; returns its bytes."""
    from pylog import _native
    from pylog.common.topic_partition import TopicPartition
    from pylog.log.manager import LogManager

    m = LogManager(broker_props(d), topic_configs={TOPIC: TOPIC_CONFIG})
    log = m.get_or_create_log(TopicPartition(TOPIC, 0))
    now = int(time.time() * 1000)
    value = b"v" * 96
    # Each distinct chunk holds CHUNK_RECORDS distinct keys; appending every
    # chunk 10 times round-robin gives each key 10 versions: 10% unique.
    total_chunks = max(10, mb * MiB // (CHUNK_RECORDS * 112))
    distinct = max(1, total_chunks // 10)
    chunks: list[bytes] = []
    for c in range(distinct):
        out = bytearray()
        for b in range(0, CHUNK_RECORDS, 100):
            recs = [(b"key-%09d" % (c * CHUNK_RECORDS + b + i), value, [], now) for i in range(100)]
            out += _native.build_batch(recs)
        chunks.append(bytes(out))
    for i in range(distinct * 10):
        log.append_as_leader(bytearray(chunks[i % distinct]), 0)
    log.roll()
    size = log.size
    m.shutdown()
    return size


def _rss_anon() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    return 0


def clean(d: str) -> dict[str, float]:
    """One full clean in this (fresh) process; times and memory."""
    from pylog.common.topic_partition import TopicPartition
    from pylog.log.manager import LogManager

    m = LogManager(broker_props(d), topic_configs={TOPIC: TOPIC_CONFIG})
    log = m.get_log(TopicPartition(TOPIC, 0))
    assert log is not None
    log.update_high_watermark(log.log_end_offset)
    size_before = log.size
    # Anonymous memory only: ru_maxrss would count the segment pages the
    # loader's native scans mapped, which are page cache, not the cleaner's.
    rss_before = _rss_anon()
    peak = [rss_before]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.005):
            peak[0] = max(peak[0], _rss_anon())

    sampler = threading.Thread(target=sample)
    sampler.start()
    t0 = time.perf_counter()
    assert m.cleaner.clean_once()
    elapsed = time.perf_counter() - t0
    done.set()
    sampler.join()
    peak[0] = max(peak[0], _rss_anon())
    metrics = m.cleaner.metrics()
    size_after = log.size
    m.shutdown()
    return {
        "elapsed": elapsed,
        "size_before": size_before,
        "size_after": size_after,
        "rss_growth": peak[0] - rss_before,
        "recopy_percent": metrics["cleaner_recopy_percent"],
    }


def copy_baseline(d: str, dest: str) -> float:
    part = os.path.join(d, f"{TOPIC}-0")
    os.makedirs(dest, exist_ok=True)
    t0 = time.perf_counter()
    for name in sorted(os.listdir(part)):
        if name.endswith(".log"):
            shutil.copyfile(os.path.join(part, name), os.path.join(dest, name))
    for name in os.listdir(dest):
        fd = os.open(os.path.join(dest, name), os.O_RDONLY)
        os.fsync(fd)  # the cleaner flushes its output too
        os.close(fd)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=int(os.environ.get("PYLOG_BENCH_CLEANER_MB", 1024)))
    ap.add_argument("--dir", default=None)
    ap.add_argument("--clean-only", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.clean_only:
        print(json.dumps(clean(args.clean_only)))
        return
    root = tempfile.mkdtemp(prefix="pylog-cleaner-bench-", dir=args.dir)
    try:
        data = os.path.join(root, "data")
        t0 = time.perf_counter()
        size = generate(data, args.mb)
        gen_s = time.perf_counter() - t0
        copy_s = copy_baseline(data, os.path.join(root, "copy"))
        shutil.rmtree(os.path.join(root, "copy"))
        out = subprocess.run(
            [sys.executable, __file__, "--clean-only", data],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        r = json.loads(out.strip().splitlines()[-1])
        mib = size / MiB
        clean_rate = mib / r["elapsed"]
        copy_rate = mib / copy_s
        print(f"log compaction — {mib:.0f} MiB dirty log, 10% unique keys (built in {gen_s:.1f}s)")
        label = "clean (map + copy loop + swap)"
        print(f"  {label:<34} {r['elapsed']:8.2f} s  {clean_rate:8.1f} MiB/s")
        print(
            f"  {'baseline: shutil.copyfile + fsync':<34} {copy_s:8.2f} s  {copy_rate:8.1f} MiB/s"
        )
        print(f"  {'ratio clean / copy throughput':<34} {clean_rate / copy_rate:8.2f} x")
        print(
            f"  {'log size before → after':<34} {r['size_before'] / MiB:8.1f} → "
            f"{r['size_after'] / MiB:.1f} MiB (recopy {r['recopy_percent']:.1f}%)"
        )
        print(
            f"  {'peak anon RSS growth, cleaning':<34} {r['rss_growth'] / MiB:8.1f} MiB "
            f"(dedupe buffer {DEDUPE / MiB:.0f} MiB)"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
