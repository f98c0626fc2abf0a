"""The mtbl-wc-penalty experiment's verdict rule on hand-built records (each part holds, fails, or is
undecided exactly as stated), and one unit of the full-only S = 3 part (slow)."""

from __future__ import annotations

import math
from typing import Any

import pytest

import optarium.experiments.mtbl_wc_penalty as exp
from optarium.experiments.mtbl_wc_penalty import CONFIGS, decide


def _rec(method: str, seed: int, step: int, **metrics: float) -> dict[str, Any]:
    return {"method": method, "seed": seed, "step": step, "status": "done", **metrics}


def _records(
    n_fail: tuple[int, ...] = (0, 0, 0),
    slopes: tuple[float, ...] = (-0.6, -0.7, -0.5),
    cov_wc: tuple[float, ...] = (1.0, 0.96, 1.0),
    cov_lin: tuple[float, ...] = (0.0, 0.0, 0.02),
    nonconvex: float = 0.64,
) -> list[dict[str, Any]]:
    recs = []
    for seed in range(len(n_fail)):
        for m in ("quad-wc-hard", "quad-wc-smooth", "quad-linear", "quad-mgda"):
            nf = n_fail[seed] if m in ("quad-wc-hard", "quad-wc-smooth") else 0
            recs.append(
                _rec(m, seed, 5001, n_fail=float(nf), max_rel_err=0.01, hv_ratio=1.0, max_violation=0.1,
                     max_kkt_residual=0.01, bias_ratio_min=5.0)
            )  # fmt: skip
        for T, g in ((300, 1e-2), (1000, 5e-3)):
            recs.append(_rec("quad-rate", seed, T, gap=g, horizon=float(T)))
        recs.append(_rec("quad-rate", seed, 10001, slope=slopes[seed], min_gap=1e-3))
        for m, cov in (("ff-wc-hard", cov_wc[seed]), ("ff-linear", cov_lin[seed]), ("ff-mgda", 0.4)):
            recs.append(_rec(m, seed, 5001, coverage=cov, hv_ratio=0.8, nonconvex_fraction=nonconvex))
    return recs


QUICK = dict(CONFIGS["quick"])


def test_all_parts_hold() -> None:
    v = decide(_records(), QUICK)
    assert v.outcome == "reproduced", v.summary
    assert v.figures["part_a"] == v.figures["part_b"] == v.figures["part_c"] == "reproduced"
    assert math.isclose(v.figures["ff:coverage_mean_gap"], (1.0 + 0.96 + 0.98) / 3)


def test_part_a() -> None:
    assert decide(_records(n_fail=(0, 2, 0)), QUICK).figures["part_a"] == "not reproduced"
    v = decide(_records(n_fail=(0, 1, 0)), QUICK)
    assert v.figures["part_a"] == "inconclusive" and v.outcome == "inconclusive"


def test_part_b() -> None:
    assert decide(_records(slopes=(-0.6, -0.1, -0.5)), QUICK).outcome == "not reproduced"
    assert decide(_records(slopes=(-0.6, -0.2, -0.5)), QUICK).figures["part_b"] == "inconclusive"


def test_part_c() -> None:
    # the weighted sum covering as much as the Chebyshev points: not reproduced
    v = decide(_records(cov_wc=(0.2, 0.1, 0.2), cov_lin=(0.9, 0.8, 0.9)), QUICK)
    assert v.figures["part_c"] == "not reproduced" and v.outcome == "not reproduced"
    # better than the weighted sum but short of 0.8 coverage: inconclusive
    assert decide(_records(cov_wc=(0.6, 0.7, 0.65)), QUICK).figures["part_c"] == "inconclusive"
    # within 2 SE: inconclusive
    assert decide(_records(cov_wc=(0.9, 0.1, 0.9), cov_lin=(0.1, 0.9, 0.1)), QUICK).figures["part_c"] == (
        "inconclusive"
    )
    # the instance's front is not non-convex: no comparison is made
    v = decide(_records(nonconvex=0.1), QUICK)
    assert v.figures["part_c"] == "inconclusive" and "ff:coverage_mean_gap" not in v.figures


def test_missing_parts_and_seeds() -> None:
    recs = [r for r in _records() if not r["method"].startswith("ff-")]
    v = decide(recs, QUICK)
    assert "part_c" not in v.figures and v.outcome == "reproduced"
    one_seed = [r for r in _records() if r["seed"] == 0]
    assert decide(one_seed, QUICK).outcome == "inconclusive"


@pytest.mark.slow
def test_three_task_unit_runs() -> None:
    """The full-only S = 3 part on a small problem (cvxpy ground truth)."""

    class Ctx:
        def __init__(self) -> None:
            self.records: list[dict[str, Any]] = []

        def log(self, step: int, **metrics: float) -> None:
            self.records.append({"method": "quad3-wc-hard", "seed": 0, "step": step, **metrics})

        def untimed(self) -> Any:
            import contextlib

            return contextlib.nullcontext()

        evaluating = untimed

    ctx = Ctx()
    config = {**CONFIGS["smoke"], "prefs3": 3, "steps": 5000}
    exp.run(ctx, "quad3-wc-hard", 0, config)
    final = ctx.records[-1]
    assert final["n_fail"] == 0.0 and final["max_rel_err"] < 2e-2


@pytest.mark.slow
def test_hypervolume_matches_optarium_bo_metrics() -> None:
    """The experiment's pymoo hypervolume equals optarium.bo.metrics.hypervolume (BoTorch's exact one)."""
    import torch

    from optarium.bo.metrics import hypervolume as bo_hv

    g = torch.Generator().manual_seed(0)
    for _ in range(5):
        F = torch.rand(12, 2, generator=g, dtype=torch.float64)
        ref = torch.tensor([0.9, 0.95], dtype=torch.float64)
        assert math.isclose(exp.hypervolume(F, ref), bo_hv(F, ref), rel_tol=1e-12, abs_tol=1e-15)
