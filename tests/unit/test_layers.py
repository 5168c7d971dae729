"""docs/architecture.md's layer order holds: no module of python/pylog imports
from a layer above its own (type-only imports count too)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "python" / "pylog"

# The table of docs/architecture.md, lowest first.
LAYERS: dict[str, int] = {
    "_native": 0,
    "common": 0,
    "errors": 0,
    "config": 0,
    "records": 0,
    "logsafe": 0,
    "protocol": 1,
    "security": 2,
    "log": 2,
    "network": 3,
    "metadata": 4,
    "server": 5,
    "coordinator": 6,
    "transaction": 6,
    "controller": 7,
    "broker": 8,
    "cli": 9,
    "console": 9,
    "spark": 9,
    "testing": 9,
}


def _module_name(path: Path) -> list[str]:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return parts[:-1] if parts[-1] == "__init__" else parts


def _imports(path: Path, source: str | None = None) -> list[tuple[int, str]]:
    """(line, absolute module) of every pylog import in ``path`` (or in ``source``
    read as if it were that file)."""
    here = _module_name(path)
    package = here if path.name == "__init__.py" else here[:-1]
    found = []
    text = path.read_text() if source is None else source
    for node in ast.walk(ast.parse(text, str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
                if not node.module:  # from . import x: each name may be a module
                    found += [(node.lineno, f"{target}.{a.name}") for a in node.names]
                    continue
            else:
                target = node.module or ""
            found.append((node.lineno, target))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
    return [(line, t) for line, t in found if t == "pylog" or t.startswith("pylog.")]


def _layer(module: str) -> int | None:
    parts = module.split(".")
    return LAYERS.get(parts[1]) if len(parts) > 1 else None


def _sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_every_top_level_module_has_a_layer() -> None:
    tops = {p.stem for p in PACKAGE.iterdir() if p.suffix == ".py" and p.stem != "__init__"}
    tops |= {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    tops.add("_native")
    assert tops - set(LAYERS) == set(), "add the new module to docs/architecture.md and LAYERS"


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_import_reaches_up(path: Path) -> None:
    own = _layer(".".join(_module_name(path)))
    if own is None:  # pylog/__init__.py
        return
    upward = [
        f"line {line}: {target} (layer {_layer(target)} > {own})"
        for line, target in _imports(path)
        if (_layer(target) or 0) > own
    ]
    assert upward == []


def test_the_check_sees_an_upward_import() -> None:
    # Both spellings must be found, or test_no_import_reaches_up could not fail.
    source = "from pylog.broker.kafka_apis import KafkaApis\nfrom ..server import config\n"
    found = [t for _, t in _imports(PACKAGE / "log" / "probe.py", source)]
    assert found == ["pylog.broker.kafka_apis", "pylog.server"]
    assert [_layer(t) for t in found] == [LAYERS["broker"], LAYERS["server"]]


# Same-layer rules docs/architecture.md states: modules of one layer that must
# not import each other (importer, imported). The two packages of layer 2 are
# used apart (security knows no storage, storage no principal); the group
# coordinator is not a client of the transaction coordinator (the reverse uses
# its record helpers); among the edges the Spark source uses only the CLI's
# cluster client, the embedded broker stands alone, and only the CLI mounts the
# console.
APART: tuple[tuple[str, str], ...] = (
    ("security", "log"),
    ("log", "security"),
    ("coordinator", "transaction"),
    ("spark", "console"),
    ("spark", "testing"),
    ("testing", "cli"),
    ("testing", "console"),
    ("testing", "spark"),
    ("console", "spark"),
    ("console", "testing"),
    ("cli", "spark"),
)


def _package(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_import_crosses_a_same_layer_wall(path: Path) -> None:
    own = _package(".".join(_module_name(path)))
    crossing = [
        f"line {line}: {target} ({own} must not import {_package(target)})"
        for line, target in _imports(path)
        if (own, _package(target)) in APART
    ]
    assert crossing == []


def test_the_walls_stand_between_packages_of_one_layer() -> None:
    for importer, imported in APART:
        assert LAYERS[importer] == LAYERS[imported], (importer, imported)
    source = "from pylog.transaction.transaction_log import TxnKey\n"
    found = [t for _, t in _imports(PACKAGE / "coordinator" / "probe.py", source)]
    assert [("coordinator", _package(t)) in APART for t in found] == [True]
