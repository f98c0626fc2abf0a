"""The momentum-tracking experiment at smoke scale, and its verdict rules on synthetic records."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import optarium.experiments.momentum_tracking  # noqa: F401  (registers the experiment)
from optarium.experiments.momentum_tracking import CONFIGS, decide
from optarium.harness.runner import run_experiment

QUICK = dict(CONFIGS["quick"])
FULL = dict(CONFIGS["full"])


def _quick_records(err: dict[tuple[str, str, float], float], n: int = 50) -> list[dict[str, object]]:
    """Per-seed records: err[(cell, method, beta)] is the mean; seed j adds a small common wiggle."""
    recs: list[dict[str, object]] = []
    for (cell, method, beta), m in err.items():
        for j in range(n):
            wiggle = 1.0 + 0.01 * math.sin(j) + 0.001 * math.cos(3 * j + beta)
            recs.append(
                {
                    "method": method,
                    "seed": 0,
                    "step": 4000,
                    "status": "done",
                    "eval_index": j,
                    f"{cell}:{method}:b{beta:g}:err": m * wiggle,
                }
            )
    return recs


def _errors(drift_penalty: float, static_ratio: float) -> dict[tuple[str, str, float], float]:
    err: dict[tuple[str, str, float], float] = {}
    for cell in ("rw-s0-d1e-2", "switch", "static", "rw-s0-d5e-2", "rw-s0.3-d1e-3"):
        err[(cell, "sgd", 0.0)] = 1.0
        for method in ("heavy_ball", "nesterov"):
            for beta in (0.5, 0.9, 0.99):
                if cell == "static":
                    err[(cell, method, beta)] = static_ratio
                else:
                    err[(cell, method, beta)] = 1.0 + drift_penalty * beta / (1 - beta) / 99
    return err


def test_smoke_run_records_plots_and_withholds_verdict(
    tmp_path: Path, check_smoke: Callable[[str, Any], None]
) -> None:
    out = run_experiment("momentum-tracking", "smoke", out=tmp_path, jobs=1)
    check_smoke("momentum-tracking", out)  # the generic checks; test_all_smoke skips this slug
    assert all(u["status"] == "done" for u in out.units), [u.get("error") for u in out.units]
    assert out.verdict.outcome == "no verdict"
    assert sorted(p.name for p in (out.run_dir / "figures").iterdir()) == [
        "error_vs_step.png",
        "simulated_vs_analytic.png",
    ]
    records = [json.loads(x) for x in (out.run_dir / "records.jsonl").read_text().splitlines()]
    per_seed = [r for r in records if r["method"] == "nesterov" and "switch:nesterov:b0.9:err" in r]
    assert len(per_seed) == CONFIGS["smoke"]["eval_seeds"]
    tune = [r for r in records if r["method"] == "heavy_ball" and "static:heavy_ball:b0.99:tune_eff" in r]
    assert len(tune) == CONFIGS["smoke"]["coarse"] + CONFIGS["smoke"]["refine"]  # the same budget per beta
    # the sigma = 0 random-walk pair differs only by the factor 25
    assert out.verdict.figures["scale_ratio_max_dev"] < 1e-6


def test_rule_reproduced_when_momentum_lags_and_static_is_equal() -> None:
    v = decide(_quick_records(_errors(drift_penalty=0.5, static_ratio=1.0)), QUICK)
    assert v.outcome == "reproduced", v.summary
    assert v.figures["switch:nesterov:growth:mean_gap"] > 0


def test_rule_not_reproduced_when_momentum_tracks_better_or_static_is_worse() -> None:
    v = decide(_quick_records(_errors(drift_penalty=-0.5, static_ratio=1.0)), QUICK)
    assert v.outcome == "not reproduced" and v.figures["rw-s0-d1e-2:heavy_ball:outcome"] == "not reproduced"
    v = decide(_quick_records(_errors(drift_penalty=0.5, static_ratio=1.3)), QUICK)
    assert v.outcome == "not reproduced" and v.figures["static:heavy_ball:b0.9:outcome"] == "not reproduced"
    # 10 % worse in the static cell sits on the bound: inconclusive, not reproduced
    v = decide(_quick_records(_errors(drift_penalty=0.5, static_ratio=1.1)), QUICK)
    assert v.outcome == "inconclusive"


def _full_records(lr_mean: float, growth: float, gap: float) -> list[dict[str, object]]:
    recs: list[dict[str, object]] = []
    for method in ("heavy_ball", "nesterov"):
        for drift in FULL["drifts"]:
            for i in range(len(FULL["ratios"])):
                rec: dict[str, object] = {"method": method, "seed": 0, "step": 4000, "status": "done"}
                for b in FULL["betas"]:
                    rec[f"{drift}:r{i}:{method}:b{b:g}:tuned:lr_mean"] = (
                        lr_mean if drift == "switch" else -lr_mean
                    )
                    rec[f"{drift}:r{i}:{method}:b{b:g}:tuned:lr_se"] = 0.01
                rec[f"{drift}:r{i}:{method}:tuned:growth_mean"] = growth
                rec[f"{drift}:r{i}:{method}:tuned:growth_se"] = 0.01
                recs.append(rec)
            recs.append(
                {
                    "method": method,
                    "seed": 0,
                    "step": 4000,
                    "status": "done",
                    f"{drift}:decomp:sgd:rel_gap": gap,
                }
            )
    return recs


def test_full_rule_needs_one_drift_region_and_the_decomposition() -> None:
    v = decide(_full_records(0.5, 0.3, 0.01), FULL)
    assert v.outcome == "reproduced" and v.figures["switch:outcome"] == "reproduced"
    assert v.figures["linear:outcome"] == "not reproduced" and v.figures["drift_types_reproduced"] == 1
    assert decide(_full_records(0.5, 0.3, 0.3), FULL).outcome == "not reproduced"  # decomposition off by 30 %
    assert decide(_full_records(0.5, 0.0, 0.01), FULL).outcome == "not reproduced"  # no growth anywhere
