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
    # the smoke scale also runs the CVRP block (full's second problem)
    assert (
        f["cvrp:asap-selection:proposal_unchanged"] == 1.0
        and f["cvrp:full-finetune:proposal_unchanged"] == 0.0
    )
    assert f["cvrp:base:gap"] >= -1e-3 and f["cvrp:verdict_n_pairs"] == 2
    assert (out.run_dir / "figures" / "adaptation_cvrp.png").exists()


def test_rule_sides() -> None:
    assert decide(_records(0.02, 0.03), QUICK).outcome == "reproduced"
    assert decide(_records(0.03, 0.02), QUICK).outcome == "not reproduced"
    assert decide(_records(0.03, 0.03), QUICK).outcome == "inconclusive"


def test_rule_with_cvrp_combines_both_problems() -> None:
    full = CONFIGS["full"]
    steps = (full["report_step"], full["verdict_step"])

    def both(tsp: tuple[float, float], cvrp: tuple[float, float]) -> list[dict[str, Any]]:
        rec = []
        for key, (asap, ff) in (("gap", tsp), ("cvrp:gap", cvrp)):
            for m, g in (("asap-selection", asap), ("full-finetune", ff)):
                for s in range(3):
                    for step in steps:
                        rec.append(
                            {"method": m, "seed": s, "step": step, "status": "done", key: g + 0.001 * s}
                        )
        return rec

    assert decide(both((0.02, 0.03), (0.02, 0.03)), full).outcome == "reproduced"
    assert decide(both((0.02, 0.03), (0.03, 0.03)), full).outcome == "inconclusive"
    v = decide(both((0.02, 0.03), (0.04, 0.03)), full)
    assert v.outcome == "not reproduced" and v.figures["cvrp:outcome"] == "not reproduced"
    assert v.figures["tsp:outcome"] == "reproduced"
