"""The README's Python example runs as written (in a scratch directory)."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_python_example_runs(tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert blocks, "README has no python example"
    for code in blocks:
        code = code.replace("/tmp/pylog-data", str(tmp_path / "data"))
        namespace: dict[str, object] = {}
        exec(compile(code, "README.md", "exec"), namespace)
        assert namespace["info"].first_offset == 0  # type: ignore[attr-defined]
        assert b"hello" in namespace["data"]  # type: ignore[operator]
    assert (tmp_path / "data" / "events-0" / "00000000000000000000.log").exists()
    assert (tmp_path / "data" / ".kafka_cleanshutdown").exists()
