"""The dfl-ambiguity-otdro experiment at smoke scale, and its verdict rule on synthetic records."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import optarium.experiments.dfl_ambiguity_otdro  # noqa: F401  (registers the experiment)
from optarium.experiments.dfl_ambiguity_otdro import CONFIGS, METHODS, decide, make_data
from optarium.harness.runner import run_experiment

QUICK = dict(CONFIGS["quick"])
FULL = dict(CONFIGS["full"])


def _records(premium: dict[str, list[float]], cov: dict[str, list[float]], **extra: dict[str, list[float]]):
    recs: list[dict[str, object]] = []
    for m in premium:
        for s, (r, c) in enumerate(zip(premium[m], cov[m], strict=True)):
            rec = {"method": m, "seed": s, "step": 301, "status": "done", "final": 1, "pf:premium": r,
                   "pf:fresh_cov": c, "pf:V": -r, "pf:scale": 0.17}  # fmt: skip
            for key, per_method in extra.items():
                rec[key] = per_method[m][s]
            recs.append(rec)
    return recs


def _iso(n: int = 10) -> list[float]:
    return [0.06 + 0.002 * i for i in range(n)]


def test_smoke_run_records_plots_and_withholds_verdict(
    tmp_path: Path, check_smoke: Callable[[str, Any], None]
) -> None:
    out = run_experiment("dfl-ambiguity-otdro", "smoke", out=tmp_path, jobs=1)
    check_smoke("dfl-ambiguity-otdro", out)  # the generic checks; test_all_smoke skips this slug
    assert all(u["status"] == "done" for u in out.units), [u.get("error") for u in out.units]
    assert len(out.units) == len(METHODS) * CONFIGS["smoke"]["seeds"]
    assert out.verdict.outcome == "no verdict"
    assert "pf:premium_reduction_mean" in out.verdict.figures and "lr:V_gap_mean" in out.verdict.figures
    names = sorted(p.name for p in (out.run_dir / "figures").iterdir())
    assert names == ["lr_comparison.png", "pf_comparison.png"]
    records = [json.loads(x) for x in (out.run_dir / "records.jsonl").read_text().splitlines()]
    finals = [r for r in records if r.get("final") == 1 and "pf:eps" in r]
    by = {(r["method"], r["seed"]): r for r in finals}
    for s in range(CONFIGS["smoke"]["seeds"]):  # learned and isotropic share the calibrated radius
        assert by[("learned", s)]["pf:eps"] == by[("isotropic", s)]["pf:eps"]
        assert by[("saa", s)]["pf:premium"] == 0.0


def test_data_is_the_same_for_every_method_and_differs_across_seeds() -> None:
    a, b, c = make_data("pf", 0, QUICK), make_data("pf", 0, QUICK), make_data("pf", 1, QUICK)
    assert bool((a["X"] == b["X"]).all()) and not bool((a["X"] == c["X"]).all())


def test_rule_reproduced_when_the_premium_falls_and_coverage_holds() -> None:
    iso = _iso()
    recs = _records({"learned": [0.5 * v for v in iso], "isotropic": iso},
                    {"learned": [0.85] * 10, "isotropic": [0.86] * 10})  # fmt: skip
    v = decide(recs, QUICK)
    assert v.outcome == "reproduced", v.summary
    assert abs(v.figures["pf:premium_reduction_mean"] - 0.5) < 1e-12


def test_rule_not_reproduced_when_the_shape_overfits_the_resamples() -> None:
    iso = _iso()
    cov_l = [0.70 + 0.01 * (i % 3) for i in range(10)]
    recs = _records({"learned": [0.5 * v for v in iso], "isotropic": iso},
                    {"learned": cov_l, "isotropic": [0.86] * 10})  # fmt: skip
    v = decide(recs, QUICK)
    assert v.outcome == "not reproduced" and v.figures["pf:part_b"] == "not reproduced"


def test_rule_small_or_negative_premium_changes() -> None:
    iso = _iso()
    cov = {"learned": [0.86] * 10, "isotropic": [0.86] * 10}
    # a 5 % reduction, clearly above 0 but below the 10 % bar: inconclusive
    v = decide(_records({"learned": [0.95 * x for x in iso], "isotropic": iso}, cov), QUICK)
    assert v.outcome == "inconclusive" and v.figures["pf:part_a"] == "inconclusive"
    # a larger premium: not reproduced
    worse = [1.2 * x * (1 + 0.01 * (i % 2)) for i, x in enumerate(iso)]
    v = decide(_records({"learned": worse, "isotropic": iso}, cov), QUICK)
    assert v.outcome == "not reproduced" and v.figures["pf:part_a"] == "not reproduced"


def test_full_rule_adds_the_regression_parts() -> None:
    iso = _iso(20)
    cov = {"learned": [0.86] * 20, "isotropic": [0.86] * 20}
    V_l = [1.0 + 0.01 * i for i in range(20)]
    V_i = [v + 0.1 + 0.001 * (i % 3) for i, v in enumerate(V_l)]
    extra = {"lr:V": {"learned": V_l, "isotropic": V_i},
             "lr:reliable": {"learned": [1.0] * 19 + [0.0], "isotropic": [1.0] * 20}}  # fmt: skip
    v = decide(_records({"learned": [0.5 * x for x in iso], "isotropic": iso}, cov, **extra), FULL)
    assert v.outcome == "reproduced", v.summary
    extra["lr:reliable"] = {"learned": [0.0] * 20, "isotropic": [1.0] * 20}
    v = decide(_records({"learned": [0.5 * x for x in iso], "isotropic": iso}, cov, **extra), FULL)
    assert v.outcome == "not reproduced" and v.figures["lr:part_d"] == "not reproduced"
