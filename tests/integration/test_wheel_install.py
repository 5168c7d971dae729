"""The wheel users install (``make wheel``: abi3, manylinux2014, linked by zig
against glibc 2.17) installed with pip into a fresh virtualenv on another
CPython — 3.10, the oldest pylog supports, and 3.13 — where ``pylog broker
start`` serves confluent-kafka: topics created, records produced in every codec
and consumed by a group, a clean stop.

``make test`` builds the wheel first and names it in ``PYLOG_WHEEL``; without
it the test takes the one under ``target/wheels/`` and fails when there is none.
"""

from __future__ import annotations

import glob
import os
import re
import selectors
import shutil
import signal
import subprocess
import time
import uuid
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.wheel

ROOT = Path(__file__).resolve().parents[2]
VERSIONS = ["3.10", "3.13"]


def the_wheel() -> Path:
    named = os.environ.get("PYLOG_WHEEL")
    if named:
        return Path(named)
    found = sorted(
        glob.glob(str(ROOT / "target/wheels/x86_64-unknown-linux-gnu/pylog_broker-*.whl"))
    )
    assert found, "no wheel under target/wheels/: `make wheel` builds it"
    return Path(found[-1])


def find_python(version: str) -> str | None:
    """A working CPython ``version`` on this machine: on PATH, from pyenv, from a
    CI runner's tool cache, or the system's."""
    home = os.path.expanduser("~")
    candidates = [shutil.which(f"python{version}")]
    candidates += sorted(glob.glob(f"{home}/.pyenv/versions/{version}.*/bin/python{version}"))
    candidates += sorted(glob.glob(f"/opt/hostedtoolcache/Python/{version}.*/x64/bin/python3"))
    candidates += [f"/usr/bin/python{version}", f"/usr/local/bin/python{version}"]
    for c in candidates:
        if not c or not os.access(c, os.X_OK):
            continue
        # a pyenv shim exists on PATH even when it cannot run that version
        probe = subprocess.run(
            [c, "-c", "import sys, venv, ensurepip; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if probe.returncode == 0 and probe.stdout.strip() == version:
            return c
    return None


def clean_env() -> dict[str, str]:
    # nothing of the test run's own pylog may leak into the fresh venv
    return {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "PYTHONSTARTUP")
    }


def test_the_wheel_is_abi3_manylinux2014() -> None:
    wheel = the_wheel()
    # one wheel for every CPython >= 3.10, installable where glibc >= 2.17
    assert re.fullmatch(
        r"pylog_broker-[^-]+-cp310-abi3-manylinux2014_x86_64\.manylinux_2_17_x86_64\.whl",
        wheel.name,
    ), wheel.name
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        tags = [
            line.split(":", 1)[1].strip()
            for line in z.read(next(n for n in names if n.endswith(".dist-info/WHEEL")))
            .decode()
            .splitlines()
            if line.startswith("Tag:")
        ]
        native = z.read("pylog/_native.abi3.so")
    assert "cp310-abi3-manylinux_2_17_x86_64" in tags, tags
    assert "pylog/spark/source.py" in names and "pylog/protocol/schema/FetchRequest.json" in names
    # format("pylog-jvm")'s jar, which pylog.spark.jvm_jar() finds next to the module
    assert "pylog/spark/pylog-spark.jar" in names
    assert not [n for n in names if "__pycache__" in n]
    # the symbol versions the extension needs from glibc: none newer than 2.17
    needed = {tuple(map(int, v)) for v in re.findall(rb"GLIBC_(\d+)\.(\d+)", native)}
    assert needed and max(needed) <= (2, 17), sorted(needed)
    assert native.startswith(b"\x7fELF\x02")  # a 64-bit ELF object


def test_another_python_is_here_to_install_it_on() -> None:
    found = {v: find_python(v) for v in VERSIONS}
    assert any(found.values()), f"no CPython {' or '.join(VERSIONS)} on this machine"


def _start_broker(venv: Path, data: Path) -> tuple[subprocess.Popen[str], str]:
    cmd = [
        str(venv / "bin" / "pylog"), "broker", "start", "--log-level", "WARNING",
        "--override", "listeners=PLAINTEXT://127.0.0.1:0",
        "--override", f"log.dirs={data}",
        "--override", "group.initial.rebalance.delay.ms=0",
    ]  # fmt: skip
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        text=True,
        env=clean_env(),
        cwd=data.parent,
    )
    assert proc.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    # an upper bound catching a hang, not a timing expectation
    ready = sel.select(timeout=120)
    line = proc.stdout.readline() if ready else ""
    if "started: PLAINTEXT://127.0.0.1:" not in line:
        proc.kill()
        proc.wait(30)
        raise AssertionError(f"the wheel's broker did not start: {line!r}")
    port = int(line.split("127.0.0.1:")[1].split()[0])
    return proc, f"127.0.0.1:{port}"


def _round_trip(bootstrap: str) -> None:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"wheel-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    sent = []
    errors: list[object] = []
    # every codec: the wheel's native extension decompresses and checks them
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        p = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 5})
        for i in range(40):
            key, value = f"{codec}-{i}".encode(), f"value-{codec}-{i}".encode() * (i % 7 + 1)
            p.produce(
                topic,
                key=key,
                value=value,
                headers=[("codec", codec.encode())],
                partition=i % 2,
                on_delivery=lambda err, _msg: errors.append(err) if err else None,
            )
            sent.append((key, value))
        assert p.flush(30) == 0
    assert errors == []
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{topic}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.subscribe([topic])
    got = []
    deadline = time.monotonic() + 60  # an upper bound catching a hang
    try:
        while len(got) < len(sent) and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            assert m.error() is None, m.error()
            assert m.headers() == [("codec", m.key().split(b"-")[0])]
            got.append((m.key(), m.value()))
        c.commit(asynchronous=False)
    finally:
        c.close()
    assert sorted(got) == sorted(sent)


@pytest.mark.parametrize("version", VERSIONS)
def test_the_wheel_installs_and_serves_clients(version: str, tmp_path: Path) -> None:
    wheel = the_wheel()
    python = find_python(version)
    if python is None:
        pytest.skip(f"no CPython {version} here (test_another_python_is_here_... needs one)")
    venv = tmp_path / "venv"
    env = clean_env()
    subprocess.run([python, "-m", "venv", str(venv)], check=True, env=env, timeout=300)
    py = str(venv / "bin" / "python")
    pip = subprocess.run(
        [py, "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert pip.returncode == 0, pip.stdout + pip.stderr
    # the venv's own pylog and native extension, on that interpreter
    code = "import sys, pylog._native as n; print('%d.%d' % sys.version_info[:2], n.__file__)"
    probe = subprocess.run(
        [py, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
        check=True,
    )
    got_version, native = probe.stdout.split()
    assert got_version == version
    assert native.startswith(str(venv)) and native.endswith("_native.abi3.so"), native
    data = tmp_path / "data"
    proc, bootstrap = _start_broker(venv, data)
    try:
        _round_trip(bootstrap)
    finally:
        proc.send_signal(signal.SIGTERM)
        exit_code = proc.wait(60)
    assert exit_code == 0
    # Kafka's on-disk layout, written by the wheel's native log
    segments = glob.glob(str(data / "wheel-*-[01]" / "00000000000000000000.log"))
    assert len(segments) == 2 and all(os.path.getsize(s) > 0 for s in segments)
