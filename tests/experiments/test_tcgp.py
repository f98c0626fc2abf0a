"""The tcGP experiment at smoke scale: it runs, records, plots and decides by its stated rule."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

import optarium.experiments.tcgp as exp
from optarium.harness.runner import run_experiment

CONFIG = {
    "methods": ["gp", "global", "tcgp"],
    "calib_functions": ["goldstein_price", "ackley4"],
    "bo_functions": ["goldstein_price"],
    "bo_methods": ["gp", "tcgp"],
    "bo_required": False,
}


def _records(
    ks_gaps: dict[str, list[float]], bo_gaps: list[float], brier_gap: float = 0.0
) -> list[dict[str, object]]:
    """KS/Brier per calibration function and final log10 regret, with gaps = baseline - tcGP per seed."""
    recs: list[dict[str, object]] = []
    n = len(next(iter(ks_gaps.values())))
    for seed in range(n):
        for method in ("gp", "global", "tcgp"):
            rec: dict[str, object] = {"method": method, "seed": seed, "step": 0, "status": "done"}
            for name, gaps in ks_gaps.items():
                base = 0.3 + 0.01 * seed
                rec[f"ks_{name}"] = base if method == "tcgp" else base + gaps[seed]
                rec[f"brier_{name}"] = 0.1 if method == "tcgp" else 0.1 + brier_gap * (1 + 0.1 * seed)
            recs.append(rec)
    for seed, gap in enumerate(bo_gaps):
        for method in ("gp", "tcgp"):
            value = 1.0 + 0.05 * seed + (gap if method == "gp" else 0.0)
            recs.append({"method": method, "seed": seed, "step": 15, "log_regret_goldstein_price": value})
    return recs


def test_smoke_run_records_plots_and_withholds_verdict(
    tmp_path: Path, check_smoke: Callable[[str, Any], None]
) -> None:
    out = run_experiment("tcgp", "smoke", out=tmp_path, jobs=1)
    check_smoke("tcgp", out)  # the generic checks; test_all_smoke skips this slug
    assert all(u["status"] == "done" for u in out.units), [u.get("error") for u in out.units]
    assert len(out.units) == len(exp.METHODS) * exp.CONFIGS["smoke"]["seeds"]
    assert out.verdict.outcome == "no verdict"
    assert {"ks_goldstein_price_gp_minus_tcgp_mean_gap", "bo_gp_minus_tcgp_mean_gap"} <= set(
        out.verdict.figures
    )
    assert sorted(p.name for p in (out.run_dir / "figures").iterdir()) == [
        "bo_regret.png",
        "calibration_gaps.png",
    ]
    records = [json.loads(x) for x in (out.run_dir / "records.jsonl").read_text().splitlines()]
    finals = [r for r in records if "log_regret_goldstein_price" in r and r["step"] == 3]
    assert len(finals) == len(out.units)
    # the plain GP is never recalibrated; the calibrated ones respect the floor s_min
    assert {r["s_goldstein_price"] for r in records if r["method"] == "gp" and "s_goldstein_price" in r} == {
        1.0
    }
    assert all(r["s_goldstein_price"] >= 0.05 for r in records if "s_goldstein_price" in r)


def test_methods_share_designs_and_only_the_calibration_differs() -> None:
    a = exp._calib_data("goldstein_price", 3, 12, 100)
    b = exp._calib_data("goldstein_price", 3, 12, 100)
    assert all(torch.equal(u, v) for u, v in zip(a, b, strict=True))
    assert not torch.equal(a[0], exp._calib_data("goldstein_price", 4, 12, 100)[0])
    gp = exp.calibration_metrics("goldstein_price", "gp", 3, 12, 100, maxiter=30)
    tc = exp.calibration_metrics("goldstein_price", "tcgp", 3, 12, 100, maxiter=30)
    assert gp["n_in_St"] == tc["n_in_St"] >= 20
    assert gp["s"] == 1.0 and tc["s"] != 1.0


def test_goldstein_price_has_its_known_optimum() -> None:
    f = exp.make_function("goldstein_price")
    assert float(f(torch.tensor([[0.0, -1.0]], dtype=torch.float64))) == pytest.approx(3.0)
    x = torch.rand(1000, 2, dtype=torch.float64) * 4 - 2
    assert float(f(x).min()) > 3.0
    assert float(f(torch.tensor([[1.2, 0.8]], dtype=torch.float64))) == pytest.approx(840.0)
    with pytest.raises(ValueError, match=r"^name:"):
        exp.make_function("branin")


def test_rule_reproduced_when_tcgp_is_better_on_ks_everywhere() -> None:
    ks = {"goldstein_price": [0.10, 0.12, 0.09, 0.11, 0.10], "ackley4": [0.05, 0.06, 0.04, 0.05, 0.07]}
    v = exp.decide(_records(ks, [0.1, -0.2, 0.3, 0.0, 0.1]), CONFIG)
    assert v.outcome == "reproduced"
    assert v.figures["ks_goldstein_price_gp_minus_tcgp_mean_gap"] == pytest.approx(0.104)


def test_rule_not_reproduced_when_ks_is_worse_on_one_function_or_bo_is_worse() -> None:
    ks = {"goldstein_price": [0.10, 0.12, 0.09, 0.11, 0.10], "ackley4": [-0.05, -0.06, -0.04, -0.05, -0.07]}
    assert exp.decide(_records(ks, [0.0, 0.1, -0.1, 0.0, 0.05]), CONFIG).outcome == "not reproduced"
    ks_ok = {"goldstein_price": [0.10, 0.12, 0.09, 0.11, 0.10], "ackley4": [0.05, 0.06, 0.04, 0.05, 0.07]}
    assert exp.decide(_records(ks_ok, [-0.5, -0.6, -0.55, -0.5, -0.45]), CONFIG).outcome == "not reproduced"


def test_rule_inconclusive_for_noise_or_worse_brier_or_missing_bo_at_full_scale() -> None:
    noisy = {"goldstein_price": [0.1, -0.1, 0.05, -0.02, 0.0], "ackley4": [0.05, 0.06, 0.04, 0.05, 0.07]}
    assert exp.decide(_records(noisy, [0.0] * 5), CONFIG).outcome == "inconclusive"
    ks_ok = {"goldstein_price": [0.10, 0.12, 0.09, 0.11, 0.10], "ackley4": [0.05, 0.06, 0.04, 0.05, 0.07]}
    assert exp.decide(_records(ks_ok, [0.1, -0.1, 0.0, 0.05, 0.0], brier_gap=-0.05), CONFIG).outcome == (
        "inconclusive"
    )
    full = dict(CONFIG, bo_required=True)  # full scale: BO must be better too
    assert exp.decide(_records(ks_ok, [0.1, -0.1, 0.0, 0.05, 0.0]), full).outcome == "inconclusive"
    recs = _records(ks_ok, [0.1] * 5)
    for r in recs:
        r["status"] = "diverged"
    assert exp.decide(recs, CONFIG).figures["ks_goldstein_price_gp_minus_tcgp_n_pairs"] == 0
