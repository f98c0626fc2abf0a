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
    analytic = {b for b in BASELINES if not b.startswith("cartpole:")}
    assert analytic == {"no-clip", "ppo-0.1", "ppo-0.2", "ppo-0.3", "sapo", "dual-clip", "truncated-is"}
    assert {b for b in BASELINES if b.startswith("cartpole:")} == {
        f"cartpole:{o}" for o in ("ppo-0.2", "no-clip", "sapo", "dual-clip", "truncated-is")
    }


F = CONFIGS["full"]


def _cp_records(final20: dict[str, dict[int, float]], seeds: int = 5) -> list[dict[str, Any]]:
    """CartPole final records: ``final20[objective][buffer]`` plus per-seed noise: a common part (paired)
    and, for GIPO, its own part of mean 0 (paired gaps: SD 15.8, 95 % half-width 19.6 over 5 seeds)."""
    out = []
    for o, by_buffer in final20.items():
        for s in range(seeds):
            for b, v in by_buffer.items():
                out.append(
                    {
                        "method": f"cartpole:{o}",
                        "seed": s,
                        "step": 100000,
                        "status": "done",
                        "buffer": float(b),
                        "final20": v
                        + 3.0 * ((2 * s) % 5 - 2)
                        + (10.0 * ((3 * s) % 5 - 2) if o == "gipo-1" else 0),
                        "auc": v / 2,
                        "zg_mean": 0.0 if o.startswith("gipo") else 0.1 * b / 50000,
                        "alr_mean": 0.1,
                        "loss_max_abs": 1.0,
                        "random_return": 22.0,
                    }
                )
    return out


def test_cartpole_rule_outcomes() -> None:
    analytic = _records({"gipo-1": (0.02, 1e-4), "no-clip": (0.019, 1e-2)})  # the analytic part reproduces
    cfg = {**F, "methods": [m for m in METHODS if not m.startswith("cartpole:")]}
    cfg["methods"] += ["cartpole:gipo-1", "cartpole:ppo-0.2"]
    good = {"gipo-1": {1000: 490, 10000: 450, 50000: 400}, "ppo-0.2": {1000: 490, 10000: 440, 50000: 250}}
    v = decide(analytic + _cp_records(good), cfg)
    assert v.outcome == "reproduced", v.summary
    assert v.figures["cartpole_outcome"] == "reproduced" and v.figures["cp:drop_diff_lo"] > 0
    assert v.figures["cp:delta_ppo-0.2_b50000"] == pytest.approx(150.0, abs=1e-9)
    assert v.figures["cp:delta_ppo-0.2_b1000_lo"] == pytest.approx(-19.63, abs=0.01)  # t(4) = 2.776
    assert v.figures["cp:ppo-0.2:zg_mean_b50000"] == pytest.approx(0.1) and v.figures["cp:mechanics_ok"]
    # no better at the stalest buffer: inconclusive; clearly worse somewhere: not reproduced
    tie = {**good, "gipo-1": {1000: 490, 10000: 450, 50000: 250}}
    assert decide(analytic + _cp_records(tie), cfg).figures["cartpole_outcome"] == "inconclusive"
    worse = {**good, "gipo-1": {1000: 400, 10000: 450, 50000: 400}}
    v = decide(analytic + _cp_records(worse), cfg)
    assert v.figures["cartpole_outcome"] == "not reproduced" and v.outcome == "not reproduced"
    # non-inferiority margin 25 on the interval's lower bound: Delta = -5 at 1k passes, -15 does not
    near = {**good, "gipo-1": {1000: 485, 10000: 450, 50000: 400}}
    assert decide(analytic + _cp_records(near), cfg).figures["cartpole_outcome"] == "reproduced"
    far = {**good, "gipo-1": {1000: 475, 10000: 450, 50000: 400}}
    assert decide(analytic + _cp_records(far), cfg).figures["cartpole_outcome"] == "inconclusive"
    # the analytic part decides alone where CartPole is only reported (quick), and the combination at full
    q = decide(analytic + _cp_records({k: {5000: 300} for k in ("gipo-1", "ppo-0.2")}, 3), Q)
    assert q.outcome == "reproduced" and "cartpole_outcome" not in q.figures and "no verdict" in q.summary
    bad_analytic = _records({"gipo-1": (0.02, 1e-4), "no-clip": (0.019, 1e-2), "sapo": (0.015, 5e-5)})
    assert decide(bad_analytic + _cp_records(good), cfg).outcome == "not reproduced"


def test_cartpole_helpers() -> None:
    from optarium.experiments.gipo import cartpole_nets, random_policy_return

    (p1, v1), (p2, _), (p3, _) = cartpole_nets(3), cartpole_nets(3), cartpole_nets(4)
    x = torch.randn(5, 4)
    assert torch.equal(p1(x), p2(x)) and not torch.equal(p1(x), p3(x))
    assert p1(x).shape == (5, 2) and v1(x).shape == (5, 1)
    r = random_policy_return(0, episodes=200)  # CartPole-v1's uniform random policy lasts about 22 steps
    assert 17.0 < r < 28.0 and r == random_policy_return(0, episodes=200)


def test_smoke_run(tmp_path: Path, check_smoke: Callable[[str, Any], None]) -> None:
    out = run_experiment("gipo", "smoke", out=tmp_path, jobs=1)
    check_smoke("gipo", out)
    cp_units = {u["method"] for u in out.units if u["method"].startswith("cartpole:")}
    assert cp_units == {"cartpole:gipo-1", "cartpole:ppo-0.2"}
    assert out.verdict.figures["cp:gipo-1:n_b400"] == 2 and out.verdict.figures["cp:ppo-0.2:n_b200"] == 2


def test_every_cartpole_objective_runs_through_the_unit() -> None:
    # smoke trains GIPO and PPO only; here each of the six objectives goes once through _cartpole_unit on a
    # tiny loop (2 envs, 2 iterations of 40 steps, one buffer)
    from optarium.experiments.gipo import CARTPOLE
    from optarium.harness.runner import execute_unit

    cp = {**CONFIGS["smoke"]["cartpole"], "num_envs": 2, "rollout_steps": 40, "env_steps": 80}
    cp.update(buffers=[60], sample_rounds=1, minibatch=16, hidden=8)
    cfg = {**CONFIGS["smoke"], "methods": list(CARTPOLE), "cartpole": cp}
    finals = {}
    for m in CARTPOLE:
        unit, recs = execute_unit("gipo", "smoke", cfg, m, 0)
        assert unit["status"] == "done", unit["error"]
        (fin,) = [r for r in recs if "final20" in r]
        assert fin["buffer"] == 60.0 and fin["step"] == 80 and 8.0 <= fin["final20"] <= 80.0, (m, fin)
        # every objective reports its zero-gradient share (a NaN here would mean the diagnostic is missing)
        assert 0.0 <= fin["zg_mean"] <= 1.0 and fin["loss_max_abs"] < 1e3, (m, fin)
        assert [r["step"] for r in recs if "zero_grad_frac" in r] == [40, 80]
        finals[m] = fin
    assert finals["cartpole:gipo-1"]["zg_mean"] == 0.0  # the Gaussian weight never zeroes a gradient
    assert finals["cartpole:no-clip"]["zg_mean"] == 0.0


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
