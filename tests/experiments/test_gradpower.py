"""The GradPower experiment at smoke scale: it runs, records, plots and decides by its stated rule."""

from __future__ import annotations

import contextlib

import pytest

from optarium.experiments.gradpower import CONFIGS, EXPERIMENT, decide


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


class _Ctx:
    """A minimal stand-in for the runner's context: collects the logged records."""

    def __init__(self) -> None:
        self.records: list[dict[str, float]] = []

    def log(self, step: int, **metrics: float) -> None:
        self.records.append({"step": step, **{k: float(v) for k, v in metrics.items()}})

    def evaluating(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    untimed = evaluating


def test_pairs_share_initialisation_and_data_and_differ_only_in_the_optimizer() -> None:
    config = EXPERIMENT.config("smoke")
    logs = {}
    for method in ("adamw-wsd-dense", "adamwpower-wsd-dense", "adamw-cosine-dense"):
        ctx = _Ctx()
        EXPERIMENT.run(ctx, method, 0, config)
        logs[method] = [r for r in ctx.records if "train_loss" in r]
    first = {m: recs[0]["train_loss"] for m, recs in logs.items()}
    # same weights and first batches: the first logged losses nearly agree (4 optimizer steps in)
    assert abs(first["adamw-wsd-dense"] - first["adamwpower-wsd-dense"]) < 0.05
    # but the runs are not identical: the optimizer matters
    last = {m: recs[-1]["train_loss"] for m, recs in logs.items()}
    assert last["adamw-wsd-dense"] != last["adamwpower-wsd-dense"]
    # a different seed changes the data and initialisation
    ctx = _Ctx()
    EXPERIMENT.run(ctx, "adamw-wsd-dense", 1, config)
    assert [r for r in ctx.records if "train_loss" in r][-1]["train_loss"] != last["adamw-wsd-dense"]


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
