"""The alpha-pfn experiment: the smoke run (untrained head) records, plots and withholds a verdict; the rule
on hand-built records passes, fails and stays inconclusive where it should."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from optarium.experiments.alpha_pfn import CONFIGS, METHODS, decide
from optarium.harness.runner import run_experiment


def test_smoke_run_records_plots_and_withholds_verdict(
    tmp_path: Path, check_smoke: Callable[[str, Any], None]
) -> None:
    out = run_experiment("alpha-pfn", "smoke", out=tmp_path, jobs=1)
    check_smoke("alpha-pfn", out)
    assert {"delta_vs_gp_mes", "speed_ratio_gp_mes_over_alpha_pfn"} <= set(out.verdict.figures)


def _records(pfn: list[float], mes: list[float], rand: list[float], t_pfn: float, t_mes: float) -> list[dict]:
    recs: list[dict[str, Any]] = []
    finals = {"alpha-pfn": pfn, "gp-mes": mes, "gp-ei": mes, "random": rand}
    for m in METHODS:
        for seed, v in enumerate(finals[m]):
            recs.append({"method": m, "seed": seed, "step": 12, "status": "done", "log10_regret": v,
                         "at_floor": float(v <= -3), "acq_cpu_s": 0.01})  # fmt: skip
    recs.append({"method": "alpha-pfn", "seed": 0, "step": 12, "status": "done", "pipeline_cpu_s": t_pfn})
    recs.append({"method": "gp-mes", "seed": 0, "step": 12, "status": "done", "pipeline_cpu_s": t_mes})
    return recs


def test_rule_reproduced_not_reproduced_inconclusive() -> None:
    cfg = CONFIGS["quick"]
    n = 20
    mes = [-3.0 + 0.01 * i for i in range(n)]
    rand = [-1.0 - 0.02 * i for i in range(n)]
    good = decide(_records([v + 0.05 * (-1) ** i for i, v in enumerate(mes)], mes, rand, 0.01, 0.2), cfg)
    assert good.outcome == "reproduced", good.summary
    slow = decide(_records(mes, mes, rand, 0.1, 0.2), cfg)  # 2x faster only
    assert slow.outcome == "not reproduced", slow.summary
    worse = decide(
        _records([v + 1.0 + 0.01 * (-1) ** i for i, v in enumerate(mes)], mes, rand, 0.01, 0.2), cfg
    )
    assert worse.outcome == "not reproduced", worse.summary
    noisy = decide(
        _records([v + 0.25 + 1.0 * (-1) ** i for i, v in enumerate(mes)], mes, rand, 0.01, 0.2), cfg
    )
    assert noisy.outcome == "inconclusive", noisy.summary
