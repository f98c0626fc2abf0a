"""The boba experiment: its smoke run, and its rule on hand-built records (every side of each part)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from optarium.experiments.boba import CONFIGS, FULL_METHODS, decide
from optarium.harness.runner import run_experiment

QUICK = CONFIGS["quick"]
FULL = CONFIGS["full"]


def _records(recalls: dict[str, list[float]], calls: dict[str, float]) -> list[dict[str, Any]]:
    return [
        {
            "method": m,
            "seed": s,
            "step": 2000,
            "status": "done",
            "final_recall": v,
            "final_inference_calls": calls.get(m, 0.0),
        }
        for m, vals in recalls.items()
        for s, v in enumerate(vals)
    ]


def _quick(
    ucb: float = 0.9, greedy: float = 0.85, rp: float = 0.45, share: float = 0.034
) -> list[dict[str, Any]]:
    jitter = [0.01 * ((3 * s) % 5 - 2) for s in range(10)]
    rec = {
        "boba-ucb": [ucb + j for j in jitter],
        "boba-greedy": [greedy + 0.5 * j for j in jitter[::-1]],
        "boba-random-partitions": [rp + j for j in jitter[::-1]],
        "boba-uniform": [0.5] * 10,
        "full-library": [1.0] * 10,
        "random": [0.07 + 0.5 * j for j in jitter],
    }
    return _records(rec, {"boba-ucb": share * 491_000, "full-library": 491_000.0})


def test_smoke_run_records_plots_and_withholds_verdict(
    tmp_path: Path, check_smoke: Callable[[str, Any], None]
) -> None:
    out = run_experiment("boba", "smoke", out=tmp_path, jobs=1)
    check_smoke("boba", out)  # the generic checks; test_all_smoke skips this slug
    assert "full_mean_gap" in out.verdict.figures and "vs_boba-greedy_mean_gap" in out.verdict.figures


def test_quick_rule_sides() -> None:
    v = decide(_quick(), QUICK)
    assert v.outcome == "reproduced", v.summary
    assert v.figures["vs_boba-greedy_side"] == "beats" and 0.03 < v.figures["inference_share"] < 0.04
    assert decide(_quick(greedy=0.9), QUICK).outcome == "reproduced"  # a tie with greedy is allowed
    assert decide(_quick(greedy=1.0), QUICK).outcome == "inconclusive"  # losing to greedy is not
    assert decide(_quick(share=0.2), QUICK).outcome == "inconclusive"  # too much inference
    assert decide(_quick(ucb=0.75), QUICK).outcome == "not reproduced"  # below 0.8 x full
    assert decide(_quick(rp=0.95), QUICK).outcome == "not reproduced"  # random partitions win
    assert decide(_quick(ucb=0.8), QUICK).figures["a_outcome"] == "inconclusive"


def test_full_rule_sides() -> None:
    def recs(boba: list[float], subset: list[float]) -> list[dict[str, Any]]:
        rec = {}
        for i, m in enumerate(FULL_METHODS[:3]):
            rec[m] = [boba[i] + 0.01 * (s % 3) for s in range(10)]
        for i, m in enumerate(FULL_METHODS[3:]):
            rec[m] = [subset[i] + 0.01 * ((s + 1) % 3) for s in range(10)]
        return _records(rec, {})

    assert decide(recs([0.6, 0.7, 0.8], [0.3, 0.4, 0.6]), FULL).outcome == "reproduced"
    assert decide(recs([0.6, 0.6, 0.6], [0.3, 0.4, 0.5]), FULL).outcome == "inconclusive"  # no trade-off
    assert decide(recs([0.6, 0.7, 0.8], [0.3, 0.4, 0.9]), FULL).outcome == "not reproduced"
