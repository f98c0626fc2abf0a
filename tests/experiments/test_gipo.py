"""The gipo experiment: smoke run, its rule on hand-built records (each outcome), and its exact estimator
moments against Monte Carlo."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from optarium.experiments.gipo import BASELINES, CONFIGS, METHODS, decide
from optarium.harness.runner import run_experiment
from optarium.problems.gridworld import evaluate, score

Q = CONFIGS["quick"]
D = torch.float64


def _theta(seed: int = 0) -> torch.Tensor:
    return torch.randn(4, 4, generator=torch.Generator().manual_seed(seed), dtype=D)


def _records(shift: dict[str, tuple[float, float]], nc_ratio: float = 20.0) -> list[dict[str, Any]]:
    out = []
    for m in METHODS:
        for s in range(6):
            j = 0.001 * ((3 * s) % 5 - 2)
            rec: dict[str, Any] = {"method": m, "seed": s, "step": 0, "status": "done", "g_star_norm": 0.04}
            for lev in Q["levels"]:
                b, v = shift.get(m, (0.03, 1e-3))
                var_lo = v / (nc_ratio if m == "no-clip" else 2.0)
                rec[f"bias_s{lev:g}"] = b + j
                rec[f"var_s{lev:g}"] = v + 1e-5 * j if lev >= 1 else var_lo
                rec[f"util_s{lev:g}"] = 1.0
                rec[f"shift_bias_s{lev:g}"] = 0.01
            out.append(rec)
    return out


def test_rule_outcomes() -> None:
    good = {"gipo-1": (0.02, 1e-4), "no-clip": (0.019, 1e-2)}
    v = decide(_records(good), Q)
    assert v.outcome == "reproduced", v.summary
    worse = {**good, "sapo": (0.015, 5e-5)}  # lower in both, well beyond 2 SE
    v = decide(_records(worse), Q)
    assert v.outcome == "not reproduced" and "sapo@s=2" in v.summary
    v = decide(_records(good, nc_ratio=1.0), Q)  # No-Clip's variance does not grow most
    assert v.outcome == "inconclusive"
    assert set(BASELINES) & {"no-clip", "ppo-0.2", "sapo", "dual-clip", "truncated-is"} == set(BASELINES) - {
        "ppo-0.1",
        "ppo-0.3",
    }


def test_smoke_run(tmp_path: Path, check_smoke: Callable[[str, Any], None]) -> None:
    out = run_experiment("gipo", "smoke", out=tmp_path, jobs=1)
    check_smoke("gipo", out)


def test_exact_moments_match_monte_carlo_and_on_policy_is_unbiased() -> None:
    from optarium.experiments.gipo import _loss_fn, estimator_moments

    ev = evaluate(_theta())
    G = score(ev.pi)
    g_star = (ev.d[:, None] * ev.pi * ev.A).reshape(-1) @ G
    for m in ("no-clip", "ppo-0.2", "gipo-1", "sapo"):  # mu = pi: every objective is unbiased for g*
        mom = estimator_moments(_loss_fn(m), ev, G, ev.pi, ev.d, 64)
        assert torch.allclose(mom["mean"], g_star, rtol=1e-10, atol=1e-15), m
    mu = evaluate(torch.log(ev.pi) + 1.0 * _theta(5))
    n, B = 64, 2000
    p = (mu.d[:, None] * mu.pi).reshape(-1)
    idx = torch.multinomial(p, n * B, replacement=True, generator=torch.Generator().manual_seed(0)).view(B, n)
    for m in ("no-clip", "gipo-1"):
        mom = estimator_moments(_loss_fn(m), ev, G, mu.pi, mu.d, n)
        lp = torch.log(ev.pi).reshape(-1).requires_grad_(True)
        val, _ = _loss_fn(m)(lp, torch.log(mu.pi).reshape(-1), ev.A.reshape(-1))
        (gr,) = torch.autograd.grad(val, lp)
        X = (-16 * gr)[:, None] * G
        batches = X[idx].mean(1)  # (B, 16) Monte-Carlo estimates
        se = batches.std(0) / B**0.5
        assert bool(((batches.mean(0) - mom["mean"]).abs() <= 4 * se + 1e-12).all()), m
        mc_var = float(batches.var(0).sum())
        assert mc_var == pytest.approx(mom["var"], rel=0.15), m


def test_stale_no_clip_variance_exceeds_gipo() -> None:
    from optarium.experiments.gipo import _loss_fn, estimator_moments

    ev = evaluate(_theta())
    G = score(ev.pi)
    ratios = []
    for k in range(8):
        mu = evaluate(torch.log(ev.pi) + 2.0 * _theta(100 + k))
        v = [estimator_moments(_loss_fn(m), ev, G, mu.pi, mu.d, 64)["var"] for m in ("no-clip", "gipo-1")]
        ratios.append(v[0] / v[1])
    r = torch.log(torch.tensor(ratios, dtype=D))  # the ratios are heavy-tailed: compare in log space
    assert float(r.mean() - 2 * r.std() / len(ratios) ** 0.5) > float(torch.log(torch.tensor(2.0)))
