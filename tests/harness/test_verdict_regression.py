"""The eleven experiments decide the same verdict, and plot the same figures, on stored records.

``data/verdict_regression/<slug>__<scale>/`` holds the records and configuration of one run (captured
before the experiments were ported to :mod:`optarium.harness.verdicts`) and ``expected.json``: the outcome,
summary and figures that ``decide`` returned then, and the names of the figures ``plot`` returned. The
current ``decide`` must give the same outcome and summary and the same figures (numbers equal to 1e-12
relative, NaN equal to NaN), and ``plot`` the same figure names. When a verdict changes on purpose (a new
protocol, a re-recorded run), rebuild the fixture from the recorded run with
``python scripts/regen_verdict_fixture.py RUN_DIR``.
"""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path
from typing import Any

import pytest

from optarium.harness.experiment import get_experiment

DATA = Path(__file__).parent / "data" / "verdict_regression"
CASES = sorted(p.name for p in DATA.iterdir() if (p / "expected.json").exists())


def _records(case: Path) -> list[dict[str, Any]]:
    plain = case / "records.jsonl"
    text = plain.read_text() if plain.exists() else gzip.open(case / "records.jsonl.gz", "rt").read()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b or (isinstance(a, bool) and isinstance(b, bool) and a == b)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        a, b = float(a), float(b)
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        if math.isinf(a) or math.isinf(b):
            return a == b
        return math.isclose(a, b, rel_tol=1e-12, abs_tol=0.0) or a == b
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def _figures_json(figures: Any) -> dict[str, Any]:
    """The figures as they would be stored (tuples become lists, tensors and numpy scalars numbers)."""

    def default(o: Any) -> Any:
        return o.item() if hasattr(o, "item") else list(o)

    return json.loads(json.dumps(dict(figures), allow_nan=True, default=default))


def test_every_experiment_has_a_fixture() -> None:
    from optarium.harness.experiment import registered_experiments

    assert {c.split("__")[0] for c in CASES} >= set(registered_experiments())


@pytest.mark.parametrize("case", CASES)
def test_decide_and_plot_unchanged(case: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    d = DATA / case
    expected = json.loads((d / "expected.json").read_text())
    config = json.loads((d / "config.json").read_text())
    records = _records(d)
    experiment = get_experiment(expected["slug"])
    verdict = experiment.decide(records, config)
    assert verdict.outcome == expected["outcome"]
    assert verdict.summary == expected["summary"]
    got = _figures_json(verdict.figures)
    assert sorted(got) == sorted(expected["figures"])
    diff = {k: (got[k], v) for k, v in expected["figures"].items() if not _same(got[k], v)}
    assert not diff, diff
    figs = experiment.plot(records, config) if experiment.plot else {}
    assert sorted(figs) == expected["plot"]


def test_the_comparison_tells_changed_figures_apart() -> None:
    """The comparison the regression test relies on: NaN equals NaN, 1e-12 relative passes, more fails."""
    assert _same(math.nan, math.nan) and _same(1.0, 1.0 + 1e-13) and _same([1, "a"], [1.0, "a"])
    assert not _same(1.0, 1.0 + 1e-9) and not _same(math.nan, 0.0) and not _same(True, 1)
    assert not _same(math.inf, -math.inf) and not _same([1.0], [1.0, 2.0]) and not _same("a", "b")
