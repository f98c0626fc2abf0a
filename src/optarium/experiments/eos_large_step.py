r"""eos-large-step: does an adaptive nonmonotone line search put gradient descent at the edge of stability?

Paper: Leonardo Galli, Curtis Fox, Wiebke Bartolomaeus, Mark Schmidt, Holger Rauhut, "Flatland: The Adventures
of Gradient Descent with Large Step Sizes", ICML 2026, arXiv:2606.06722. Claim: adaptive methods take large
steps and run at the edge of stability (EoS) from the start, :math:`\eta_k S(x_k) > 2` throughout
(:math:`S = \lambda_{\max}(\nabla^2 f)`), while the loss decreases non-monotonically; they drive the sharpness
down (to its global minimum); reaching flat regions too early hurts, and a self-stabilisation constraint
rescues such runs.

**Reconstructed.** The paper's exact step-size rule was not found (see
:mod:`optarium.optim.nonmonotone_ls`): the method here is the *reconstructed* equality-type Zhang–Hager search
of :class:`~optarium.optim.NonmonotoneLineSearchGD` (c = 0.5, xi = 1, Polyak start with c_p = 0.1, eta in
[1e-6, 10], 30 trial evaluations per step). The capped variant's schedule eta_cap(k) = 1.05^k / S_0 (until it
reaches eta_max) is our reading of the self-stabilisation constraint. Sharpness is measured by Lanczos on
Hessian-vector products (:class:`optarium.optim.diagnostics.SharpnessTracker`: scipy ``eigsh``,
``which="LA"``, tol 1e-4, reverse-over-reverse products, warm-started from the previous eigenvector),
outside the timed training.

What runs (spec ../shared/papers/eos-large-step.md, "Headline claim"):

- ``toy-*`` (quick, part a): f(u, v) = 1/2 (1 - uv)^2 from (4, 0.1) and (2, 0.3), 500 iterations;
  small constant GD (eta = 0.01, the gradient-flow control, which conserves u^2 - v^2 and so ends at
  S_GF = sqrt((u0^2 - v0^2)^2 + 4)), the nonmonotone equality search and AdGD (a = 2); the minimal sharpness
  over the minimisers is 2. The toy is deterministic: it runs in the units of seed 0 only (other seeds log
  nothing).
- ``mlp-*`` (quick, part b): tanh MLP 64-32-32-10, MSE (1/2 sum over outputs, mean over samples), 256 digits
  (a fixed subset), one-hot targets, float64, torch's default init from the seed (the same for every method
  of a seed), 300 iterations: the search (xi = 1), monotone Armijo backtracking (xi = 0, the same Polyak
  start) and the control, constant GD at eta = 0.5 / S(x_0) for 10 iterations. Loss and eta at every
  iteration; S at k = 10j and 10j + 1 (both parities of the period-2 step pattern; the control at every k).
- ``full-*`` (full): digits 80/20 train/test split, 2000 iterations, six methods: the search, the capped
  search, Armijo, AdGD (a = 2), constant GD at 1/S_0 and at 3/S_0; S at every k < 20, at k = 50j, 50j + 1 and
  at k = T - 1, T.

The verdict rule (stated before any run; :data:`RULE`). F = the fraction of sampled iterations k < T with
eta_k S(x_k) > 2.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from optarium._core.seeding import derive_seed
from optarium.harness.experiment import Experiment, Verdict, register
from optarium.harness.stats import mean_se, paired_effect
from optarium.harness.verdicts import combine_outcomes, curves, last_values, select

__all__ = ["EXPERIMENT", "decide", "plot", "run", "toy_sharpness"]

CLAIM = (
    "Gradient descent with an adaptive (nonmonotone, equality-type) line search runs at the edge of "
    "stability from the start (eta_k S(x_k) > 2 throughout, loss decreasing non-monotonically), ends "
    "flatter than gradient flow and than monotone or small-step baselines, and a self-stabilising step cap "
    "helps runs that reach flat regions too early."
)
RULE = " ".join(
    """
    Quick. (a) toy, from (2, 0.3): 'flatter than gradient flow' reproduced if the search ends at loss < 1e-3
    with S_final <= 0.9 S_GF and small-step GD (the control) ends within 2 % of S_GF; not reproduced if the
    control holds and the search does not; inconclusive if the control fails. 'Sharpness to its global
    minimum' (S_final within 10 % of 2) is a figure only (S_final/2 from both starts). (b) digits MLP, per
    seed: first_eos = the first sampled k with eta_k S(x_k) > 2, F as above, upticks = #{k: L_{k+1} > L_k}.
    'EoS from the start' reproduced if every seed has first_eos < 20, F >= 0.8 and >= 5 upticks; not
    reproduced if the mean F < 0.4 or some seed has first_eos >= 20 (or none) or < 5 upticks; otherwise
    inconclusive (0.4 <= F < 0.8: 'alternating EoS'). Control: constant GD at 0.5/S_0 must have eta S <= 2
    at every iteration 0-10 of every seed, else the whole verdict is inconclusive (the S estimator would be
    wrong). 'More EoS than monotone': D = F_NM - F_Armijo per seed, mean ± SE, reported only. 'Loss still
    decreases': r = log(L_NM(T)/L_Armijo(T)) per seed; reproduced if every seed's L_NM(T)/L_NM(0) < 0.5 and
    mean r - 2 SE <= log 2; not reproduced otherwise. Overall: reproduced if (a), 'EoS from the start' and
    'loss still decreases' are reproduced; not reproduced if any is not; else inconclusive. Full: (i) 'EoS
    from the start' by the same rule on the full runs, and D decided: reproduced if mean D > 2 SE and mean D
    >= 0.1, not reproduced if mean D < -2 SE, else inconclusive; (ii) the uncapped search's final sharpness
    (mean of S(x_{T-1}), S(x_T)) below Armijo's, AdGD's and constant GD at 1/S_0's (paired gap > 2 SE to
    each: reproduced; sharper than one by > 2 SE: not reproduced; else inconclusive); constant GD at 3/S_0
    is reported only. Full overall: combine (i) EoS, (i) D and (ii) (all reproduced -> reproduced, any not
    -> not, else inconclusive), inconclusive if the control (constant GD at 1/S_0 with eta S <= 2 at
    iterations 0-10) fails. (iii), outside the overall verdict: the capped search against the uncapped one,
    paired test accuracy and late-phase rate log(L(T/2)/L(T)); reproduced if either is better by > 2 SE, not
    reproduced if neither is better and one is worse by > 2 SE, else inconclusive. Reported: final train
    loss, test accuracy, final sharpness, iterations to L <= 0.2 L_0. Also reported at quick, outside the
    verdict: the Polyak step (c_p = 1), Barzilai-Borwein and SAM (rho 0.05, step 1/S_0): F, final/initial
    loss, final sharpness, divergences.
    """.split()
)

TOY_STARTS: tuple[tuple[float, float], ...] = ((4.0, 0.1), (2.0, 0.3))
TOY_METHODS = ("toy-gd", "toy-nm", "toy-adgd")
QUICK_MLP = ("mlp-nm", "mlp-armijo", "mlp-control")
#: The issue's remaining baselines, run at quick and reported only (outside the verdict): the classic Polyak
#: step (mode "none", c_p = 1, f* = 0), the Barzilai-Borwein step (mode "none", init "bb") and SAM (rho 0.05,
#: the constant step 1/S_0 of constant GD; optarium.optim.sam_step, which equals pytorch-optimizer's SAM).
QUICK_REPORTED = ("mlp-polyak", "mlp-bb", "mlp-sam")
SAM_RHO = 0.05
FULL_MLP = ("full-nm", "full-nm-capped", "full-armijo", "full-adgd", "full-gd1", "full-gd3")
METHODS = (*TOY_METHODS, *QUICK_MLP, *QUICK_REPORTED, *FULL_MLP)
BASELINES = tuple(m for m in METHODS if not m.endswith("-nm") and m != "full-nm-capped")

#: The search's settings (the spec's; PoNoS defaults where the spec gives none).
SEARCH: dict[str, Any] = {
    "c": 0.5,
    "xi": 1.0,
    "mode": "equality",
    "init": "polyak",
    "c_p": 0.1,
    "f_star": 0.0,
    "eta_min": 1e-6,
    "eta_max": 10.0,
    "max_evals": 30,
}
ARMIJO: dict[str, Any] = {**SEARCH, "xi": 0.0, "mode": "backtracking"}

_BASE: dict[str, Any] = {
    "toy_iters": 500,
    "toy_gd_lr": 0.01,
    "hidden": (32, 32),
    "data_seed": 0,
    "lanczos_tol": 1e-4,
    "control_iters": 10,
    "time_to_loss": 0.2,
    "cap_growth": 1.05,
    "s_last": False,
}

CONFIGS: dict[str, dict[str, Any]] = {
    "smoke": {
        **_BASE,
        "seeds": 2,
        "toy_iters": 40,
        "n_train": 64,
        "test_fraction": 0.0,
        "iters": 20,
        "s_every": 10,
        "s_first": 0,
        "control_iters": 3,
        "methods": [*TOY_METHODS, *QUICK_MLP, *QUICK_REPORTED],
    },
    "quick": {
        **_BASE,
        "seeds": 5,
        "n_train": 256,
        "test_fraction": 0.0,
        "iters": 300,
        "s_every": 10,
        "s_first": 0,
        "methods": [*TOY_METHODS, *QUICK_MLP, *QUICK_REPORTED],
    },
    "full": {
        **_BASE,
        "seeds": 5,
        "n_train": None,
        "test_fraction": 0.2,
        "iters": 2000,
        "s_every": 50,
        "s_first": 20,
        "s_last": True,
        "methods": list(FULL_MLP),
    },
}


# ---------------------------------------------------------------------------------------------------------
# The toy.


def toy_sharpness(u: float, v: float) -> float:
    """λ_max of the Hessian of f(u, v) = 1/2 (1 - uv)^2: [[v², 2uv - 1], [2uv - 1, u²]] in closed form."""
    a, b, d = v * v, 2.0 * u * v - 1.0, u * u
    return 0.5 * (a + d) + math.sqrt(0.25 * (a - d) ** 2 + b * b)


def _toy_optimizer(kind: str, z: torch.Tensor, config: Mapping[str, Any]) -> torch.optim.Optimizer:
    from optarium.optim import AdGD, NonmonotoneLineSearchGD

    if kind == "gd":
        return torch.optim.SGD([z], lr=config["toy_gd_lr"])
    if kind == "nm":
        return NonmonotoneLineSearchGD([z], **SEARCH)
    return AdGD([z], lr=1e-6, a=2.0)


def _run_toy(ctx: Any, kind: str, seed: int, config: Mapping[str, Any]) -> None:
    if seed != 0:
        return  # deterministic: one run (seed 0) per start
    for start, (u0, v0) in enumerate(TOY_STARTS):
        z = torch.tensor([u0, v0], dtype=torch.float64, requires_grad=True)
        opt = _toy_optimizer(kind, z, config)

        def closure(z: torch.Tensor = z, opt: Any = opt) -> torch.Tensor:
            loss = 0.5 * (1.0 - z[0] * z[1]) ** 2
            if torch.is_grad_enabled():
                opt.zero_grad()
                loss.backward()
            return loss

        s_gf = math.sqrt((u0 * u0 - v0 * v0) ** 2 + 4.0)
        iters = config["toy_iters"]
        for k in range(iters + 1):
            u, v = (float(t) for t in z.detach())
            loss = 0.5 * (1.0 - u * v) ** 2
            if k % 10 == 0 or k == iters:
                ctx.log(k, start=start, loss=loss, S=toy_sharpness(u, v), check_finite=False)
            if k == iters:
                break
            opt.step(closure)
        u, v = (float(t) for t in z.detach())
        ctx.log(
            iters,
            start=start,
            final_loss=0.5 * (1.0 - u * v) ** 2,
            final_S=toy_sharpness(u, v),
            S_gf=s_gf,
            check_finite=False,
        )


# ---------------------------------------------------------------------------------------------------------
# The digits MLP.


def _data(config: Mapping[str, Any]) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    from optarium.problems.datasets import load_digits

    x, y = load_digits()
    x = x.to(torch.float64)
    perm = torch.randperm(len(y), generator=torch.Generator().manual_seed(config["data_seed"]))
    x, y = x[perm], y[perm]
    out: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    if config["test_fraction"] > 0:
        n_test = round(config["test_fraction"] * len(y))
        out["test"] = (x[:n_test], y[:n_test])
        x, y = x[n_test:], y[n_test:]
    if config["n_train"] is not None:
        x, y = x[: config["n_train"]], y[: config["n_train"]]
    out["train"] = (x, y)
    return out


def _mlp(hidden: Sequence[int], seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    layers: list[torch.nn.Module] = []
    width = 64
    for h in hidden:
        layers += [torch.nn.Linear(width, h), torch.nn.Tanh()]
        width = h
    layers.append(torch.nn.Linear(width, 10))
    return torch.nn.Sequential(*layers).to(torch.float64)


def _mse(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return 0.5 * ((out - target) ** 2).sum(dim=1).mean()


class _SAM(torch.optim.Optimizer):
    """Constant-step SAM as an optimizer object for the loop: ``step(closure)`` is one ``sam_step``."""

    def __init__(self, params: Sequence[torch.Tensor], *, lr: float, rho: float) -> None:
        super().__init__(params, {"lr": lr, "rho": rho})

    def step(self, closure: Any = None) -> torch.Tensor:  # type: ignore[override]
        from optarium.optim import sam_step

        group = self.param_groups[0]
        return sam_step(group["params"], closure, lr=group["lr"], rho=group["rho"])


def _sampled(k: int, config: Mapping[str, Any]) -> bool:
    every, first, iters = config["s_every"], config["s_first"], config["iters"]
    return k < first or k % every in (0, 1) or (config["s_last"] and k == iters - 1)


def _run_mlp(ctx: Any, kind: str, seed: int, config: Mapping[str, Any]) -> None:
    from optarium.optim import AdGD, NonmonotoneLineSearchGD
    from optarium.optim.diagnostics import SharpnessTracker

    with ctx.evaluating():
        data = _data(config)
    xtr, ytr = data["train"]
    target = torch.nn.functional.one_hot(ytr, 10).to(torch.float64)
    model = _mlp(config["hidden"], derive_seed(seed, "eos-init"))
    params = list(model.parameters())
    S = SharpnessTracker(
        model, _mse, (xtr, target), tol=config["lanczos_tol"], seed=derive_seed(seed, "lanczos")
    )

    with ctx.evaluating():
        s0 = S()
    iters = config["iters"]
    opt: torch.optim.Optimizer
    if kind == "nm":
        opt = NonmonotoneLineSearchGD(params, **SEARCH)
    elif kind == "nm-capped":
        growth, inv = config["cap_growth"], 1.0 / s0
        opt = NonmonotoneLineSearchGD(
            params, **SEARCH, eta_cap_schedule=lambda k: inv * growth ** min(k, 20000)
        )
    elif kind == "armijo":
        opt = NonmonotoneLineSearchGD(params, **ARMIJO)
    elif kind == "adgd":
        opt = AdGD(params, lr=1e-6, a=2.0)
    elif kind == "polyak":
        opt = NonmonotoneLineSearchGD(params, **{**SEARCH, "mode": "none", "init": "polyak", "c_p": 1.0})
    elif kind == "bb":
        opt = NonmonotoneLineSearchGD(params, **{**SEARCH, "mode": "none", "init": "bb"})
    elif kind == "sam":
        opt = _SAM(params, lr=1.0 / s0, rho=SAM_RHO)
    else:
        factor = {"control": 0.5, "gd1": 1.0, "gd3": 3.0}[kind]
        opt = torch.optim.SGD(params, lr=factor / s0)
        if kind == "control":
            iters = config["control_iters"]

    def closure() -> torch.Tensor:
        loss = _mse(model(xtr), target)
        if torch.is_grad_enabled():
            opt.zero_grad()
            loss.backward()
        return loss

    losses: list[float] = []
    sampled_all = kind == "control"
    for k in range(iters):
        s_k = None
        if sampled_all or _sampled(k, config):
            with ctx.evaluating():
                s_k = S()
        loss = float(opt.step(closure).detach())
        eta = float(getattr(opt, "last_step_size", opt.param_groups[0]["lr"]))
        losses.append(loss)
        if not math.isfinite(loss):
            ctx.log(k, loss=loss, eta=eta, diverged=1.0, check_finite=False)
            break
        metrics: dict[str, float] = {"loss": loss, "eta": eta}
        if s_k is not None:
            metrics.update(S=s_k, etaS=eta * s_k)
        if s_k is not None or kind == "control" or config["s_every"] <= 10 or k % 10 == 0:
            ctx.log(k, **metrics)
    with ctx.evaluating():
        final_loss = float(_mse(model(xtr), target).detach())
        s_T = S() if math.isfinite(final_loss) else math.nan
        final: dict[str, Any] = {"S_T": s_T, "S0": s0}
        if "test" in data:
            xte, yte = data["test"]
            with torch.no_grad():
                final["test_acc"] = float((model(xte).argmax(1) == yte).double().mean())
    losses.append(final_loss)
    upticks = sum(1 for a, b in itertools.pairwise(losses) if b > a)
    hit = next((k for k, v in enumerate(losses) if v <= config["time_to_loss"] * losses[0]), None)
    half = losses[len(losses) // 2]
    counters = getattr(opt, "state_counters", {})
    ctx.log(
        len(losses) - 1,
        final_loss=final_loss,
        loss0=losses[0],
        upticks=float(upticks),
        time_to_loss=float(hit) if hit is not None else math.inf,
        late_rate=math.log(half / final_loss) if final_loss > 0 and half > 0 else math.nan,
        forward=float(counters.get("forward", len(losses) - 1)),
        check_finite=False,
        **final,
    )


def run(ctx: Any, method: str, seed: int, config: Mapping[str, Any]) -> None:
    """Run one (method, seed) unit: a toy run (seed 0) or a digits-MLP run."""
    family, kind = method.split("-", 1)
    if family == "toy":
        _run_toy(ctx, kind, seed, config)
    else:
        _run_mlp(ctx, kind, seed, config)


# ---------------------------------------------------------------------------------------------------------
# The verdict.


def _toy_part(records: Sequence[Mapping[str, Any]], figures: dict[str, Any]) -> str:
    finals: dict[tuple[str, int], Mapping[str, Any]] = {}
    for m in TOY_METHODS:
        for r in select(records, m, has="final_S"):
            finals[(m, int(r["start"]))] = r
    if ("toy-nm", 1) not in finals or ("toy-gd", 1) not in finals:
        return "absent" if not finals else "inconclusive"
    for (m, start), r in sorted(finals.items()):
        key = f"toy{start}_{m.removeprefix('toy-')}_"
        figures[key + "S_final"] = float(r["final_S"])
        figures[key + "loss_final"] = float(r["final_loss"])
        figures[key + "S_over_2"] = float(r["final_S"]) / 2.0
        figures[f"toy{start}_S_gf"] = float(r["S_gf"])
    nm, gd = finals[("toy-nm", 1)], finals[("toy-gd", 1)]
    s_gf = float(nm["S_gf"])
    control = abs(float(gd["final_S"]) - s_gf) <= 0.02 * s_gf
    figures["toy_control_ok"] = control
    figures["toy_nm_S_over_S_gf"] = float(nm["final_S"]) / s_gf
    if not control:
        return "inconclusive"
    ok = float(nm["final_loss"]) < 1e-3 and float(nm["final_S"]) <= 0.9 * s_gf
    return "reproduced" if ok else "not reproduced"


def _eos_stats(records: Sequence[Mapping[str, Any]], method: str) -> dict[int, dict[str, float]]:
    """Per seed: F, first_eos, n sampled, upticks, final and initial loss (from the records)."""
    out: dict[int, dict[str, float]] = {}
    pts = curves(records, "etaS", method)
    ends = {int(r["seed"]): r for r in select(records, method, has="final_loss")}
    for seed, end in ends.items():
        sampled = [(k, v) for k, v in pts.get(seed, []) if k < int(end["step"])]
        above = [k for k, v in sampled if v > 2.0]
        out[seed] = {
            "F": len(above) / len(sampled) if sampled else math.nan,
            "first_eos": float(min(above)) if above else math.inf,
            "n_sampled": float(len(sampled)),
            "upticks": float(end["upticks"]),
            "final_loss": float(end["final_loss"]),
            "loss0": float(end["loss0"]),
        }
        for key in ("S_T", "test_acc", "late_rate", "time_to_loss"):
            if key in end:
                out[seed][key] = float(end[key])
    return out


def _control_ok(
    records: Sequence[Mapping[str, Any]], method: str, upto: int, figures: dict[str, Any]
) -> bool:
    vals = [r for r in select(records, method, has="etaS") if int(r["step"]) <= upto]
    if not vals:
        figures["control_ok"] = False
        return False
    worst = max(float(r["etaS"]) for r in vals)
    figures["control_max_etaS"] = worst
    figures["control_ok"] = worst <= 2.0
    return worst <= 2.0


def _eos_part(stats: Mapping[int, Mapping[str, float]], prefix: str, figures: dict[str, Any]) -> str:
    if len(stats) < 2:
        return "inconclusive"
    fs = [s["F"] for s in stats.values()]
    m_f, se_f = mean_se(fs)
    figures[prefix + "F_mean"] = m_f
    figures[prefix + "F_se"] = se_f
    figures[prefix + "F_min"] = min(fs)
    figures[prefix + "first_eos_max"] = max(s["first_eos"] for s in stats.values())
    figures[prefix + "upticks_min"] = min(s["upticks"] for s in stats.values())
    figures[prefix + "n_seeds"] = len(stats)
    early = all(s["first_eos"] < 20 for s in stats.values())
    bumpy = all(s["upticks"] >= 5 for s in stats.values())
    if early and bumpy and all(f >= 0.8 for f in fs):
        out = "reproduced"
    elif m_f < 0.4 or not early or not bumpy:
        out = "not reproduced"
    else:
        out = "inconclusive"
        figures[prefix + "pattern"] = "alternating EoS"
    figures[prefix + "eos_outcome"] = out
    return out


def _d_figures(
    nm: Mapping[int, Mapping[str, float]],
    ar: Mapping[int, Mapping[str, float]],
    prefix: str,
    figures: dict[str, Any],
) -> tuple[float, float, int]:
    f_nm = {s: v["F"] for s, v in nm.items()}
    eff = paired_effect(f_nm, {s: v["F"] for s, v in ar.items()}, better="higher")
    figures[prefix + "D_mean"] = eff.mean
    figures[prefix + "D_se"] = eff.se
    figures[prefix + "D_n"] = eff.n
    return eff.mean, eff.se, eff.n


def _decide_quick(
    records: Sequence[Mapping[str, Any]],
    config: Mapping[str, Any],
    figures: dict[str, Any],
    parts: dict[str, str],
) -> None:
    nm, ar = _eos_stats(records, "mlp-nm"), _eos_stats(records, "mlp-armijo")
    control = _control_ok(records, "mlp-control", config["control_iters"], figures)
    parts["eos"] = _eos_part(nm, "nm_", figures)
    if not control:
        parts["eos"] = "inconclusive"
    if ar:
        fa = [s["F"] for s in ar.values()]
        figures["armijo_F_mean"], figures["armijo_F_se"] = mean_se(fa)
        _d_figures(nm, ar, "", figures)
    # loss still decreases
    common = sorted(set(nm) & set(ar))
    if len(common) < 2:
        parts["loss"] = "inconclusive"
    else:
        ratios = [nm[s]["final_loss"] / nm[s]["loss0"] for s in common]
        r = [math.log(nm[s]["final_loss"] / ar[s]["final_loss"]) for s in common]
        m_r, se_r = mean_se(r)
        figures.update(
            nm_loss_ratio_max=max(ratios),
            nm_loss_ratio_mean=sum(ratios) / len(ratios),
            armijo_loss_ratio_mean=sum(ar[s]["final_loss"] / ar[s]["loss0"] for s in common) / len(common),
            r_mean=m_r,
            r_se=se_r,
            r_n=len(common),
        )
        ok = max(ratios) < 0.5 and m_r - 2 * se_r <= math.log(2.0)
        parts["loss"] = "reproduced" if ok else "not reproduced"
    if not control:
        parts["control"] = "inconclusive"
    for m in QUICK_REPORTED:  # reported only: F, final/initial loss, final sharpness
        st = _eos_stats(records, m)
        if not st:
            continue
        key = m.removeprefix("mlp-")
        figures[f"{key}_F_mean"], figures[f"{key}_F_se"] = mean_se([v["F"] for v in st.values()])
        ratios = [v["final_loss"] / v["loss0"] for v in st.values()]
        figures[f"{key}_loss_ratio_mean"] = statistics.fmean(ratios)
        finite_s = [v["S_T"] for v in st.values() if math.isfinite(v.get("S_T", math.nan))]
        if finite_s:
            figures[f"{key}_S_T_mean"] = statistics.fmean(finite_s)
        figures[f"{key}_diverged"] = sum(1 for v in st.values() if not math.isfinite(v["final_loss"]))
    for key, st in (("nm", nm), ("armijo", ar)):
        finite_s = [v["S_T"] for v in st.values() if math.isfinite(v.get("S_T", math.nan))]
        if finite_s:
            figures[f"{key}_S_T_mean"] = statistics.fmean(finite_s)


def _decide_full(
    records: Sequence[Mapping[str, Any]],
    config: Mapping[str, Any],
    figures: dict[str, Any],
    parts: dict[str, str],
) -> None:
    stats = {m: _eos_stats(records, m) for m in FULL_MLP}
    control = _control_ok(records, "full-gd1", 10, figures)
    nm, ar = stats["full-nm"], stats["full-armijo"]
    parts["eos"] = _eos_part(nm, "nm_", figures)
    if not control:
        parts["eos"] = "inconclusive"
    _eos_part(stats["full-nm-capped"], "capped_", figures)
    if ar:
        fa = [s["F"] for s in ar.values()]
        figures["armijo_F_mean"], figures["armijo_F_se"] = mean_se(fa)
        m_d, se_d, n_d = _d_figures(nm, ar, "", figures)
        if n_d < 2 or not math.isfinite(se_d):
            parts["D"] = "inconclusive"
        elif m_d > 2 * se_d and m_d >= 0.1:
            parts["D"] = "reproduced"
        elif m_d < -2 * se_d:
            parts["D"] = "not reproduced"
        else:
            parts["D"] = "inconclusive"
    else:
        parts["D"] = "inconclusive"
    # (ii) final sharpness (mean of S at T-1 and T; S at T-1 is the last sampled etaS record's S)
    s_final: dict[str, dict[int, float]] = {}
    for m in FULL_MLP:
        last_s = {
            int(r["seed"]): float(r["S"])
            for r in select(records, m, has="S")
            if int(r["step"]) == config["iters"] - 1
        }
        s_final[m] = {
            s: 0.5 * (last_s[s] + v["S_T"]) for s, v in stats[m].items() if s in last_s and "S_T" in v
        }
        for s, v in stats[m].items():
            if s not in s_final[m] and "S_T" in v:
                s_final[m][s] = v["S_T"]
    sides = []
    for other in ("full-armijo", "full-adgd", "full-gd1"):
        eff = paired_effect(s_final["full-nm"], s_final[other], better="lower")
        key = f"sharp_vs_{other.removeprefix('full-')}_"
        figures[key + "gap"] = eff.mean
        figures[key + "se"] = eff.se
        figures[key + "n"] = eff.n
        sides.append(eff.outcome(2.0))
    if all(o == "reproduced" for o in sides):
        parts["sharpness"] = "reproduced"
    elif any(o == "not reproduced" for o in sides):
        parts["sharpness"] = "not reproduced"
    else:
        parts["sharpness"] = "inconclusive"
    for m in FULL_MLP:
        name = m.removeprefix("full-")
        vals = stats[m]
        if not vals:
            continue
        figures[f"{name}_final_loss_mean"] = statistics.fmean(v["final_loss"] for v in vals.values())
        figures[f"{name}_S_final_mean"] = statistics.fmean(s_final[m].values()) if s_final[m] else math.nan
        accs = [v["test_acc"] for v in vals.values() if "test_acc" in v]
        if accs:
            figures[f"{name}_test_acc_mean"] = statistics.fmean(accs)
        ttl = sorted(v.get("time_to_loss", math.inf) for v in vals.values())
        figures[f"{name}_time_to_loss_median"] = statistics.median(ttl)
        figures[f"{name}_F_mean"] = statistics.fmean(v["F"] for v in vals.values())
    # (iii) the capped variant against the uncapped one
    capped = stats["full-nm-capped"]
    acc = paired_effect(
        {s: v["test_acc"] for s, v in capped.items() if "test_acc" in v},
        {s: v["test_acc"] for s, v in nm.items() if "test_acc" in v},
        better="higher",
    )
    rate = paired_effect(
        {s: v["late_rate"] for s, v in capped.items()},
        {s: v["late_rate"] for s, v in nm.items()},
        better="higher",
    )
    figures.update(
        capped_acc_gap=acc.mean,
        capped_acc_se=acc.se,
        capped_rate_gap=rate.mean,
        capped_rate_se=rate.se,
    )
    o_acc, o_rate = acc.outcome(2.0), rate.outcome(2.0)
    if "reproduced" in (o_acc, o_rate):
        figures["capped_outcome"] = "reproduced"
    elif "not reproduced" in (o_acc, o_rate):
        figures["capped_outcome"] = "not reproduced"
    else:
        figures["capped_outcome"] = "inconclusive"
    if not control:
        parts["control"] = "inconclusive"


def decide(records: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> Verdict:
    """The rule of :data:`RULE` over the parts the configuration ran (toy, quick MLP, full MLP)."""
    methods = list(config["methods"])
    figures: dict[str, Any] = {}
    parts: dict[str, str] = {}
    if any(m.startswith("toy-") for m in methods):
        toy = _toy_part(records, figures)
        if toy != "absent":
            parts["toy"] = toy
    if "mlp-nm" in methods:
        _decide_quick(records, config, figures, parts)
    if "full-nm" in methods:
        _decide_full(records, config, figures, parts)
    for k, v in parts.items():
        figures[f"{k}_outcome"] = v
    outcome = combine_outcomes(parts.values())
    if parts.get("control") == "inconclusive" and outcome != "inconclusive":
        outcome = "inconclusive"
    bits = [f"{k}: {v}" for k, v in parts.items()]
    if "nm_F_mean" in figures:
        bits.append(
            f"F_NM {figures['nm_F_mean']:.3f} (min {figures['nm_F_min']:.3f}), first EoS <= "
            f"{figures['nm_first_eos_max']:g}, upticks >= {figures['nm_upticks_min']:g}"
        )
    if "D_mean" in figures:
        bits.append(f"D = F_NM - F_Armijo {figures['D_mean']:+.3f} ± {figures['D_se']:.3f}")
    if "r_mean" in figures:
        bits.append(f"r = log(L_NM/L_Armijo) {figures['r_mean']:+.3f} ± {figures['r_se']:.3f}")
    if "toy_nm_S_over_S_gf" in figures:
        bits.append(f"toy S_NM/S_GF {figures['toy_nm_S_over_S_gf']:.3f}")
    if "capped_outcome" in figures:
        bits.append(f"capped vs uncapped (outside the verdict): {figures['capped_outcome']}")
    return Verdict(outcome, figures, "; ".join(bits))


# ---------------------------------------------------------------------------------------------------------
# Figures.


def plot(records: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> dict[str, Any]:
    """Toy sharpness trajectories; eta_k S(x_k) and the loss along the MLP runs; final sharpness gaps."""
    from matplotlib.figure import Figure

    from optarium.harness.figures import draw_band, draw_paired_gaps

    methods = list(config["methods"])
    figs: dict[str, Any] = {}
    if any(m.startswith("toy-") for m in methods):
        fig = Figure(figsize=(10, 4))
        axes = fig.subplots(1, 2)
        for start, ax in enumerate(axes):
            for m in TOY_METHODS:
                rows = select(records, m, has="S", start=start)
                pts = sorted((int(r["step"]), float(r["S"])) for r in rows)
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], label=m.removeprefix("toy-"))
            u0, v0 = TOY_STARTS[start]
            ax.axhline(math.sqrt((u0 * u0 - v0 * v0) ** 2 + 4), color="gray", ls="--", lw=0.8, label="S_GF")
            ax.axhline(2.0, color="black", ls=":", lw=0.8, label="min S = 2")
            ax.set_title(f"toy 1/2(1-uv)^2 from ({u0:g}, {v0:g})")
            ax.set_xlabel("iteration")
            ax.set_ylabel("sharpness S")
            ax.legend()
            ax.grid(alpha=0.3)
        figs["toy_sharpness"] = fig
    mlp = [m for m in methods if m.startswith(("mlp-", "full-")) and not m.endswith("control")]
    if mlp:
        fig = Figure(figsize=(12, 4))
        ax, ax2 = fig.subplots(1, 2)
        for m in mlp:
            pts = [(int(r["step"]), float(r["etaS"])) for r in select(records, m, has="etaS")]
            if pts:
                ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=6, label=m, alpha=0.6)
            draw_band(ax2, _by_step(records, "loss", m), center="geomean", label=m)
        ax.axhline(2.0, color="black", lw=0.8)
        ax.set_yscale("log")
        ax.set_xlabel("iteration k")
        ax.set_ylabel("eta_k S(x_k) (all seeds)")
        ax.set_title("edge of stability: eta S > 2 above the line")
        ax.legend(fontsize=7)
        ax2.set_yscale("log")
        ax2.set_xlabel("iteration k")
        ax2.set_ylabel("train loss (geometric mean, min-max band)")
        ax2.legend(fontsize=7)
        figs["eos_and_loss"] = fig
    if "full-nm" in methods:
        s_t = {m: last_values(records, "S_T", m) for m in FULL_MLP}
        effects = [
            (other.removeprefix("full-"), paired_effect(s_t["full-nm"], s_t[other], better="lower"))
            for other in ("full-armijo", "full-adgd", "full-gd1", "full-gd3")
        ]
        fig = Figure(figsize=(6, 4))
        ax = fig.subplots()
        draw_paired_gaps(ax, effects)
        ax.set_ylabel("S_T(baseline) - S_T(search), per seed; mean ± 2 SE")
        ax.set_title("is the search flatter at the end?")
        figs["final_sharpness_gaps"] = fig
    return figs


def _by_step(records: Sequence[Mapping[str, Any]], metric: str, method: str) -> dict[int, list[float]]:
    out: dict[int, list[float]] = {}
    for r in select(records, method, has=metric):
        v = float(r[metric])
        if v > 0 and math.isfinite(v):
            out.setdefault(int(r["step"]), []).append(v)
    return out


EXPERIMENT = register(
    Experiment(
        slug="eos-large-step",
        claim=CLAIM,
        rule=RULE,
        methods=METHODS,
        baselines=BASELINES,
        configs=CONFIGS,
        run=run,
        decide=decide,
        plot=plot,
        scaled_down=(
            "the paper's networks and data are replaced by a 64-32-32-10 tanh MLP on sklearn's digits (256 "
            "samples at quick, the 80/20 split at full) and a 2-parameter toy with known minimal sharpness; "
            "the step-size rule and the self-stabilisation cap are reconstructed (the paper's were not found)"
        ),
    )
)
