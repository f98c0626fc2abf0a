"""The ReWA experiment at smoke scale: it runs, records, plots and decides by its stated rule."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

import optarium.experiments.rewa as rewa_exp
from optarium.experiments.rewa import CONFIGS, EXPERIMENT, decide, fista_lasso
from optarium.harness.runner import run_experiment


def _lin(method: str, seed: int, setting: int, mse: float, sparsity: float, f1: float) -> dict[str, object]:
    return {
        "method": method,
        "seed": seed,
        "step": 1,
        "status": "done",
        "problem": 0,
        "setting": setting,
        "penalty": 0.1,
        "lr": 0.01,
        "test_mse": mse,
        "sparsity": sparsity,
        "f1": f1,
    }


def _records(rewa_sp: list[float], l1_sp: list[float], rewa_mse: float = 1.0, rewa_f1: float = 1.0) -> list:
    recs = []
    for s in range(len(rewa_sp)):
        recs.append(_lin("lasso", s, 0, 1.0, 0.999, 1.0))
        recs.append(_lin("rewa", s, 0, rewa_mse, rewa_sp[s], rewa_f1))
        recs.append(_lin("rewa", s, 1, 1.5, 1.0, 1.0))  # sparser but outside the accuracy match
        recs.append(_lin("l1", s, 0, 1.02, l1_sp[s], 0.1))
        recs.append(_lin("l1", s, 1, 1.01, l1_sp[s] - 0.1, 0.05))
    return recs


QUICK = {"problems": CONFIGS["quick"]["problems"]}


def test_smoke_run_records_plots_and_withholds_verdict(
    tmp_path: Path, check_smoke: Callable[[str, Any], None]
) -> None:
    out = run_experiment("rewa", "smoke", out=tmp_path, jobs=1)
    check_smoke("rewa", out)  # the generic checks; test_all_smoke skips this slug
    assert all(u["status"] == "done" for u in out.units), [u.get("error") for u in out.units]
    assert len(out.units) == len(EXPERIMENT.methods) * CONFIGS["smoke"]["seeds"]
    assert out.verdict.outcome == "no verdict"
    assert {"linear1_outcome", "mlp_outcome", "cnn_outcome"} <= set(out.verdict.figures)
    names = sorted(p.name for p in (out.run_dir / "figures").iterdir())
    assert names == [
        "cnn_error_vs_sparsity.png",
        "linear1_error_vs_sparsity.png",
        "mlp_error_vs_sparsity.png",
    ]


def test_rule_reproduced_when_rewa_sparser_at_matched_error() -> None:
    v = decide(_records([0.999, 0.998, 0.999], [0.95, 0.96, 0.955]), QUICK)
    assert v.outcome == "reproduced"
    assert v.figures["linear1_rewa_sparsity"] == pytest.approx(0.998666, abs=1e-5)
    assert v.figures["linear1_sparsity_mean_gap"] > 0


def test_rule_not_reproduced_when_l1_sparser_or_rewa_inaccurate() -> None:
    assert decide(_records([0.90, 0.91, 0.90], [0.95, 0.96, 0.955]), QUICK).outcome == "not reproduced"
    assert decide(_records([0.999] * 3, [0.9] * 3, rewa_f1=0.5), QUICK).outcome == "not reproduced"
    v = decide(_records([0.999] * 3, [0.9] * 3, rewa_mse=1.2), QUICK)  # no ReWA setting within 1.03 x Lasso
    assert v.outcome == "not reproduced" and v.figures["linear1_rewa_matched"] == "none"


def test_rule_inconclusive_for_noisy_gap_and_single_seed() -> None:
    assert decide(_records([0.99, 0.90, 0.97], [0.95, 0.96, 0.955]), QUICK).outcome == "inconclusive"
    assert decide(_records([0.999], [0.95]), QUICK).outcome == "inconclusive"


def test_network_rule_on_synthetic_records() -> None:
    def rec(method: str, seed: int, setting: int, acc: float, sp: float) -> dict[str, object]:
        return {"method": method, "seed": seed, "step": 1, "status": "done", "problem": 2, "setting": setting,
                "penalty": 1.0, "lr": 1e-3, "test_acc": acc, "sparsity": sp}  # fmt: skip

    config = {"problems": [{"kind": "mlp"}]}
    good = [rec("rewa", s, 0, 0.95 + 0.001 * s, 0.95) for s in range(3)]
    good += [rec("l1", s, 0, 0.90, 0.92) for s in range(3)] + [
        rec("dense", s, 0, 0.96, 0.0) for s in range(3)
    ]
    assert decide(good, config).outcome == "reproduced"
    bad = [rec("rewa", s, 0, 0.85 - 0.001 * s, 0.95) for s in range(3)]
    bad += [rec("l1", s, 0, 0.90, 0.92) for s in range(3)]
    assert decide(bad, config).outcome == "not reproduced"


def test_fista_lasso_satisfies_kkt_conditions() -> None:
    X, y, _ = rewa_exp._linear_data("linear5", 300, 80)
    alphas = torch.tensor([0.05, 0.2], dtype=torch.float64)
    W = fista_lasso(X, y, alphas, 5000)
    for w, a in zip(W, alphas, strict=True):
        corr = X.T @ (y - X @ w) / X.shape[0]
        on = w != 0
        torch.testing.assert_close(corr[on], a * torch.sign(w[on]), rtol=0, atol=1e-6)
        assert float(corr[~on].abs().max()) <= float(a) + 1e-6
