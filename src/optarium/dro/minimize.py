r"""Minimise the worst case over a reweighting set: :math:`\min_x \sup_{q} \sum_i q_i\ell_i(x)`.

:func:`minimize_worst_case` is full-batch gradient descent with Armijo backtracking on
:math:`F(x) = \sup_{q\in\mathcal{Q}(p)} \sum_i q_i\ell_i(x)`, whose gradient is
:math:`\sum_i q_i^*\nabla\ell_i(x)` (Danskin's theorem; :func:`optarium.dro.worst_case` gives the exact
:math:`q^*`). :math:`F` is convex when every :math:`\ell_i` is; it is smooth for KL (the worst case is a
soft maximum), and only piecewise smooth for chi^2 (where weights hit zero), TV and CVaR, where the
``grad_norm`` criterion may not be reached and the run ends with ``max_iter``. Each step starts from twice
the last accepted step size (capped at ``lr``) and halves it until
:math:`F(x - tg) \le F(x) - \tfrac12 t\|g\|^2 + 8\epsilon|F(x)|` (the last term, eight units of
rounding of the dtype, lets the search accept steps at the precision floor instead of failing there).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from optarium._core.result import Result
from optarium._core.solver import SolverCase, SolverLoop
from optarium._core.validation import check_int, check_positive
from optarium.dro.ambiguity import KL, AmbiguitySet, Wasserstein
from optarium.dro.worst_case import check_weights, worst_case

__all__ = ["minimize_worst_case", "solver_cases"]

_MAX_HALVINGS = 30  # a search that fails 30 halvings is at the precision floor or a kink


def minimize_worst_case(
    loss: Callable[[Tensor], Tensor],
    x0: Tensor,
    ambiguity: AmbiguitySet,
    *,
    weights: Tensor | None = None,
    lr: float = 1.0,
    max_iter: int = 500,
    tol: float = 1e-6,
    record_every: int = 1,
    time_limit_s: float | None = None,
) -> Result:
    r"""Minimise :math:`\sup_{q\in\mathcal{Q}} \sum_i q_i\,\text{loss}(x)_i` over ``x`` from ``x0``.

    Args:
        loss: ``loss(x) -> Tensor[n]``, the per-sample losses at parameters ``x`` (differentiable).
        x0: the starting parameters (a floating tensor of any shape).
        ambiguity: a reweighting set (:class:`~optarium.dro.KL`, :class:`~optarium.dro.ChiSquare`,
            :class:`~optarium.dro.TotalVariation`, :class:`~optarium.dro.CVaR`).
        weights: the empirical weights (uniform if ``None``).
        lr: the largest step size tried.
        max_iter: gradient steps.
        tol: converged once the gradient norm is at most ``tol``.
        record_every: history rows every this many steps.
        time_limit_s: solver time budget.

    Returns:
        A :class:`~optarium._core.Result`: ``x`` the parameters, ``value`` the worst-case loss there,
        ``extras["q"]`` the worst-case weights, ``extras["nominal_value"]`` the weighted mean loss,
        ``extras["line_search_failures"]`` the steps where no step size decreased :math:`F` (the iterate
        stays; many of them mean the float precision floor or a kink was reached). History:
        ``objective``, ``grad_norm``, ``step_size``.
    """
    if not callable(loss):
        raise TypeError(f"loss: must be callable, got {type(loss).__name__}")
    if not isinstance(x0, Tensor) or not x0.is_floating_point():
        raise TypeError(f"x0: must be a floating Tensor, got {type(x0).__name__}")
    if not bool(torch.isfinite(x0).all()):
        raise ValueError("x0: must be finite")
    if not isinstance(ambiguity, AmbiguitySet):
        raise TypeError(f"ambiguity: must be an AmbiguitySet, got {type(ambiguity).__name__}")
    if isinstance(ambiguity, Wasserstein):
        raise TypeError("ambiguity: a Wasserstein ball moves support points; it is not a reweighting set")
    lr = check_positive("lr", lr)
    max_iter = check_int("max_iter", max_iter, minimum=0)
    tol = check_positive("tol", tol)

    def objective(x: Tensor) -> tuple[Tensor, Any]:
        out = loss(x)
        if not isinstance(out, Tensor) or out.dim() != 1:
            raise ValueError("loss: must return a 1-D Tensor of per-sample losses")
        if not bool(torch.isfinite(out.detach()).all()):
            return out.new_tensor(math.nan), None
        wc = worst_case(out, ambiguity, weights)
        return wc.value, wc

    x = x0.detach().clone()
    state: dict[str, Any] = {}

    def refresh() -> None:
        xr = x.detach().requires_grad_(True)
        with torch.enable_grad():
            f, wc = objective(xr)
            g = torch.autograd.grad(f, xr)[0] if wc is not None else torch.full_like(xr, math.nan)
        state.update(f=float(f.detach()), g=g.detach(), wc=wc)

    refresh()
    state["t"] = lr
    loop = SolverLoop(
        max_iter, tol=tol, criterion="grad_norm", record_every=record_every, time_limit_s=time_limit_s
    )

    def evaluate(k: int) -> dict[str, float]:
        return {"objective": state["f"], "grad_norm": float(state["g"].norm()), "step_size": state["t"]}

    for _ in loop.iterate(evaluate):
        g, f = state["g"], state["f"]
        gg = float((g * g).sum())
        slack = (
            8.0 * torch.finfo(x.dtype).eps * abs(f)
        )  # rounding of F: below it "no increase" is all one sees
        t = min(lr, 2.0 * state["t"])
        accepted = False
        for _halving in range(_MAX_HALVINGS):
            with torch.no_grad():
                trial, _ = objective(x - t * g)
            if float(trial) <= f - 0.5 * t * gg + slack:
                accepted = True
                break
            t *= 0.5
        if accepted:
            x = (x - t * g).detach()
            state["t"] = t
            refresh()
        else:  # no descent along -g (float precision floor or a kink of F): stay, count it, retry from lr
            state["failures"] = state.get("failures", 0) + 1
            state["t"] = lr

    wc = state["wc"]
    extras: dict[str, Any] = {}
    if wc is not None:
        with torch.no_grad():
            per = loss(x)
            p = check_weights(weights, per).to(per.dtype)
            extras = {"q": wc.q.detach(), "nominal_value": float((p * per).sum())}
    extras["line_search_failures"] = int(state.get("failures", 0))
    return loop.result(x, value=state["f"], extras=extras)


# ------------------------------------------------------------------------------ conformance cases


def _case_data(dtype: torch.dtype, device: Any) -> tuple[Tensor, Tensor]:
    g = torch.Generator().manual_seed(7)
    X = torch.randn(40, 3, generator=g, dtype=torch.float64)
    y = (
        X @ torch.tensor([1.0, -1.0, 0.5], dtype=torch.float64)
        + 0.7 * torch.randn(40, generator=g, dtype=torch.float64)
        > 0
    )
    return X.to(dtype=dtype, device=device), (2.0 * y.to(torch.float64) - 1.0).to(dtype=dtype, device=device)


def _case_loss(X: Tensor, y: Tensor, poison: bool) -> Callable[[Tensor], Tensor]:
    def loss(w: Tensor) -> Tensor:
        out = torch.nn.functional.softplus(-y * (X @ w)) + 0.05 * (w * w).sum()
        return out * math.nan if poison else out

    return loss


def _case_solve(*, dtype: torch.dtype, device: Any, seed: int, poison: bool = False, **kw: Any) -> Result:
    X, y = _case_data(dtype, device)
    args: dict[str, Any] = {"tol": 1e-7, "max_iter": 300}
    args.update(kw)
    x0 = torch.full((3,), 0.1, dtype=dtype, device=device)  # not 0, where every loss ties and F has a kink
    return minimize_worst_case(_case_loss(X, y, poison), x0, KL(0.2), **args)


def _case_grad_norm(r: Result) -> float:
    X, y = _case_data(torch.float64, "cpu")
    w = r.x.detach().to(torch.float64).cpu().requires_grad_(True)
    f = worst_case(_case_loss(X, y, False)(w), KL(0.2)).value
    return float(torch.autograd.grad(f, w)[0].norm())


def solver_cases() -> list[SolverCase]:
    """The case of :func:`minimize_worst_case`: KL-robust ridge-regularised logistic regression."""
    return [
        SolverCase(
            name="dro-minimize-worst-case-kl",
            solve=_case_solve,
            statuses={
                "converged": {},
                "max_iter": {"max_iter": 4},
                "diverged": {"poison": True},
                "timeout": {"time_limit_s": 0.0},
            },
            max_iter=4,
            tolerance_holds=lambda r: _case_grad_norm(r) <= 2e-7,
            optimality=_case_grad_norm,
            optimality_tol=1e-5,
            invalid=[({"lr": 0.0}, "lr"), ({"max_iter": -1}, "max_iter"), ({"tol": -1.0}, "tol")],
        )
    ]
