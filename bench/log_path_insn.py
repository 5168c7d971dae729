"""One Log operation N times, for counting its instructions under callgrind:
deterministic on a shared machine, where wall-clock figures of a few µs are
not. ``kind`` is leader, follower, read_hw or read_leo (1 KiB-record batches,
after 2,000 appends of warm-up, the log on /dev/shm).

    for n in 2000 12000; do PYTHONHASHSEED=0 valgrind --tool=callgrind \\
        --callgrind-out-file=/dev/null .venv/bin/python bench/log_path_insn.py read_hw $n \\
        2>&1 | grep Collected; done

(instructions at 12000 - at 2000) / 10000 is the cost of one call; another
tree's venv running this same file gives the baseline.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile

from pylog import _native
from pylog.log.config import LogConfig
from pylog.log.log import FetchIsolation, Log


def main() -> None:
    kind, n = sys.argv[1], int(sys.argv[2])
    d = tempfile.mkdtemp(dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    log = Log.open(os.path.join(d, "t-0"), LogConfig.from_props({"segment.bytes": 1 << 30}))
    batch = bytearray(_native.build_batch([(b"k", b"v" * 1000, [], 1_700_000_000_000)]))
    zero = bytes(8)
    for _ in range(2000):
        batch[0:8] = zero
        log.append_as_leader(batch, 0)
    log.update_high_watermark(log.log_end_offset)
    if kind == "leader":
        for _ in range(n):
            batch[0:8] = zero
            log.append_as_leader(batch, 0)
    elif kind == "follower":
        nxt = log.log_end_offset
        for _ in range(n):
            batch[0:8] = nxt.to_bytes(8, "big")
            log.append_as_follower(batch)
            nxt += 1
    elif kind in ("read_hw", "read_leo"):
        isolation = FetchIsolation.HIGH_WATERMARK if kind == "read_hw" else FetchIsolation.LOG_END
        for _ in range(n):
            log.read(1000, 1 << 20, isolation, True)
    else:
        raise SystemExit(f"unknown kind {kind!r}")
    log.close()
    shutil.rmtree(d)


if __name__ == "__main__":
    main()
