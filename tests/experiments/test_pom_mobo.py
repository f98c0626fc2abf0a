"""The POM experiment at smoke scale (runs, records, plots, withholds its verdict) and its rule."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import optarium.experiments.pom_mobo as exp
from optarium.harness.runner import run_experiment

pytest.importorskip("botorch", reason="BoTorch (pinned 0.18.1) provides the GP surrogate and qLogEHVI")


def _records(
    emd_gaps_q: list[float], emd_gaps_r: list[float], hv_loss: list[float]
) -> list[dict[str, object]]:
    """Final records with given per-seed EMD gaps (baseline - POM) and relative HV losses vs qLogEHVI."""
    recs: list[dict[str, object]] = []
    for seed, (gq, gr, loss) in enumerate(zip(emd_gaps_q, emd_gaps_r, hv_loss, strict=True)):
        base = {
            "seed": seed,
            "step": 38,
            "problem": 0,
            "q": 5,
            "final": 1.0,
            "status": "done",
            "pieces": 3,
            "acq_s": 0.1,
            "batch_min_dist": 0.1,
            "pieces_total": 9,
        }
        recs.append({**base, "method": "pom", "emd": 0.3, "hv": 3.0 * (1 - loss)})
        recs.append({**base, "method": "qlogehvi", "emd": 0.3 + gq, "hv": 3.0})
        recs.append({**base, "method": "random", "emd": 0.3 + gr, "hv": 2.5})
    return recs


_CFG = {"methods": ["pom", "qlogehvi", "random"], "verdict_cells": [["omnitest2", 5]]}


def test_smoke_run_records_plots_and_withholds_verdict(
    tmp_path: Path, check_smoke: Callable[[str, Any], None]
) -> None:
    out = run_experiment("pom-mobo", "smoke", out=tmp_path, jobs=1)
    check_smoke("pom-mobo", out)  # the generic checks; test_all_smoke skips this slug
    assert all(u["status"] == "done" for u in out.units), [u.get("error") for u in out.units]
    assert len(out.units) == 3 * exp.CONFIGS["smoke"]["seeds"]
    assert out.verdict.outcome == "no verdict"
    assert "omnitest2_q3_emd_vs_qlogehvi_mean_gap" in out.verdict.figures
    assert sorted(p.name for p in (out.run_dir / "figures").iterdir()) == [
        "emd_curves.png",
        "hv_curves.png",
        "pieces_curves.png",
    ]
    records = [json.loads(x) for x in (out.run_dir / "records.jsonl").read_text().splitlines()]
    finals = [r for r in records if r.get("final") == 1.0]
    assert len(finals) == len(out.units)
    # paired design: every method of a seed ends with the same number of evaluations from the same pool
    cfg = exp.CONFIGS["smoke"]
    assert {r["step"] for r in finals} == {cfg["n_init"] + cfg["n_batches"]["3"] * 3}
    first = {(r["method"], r["seed"]): r["emd"] for r in records if r["step"] == cfg["n_init"]}
    for seed in range(cfg["seeds"]):
        assert len({first[(m, seed)] for m in cfg["methods"]}) == 1  # same initial design -> same EMD


def test_rule_reproduced() -> None:
    v = exp.decide(
        _records([0.05, 0.06, 0.04, 0.05, 0.05], [0.1, 0.12, 0.09, 0.1, 0.11], [0.0, 0.01, -0.01, 0.0, 0.01]),
        _CFG,
    )
    assert v.outcome == "reproduced", v.summary
    assert v.figures["omnitest2_q5_emd_vs_qlogehvi_mean_gap"] == pytest.approx(0.05)


def test_rule_not_reproduced_on_worse_emd_or_large_hv_loss() -> None:
    worse = exp.decide(_records([-0.05, -0.06, -0.04, -0.05, -0.05], [0.1] * 5, [0.0] * 5), _CFG)
    assert worse.outcome == "not reproduced"
    hv = exp.decide(
        _records([0.05, 0.06, 0.04, 0.05, 0.05], [0.1, 0.12, 0.09, 0.1, 0.11], [0.2, 0.21, 0.19, 0.2, 0.22]),
        _CFG,
    )
    assert hv.outcome == "not reproduced"


def test_rule_inconclusive_for_noise_or_unshown_hv_bound() -> None:
    noisy = exp.decide(
        _records([0.05, -0.06, 0.04, -0.05, 0.01], [0.1, 0.12, 0.09, 0.1, 0.11], [0.0] * 5), _CFG
    )
    assert noisy.outcome == "inconclusive"
    unshown = exp.decide(
        _records([0.05, 0.06, 0.04, 0.05, 0.05], [0.1, 0.12, 0.09, 0.1, 0.11], [0.0, 0.1, -0.05, 0.08, 0.0]),
        _CFG,
    )
    assert unshown.outcome == "inconclusive"  # mean loss 0.026, but mean + 2 SE > 0.05
    assert exp.decide(_records([0.05], [0.1], [0.0]), _CFG).outcome == "inconclusive"


def test_full_rule_needs_smaller_emd_range_over_q() -> None:
    recs = []
    for q, shift in ((2, 0.0), (5, 0.1)):
        for r in _records([0.05, 0.06, 0.04, 0.05, 0.05], [0.1, 0.12, 0.09, 0.1, 0.11], [0.0] * 5):
            r = dict(r, q=q)
            if r["method"] == "pom":
                r["emd"] = float(r["emd"]) + shift  # POM's EMD moves by 0.1 across q, qLogEHVI's (+gap) too
            if r["method"] == "qlogehvi":
                r["emd"] = float(r["emd"]) + shift
            recs.append(r)
    cfg = {**_CFG, "verdict_cells": [["omnitest2", 2], ["omnitest2", 5]]}
    v = exp.decide(recs, cfg)
    assert v.figures["omnitest2_pom_emd_range_over_q"] == pytest.approx(0.1)
    assert v.outcome == "inconclusive"  # equal ranges: the robustness-across-q part is not shown
