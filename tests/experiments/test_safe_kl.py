"""The safe-kl experiment's rule on hand-built records: each part can pass, fail or stay inconclusive."""

from __future__ import annotations

import math
from typing import Any

from optarium.experiments.safe_kl import CONFIGS, DRO_METHODS, decide

TAG = "lam0.1-b16"
QUICK = {**CONFIGS["quick"], "methods": list(DRO_METHODS)}


def _records(gaps: dict[str, dict[float, list[float]]]) -> list[dict[str, Any]]:
    recs: list[dict[str, Any]] = []
    for m, per in gaps.items():
        for lr, vals in per.items():
            for seed, g in enumerate(vals):
                ok = math.isfinite(g)
                recs.append(
                    {
                        "method": m,
                        "seed": seed,
                        "step": 3125,
                        "lr": lr,
                        "status": "done",
                        f"{TAG}:final_gap": g,
                        f"{TAG}:nonfinite": float(not ok),
                        f"{TAG}:failed": float(not ok or g > 1),
                        f"{TAG}:failed_at": -1.0,
                    }
                )
    for seed in range(5):
        recs.append(
            {"method": "exact-lbfgs", "seed": seed, "step": 0, f"{TAG}:max_nw": 20.0, "status": "done"}
        )
    return recs


def _good() -> dict[str, dict[float, list[float]]]:
    safe = {0.01: [1.3e-4, 1.1e-4, 1.6e-4, 1.2e-4, 1.4e-4], 0.03: [1.4e-4] * 5, 0.1: [4.0] * 5}
    return {
        "safe-kl-rho0.1": {0.01: [2e-2] * 5, 0.03: [2e-2] * 5, 0.1: [3.0] * 5},
        "safe-kl-rho0.01": safe,
        "safe-kl-rho0.001": {0.01: [1.5e-4] * 5, 0.03: [math.inf] * 5, 0.1: [math.inf] * 5},
        "exp-dual": {0.01: [1.0e-4] * 5, 0.03: [math.inf, 1e-4, math.inf, 1e-4, 1e-4], 0.1: [math.inf] * 5},
        "minibatch-lse": {0.01: [2.7e-3, 3.1e-3, 1.0e-3, 4.0e-3, 2.0e-3], 0.03: [3e-3] * 5, 0.1: [8e-3] * 5},
    }


def test_rule_reproduced_and_best_step_choice() -> None:
    v = decide(_records(_good()), QUICK)
    assert v.outcome == "reproduced", v.summary
    f = v.figures
    assert f[f"{TAG}:safe-kl-rho0.01:best_lr"] == 0.01 and f[f"{TAG}:exp-dual:best_lr"] == 0.01
    assert f[f"{TAG}:exp-dual:failed_runs"] == 7 and f[f"{TAG}:safe-kl-rho0.01:failed_runs"] == 5
    assert f["b_n_pairs"] == 5 and f["b_mean_gap"] > 2 * f["b_se"]


def test_rule_not_reproduced_when_safe_kl_misses_one_percent() -> None:
    gaps = _good()
    gaps["safe-kl-rho0.001"][0.01] = [1.5e-4, 1.5e-4, 0.02, 1.5e-4, 1.5e-4]
    v = decide(_records(gaps), QUICK)
    assert v.figures["a_outcome"] == "not reproduced" and v.outcome == "not reproduced"


def test_rule_paired_gap_and_failure_count_sides() -> None:
    gaps = _good()
    gaps["minibatch-lse"][0.01] = [1.2e-4, 1.2e-4, 1.7e-4, 1.1e-4, 1.5e-4]  # as accurate: within 2 SE
    gaps["exp-dual"][0.03] = [1e-4] * 5
    gaps["exp-dual"][0.1] = [5.0, 5.0, 5.0, 5.0, 5.0]  # 5 failed runs, as many as safe-KL
    v = decide(_records(gaps), QUICK)
    assert v.figures["b_outcome"] == "inconclusive" and v.figures["c_outcome"] == "inconclusive"
    assert v.outcome == "inconclusive"
    gaps["minibatch-lse"][0.01] = [1e-5] * 4 + [1.1e-5]  # minibatch LSE clearly better
    assert decide(_records(gaps), QUICK).figures["b_outcome"] == "not reproduced"
