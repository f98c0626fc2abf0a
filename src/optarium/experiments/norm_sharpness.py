r"""Norm versus sharpness: does the learning rate trade low parameter norm for low sharpness?

Paper: Vit Fojtik, Maria Matveev, Hung-Hsu Chou, Gitta Kutyniok, Johannes Maly, "Conflicting Biases at the
Edge of Stability: Norm versus Sharpness Regularization", ICML 2026, arXiv:2505.21423. Claim: the learning
rate interpolates between low parameter norm (small η, gradient-flow regime) and low sharpness (large η, Edge
of Stability), and for diagonal linear networks neither bias alone minimises the generalisation error.

What is the paper's and what is reconstructed. The claim and the protocol in outline (train with full-batch
GD at a grid of constant η until the training loss is small; record a parameter norm, the sharpness
λ_max(∇²L) and the test error) are the paper's (abstract, introduction and a paper-notes summary; the body,
the DLN counter-example and the networks and data sets were not readable). Everything below is the spec's
reconstruction (../shared/papers/norm-sharpness.md): the DLN parametrisation :math:`w = u^2 - v^2`, the
data, the grid concentrated near the stability limit η_max, the tolerances, the targets T1 / T2 and the rules.
The tools are :mod:`optarium.optim.implicit_bias` (analytic DLN gradients, exact dense Hessians, GD batched
over step sizes, ``linprog`` min-ℓ1) and :func:`optarium.optim.diagnostics.sharpness` (Lanczos on HVPs) for
the MLP.

Protocol (every unit is one target x seed, or one digits-MLP seed):

- **DLN** (d = 100, n = 40, X ~ N(0, 1), label noise std 0.1, α = 0.1 at quick): η_max is the largest η that
  still converges (loss < 1e-6 within 20 000 steps), probed by doubling from 2/S_0 and 6 bisection steps
  (batched: one batch of doublings, then two rounds of 7 interior points). Grid: {0.01, 0.1}·η_max plus 10
  points evenly spaced in [0.3, 1]·η_max. Per run: status (converged / not converged / diverged: every run
  is logged, the counts are figures), ‖w‖₁, ‖θ‖₂², the exact sharpness S, η·S, and the validation and test MSE
  on 2000 fresh points each (noise-free targets Xw*). The min-ℓ1 (linprog) and min-ℓ2 (pseudo-inverse)
  interpolators are scored on the same points. Paired comparisons use the per-point differences of squared
  errors on the 2000 test points (mean and SE over points). Targets: T1, w* 5-sparse with entries ±1 (3
  seeds); T2 (exploratory), w* 20-sparse with entries ±0.5 (5 seeds).
- **MLP** (full only): a one-hidden-layer tanh MLP (width 256; "2-layer": two weight layers) on 500 random
  samples of sklearn's bundled digits (the rest split in half into validation and test), one-hot targets,
  loss (1/2n) Σ‖f(x) − y‖², full-batch GD in float32 from nn.Linear's default init, until loss < 1e-3 or
  10 000 steps. Budget reconstruction: the MLP's η_max is probed on a 1000-step horizon (a candidate passes if
  it has not diverged and its loss after 1000 steps is below its initial loss), by doubling from 2/S_0 and 3
  bisection steps (one round of 7); a 10 000-step probe like the DLN's (15 more runs of up to 10⁴ steps per
  seed) would about double the full run's time. Grid: {0.01, 0.1}·η_max plus 8 points in [0.3, 1]·η_max (10
  learning rates). Norms: ‖θ‖₂² and the distance from the initialisation ‖θ − θ₀‖₂² (our choice of the MLP's
  "two norms"); sharpness by Lanczos on HVPs in float64 at the final iterate (tol 1e-6); test error
  (misclassification) and test MSE.

Scales: ``smoke`` (d = 20, n = 8, 3 step sizes, a 40-sample MLP of width 8; no verdict); ``quick`` (the DLN
at α = 0.1, T1 and T2); ``full`` (T2 at α ∈ {0.01, 0.1, 1}, 5 seeds each, plus the digits MLP, 3 seeds).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from optarium._core.seeding import derive_seed
from optarium.harness.experiment import Experiment, Verdict, register
from optarium.harness.figures import panel_grid
from optarium.harness.verdicts import combine_outcomes, select

__all__ = ["EXPERIMENT", "decide", "plot", "run"]

CLAIM = (
    "The learning rate of full-batch GD interpolates between low parameter norm (small η) and low sharpness "
    "(large η, S ≈ 2/η at the Edge of Stability), and for diagonal linear networks an intermediate η "
    "generalises better than either extreme (neither the norm bias nor the sharpness bias alone is optimal)."
)
RULE = (
    "Per unit, compare the largest converged η (top) with the smallest converged η (min). (i) "
    "Norm-sharpness dial: reproduced if in every seed S(top) <= 0.8 S(min) and ||w||_1(top) >= 1.05 "
    "||w||_1(min); not reproduced if ||w||_1(top) <= ||w||_1(min) or S(top) >= S(min) in a majority of "
    "seeds; else inconclusive (quick: T1 and T2 seeds pooled; full: each α separately, and the MLP with "
    "||θ||² or ||θ - θ0||² in place of ||w||_1, reproduced if either norm is, not reproduced if both are "
    "not). (ii) Stability check: η S <= 2 x 1.05 for every converged run (an implementation check: a "
    "failure makes the outcome inconclusive at best, never a finding). (iii) Neither bias alone optimal, T2 "
    "only: per seed take the interior converged grid point (neither min nor top) with the lowest validation "
    "MSE and compare its test MSE, paired on the same 2000 test points (SE from the per-point squared-error "
    "differences), with the min-η solution, the top-η solution and the min-ℓ1 interpolator; reproduced if "
    "it beats all three by more than 2 SE in at least 80 % of the seeds (4 of 5); not reproduced (failed) "
    "if the lowest test MSE over the converged grid is at min or top in at least 80 % of the seeds; else "
    "inconclusive. T1 (sparse truth) is expected to fail (the ℓ1 bias is the right bias there) and is "
    "reported, not decided on. Outcome: the parts (i), (ii) and (iii) (quick: T2; full: each α) combined: "
    "reproduced if all are, not reproduced if (i) or any (iii) is not, else inconclusive. Spearman(η, S), "
    "Spearman(η, ||w||_1), η_c (the smallest converged η with η S >= 1.8), the run counts by status and, "
    "over every non-diverged run (converged or not), the top/min ratios of S and of the norms and the η of "
    "the lowest test error are reported, not decided on."
)

TARGETS: dict[str, dict[str, Any]] = {"T1": {"k": 5, "amp": 1.0}, "T2": {"k": 20, "amp": 0.5}}
RUN_CODES = {"converged": 0.0, "not converged": 1.0, "diverged": 2.0}
STABILITY_SLACK = 1.05
DIAL_S, DIAL_NORM = 0.8, 1.05

_DLN: dict[str, Any] = {
    "d": 100,
    "n": 40,
    "noise": 0.1,
    "n_val": 2000,
    "n_test": 2000,
    "max_steps": 20_000,
    "tol": 1e-6,
    "bisections": 6,
    "grid_low": [0.01, 0.1],
    "grid_top": [0.3, 1.0],
    "grid_n_top": 10,
}
_MLP: dict[str, Any] = {
    "mlp_train": 500,
    "mlp_hidden": 256,
    "mlp_max_steps": 10_000,
    "mlp_tol": 1e-3,
    "mlp_probe_steps": 1000,
    "mlp_bisections": 3,
    "mlp_grid_n_top": 8,
    "mlp_lanczos_tol": 1e-6,
}

CONFIGS: dict[str, dict[str, Any]] = {
    "smoke": {
        **_DLN,
        **_MLP,
        "seeds": 2,
        "d": 20,
        "n": 8,
        "n_val": 200,
        "n_test": 200,
        "max_steps": 1500,
        "bisections": 2,
        "grid_low": [0.1],
        "grid_top": [0.6, 1.0],
        "grid_n_top": 2,
        "targets": {"T1": {"k": 2, "amp": 1.0}, "T2": {"k": 5, "amp": 0.5}},
        "methods": ["dln-T1", "dln-T2", "mlp-digits"],
        "method_seeds": {"dln-T1": 2, "dln-T2": 2, "mlp-digits": 1},
        "alpha": 0.1,
        "mlp_train": 40,
        "mlp_hidden": 8,
        "mlp_max_steps": 60,
        "mlp_tol": 1e-2,
        "mlp_probe_steps": 20,
        "mlp_bisections": 1,
        "mlp_grid_n_top": 2,
    },
    "quick": {
        **_DLN,
        "seeds": 5,
        "targets": TARGETS,
        "alpha": 0.1,
        "methods": ["dln-T1", "dln-T2"],
        "method_seeds": {"dln-T1": 3, "dln-T2": 5},
        "unit_timeout_s": 120.0,
    },
    "full": {
        **_DLN,
        **_MLP,
        "seeds": 5,
        "targets": TARGETS,
        "alpha": 0.1,
        "methods": ["dln-T2-a0.01", "dln-T2-a0.1", "dln-T2-a1", "mlp-digits"],
        "method_seeds": {"dln-T2-a0.01": 5, "dln-T2-a0.1": 5, "dln-T2-a1": 5, "mlp-digits": 3},
        "unit_timeout_s": 1500.0,
    },
}
METHODS = ("dln-T1", "dln-T2", "dln-T2-a0.01", "dln-T2-a0.1", "dln-T2-a1", "mlp-digits")


def _parse(method: str, config: Mapping[str, Any]) -> tuple[str, float]:
    """(target, α) of a DLN method name ``dln-<target>[-a<alpha>]``."""
    parts = method.split("-")
    target = parts[1]
    alpha = float(parts[2][1:]) if len(parts) > 2 else float(config["alpha"])
    return target, alpha


# --------------------------------------------------------------------------------------------------- DLN
def _dln_data(config: Mapping[str, Any], target: str, seed: int) -> dict[str, torch.Tensor]:
    spec = config["targets"][target]
    d, n, k = int(config["d"]), int(config["n"]), int(spec["k"])
    g = torch.Generator().manual_seed(derive_seed(seed, "norm-sharpness", "dln-data", target))
    dt = torch.float64
    x = torch.randn(n, d, generator=g, dtype=dt)
    w_star = torch.zeros(d, dtype=dt)
    support = torch.randperm(d, generator=g)[:k]
    signs = torch.randint(0, 2, (k,), generator=g).to(dt) * 2 - 1
    w_star[support] = float(spec["amp"]) * signs
    y = x @ w_star + float(config["noise"]) * torch.randn(n, generator=g, dtype=dt)
    xv = torch.randn(int(config["n_val"]), d, generator=g, dtype=dt)
    xt = torch.randn(int(config["n_test"]), d, generator=g, dtype=dt)
    return {"x": x, "y": y, "w_star": w_star, "xv": xv, "yv": xv @ w_star, "xt": xt, "yt": xt @ w_star}


def _endpoints(status: Sequence[str]) -> tuple[int | None, int | None]:
    conv = [i for i, s in enumerate(status) if s == "converged"]
    return (conv[0], conv[-1]) if conv else (None, None)


def _gaps(pred: torch.Tensor, i: int, j: int | None, target: torch.Tensor) -> tuple[float, float]:
    """(mean, SE) of the per-point squared-error gap comparator j minus candidate i (positive: i better)."""
    from optarium.optim.implicit_bias import paired_mse_difference

    if j is None:
        return math.nan, math.nan
    return paired_mse_difference(pred[j], pred[i], target)


def _run_dln(ctx: Any, method: str, seed: int, config: Mapping[str, Any]) -> None:
    from optarium.optim.implicit_bias import (
        dln_gd,
        dln_sharpness,
        lr_grid,
        max_stable_lr,
        min_l1_interpolator,
        min_l2_interpolator,
    )

    target, alpha = _parse(method, config)
    with ctx.untimed():
        data = _dln_data(config, target, seed)
    x, y = data["x"], data["y"]
    max_steps, tol = int(config["max_steps"]), float(config["tol"])
    eta_max, info = max_stable_lr(
        x, y, alpha, max_steps=max_steps, tol=tol, bisections=int(config["bisections"]), check=ctx.check
    )
    grid = lr_grid(eta_max, config["grid_low"], tuple(config["grid_top"]), int(config["grid_n_top"]))
    runs = dln_gd(x, y, grid, alpha, max_steps=max_steps, tol=tol, check=ctx.check)
    with ctx.evaluating():
        w = runs.effective_weight()
        sharp = dln_sharpness(runs.u, runs.v, x, y).tolist()
        w_l1 = min_l1_interpolator(x, y)
        w_l2 = min_l2_interpolator(x, y)
        allw = torch.cat([w, w_l1.unsqueeze(0), w_l2.unsqueeze(0)])
        pred_t = torch.nan_to_num(allw @ data["xt"].T, nan=math.inf)
        pred_v = torch.nan_to_num(allw @ data["xv"].T, nan=math.inf)
        test_mse = ((pred_t - data["yt"]) ** 2).mean(1).tolist()
        val_mse = ((pred_v - data["yv"]) ** 2).mean(1).tolist()
        i_min, i_top = _endpoints(runs.status)
        k_l1 = len(grid)
        counts = {s: runs.status.count(s) for s in RUN_CODES}
        for i, lr in enumerate(grid):
            ok = runs.status[i] != "diverged"
            s = sharp[i] if ok else math.nan
            rec: dict[str, Any] = {
                "lr": lr,
                "lr_frac": lr / eta_max,
                "run_code": RUN_CODES[runs.status[i]],
                "converged": float(runs.status[i] == "converged"),
                "gd_steps": runs.steps[i],
                "loss": runs.loss[i],
                "norm_l1": float(w[i].abs().sum()) if ok else math.nan,
                "norm_l2": float((runs.u[i] ** 2 + runs.v[i] ** 2).sum()) if ok else math.nan,
                "sharpness": s,
                "lr_x_sharpness": lr * s,
                "val_mse": val_mse[i] if ok else math.nan,
                "test_mse": test_mse[i] if ok else math.nan,
            }
            if ok and runs.status[i] == "converged":
                for name, j in (("min", i_min), ("top", i_top), ("l1", k_l1)):
                    m, se = _gaps(pred_t, i, j, data["yt"])
                    rec[f"gap_{name}"], rec[f"gap_{name}_se"] = m, se
            ctx.log(i, check_finite=False, grid=1.0, **rec)
        ctx.log(
            len(grid),
            check_finite=False,
            summary=1.0,
            eta_max=eta_max,
            s0=info["s0"],
            eta0=info["eta0"],
            probe_runs=info["gd_runs"],
            alpha=alpha,
            l1_test_mse=test_mse[k_l1],
            l1_val_mse=val_mse[k_l1],
            l1_norm_l1=float(w_l1.abs().sum()),
            l2_test_mse=test_mse[k_l1 + 1],
            n_converged=counts["converged"],
            n_not_converged=counts["not converged"],
            n_diverged=counts["diverged"],
        )


# --------------------------------------------------------------------------------------------------- MLP
def _mlp_loss(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return 0.5 * ((out - target) ** 2).sum(1).mean()


def _run_mlp(ctx: Any, seed: int, config: Mapping[str, Any]) -> None:
    from optarium.optim.diagnostics import sharpness
    from optarium.optim.implicit_bias import bracket_max_lr, lr_grid, mlp_gd, mlp_module
    from optarium.problems.datasets import load_digits

    with ctx.untimed():
        xall, yall = load_digits()
        perm = torch.randperm(len(yall), generator=torch.Generator().manual_seed(derive_seed(seed, "digits")))
        n_tr = int(config["mlp_train"])
        rest = perm[n_tr:]
        half = len(rest) // 2
        idx = {"train": perm[:n_tr], "val": rest[:half], "test": rest[half:]}
        onehot = torch.nn.functional.one_hot(yall, 10).to(torch.float32)
        x, y = xall[idx["train"]], onehot[idx["train"]]
        x64, y64 = x.double(), y.double()
    hidden, init_seed = int(config["mlp_hidden"]), derive_seed(seed, "mlp-init")
    tol = float(config["mlp_tol"])
    probe0 = mlp_gd(x, y, [1e-3], hidden=hidden, seed=init_seed, max_steps=1, tol=tol)
    with ctx.evaluating():
        net0 = mlp_module(*(p.double() for p in probe0.init))
        s0 = sharpness(net0, _mlp_loss, (x64, y64), tol=float(config["mlp_lanczos_tol"]))

    def passes(cands: list[float]) -> list[bool]:
        steps = int(config["mlp_probe_steps"])
        r = mlp_gd(x, y, cands, hidden=hidden, seed=init_seed, max_steps=steps, tol=tol, check=ctx.check)
        pairs = zip(r.status, r.loss, r.initial_loss, strict=True)
        return [st != "diverged" and (st == "converged" or lf < l0) for st, lf, l0 in pairs]

    bis = int(config["mlp_bisections"])
    eta_max, info = bracket_max_lr(passes, 2.0 / s0, bisections=bis, max_doublings=8)
    grid = lr_grid(eta_max, config["grid_low"], tuple(config["grid_top"]), int(config["mlp_grid_n_top"]))
    runs = mlp_gd(x, y, grid, hidden=hidden, seed=init_seed, max_steps=int(config["mlp_max_steps"]), tol=tol,
                  check=ctx.check)  # fmt: skip
    with ctx.evaluating():
        theta0 = torch.cat([p.double().flatten() for p in runs.init])
        xs = {k: xall[v].double() for k, v in idx.items()}
        ys = {k: onehot[v].double() for k, v in idx.items()}
        labels = {k: yall[v] for k, v in idx.items()}
        counts = {s: runs.status.count(s) for s in RUN_CODES}
        i_min, i_top = _endpoints(runs.status)
        preds: dict[int, torch.Tensor] = {}
        for i, lr in enumerate(grid):
            ok = runs.status[i] != "diverged"
            rec: dict[str, Any] = {
                "lr": lr,
                "lr_frac": lr / eta_max,
                "run_code": RUN_CODES[runs.status[i]],
                "converged": float(runs.status[i] == "converged"),
                "gd_steps": runs.steps[i],
                "loss": runs.loss[i],
            }
            if ok:
                net = mlp_module(*(p.double() for p in runs.row(i)))
                theta = torch.cat([p.detach().flatten() for p in net.parameters()])
                theta_rows = torch.cat([p.double().flatten() for p in runs.row(i)])
                s = sharpness(net, _mlp_loss, (x64, y64), tol=float(config["mlp_lanczos_tol"]))
                with torch.no_grad():
                    out = {k: net(v) for k, v in xs.items()}
                preds[i] = out["test"]
                rec.update(
                    norm_theta=float((theta**2).sum()),
                    norm_dist=float(((theta_rows - theta0) ** 2).sum()),
                    sharpness=s,
                    lr_x_sharpness=lr * s,
                    train_loss64=float(_mlp_loss(out["train"], ys["train"])),
                    val_mse=float(((out["val"] - ys["val"]) ** 2).sum(1).mean()),
                    test_mse=float(((out["test"] - ys["test"]) ** 2).sum(1).mean()),
                    val_error=float((out["val"].argmax(1) != labels["val"]).double().mean()),
                    test_error=float((out["test"].argmax(1) != labels["test"]).double().mean()),
                )
            ctx.log(i, check_finite=False, grid=1.0, **rec)
        ctx.log(
            len(grid),
            check_finite=False,
            summary=1.0,
            eta_max=eta_max,
            s0=s0,
            eta0=info["eta0"],
            probe_runs=info["gd_runs"],
            n_converged=counts["converged"],
            n_not_converged=counts["not converged"],
            n_diverged=counts["diverged"],
            i_min=math.nan if i_min is None else i_min,
            i_top=math.nan if i_top is None else i_top,
        )


def run(ctx: Any, method: str, seed: int, config: Mapping[str, Any]) -> None:
    """One unit: a DLN target (``dln-T1``, ``dln-T2``, ``dln-T2-a<α>``) or the digits MLP, at one seed.

    A method's seeds beyond ``config["method_seeds"][method]`` log nothing (T1 has 3 seeds at quick, the MLP
    3 at full, while the other units run 5).
    """
    if seed >= int(config.get("method_seeds", {}).get(method, config["seeds"])):
        return
    if method == "mlp-digits":
        _run_mlp(ctx, seed, config)
    else:
        _run_dln(ctx, method, seed, config)


# ----------------------------------------------------------------------------------------------- verdict
def _grid_rows(records: Sequence[Mapping[str, Any]], method: str) -> dict[int, list[Mapping[str, Any]]]:
    out: dict[int, list[Mapping[str, Any]]] = {}
    for r in select(records, method, has="grid"):
        out.setdefault(int(r["seed"]), []).append(r)
    return {s: sorted(rows, key=lambda r: float(r["lr"])) for s, rows in sorted(out.items())}


def _summary(records: Sequence[Mapping[str, Any]], method: str) -> dict[int, Mapping[str, Any]]:
    return {int(r["seed"]): r for r in select(records, method, has="summary")}


def _conv(rows: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [r for r in rows if float(r["converged"]) == 1.0]


def _dial(per_seed: Mapping[int, list[Mapping[str, Any]]], norm: str) -> tuple[str, dict[str, Any]]:
    """Criterion (i) over seeds with the norm ``norm``: (outcome, figures)."""
    ok = bad = 0
    s_ratios, n_ratios = [], []
    for rows in per_seed.values():
        conv = _conv(rows)
        if len(conv) < 2:
            continue
        lo, hi = conv[0], conv[-1]
        sr = float(hi["sharpness"]) / float(lo["sharpness"])
        nr = float(hi[norm]) / float(lo[norm])
        s_ratios.append(sr)
        n_ratios.append(nr)
        ok += sr <= DIAL_S and nr >= DIAL_NORM
        bad += nr <= 1.0 or sr >= 1.0
    n = len(per_seed)
    if n and ok == n:
        outcome = "reproduced"
    elif bad > n / 2:
        outcome = "not reproduced"
    else:
        outcome = "inconclusive"
    figs = {"n_seeds": n, "seeds_ok": ok, "seeds_against": bad, "S_ratio": s_ratios}
    figs[f"{norm}_ratio"] = n_ratios
    return outcome, figs


def _interior(per_seed: Mapping[int, list[Mapping[str, Any]]], k: float = 2.0) -> tuple[str, dict[str, Any]]:
    """Criterion (iii): (outcome, figures)."""
    wins = endpoint_min = 0
    per: dict[str, Any] = {}
    for seed, rows in per_seed.items():
        conv = _conv(rows)
        interior = conv[1:-1]
        best_test = min(range(len(conv)), key=lambda i: float(conv[i]["test_mse"])) if conv else None
        at_end = best_test is not None and best_test in (0, len(conv) - 1)
        endpoint_min += bool(at_end)
        if not interior:
            per[f"seed{seed}"] = {"interior": False, "test_min_at_endpoint": at_end}
            continue
        best = min(interior, key=lambda r: float(r["val_mse"]))
        gap = {c: float(best.get(f"gap_{c}", math.nan)) for c in ("min", "top", "l1")}
        gap_se = {c: float(best.get(f"gap_{c}_se", math.nan)) for c in ("min", "top", "l1")}
        beats = {c: gap[c] > k * gap_se[c] for c in gap}
        win = all(beats.values())
        wins += win
        per[f"seed{seed}"] = {
            "best_lr_frac": float(best["lr_frac"]),
            "best_test_mse": float(best["test_mse"]),
            "min_eta_test_mse": float(conv[0]["test_mse"]),
            "top_eta_test_mse": float(conv[-1]["test_mse"]),
            **{f"gap_{c}": gap[c] for c in gap},
            **{f"gap_{c}_se": gap_se[c] for c in gap},
            "beats_all": win,
            "test_min_at_endpoint": at_end,
        }
    n = len(per_seed)
    need = math.ceil(0.8 * n)
    if n and wins >= need:
        outcome = "reproduced"
    elif n and endpoint_min >= need:
        outcome = "not reproduced"
    else:
        outcome = "inconclusive"
    return outcome, {"n_seeds": n, "seeds_interior_wins": wins, "seeds_test_min_at_endpoint": endpoint_min,
                     "per_seed": per}  # fmt: skip


def _spearman(rows: Sequence[Mapping[str, Any]], key: str) -> float:
    from scipy.stats import spearmanr

    conv = [r for r in _conv(rows) if math.isfinite(float(r[key]))]
    if len(conv) < 3:
        return math.nan
    res = spearmanr([float(r["lr"]) for r in conv], [float(r[key]) for r in conv])
    return float(res.statistic)


def _reported(per_seed: Mapping[int, list[Mapping[str, Any]]], summ: Mapping[int, Mapping[str, Any]],
              norm: str) -> dict[str, Any]:  # fmt: skip
    """Figures reported beside the verdict: Spearman correlations, η_c, run counts, reference MSEs."""
    out: dict[str, Any] = {}
    out["spearman_lr_S"] = [_spearman(rows, "sharpness") for rows in per_seed.values()]
    out[f"spearman_lr_{norm}"] = [_spearman(rows, norm) for rows in per_seed.values()]
    eta_c = []
    for rows in per_seed.values():
        hit = [float(r["lr_frac"]) for r in _conv(rows) if float(r["lr_x_sharpness"]) >= 1.8]
        eta_c.append(hit[0] if hit else math.nan)
    out["eta_c_over_eta_max"] = eta_c
    # every non-diverged run, converged or not (reported, not decided on: the rule uses converged runs only)
    err = "test_error" if norm == "norm_theta" else "test_mse"
    for tag, key in (("S", "sharpness"), (norm, norm), ("norm_dist", "norm_dist")):
        ratios = []
        for rows in per_seed.values():
            ok = [r for r in rows if math.isfinite(float(r.get(key, math.nan)))]
            ratios.append(float(ok[-1][key]) / float(ok[0][key]) if len(ok) >= 2 else math.nan)
        if any(math.isfinite(v) for v in ratios):
            out[f"all_runs_{tag}_ratio"] = ratios
    best = []
    for rows in per_seed.values():
        ok = [r for r in rows if math.isfinite(float(r.get(err, math.nan)))]
        best.append(float(min(ok, key=lambda r: float(r[err]))["lr_frac"]) if ok else math.nan)
    out[f"all_runs_best_{err}_lr_frac"] = best
    for key in ("n_converged", "n_not_converged", "n_diverged"):
        out[key] = int(sum(float(s[key]) for s in summ.values()))
    out["eta_max"] = [float(s["eta_max"]) for s in summ.values()]
    for key in ("l1_test_mse", "l2_test_mse"):
        if any(key in s for s in summ.values()):
            out[key] = [float(s[key]) for s in summ.values()]
    return out


def _stability(per_seed: Mapping[int, list[Mapping[str, Any]]]) -> tuple[int, int, float]:
    """(converged runs, violations of η S <= 2 x slack, the largest η S)."""
    vals = [float(r["lr_x_sharpness"]) for rows in per_seed.values() for r in _conv(rows)]
    vals = [v for v in vals if math.isfinite(v)]
    return len(vals), sum(v > 2 * STABILITY_SLACK for v in vals), max(vals, default=math.nan)


def decide(records: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> Verdict:
    """The rule of :data:`RULE`."""
    methods = list(config["methods"])
    dln = [m for m in methods if m.startswith("dln-")]
    figures: dict[str, Any] = {}
    reasons: list[str] = []
    parts: list[str] = []
    rows = {m: _grid_rows(records, m) for m in methods}
    for m in methods:
        norm = "norm_l1" if m.startswith("dln-") else "norm_theta"
        figures[f"{m}:reported"] = _reported(rows[m], _summary(records, m), norm)

    # (i) the dial: quick pools the DLN targets (no alpha in the name), full decides per alpha
    groups: dict[str, dict[tuple[str, int], list[Mapping[str, Any]]]] = {}
    for m in dln:
        key = "dln" if len(m.split("-")) == 2 else m
        for s, r in rows[m].items():
            groups.setdefault(key, {})[(m, s)] = r
    dial_outcomes = []
    for key, per in groups.items():
        o, f = _dial({i: r for i, r in enumerate(per.values())}, "norm_l1")
        f["norm_l2_ratio"] = [float(_conv(r)[-1]["norm_l2"]) / float(_conv(r)[0]["norm_l2"])
                              for r in per.values() if len(_conv(r)) >= 2]  # fmt: skip
        figures[f"dial:{key}"] = {"outcome": o, **f}
        dial_outcomes.append(o)
        reasons.append(f"dial {key}: {o} ({f['seeds_ok']}/{f['n_seeds']} seeds S<=0.8x and ||w||1>=1.05x)")
    if "mlp-digits" in methods:
        o_t, f_t = _dial(rows["mlp-digits"], "norm_theta")
        o_d, f_d = _dial(rows["mlp-digits"], "norm_dist")
        if "reproduced" in (o_t, o_d):
            o = "reproduced"
        elif o_t == o_d == "not reproduced":
            o = "not reproduced"
        else:
            o = "inconclusive"
        figures["dial:mlp"] = {"outcome": o, "norm_theta": {"outcome": o_t, **f_t},
                               "norm_dist": {"outcome": o_d, **f_d}}  # fmt: skip
        dial_outcomes.append(o)
        reasons.append(f"dial mlp: {o} (||θ||²: {o_t}, ||θ-θ0||²: {o_d})")
    dial = combine_outcomes(dial_outcomes) if dial_outcomes else "inconclusive"
    figures["part_i"] = dial
    parts.append(dial)

    # (ii) stability check over every converged run
    n_conv = n_bad = 0
    worst = -math.inf
    for m in methods:
        c, b, w = _stability(rows[m])
        n_conv, n_bad = n_conv + c, n_bad + b
        if math.isfinite(w):
            worst = max(worst, w)
        figures[f"{m}:max_lr_x_sharpness"] = w
    stab = "reproduced" if n_conv and not n_bad else "inconclusive"
    figures.update(part_ii=stab, stability_violations=n_bad, stability_runs=n_conv)
    parts.append(stab)
    reasons.append(f"stability: {n_bad} of {n_conv} converged runs with ηS > 2.1 (max {worst:.4f})")

    # (iii) interior optimum: T2 units decide, T1 reported
    for m in dln:
        o, f = _interior(rows[m])
        figures[f"interior:{m}"] = {"outcome": o, **f}
        if _parse(m, config)[0] == "T2":
            parts.append(o)
            figures[f"part_iii:{m}"] = o
            wins, ends = f["seeds_interior_wins"], f["seeds_test_min_at_endpoint"]
            reasons.append(
                f"interior {m}: {o} ({wins}/{f['n_seeds']} seeds beat all three by > 2 SE; test minimum at "
                f"an endpoint in {ends})"
            )
        else:
            reasons.append(f"interior {m} (sparse truth, reported only; expected to fail): {o}")

    def rule(outs: Sequence[str]) -> str:
        dial_o, stab_o, interior_o = outs[0], outs[1], outs[2:]
        if dial_o == "not reproduced" or "not reproduced" in interior_o:
            return "not reproduced"
        if (
            dial_o == "reproduced"
            and stab_o == "reproduced"
            and interior_o
            and all(o == "reproduced" for o in interior_o)
        ):
            return "reproduced"
        return "inconclusive"

    outcome = combine_outcomes(parts, rule=rule)
    return Verdict(outcome, _flatten(figures), "; ".join(reasons) + f" -> {outcome}")


def _flatten(obj: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested figures as flat ``a:b:c`` keys with scalar values (lists give ``key:0``, ``key:1``, ...), as
    recorded verdict files require."""
    out: dict[str, Any] = {}
    for k, v in obj.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(_flatten(v, f"{key}:"))
        elif isinstance(v, (list, tuple)):
            out.update(_flatten({str(i): x for i, x in enumerate(v)}, f"{key}:"))
        else:
            out[key] = v
    return out


# ----------------------------------------------------------------------------------------------- figures
def plot(records: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> dict[str, Any]:
    """Per unit type: norm, sharpness (with the stability limit 2/η) and test error against η; and the
    paired interior-optimum gaps of (iii)."""
    from matplotlib.figure import Figure

    methods = list(config["methods"])
    dial = Figure(figsize=(12.0, 3.4 * len(methods)))
    axes = dial.subplots(len(methods), 3, squeeze=False)
    colors = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple"]
    for row, m in enumerate(methods):
        mlp = m == "mlp-digits"
        norm, err = ("norm_theta", "test_error") if mlp else ("norm_l1", "test_mse")
        per = _grid_rows(records, m)
        ax_n, ax_s, ax_e = axes[row]
        lr_all: list[float] = []
        for c, (seed, rows) in enumerate(per.items()):
            col = colors[c % len(colors)]
            for ax, key in ((ax_n, norm), (ax_s, "sharpness"), (ax_e, err)):
                pts = [(float(r["lr"]), float(r.get(key, math.nan))) for r in rows]
                ax.plot([p[0] for p in pts], [p[1] for p in pts], "-", color=col, alpha=0.5, lw=1)
                conv = [p for p, r in zip(pts, rows, strict=True) if float(r["converged"]) == 1]
                other = [p for p, r in zip(pts, rows, strict=True) if float(r["converged"]) != 1]
                ax.plot([p[0] for p in conv], [p[1] for p in conv], "o", color=col, ms=3,
                        label=f"seed {seed}" if ax is ax_n else None)  # fmt: skip
                if other:
                    ax.plot([p[0] for p in other], [p[1] for p in other], "x", color="black", ms=6,
                            label="not converged / diverged" if ax is ax_n and c == 0 else None)  # fmt: skip
            lr_all += [float(r["lr"]) for r in rows]
        if lr_all:
            lo, hi = min(lr_all), max(lr_all)
            xs = [lo * (hi / lo) ** (i / 99) for i in range(100)]
            ax_s.plot(xs, [2 / v for v in xs], "k--", lw=1, label="stability limit 2/η")
            s_vals = [float(r["sharpness"]) for rows in per.values() for r in rows
                      if math.isfinite(float(r.get("sharpness", math.nan)))]  # fmt: skip
            if s_vals:
                ax_s.set_ylim(0, 1.3 * max(s_vals))
        for ax, lab in ((ax_n, "‖θ‖₂²" if mlp else "‖w‖₁"), (ax_s, "sharpness S"),
                        (ax_e, "test error" if mlp else "test MSE")):  # fmt: skip
            ax.set_xscale("log")
            ax.set_xlabel("step size η")
            ax.set_ylabel(lab)
            ax.grid(alpha=0.3, which="both")
        ax_n.set_title(f"{m}: norm")
        ax_s.set_title(f"{m}: sharpness")
        ax_e.set_title(f"{m}: generalisation")
        ax_n.legend(fontsize=7.5)
        ax_s.legend(fontsize=7.5)
        if not mlp:
            summ = _summary(records, m)
            l1 = [float(s["l1_test_mse"]) for s in summ.values() if "l1_test_mse" in s]
            for v in l1:
                ax_e.axhline(v, color="gray", ls=":", lw=0.8)
    dial.tight_layout()
    figs: dict[str, Any] = {"norm_sharpness_vs_lr": dial}

    dln = [m for m in methods if m.startswith("dln-")]
    if dln:
        gaps, gax = panel_grid(len(dln), panel=(5.0, 3.6))
        for ax, m in zip(gax, dln, strict=True):
            _, f = _interior(_grid_rows(records, m))
            names = [("min", "vs smallest η"), ("top", "vs largest η"), ("l1", "vs min-ℓ1")]
            for j, (c, lab) in enumerate(names):
                xs_, ys_, es_ = [], [], []
                for i, (_, d) in enumerate(sorted(f["per_seed"].items())):
                    if f"gap_{c}" in d:
                        xs_.append(i + 0.2 * (j - 1))
                        ys_.append(d[f"gap_{c}"])
                        es_.append(2 * d[f"gap_{c}_se"])
                ax.errorbar(xs_, ys_, yerr=es_, fmt="o", capsize=3, label=lab, color=colors[j])
            ax.axhline(0.0, color="black", lw=0.8)
            ax.set_yscale("symlog", linthresh=1e-2)
            ax.set_xlabel("seed")
            ax.set_ylabel("test MSE gap (comparator − best interior), ±2 SE")
            ax.set_title(f"{m}: (iii) {f['seeds_interior_wins']}/{f['n_seeds']} seeds win")
            ax.legend(fontsize=7)
            ax.grid(alpha=0.3)
        figs["interior_gaps"] = gaps
    return figs


EXPERIMENT = register(
    Experiment(
        slug="norm-sharpness",
        claim=CLAIM,
        rule=RULE,
        methods=METHODS,
        baselines=(),
        configs=CONFIGS,
        run=run,
        decide=decide,
        plot=plot,
        scaled_down=(
            "diagonal linear networks (d = 100, n = 40) with exact Hessians and a width-256 tanh MLP on "
            "500 digits replace the paper's networks and data sets; the DLN counter-example, grid, "
            "tolerances and targets are the spec's reconstruction; the MLP's η_max is probed on a "
            "1000-step horizon"
        ),
    )
)
