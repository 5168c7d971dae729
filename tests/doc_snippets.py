"""Reading and running the code blocks of a Markdown document: the docs'
tests (README, docs/clients.md, docs/consumer-groups.md) share this."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: The broker address the documents use; tests swap in a real broker's.
ADDRESS = "127.0.0.1:9092"
PYLOG = str(Path(sys.executable).with_name("pylog"))


def code_blocks(doc: Path, lang: str) -> list[str]:
    """The bodies of the ```lang fenced blocks of ``doc``, in order."""
    return re.findall(rf"```{lang}\n(.*?)```", doc.read_text(), re.S)


def shell_lines(doc: Path) -> list[str]:
    """Every non-blank line of the ```sh blocks of ``doc``."""
    return [line for b in code_blocks(doc, "sh") for line in b.splitlines() if line.strip()]


def run_python(code: str, where: Path, *, bootstrap: str | None = None, timeout: float = 90) -> str:
    """Run ``code`` as a script in a subprocess (``bootstrap`` replacing the
    documented address); it must exit 0. Returns its stdout."""
    if bootstrap is not None:
        code = code.replace(ADDRESS, bootstrap)
    script = where / "snippet.py"
    script.write_text(code)
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=timeout, cwd=where
    )
    assert out.returncode == 0, out.stderr
    return out.stdout
