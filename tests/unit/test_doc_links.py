"""Every relative link in README, CONTRIBUTING and docs/ names a file that
exists (README's reference moved into docs/; a moved page must not leave a
dead link behind)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _relative_links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)  # code is not links
    return [
        target
        for target in LINK.findall(text)
        if not target.startswith(("http://", "https://", "mailto:", "#"))
    ]


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_relative_links_resolve(page: Path) -> None:
    dead = [t for t in _relative_links(page) if not (page.parent / t.split("#")[0]).exists()]
    assert not dead, f"{page.relative_to(ROOT)}: {dead}"


def test_the_pages_have_links() -> None:
    assert len(_relative_links(ROOT / "README.md")) >= 10
