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
    assert "gap_mean" in out.verdict.figures
