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


def _sk_records(gaps: dict[str, list[float]]) -> list[dict[str, Any]]:
    recs: list[dict[str, Any]] = []
    for m, vals in gaps.items():
        for seed, g in enumerate(vals):
            for lr, scale in ((0.01, 3.0), (0.1, 1.0)):
                v = g * scale
                recs.append(
                    {
                        "method": m,
                        "seed": seed,
                        "step": 3125,
                        "lr": lr,
                        "status": "done",
                        "sk:final_gap": v,
                        "sk:nonfinite": float(not math.isfinite(v)),
                        "sk:failed": float(not math.isfinite(v) or v > 1),
                    }
                )
    return recs


def test_sinkhorn_rule_sides() -> None:
    """Rule (e): e1 against minibatch-LSE, e2 against MLMC, each reproduced / inconclusive / not."""
    cfg = {**QUICK, "methods": ["sk-safe-kl", "sk-minibatch-lse", "sk-mlmc"], "variants": []}
    safe = [1.1e-4, 1.3e-4, 0.9e-4, 1.2e-4, 1.0e-4]
    gaps = {
        "sk-safe-kl": safe,
        "sk-minibatch-lse": [1.3e-2] * 5,
        "sk-mlmc": [g * r for g, r in zip(safe, (1.3, 0.8, 1.1, 0.9, 1.05), strict=True)],
    }
    v = decide(_sk_records(gaps), cfg)
    f = v.figures
    assert f["e1_outcome"] == "reproduced" and f["e2_outcome"] == "inconclusive", v.summary
    assert v.outcome == "inconclusive" and f["sk:sk-safe-kl:best_lr"] == 0.1
    gaps["sk-mlmc"] = [4e-4, 4.2e-4, 3.9e-4, 4.1e-4, 4.3e-4]
    v = decide(_sk_records(gaps), cfg)
    assert v.figures["e2_outcome"] == "reproduced" and v.outcome == "reproduced", v.summary
    gaps["sk-mlmc"] = [1e-5] * 5
    assert decide(_sk_records(gaps), cfg).figures["e2_outcome"] == "not reproduced"


def test_sinkhorn_exact_objective_against_monte_carlo() -> None:
    """The quadrature ground truth of (C) matches a 2e5-draw Monte Carlo per datum and is grid-converged."""
    import torch

    from optarium.experiments.safe_kl import _sk_exact

    g = torch.Generator().manual_seed(0)
    X = torch.randn(4, 5, generator=g, dtype=torch.float64)
    y = torch.tensor([1.0, -1.0, 1.0, -1.0], dtype=torch.float64)
    theta = 0.8 * torch.randn(5, generator=g, dtype=torch.float64)
    kappa, sigma = 0.1, math.sqrt(0.1)
    fine = float(_sk_exact(X, y, theta, kappa, sigma, 3201))
    assert abs(float(_sk_exact(X, y, theta, kappa, sigma, 801)) - fine) < 1e-10
    z = X[:, None] + sigma * torch.randn(4, 200_000, 5, generator=g, dtype=torch.float64)
    ell = torch.nn.functional.softplus(-y[:, None] * (z @ theta))
    mc = kappa * (torch.logsumexp(ell / kappa, -1) - math.log(z.shape[1]))
    # relative MC error of the mean of exp(l / kappa) is sd / mean / sqrt(n); propagate through kappa ln
    e = torch.exp(ell / kappa - (ell / kappa).amax(-1, keepdim=True))
    se = kappa * (e.std(-1) / e.mean(-1)) / math.sqrt(z.shape[1])
    assert abs(float(mc.mean()) - fine) < 4 * float(se.norm() / 4) + 1e-12
