"""The fbi-performative experiment at smoke scale, and its verdict rule on synthetic records."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import optarium.experiments.fbi_performative as exp
from optarium.harness.runner import run_experiment


def test_smoke_run(tmp_path: Path, check_smoke: Callable[[str, Any], None]) -> None:
    out = run_experiment("fbi-performative", "smoke", out=tmp_path, jobs=1)
    check_smoke("fbi-performative", out)  # the generic checks; test_all_smoke skips this slug
    figs = out.verdict.figures
    assert {"rate_max_abs_diff", "threshold_min_growth", "sgd_rel_err_max_0.2", "post_gap_0.5"} <= set(figs)
    assert figs["post_gap_control_eps0_max"] < 1e-10
    # FBi-SGD uploads only p_i h_i (d = 5 float64 values) and gets the aggregate back: 2 * 5 * 8 bytes/round
    rounds = exp.CONFIGS["smoke"]["sgd"]["rounds"]
    assert figs["sgd_bytes_per_client"] == 2 * 5 * 8 * rounds
    assert sorted(p.stem for p in (out.run_dir / "figures").glob("*.png")) == [
        "distance_vs_rounds_and_bytes",
        "post_deployment_gap",
        "rate_vs_sensitivity",
    ]


def _records(
    *,
    rate: float = 0.2,
    rho: float = 0.2,
    growth: float = 2e3,
    sgd: float = 0.01,
    gap: float = 1.0,
    seeds: int = 4,
) -> list[dict]:
    recs: list[dict] = []
    for s in range(seeds):
        j = 1.0 + 0.1 * s
        b = {"seed": s, "status": "done", "step": 30}
        recs.append({**b, "method": "fbi-rrm", "rate_test": 1, "geo_ratio": rate, "rho": rho})
        recs.append(
            {
                **b,
                "method": "fbi-rrm",
                "threshold_test": 1,
                "rho_above": 2.0,
                "growth_above": growth,
                "control_final": 1e-12,
                "eps_star": 0.75,
            }
        )
        for e in (0.0, 0.5, 1.0, 1.5):
            recs.append({**b, "method": "fbi-rrm", "scan": 1, "eps": e, "emp_rate": 0.5 if e < 0.75 else 1.5})
        recs.append({**b, "method": "fbi-sgd", "final": 1, "eps_frac": 0.2, "rel_err": sgd, "bytes": 80.0})
        for f in (0.0, 0.25, 0.5, 0.75):
            recs.append({**b, "method": "non-performative", "compare": 1, "eps_frac": f, "gap": gap * f * j})
    return recs


CFG = {"grid": [0.0, 0.5, 1.0, 1.5]}


def test_rule() -> None:
    assert exp.decide(_records(), CFG).outcome == "reproduced"
    assert exp.decide(_records(rate=0.4), CFG).outcome == "not reproduced"  # rate is not rho
    assert exp.decide(_records(growth=5.0), CFG).outcome == "not reproduced"  # no instability
    assert exp.decide(_records(sgd=0.2), CFG).outcome == "not reproduced"  # FBi-SGD misses 5 %
    assert exp.decide(_records(sgd=float("nan")), CFG).outcome == "not reproduced"  # diverged run
    assert exp.decide(_records(gap=-1.0), CFG).outcome == "not reproduced"  # non-performative better
    v = exp.decide(_records(gap=0.0), CFG)
    assert v.outcome == "inconclusive" and v.figures["part_post_deployment"] == "inconclusive"
