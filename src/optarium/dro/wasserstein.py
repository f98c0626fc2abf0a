r"""The worst case over a type-2 Wasserstein ball, by its Lagrangian dual and an exact inner fixed point.

For support points :math:`\xi_1..\xi_n \in \mathbb{R}^d` with weights :math:`p` and a per-sample loss
:math:`\ell`, strong duality (Blanchet & Murthy 2019; Gao & Kleywegt 2023) gives

.. math::
    \sup_{W_2(Q, P) \le \rho} E_Q[\ell] = \inf_{\lambda \ge 0}\ \lambda\rho^2
        + \sum_i p_i \sup_z \big[\ell(z) - \lambda\|z - \xi_i\|^2\big].

:func:`wasserstein_worst_case` solves it when :math:`\ell` is :math:`L`-smooth: for :math:`\lambda > L/2`
the inner problem is strongly concave and its maximiser is the unique fixed point of
:math:`z = \xi_i + \nabla\ell(z)/(2\lambda)` (the inner gradient ascent of WRM, Sinha, Namkoong & Duchi 2018,
with step :math:`1/(2\lambda)`), a contraction of rate :math:`L/(2\lambda)`; the outer function is convex in
:math:`\lambda` with derivative :math:`\rho^2 - \sum_i p_i\|z_i^*(\lambda) - \xi_i\|^2`, so :math:`\lambda`
is bracketed (doubling, and raised wherever the fixed point does not contract) and bisected in
:math:`\log\lambda` until the transport budget is met to ``tol`` (complementary slackness). At the solution
:math:`Q^* = \sum_i p_i \delta_{z_i^*}` is feasible and optimal, and the reported value is
:math:`E_{Q^*}\ell`. When the optimum needs :math:`\lambda \le L/2` (a non-concave inner problem), the
method cannot certify it: the run ends with ``max_iter`` and the best certified bound in ``extras``.

The loss is ``loss(z) -> Tensor[n]`` with the i-th entry depending on ``z[i]`` only; gradients come from
autograd on the sum. Everything follows ``samples``' dtype and device.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from optarium._core.result import Result
from optarium._core.solver import SolverCase, SolverLoop
from optarium._core.validation import check_int, check_nonnegative, check_positive
from optarium.dro.worst_case import check_weights

__all__ = ["linear_wasserstein_penalty", "solver_cases", "wasserstein_fixed_point", "wasserstein_worst_case"]


def _check_samples(samples: Any) -> Tensor:
    if not isinstance(samples, Tensor):
        raise TypeError(f"samples: must be a Tensor, got {type(samples).__name__}")
    if not samples.is_floating_point():
        raise TypeError(f"samples: must be a floating tensor, got {samples.dtype}")
    if samples.dim() != 2 or samples.shape[0] == 0:
        raise ValueError(f"samples: must have shape (n, d) with n >= 1, got {tuple(samples.shape)}")
    if not bool(torch.isfinite(samples).all()):
        raise ValueError("samples: must be finite")
    return samples


def _per_sample(loss: Callable[[Tensor], Tensor], z: Tensor, n: int) -> Tensor:
    out = loss(z)
    if not isinstance(out, Tensor) or out.shape != (n,):
        shape = tuple(out.shape) if isinstance(out, Tensor) else type(out).__name__
        raise ValueError(f"loss: must return a Tensor of shape ({n},) (one loss per sample), got {shape}")
    return out


def wasserstein_fixed_point(
    loss: Callable[[Tensor], Tensor],
    samples: Tensor,
    lam: float,
    *,
    z0: Tensor | None = None,
    max_steps: int = 500,
    tol: float = 1e-12,
) -> tuple[Tensor, bool, int]:
    r"""The inner maximisers :math:`z_i^* = \arg\max_z \ell(z) - \lambda\|z - \xi_i\|^2` for a fixed ``lam``.

    Iterates :math:`z \leftarrow \xi + \nabla\ell(z)/(2\lambda)` from ``z0`` (default the samples) until the
    largest move is at most ``tol`` times ``1 + max |xi|``. Returns ``(z, contracted, steps)``:
    ``contracted`` is False when the moves stopped shrinking (``lam`` at or below L/2, where the inner
    problem need not be concave) or became non-finite. This is WRM's inner step (Sinha et al. 2018) run to
    its fixed point; a training loop can call it with a fixed penalty ``lam`` and back-propagate the loss at
    the detached ``z`` (Danskin's theorem).
    """
    samples = _check_samples(samples)
    lam = check_positive("lam", lam)
    max_steps = check_int("max_steps", max_steps, minimum=1)
    tol = check_positive("tol", tol)
    n = samples.shape[0]
    z = samples.clone() if z0 is None else z0.detach().clone()
    scale = 1.0 + float(samples.abs().max())
    prev = math.inf
    growing = 0
    for step in range(1, max_steps + 1):
        zr = z.detach().requires_grad_(True)
        with torch.enable_grad():
            g = torch.autograd.grad(_per_sample(loss, zr, n).sum(), zr)[0]
        z_new = samples + g / (2.0 * lam)
        move = float((z_new - z).abs().max())
        z = z_new.detach()
        if not math.isfinite(move):
            return z, False, step
        if move <= tol * scale:
            return z, True, step
        growing = growing + 1 if move >= prev else 0
        if growing >= 3:  # three moves in a row that do not shrink: not a contraction at this lam
            return z, False, step
        prev = move
    return z, False, max_steps


def wasserstein_worst_case(
    loss: Callable[[Tensor], Tensor],
    samples: Tensor,
    radius: float,
    *,
    weights: Tensor | None = None,
    smoothness: float | None = None,
    lam0: float = 1.0,
    max_iter: int = 200,
    tol: float = 1e-8,
    inner_steps: int = 500,
    time_limit_s: float | None = None,
) -> Result:
    r"""The worst-case expected loss over the type-2 Wasserstein ball of ``radius`` around the samples.

    Args:
        loss: ``loss(z) -> Tensor[n]``, per-sample losses at points ``z`` of shape ``(n, d)``; smooth.
        samples: the support points :math:`\xi`, shape ``(n, d)``.
        radius: :math:`\rho \ge 0` (the transport budget is :math:`\rho^2`).
        weights: the empirical weights (uniform if ``None``).
        smoothness: the loss's gradient-Lipschitz constant :math:`L`, if known (``lam`` then starts above
            :math:`L/2`); otherwise non-contraction is detected and ``lam`` raised.
        lam0: the first multiplier tried.
        max_iter: outer (bisection) iterations.
        tol: the relative transport-budget residual :math:`|\sum p\|z-\xi\|^2 - \rho^2| / \rho^2` that counts
            as converged.
        inner_steps: fixed-point steps per multiplier.
        time_limit_s: solver time budget.

    Returns:
        A :class:`~optarium._core.Result` with ``x`` the worst-case support points :math:`z^*` (shape of
        ``samples``), ``value`` :math:`E_{Q^*}\ell`, and ``extras``: ``lambda``, ``dual_value`` (an upper
        bound on the worst case whenever the fixed point contracted), ``transport_cost``, ``nominal_value``
        (:math:`E_P\ell`). History rows: ``objective`` (the dual), ``residual``, ``lambda``.

    Example:
        >>> import torch
        >>> from optarium.dro import wasserstein_worst_case
        >>> xi = torch.randn(50, 3, dtype=torch.float64)
        >>> a = torch.tensor([1.0, -2.0, 2.0], dtype=torch.float64)
        >>> res = wasserstein_worst_case(lambda z: z @ a, xi, radius=0.5)
        >>> round(res.value - float((xi @ a).mean()), 6)  # the closed form rho * |a|
        1.5
    """
    if not callable(loss):
        raise TypeError(f"loss: must be callable, got {type(loss).__name__}")
    samples = _check_samples(samples)
    radius = check_nonnegative("radius", radius)
    if smoothness is not None:
        smoothness = check_nonnegative("smoothness", smoothness)
    lam0 = check_positive("lam0", lam0)
    max_iter = check_int("max_iter", max_iter, minimum=0)
    tol = check_positive("tol", tol)
    inner_steps = check_int("inner_steps", inner_steps, minimum=1)
    n = samples.shape[0]
    p = check_weights(weights, samples[:, 0], name="weights").to(samples.dtype)
    budget = radius * radius
    with torch.no_grad():
        nominal = float((p * _per_sample(loss, samples, n)).sum())

    lo = 0.0 if smoothness is None else smoothness / 2.0  # every lam <= lo is known not to work or too small
    hi = math.inf  # every lam >= hi gives a transport cost at most the budget
    lam = max(lam0, 2.0 * lo) if smoothness is not None else lam0
    state: dict[str, Any] = {"z": samples.clone(), "lam": lam, "cost": 0.0, "dual": nominal, "ok": True}
    best: dict[str, Any] = {"dual": math.inf, "z": samples.clone(), "lam": math.inf}

    def solve_at(lam_: float) -> None:
        z, ok, _ = wasserstein_fixed_point(loss, samples, lam_, z0=state["z"], max_steps=inner_steps)
        with torch.no_grad():
            vals = _per_sample(loss, z, n)
            cost = float((p * ((z - samples) ** 2).sum(1)).sum())
            dual = lam_ * budget + float((p * (vals - lam_ * ((z - samples) ** 2).sum(1))).sum())
        state.update(z=z if ok else state["z"], lam=lam_, cost=cost, dual=dual, ok=ok)
        if ok and dual < best["dual"]:
            best.update(dual=dual, z=z, lam=lam_)

    def residual() -> float:
        if budget == 0.0:
            return 0.0
        if not state["ok"]:
            return math.inf
        return abs(state["cost"] - budget) / budget

    loop = SolverLoop(
        max_iter, tol=tol, criterion="residual", time_limit_s=time_limit_s, blowup=None, watch=("objective",)
    )

    def evaluate(k: int) -> dict[str, float]:
        return {"objective": state["dual"], "residual": residual(), "lambda": state["lam"]}

    if budget == 0.0:  # the ball is P itself: row 0 has residual 0 and the loop ends converged there
        state.update(dual=nominal, lam=math.inf)
    else:
        solve_at(lam)
    for _ in loop.iterate(evaluate):
        if not state["ok"] or state["cost"] > budget:  # lam too small (or the inner problem not concave)
            lo = max(lo, state["lam"])
        else:
            hi = min(hi, state["lam"])
        if math.isinf(hi):
            lam = 2.0 * lo
        else:
            lam = math.sqrt(lo * hi) if lo > 0 else hi / 2.0
        solve_at(lam)

    z = state["z"] if state["ok"] else best["z"]
    with torch.no_grad():
        value = float((p * _per_sample(loss, z, n)).sum())
        cost = float((p * ((z - samples) ** 2).sum(1)).sum())
    extras = {
        "lambda": float(state["lam"] if state["ok"] else best["lam"]),
        "dual_value": float(state["dual"] if state["ok"] else best["dual"]),
        "transport_cost": cost,
        "nominal_value": nominal,
    }
    return loop.result(z, value=value, extras=extras)


def linear_wasserstein_penalty(theta: Tensor, radius: float, *, lipschitz: float = 1.0) -> Tensor:
    r"""The type-1 Wasserstein worst case of a Lipschitz loss of a linear score, minus its empirical mean.

    For :math:`\ell(\theta^\top x, y)` convex and ``lipschitz``-Lipschitz in the score, with the growth rate
    equal to that constant (logistic, hinge, absolute and Huber losses), and transport of the features
    :math:`x` only at cost :math:`\|x - x'\|_2` (labels fixed),

    .. math:: \sup_{W_1(Q, P)\le\rho} E_Q[\ell] = E_P[\ell] + \rho\,L\,\|\theta\|_2

    (Shafieezadeh-Abadeh, Kuhn & Mohajerin Esfahani 2019; Gao & Kleywegt 2023), so W1-DRO of such a model is
    ERM plus this penalty (differentiable in ``theta`` away from 0). It is the formulation of skwdro's
    ``solver="dedicated"`` logistic regression with its label-flip cost :math:`\kappa\to\infty`.
    """
    if not isinstance(theta, Tensor) or not theta.is_floating_point():
        raise TypeError(f"theta: must be a floating Tensor, got {type(theta).__name__}")
    radius = check_nonnegative("radius", radius)
    lipschitz = check_nonnegative("lipschitz", lipschitz)
    return radius * lipschitz * torch.linalg.vector_norm(theta)


# ------------------------------------------------------------------------------ conformance cases


def _case_solve(*, dtype: torch.dtype, device: Any, seed: int, poison: bool = False, **kw: Any) -> Result:
    g = torch.Generator().manual_seed(1234)
    xi = torch.randn(20, 3, generator=g, dtype=torch.float64).to(dtype=dtype, device=device)
    alpha = 0.5

    def loss(z: Tensor) -> Tensor:
        val = 0.5 * alpha * (z * z).sum(1)
        return val * float("nan") if poison else val

    args: dict[str, Any] = {"radius": 0.3, "tol": 1e-10}
    args.update(kw)
    return wasserstein_worst_case(loss, xi, **args)


def _case_exact() -> float:
    g = torch.Generator().manual_seed(1234)
    xi = torch.randn(20, 3, generator=g, dtype=torch.float64)
    m2 = float((xi * xi).sum(1).mean())
    return 0.5 * 0.5 * (math.sqrt(m2) + 0.3) ** 2  # sup over W2(0.3) of E[alpha/2 |z|^2]


def solver_cases() -> list[SolverCase]:
    """The case of :func:`wasserstein_worst_case`: a quadratic loss with a closed-form worst case."""
    return [
        SolverCase(
            name="dro-wasserstein-worst-case",
            solve=_case_solve,
            statuses={
                "converged": {},
                "max_iter": {"max_iter": 3},
                "diverged": {"poison": True},
                "timeout": {"time_limit_s": 0.0},
            },
            max_iter=3,
            tolerance_holds=lambda r: r.history.last("residual") <= 1e-10,
            optimality=lambda r: abs(r.value - _case_exact()) / _case_exact(),
            optimality_tol=1e-6,
            invalid=[
                ({"radius": -1.0}, "radius"),
                ({"max_iter": -1}, "max_iter"),
                ({"tol": 0.0}, "tol"),
                ({"lam0": 0.0}, "lam0"),
            ],
        )
    ]
