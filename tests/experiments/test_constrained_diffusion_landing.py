"""The constrained-diffusion-landing experiment: smoke run, and its verdict rule on hand-built records."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from optarium.experiments.constrained_diffusion_landing import CONFIGS, decide, make_constraints
from optarium.harness.runner import run_experiment

pytest.importorskip("ot", reason="POT computes the sliced-W2 metric (test / experiments extra)")


def _recs(
    sw_land: list[float], sw_proj: list[float], cost_land: float, fails: float = 0.0
) -> list[dict[str, Any]]:
    out = []
    for seed, (a, b) in enumerate(zip(sw_land, sw_proj, strict=True)):
        for m, sw, cost, f in (("olla", a, cost_land, fails), ("olla-p", b, 100.0, 0.0)):
            out.append(
                {
                    "method": m,
                    "seed": seed,
                    "step": 50,
                    "sw2": sw,
                    "floor": 0.02,
                    "cost": cost,
                    "jacobian_evals": cost,
                    "newton_iters": 0.0,
                    "failures": f,
                    "max_violation_path": 0.1,
                    "status": "done",
                }
            )
    return out


@pytest.mark.parametrize(
    ("land", "cost", "fails", "outcome"),
    [
        ([0.021, 0.019, 0.020], 50.0, 0.0, "reproduced"),  # equal quality, cheaper
        ([0.080, 0.082, 0.079], 50.0, 0.0, "not reproduced"),  # much worse than the floor allows
        ([0.021, 0.019, 0.020], 150.0, 0.0, "not reproduced"),  # not cheaper
        ([0.021, 0.019, 0.020], 50.0, 1.0, "not reproduced"),  # a landing failure
        ([0.035, 0.045, 0.041], 50.0, 0.0, "inconclusive"),  # between max(floor, 2 SE) and floor + 2 SE
    ],
)
def test_rule_reaches_each_outcome(land: list[float], cost: float, fails: float, outcome: str) -> None:
    proj = [0.020, 0.020, 0.020]
    v = decide(_recs(land, proj, cost, fails), CONFIGS["quick"])
    assert v.outcome == outcome, v.summary


def test_start_point_is_feasible_and_next_to_the_ball() -> None:
    from optarium.experiments.constrained_diffusion_landing import _start

    C = make_constraints()
    x = _start({**CONFIGS["smoke"], "n": 1})
    h, g = C.values(x)
    assert abs(h.item()) < 1e-12 and -0.05 < g.item() < 0  # outside the ball, close to it


def test_smoke_run(tmp_path: Path, check_smoke: Callable[[str, Any], None]) -> None:
    out = run_experiment("constrained-diffusion-landing", "smoke", out=tmp_path, jobs=1)
    check_smoke("constrained-diffusion-landing", out)
    fig = out.verdict.figures
    assert "reported:s0:gap_mean" in fig and "gate_passed" in fig and "s2:ulla_vs_olla:gap_mean" in fig
    for part in ("s2", "torus"):  # every trained unit ran on both smoke seeds and measured its memory
        for name in ("olla", "olla-p", "ulla", "ulla-p"):
            assert fig[f"{part}:{name}:peak_mem_mean"] > 0 and fig[f"{part}:{name}:failures_mean"] >= 0
        assert fig[f"{part}:olla:train_peak_mem_mean"] > 0 and fig[f"{part}:olla:beyond_part_seeds"] == 0
    # the SO(3) block ran on both smoke seeds, is reported (not in the rule) and kept SO(3)
    assert fig["reported:so3:beyond_part_seeds"] == 0 and fig["reported:so3:floor_mean"] < 0.2
    for name in ("olla", "olla-p", "ulla", "ulla-p", "olla-coarse", "olla-p-coarse"):
        assert fig[f"reported:so3:{name}:final_violation_mean"] <= 1e-5
        assert fig[f"reported:so3:{name}:wrong_component_mean"] == 0
        assert abs(fig[f"reported:so3:{name}:min_det_mean"] - 1) < 1e-5
        assert fig.get(f"reported:so3:{name}:peak_mem_mean", 1.0) > 0
    for land in ("olla", "ulla", "olla-coarse"):
        assert fig[f"reported:so3:{land}_cost_ratio_mean"] < 1


def _trained_recs(
    *,
    torus_land: float = 0.05,
    torus_cost_land: float = 50.0,
    s2_ulla: float = 0.030,
    s2_q: float = 0.030,
    torus_fail: float = 0.0,
) -> list[dict[str, Any]]:
    """Records of the four trained-net units over 3 seeds (small per-seed jitter so SEs are finite)."""
    out = []
    for seed, jit in enumerate((-0.001, 0.0, 0.001)):
        for part, floor, trivial in (("s2", 0.01, 0.47), ("torus", 0.02, 0.60)):
            for kind, land, proj in (("olla", "olla", "olla-p"), ("ulla", "ulla", "ulla-p")):
                if part == "s2":
                    ql = (s2_ulla if kind == "ulla" else s2_q) + jit
                    qp = ql
                    cl = cp = 100.0
                    fl = 0.0
                else:
                    ql, qp = torus_land + jit, 0.05 + 0.5 * jit
                    cl, cp, fl = torus_cost_land, 100.0, torus_fail
                out.append(
                    {
                        "method": f"{part}-{kind}",
                        "seed": seed,
                        "step": 10,
                        "status": "done",
                        "floor": floor,
                        "trivial": trivial,
                        f"{land}_q": ql,
                        f"{proj}_q": qp,
                        f"{land}_cost": cl,
                        f"{proj}_cost": cp,
                        f"{land}_failures": fl,
                        f"{proj}_failures": 0.0,
                    }
                )
    return out


@pytest.mark.parametrize(
    ("kw", "outcome"),
    [
        ({}, "reproduced"),
        ({"s2_q": 0.2, "s2_ulla": 0.2}, "inconclusive"),  # the quality gate (0.2 x 0.47 = 0.094) fails
        ({"torus_land": 0.09}, "not reproduced"),  # landing worse than -P by more than margin + 2 SE
        ({"torus_cost_land": 150.0}, "not reproduced"),  # landing not cheaper
        ({"s2_ulla": 0.06}, "inconclusive"),  # ULLA N = 50 not non-inferior to OLLA N = 100 on S^2
        ({"torus_land": 0.070}, "inconclusive"),  # gap = margin (floor 0.02): not within, not beyond + 2 SE
        ({"torus_fail": 1.0}, "inconclusive"),  # a landing failure blocks "reproduced" (spec's clauses)
    ],
)
def test_trained_rule_reaches_each_outcome(kw: dict[str, float], outcome: str) -> None:
    v = decide(_trained_recs(**kw), CONFIGS["full"])
    assert v.outcome == outcome, v.summary


def _so3_recs(q_land: float, cost_land: float) -> list[dict[str, Any]]:
    out = []
    for seed in range(3):
        rec: dict[str, Any] = {"method": "so3", "seed": seed, "step": 10, "status": "done", "floor": 1e-4}
        rec["trivial"] = 0.1
        for name, q, cost in (("olla", q_land, cost_land), ("olla-p", 1e-4, 100.0)):
            rec.update({f"{name}_q": q + 1e-5 * seed, f"{name}_cost": cost, f"{name}_failures": 0.0})
        for name, q, cost in (("ulla", q_land, cost_land), ("ulla-p", 1e-4, 100.0)):
            rec.update({f"{name}_q": q + 1e-5 * seed, f"{name}_cost": cost})
        out.append(rec)
    return out


@pytest.mark.parametrize("kw", [{}, {"torus_land": 0.09}, {"s2_q": 0.2, "s2_ulla": 0.2}])
def test_so3_block_is_reported_and_does_not_change_the_rule(kw: dict[str, float]) -> None:
    base = decide(_trained_recs(**kw), CONFIGS["full"])
    for q_land, cost_land in ((1e-4, 50.0), (0.05, 500.0)):  # SO(3) landing as good / far worse
        v = decide(_trained_recs(**kw) + _so3_recs(q_land, cost_land), CONFIGS["full"])
        assert v.outcome == base.outcome and v.summary == base.summary
        assert v.figures["reported:so3:olla_cost_ratio_mean"] == pytest.approx(cost_land / 100.0)
        assert v.figures["reported:so3:olla_vs_p:q_gap_mean"] == pytest.approx(q_land - 1e-4)
        assert {k for k in v.figures if not k.startswith("reported:so3:")} == set(base.figures)
    # the quick (the recorded verdict and its regression fixture) has no SO(3) block
    assert "so3" not in CONFIGS["quick"] and "so3" not in CONFIGS["quick"]["methods"]
    assert "so3" in CONFIGS["full"]["methods"] and "so3" in CONFIGS["smoke"]["methods"]


def test_trained_rule_is_inconclusive_without_the_trained_units() -> None:
    recs = [r for r in _trained_recs() if not r["method"].startswith("torus")]
    assert decide(recs, CONFIGS["full"]).outcome == "inconclusive"


def test_torus_data_and_uniform_are_feasible_and_differ() -> None:
    import torch

    from optarium.experiments.constrained_diffusion_landing import torus_data, torus_uniform

    C = make_constraints(0.3)
    g = torch.Generator().manual_seed(0)
    d, u = torus_data(2000, 0.3, g), torus_uniform(2000, 0.3, g)
    for x in (d, u):
        h, gv = C.values(x)
        assert x.shape == (2000, 3) and h.abs().max() < 1e-12 and (gv <= 0).all()
    # the data sit on top of the tube (phi = pi / 2): z near 0.4; uniform has mean z = 0
    assert d[:, 2].mean() > 0.25 and abs(u[:, 2].mean()) < 4 * u[:, 2].std() / 2000**0.5
    # uniform in area (element ~ 1 + 0.4 cos phi): the outer half of the tube carries (pi + 0.8) / (2 pi)
    # = 0.63 of the mass
    rad = u[:, :2].norm(dim=-1)
    assert (rad > 1).float().mean() > 0.55
