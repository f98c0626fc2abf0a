"""The mossp experiment: its smoke run, and its verdict rule on hand-built records (each side reachable)."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from optarium.experiments.mossp import CONFIGS, CORE, decide
from optarium.harness.runner import run_experiment

QUICK = dict(CONFIGS["quick"])


def _records(
    overlap: dict[str, list[float]] | None = None,
    kkt: dict[str, list[float]] | None = None,
    abs_c: float = 4e-3,
) -> list[dict[str, Any]]:
    base_kkt = [0.08, 0.06, 0.1, 0.07, 0.09, 0.05, 0.08, 0.11, 0.06, 0.07]
    recs: list[dict[str, Any]] = []
    for m in QUICK["methods"]:
        ov = (overlap or {}).get(m, [0.999] * 10)
        kk = (kkt or {}).get(m, base_kkt)
        for s in range(10):
            recs.append(
                {
                    "method": m,
                    "seed": s,
                    "step": 0,
                    "status": "done",
                    "overlap": 0.1,
                    "kkt": 1.0,
                    "abs_c": 0.0,
                    "objective": -0.3,
                    "f1": 0.2,
                    "oracle_calls": 0.0,
                }
            )
            recs.append(
                {
                    "method": m,
                    "seed": s,
                    "step": 100,
                    "status": "done",
                    "overlap": ov[s],
                    "kkt": kk[s],
                    "abs_c": abs_c,
                    "objective": -2.8,
                    "f1": 0.2,
                    "oracle_calls": 2e5,
                }
            )
            recs.append({"method": m, "seed": s, "step": 101, "status": "done", "x0_overlap": 0.1})
    return recs


def test_rule_reproduced_when_both_variants_succeed_and_match_the_baseline() -> None:
    v = decide(_records(), QUICK)
    assert v.outcome == "reproduced", v.summary
    assert v.figures["mossp-polyak:a_success"] == 10 and v.figures["mossp-storm:b_outcome"] == "reproduced"
    assert v.figures["control:dca_miss_count"] == 0


def test_rule_part_a_sides() -> None:
    miss1 = [0.999] * 9 + [0.01]
    v = decide(_records(overlap={"mossp-storm": miss1}), QUICK)
    assert v.figures["mossp-storm:a_outcome"] == "reproduced" and v.outcome == "reproduced"  # 9 of 10
    miss2 = [0.999] * 8 + [0.01, 0.5]
    v = decide(_records(overlap={"mossp-storm": miss2}), QUICK)
    assert v.figures["mossp-storm:a_outcome"] == "inconclusive" and v.outcome == "inconclusive"
    miss3 = [0.999] * 7 + [0.01, 0.5, 0.2]
    v = decide(_records(overlap={"mossp-polyak": miss3}), QUICK)
    assert v.outcome == "not reproduced"
    # infeasible points fail (a) whatever the overlap
    assert decide(_records(abs_c=0.05), QUICK).outcome == "not reproduced"
    # the landscape control counts the seeds the reference misses
    v = decide(_records(overlap={"penalty-dca": miss1, "mossp-polyak": miss1}), QUICK)
    assert v.figures["control:dca_miss_seeds"] == "9"
    assert v.figures["mossp-polyak:a_success_where_dca_succeeds"] == 9


def test_rule_part_b_sides() -> None:
    base = [0.08, 0.06, 0.1, 0.07, 0.09, 0.05, 0.08, 0.11, 0.06, 0.07]
    worse = [3 * k for k in base]
    v = decide(_records(kkt={"mossp-polyak": worse}), QUICK)
    assert v.figures["mossp-polyak:b_outcome"] == "not reproduced" and v.outcome == "not reproduced"
    noisy = [k * f for k, f in zip(base, [0.3, 4.0, 0.5, 3.0, 0.4, 5.0, 0.6, 2.0, 1.0, 3.0], strict=True)]
    v = decide(_records(kkt={"mossp-storm": noisy}), QUICK)
    assert v.figures["mossp-storm:b_outcome"] == "inconclusive" and v.outcome == "inconclusive"
    better = [k / 3 for k in base]
    v = decide(_records(kkt={"mossp-polyak": better}), QUICK)
    assert v.outcome == "reproduced" and v.figures["mossp-polyak:beats_sgd"] == "reproduced"
    assert math.isclose(v.figures["mossp-polyak:b_log_ratio_mean"], -math.log(3))


def test_smoke_run_records_plots_and_withholds_verdict(
    tmp_path: Path, check_smoke: Callable[[str, Any], None]
) -> None:
    out = run_experiment("mossp", "smoke", out=tmp_path, jobs=1)
    check_smoke("mossp", out)  # the generic checks; test_all_smoke skips this slug
    assert set(CORE) <= {u["method"] for u in out.units}
    assert "mossp-polyak:a_seeds" in out.verdict.figures
    assert sorted(p.name for p in (out.run_dir / "figures").iterdir()) == ["kkt_overlap.png"]
