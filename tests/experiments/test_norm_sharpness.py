"""norm-sharpness: the stated rule on hand-built records (each part, each outcome), and one real DLN unit."""

from __future__ import annotations

import math
from typing import Any

import pytest

from optarium.experiments import norm_sharpness as ns
from optarium.harness.experiment import get_experiment

QUICK = ns.CONFIGS["quick"]


def _unit(method: str, seed: int, s: list[float], norm: list[float], *, test: list[float] | None = None,
          val: list[float] | None = None, gaps: dict[str, tuple[float, float]] | None = None,
          conv: list[bool] | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """Grid records of one unit: step sizes 0.1, 0.2, ...; sharpness, norm; optional MSEs and gaps."""
    k = len(s)
    conv = conv or [True] * k
    out = []
    for i in range(k):
        lr = 0.1 * (i + 1)
        r: dict[str, Any] = {"method": method, "seed": seed, "step": i, "grid": 1.0, "lr": lr}
        r.update(lr_frac=lr / (0.1 * k), converged=float(conv[i]), sharpness=s[i], lr_x_sharpness=lr * s[i])
        r.update(norm_l1=norm[i], norm_l2=norm[i], norm_theta=norm[i], norm_dist=norm[i])
        r.update(val_mse=(val or [1.0] * k)[i], test_mse=(test or [1.0] * k)[i])
        for name, (m, se) in (gaps or {}).items():
            r[f"gap_{name}"], r[f"gap_{name}_se"] = m, se
        out.append(r)
    summary = {"method": method, "seed": seed, "step": k, "summary": 1.0, "eta_max": 0.1 * k}
    out.append({**summary, "n_converged": sum(conv), "n_not_converged": k - sum(conv), "n_diverged": 0.0})
    return out


GOOD_S, GOOD_N = [5.0, 4.9, 3.0, 2.0], [7.0, 7.1, 8.0, 9.0]
WIN = {"min": (0.1, 0.01), "top": (1.0, 0.1), "l1": (0.5, 0.05)}


def _quick_records(*, dial_ok: bool = True, interior: str = "win") -> list[dict[str, Any]]:
    recs: list[dict[str, Any]] = []
    s, n = (GOOD_S, GOOD_N) if dial_ok else ([5.0, 5.0, 5.1, 5.2], [7.0, 6.9, 6.8, 6.5])
    for seed in range(3):
        recs += _unit("dln-T1", seed, s, n)
    for seed in range(5):
        if interior == "win":  # the interior point chosen on validation beats everything by > 2 SE
            recs += _unit("dln-T2", seed, s, n, val=[2.0, 1.0, 1.5, 3.0], test=[2.0, 1.0, 1.5, 3.0], gaps=WIN)
        elif interior == "endpoint":  # the smallest η is best on the test set
            recs += _unit("dln-T2", seed, s, n, val=[1.0, 1.1, 1.5, 3.0], test=[1.0, 1.1, 1.5, 3.0],
                          gaps={"min": (-0.1, 0.01), "top": (1.0, 0.1), "l1": (0.5, 0.05)})  # fmt: skip
        else:  # interior best but within noise
            recs += _unit("dln-T2", seed, s, n, val=[1.0, 0.99, 1.5, 3.0], test=[1.0, 0.99, 1.5, 3.0],
                          gaps={"min": (0.01, 0.01), "top": (1.0, 0.1), "l1": (0.5, 0.05)})  # fmt: skip
    return recs


def test_quick_rule_reproduced_when_all_three_parts_hold() -> None:
    v = ns.decide(_quick_records(), QUICK)
    assert v.outcome == "reproduced", v.summary
    assert v.figures["part_i"] == "reproduced" and v.figures["part_ii"] == "reproduced"
    assert all(isinstance(x, (int, float, str, bool)) or x is None for x in v.figures.values())
    assert v.figures["interior:dln-T2:seeds_interior_wins"] == 5


def test_quick_rule_not_reproduced_when_the_dial_does_not_turn() -> None:
    v = ns.decide(_quick_records(dial_ok=False), QUICK)
    assert v.outcome == "not reproduced" and v.figures["part_i"] == "not reproduced"


def test_interior_optimum_failed_and_inconclusive() -> None:
    assert ns.decide(_quick_records(interior="endpoint"), QUICK).outcome == "not reproduced"
    v = ns.decide(_quick_records(interior="noise"), QUICK)
    assert v.outcome == "inconclusive" and v.figures["part_iii:dln-T2"] == "inconclusive"


def test_t1_is_reported_but_not_decided_on() -> None:
    recs = [r for r in _quick_records() if r["method"] != "dln-T1"]
    for seed in range(3):  # T1's interior loses to the smallest η: reported as failed, outcome unchanged
        recs += _unit("dln-T1", seed, GOOD_S, GOOD_N, test=[0.5, 1.0, 1.5, 3.0], gaps={"min": (-0.5, 0.01),
                      "top": (1.0, 0.1), "l1": (-1.0, 0.05)})  # fmt: skip
    v = ns.decide(recs, QUICK)
    assert v.outcome == "reproduced" and v.figures["interior:dln-T1:outcome"] == "not reproduced"


def test_stability_violation_is_never_reproduced_and_unconverged_runs_are_kept_out() -> None:
    recs = _quick_records()
    bad = next(r for r in recs if r.get("grid") and r["method"] == "dln-T2")
    bad["lr_x_sharpness"] = 2.5  # a converged run beyond 2/η (+5 %): an implementation bug
    v = ns.decide(recs, QUICK)
    assert v.outcome == "inconclusive" and v.figures["stability_violations"] == 1
    recs = _quick_records()
    recs = [r for r in recs if not (r["method"] == "dln-T2" and r["seed"] == 0)]
    recs += _unit("dln-T2", 0, [5.0, 4.9, 3.0, 9.0], [7.0, 7.1, 8.0, 1.0], conv=[True, True, True, False],
                  val=[2.0, 1.0, 1.5, 3.0], test=[2.0, 1.0, 1.5, 3.0], gaps=WIN)  # fmt: skip
    v = ns.decide(recs, QUICK)
    assert v.figures["dln-T2:reported:n_not_converged"] == 1
    assert v.figures["dial:dln:seeds_ok"] == 8  # top converged is the third point, which turns the dial


def test_full_rule_decides_per_alpha_and_the_mlp_on_either_norm() -> None:
    full = ns.CONFIGS["full"]
    recs: list[dict[str, Any]] = []
    for m in ("dln-T2-a0.01", "dln-T2-a0.1", "dln-T2-a1"):
        for seed in range(5):
            mse = [2.0, 1.0, 1.5, 3.0]
            recs += _unit(m, seed, GOOD_S, GOOD_N, val=mse, test=mse, gaps=WIN)
    for seed in range(3):
        mlp = _unit("mlp-digits", seed, GOOD_S, GOOD_N)
        for r in mlp:
            if "norm_theta" in r:
                r["norm_theta"] = 10.0 - r["norm_theta"]  # ||θ||² falls, ||θ - θ0||² rises: either suffices
        recs += mlp
    v = ns.decide(recs, full)
    assert v.outcome == "reproduced", v.summary
    assert v.figures["dial:mlp:norm_theta:outcome"] == "not reproduced"
    assert v.figures["dial:mlp:norm_dist:outcome"] == "reproduced"
    assert set(k for k in v.figures if k.startswith("part_iii")) == {
        "part_iii:dln-T2-a0.01", "part_iii:dln-T2-a0.1", "part_iii:dln-T2-a1"}  # fmt: skip


def test_one_real_smoke_unit_logs_every_grid_point_and_a_summary() -> None:
    class Ctx:
        def __init__(self) -> None:
            self.records: list[dict[str, Any]] = []

        def log(self, step: int, *, check_finite: bool = True, **m: Any) -> None:
            self.records.append({"method": "dln-T2", "seed": 0, "step": step, **m})

        def check(self) -> None:
            pass

        def evaluating(self) -> Any:
            import contextlib

            return contextlib.nullcontext()

        untimed = evaluating

    ctx = Ctx()
    cfg = get_experiment("norm-sharpness").config("smoke")
    ns.run(ctx, "dln-T2", 0, cfg)
    grid = [r for r in ctx.records if r.get("grid")]
    assert len(grid) == 3 and sum(1 for r in ctx.records if r.get("summary")) == 1
    assert grid[-1]["lr_frac"] == pytest.approx(1.0) and grid[-1]["converged"] == 1.0
    for r in grid:
        if r["converged"]:
            assert r["lr_x_sharpness"] <= 2.1 and math.isfinite(r["gap_l1"])
    ns.run(ctx, "dln-T2", 5, cfg)  # beyond the method's seeds: nothing is logged
    assert len(ctx.records) == 4
