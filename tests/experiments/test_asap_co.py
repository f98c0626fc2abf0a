"""The asap-co experiment: its smoke run, and its rule on hand-built records (every side)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from optarium.experiments.asap_co import CONFIGS, decide
from optarium.harness.runner import run_experiment

QUICK = CONFIGS["quick"]


def _records(asap: float, full: float) -> list[dict[str, Any]]:
    jitter = [0.001 * ((3 * s) % 5 - 2) for s in range(6)]
    rec = []
    for m, g in (("asap-selection", asap), ("full-finetune", full)):
        for s, j in enumerate(jitter):
            for step in (0, 10, 30):
                rec.append({"method": m, "seed": s, "step": step, "status": "done", "gap": g + j})
    return rec


def test_smoke_run_records_plots_and_withholds_verdict(
    tmp_path: Path, check_smoke: Callable[[str, Any], None]
) -> None:
    out = run_experiment("asap-co", "smoke", out=tmp_path, jobs=1)
    check_smoke("asap-co", out)
    f = out.verdict.figures
    assert f["asap-selection:proposal_unchanged"] == 1.0 and f["full-finetune:proposal_unchanged"] == 0.0
    assert 0.0 <= f["base:err3_uniform"] <= f["base:err1_uniform"] <= 1.0


def test_rule_sides() -> None:
    assert decide(_records(0.02, 0.03), QUICK).outcome == "reproduced"
    assert decide(_records(0.03, 0.02), QUICK).outcome == "not reproduced"
    assert decide(_records(0.03, 0.03), QUICK).outcome == "inconclusive"
