"""The GradPower experiment at smoke scale: it runs, records, plots and decides by its stated rule."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from optarium.experiments.gradpower import CONFIGS, EXPERIMENT, decide
from optarium.harness.runner import run_experiment


def _records(gaps: dict[str, list[float]]) -> list[dict[str, object]]:
    """Final-validation records where AdamW's loss exceeds AdamWPower's by the given gap per seed."""
    recs: list[dict[str, object]] = []
    for setting, values in gaps.items():
        schedule, model = setting.split("/")
        for seed, gap in enumerate(values):
            for opt, loss in (("adamw", 2.0 + gap), ("adamwpower", 2.0)):
                recs.append(
                    {
                        "method": f"{opt}-{schedule}-{model}",
                        "seed": seed,
                        "step": 10,
                        "final_val_loss": loss,
                        "status": "done",
                    }
                )
    return recs


def test_smoke_run_records_plots_and_withholds_verdict(tmp_path: Path) -> None:
    out = run_experiment("gradpower", "smoke", out=tmp_path, jobs=2)
    assert all(u["status"] == "done" for u in out.units), [u.get("error") for u in out.units]
    assert len(out.units) == len(EXPERIMENT.methods) * CONFIGS["smoke"]["seeds"]
    assert out.verdict.outcome == "no verdict"
    assert {"dense_wsd_mean_gap", "moe_wsd_se", "moe_minus_dense_gap"} <= set(out.verdict.figures)
    assert sorted(p.name for p in (out.run_dir / "figures").iterdir()) == [
        "paired_gaps.png",
        "val_loss_curves.png",
    ]
    records = [json.loads(x) for x in (out.run_dir / "records.jsonl").read_text().splitlines()]
    finals = [r for r in records if "final_val_loss" in r]
    assert len(finals) == len(out.units)
    # paired runs share initialisation and data: their first logged training losses agree closely
    first = {
        (r["method"], r["seed"]): r["train_loss"] for r in records if r["step"] == 4 and "train_loss" in r
    }
    for seed in range(CONFIGS["smoke"]["seeds"]):
        a, b = first[("adamw-wsd-dense", seed)], first[("adamwpower-wsd-dense", seed)]
        assert abs(a - b) < 0.05


def test_rule_reproduced_when_every_setting_gains() -> None:
    config = {"methods": list(CONFIGS["quick"]["methods"])}
    v = decide(_records({"wsd/dense": [0.05, 0.06, 0.04], "cosine/dense": [0.03, 0.02, 0.04]}), config)
    assert v.outcome == "reproduced"
    assert v.figures["dense_wsd_mean_gap"] == pytest.approx(0.05)


def test_rule_not_reproduced_when_one_setting_loses() -> None:
    config = {"methods": list(CONFIGS["quick"]["methods"])}
    v = decide(_records({"wsd/dense": [0.05, 0.06, 0.04], "cosine/dense": [-0.03, -0.02, -0.04]}), config)
    assert v.outcome == "not reproduced"
    assert v.figures["dense_cosine_outcome"] == "not reproduced"


def test_rule_inconclusive_for_noise_and_for_sign_pattern_alone() -> None:
    config = {"methods": list(CONFIGS["quick"]["methods"])}
    v = decide(_records({"wsd/dense": [0.05, -0.06, 0.02], "cosine/dense": [0.03, 0.02, 0.04]}), config)
    assert v.outcome == "inconclusive"
    # one pair that gains is never enough
    v = decide(_records({"wsd/dense": [0.5], "cosine/dense": [0.5]}), config)
    assert v.outcome == "inconclusive"


def test_full_rule_reports_moe_gain_comparison() -> None:
    config = {"methods": list(CONFIGS["full"]["methods"])}
    v = decide(
        _records({"wsd/dense": [0.010, 0.012, 0.011, 0.009], "wsd/moe": [0.05, 0.06, 0.055, 0.05]}), config
    )
    assert v.outcome == "reproduced"
    assert v.figures["moe_larger_gain"] == "supported"
    v = decide(
        _records({"wsd/dense": [0.05, 0.06, 0.055, 0.05], "wsd/moe": [0.05, 0.06, 0.055, 0.05]}), config
    )
    assert v.figures["moe_larger_gain"] == "inconclusive"
