"""The a-mwgrad experiment at smoke scale, and its verdict rule on hand-built records."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

import optarium.experiments.a_mwgrad  # noqa: F401  (registers the experiment)
from optarium.experiments.a_mwgrad import (
    CONFIGS,
    PARTS,
    blr_rule,
    decide,
    moo_svgd_step,
    ratio_rule,
)
from optarium.harness.runner import run_experiment
from optarium.ot.a_mwgrad import gaussian_kl

QUICK = {**CONFIGS["quick"], "methods": ["a-mwgrad", "mwgrad"]}


def _records(a: dict[str, list[float]], mw: dict[str, list[float]]) -> list[dict[str, Any]]:
    recs: list[dict[str, Any]] = []
    for method, per in (("a-mwgrad", a), ("mwgrad", mw)):
        for key, vals in per.items():
            for seed, v in enumerate(vals):
                recs.append({"method": method, "seed": seed, "step": 1, "status": "done", key: v})
    return recs


def _keys() -> list[str]:
    return [f"{p}:iters_{t:g}" for p, t in PARTS]


def test_smoke_run_records_plots_and_withholds_verdict(
    tmp_path: Path, check_smoke: Callable[[str, Any], None]
) -> None:
    out = run_experiment("a-mwgrad", "smoke", out=tmp_path, jobs=1)
    check_smoke("a-mwgrad", out)
    assert sorted(p.name for p in (out.run_dir / "figures").iterdir()) == [
        "blr_test_ll.png",
        "iteration_ratios.png",
        "stationarity.png",
    ]
    f = out.verdict.figures
    assert "i:iters_0.001:median_ratio" in f and "ii:nll_mean:moo-svgd:median" in f
    assert "i@eta0.5:kl_0:ls-svgd:median" in f and f["iv:n_seeds"] == 1


def test_rule_reproduced_not_reproduced_and_inconclusive() -> None:
    fast = {k: [20.0, 22.0, 21.0, 25.0, 19.0, 23.0, 20.0, 22.0] for k in _keys()}
    slow = {k: [60.0, 61.0, 59.0, 62.0, 60.0, 58.0, 61.0, 60.0] for k in _keys()}
    v = decide(_records(fast, slow), QUICK)
    assert v.outcome == "reproduced", v.summary
    assert v.figures["i:iters_0.001:faster_seeds"] == 8
    # swapped: A-MWGraD slower -> not reproduced
    assert decide(_records(slow, fast), QUICK).outcome == "not reproduced"
    # median ratio 0.35 but A-MWGraD slower in 2 of 8 seeds (< 80 %) -> inconclusive
    mixed = {k: list(v) for k, v in fast.items()}
    mixed["iii:iters_1e-06"] = [20.0, 22.0, 21.0, 25.0, 19.0, 23.0, 70.0, 70.0]
    out = decide(_records(mixed, slow), QUICK)
    assert out.figures["iii:iters_1e-06:outcome"] == "inconclusive" and out.outcome == "inconclusive"


def test_ratio_rule_edges() -> None:
    r = ratio_rule({0: 50.0, 1: 50.0}, {0: 100.0, 1: 100.0}, 0.8)
    assert r["median_ratio"] == 0.5 and r["outcome"] == "reproduced"
    assert ratio_rule({0: 1.0}, {0: 10.0}, 0.8)["outcome"] == "inconclusive"  # one seed is not enough
    assert ratio_rule({0: 10.0, 1: 10.0}, {0: 10.0, 1: 10.0}, 0.8)["outcome"] == "not reproduced"


def test_gaussian_kl_and_moo_svgd_step() -> None:
    g = torch.Generator().manual_seed(0)
    X = torch.randn(4000, 2, generator=g, dtype=torch.float64)
    assert gaussian_kl(X, torch.zeros(2, dtype=torch.float64), torch.eye(2, dtype=torch.float64)) < 2e-3
    # closed form for a shifted mean: KL = |m|^2 / 2 (up to the sample's own error)
    kl = gaussian_kl(X, torch.tensor([1.0, 0.0], dtype=torch.float64), torch.eye(2, dtype=torch.float64))
    assert abs(kl - 0.5) < 0.05
    # MOO-SVGD with identical targets is an SVGD step on that target (min-norm weights are irrelevant)
    from optarium.ot.a_mwgrad import MWGraD

    X0 = 2 * torch.randn(30, 2, generator=g, dtype=torch.float64)
    gV = (X0 - 1.0).unsqueeze(0).expand(3, -1, -1)
    a = moo_svgd_step(X0.clone(), gV.clone(), 0.1)
    s = MWGraD([lambda x: -0.5 * ((x - 1.0) ** 2).sum(-1)], score_estimator="svgd", step_size=0.1)
    b = s.step(X0.clone())
    torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def _blr(a: list[list[float]], mw: list[list[float]]) -> list[dict[str, Any]]:
    recs: list[dict[str, Any]] = []
    for method, per in (("a-mwgrad", a), ("mwgrad", mw)):
        for seed, curve in enumerate(per):
            for i, v in enumerate(curve):
                recs.append({"method": method, "seed": seed, "step": 10 * i, "iv:test_ll": v})
    return recs


def test_blr_rule_sides() -> None:
    mw = [[-0.7, -0.5, -0.4, -0.36, -0.35]] * 3  # budget 40, final -0.35
    fast = [[-0.7, -0.36, -0.35, -0.34, -0.34]] * 3  # reaches -0.35 at 20 of 40
    r = blr_rule(_blr(fast, mw), 40)
    assert r["median_fraction"] == 0.5 and r["outcome"] == "reproduced" and r["reached"] == 3
    slow = [[-0.7, -0.6, -0.5, -0.4, -0.36]] * 3  # never reaches
    assert blr_rule(_blr(slow, mw), 40)["outcome"] == "not reproduced"
    late = [[-0.7, -0.6, -0.5, -0.35, -0.35]] * 3  # at 30 of 40
    assert blr_rule(_blr(late, mw), 40)["outcome"] == "inconclusive"
