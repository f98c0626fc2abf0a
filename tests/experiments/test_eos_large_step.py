"""eos-large-step: the toy's control, and the verdict rule on hand-made records (every branch of the rule)."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any

import pytest
import torch

from optarium.experiments import eos_large_step as E

torch.set_num_threads(1)


class _Ctx:
    def __init__(self, method: str, seed: int) -> None:
        self.method, self.seed, self.records = method, seed, []

    def log(self, step: int, *, check_finite: bool = True, **metrics: Any) -> None:
        self.records.append({"method": self.method, "seed": self.seed, "step": step, **metrics})

    @contextlib.contextmanager
    def evaluating(self) -> Iterator[None]:
        yield


def _mlp_problem(seed: int) -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    X = torch.randn(40, 5, generator=gen, dtype=torch.float64)
    Y = torch.sin(X @ torch.randn(5, 2, generator=gen, dtype=torch.float64))
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2)).double()
    return model, X, Y


def test_experiment_sharpness_meter_matches_dense_and_diagnostics() -> None:
    """The experiment's warm-started Lanczos (SharpnessTracker) and cold sharpness equal eigvalsh."""
    from optarium.optim.diagnostics import SharpnessTracker, flat_loss, hessian, sharpness

    for seed in range(3):
        model, X, Y = _mlp_problem(seed)

        def loss_fn(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return 0.5 * ((out - y) ** 2).sum(1).mean()

        f, x = flat_loss(model, loss_fn, (X, Y))
        dense = float(torch.linalg.eigvalsh(hessian(f, x)).max())
        meter = SharpnessTracker(model, loss_fn, (X, Y), tol=1e-10, seed=seed)
        for _ in range(2):  # the second call is warm-started
            assert meter() == pytest.approx(dense, rel=1e-8)
        assert sharpness(model, loss_fn, (X, Y), tol=1e-10) == pytest.approx(dense, rel=1e-8)
    # the toy's closed form
    for u, v in ((4.0, 0.1), (2.0, 0.3), (1.0, 1.0), (-0.5, 3.0)):
        z = torch.tensor([u, v], dtype=torch.float64)
        H = hessian(lambda w: 0.5 * (1 - w[0] * w[1]) ** 2, z)
        assert E.toy_sharpness(u, v) == pytest.approx(float(torch.linalg.eigvalsh(H).max()), rel=1e-12)


def test_small_step_gd_follows_gradient_flow_on_the_toy() -> None:
    """GD at eta = 0.01 conserves u^2 - v^2 to O(eta): it ends within 2 % of S_GF from both starts."""
    ctx = _Ctx("toy-gd", 0)
    E.run(ctx, "toy-gd", 0, E.CONFIGS["quick"])
    finals = [r for r in ctx.records if "final_S" in r]
    assert len(finals) == 2
    for r in finals:
        assert r["final_loss"] < 1e-12
        assert abs(r["final_S"] - r["S_gf"]) <= 0.02 * r["S_gf"]
        assert r["final_S"] >= 2.0  # the minimal sharpness over the minimisers
    silent = _Ctx("toy-gd", 1)
    E.run(silent, "toy-gd", 1, E.CONFIGS["quick"])
    assert silent.records == []  # the deterministic toy runs once


def _toy(nm_S: float, nm_loss: float = 1e-5, gd_S: float | None = None) -> list[dict[str, Any]]:
    recs = []
    for start, (u, v) in enumerate(E.TOY_STARTS):
        s_gf = math.sqrt((u * u - v * v) ** 2 + 4)
        for m, s, loss in (("toy-gd", gd_S or s_gf, 1e-20), ("toy-nm", nm_S * s_gf, nm_loss)):
            recs.append(
                {
                    "method": m,
                    "seed": 0,
                    "step": 500,
                    "start": start,
                    "final_S": s,
                    "final_loss": loss,
                    "S_gf": s_gf,
                }
            )
    return recs


def _mlp(
    method: str, seed: int, eta_s: list[float], upticks: float, loss0: float, final: float, T: int = 300
) -> list[dict[str, Any]]:
    recs = [
        {"method": method, "seed": seed, "step": k, "etaS": v, "S": v, "eta": 1.0}
        for k, v in zip([10 * (j // 2) + j % 2 for j in range(len(eta_s))], eta_s, strict=True)
    ]
    recs.append(
        {
            "method": method,
            "seed": seed,
            "step": T,
            "final_loss": final,
            "loss0": loss0,
            "upticks": upticks,
            "S_T": 1.0,
        }
    )
    return recs


def _quick(
    F_nm: float,
    *,
    first_high: bool = True,
    upticks: float = 100,
    control: float = 1.0,
    nm_final: float = 0.2,
    ar_final: float = 0.15,
) -> list[dict[str, Any]]:
    recs = _toy(0.8)
    n = 60
    for seed in range(5):
        k_high = round(F_nm * n)
        nm = [3.0] * k_high + [1.0] * (n - k_high)
        if not first_high:
            nm = [1.0] * 4 + nm[:-4]
        recs += _mlp("mlp-nm", seed, nm, upticks, 1.0, nm_final)
        recs += _mlp("mlp-armijo", seed, [3.0] * 25 + [1.0] * 35, 10, 1.0, ar_final)
        recs += [
            {"method": "mlp-control", "seed": seed, "step": k, "etaS": control, "S": 1.0, "eta": 1.0}
            for k in range(11)
        ]
        recs.append(
            {
                "method": "mlp-control",
                "seed": seed,
                "step": 10,
                "final_loss": 0.9,
                "loss0": 1.0,
                "upticks": 0.0,
            }
        )
    return recs


QUICK = E.CONFIGS["quick"]


@pytest.mark.parametrize(
    ("records", "outcome", "eos"),
    [
        (_quick(0.9), "reproduced", "reproduced"),
        (_quick(0.55), "inconclusive", "inconclusive"),  # alternating EoS, the reconstructed rule's outcome
        (_quick(0.3), "not reproduced", "not reproduced"),
        (_quick(0.9, first_high=False), "not reproduced", "not reproduced"),  # EoS first at k = 20
        (_quick(0.9, upticks=2), "not reproduced", "not reproduced"),  # monotone: not nonmonotone
        (_quick(0.9, control=2.5), "inconclusive", "inconclusive"),  # the S estimator would be wrong
        (_quick(0.9, nm_final=0.6), "not reproduced", "reproduced"),  # the loss did not halve
        (_quick(0.9, nm_final=0.45, ar_final=0.1), "not reproduced", "reproduced"),  # r >> log 2
    ],
)
def test_quick_rule(records: list[dict[str, Any]], outcome: str, eos: str) -> None:
    v = E.decide(records, QUICK)
    assert v.outcome == outcome, v.summary
    assert v.figures["eos_outcome"] == eos
    assert v.figures["D_mean"] == pytest.approx(v.figures["nm_F_mean"] - v.figures["armijo_F_mean"])


def test_quick_toy_rule() -> None:
    base = [r for r in _quick(0.9) if not r["method"].startswith("toy")]
    assert E.decide(base + _toy(0.8), QUICK).figures["toy_outcome"] == "reproduced"
    assert E.decide(base + _toy(0.95), QUICK).outcome == "not reproduced"  # not flatter than gradient flow
    assert E.decide(base + _toy(0.8, nm_loss=1e-2), QUICK).outcome == "not reproduced"  # not converged
    v = E.decide(base + _toy(0.8, gd_S=10.0), QUICK)  # the control is off: inconclusive
    assert v.figures["toy_outcome"] == "inconclusive" and v.outcome == "inconclusive"
    assert E.decide(base + _toy(0.8), QUICK).figures["toy1_nm_S_over_2"] == pytest.approx(
        0.8 * math.sqrt(3.91**2 + 4) / 2
    )


def _full(nm_S: float, d_armijo: float, capped_acc: float) -> list[dict[str, Any]]:
    cfg = E.CONFIGS["full"]
    T = cfg["iters"]
    recs = []
    for seed in range(5):
        jitter = 0.01 * seed
        for m in E.FULL_MLP:
            s_t = {"full-nm": nm_S, "full-nm-capped": nm_S}.get(m, 5.0) + jitter
            f = {"full-nm": 0.9, "full-armijo": 0.9 - d_armijo}.get(m, 0.5)
            k_high = min(round(f * 40), 40)
            pts = [3.0] * k_high + [1.0] * (40 - k_high)
            recs += [
                {"method": m, "seed": seed, "step": k, "etaS": v, "S": s_t, "eta": 1.0}
                for k, v in zip([*range(20), *(50 * j for j in range(1, 20)), T - 1], pts, strict=True)
            ]
            if m == "full-gd1":
                for r in recs[-41:]:
                    if r["step"] <= 10:
                        r["etaS"] = 1.0
            capped = m == "full-nm-capped"
            acc = 0.9 + (capped_acc + 0.001 * seed if capped else 0.0)
            recs.append(
                {
                    "method": m,
                    "seed": seed,
                    "step": T,
                    "final_loss": 0.1,
                    "loss0": 1.0,
                    "upticks": 50.0,
                    "S_T": s_t,
                    "test_acc": acc,
                    "late_rate": 0.5,
                    "time_to_loss": 100.0,
                }
            )
    return recs


@pytest.mark.parametrize(
    ("nm_S", "d", "outcome", "sharp"),
    [
        (2.0, 0.4, "reproduced", "reproduced"),
        (2.0, -0.4, "not reproduced", "reproduced"),
        (8.0, 0.4, "not reproduced", "not reproduced"),
        (5.0, 0.4, "inconclusive", "inconclusive"),
    ],
)
def test_full_rule(nm_S: float, d: float, outcome: str, sharp: str) -> None:
    v = E.decide(_full(nm_S, d, 0.05), E.CONFIGS["full"])
    assert v.figures["sharpness_outcome"] == sharp, v.summary
    assert v.outcome == outcome, v.summary
    assert v.figures["capped_outcome"] == "reproduced"  # test accuracy + 5 points on every seed
    assert v.figures["nm_eos_outcome"] == "reproduced"
    assert E.decide(_full(2.0, 0.4, -0.05), E.CONFIGS["full"]).figures["capped_outcome"] == "not reproduced"


@pytest.mark.slow
def test_full_path_runs_decides_and_plots_on_a_small_config() -> None:
    """Every full-scale method runs (a shortened config) and the rule and figures work on its records."""
    import matplotlib

    matplotlib.use("Agg")
    cfg = {**E.CONFIGS["full"], "iters": 30, "s_every": 10, "s_first": 5, "n_train": 100}
    records: list[dict[str, Any]] = []
    for m in cfg["methods"]:
        for seed in range(2):
            ctx = _Ctx(m, seed)
            E.run(ctx, m, seed, cfg)
            records += ctx.records
    v = E.decide(records, cfg)
    assert {"eos_outcome", "D_outcome", "sharpness_outcome", "capped_outcome"} <= set(v.figures)
    assert sorted(E.plot(records, cfg)) == ["eos_and_loss", "final_sharpness_gaps"]
