"""The aimc-sp experiment: smoke run, and its stated rule on hand-built records (each outcome)."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from optarium.experiments.aimc_sp import CONFIGS, METHODS, decide
from optarium.harness.runner import run_experiment

Q = CONFIGS["quick"]


def _records(log_ratio: dict[str, float], pulses: dict[str, float] | None = None) -> list[dict[str, Any]]:
    """Ten replicates; excess loss = 1e-3 * exp(log_ratio[m] + small paired jitter)."""
    pulses = pulses or {}
    out = []
    for m in METHODS:
        for j in range(10):
            jitter = 0.05 * ((3 * j) % 7 - 3) / 3
            out.append(
                {
                    "method": m,
                    "seed": 0,
                    "replicate": j,
                    "step": Q["steps"],
                    "status": "done",
                    "excess_loss": 1e-3
                    * math.exp(log_ratio.get(m, 0.0) + (jitter if m != "oracle" else 0.0)),
                    "dist2": 1e-3,
                    "pulses_per_device": pulses.get(m, 7000.0),
                }
            )
    return out


def test_rule_reproduced_not_reproduced_and_inconclusive() -> None:
    good = {
        "zero": 1.5,
        "calib-10": 1.5,
        "calib-100": 1.0,
        "calib-1000": 0.3,
        "calib-10000": 0.0,
        "chopped-0.05": 0.0,
        "residual-plain": 1.4,
    }
    pulses = {"calib-10000": 17000.0, "chopped-0.05": 12000.0}
    v = decide(_records(good, pulses), Q)
    assert v.outcome == "reproduced", v.summary
    assert v.figures["calib_N_within_20pct"] == 10000
    # the same records, but tracking pays more pulses than the calibration it replaces: (e) inconclusive
    v = decide(_records(good, {**pulses, "chopped-0.05": 20000.0}), Q)
    assert v.outcome == "inconclusive" and v.figures["part_e"] == "inconclusive"
    # tracking far from the oracle: not reproduced
    v = decide(_records({**good, "chopped-0.05": 1.0}, pulses), Q)
    assert v.outcome == "not reproduced" and v.figures["part_e"] == "not reproduced"
    # a zero reference as good as the oracle: part (c) fails
    v = decide(_records({**good, "zero": 0.0}, pulses), Q)
    assert v.figures["part_c"] == "not reproduced"


def test_smoke_run(tmp_path: Path, check_smoke: Callable[[str, Any], None]) -> None:
    out = run_experiment("aimc-sp", "smoke", out=tmp_path, jobs=1)
    check_smoke("aimc-sp", out)
    assert all(u["status"] == "done" for u in out.units)
