"""ReWA: is ReWA sparser than l1 regularisation at the same test error?

Paper: Xu, Yang, Xu, Teng, "Theoretical Analysis of Sparse Optimization with Reparameterization, Weight
Decay, and Adaptive Learning Rate", ICML 2026, arXiv:2605.25134. Claim: on CIFAR-10 and ImageNet ResNets,
ReWA gives substantially sparser networks than l1 regularisation at the same test accuracy.

Scaled down (no CIFAR-10/ImageNet here): the repository's synthetic sparse linear regression, shrunk as in the
spec (d = 2000, n_train = 400, w* = e_1 or 5-sparse, noise sd 1, one data draw, batch 25, cosine LR to 0),
and, at full scale only, an MLP 64-256-256-10 and a small CNN on scikit-learn's bundled 8x8 digits (80/20
split). The linear test error is the exact population MSE ``||w - w*||^2 + 1`` (features are N(0, I)), not a
2000-point test sample: same expectation, no test noise.

Methods (every method gets the same grid size: 5 penalties x 3 learning rates on the linear problem, 5
penalties x 1 learning rate on the networks; seeds share data, initialisation and batch order, so they pair):

- ``rewa``: ReWA-SGD (K = 9, M = 2, eps = 0, momentum 0.9), kappa in logspace(-2, 0, 5), lr in
  {0.01, 0.03, 0.1}; on networks ReWA-AdamW, lr 1e-3, biases in a plain AdamW group (``exclude="1d"``).
- ``l1``: SGD + lambda ||w||_1 (subgradient, momentum 0.9), lambda in logspace(-2, 0, 5), lr in
  {0.001, 0.003, 0.01}; on networks AdamW (decay 0) + lambda ||W||_1 on weight matrices and kernels.
- ``lasso``: the proximal reference: Lasso solved to convergence by FISTA on the full training set, alpha
  chosen by 5-fold cross-validation over logspace(-2, 0, 13) (sklearn's LassoCV, rebuilt in torch so that no
  extra dependency is needed; its objective has the same scale as the 1/2 MSE loss). Linear problem only.
- ``dense``: plain AdamW on the networks (the accuracy reference); nothing on the linear problem.

Scales: ``smoke`` (seconds: a tiny linear problem and a tiny MLP/CNN on synthetic 8x8 images); ``quick``
(the spec's Quick problem: 1-sparse linear, 3 seeds, 100 epochs; about 40 s on one core); ``full`` (1- and
5-sparse linear, plus MLP (100 epochs) and CNN (60 epochs) on digits, 3 seeds; needs scikit-learn for the
data). The network penalty grids are our guess (the spec asks to bracket < 50 % to > 95 % sparsity; they
were not checked on digits here because scikit-learn was not installed).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from optarium._core.seeding import derive_seed
from optarium.harness.experiment import Experiment, Verdict, register
from optarium.harness.stats import mean_sd, mean_se, paired_effect
from optarium.harness.verdicts import combine_outcomes, select
from optarium.sparse import lasso_cv as fista_lasso_cv
from optarium.sparse import lasso_path as fista_lasso  # the batched FISTA Lasso (kept under its old name)

__all__ = ["EXPERIMENT", "decide", "fista_lasso", "lasso_cv"]

CLAIM = (
    "ReWA yields substantially sparser models than l1 regularisation at the same test accuracy "
    "(CIFAR-10/ImageNet ResNets in the paper; here a sparse linear regression and digits MLP/CNN)."
)
RULE = (
    "Linear problems (spec rule, plus a paired check): for each method take seed-mean metrics per setting; "
    "its matched setting is the sparsest (fraction |w| <= 1e-4; ties to the lower MSE) among settings whose "
    "mean test MSE is <= 1.03 x LassoCV's. Reproduced if ReWA's matched MSE <= 1.05 x LassoCV's, its support "
    "F1 (threshold 1e-3) >= 0.9, and the paired per-seed sparsity gap ReWA - l1 at the matched settings has "
    "mean > 2 SE (SE = sd/sqrt(n), n seeds); not reproduced if ReWA has no matched setting, fails the MSE or "
    "F1 condition, or the gap mean < -2 SE; inconclusive if l1 has no matched setting or its matched setting "
    "is at the sparser edge of its grid (smallest lr or largest penalty); else inconclusive. Networks "
    "(full): for each method the "
    "most accurate setting with mean sparsity (|w| <= 1e-3) >= 90 %; reproduced if the paired accuracy gap "
    "ReWA - l1 there is >= 2 points and > 2 SE, not reproduced if it is < 0 by more than 2 SE or ReWA has no "
    "such setting while l1 has, inconclusive if l1 has none; the sparsity at matched accuracy (within 1 "
    "point of dense AdamW) is reported, not decided (the spec asks for both conditions; deviation: only "
    "the first decides). The claim is reproduced if every problem is, not reproduced if any is not, "
    "else inconclusive."
)

METHODS = ("rewa", "l1", "lasso", "dense")
LINEAR_KINDS = ("linear1", "linear5")
NET_KINDS = ("mlp", "cnn")
PROBLEM_CODES = {"linear1": 0, "linear5": 1, "mlp": 2, "cnn": 3}
CODE_PROBLEMS = {v: k for k, v in PROBLEM_CODES.items()}

_LIN_GRID = {
    "rewa": {"penalties": [0.01, 0.0316, 0.1, 0.316, 1.0], "lrs": [0.01, 0.03, 0.1]},
    # l1-SGD's sparsity grows as its lr shrinks: its grid reaches one step lower than the spec's
    # {1e-3, 3e-3, 1e-2} (same size), whose matched setting sat at the edge that would help the baseline.
    "l1": {"penalties": [0.01, 0.0316, 0.1, 0.316, 1.0], "lrs": [0.0003, 0.001, 0.003]},
}
# Five penalties each, spaced to bracket < 50 % to > 95 % sparsity as the spec asks. Calibrated from a first
# full run on digits with {0.1 .. 10} (ReWA: two dead points, 100 % sparse at 7 % accuracy) and
# {1e-5 .. 1e-3} (l1: the CNN never passed 59 % sparsity); both grids were moved, neither was enlarged.
_NET_GRID = {
    "rewa": {"penalties": [0.2, 0.35, 0.6, 1.0, 1.7], "lrs": [1e-3]},
    "l1": {"penalties": [2e-5, 1e-4, 5e-4, 2.5e-3, 1.25e-2], "lrs": [1e-3]},
    "dense": {"penalties": [0.0], "lrs": [1e-3]},
}


def _linear(kind: str, d: int, n: int, epochs: int) -> dict[str, Any]:
    return {"kind": kind, "d": d, "n": n, "epochs": epochs, "batch": 25, "grid": _LIN_GRID}


def _net(kind: str, data: str, epochs: int, **extra: Any) -> dict[str, Any]:
    return {"kind": kind, "data": data, "epochs": epochs, "batch": 64, "grid": _NET_GRID, **extra}


_SMOKE_LIN_GRID = {
    "rewa": {"penalties": [0.1, 1.0], "lrs": [0.03]},
    "l1": {"penalties": [0.1, 1.0], "lrs": [0.003]},
}
_SMOKE_NET_GRID = {
    "rewa": {"penalties": [0.3, 3.0], "lrs": [1e-3]},
    "l1": {"penalties": [1e-4, 1e-3], "lrs": [1e-3]},
    "dense": {"penalties": [0.0], "lrs": [1e-3]},
}

CONFIGS: dict[str, dict[str, Any]] = {
    "smoke": {
        "seeds": 2,
        "problems": [
            {**_linear("linear1", 200, 100, 3), "grid": _SMOKE_LIN_GRID},
            {**_net("mlp", "synthetic", 2, hidden=32), "grid": _SMOKE_NET_GRID},
            {**_net("cnn", "synthetic", 1, channels=4), "grid": _SMOKE_NET_GRID},
        ],
        "lasso_alphas": 5,
        "lasso_iters": 200,
    },
    "quick": {
        "seeds": 3,
        "methods": ["rewa", "l1", "lasso"],
        "problems": [_linear("linear1", 2000, 400, 100)],
        "lasso_alphas": 13,
        "lasso_iters": 1500,
    },
    "full": {
        "seeds": 3,
        "problems": [
            _linear("linear1", 2000, 400, 100),
            _linear("linear5", 2000, 400, 100),
            _net("mlp", "digits", 100, hidden=256),
            _net("cnn", "digits", 60, channels=16),
        ],
        "lasso_alphas": 13,
        "lasso_iters": 3000,
        "unit_timeout_s": 1800,
    },
}

DATA_SEED = 20260527
NOISE_SD = 1.0


# ---------------------------------------------------------------------------------------------- linear
@functools.lru_cache(maxsize=4)
def _linear_data(kind: str, d: int, n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(X, y, w*) of one fixed draw: X ~ N(0, I), w* = e_1 (linear1) or 1 on five coordinates (linear5)."""
    from optarium.problems.sparse_regression import sparse_linear_regression

    seed = derive_seed(DATA_SEED, kind, d, n)
    return sparse_linear_regression(n, d, 1 if kind == "linear1" else 5, seed, noise_sd=NOISE_SD)


def _linear_metrics(W: torch.Tensor, w_star: torch.Tensor) -> dict[str, torch.Tensor]:
    """Population MSE, sparsity at 1e-4 and support F1 at 1e-3 for each row of W."""
    from optarium.problems.sparse_regression import population_mse

    mse = population_mse(W, w_star, NOISE_SD)
    sparsity = (W.abs() <= 1e-4).double().mean(-1)
    pred = W.abs() > 1e-3
    true = w_star != 0
    tp = (pred & true).sum(-1).double()
    f1 = 2 * tp / (pred.sum(-1).double() + true.sum().double())
    return {"test_mse": mse, "sparsity": sparsity, "f1": f1}


@functools.lru_cache(maxsize=4)
def lasso_cv(
    kind: str, d: int, n: int, n_alphas: int, iters: int, folds: int = 5
) -> tuple[float, list[float]]:
    """LassoCV on the linear problem (:func:`optarium.sparse.lasso_cv`: FISTA, 5 interleaved folds, refit with
    ``2 * iters``): (chosen alpha, coefficients refit on all training data)."""
    X, y, _ = _linear_data(kind, d, n)
    alphas = torch.logspace(-2, 0, n_alphas, dtype=torch.float64)
    res = fista_lasso_cv(X, y, alphas, iters, folds=folds)
    return res.extras["alpha"], res.x.tolist()


def _run_linear(ctx: Any, method: str, seed: int, prob: Mapping[str, Any], config: Mapping[str, Any]) -> None:
    from optarium.optim.rewa import ReWA

    kind, d, n = prob["kind"], prob["d"], prob["n"]
    X, y, w_star = _linear_data(kind, d, n)
    code = PROBLEM_CODES[kind]
    if method == "lasso":
        alpha, coef = lasso_cv(kind, d, n, config["lasso_alphas"], config["lasso_iters"])
        with ctx.evaluating():
            m = _linear_metrics(torch.tensor(coef, dtype=torch.float64)[None], w_star)
            ctx.log(0, problem=code, setting=0, penalty=alpha, lr=0.0, **{k: v[0] for k, v in m.items()})
        return
    if method not in prob["grid"]:
        return
    grid = prob["grid"][method]
    settings = [(pen, lr) for pen in grid["penalties"] for lr in grid["lrs"]]
    g_init = torch.Generator().manual_seed(derive_seed(seed, "init", kind))
    w0 = (torch.rand(d, generator=g_init, dtype=torch.float64) * 2 - 1) / math.sqrt(d)
    ws = [w0.clone().requires_grad_(True) for _ in settings]
    groups = [{"params": [w], "lr": lr} for w, (_, lr) in zip(ws, settings, strict=True)]
    if method == "rewa":  # one optimizer per setting, so a diverging setting skips only its own steps
        opts: list[torch.optim.Optimizer] = [
            ReWA([g], lr=lr, order=9.0, adapt_exp=2.0, eps=0.0, weight_decay=pen, momentum=0.9, exclude=None,
                 nonfinite="skip")
            for g, (pen, lr) in zip(groups, settings, strict=True)
        ]  # fmt: skip
    else:
        opts = [torch.optim.SGD(groups, lr=1.0, momentum=0.9)]
    pens = torch.tensor([pen for pen, _ in settings], dtype=torch.float64)
    batch = prob["batch"]
    per_epoch = n // batch
    total = prob["epochs"] * per_epoch
    cosine = lambda t: 0.5 * (1 + math.cos(math.pi * min(t, total) / total))  # noqa: E731
    scheds = [torch.optim.lr_scheduler.LambdaLR(o, cosine) for o in opts]
    g_batch = torch.Generator().manual_seed(derive_seed(seed, "batches", kind))
    for _ in range(prob["epochs"]):
        perm = torch.randperm(n, generator=g_batch)[: per_epoch * batch].view(per_epoch, batch)
        for idx in perm:
            W = torch.stack(ws)
            loss = 0.5 * ((X[idx] @ W.T - y[idx, None]) ** 2).mean(0).sum()
            if method == "l1":
                loss = loss + (pens * W.abs().sum(1)).sum()
            for w in ws:
                w.grad = None
            loss.backward()
            for o, sch in zip(opts, scheds, strict=True):
                o.step()
                sch.step()
        ctx.check()
    with ctx.evaluating():
        W = torch.stack([w.detach() for w in ws])
        finite = torch.isfinite(W).all(1)
        W = torch.where(finite[:, None], W, torch.zeros_like(W))
        m = _linear_metrics(W, w_star)
        m["test_mse"] = torch.where(finite, m["test_mse"], torch.full_like(m["test_mse"], 1e6))
        for i, (pen, lr) in enumerate(settings):
            ctx.log(total, problem=code, setting=i, penalty=pen, lr=lr, **{k: v[i] for k, v in m.items()})


# ---------------------------------------------------------------------------------------------- networks
def _digits() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    from optarium.problems.datasets import load_digits, train_test_split

    return train_test_split(*load_digits(), test_fraction=0.2, seed=DATA_SEED)


def _synthetic_digits() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """A stand-in with digits' shapes for smoke runs: 10 random 8x8 prototypes plus noise, in [0, 1]."""
    gen = torch.Generator().manual_seed(DATA_SEED)
    protos = torch.rand(10, 64, generator=gen)
    y = torch.arange(300) % 10
    X = (protos[y] + 0.3 * torch.randn(300, 64, generator=gen)).clamp(0, 1)
    return X[:240], y[:240], X[240:], y[240:]


def _build_net(prob: Mapping[str, Any], seed: int) -> torch.nn.Module:
    torch.manual_seed(derive_seed(seed, "init", prob["kind"]))
    if prob["kind"] == "mlp":
        h = prob["hidden"]
        return torch.nn.Sequential(
            torch.nn.Linear(64, h),
            torch.nn.ReLU(),
            torch.nn.Linear(h, h),
            torch.nn.ReLU(),
            torch.nn.Linear(h, 10),
        )
    c = prob["channels"]
    return torch.nn.Sequential(
        torch.nn.Unflatten(1, (1, 8, 8)),
        torch.nn.Conv2d(1, c, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.Conv2d(c, 2 * c, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Flatten(),
        torch.nn.Linear(2 * c * 16, 10),
    )


@torch.no_grad()
def _accuracy(model: torch.nn.Module, X: torch.Tensor, y: torch.Tensor) -> float:
    return float((model(X).argmax(1) == y).float().mean())


@torch.no_grad()
def _pruned_accuracy(model: torch.nn.Module, X: torch.Tensor, y: torch.Tensor, frac: float) -> float:
    """Accuracy after zeroing the smallest-magnitude fraction ``frac`` of weight matrices/kernels (global)."""
    weights = [p for p in model.parameters() if p.ndim >= 2]
    flat = torch.cat([p.abs().flatten() for p in weights])
    k = int(frac * flat.numel())
    if k == 0:
        return _accuracy(model, X, y)
    thr = flat.kthvalue(k).values
    saved = [p.clone() for p in weights]
    for p in weights:
        p.mul_(p.abs() > thr)
    acc = _accuracy(model, X, y)
    for p, s in zip(weights, saved, strict=True):
        p.copy_(s)
    return acc


def _run_net(ctx: Any, method: str, seed: int, prob: Mapping[str, Any]) -> None:
    from optarium.optim.rewa import ReWA

    if method not in prob["grid"]:
        return
    Xtr, ytr, Xte, yte = _digits() if prob["data"] == "digits" else _synthetic_digits()
    code = PROBLEM_CODES[prob["kind"]]
    grid = prob["grid"][method]
    settings = [(pen, lr) for pen in grid["penalties"] for lr in grid["lrs"]]
    n, batch = len(ytr), prob["batch"]
    per_epoch = math.ceil(n / batch)
    total = prob["epochs"] * per_epoch
    for i, (pen, lr) in enumerate(settings):
        model = _build_net(prob, seed)
        weights = [p for p in model.parameters() if p.ndim >= 2]
        others = [p for p in model.parameters() if p.ndim < 2]
        if method == "rewa":
            opt: torch.optim.Optimizer = ReWA(
                model.parameters(), lr=lr, weight_decay=pen, base="adamw", order=9.0, adapt_exp=2.0, eps=0.0
            )
        else:
            opt = torch.optim.AdamW([{"params": weights}, {"params": others}], lr=lr, weight_decay=0.0)
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda t: 0.5 * (1 + math.cos(math.pi * min(t, total) / total))
        )
        g_batch = torch.Generator().manual_seed(derive_seed(seed, "batches", prob["kind"]))
        for _ in range(prob["epochs"]):
            perm = torch.randperm(n, generator=g_batch)
            for b in range(per_epoch):
                idx = perm[b * batch : (b + 1) * batch]
                loss = torch.nn.functional.cross_entropy(model(Xtr[idx]), ytr[idx])
                if method == "l1":
                    loss = loss + pen * sum(p.abs().sum() for p in weights)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                sched.step()
            ctx.check()
        with ctx.evaluating():
            flat = torch.cat([p.detach().abs().flatten() for p in weights])
            ctx.log(
                total,
                problem=code,
                setting=i,
                penalty=pen,
                lr=lr,
                test_acc=_accuracy(model, Xte, yte),
                sparsity=float((flat <= 1e-3).float().mean()),
                pruned90_acc=_pruned_accuracy(model, Xte, yte, 0.9),
                pruned95_acc=_pruned_accuracy(model, Xte, yte, 0.95),
            )


def run(ctx: Any, method: str, seed: int, config: Mapping[str, Any]) -> None:
    """Train every setting of ``method`` on every problem of the scale for one seed; log one record each."""
    for prob in config["problems"]:
        if prob["kind"] in LINEAR_KINDS:
            _run_linear(ctx, method, seed, prob, config)
        elif method != "lasso":
            _run_net(ctx, method, seed, prob)


# ---------------------------------------------------------------------------------------------- verdict
def _table(records: Sequence[Mapping[str, Any]], method: str, code: int) -> dict[int, dict[int, Mapping]]:
    """setting -> seed -> record (done units only)."""
    out: dict[int, dict[int, Mapping[str, Any]]] = {}
    for r in select(records, method, problem=code):
        out.setdefault(int(r["setting"]), {})[int(r["seed"])] = r
    return out


def _means(table: Mapping[int, Mapping[int, Mapping[str, Any]]], key: str) -> dict[int, float]:
    return {s: mean_sd([float(r[key]) for r in by_seed.values()])[0] for s, by_seed in table.items()}


def _matched_linear(table: Mapping[int, Mapping[int, Mapping]], limit: float) -> int | None:
    mse, sp = _means(table, "test_mse"), _means(table, "sparsity")
    ok = [s for s in table if mse[s] <= limit]
    if not ok:
        return None
    return min(ok, key=lambda s: (-sp[s], mse[s]))


def _on_grid_edge(table: Mapping[int, Mapping[int, Mapping[str, Any]]], setting: int) -> bool:
    """Whether ``setting`` has the grid's smallest lr or largest penalty (the sparser direction)."""
    rows = [next(iter(by.values())) for by in table.values()]
    chosen = next(iter(table[setting].values()))
    lr, pen = float(chosen["lr"]), float(chosen["penalty"])
    lrs, pens = {float(r["lr"]) for r in rows}, {float(r["penalty"]) for r in rows}
    return (len(lrs) > 1 and lr == min(lrs)) or (len(pens) > 1 and pen == max(pens))


def _decide_linear(records: Sequence[Mapping[str, Any]], kind: str) -> tuple[str, dict[str, Any], str]:
    code = PROBLEM_CODES[kind]
    lasso = _table(records, "lasso", code)
    if not lasso:
        return "inconclusive", {}, f"{kind}: no Lasso record"
    lasso_mse = mean_sd([float(r["test_mse"]) for by in lasso.values() for r in by.values()])[0]
    rewa, l1 = _table(records, "rewa", code), _table(records, "l1", code)
    s_rewa, s_l1 = _matched_linear(rewa, 1.03 * lasso_mse), _matched_linear(l1, 1.03 * lasso_mse)
    fig: dict[str, Any] = {f"{kind}_lasso_mse": lasso_mse}
    for name, tab, s in (("rewa", rewa, s_rewa), ("l1", l1, s_l1)):
        if s is None:
            fig[f"{kind}_{name}_matched"] = "none"
            continue
        by = tab[s]
        fig[f"{kind}_{name}_penalty"] = float(next(iter(by.values()))["penalty"])
        fig[f"{kind}_{name}_lr"] = float(next(iter(by.values()))["lr"])
        for key in ("test_mse", "sparsity", "f1"):
            fig[f"{kind}_{name}_{key}"] = mean_sd([float(r[key]) for r in by.values()])[0]
    if s_rewa is None:
        return "not reproduced", fig, f"{kind}: no ReWA setting within 1.03 x LassoCV's MSE"
    if fig[f"{kind}_rewa_test_mse"] > 1.05 * lasso_mse or fig[f"{kind}_rewa_f1"] < 0.9:
        return "not reproduced", fig, f"{kind}: ReWA's matched setting fails the MSE or F1 condition"
    if s_l1 is None:  # never "reproduced" because the baseline's grid missed
        return (
            "inconclusive",
            fig,
            f"{kind}: l1-SGD has no setting within the accuracy match (widen its grid)",
        )
    edge = _on_grid_edge(l1, s_l1)
    fig[f"{kind}_l1_matched_on_grid_edge"] = edge
    if edge:
        return (
            "inconclusive",
            fig,
            f"{kind}: l1-SGD's matched setting is at the edge of its grid (smallest lr or largest penalty), "
            "where a wider grid could make it sparser",
        )
    eff = paired_effect(
        {k: float(r["sparsity"]) for k, r in rewa[s_rewa].items()},
        {k: float(r["sparsity"]) for k, r in l1[s_l1].items()},
        better="higher",
    )
    fig.update(eff.figures(prefix=f"{kind}_sparsity_"))
    outcome = eff.outcome(2.0)
    text = (
        f"{kind}: matched ReWA MSE {fig[f'{kind}_rewa_test_mse']:.3f} / sparsity "
        f"{fig[f'{kind}_rewa_sparsity']:.4f} / F1 {fig[f'{kind}_rewa_f1']:.2f} vs l1-SGD "
        f"{fig[f'{kind}_l1_test_mse']:.3f} / {fig[f'{kind}_l1_sparsity']:.4f} / {fig[f'{kind}_l1_f1']:.2f} "
        f"(LassoCV MSE {lasso_mse:.3f}); paired sparsity gap {eff.mean:+.4f} ± {eff.se:.4f} "
        f"(n={eff.n}) -> {outcome}"
    )
    return outcome, fig, text


def _decide_net(records: Sequence[Mapping[str, Any]], kind: str) -> tuple[str, dict[str, Any], str]:
    code = PROBLEM_CODES[kind]
    rewa, l1, dense = (_table(records, m, code) for m in ("rewa", "l1", "dense"))
    fig: dict[str, Any] = {}
    best: dict[str, int | None] = {}
    for name, tab in (("rewa", rewa), ("l1", l1)):
        acc, sp = _means(tab, "test_acc"), _means(tab, "sparsity")
        ok = [s for s in tab if sp[s] >= 0.9]
        best[name] = max(ok, key=lambda s: acc[s]) if ok else None
        if best[name] is not None:
            fig[f"{kind}_{name}_acc_at_90"] = acc[best[name]]
            fig[f"{kind}_{name}_sparsity_at_90"] = sp[best[name]]
        if dense:
            dacc = mean_sd([float(r["test_acc"]) for by in dense.values() for r in by.values()])[0]
            fig[f"{kind}_dense_acc"] = dacc
            near = [s for s in tab if acc[s] >= dacc - 0.01]
            fig[f"{kind}_{name}_sparsity_at_dense_acc"] = max((sp[s] for s in near), default=0.0)
    if best["rewa"] is None:
        out = "not reproduced" if best["l1"] is not None else "inconclusive"
        return out, fig, f"{kind}: ReWA has no setting with >= 90 % sparsity -> {out}"
    if best["l1"] is None:  # the l1 penalty grid may simply stop short of 90 % sparsity
        return (
            "inconclusive",
            fig,
            f"{kind}: l1 never reaches 90 % sparsity on its grid (widen it) -> inconclusive",
        )
    eff = paired_effect(
        {k: float(r["test_acc"]) for k, r in rewa[best["rewa"]].items()},
        {k: float(r["test_acc"]) for k, r in l1[best["l1"]].items()},
        better="higher",
    )
    fig.update(eff.figures(prefix=f"{kind}_acc_"))
    if eff.n >= 2 and eff.mean >= 0.02 and eff.outcome(2.0) == "reproduced":
        out = "reproduced"
    elif eff.outcome(2.0) == "not reproduced":
        out = "not reproduced"
    else:
        out = "inconclusive"
    return (
        out,
        fig,
        f"{kind}: accuracy gap at >= 90 % sparsity {eff.mean:+.4f} ± {eff.se:.4f} (n={eff.n}) -> {out}",
    )


def decide(records: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> Verdict:
    """The rule of :data:`RULE` over the problems of the configuration."""
    outcomes, figures, texts = [], {}, []
    for prob in config["problems"]:
        kind = prob["kind"]
        if kind in LINEAR_KINDS:
            out, fig, text = _decide_linear(records, kind)
        else:
            out, fig, text = _decide_net(records, kind)
        outcomes.append(out)
        figures.update(fig)
        figures[f"{kind}_outcome"] = out
        texts.append(text)
    return Verdict(combine_outcomes(outcomes), figures, "; ".join(texts))


# ---------------------------------------------------------------------------------------------- figures
def plot(records: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> dict[str, Any]:
    """Per problem: test error (or accuracy) against sparsity, one point per setting (seed means +- SE)."""
    from matplotlib.figure import Figure

    figs: dict[str, Any] = {}
    colors = {"rewa": "tab:red", "l1": "tab:blue", "lasso": "black", "dense": "tab:gray"}
    for prob in config["problems"]:
        kind = prob["kind"]
        code = PROBLEM_CODES[kind]
        linear = kind in LINEAR_KINDS
        ykey = "test_mse" if linear else "test_acc"
        fig = Figure(figsize=(6.0, 4.0))
        ax = fig.subplots()
        for method in config["methods"]:
            tab = _table(records, method, code)
            if not tab:
                continue
            xs, ys, es = [], [], []
            for by in tab.values():
                sx = mean_sd([float(r["sparsity"]) for r in by.values()])[0]
                my, se = mean_se([float(r[ykey]) for r in by.values()])
                if linear and my > 10:
                    continue
                xs.append(sx)
                ys.append(my)
                es.append(se if math.isfinite(se) else 0.0)
            marker = "*" if method in ("lasso", "dense") else "o"
            ax.errorbar(xs, ys, yerr=es, fmt=marker, color=colors[method], label=method, ms=8, capsize=3)
        ax.set_xlabel("sparsity (fraction |w| <= " + ("1e-4)" if linear else "1e-3)"))
        ax.set_ylabel("population test MSE" if linear else "test accuracy")
        ax.set_title(f"ReWA vs l1 ({kind}); one point per penalty x lr setting")
        ax.grid(alpha=0.3)
        ax.legend()
        figs[f"{kind}_error_vs_sparsity"] = fig
    return figs


EXPERIMENT = register(
    Experiment(
        slug="rewa",
        claim=CLAIM,
        rule=RULE,
        methods=METHODS,
        baselines=("l1", "lasso", "dense"),
        configs=CONFIGS,
        run=run,
        decide=decide,
        plot=plot,
        scaled_down=(
            "sparse linear regression d = 2000, n = 400 (1- and 5-sparse) and digits MLP/CNN instead of "
            "CIFAR-10/ImageNet ResNets; LassoCV rebuilt as FISTA + 5-fold CV in torch"
        ),
    )
)
