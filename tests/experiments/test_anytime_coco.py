"""The anytime-coco experiment: the smoke run, and its verdict rule on records built by hand."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from optarium.experiments.anytime_coco import CONFIGS, EXPERIMENT, decide
from optarium.harness.runner import run_experiment

QUICK = {**CONFIGS["quick"], "methods": list(EXPERIMENT.methods)}
T1, T2 = QUICK["decade"]


def _records(
    any_growth: list[float],
    ctl_growth: list[float],
    regret_t1: list[float],
    regret_growth: list[float],
    *,
    beta: float = 0.2,
) -> list[dict[str, Any]]:
    recs: list[dict[str, Any]] = []

    def add(method: str, seed: int, step: int, **m: float) -> None:
        recs.append({"method": method, "seed": seed, "step": step, "status": "done", **m})

    for s, (ga, gc, r1, gr) in enumerate(zip(any_growth, ctl_growth, regret_t1, regret_growth, strict=True)):
        for m, g in (
            ("anytime", ga),
            ("agnostic", gc),
            ("known-T", 1.0),
            ("doubling", 1.5),
            ("primal-dual", 1.0),
        ):
            r_1 = 2.0 if m == "anytime" else 6.0
            for t, r in ((1000, r_1), (T1, r_1), (T2, r_1 * g)):
                ccv = r * math.sqrt(t) * math.log(t)
                add(m, s, t, **{"binding:ccv_ratio": r, "binding:ccv": ccv})
            add(m, s, T2, **{"binding:beta": beta})
        p1 = max(r1, 0.0) / math.sqrt(T1)
        add("anytime", s, T1, **{"regret:regret": r1, "regret:rplus_sqrt": p1})
        add("anytime", s, T2, **{"regret:regret": r1, "regret:rplus_sqrt": p1 * gr})
    return recs


def test_rule_reproduced_when_ccv_ratio_is_flat_and_the_control_grows() -> None:
    v = decide(_records([0.6, 0.9, 1.05], [2.0, 2.4, 1.3], [1.2, 1.4, 0.9], [0.32, 0.5, 1.0]), QUICK)
    assert v.outcome == "reproduced", v.summary
    assert v.figures["ccv_outcome"] == "reproduced" and v.figures["regret_outcome"] == "reproduced"
    assert v.figures["known_T_worse_early"] == "reproduced"  # known-T's CCV is 3x at t1 here


def test_rule_not_reproduced_when_the_ccv_ratio_grows() -> None:
    v = decide(_records([1.6, 1.7, 1.0], [2.0, 2.4, 2.0], [1.2, 1.4, 0.9], [0.32, 0.5, 1.0]), QUICK)
    assert v.outcome == "not reproduced" and v.figures["ccv_outcome"] == "not reproduced"
    v = decide(_records([0.6, 0.9, 1.0], [2.0, 2.4, 2.0], [1.2, 1.4, 0.9], [1.6, 1.7, 1.0]), QUICK)
    assert v.outcome == "not reproduced" and v.figures["regret_outcome"] == "not reproduced"


def test_rule_inconclusive_when_the_control_does_not_grow_or_the_constraint_never_binds() -> None:
    v = decide(_records([0.6, 0.9, 1.0], [2.0, 1.1, 2.0], [1.2, 1.4, 0.9], [0.3, 0.3, 0.3]), QUICK)
    assert v.outcome == "inconclusive" and v.figures["ccv_outcome"] == "inconclusive"
    # beta vbar sqrt(t2) below 2 ln(2 sqrt(t2)): the pre-check fails even though the ratios look right
    v = decide(_records([0.6, 0.9, 1.0], [2.0, 2.4, 2.0], [1.2, 1.4, 0.9], [0.3, 0.3, 0.3], beta=1e-4), QUICK)
    assert (
        v.figures["ccv_outcome"] == "inconclusive"
        and v.figures["precheck_lhs:seed0"] < v.figures["precheck_rhs"]
    )
    # a negative regret at t1 makes the regret check vacuous
    v = decide(_records([0.6, 0.9, 1.0], [2.0, 2.4, 2.0], [-3.0, 1.4, 0.9], [0.3, 0.3, 0.3]), QUICK)
    assert v.figures["regret_outcome"] == "inconclusive"


def test_smoke_run_records_plots_and_withholds_verdict(
    tmp_path: Path, check_smoke: Callable[[str, Any], None]
) -> None:
    out = run_experiment("anytime-coco", "smoke", out=tmp_path, jobs=1)
    check_smoke("anytime-coco", out)  # the generic checks; test_all_smoke skips this slug
    names = sorted(p.name for p in (out.run_dir / "figures").iterdir())
    assert names == ["ccv_regret_curves.png"]
    assert {"ccv_outcome", "regret_outcome", "precheck_rhs"} <= set(out.verdict.figures)
