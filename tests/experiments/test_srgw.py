"""The srgw experiment: smoke run, and its verdict rule on hand-built records (each outcome reachable)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from optarium.experiments.srgw import CONFIGS, decide, make_problem
from optarium.harness.runner import run_experiment

pytest.importorskip("ot", reason="POT runs the GW baselines (test extra)")

# the levels of the quick run, with a calibration that keeps 0.1 and 0.2 (set by hand below)
CONF = {
    **CONFIGS["quick"],
    "calib_band": [0.0, 1.0],
    "levels": {"adj": [0.0, 0.1]},
    "calib_seeds": 1,
    "n": 12,
}


def _recs(acc: dict[str, dict[float, list[float]]]) -> list[dict[str, Any]]:
    out = []
    for m, per in acc.items():
        for s, vals in per.items():
            for seed, a in enumerate(vals):
                out.append({"method": m, "seed": seed, "step": 1, "level": s, "adj:acc": a, "status": "done"})
    return out


def _case(gain: float, jitter: float, s0_gap: float = 0.0) -> list[dict[str, Any]]:
    base = [0.3, 0.32, 0.28, 0.31, 0.29]
    srgw = [b + gain + (jitter if i % 2 else -jitter) for i, b in enumerate(base)]
    return _recs(
        {
            "srgw": {0.0: [1.0 - s0_gap] * 5, 0.1: srgw},
            **{b: {0.0: [1.0] * 5, 0.1: base} for b in ("gw", "entropic-gw", "partial-gw")},
        }
    )


def test_rule_outcomes() -> None:
    assert decide(_case(0.3, 0.01), CONF).outcome == "reproduced"
    assert decide(_case(0.05, 0.005), CONF).outcome == "inconclusive"  # beyond 2 SE, below 10 points
    assert decide(_case(0.0, 0.05), CONF).outcome == "inconclusive"
    assert decide(_case(-0.2, 0.01), CONF).outcome == "not reproduced"
    v = decide(_case(0.3, 0.01, s0_gap=0.05), CONF)  # worse than GW without noise
    assert v.outcome == "not reproduced" and v.figures["adj:s0_outcome"] == "not reproduced"
    assert v.figures["adj:s0.1:vs_gw:n_pairs"] == 5


def test_problem_noise_is_target_only_and_permuted() -> None:
    C1, C2, perm = make_problem(20, 3, 0.2, 0, "adj")
    back = C2[perm][:, perm]  # the target in source order
    extra = (back != 0) & (C1 == 0)
    assert not ((C1 != 0) & (back == 0)).any()  # every true edge survives
    assert extra.sum() // 2 == round(0.2 * ((C1 != 0).sum() // 2))


def test_smoke_run(tmp_path: Path, check_smoke: Callable[[str, Any], None]) -> None:
    out = run_experiment("srgw", "smoke", out=tmp_path, jobs=1)
    check_smoke("srgw", out)
    assert "adj:s0:srgw:acc_mean" in out.verdict.figures
