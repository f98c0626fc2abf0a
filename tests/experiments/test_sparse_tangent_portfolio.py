"""The sparse-tangent-portfolio experiment at smoke scale, and its verdict rule on synthetic records."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

import optarium.experiments.sparse_tangent_portfolio as exp
from optarium.harness.runner import run_experiment

_SP = {"data": "sp500", "k": 5}


def _sp_records(shift: dict[str, float], seeds: int = 2, days: int = 600) -> list[dict[str, object]]:
    """Daily returns: a common noise path per seed plus a method-specific drift (paired)."""
    recs: list[dict[str, object]] = []
    for s in range(seeds):
        base = 0.01 * torch.randn(days, generator=torch.Generator().manual_seed(s), dtype=torch.float64)
        for m in exp.METHODS:
            own = 0.002 * torch.randn(
                days, generator=torch.Generator().manual_seed(100 + s), dtype=torch.float64
            )
            for d, r in enumerate((base + own + shift.get(m, 0.0)).tolist()):
                recs.append({"method": m, "seed": s, "step": d, "setting": 0, "day_return": r})
    return recs


def _synth_records(gaps: dict[int, list[float]]) -> list[dict[str, object]]:
    recs: list[dict[str, object]] = []
    for si, (n, gs) in enumerate(sorted(gaps.items())):
        for s, g in enumerate(gs):
            for m, v in (("dfl", 1.0 + g), ("pf", 1.0), ("historical", 0.5), ("equal-weight", 0.6)):
                recs.append({"method": m, "seed": s, "step": 1, "setting": si, "model_sharpe": v, "n": n})
    return recs


def test_smoke_run_records_plots_and_withholds_verdict(
    tmp_path: Path, check_smoke: Callable[[str, Any], None]
) -> None:
    out = run_experiment("sparse-tangent-portfolio", "smoke", out=tmp_path, jobs=1)
    check_smoke("sparse-tangent-portfolio", out)  # the generic checks; test_all_smoke skips this slug
    assert all(u["status"] == "done" for u in out.units), [u.get("error") for u in out.units]
    assert out.verdict.outcome == "no verdict"
    assert {"s0_sp500_k3_dSR_pf", "s0_sp500_k3_se_pf", "s1_synthetic_k3_n8_dSR_pf"} <= set(
        out.verdict.figures
    )
    assert sorted(p.name for p in (out.run_dir / "figures").iterdir()) == [
        "cumulative_returns.png",
        "test_sharpe.png",
    ]


def test_paired_sp_rule_better_worse_tie() -> None:
    cfg = {"settings": [_SP], "bootstrap": 200}
    v = exp.decide(_sp_records({"dfl": 0.004}), cfg)
    assert v.outcome == "reproduced" and v.figures["s0_sp500_k5_label_pf"] == "better"
    assert exp.decide(_sp_records({"pf": 0.004}), cfg).outcome == "not reproduced"
    assert (
        exp.decide(_sp_records({"equal-weight": 0.004}), cfg).outcome == "inconclusive"
    )  # only 1/N is better
    assert exp.decide(_sp_records({}), cfg).outcome == "inconclusive"


def test_universe_size_effect_rule() -> None:
    settings = [{"data": "synthetic", "n": n, "k": 10} for n in (20, 50, 100)]
    cfg = {"settings": settings}
    grow = {20: [0.0, 0.01, -0.01, 0.0, 0.005], 50: [0.1] * 5, 100: [0.3, 0.32, 0.29, 0.31, 0.3]}
    v = exp.decide(_synth_records(grow), cfg)
    assert v.outcome == "reproduced" and v.figures["G_universe_effect"] == pytest.approx(0.3 + 0.004 - 0.001)
    shrink = {20: [0.3, 0.32, 0.29, 0.31, 0.3], 50: [0.1] * 5, 100: [0.0, 0.01, -0.01, 0.0, 0.005]}
    assert exp.decide(_synth_records(shrink), cfg).outcome == "not reproduced"
    flat = {20: [0.1, -0.1, 0.2, 0.0, 0.05], 50: [0.1] * 5, 100: [0.12, -0.1, 0.0, 0.2, 0.01]}
    assert exp.decide(_synth_records(flat), cfg).outcome == "inconclusive"
    # a "worse" vs historical decides the verdict, but G is still reported
    recs = [
        {**r, "model_sharpe": 2.0} if r["method"] == "historical" and r["setting"] == 1 else r
        for r in _synth_records(grow)
    ]
    v = exp.decide(recs, cfg)
    assert v.outcome == "not reproduced" and v.figures["s1_synthetic_k10_n50_label_historical"] == "worse"
    assert v.figures["G_universe_effect"] == pytest.approx(0.3 + 0.004 - 0.001)


def test_block_bootstrap_is_stationary_with_mean_block_21() -> None:
    idx = exp.block_bootstrap_indices(2000, 50)
    assert idx.shape == (50, 2000) and int(idx.min()) >= 0 and int(idx.max()) < 2000
    runs = ((idx[:, 1:] - idx[:, :-1]) % 2000 != 1).float().mean()
    assert 1 / float(runs) == pytest.approx(21.0, rel=0.15)
    assert torch.equal(idx, exp.block_bootstrap_indices(2000, 50))  # same days for every method and seed


def test_equal_weight_matches_skfolio() -> None:
    pytest.importorskip("skfolio", reason="skfolio is the 1/N reference")
    from skfolio.optimization import EqualWeighted

    returns, _ = exp.sp500_returns()
    x = returns[-500:]
    ew = EqualWeighted().fit(x.numpy())
    ref = torch.tensor(ew.predict(x.numpy()).returns, dtype=torch.float64)
    w, _ = exp._weights("equal-weight", returns, (None, None, torch.tensor([0])), 5, 0, {}, None)
    assert torch.allclose(x @ w[0], ref, atol=1e-12)
    assert math.isclose(float(w.sum()), 1.0)
