"""The dro-incomplete-covariates experiment: its instance, its baselines' building blocks and its rule."""

from __future__ import annotations

from typing import Any

import numpy as np

from optarium.experiments import dro_incomplete_covariates as exp


def test_sample_has_the_stated_missingness() -> None:
    _, pmf, marginal = exp._truth()
    assert np.allclose(pmf.sum(1), 1.0) and np.isclose(marginal.sum(), 1.0)
    d = exp.sample(0, 5000, "mnar", 0.4)
    med = exp._median(marginal)
    low = d["y"] < med
    assert abs(d["missing"][low].mean() - 0.2) < 0.03 and abs(d["missing"][~low].mean() - 0.6) < 0.03
    assert np.array_equal(np.isnan(d["X"][:, 1]), d["missing"])
    assert np.array_equal(d["X"][~d["missing"]], d["X_full"][~d["missing"]])
    mar = exp.sample(1, 5000, "mar", 0.4)
    for a, p in enumerate((0.2, 0.4, 0.6)):
        assert abs(mar["missing"][mar["X_full"][:, 0] == a].mean() - p) < 0.04


def test_saa_is_the_smallest_critical_quantile() -> None:
    y = np.array([0.0, 1.0, 2.0, 3.0, 4.0])  # F(3) = 0.8 exactly: every z in [3, 4] is optimal
    assert exp._saa(y) == 3.0
    y = np.array([5.0] * 7 + [9.0] * 3)  # F(5) = 0.7 < 0.8: the quantile is 9
    assert exp._saa(y) == 9.0
    costs = exp._costs(np.array([3.0]))
    assert costs.shape == (1, 31) and costs[0, 5] == 8.0 and costs[0, 1] == 2.0


def _records(gap: float, reliable: float, ratio: float) -> list[dict[str, Any]]:
    tag = "n100-mnar0.4"
    recs = []
    rng = np.random.default_rng(0)
    for s in range(30):
        base = 6.0 + rng.normal(0, 0.3)
        for m in exp.METHODS:
            oos = base if m == exp.PRIMARY else base + gap + rng.normal(0, 0.05)
            recs.append({"method": m, "seed": s, "step": 0, f"{tag}:oos_cost": oos,
                         f"{tag}:reliable": float(s < reliable * 30), f"{tag}:cert_ratio": ratio,
                         f"{tag}:cert": 10.0})  # fmt: skip
    return recs


def test_decide_follows_the_rule() -> None:
    config = exp.EXPERIMENT.config("quick")
    assert exp.decide(_records(1.0, 0.95, 0.3), config).outcome == "reproduced"
    assert exp.decide(_records(-1.0, 0.95, 0.3), config).outcome == "not reproduced"
    assert exp.decide(_records(1.0, 0.5, 0.3), config).outcome == "not reproduced"  # unreliable
    assert exp.decide(_records(1.0, 0.95, 0.9), config).outcome == "not reproduced"  # trivial certificate
    assert exp.decide(_records(0.0, 0.95, 0.3), config).outcome == "inconclusive"
