"""The db-ksvd experiment at smoke scale (runs, records, plots, withholds a verdict) and its rules."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import optarium.experiments.db_ksvd  # noqa: F401  (registers the experiment)
from optarium.experiments.db_ksvd import CONFIGS, decide
from optarium.harness.runner import run_experiment


def test_smoke(tmp_path: Path, check_smoke: Callable[[str, Any], None]) -> None:
    out = run_experiment("db-ksvd", "smoke", out=tmp_path, jobs=1)
    check_smoke("db-ksvd", out)
    assert 0.0 <= out.verdict.figures["a:db-ksvd:recovery_mean"] <= 1.0
    assert out.verdict.figures["a_n_pairs"] == 1


def _quick(recs: list[float], control: float = 0.0) -> list[dict[str, Any]]:
    out = []
    for s, r in enumerate(recs):
        out.append({"method": "db-ksvd", "seed": s, "step": 0, "control_recovery": control, "status": "done"})
        out.append(
            {"method": "db-ksvd", "seed": s, "step": 20, "recovery": r, "train_err": 0.26, "status": "done"}
        )
    return out


def test_quick_rule() -> None:
    cfg = {**CONFIGS["quick"], "methods": ["db-ksvd"]}
    assert decide(_quick([0.9, 0.91, 0.86]), cfg).outcome == "reproduced"
    assert decide(_quick([0.9, 0.8, 0.86]), cfg).outcome == "inconclusive"
    assert decide(_quick([0.9, 0.8, 0.84]), cfg).outcome == "not reproduced"
    assert decide(_quick([0.9, 0.91]), cfg).outcome == "inconclusive"  # fewer than 3 seeds
    assert decide(_quick([0.9, 0.91, 0.95], control=0.9), cfg).outcome == "inconclusive"  # control passes


def _full(ksvd: list[float], sae: list[float]) -> list[dict[str, Any]]:
    out = []
    for m, vals in (("db-ksvd", ksvd), ("topk-sae", sae)):
        for s, v in enumerate(vals):
            out.append({"method": m, "seed": s, "step": 1, "val_err": v, "recovery": 0.9, "status": "done"})
    return out


def test_full_planted_rule() -> None:
    cfg = {**CONFIGS["full"], "methods": ["db-ksvd", "topk-sae"]}
    assert decide(_full([0.30, 0.31, 0.29], [0.30, 0.30, 0.30]), cfg).outcome == "reproduced"
    assert decide(_full([0.40, 0.41, 0.39], [0.30, 0.30, 0.30]), cfg).outcome == "not reproduced"
    assert decide(_full([0.25, 0.40, 0.33], [0.30, 0.30, 0.30]), cfg).outcome == "inconclusive"  # wide SE
    v = decide(_full([0.30, 0.31, 0.29], [0.30, 0.30, 0.30]), cfg)
    assert abs(v.figures["a_delta_mean"]) < 1e-9 and v.figures["a_n_pairs"] == 3


def test_full_minilm_rule() -> None:
    cfg = {**CONFIGS["full"], "methods": ["db-ksvd", "topk-sae", "db-ksvd-minilm", "topk-sae-minilm"]}
    base = _full([0.30, 0.31, 0.29], [0.30, 0.30, 0.30])

    def mini(fk: float, fs: float, dead: float) -> list[dict[str, Any]]:
        return [
            *base,
            {
                "method": "db-ksvd-minilm",
                "seed": 0,
                "step": 10,
                "val_fvu": fk,
                "dead": dead,
                "status": "done",
            },
            {
                "method": "topk-sae-minilm",
                "seed": 0,
                "step": 10,
                "val_fvu": fs,
                "dead": 0.0,
                "status": "done",
            },
        ]

    assert decide(mini(0.30, 0.29, 3.0), cfg).outcome == "reproduced"
    assert decide(mini(0.35, 0.29, 3.0), cfg).outcome == "not reproduced"  # FVU ratio 1.21
    assert decide(mini(0.30, 0.29, 40.0), cfg).outcome == "not reproduced"  # 1.3 % dead atoms
    assert decide(base, cfg).outcome == "inconclusive"  # MiniLM units missing
