"""Smoke run of the decentralized-affine experiment, and its verdict rule on synthetic records."""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from optarium.experiments.decentralized_affine import CONFIGS, decide


def test_smoke_run(tmp_path: Path, check_smoke: Callable[[str, Any], None]) -> None:
    from optarium.harness.runner import run_experiment

    out = run_experiment("decentralized-affine", "smoke", out=tmp_path, jobs=1)
    check_smoke("decentralized-affine", out)
    lines = (out.run_dir / "records.jsonl").read_text().splitlines()
    recs = [json.loads(x) for x in lines if x.strip()]
    fin = [r for r in recs if r.get("final") == 1 and r["method"] == "apapc-cheb"]
    assert len(fin) == 2 and all(r["reached_tol"] == 1 for r in fin)


def _final(method: str, seed: int, graph: int, **kw: float) -> dict[str, Any]:
    base = {
        "method": method,
        "seed": seed,
        "graph": graph,
        "final": 1,
        "status": "done",
        "reached_tol": 1.0,
        "rate_r2": 0.99,
        "rate": 0.9,
        "grads_to_cmp": 100.0,
        "rounds_to_cmp": 10_000.0,
        "grads_at_cap": 100.0,
        "err_at_cap": 1e-9,
    }
    for q in ("kappa_f", "kappa_G", "chi", "kappa_B", "kappa_B1", "kappa_B2", "w_degree", "k_degree"):
        base[q] = 1.0
    base.update(kw)
    return base


def test_rule_reproduced_not_reproduced_and_censoring() -> None:
    cfg = CONFIGS["quick"]
    pairs = [(s, g) for s in range(2) for g in range(2)]
    good = [_final("apapc-cheb", s, g) for s, g in pairs]
    good += [
        _final("apapc", s, g, grads_to_cmp=math.nan, rounds_to_cmp=math.nan, grads_at_cap=7500.0)
        for s, g in pairs
    ]
    good += [_final("primal-dual", s, g, grads_to_cmp=3000.0, rounds_to_cmp=6000.0) for s, g in pairs]
    v = decide(good, cfg)
    assert v.outcome == "reproduced", v.summary
    assert v.figures["apapc_censored"] == 4
    assert abs(v.figures["cheb_rounds_ratio_geo_mean"] - 10_000 / 6000) < 1e-12
    # rounds more than 2x the best baseline -> inconclusive
    slow = [dict(r, rounds_to_cmp=13_000.0) if r["method"] == "apapc-cheb" else r for r in good]
    assert decide(slow, cfg).outcome == "inconclusive"
    # fails to reach 1e-8 on one pair -> not reproduced
    miss = [
        dict(r, reached_tol=0.0) if (r["method"], r["seed"], r["graph"]) == ("apapc-cheb", 1, 1) else r
        for r in good
    ]
    assert decide(miss, cfg).outcome == "not reproduced"
    # more gradient calls than an uncensored plain APAPC -> not reproduced
    plain = [dict(r, grads_to_cmp=50.0, rounds_to_cmp=200.0) if r["method"] == "apapc" else r for r in good]
    assert decide(plain, cfg).outcome == "not reproduced"


class _Ctx:
    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def log(self, step: int, *, check_finite: bool = True, **metrics: Any) -> None:
        self.records.append({"step": step, **metrics})

    def evaluating(self) -> Any:
        return contextlib.nullcontext()

    untimed = evaluating


def test_full_sweeps_run_and_enter_the_rule() -> None:
    from optarium.experiments.decentralized_affine import run

    cfg = {
        **CONFIGS["full"],
        "n": 4,
        "problem": CONFIGS["smoke"]["problem"],
        "kappa_grid": [4.0, 16.0],
        "chi_nodes": 6,
        "chi_graphs": [["complete", None], ["ring", None]],
        "sweep_tol": 1e-3,
    }
    recs: list[dict[str, Any]] = []
    for method in ("kappa-sweep", "chi-sweep", "chi-sweep-pred"):
        ctx = _Ctx()
        run(ctx, method, 0, cfg)
        recs += [{**r, "method": method, "seed": 0, "status": "done"} for r in ctx.records]
    fin = [r for r in recs if r.get("final") == 1]
    assert len(fin) == 6 and all(math.isfinite(r["rounds_to_sweep"]) for r in fin)
    pred = {r["chi_graph"]: r["w_degree"] for r in fin if r["method"] == "chi-sweep-pred"}
    dflt = {r["chi_graph"]: r["w_degree"] for r in fin if r["method"] == "chi-sweep"}
    assert all(pred[k] >= dflt[k] for k in dflt) and pred[1.0] > dflt[1.0]
    v = decide(recs, cfg)
    assert math.isfinite(v.figures["slope_grads_vs_kappa_f"]) and math.isfinite(
        v.figures["slope_rounds_vs_chi"]
    )


def test_prox_baselines_enter_the_rounds_ratio_not_the_gradient_comparison() -> None:
    """Tracking-ADMM / DPMM: their rounds set the best baseline; their local solves are not gradient calls;
    a censored one enters at its own cap (``run_cap``); primal-dual absent (quick) is not a failure."""
    cfg = CONFIGS["quick"]
    pairs = [(s, g) for s, g in ((0, 0), (0, 1), (1, 0), (1, 1))]
    recs = [_final("apapc-cheb", s, g) for s, g in pairs]
    recs += [
        _final(
            "apapc", s, g, grads_to_cmp=math.nan, rounds_to_cmp=math.nan, grads_at_cap=3750.0, run_cap=15e3
        )
        for s, g in pairs
    ]
    recs += [_final("dpmm", s, g, grads_to_cmp=10.0, rounds_to_cmp=20_000.0) for s, g in pairs]
    recs += [
        _final("tracking-admm", s, g, grads_to_cmp=math.nan, rounds_to_cmp=math.nan, run_cap=15e3)
        for s, g in pairs
    ]
    v = decide(recs, cfg)
    assert v.outcome == "reproduced", v.summary  # dpmm's 10 local solves do not beat 100 gradient calls
    assert abs(v.figures["cheb_rounds_ratio_geo_mean"] - 10_000 / 15_000) < 1e-12
    assert v.figures["tracking-admm_censored"] == 4 and "primal-dual_censored" not in v.figures
    fast = [dict(r, rounds_to_cmp=4000.0) if r["method"] == "dpmm" else r for r in recs]
    v = decide(fast, cfg)
    assert v.outcome == "inconclusive"
    assert abs(v.figures["cheb_rounds_ratio_geo_mean"] - 2.5) < 1e-12
    assert abs(v.figures["cheb_rounds_ratio_vs_gradient_baselines_geo_mean"] - 10_000 / 15_000) < 1e-12
