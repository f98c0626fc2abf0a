"""The metasg-saea experiment's rule on hand-built records: each outcome, runs without a feasible point."""

from __future__ import annotations

import math
from typing import Any

import pytest

from optarium.experiments.metasg_saea import CONFIGS, decide

QUICK = CONFIGS["quick"]


def _records(igd: dict[str, list[float | None]]) -> list[dict[str, Any]]:
    out = []
    for m, vals in igd.items():
        for s, v in enumerate(vals):
            rec: dict[str, Any] = {"method": m, "seed": s, "step": 120, "status": "done"}
            rec["c2dtlz2_n_feasible"] = 0 if v is None else 5
            rec["c2dtlz2_first_feasible"] = -1 if v is None else 10 + s
            if v is not None:  # undefined IGD is not logged
                rec["c2dtlz2_igd"] = v
            out.append(rec)
    return out


def _base(linear: list[float | None], tau0: list[float | None]) -> dict[str, list[float | None]]:
    return {"saea-linear": linear, "saea-tau0": tau0, "nsga2": [0.2] * 5, "ctaea": [0.3] * 5}


@pytest.mark.parametrize(
    ("linear", "tau0", "outcome"),
    [
        ([0.01, 0.012, 0.011, 0.009, 0.01], [0.05, 0.06, 0.04, 0.05, 0.055], "reproduced"),
        ([0.05, 0.06, 0.04, 0.05, 0.055], [0.01, 0.012, 0.011, 0.009, 0.01], "not reproduced"),
        ([0.01, 0.05, 0.011, 0.06, 0.01], [0.05, 0.01, 0.04, 0.012, 0.011], "inconclusive"),
    ],
)
def test_rule_outcomes(linear: list[float], tau0: list[float], outcome: str) -> None:
    v = decide(_records(_base(linear, tau0)), QUICK)
    assert v.outcome == outcome
    assert v.figures["c2dtlz2_n_pairs"] == 5
    assert v.figures["c2dtlz2_linear_vs_nsga2_gap"] == pytest.approx(
        math.log(0.2) - sum(math.log(x) for x in linear) / 5
    )


def test_infeasible_runs_get_twice_the_worst_igd() -> None:
    v = decide(_records(_base([0.01] * 5, [None, 0.05, 0.06, 0.05, 0.04])), QUICK)
    assert v.figures["c2dtlz2_saea-tau0_runs_without_feasible"] == 1
    assert v.figures["c2dtlz2_n_pairs"] == 5
    worst = 2 * 0.3  # the largest IGD observed on the problem (C-TAEA's) doubled
    expected = (math.log(worst) + sum(math.log(x) for x in (0.05, 0.06, 0.05, 0.04))) / 5 - math.log(0.01)
    assert v.figures["c2dtlz2_mean_gap"] == pytest.approx(expected)
    assert v.outcome == "reproduced"
