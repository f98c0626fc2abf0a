"""The decentralized-pl-bilevel experiment at smoke scale, and its verdict rule on synthetic records."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import optarium.experiments.decentralized_pl_bilevel as exp
from optarium.harness.runner import run_experiment


def test_smoke_run(tmp_path: Path, check_smoke: Callable[[str, Any], None]) -> None:
    out = run_experiment("decentralized-pl-bilevel", "smoke", out=tmp_path, jobs=1)
    check_smoke("decentralized-pl-bilevel", out)  # the generic checks; test_all_smoke skips this slug
    figs = out.verdict.figures
    assert figs["n_seeds"] == exp.CONFIGS["smoke"]["seeds"]
    assert figs["concave_start_fraction_min"] > 0.5
    # D-HJFBiO gossips (x, y, v, p, q, r), D-SOBA (x, y, v): bytes from the communicator; centralised none
    assert figs["d-hjfbio_bytes_per_agent"] > 1.5 * figs["d-soba_bytes_per_agent"]
    assert figs["centralised_bytes_per_agent"] == 0.0
    assert sorted(p.stem for p in (out.run_dir / "figures").glob("*.png")) == [
        "consensus_vs_rounds",
        "error_vs_rounds_and_bytes",
    ]


def _records(err: float, cons: float, ratio: float, *, seeds: int = 3, finite: float = 1.0) -> list[dict]:
    recs: list[dict] = []
    for s in range(seeds):
        common = {"method": "d-hjfbio", "seed": s, "step": 10_000, "final": 1}
        recs.append({**common, "run": 0, "rel_err": err, "consensus": cons, "concave_start_fraction": 0.6})
        recs.append({**common, "run": 1, "plateau_mid": 1e-5, "plateau_last": ratio * 1e-5, "finite": finite})
    return recs


def test_rule_on_synthetic_records() -> None:
    cfg = dict(exp.CONFIGS["quick"])
    assert exp.decide(_records(1e-4, 1e-15, 1.2), cfg).outcome == "reproduced"
    assert exp.decide(_records(2e-2, 1e-15, 1.2), cfg).outcome == "not reproduced"  # too far from x*
    assert exp.decide(_records(1e-4, 1e-6, 1.2), cfg).outcome == "not reproduced"  # no consensus
    assert exp.decide(_records(1e-4, 1e-15, 3.0), cfg).outcome == "not reproduced"  # drifting plateau
    assert exp.decide(_records(1e-4, 1e-15, 1.2, finite=0.0), cfg).outcome == "not reproduced"
    assert exp.decide(_records(1e-4, 1e-15, 1.2, seeds=2), cfg).outcome == "inconclusive"  # missing seed
