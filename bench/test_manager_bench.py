"""Memory of a LogManager holding 1,000 idle partitions, measured in a fresh process.

Run: ``.venv/bin/python -m pytest -q -s bench/test_manager_bench.py`` (or run this
file directly). A child process loads the partitions from disk (after a clean
shutdown, and again after an unclean one) and reports ``VmRSS`` from
``/proc/self/status``; the baseline is the same interpreter with pylog imported
and nothing loaded. Target: under 200 MB.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

PARTITIONS = 1000
TARGET_MB = 200

_CHILD = textwrap.dedent(
    """
    import json, os, sys, time
    from pylog import _native
    from pylog.log.manager import LogManager, CLEAN_SHUTDOWN_FILE

    def rss_kb():
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return -1

    def fds():
        return len(os.listdir("/proc/self/fd"))

    mode, logdir, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    props = {"log.dirs": [logdir], "num.recovery.threads.per.data.dir": 4}
    out = {"baseline_kb": rss_kb(), "baseline_fds": fds()}
    if mode == "create":
        m = LogManager(props)
        now = int(time.time() * 1000)
        raw = _native.build_batch([(b"key", b"v" * 100, [], now)] * 5)
        for p in range(n):
            log = m.get_or_create_log((f"topic{p % 50}", p))
            log.append_as_leader(bytearray(raw), 0)
        m.shutdown()
    else:
        if mode == "unclean":
            try:
                os.unlink(os.path.join(logdir, CLEAN_SHUTDOWN_FILE))
            except FileNotFoundError:
                pass
        t0 = time.perf_counter()
        m = LogManager(props)
        m.startup()
        out["load_s"] = time.perf_counter() - t0
        out["logs"] = len(m)
        out["rss_kb"] = rss_kb()
        out["fds"] = fds()
        m.shutdown()
    print(json.dumps(out))
    """
)


def _run(mode: str, logdir: Path) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, mode, str(logdir), str(PARTITIONS)],
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def measure(logdir: Path) -> dict[str, dict[str, float]]:
    _run("create", logdir)
    return {"clean": _run("clean", logdir), "unclean": _run("unclean", logdir)}


def _report(results: dict[str, dict[str, float]]) -> None:
    for mode, r in results.items():
        rss_mb, base_mb = r["rss_kb"] / 1024, r["baseline_kb"] / 1024
        per_partition_kb = (r["rss_kb"] - r["baseline_kb"]) / PARTITIONS
        print(
            f"LogManager, {int(r['logs'])} idle partitions after a {mode} shutdown: "
            f"VmRSS {rss_mb:.1f} MB (baseline {base_mb:.1f} MB, ratio {rss_mb / base_mb:.2f}x, "
            f"{per_partition_kb:.1f} KB/partition), {int(r['fds'] - r['baseline_fds'])} fds, "
            f"loaded in {r['load_s']:.2f} s (target: under {TARGET_MB} MB)"
        )


def test_rss_of_1000_idle_partitions(tmp_path: Path) -> None:
    results = measure(tmp_path / "logs")
    _report(results)
    for r in results.values():
        assert r["logs"] == PARTITIONS


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        _report(measure(Path(d) / "logs"))
