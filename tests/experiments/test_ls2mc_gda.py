"""The ls2mc-gda experiment at smoke scale, and its verdict rule on synthetic records."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import optarium.experiments.ls2mc_gda as exp
from optarium.harness.runner import run_experiment


def test_smoke_run(tmp_path: Path, check_smoke: Callable[[str, Any], None]) -> None:
    out = run_experiment("ls2mc-gda", "smoke", out=tmp_path, jobs=1)
    check_smoke("ls2mc-gda", out)  # the generic checks; test_all_smoke skips this slug
    figs = out.verdict.figures
    assert {
        "delta_vs_no-vr",
        "delta_vs_no-smoothing",
        "speedup_ratio",
        "ls2mc-gda_noisy_over_noisefree",
    } <= set(figs)
    assert figs["n_pairs_no-vr"] == exp.CONFIGS["smoke"]["seeds"]
    # LS2MC shares x, y, z, p, q; local SGDA only x, y: the byte counts come from the communicator
    assert figs["ls2mc-gda_bytes_per_client"] > 2 * figs["local-sgda_bytes_per_client"]
    assert sorted(p.stem for p in (out.run_dir / "figures").glob("*.png")) == [
        "grad_vs_rounds_and_bytes",
        "paired_log_ratios",
        "speedup",
    ]


def _records(
    ratio_vr: float, ratio_sm: float, speed: float, *, seeds: int = 6, nf: float = 0.1, speed_nf: float = 0.1
) -> list[dict]:
    """Final records: ls2mc final = 1 (with jitter), others scaled; speedup N=1 over N=4 = ``speed``."""
    recs: list[dict] = []
    for s in range(seeds):
        j = 1.0 + 0.05 * (s - (seeds - 1) / 2) / seeds
        base = {"seed": s, "step": 2000, "final": 1, "status": "done"}
        vals = {
            "ls2mc-gda": j,
            "no-vr": j / ratio_vr * (1 + 0.03 * (s % 2)),
            "no-smoothing": j / ratio_sm * (1 + 0.03 * (s % 2)),
            "local-sgda": 1.3 * j,
            "local-scgdam": 1.3 * j,
            "codasca": 1.3 * j,
        }
        for m, v in vals.items():
            rec = {**base, "method": m, "final_grad": v, "final_phi": v, "bytes": 1e4, "lr": 0.03}
            if s == 0:
                rec["nf_final_grad"] = nf
            recs.append(rec)
        for n, v in ((1, speed * (1 + 0.02 * (s % 2))), (4, 1.0)):
            rec = {**base, "method": "speedup", "N": n, "final_grad": v}
            if s == 0 and n == 1:
                rec.update(nf_final_grad=speed_nf, init_grad=10.0 * speed)
            recs.append(rec)
    return recs


CFG = {"speedup": {"Ns": [1, 4]}}


def test_rule_reproduced_not_reproduced_and_inconclusive() -> None:
    assert exp.decide(_records(0.7, 1.0, 2.0), CFG).outcome == "reproduced"
    assert exp.decide(_records(1.4, 1.0, 2.0), CFG).outcome == "not reproduced"  # VR hurts
    assert exp.decide(_records(0.7, 1.6, 2.0), CFG).outcome == "inconclusive"  # smoothing hurts
    assert exp.decide(_records(0.7, 1.0, 1.2), CFG).outcome == "inconclusive"  # no speedup
    # optimisation-limited control: the noisy run within 1.5x of the noise-free one
    v = exp.decide(_records(0.7, 1.0, 2.0, nf=0.9), CFG)
    assert v.outcome == "inconclusive" and "ls2mc-gda" in v.figures["optimisation_limited"]
    # the speedup control: N = 1 within 1.5x of its noise-free final is not informative
    v = exp.decide(_records(0.7, 1.0, 2.0, speed_nf=1.9), CFG)
    assert v.outcome == "inconclusive" and v.figures["speedup_informative"] is False
    assert math.isclose(v.figures["delta_vs_local-sgda"], math.log(1 / 1.3), rel_tol=1e-9)
