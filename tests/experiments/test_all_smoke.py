"""Every registered experiment at smoke scale: it runs, records, plots, decides, and withholds its verdict."""

from __future__ import annotations

from pathlib import Path

import pytest

from optarium.harness.experiment import get_experiment, registered_experiments
from optarium.harness.runner import run_experiment


@pytest.mark.parametrize("slug", registered_experiments())
def test_smoke_run(slug: str, tmp_path: Path) -> None:
    experiment = get_experiment(slug)
    out = run_experiment(slug, "smoke", out=tmp_path, jobs=2)
    failed = [(u["method"], u["seed"], u["status"], u["error"]) for u in out.units if u["status"] != "done"]
    assert not failed, failed
    config = experiment.config("smoke")
    assert len(out.units) == len(config["methods"]) * config["seeds"]
    assert out.verdict.outcome == "no verdict"
    assert out.verdict.figures, "the verdict rule produced no deciding figures"
    assert not out.summary["figure_errors"]
    if experiment.plot is not None:
        assert list((out.run_dir / "figures").glob("*.png"))
    for name in ("config.json", "environment.json", "records.jsonl", "summary.json", "verdict.json"):
        assert (out.run_dir / name).exists()


@pytest.mark.slow
@pytest.mark.parametrize("slug", registered_experiments())
def test_quick_run_decides(slug: str, tmp_path: Path) -> None:
    """Claim scale (quick): every unit finishes and the stated rule reaches a verdict (whichever it is)."""
    out = run_experiment(slug, "quick", out=tmp_path, jobs=2)
    assert all(u["status"] == "done" for u in out.units)
    assert out.verdict.outcome in ("reproduced", "not reproduced", "inconclusive")
