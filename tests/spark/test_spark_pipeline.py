"""examples/pipeline/run.py end to end (small): produce → batch aggregate from
segments to Parquet → streaming follow → alerts topic; figures checked against
the events that were produced."""

from __future__ import annotations

import importlib.util
import random
from pathlib import Path
from typing import Any

from spark_support import spark

__all__ = ["spark"]

RUN = Path(__file__).resolve().parents[2] / "examples" / "pipeline" / "run.py"


def _events(first: int, n: int) -> list[dict[str, Any]]:
    """The events run.produce_events makes, recomputed."""
    rng = random.Random(first)
    out = []
    for i in range(first, first + n):
        e: dict[str, Any] = {
            "id": i,
            "user": f"u{rng.randrange(50)}",
            "kind": ["click", "view", "purchase", "refund"][i % 4],
        }
        e["amount"] = rng.randrange(1, 1000)
        out.append(e)
    return out


def test_the_pipeline_runs_end_to_end(spark: Any, tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("pipeline_run", RUN)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    result = mod.run(spark, tmp_path, events=400, quiet=True)
    first = _events(0, 400)
    want: dict[str, tuple[int, int]] = {}
    for e in first:
        c, a = want.get(e["kind"], (0, 0))
        want[e["kind"]] = (c + 1, a + e["amount"])
    assert result["per_kind"] == want
    later = _events(400, result["more"])
    assert result["alerts"] == [e["id"] for e in later if e["amount"] >= 900]
    assert result["alerts"]  # the random amounts do include some
    assert Path(result["parquet"]).is_dir()
