"""The cvar-quantile-pg experiment: smoke run of every method, and its stated rule on synthetic records."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from optarium.experiments import cvar_quantile_pg as exp
from optarium.harness.runner import run_experiment


def test_smoke_runs_every_method(tmp_path: Path, check_smoke: Callable[[str, Any], None]) -> None:
    out = run_experiment("cvar-quantile-pg", "smoke", out=tmp_path, jobs=1)
    check_smoke("cvar-quantile-pg", out)
    assert {u["method"] for u in out.units} == set(exp.METHODS)
    figs = out.verdict.figures
    assert "pn:final_cvar_diff" in figs and math.isfinite(figs["pn:cvar-qpg:final_cvar"])


def _records(e: dict[str, list[float]], cvar: dict[str, list[float]]) -> list[dict[str, Any]]:
    rows = []
    for m, es in e.items():
        for s, v in enumerate(es):
            met = float(v < 6400)
            rows.append(
                {"method": m, "seed": s, "step": 6401, "E_s0": v, "final_cvar_s0": cvar[m][s], "met_s0": met}
            )
    return rows


def test_rule_on_synthetic_records() -> None:
    cfg = {**exp.CONFIGS["quick"], "methods": ["cvar-qpg", "cvar-pg", "cesor"]}
    fast = {"cvar-qpg": [800.0, 1000.0, 900.0], "cvar-pg": [6400.0] * 3, "cesor": [1600.0, 2000.0, 3600.0]}
    cv = {m: [-16.0, -15.0, -17.0] for m in fast}
    v = exp.decide(_records(fast, cv), cfg)
    assert v.outcome == "reproduced"
    assert v.figures["s0:d_mean"] > 2.5
    d_ce = [math.log2(a / b) for a, b in zip(fast["cesor"], fast["cvar-qpg"], strict=True)]
    assert math.isclose(v.figures["s0:d_vs_cesor"], sum(d_ce) / 3)
    assert "s0:d_vs_mix" not in v.figures
    slow = {**fast, "cvar-qpg": [6400.0] * 3}
    assert exp.decide(_records(slow, cv), cfg).outcome == "not reproduced"
