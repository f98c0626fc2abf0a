"""The SAM-Polyak experiment at smoke scale (runs, records, plots, withholds a verdict) and its rule."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import optarium.experiments.sam_polyak  # registers the experiment
from optarium.experiments.sam_polyak import CONFIGS, LS_DET, LS_STO, decide
from optarium.harness.runner import run_experiment

QUICK = {"methods": [*LS_DET, *LS_STO], "sto_budget": 4000}


def _det(slopes: dict[str, float], seeds: int = 3) -> list[dict[str, Any]]:
    recs = []
    for kind, slope in slopes.items():
        for seed in range(seeds):
            for t in range(0, 60, 5):
                recs.append(
                    {
                        "method": f"ls-det-{kind}",
                        "seed": seed,
                        "step": t,
                        "rel_gap": math.exp(slope * (1 + 0.01 * seed) * t),
                        "seconds": 0.01 * t,
                        "status": "done",
                    }
                )
    return recs


def _sto(iters: dict[str, list[float]]) -> list[dict[str, Any]]:
    recs = []
    for kind, values in iters.items():
        for seed, it in enumerate(values):
            run = 4000 if math.isinf(it) else it
            recs.append(
                {
                    "method": f"ls-sto-{kind}",
                    "seed": seed,
                    "step": int(run),
                    "iters": it,
                    "reached": float(math.isfinite(it)),
                    "grad_evals": 2.0 * run,
                    "seconds": run / 1000,
                    "status": "done",
                }
            )
    return recs


GOOD_DET = {"sps": -0.09, "const0.25": -0.01, "const0.5": -0.015, "const1": -0.027, "const1.5": 0.05}
GOOD_STO = {
    "sps": [1890, 1640, 2000],
    "const0.05": [math.inf] * 3,
    "const0.1": [math.inf] * 3,
    "const0.2": [2080, 2100, 1990],
    "const0.4": [1090, 960, 1000],
    "const0.8": [math.inf] * 3,
}


def test_smoke_run_records_plots_and_withholds_verdict(
    tmp_path: Path, check_smoke: Callable[[str, Any], None]
) -> None:
    out = run_experiment("sam-polyak", "smoke", out=tmp_path, jobs=1)
    check_smoke("sam-polyak", out)  # the generic checks; test_all_smoke skips this slug
    assert all(u["status"] == "done" for u in out.units), [u.get("error") for u in out.units]
    assert len(out.units) == len(CONFIGS["smoke"]["methods"]) * CONFIGS["smoke"]["seeds"]
    assert out.verdict.outcome == "no verdict"
    assert {"det_slope_sps", "sto_median_sps", "sweep_seconds", "sweep_grad_evals", "drop_samsps"} <= set(
        out.verdict.figures
    )
    assert sorted(p.name for p in (out.run_dir / "figures").iterdir()) == [
        "det_convergence.png",
        "mlp_test_accuracy.png",
        "sto_iterations_and_cost.png",
    ]
    records = [json.loads(x) for x in (out.run_dir / "records.jsonl").read_text().splitlines()]
    # paired: every method of the deterministic part starts from the same problem (relative gap 1 at step 0)
    assert {r["rel_gap"] for r in records if r["method"].startswith("ls-det") and r["step"] == 0} == {1.0}
    assert sum(1 for r in records if "test_acc" in r) == 8 * CONFIGS["smoke"]["seeds"]
    assert all(0.0 <= r["gamma_mean"] <= 1.0 for r in records if "gamma_mean" in r)


def test_rule_reproduced_and_sweep_cost_reported() -> None:
    v = decide(_det(GOOD_DET) + _sto(GOOD_STO), QUICK)
    assert v.outcome == "reproduced", v.summary
    assert v.figures["det_best_const"] == "ls-det-const1"
    assert v.figures["sto_best_const"] == "ls-sto-const0.4"
    assert v.figures["sto_median_ratio"] == pytest.approx(1890 / 1000)
    # the grid: 3 seeds x (3 misses of 4000 + const0.2 + const0.4) iterations, two gradients each
    grid_iters = 3 * 3 * 4000 + (2080 + 2100 + 1990) + (1090 + 960 + 1000)
    assert v.figures["sweep_grad_evals"] == 2 * grid_iters
    assert v.figures["sps_grad_evals"] == 2 * (1890 + 1640 + 2000)
    assert v.figures["sweep_seconds"] == pytest.approx(grid_iters / 1000)


def test_rule_not_reproduced_when_polyak_is_too_slow_or_misses() -> None:
    slow_det = {**GOOD_DET, "sps": -0.02}  # |slope| below 0.027 / 1.2
    v = decide(_det(slow_det) + _sto(GOOD_STO), QUICK)
    assert v.outcome == "not reproduced" and v.figures["det_outcome"] == "not reproduced"
    slow_sto = {**GOOD_STO, "sps": [3500, 3200, 3900]}  # > 3x the best median of 1000
    v = decide(_det(GOOD_DET) + _sto(slow_sto), QUICK)
    assert v.outcome == "not reproduced" and v.figures["sto_outcome"] == "not reproduced"
    missed = {**GOOD_STO, "sps": [1890, math.inf, 2000]}  # must reach the target on every seed
    v = decide(_det(GOOD_DET) + _sto(missed), QUICK)
    assert v.outcome == "not reproduced"


def test_rule_inconclusive_without_enough_polyak_seeds() -> None:
    recs = _det(GOOD_DET) + _sto(GOOD_STO)
    recs = [r for r in recs if not (r["method"].endswith("sps") and r["seed"] > 0)]
    v = decide(recs, QUICK)
    assert v.outcome == "inconclusive"


def _mlp(acc: dict[str, tuple[list[float], list[float]]], rho: float) -> list[dict[str, Any]]:
    recs = []
    for kind, (val, test) in acc.items():
        for seed, (a, b) in enumerate(zip(val, test, strict=True)):
            recs.append(
                {
                    "method": f"mlp-rho{rho:g}-{kind}",
                    "seed": seed,
                    "step": 60,
                    "val_acc": a,
                    "test_acc": b,
                    "seconds": 10.0,
                    "status": "done",
                }
            )
    return recs


def _mlp_setting(sps: float, cos: float) -> dict[str, tuple[list[float], list[float]]]:
    jitter = [0.0, 0.004, -0.004, 0.002, -0.002]
    out = {"samsps": ([sps + j for j in jitter], [sps + j for j in jitter])}
    for lr, acc in (("0.01", 0.90), ("0.03", 0.94), ("0.1", 0.96), ("0.3", 0.93)):
        out[f"const{lr}"] = ([acc + j for j in jitter], [acc + j for j in jitter])
        out[f"cos{lr}"] = ([cos + j for j in jitter], [cos + j for j in jitter])
    return out


def test_mlp_rule_for_every_rho_and_the_drop() -> None:
    config = {"methods": optarium.experiments.sam_polyak._mlp_methods((0.05, 0.4), (0.01, 0.03, 0.1, 0.3))}
    good = _mlp(_mlp_setting(0.962, 0.96), 0.05) + _mlp(_mlp_setting(0.958, 0.93), 0.4)
    v = decide(good, config)
    assert v.outcome == "reproduced", v.summary
    assert v.figures["rho0.05_tuned_const"] == "const0.1"
    assert v.figures["drop_samsps"] == pytest.approx(0.004)
    worse = _mlp(_mlp_setting(0.962, 0.96), 0.05) + _mlp(_mlp_setting(0.92, 0.93), 0.4)
    v = decide(worse, config)
    assert v.outcome == "not reproduced" and v.figures["rho0.4_outcome"] == "not reproduced"
    assert v.figures["drop_outcome"] == "not reproduced"
    partial = [r for r in good if not (r["method"].endswith("samsps") and r["seed"] > 0)]
    assert decide(partial, config).outcome == "inconclusive"


def test_rule_not_reproduced_when_a_polyak_seed_diverges() -> None:
    recs = _det(GOOD_DET) + _sto(GOOD_STO)
    for r in recs:
        if r["method"] == "ls-det-sps" and r["seed"] == 1:
            r["status"] = "diverged"
    v = decide(recs, QUICK)
    assert v.figures["det_outcome"] == "not reproduced" and v.outcome == "not reproduced"
    assert v.figures["det_sps_diverged_seeds"] == 1


def test_extended_grid_chooses_an_interior_lr_and_keeps_the_median_of_the_first_four() -> None:
    """The grid reaches 10; the best is chosen on validation accuracy as before; the median condition is
    over {0.01, 0.03, 0.1, 0.3} only, so diverging large lrs cannot lower it."""
    from optarium.experiments.sam_polyak import MLP_LRS, MLP_MEDIAN_LRS, _mlp_methods

    assert MLP_LRS[: len(MLP_MEDIAN_LRS)] == MLP_MEDIAN_LRS and max(MLP_LRS) == 10.0
    jitter = [0.0, 0.004, -0.004, 0.002, -0.002]
    accs = {"0.01": 0.90, "0.03": 0.94, "0.1": 0.95, "0.3": 0.96, "1": 0.97, "3": 0.50, "10": 0.10}
    setting = {"samsps": ([0.955 + j for j in jitter], [0.955 + j for j in jitter])}
    for lr, acc in accs.items():
        setting[f"const{lr}"] = ([acc + j for j in jitter], [acc + j for j in jitter])
        setting[f"cos{lr}"] = ([acc + j for j in jitter], [acc + j for j in jitter])
    config = {"methods": _mlp_methods((0.05,), MLP_LRS)}
    v = decide(_mlp(setting, 0.05), config)
    assert v.figures["rho0.05_tuned_const"] == "const1"  # interior: 3 and 10 are worse
    assert v.figures["rho0.05_median_const_test"] == pytest.approx((0.94 + 0.95) / 2)
    # SAM-SPS (0.955) beats that median but is 1.5 points below the tuned lr=1 (SE ~ 0.002): not reproduced
    assert v.figures["rho0.05_outcome"] == "not reproduced"


class _Ctx:
    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def log(self, step: int, *, check_finite: bool = True, **m: Any) -> None:
        if check_finite:
            assert all(math.isfinite(float(v)) for v in m.values()), m
        self.records.append({"step": step, **m})

    def evaluating(self) -> Any:
        import contextlib

        return contextlib.nullcontext()


def test_a_diverging_mlp_run_stops_and_is_scored_by_its_broken_model() -> None:
    from optarium.experiments.sam_polyak import _run_mlp

    config = {**CONFIGS["smoke"], "epochs": 3}
    ctx = _Ctx()
    _run_mlp(ctx, 0.05, "const1e6", 0, config)
    assert any(r.get("diverged") == 1.0 for r in ctx.records)
    final = [r for r in ctx.records if "test_acc" in r]
    assert len(final) == 1 and final[0]["test_acc"] <= 0.2 and final[0]["val_acc"] <= 0.2
    ok = _Ctx()
    _run_mlp(ok, 0.05, "const0.1", 0, config)
    assert not any("diverged" in r for r in ok.records) and ok.records[-1]["test_acc"] > 0.5
