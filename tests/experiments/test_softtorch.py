"""The softtorch experiment at smoke scale, and its verdict rule on synthetic records."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

import optarium.experiments.softtorch as exp
from optarium.harness.runner import run_experiment


class _Ctx:
    def __init__(self) -> None:
        self.records: list[dict[str, object]] = []

    def log(self, step: int, **metrics: object) -> None:
        self.records.append({"step": step, **metrics})

    def evaluating(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    untimed = evaluating


def _robust(soft_err: list[float], ls_err: float = 1e5, hard_support: int = 1) -> list[dict[str, object]]:
    recs: list[dict[str, object]] = []
    for seed, e in enumerate(soft_err):
        recs.append({"method": "soft-median", "seed": seed, "final_error": e, "grad_support": 19})
        recs.append({"method": "least-squares", "seed": seed, "final_error": ls_err, "grad_support": 20})
        recs.append({"method": "hard-median", "seed": seed, "final_error": 0.5, "grad_support": hard_support})
    return recs


def test_smoke_run_records_plots_and_withholds_verdict(
    tmp_path: Path, check_smoke: Callable[[str, Any], None]
) -> None:
    out = run_experiment("softtorch", "smoke", out=tmp_path, jobs=1)
    check_smoke("softtorch", out)  # the generic checks; test_all_smoke skips this slug
    assert all(u["status"] == "done" for u in out.units), [u.get("error") for u in out.units]
    assert out.verdict.outcome == "no verdict"
    assert {"robust_passes", "soft_error_max", "ltr_min_spearman"} <= set(out.verdict.figures)
    assert sorted(p.name for p in (out.run_dir / "figures").iterdir()) == [
        "ltr_spearman.png",
        "robust_median.png",
    ]
    records = [json.loads(x) for x in (out.run_dir / "records.jsonl").read_text().splitlines()]
    assert len([r for r in records if "test_spearman" in r]) == 2 * exp.CONFIGS["smoke"]["seeds"]


def test_soft_median_recovers_w_star_where_least_squares_and_hard_gradient_fail() -> None:
    ctxs = {}
    for m in exp.ROBUST_METHODS:
        ctxs[m] = _Ctx()
        exp.run(ctxs[m], m, 3, exp.CONFIGS["quick"])
    final = {m: c.records[-1] for m, c in ctxs.items()}
    assert final["soft-median"]["final_error"] < 0.2
    assert final["least-squares"]["final_error"] > 1e3
    assert final["hard-median"]["grad_support"] == 1 and final["soft-median"]["grad_support"] >= 2
    # the units of one seed see the same data (paired)
    x1, y1, _ = exp._robust_data(3, 20, 1e6)
    x2, y2, _ = exp._robust_data(3, 20, 1e6)
    assert torch.equal(x1, x2) and torch.equal(y1, y2) and y1[0] == 1e6
    assert not torch.equal(x1, exp._robust_data(4, 20, 1e6)[0])


def test_rule_reproduced_not_reproduced_inconclusive() -> None:
    cfg = {"methods": list(exp.ROBUST_METHODS)}
    v = exp.decide(_robust([1e-6, 1e-4, 2e-3]), cfg)
    assert v.outcome == "reproduced" and v.figures["robust_passes"] == 3
    assert exp.decide(_robust([0.5, 0.7, 1e-4]), cfg).outcome == "not reproduced"
    assert exp.decide(_robust([1e-4, 1e-4, 1e-4], ls_err=10.0), cfg).outcome == "not reproduced"
    assert exp.decide(_robust([1e-4, 1e-4, 1e-4], hard_support=3), cfg).outcome == "not reproduced"
    assert exp.decide(_robust([1e-4, 0.5, 1e-4]), cfg).outcome == "inconclusive"  # one of three fails
    assert exp.decide(_robust([1e-4]), cfg).outcome == "inconclusive"  # a single seed decides nothing


def test_rule_learning_to_rank_needs_every_method_above_point_nine() -> None:
    cfg = {"methods": [*exp.ROBUST_METHODS, *exp.LTR_METHODS]}
    good = _robust([1e-4, 1e-4])
    ltr = [{"method": m, "seed": s, "test_spearman": 0.99} for m in exp.LTR_METHODS for s in range(2)]
    assert exp.decide(good + ltr, cfg).outcome == "reproduced"
    ltr[0]["test_spearman"] = ltr[1]["test_spearman"] = 0.5
    v = exp.decide(good + ltr, cfg)
    assert v.outcome == "not reproduced" and v.figures["ltr_min_spearman"] == 0.5
    # a method that did not run is not a pass
    assert exp.decide(good + [r for r in ltr if r["method"] != "ltr-ot"], cfg).figures["ltr_outcome"] == (
        "inconclusive"
    )
