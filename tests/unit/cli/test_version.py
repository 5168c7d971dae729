"""`pylog --version` names the installed distribution, pylog-broker (the
import name and the command are pylog; the distribution is not)."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version


def test_version_is_the_distributions() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "pylog.cli", "--version"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert version("pylog-broker") in out.stdout
