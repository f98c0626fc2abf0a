"""The alpha-pfn experiment: the smoke run (untrained head) records, plots and withholds a verdict; the rule
on hand-built records passes, fails and stays inconclusive where it should."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from optarium.experiments.alpha_pfn import (
    CONFIGS,
    METHODS,
    _full_problem,
    _problem_kind,
    _set_seeds,
    decide,
    plot,
    run,
)
from optarium.harness.runner import RunContext, run_experiment
from optarium.harness.stats import records_final


def test_smoke_run_records_plots_and_withholds_verdict(
    tmp_path: Path, check_smoke: Callable[[str, Any], None]
) -> None:
    out = run_experiment("alpha-pfn", "smoke", out=tmp_path, jobs=1)
    check_smoke("alpha-pfn", out)
    assert {"delta_vs_gp_mes", "speed_ratio_gp_mes_over_alpha_pfn"} <= set(out.verdict.figures)


def _records(pfn: list[float], mes: list[float], rand: list[float], t_pfn: float, t_mes: float) -> list[dict]:
    recs: list[dict[str, Any]] = []
    finals = {"alpha-pfn": pfn, "gp-mes": mes, "gp-ei": mes, "random": rand}
    for m in METHODS:
        for seed, v in enumerate(finals[m]):
            recs.append({"method": m, "seed": seed, "step": 12, "status": "done", "log10_regret": v,
                         "at_floor": float(v <= -3), "acq_cpu_s": 0.01})  # fmt: skip
    recs.append({"method": "alpha-pfn", "seed": 0, "step": 12, "status": "done", "pipeline_cpu_s": t_pfn})
    recs.append({"method": "gp-mes", "seed": 0, "step": 12, "status": "done", "pipeline_cpu_s": t_mes})
    return recs


def test_rule_reproduced_not_reproduced_inconclusive() -> None:
    cfg = CONFIGS["quick"]
    n = 20
    mes = [-3.0 + 0.01 * i for i in range(n)]
    rand = [-1.0 - 0.02 * i for i in range(n)]
    good = decide(_records([v + 0.05 * (-1) ** i for i, v in enumerate(mes)], mes, rand, 0.01, 0.2), cfg)
    assert good.outcome == "reproduced", good.summary
    slow = decide(_records(mes, mes, rand, 0.1, 0.2), cfg)  # 2x faster only
    assert slow.outcome == "not reproduced", slow.summary
    worse = decide(
        _records([v + 1.0 + 0.01 * (-1) ** i for i, v in enumerate(mes)], mes, rand, 0.01, 0.2), cfg
    )
    assert worse.outcome == "not reproduced", worse.summary
    noisy = decide(
        _records([v + 0.25 + 1.0 * (-1) ** i for i, v in enumerate(mes)], mes, rand, 0.01, 0.2), cfg
    )
    assert noisy.outcome == "inconclusive", noisy.summary


# ---------------------------------------------------------------------------------------------- full scale
def _full_smoke_config() -> dict[str, Any]:
    cfg = dict(CONFIGS["full"])
    cfg.update({"seeds": 4, "network": "untrained", "n_init": 3, "steps": 2, "n_candidates": 64,
                "mv_samples": 4, "speed_repeats": 1, "speed_points": 6})  # fmt: skip
    return cfg


def test_full_problems_are_the_stated_functions() -> None:
    cfg = CONFIGS["full"]
    assert [_problem_kind(s, cfg) for s in range(5)] == ["prior1", "prior2", "branin", "hartmann6-slice",
                                                          "prior1"]  # fmt: skip
    assert sum(len(s) for s in _set_seeds(cfg).values()) == cfg["seeds"] == 40
    sizes = {k: len(v) for k, v in _set_seeds(cfg).items()}
    assert sizes == {"prior": 20, "branin": 10, "hartmann6-slice": 10}
    n = 1024
    for kind, dim in (("prior1", 1), ("prior2", 2), ("branin", 2), ("hartmann6-slice", 2)):
        cand, f, noise = _full_problem(kind, 2, n)
        assert cand.shape == (n, dim) and f.shape == noise.shape == (n,)
        assert bool(((cand >= 0) & (cand <= 1)).all()) and bool(torch.isfinite(f).all())
    _, f, noise = _full_problem("branin", 2, n)  # negated Branin: max -0.397887, Sobol points come close
    assert float(f.max()) <= -0.397887 + 1e-6 and float(f.max()) > -1.0 and float(noise.abs().max()) == 0
    cand, f, _ = _full_problem("hartmann6-slice", 2, n)  # negated slice through the 6-D minimiser
    assert 3.0 < float(f.max()) <= 3.32237 + 1e-5
    x_star = torch.tensor([[0.20169, 0.150011]], dtype=torch.float64)
    from optarium.bo.problems import make_problem

    prob = make_problem("hartmann6")
    assert float(prob(torch.cat([x_star, prob.optimizers[:, 2:]], 1))) == pytest.approx(-3.32237, abs=1e-4)
    c1, f1, _ = _full_problem("prior2", 7, 64)
    c2, f2, _ = _full_problem("prior2", 7, 64)
    assert torch.equal(c1, c2) and torch.equal(f1, f2)  # the same problem for every method
    with pytest.raises(ValueError, match="problems"):
        _full_problem("ackley", 0, 8)


def test_full_wiring_at_smoke_size_with_an_untrained_head() -> None:
    """Every method runs every full-scale problem kind (untrained tiny 2-D head, 2 steps); the per-set rule
    withholds a verdict on one seed per set."""
    cfg = _full_smoke_config()
    records: list[dict[str, Any]] = []
    for m in METHODS:
        for seed in range(cfg["seeds"]):
            ctx = RunContext(m, seed, "smoke", 600.0)
            run(ctx, m, seed, cfg)
            records += [{**r, "status": "done"} for r in ctx.records]
    finals = {m: records_final(records, "log10_regret", m) for m in METHODS}
    assert all(sorted(v) == [0, 1, 2, 3] for v in finals.values())
    assert all(-3 <= x <= 0 for v in finals.values() for x in v.values())
    steps = [r for r in records if r["method"] == "gp-mes" and r.get("acq_cpu_s") is not None]
    assert len(steps) == 4 * 3  # step 0 and two BO steps per seed
    speed = [r for r in records if "pipeline_cpu_s" in r]
    assert {(r["method"], r["seed"]) for r in speed} == {("alpha-pfn", 1), ("gp-mes", 1), ("gp-ei", 1)}
    v = decide(records, cfg)
    assert v.outcome == "inconclusive", v.summary  # one seed per set: no SE
    assert {"prior_delta_vs_gp_mes", "branin_delta_vs_gp_mes", "hartmann6-slice_delta_vs_gp_mes",
            "speed_ratio_gp_mes_over_alpha_pfn"} <= set(v.figures)  # fmt: skip
    assert "regret" in plot(records, cfg)


def _full_records(deltas: dict[str, list[float]], t_pfn: float, t_mes: float) -> list[dict[str, Any]]:
    """Final records: α-PFN's log10 regret = GP-MES's + the given per-seed gap, by problem set."""
    cfg = CONFIGS["full"]
    recs: list[dict[str, Any]] = []
    for name, seeds in _set_seeds(cfg).items():
        for i, s in enumerate(sorted(seeds)):
            base = -2.0 + 0.01 * s
            for m, v in (("alpha-pfn", base + deltas[name][i]), ("gp-mes", base), ("gp-ei", base),
                         ("random", -1.0)):  # fmt: skip
                recs.append({"method": m, "seed": s, "step": 30, "status": "done", "log10_regret": v,
                             "at_floor": 0.0})  # fmt: skip
    recs.append({"method": "alpha-pfn", "seed": 1, "step": 30, "status": "done", "pipeline_cpu_s": t_pfn})
    recs.append({"method": "gp-mes", "seed": 1, "step": 30, "status": "done", "pipeline_cpu_s": t_mes})
    return recs


def test_full_rule_reproduced_not_reproduced_inconclusive() -> None:
    cfg = CONFIGS["full"]
    alt = lambda c, a, n: [c + a * (-1) ** i for i in range(n)]  # noqa: E731 - mean c, SE about a/sqrt(n)
    good = {"prior": alt(0.0, 0.1, 20), "branin": alt(0.1, 0.1, 10), "hartmann6-slice": alt(1.0, 0.05, 10)}
    v = decide(_full_records(good, 0.01, 0.3), cfg)
    assert v.outcome == "inconclusive", v.summary  # inferior on one set
    good["hartmann6-slice"] = alt(0.0, 0.05, 10)
    v = decide(_full_records(good, 0.01, 0.3), cfg)
    assert v.outcome == "reproduced" and v.figures["sets_noninferior"] == 3, v.summary
    assert decide(_full_records(good, 0.2, 0.3), cfg).outcome == "not reproduced"  # 1.5x only
    bad = {"prior": alt(1.0, 0.1, 20), "branin": alt(0.8, 0.1, 10), "hartmann6-slice": alt(0.0, 0.05, 10)}
    assert decide(_full_records(bad, 0.01, 0.3), cfg).outcome == "not reproduced"  # inferior on 2 sets
    noisy = {"prior": alt(0.2, 1.0, 20), "branin": alt(0.2, 1.0, 10), "hartmann6-slice": alt(0.0, 0.05, 10)}
    assert decide(_full_records(noisy, 0.01, 0.3), cfg).outcome == "inconclusive"  # 1 of 3 non-inferior


def test_full_bo_histories_fit_the_hyperprior_network_context() -> None:
    from optarium.bo._pfn_cache import RECIPES

    s1 = RECIPES["hyper-ls"]["stage1"]
    assert s1["max_context"] >= CONFIGS["full"]["n_init"] + CONFIGS["full"]["steps"]
