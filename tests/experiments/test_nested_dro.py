"""The nested-dro experiment: its problem generator and its verdict rule on synthetic records.

The smoke run itself is exercised by tests/experiments/test_all_smoke.py.
"""

from __future__ import annotations

import torch

from optarium.experiments.nested_dro import (
    COUPLED,
    PRIMARY,
    _orwdro_keep,
    decide,
)
from optarium.problems.contaminated import contaminated_regression

CONFIG = {"methods": [PRIMARY, *COUPLED, "ols"]}


def _records(gaps: dict[str, float], *, w_big: float = 0.02, w_lev: float = 1.0, n: int = 10) -> list[dict]:
    """Records where baseline m has test_mse and lev_err = nested + gaps[m] + a small seed wobble."""
    recs: list[dict] = []
    for s in range(n):
        wobble = 0.01 * ((s % 3) - 1)
        base = {"seed": s, "step": 0, "status": "done"}
        recs.append({**base, "method": PRIMARY, "test_mse": 1.0, "lev_err": 0.05, "err": 0.1,
                     "w_outlier_big": w_big, "w_leverage": w_lev, "w_leverage_min": w_lev,
                     "w_outlier_all": 0.2, "w_clean": 1.0})  # fmt: skip
        for m, g in gaps.items():
            recs.append({**base, "method": m, "test_mse": 1.0 + g + wobble, "lev_err": 0.05 + g + wobble,
                         "err": 0.2, "lev_dropped": 0.9})  # fmt: skip
    return recs


def test_rule_reproduced_when_every_coupled_baseline_is_worse_and_weights_hold() -> None:
    v = decide(_records({m: 0.5 for m in (*COUPLED, "ols")}), CONFIG)
    assert v.outcome == "reproduced", v.summary
    assert v.figures["w2-dro_minus_nested_test_mse_outcome"] == "reproduced"
    assert abs(v.figures["or-wdro_minus_nested_lev_err_mean_gap"] - 0.499) < 1e-12  # 0.5 + mean wobble


def test_rule_not_reproduced_when_one_baseline_is_better_or_a_weight_condition_fails() -> None:
    gaps = {m: 0.5 for m in (*COUPLED, "ols")}
    assert decide(_records({**gaps, "or-wdro": -0.5}), CONFIG).outcome == "not reproduced"
    assert decide(_records(gaps, w_big=0.2), CONFIG).outcome == "not reproduced"
    assert decide(_records(gaps, w_lev=0.7), CONFIG).outcome == "not reproduced"
    # a reference (OLS) being better does not decide anything
    assert decide(_records({**gaps, "ols": -0.5}), CONFIG).outcome == "reproduced"


def test_rule_inconclusive_within_two_se() -> None:
    gaps = {m: 0.5 for m in (*COUPLED, "ols")}
    v = decide(_records({**gaps, "chi2-dro": 0.001}), CONFIG)  # 0.001 against a seed wobble of 0.01
    assert v.outcome == "inconclusive", v.summary


def test_problem_is_deterministic_with_leverage_points_and_outliers() -> None:
    a, b, c = contaminated_regression(3), contaminated_regression(3), contaminated_regression(4)
    assert torch.equal(a.X, b.X) and torch.equal(a.y, b.y) and not torch.equal(a.X, c.X)
    assert a.X.shape == (200, 5) and a.X_test.shape == (5000, 5) and a.y_val.shape == (200,)
    lev = a.X[a.leverage]
    assert torch.allclose(lev[:, 0].abs(), torch.full((10,), 6.0, dtype=torch.float64), atol=0.5)
    assert len(set(a.outliers.tolist()) & set(a.leverage.tolist())) == 0 and len(a.outliers) == 20
    clean = torch.ones(200, dtype=torch.bool)
    clean[a.outliers] = False
    # clean residuals are N(0, 1); contaminated ones carry the added noise
    r = a.y - a.X @ a.theta
    assert float(r[clean].std()) < 1.3
    assert torch.allclose(r[a.outliers] - a.added, r[a.outliers] - a.added)  # aligned shapes
    assert float((r[a.outliers] - a.added).abs().max()) < 5.0


def test_orwdro_trimming_drops_the_farthest_points() -> None:
    p = contaminated_regression(0)
    keep = _orwdro_keep(p.X, p.y, 0.1)
    assert int((~keep).sum()) == 20
    # the trimming is geometric: the clean leverage points (6 MADs out along e1) are among the dropped
    assert float((~keep[p.leverage]).float().mean()) >= 0.5
