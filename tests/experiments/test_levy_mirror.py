"""The levy-mirror experiment: its verdict rules on synthetic records, and its common-random-number noise."""

from __future__ import annotations

import math
from typing import Any

import torch

from optarium.experiments.levy_mirror import CONFIGS, CommonStableNoise, decide
from optarium.problems.heavy_tail import chambers_mallows_stuck

QUICK = {**CONFIGS["quick"]}
FULL = {**CONFIGS["full"]}


def _records(method: str, slopes: dict[float, float], horizons: list[int], n: int = 61,
             rise: float | None = None, info: bool = True, spread: float = 0.3) -> list[dict]:  # fmt: skip
    """Per-seed errors c T^slope exp(spread z): z the n normal quantiles, shuffled per horizon (so the median
    follows c T^slope exactly for odd n and the bootstrap sees seed-to-seed noise); optionally the last
    median raised by the factor ``rise``."""
    gen = torch.Generator().manual_seed(0)
    q = torch.special.ndtri((torch.arange(n, dtype=torch.float64) + 0.5) / n)
    recs: list[dict[str, Any]] = []
    for a, s in slopes.items():
        z = torch.stack([q[torch.randperm(n, generator=gen)] for _ in horizons])
        for k, t in enumerate(horizons):
            scale = 0.1 * (t / horizons[0]) ** s
            if rise is not None and k == len(horizons) - 1:
                scale = 0.1 * (horizons[-2] / horizons[0]) ** s * rise
            for j in range(n):
                recs.append({"method": method, "seed": 0, "step": t, "status": "done", "alpha": a,
                             "seed_index": j, "err": scale * math.exp(spread * float(z[k, j]))})  # fmt: skip
        if info:
            recs.append({"method": method, "seed": 0, "step": horizons[-1], "status": "done", "alpha": a,
                         "min_x": 1e-30, "max_sum_err": 1e-14, "gamma0_best": 0.3})  # fmt: skip
    return recs


def test_convex_rule_reproduced_not_reproduced_and_inconclusive() -> None:
    h = QUICK["horizons"]
    v = decide(_records("smd-convex", {1.3: -0.22, 1.6: -0.45, 2.0: -0.75}, h), QUICK)
    assert v.outcome == "reproduced", v.summary
    assert v.figures["convex:ordering"] == "reproduced"
    assert abs(v.figures["convex:alpha2:slope"] + 0.75) < 0.05
    # too flat at alpha = 1.3 (the threshold is -0.10): beyond 2 SE -> not reproduced
    v = decide(_records("smd-convex", {1.3: 0.02, 1.6: -0.45, 2.0: -0.75}, h), QUICK)
    assert v.outcome == "not reproduced", v.summary
    # a median that rises between the last two snapshots
    v = decide(_records("smd-convex", {1.3: -0.3, 1.6: -0.45, 2.0: -0.75}, h, rise=1.5), QUICK)
    assert v.outcome == "not reproduced" and v.figures["convex:alpha2:median_decreases"] is False
    # just above the threshold, within 2 SE: inconclusive; equal slopes: the ordering is inconclusive
    v = decide(_records("smd-convex", {1.3: -0.09, 1.6: -0.45, 2.0: -0.75}, h, n=21, spread=1.0), QUICK)
    se = v.figures["convex:alpha1.3:slope_se"]
    assert -0.1 < v.figures["convex:alpha1.3:slope"] <= -0.1 + 2 * se, v.summary
    assert v.outcome == "inconclusive", v.summary
    v = decide(_records("smd-convex", {1.3: -0.75, 1.6: -0.75, 2.0: -0.75}, h), QUICK)
    assert v.outcome == "reproduced" and v.figures["convex:ordering"] == "inconclusive"
    # iterates off the simplex fail the rule
    recs = _records("smd-convex", {1.3: -0.22, 1.6: -0.45, 2.0: -0.75}, h)
    for r in recs:
        if "min_x" in r:
            r["min_x"] = -1e-3
    assert decide(recs, QUICK).outcome == "not reproduced"
    # missing records: inconclusive, not an error
    assert decide([], QUICK).outcome == "inconclusive"


def test_full_rule_decides_on_the_strongly_convex_parts() -> None:
    h = FULL["rsc_horizons"]
    good = {1.3: -0.41, 1.6: -0.74, 2.0: -1.04}
    recs = (_records("smd-rsc", good, h, info=False) + _records("psgd-rsc", good, h, info=False)
            + _records("smd-convex", {1.3: -0.22, 1.6: -0.45, 2.0: -0.75}, FULL["horizons"]))  # fmt: skip
    v = decide(recs, FULL)
    assert v.outcome == "reproduced", v.summary
    assert v.figures["convex:outcome"] == "reproduced"
    assert v.figures["rsc_entropic:ordering"] == "reproduced"
    bad = _records("psgd-rsc", {1.3: 0.1, 1.6: -0.74, 2.0: -1.04}, h, info=False)  # bound -0.25 + 0.15
    v = decide(_records("smd-rsc", good, h, info=False) + bad, FULL)
    assert v.outcome == "not reproduced" and v.figures["rsc_euclidean:outcome"] == "not reproduced"


def test_common_stable_noise_shares_the_draws_across_alpha() -> None:
    noise = CommonStableNoise((1.3, 2.0), scale=1.0, axis=-3)
    u = noise.sample((5, 4, 2, 3, 6), torch.Generator().manual_seed(1))
    assert u.shape == (5, 4, 2, 3, 6)
    assert torch.equal(u[:, :, :, 0], u[:, :, :, 2])  # the settings axis shares the draws
    g = torch.Generator().manual_seed(1)
    v = torch.rand((5, 4, 1, 1, 6), generator=g, dtype=torch.float64).sub_(0.5).mul_(math.pi)
    w = torch.empty((5, 4, 1, 1, 6), dtype=torch.float64).exponential_(generator=g)
    for i, a in enumerate((1.3, 2.0)):
        torch.testing.assert_close(u[:, :, i, 0], chambers_mallows_stuck(v, w, a)[:, :, 0, 0])
