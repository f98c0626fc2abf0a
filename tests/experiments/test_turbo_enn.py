"""The TuRBO-ENN experiment at smoke scale, and its verdict rule on synthetic records."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import optarium.experiments.turbo_enn as exp
from optarium.harness.runner import run_experiment

pytest.importorskip("botorch", reason="the GP-TuRBO baseline runs on BoTorch")


def _records(
    enn_s: list[float], gp_s: list[float], finals: dict[str, list[float]]
) -> list[dict[str, object]]:
    recs: list[dict[str, object]] = []
    for n, te, tg in zip((100, 300, 1000), enn_s, gp_s, strict=True):
        recs.append({"method": "turbo-enn-ucb", "seed": 0, "step": n, "n_obs": n, "proposal_s": te})
        recs.append({"method": "turbo-gp", "seed": 0, "step": n, "n_obs": n, "proposal_s": tg})
    for m, vals in finals.items():
        for s, v in enumerate(vals):
            recs.append(
                {"method": m, "seed": s, "step": 600, "problem": 0, "final_best": v, "status": "done"}
            )
    return recs


GOOD = {
    "turbo-enn-ucb": [0.5, 0.4, 0.6],
    "turbo-enn-pareto": [0.7, 0.9, 0.8],
    "turbo-zero": [3.0, 2.5, 4.0],
    "random": [8.0, 7.5, 8.5],
}
CONFIG = {"gp_quality": False, "seeds": 3}


def test_smoke_run_records_plots_and_withholds_verdict(
    tmp_path: Path, check_smoke: Callable[[str, Any], None]
) -> None:
    out = run_experiment("turbo-enn", "smoke", out=tmp_path, jobs=1)
    check_smoke("turbo-enn", out)  # the generic checks; test_all_smoke skips this slug
    assert all(u["status"] == "done" for u in out.units), [u.get("error") for u in out.units]
    assert out.verdict.outcome == "no verdict"
    figs = out.verdict.figures
    assert {"gp_over_enn_N50", "gp_over_enn_N100", "turbo-enn-ucb_median_best", "random_median_best"} <= set(
        figs
    )
    assert sorted(p.name for p in (out.run_dir / "figures").iterdir()) == ["proposal_time.png", "quality.png"]


def test_rule_reproduced_when_fast_growing_and_sane() -> None:
    v = exp.decide(_records([0.01, 0.015, 0.03], [0.5, 1.5, 10.0], GOOD), CONFIG)
    assert v.outcome == "reproduced"
    assert v.figures["ratio_at_largest_N"] == pytest.approx(10.0 / 0.03)


def test_rule_not_reproduced_when_too_slow_or_not_growing() -> None:
    assert exp.decide(_records([0.1, 0.2, 0.5], [0.5, 1.0, 4.0], GOOD), CONFIG).outcome == "not reproduced"
    assert exp.decide(_records([0.001, 0.01, 0.1], [1.0, 2.0, 3.0], GOOD), CONFIG).outcome == "not reproduced"


def test_rule_inconclusive_when_quality_sanity_fails_or_records_missing() -> None:
    bad = dict(GOOD, **{"turbo-enn-pareto": [5.0, 6.0, 4.0]})
    assert exp.decide(_records([0.01, 0.015, 0.03], [0.5, 1.5, 10.0], bad), CONFIG).outcome == "inconclusive"
    assert exp.decide([], CONFIG).outcome == "inconclusive"
    partial = {k: v for k, v in GOOD.items() if k != "random"}
    assert (
        exp.decide(_records([0.01, 0.015, 0.03], [0.5, 1.5, 10.0], partial), CONFIG).outcome == "inconclusive"
    )
