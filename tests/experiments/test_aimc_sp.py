"""The aimc-sp experiment: smoke run, and its stated rule on hand-built records (each outcome)."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from optarium.experiments.aimc_sp import (
    CONFIGS,
    DIGITS_METHODS,
    DRIFT_METHODS,
    LOGREG_METHODS,
    LS_METHODS,
    METHODS,
    decide,
    digits_problem,
    drift_step,
    mlp_logits,
    run_digits,
)
from optarium.harness.runner import run_experiment

Q = CONFIGS["quick"]
FULL = CONFIGS["full"]


def _records(log_ratio: dict[str, float], pulses: dict[str, float] | None = None) -> list[dict[str, Any]]:
    """Ten replicates; excess loss = 1e-3 * exp(log_ratio[m] + small paired jitter)."""
    pulses = pulses or {}
    out = []
    for m in LS_METHODS:
        for j in range(10):
            jitter = 0.05 * ((3 * j) % 7 - 3) / 3
            out.append(
                {
                    "method": m,
                    "seed": 0,
                    "replicate": j,
                    "step": Q["steps"],
                    "status": "done",
                    "excess_loss": 1e-3
                    * math.exp(log_ratio.get(m, 0.0) + (jitter if m != "oracle" else 0.0)),
                    "dist2": 1e-3,
                    "pulses_per_device": pulses.get(m, 7000.0),
                }
            )
    return out


def test_rule_reproduced_not_reproduced_and_inconclusive() -> None:
    good = {
        "zero": 1.5,
        "calib-10": 1.5,
        "calib-100": 1.0,
        "calib-1000": 0.3,
        "calib-10000": 0.0,
        "chopped-0.05": 0.0,
        "residual-plain": 1.4,
    }
    pulses = {"calib-10000": 17000.0, "chopped-0.05": 12000.0}
    v = decide(_records(good, pulses), Q)
    assert v.outcome == "reproduced", v.summary
    assert v.figures["calib_N_within_20pct"] == 10000
    # the same records, but tracking pays more pulses than the calibration it replaces: (e) inconclusive
    v = decide(_records(good, {**pulses, "chopped-0.05": 20000.0}), Q)
    assert v.outcome == "inconclusive" and v.figures["part_e"] == "inconclusive"
    # tracking far from the oracle: not reproduced
    v = decide(_records({**good, "chopped-0.05": 1.0}, pulses), Q)
    assert v.outcome == "not reproduced" and v.figures["part_e"] == "not reproduced"
    # a zero reference as good as the oracle: part (c) fails
    v = decide(_records({**good, "zero": 0.0}, pulses), Q)
    assert v.figures["part_c"] == "not reproduced"


def test_quick_keeps_the_least_squares_study_and_full_adds_digits_and_drift() -> None:
    assert Q["methods"] == list(LS_METHODS) and "digits" not in Q
    assert FULL["methods"] == list(METHODS)
    smoke = set(CONFIGS["smoke"]["methods"]) | {"digits:calib-10000"}
    assert set(DIGITS_METHODS) | set(DRIFT_METHODS) | set(LOGREG_METHODS) <= smoke


class _Ctx:
    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def untimed(self) -> Any:
        import contextlib

        return contextlib.nullcontext()

    evaluating = untimed

    def log(self, step: int, **metrics: Any) -> None:
        self.records.append({"step": step, **{k: float(v) for k, v in metrics.items()}})


def test_mlp_logits_equals_a_torch_mlp_per_replicate() -> None:
    torch.manual_seed(0)
    x = torch.rand(3, 5, 64, dtype=torch.float64)
    ws = [torch.randn(3, 16, 64, dtype=torch.float64), torch.randn(3, 10, 16, dtype=torch.float64)]
    bs = [torch.randn(3, 16, dtype=torch.float64), torch.randn(3, 10, dtype=torch.float64)]
    out = mlp_logits(x, ws, bs)
    for r in range(3):
        ref = torch.nn.functional.linear(x[r], ws[0][r], bs[0][r]).relu()
        ref = torch.nn.functional.linear(ref, ws[1][r], bs[1][r])
        torch.testing.assert_close(out[r], ref, rtol=1e-12, atol=1e-12)
    # one weight matrix: logistic regression (no ReLU on the logits)
    lr_out = mlp_logits(x, ws[:1], bs[:1])
    torch.testing.assert_close(lr_out, torch.einsum("rbi,roi->rbo", x, ws[0]) + bs[0][:, None])
    with pytest.raises(ValueError, match="biases"):
        mlp_logits(x, ws, bs[:1])


def test_digits_problem_is_seeded_and_rejects_bad_sizes() -> None:
    dcfg = {**FULL["digits"], "hidden": 8, "epochs": 2, "replicates": 2}
    a, b = digits_problem(0, dcfg), digits_problem(0, dcfg)
    assert a["steps"] == 2 * (a["xtr"].shape[1] // 32) and a["idx"].shape == (a["steps"], 2, 32)
    assert a["xtr"].shape[1] + a["xte"].shape[1] == 1797 and a["xte"].shape[1] == round(0.2 * 1797)
    assert all(torch.equal(u, v) for u, v in zip(a["weights"], b["weights"], strict=True))
    assert torch.equal(a["idx"], b["idx"]) and not torch.equal(a["xtr"][0], a["xtr"][1])
    # each epoch visits distinct samples (a permutation per replicate)
    per_epoch = a["xtr"].shape[1] // 32
    first = a["idx"][:per_epoch, 0].flatten()
    assert first.unique().numel() == first.numel()
    with pytest.raises(ValueError, match="hidden"):
        digits_problem(0, {**dcfg, "hidden": -1})
    with pytest.raises(ValueError, match="batch"):
        digits_problem(0, {**dcfg, "batch": 5000})


def _digits_config(**kw: Any) -> dict[str, Any]:
    cfg = {**FULL, "digits": {**FULL["digits"], "hidden": 16, "epochs": 5, "replicates": 2, "log_every": 20}}
    cfg.update(kw)
    return cfg


def test_analog_sgd_on_the_ideal_device_trains_the_digits_mlp_exactly_like_sgd() -> None:
    cfg = _digits_config(device={"ideal": True})
    runs = {}
    for m in ("digits:oracle", "digits:digital"):
        ctx = _Ctx()
        run_digits(ctx, m, 0, cfg)
        runs[m] = ctx.records
    analog, digital = runs["digits:oracle"], runs["digits:digital"]
    assert [(r["step"], r["test_acc"], r["train_loss"]) for r in analog] == [
        (r["step"], r["test_acc"], r["train_loss"]) for r in digital
    ]
    first, last = analog[0]["step"], analog[-1]["step"]
    loss0 = [r["train_loss"] for r in analog if r["step"] == first]
    loss1 = [r["train_loss"] for r in analog if r["step"] == last]
    acc1 = [r["test_acc"] for r in analog if r["step"] == last]
    assert all(b < 0.4 * a for a, b in zip(loss0, loss1, strict=True)), (loss0, loss1)
    assert min(acc1) > 80.0, acc1


def test_drift_unit_shifts_the_sp_after_the_pre_shift_record() -> None:
    cfg = _digits_config()
    ctx = _Ctx()
    run_digits(ctx, "drift:oracle", 0, cfg)
    n_train = digits_problem(0, cfg["digits"])["xtr"].shape[1]
    k = drift_step(cfg["digits"], n_train)
    pre = [r for r in ctx.records if r["shifted"] == 0]
    post = [r for r in ctx.records if r["shifted"] == 1]
    assert max(r["step"] for r in pre) == k < min(r["step"] for r in post)
    assert all(r["pulses_per_device"] > 0 for r in ctx.records)


def _digits_records(acc: dict[str, float], recovery: dict[str, float]) -> list[dict[str, Any]]:
    """Five replicates per digits/drift method: final test accuracy acc[m] + paired jitter; drift methods
    also carry a pre-shift record (shifted = 0) with the end accuracy minus recovery[m]."""
    out = []
    for m in (*DIGITS_METHODS, *DRIFT_METHODS):
        for j in range(5):
            jitter = 0.2 * ((3 * j) % 5 - 2) if m != "digits:oracle" else 0.0
            end = acc.get(m, 95.0) + jitter
            base = {"method": m, "seed": 0, "replicate": j, "status": "done", "pulses_per_device": 600.0}
            if m.startswith("drift:"):
                out.append({**base, "step": 660, "test_acc": end - recovery.get(m, 0.0), "shifted": 0})
                out.append({**base, "step": 1320, "test_acc": end, "shifted": 1})
            else:
                out.append({**base, "step": 1320, "test_acc": end})
    return out


def test_digits_and_drift_parts_of_the_full_rule() -> None:
    good_ls = {
        "zero": 1.5,
        "calib-10": 1.5,
        "calib-100": 1.0,
        "calib-1000": 0.3,
        "calib-10000": 0.0,
        "chopped-0.05": 0.0,
    }
    ls = _records(good_ls, {"calib-10000": 17000.0, "chopped-0.05": 12000.0})
    acc = {"digits:oracle": 95.0, "digits:chopped-0.05": 95.0, "digits:calib-100": 92.0, "digits:zero": 88.0}
    rec = {"drift:chopped-0.05": 0.0, "drift:calib-1000": -3.0}
    v = decide(ls + _digits_records(acc, rec), FULL)
    assert v.outcome == "reproduced", v.summary
    assert v.figures["least_squares_outcome"] == "reproduced"
    assert v.figures["digits:e_minus_a"] == pytest.approx(0.0, abs=1e-9)
    # tracking 5 points below the oracle: the "(a) ~ (e)" part fails, so the claim does
    v = decide(ls + _digits_records({**acc, "digits:chopped-0.05": 90.0}, rec), FULL)
    assert v.figures["part_digits_a_eq_e"] == "not reproduced" and v.outcome == "not reproduced"
    # a static calibration that recovers from the SP shift as well: the drift part fails
    v = decide(ls + _digits_records(acc, {**rec, "drift:calib-1000": 0.5}), FULL)
    assert v.figures["part_drift"] == "not reproduced" and v.outcome == "not reproduced"
    # calib-100 no better than zero: its ">" is inconclusive, so is the claim
    v = decide(ls + _digits_records({**acc, "digits:calib-100": 88.0}, rec), FULL)
    assert v.figures["part_digits_b_gt_c"] == "inconclusive" and v.outcome == "inconclusive"
    # a failed least-squares study fails the full claim even when the digits parts reproduce
    bad_ls = _records({**good_ls, "chopped-0.05": 1.0}, {"calib-10000": 17000.0, "chopped-0.05": 12000.0})
    v = decide(bad_ls + _digits_records(acc, rec), FULL)
    assert v.figures["part_drift"] == "reproduced" and v.outcome == "not reproduced"
    # no digits records at all: those parts are inconclusive (never reproduced on missing pairs)
    v = decide(ls, FULL)
    assert v.figures["part_digits_a_eq_e"] == "inconclusive" and v.outcome == "inconclusive"


def test_smoke_run(tmp_path: Path, check_smoke: Callable[[str, Any], None]) -> None:
    out = run_experiment("aimc-sp", "smoke", out=tmp_path, jobs=1)
    check_smoke("aimc-sp", out)
    assert all(u["status"] == "done" for u in out.units)
    for m in CONFIGS["smoke"]["methods"]:
        if ":" in m:
            assert f"{m}:test_acc" in out.verdict.figures, m
    assert "part_drift" in out.verdict.figures
    # logistic regression is reported beside the rule, never one of its parts
    assert "logreg:e_minus_a" in out.verdict.figures and "logreg:b_minus_c" in out.verdict.figures
    assert not any(k.startswith("part_logreg") for k in out.verdict.figures)
