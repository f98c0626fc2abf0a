r"""MoSSP: momentum-based single-loop stochastic penalty method for constrained DC-regularised problems.

Paper: Luxuan Li, Xiao Wang, Chunfeng Cui, "MoSSP: A Momentum-Based Single-Loop Stochastic Penalty Method for
Nonconvex Constrained DC-Regularized Optimization", ICML 2026, arXiv:2605.29635.

Problem (the paper's (P); the equality form of the constraint is our assumption):

.. math::

    \min_x\; \Phi(x) = \mathbb E_\xi f(x, \xi) + h(x) - g(x) \quad \text{s.t.}\quad c(x) = 0,

with :math:`f`, :math:`c` smooth, :math:`h`, :math:`g` proper closed convex (possibly nonsmooth) with proximal
maps available separately, and only stochastic gradients of :math:`f`.

**What is found and what is reconstructed.** Found in the paper (abstract, ICML abstract and the first lines
of
the introduction): the problem class; the key idea, one stochastic proximal-gradient step per iteration that
approximates the gradient of the Moreau envelope of the composite term "penalty + convex DC part", with the
proximal map of the concave part computed in parallel; a Polyak-momentum variant (:math:`O(\varepsilon^{-4})`
oracle calls to a stochastic :math:`\varepsilon`-KKT point) and a recursive-momentum variant
(:math:`O(\varepsilon^{-3})`). **Not visible**: the exact update formulas, parameter schedules and constants.
The iteration below is our reconstruction (spec ``mossp.md``), in the style of the
difference-of-Moreau-envelopes
smoothing of DC programs (Sun & Sun 2023):

penalty :math:`P_\beta(x) = \mathbb E f(x,\xi) + \tfrac\beta2\|c(x)\|^2`, composite convex part
:math:`\Psi_\beta = P_\beta + h`; minimise :math:`M_\gamma[\Psi_\beta] - M_\gamma[g]`, whose gradient is
:math:`(\mathrm{prox}_{\gamma g}(x) - \mathrm{prox}_{\gamma\Psi_\beta}(x))/\gamma`. Iteration :math:`k`:

1. momentum estimate of :math:`\nabla f` at :math:`y_k` (the deterministic penalty gradient carries no
   momentum):
   Polyak :math:`m_k = (1-a)m_{k-1} + a\nabla f(y_k;\xi_k)`, or recursive (STORM)
   :math:`m_k = \nabla f(y_k;\xi_k) + (1-a)(m_{k-1} - \nabla f(y_{k-1};\xi_k))` (same sample at both points:
   two
   stochastic-gradient evaluations, counted as such); :math:`m_0 = \nabla f(y_0;\xi_0)`;
   :math:`d_k = m_k + \beta_k\nabla c(y_k)^\top c(y_k)`;
2. one prox-gradient step toward :math:`\mathrm{prox}_{\gamma\Psi_\beta}(x_k)`:
   :math:`y_{k+1} = \mathrm{prox}_{\alpha h}(y_k - \alpha[d_k + (y_k - x_k)/\gamma])`;
3. in parallel :math:`z_{k+1} = \mathrm{prox}_{\gamma g}(x_k)`;
4. :math:`x_{k+1} = x_k - \theta(z_{k+1} - y_{k+1})` (step :math:`\theta\gamma` on the envelope-difference
   gradient).

A fixed point has :math:`y = z`, hence :math:`0 \in \nabla P_\beta(y) + \partial h(y) - \partial g(y)`, with
multiplier estimate :math:`\mu = \beta c(y)`. The output point is :math:`y` (it lies in
:math:`\mathrm{dom}\,h`).
Stationarity measure (spec): :math:`\|(z_{k+1} - y_{k+1})/\gamma\|` ("stationarity") and feasibility
:math:`\|c(y)\|`; their sum is the recorded ``kkt_residual``.

Step/penalty coupling: the :math:`y`-subproblem has curvature :math:`L_y = L(\beta) + 1/\gamma` where
:math:`L(\beta)` bounds the curvature of :math:`P_\beta` (give it as ``curvature_bound``); ``lr="auto"`` takes
:math:`\alpha = 1/L_y(\beta_k)`, recomputed each step under a penalty schedule, and a fixed ``lr`` above that
bound warns. :math:`\gamma` must be below :math:`1/\rho_\beta` (the weak-convexity modulus of
:math:`P_\beta`) for
the prox to be single-valued; this is not checkable in general and is the caller's choice.

Deviations / choices (ours, not the paper's): constant momentum :math:`a` unless a callable is given; penalty
constant or the schedules :math:`\beta_k = \beta_0 (k+1)^{1/4}` (``"polyak"``) / :math:`(k+1)^{1/3}`
(``"storm"``) suggested by the spec; no adaptive penalty rule.

Baselines (same module, same recording): :func:`penalty_prox_sgd` (single-loop stochastic penalty proximal
SGD with a subgradient of :math:`g`, optionally with recursive momentum on the whole penalised gradient as in
Alacaoglu & Wright 2024, optionally with a projection after each step: the projected heuristic), and
:func:`penalty_dca` (deterministic penalty DCA with full gradients, for reference solutions).
:func:`kkt_residual` is one KKT residual for every method (one scalar equality constraint). Proximal maps:
:func:`prox_l1`, :func:`prox_l2_norm`, :func:`prox_capped_excess` (the concave part of capped-:math:`\ell_1`),
:func:`prox_zero`.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import Tensor

from optarium._core.result import Result
from optarium._core.seeding import make_generator
from optarium._core.solver import SolverCase, SolverLoop
from optarium._core.validation import (
    check_choice,
    check_in_range,
    check_int,
    check_nonnegative,
    check_positive,
)

__all__ = [
    "CappedExcess",
    "L1Norm",
    "L2Norm",
    "ProxOperator",
    "Zero",
    "kkt_residual",
    "mossp",
    "penalty_dca",
    "penalty_prox_sgd",
    "prox_capped_excess",
    "prox_l1",
    "prox_l2_norm",
    "prox_zero",
    "solver_cases",
]


# ------------------------------------------------------------------------------------------ proximal maps
class ProxOperator:
    r"""A proper closed convex function :math:`\varphi` with its proximal map, value and a subgradient.

    ``op(x, step)`` is :math:`\mathrm{prox}_{\text{step}\,\varphi}(x) = \arg\min_y \varphi(y) + \|y-x\|^2/(2\,
    \text{step})`; ``op.value(x)`` is :math:`\varphi(x)` (0-d tensor); ``op.subgradient(x)`` one element of
    :math:`\partial\varphi(x)`. Any callable ``(x, step) -> Tensor`` can stand in where only the prox is
    needed.
    """

    def __call__(self, x: Tensor, step: float) -> Tensor:  # pragma: no cover - interface
        raise NotImplementedError

    def value(self, x: Tensor) -> Tensor:  # pragma: no cover - interface
        raise NotImplementedError

    def subgradient(self, x: Tensor) -> Tensor:  # pragma: no cover - interface
        raise NotImplementedError


class Zero(ProxOperator):
    """:math:`\\varphi \\equiv 0`: the prox is the identity."""

    def __call__(self, x: Tensor, step: float) -> Tensor:
        return x.clone()

    def value(self, x: Tensor) -> Tensor:
        return x.new_zeros(())

    def subgradient(self, x: Tensor) -> Tensor:
        return torch.zeros_like(x)


class L1Norm(ProxOperator):
    r""":math:`\varphi = \tau\|x\|_1`; prox = soft-thresholding :math:`\mathrm{sign}(x)\max(|x| - s\tau,
    0)`."""

    def __init__(self, tau: float) -> None:
        self.tau = check_nonnegative("tau", tau)

    def __call__(self, x: Tensor, step: float) -> Tensor:
        t = step * self.tau
        return x - torch.clamp(x, -t, t)  # = sign(x) max(|x| - t, 0), in two kernels

    def value(self, x: Tensor) -> Tensor:
        return self.tau * x.abs().sum()

    def subgradient(self, x: Tensor) -> Tensor:
        return self.tau * torch.sign(x)


class L2Norm(ProxOperator):
    r""":math:`\varphi = \tau\|x\|_2` (the whole tensor); prox = block shrinkage
    :math:`x\max(0, 1 - s\tau/\|x\|)`; subgradient :math:`\tau x/\|x\|` (0 at 0)."""

    def __init__(self, tau: float) -> None:
        self.tau = check_nonnegative("tau", tau)

    def __call__(self, x: Tensor, step: float) -> Tensor:
        n = torch.linalg.vector_norm(x).clamp_(min=torch.finfo(x.dtype).tiny)
        return x * (1.0 - (step * self.tau) / n).clamp_(min=0.0)

    def value(self, x: Tensor) -> Tensor:
        return self.tau * torch.linalg.vector_norm(x)

    def subgradient(self, x: Tensor) -> Tensor:
        n = torch.linalg.vector_norm(x)
        return torch.where(n > 0, self.tau * x / torch.clamp(n, min=torch.finfo(x.dtype).tiny), 0.0 * x)


class CappedExcess(ProxOperator):
    r""":math:`\varphi = \tau\sum_i\max(|x_i| - \kappa, 0)`, the concave part of capped-:math:`\ell_1`
    (:math:`\tau\sum_i\min(|x_i|, \kappa) = \tau\|x\|_1 - \varphi`). Prox, per coordinate:
    :math:`v` if :math:`|v|\le\kappa`, :math:`\mathrm{sign}(v)\kappa` if :math:`\kappa < |v| \le \kappa +
    s\tau`,
    else :math:`v - \mathrm{sign}(v)s\tau`."""

    def __init__(self, tau: float, kappa: float) -> None:
        self.tau = check_nonnegative("tau", tau)
        self.kappa = check_positive("kappa", kappa)

    def __call__(self, x: Tensor, step: float) -> Tensor:
        a = x.abs()
        t = step * self.tau
        out = torch.where(a <= self.kappa, a, torch.clamp(a - t, min=self.kappa))
        return torch.sign(x) * out

    def value(self, x: Tensor) -> Tensor:
        return self.tau * torch.clamp(x.abs() - self.kappa, min=0.0).sum()

    def subgradient(self, x: Tensor) -> Tensor:
        return self.tau * torch.sign(x) * (x.abs() > self.kappa).to(x.dtype)


def prox_l1(tau: float) -> L1Norm:
    """:class:`L1Norm`: :math:`\\tau\\|\\cdot\\|_1` with soft-thresholding as its prox."""
    return L1Norm(tau)


def prox_l2_norm(tau: float) -> L2Norm:
    """:class:`L2Norm`: :math:`\\tau\\|\\cdot\\|_2` with block shrinkage as its prox."""
    return L2Norm(tau)


def prox_capped_excess(tau: float, kappa: float) -> CappedExcess:
    """:class:`CappedExcess`: the concave part of the capped-:math:`\\ell_1` DC split."""
    return CappedExcess(tau, kappa)


def prox_zero() -> Zero:
    """:class:`Zero`: the zero function (identity prox)."""
    return Zero()


# ------------------------------------------------------------------------------------------------ helpers
ConstraintVJP = Callable[[Tensor], tuple[Tensor, Tensor]]


def _constraint_vjp(
    constraint: Callable[[Tensor], Tensor] | None, vjp: ConstraintVJP | None
) -> ConstraintVJP:
    """``x -> (c(x), grad c(x)^T c(x))``: the given one, autograd's, or zeros without a constraint."""
    if vjp is not None:
        return vjp
    if constraint is None:
        return lambda x: (x.new_zeros(0), torch.zeros_like(x))

    def auto(x: Tensor) -> tuple[Tensor, Tensor]:
        with torch.enable_grad():
            xr = x.detach().requires_grad_(True)
            c = torch.atleast_1d(constraint(xr))
            (g,) = torch.autograd.grad(0.5 * (c * c).sum(), xr)
        return c.detach(), g

    return auto


def _checked(name: str, out: Any, like: Tensor) -> Tensor:
    if not isinstance(out, Tensor):
        raise TypeError(f"{name}: must return a Tensor, got {type(out).__name__}")
    if out.shape != like.shape:
        raise ValueError(f"{name}: returned shape {tuple(out.shape)}, expected {tuple(like.shape)}")
    return out


def _cost(batch: Any, batch_cost: int | None) -> int:
    if batch_cost is not None:
        return batch_cost
    first = batch[0] if isinstance(batch, (tuple, list)) and batch else batch
    if isinstance(first, Tensor) and first.dim() > 0:
        return int(first.shape[0])
    return 1


def _schedule(name: str, spec: Any, base: float, power: dict[str, float]) -> Callable[[int], float]:
    if spec is None:
        return lambda t: base
    if isinstance(spec, str):
        p = power[check_choice(name, spec, tuple(power))]
        return lambda t: base * (t + 1) ** p
    if callable(spec):
        return spec
    raise TypeError(f"{name}: must be None, one of {tuple(power)} or a callable, got {type(spec).__name__}")


def _momentum(spec: Any) -> Callable[[int], float]:
    if callable(spec):
        return spec
    a = check_in_range("momentum", spec, 0.0, 1.0, low_inclusive=False)
    return lambda t: a


def _check_x0(x0: Any) -> Tensor:
    if not isinstance(x0, Tensor):
        raise TypeError(f"x0: must be a Tensor, got {type(x0).__name__}")
    if not x0.is_floating_point():
        raise TypeError(f"x0: must be floating point, got {x0.dtype}")
    if not bool(torch.isfinite(x0).all()):
        raise ValueError("x0: must be finite")
    return x0.detach().clone()


def _check_callable(name: str, fn: Any, optional: bool = False) -> Any:
    if fn is None and optional:
        return None
    if not callable(fn):
        raise TypeError(f"{name}: must be callable, got {type(fn).__name__}")
    return fn


#: metrics whose non-finite value means a non-finite iterate (the stationarity is ``inf`` at the start)
_WATCH = ("iterate_norm", "constraint_violation")


def _metrics_row(
    y: Tensor,
    c: Tensor,
    calls: int,
    objective: Callable[[Tensor], Any] | None,
    metrics: Callable[[Tensor], Mapping[str, Any]] | None,
) -> dict[str, float]:
    row = {
        "oracle_calls": float(calls),
        "iterate_norm": float(torch.linalg.vector_norm(y)),
        "constraint_violation": float(torch.linalg.vector_norm(c)),
    }
    if objective is not None:
        row["objective"] = float(objective(y))
    if metrics is not None:
        row.update({str(k): float(v) for k, v in metrics(y).items()})
    return row


# ------------------------------------------------------------------------------------------------ MoSSP
def mossp(
    grad_f: Callable[[Tensor, Any], Tensor],
    constraint: Callable[[Tensor], Tensor] | None,
    prox_h: Callable[[Tensor, float], Tensor],
    prox_g: Callable[[Tensor, float], Tensor],
    x0: Tensor,
    sampler: Callable[[torch.Generator], Any],
    *,
    variant: str = "polyak",
    penalty: float = 600.0,
    penalty_schedule: str | Callable[[int], float] | None = None,
    gamma: float = 1.0 / 12.0,
    lr: float | str = "auto",
    relax: float = 0.5,
    momentum: float | Callable[[int], float] = 0.1,
    curvature_bound: Callable[[float], float] | None = None,
    constraint_vjp: ConstraintVJP | None = None,
    max_iter: int = 1000,
    max_oracle_calls: int | None = None,
    batch_cost: int | None = None,
    objective: Callable[[Tensor], Any] | None = None,
    metrics: Callable[[Tensor], Mapping[str, Any]] | None = None,
    tol: float | None = None,
    criterion: str = "stationarity",
    record_every: int = 100,
    time_limit_s: float | None = None,
    seed: int = 0,
    callback: Callable[[int, Mapping[str, Any]], None] | None = None,
) -> Result:
    r"""MoSSP (Polyak or recursive momentum) on :math:`\min E f + h - g` s.t. :math:`c(x) = 0`.

    The iteration is in the module docstring (:mod:`optarium.stochastic.mossp`).

    Args:
        grad_f: ``grad_f(x, batch) -> Tensor`` (shape of ``x``), the minibatch gradient of :math:`f` at ``x``.
        constraint: ``c(x) -> Tensor`` (any shape; scalar allowed), or ``None`` for an unconstrained problem.
        prox_h, prox_g: ``prox(v, step) -> Tensor``, the proximal maps of :math:`h` and :math:`g` (e.g.
            :func:`prox_l1`, :func:`prox_l2_norm`, :func:`prox_zero`).
        x0: the start (its dtype and device are those of every iterate); :math:`y_0 = x_0`.
        sampler: ``sampler(generator) -> batch``, one fresh minibatch per call (the generator is seeded by
            ``seed``).
        variant: ``"polyak"`` (one stochastic gradient per iteration) or ``"storm"`` (two, at
            :math:`y_k` and :math:`y_{k-1}` with the same batch).
        penalty: :math:`\beta` (the start :math:`\beta_0` under a schedule), >= 0.
        penalty_schedule: ``None`` (constant), ``"polyak"`` (:math:`\beta_0 (k+1)^{1/4}`), ``"storm"``
            (:math:`\beta_0 (k+1)^{1/3}`) or a callable ``k -> beta_k``.
        gamma: the Moreau-envelope parameter :math:`\gamma > 0`.
        lr: the inner step :math:`\alpha`, ``0 < lr < gamma``, or ``"auto"``:
            :math:`1/(L(\beta_k) + 1/\gamma)` (needs ``curvature_bound``).
        relax: :math:`\theta \in (0, 1]`.
        momentum: :math:`a \in (0, 1]` (1: no momentum), or a callable ``k -> a_k``.
        curvature_bound: ``beta -> L(beta)``, a bound on the curvature of :math:`P_\beta` on the region
            visited; with a fixed ``lr`` above :math:`1/(L + 1/\gamma)` a ``UserWarning`` is issued (once).
        constraint_vjp: ``x -> (c(x), grad c(x)^T c(x))`` if known in closed form (default: autograd).
        max_iter: iteration budget (status ``max_iter``).
        max_oracle_calls: budget of per-sample stochastic-gradient evaluations; the run stops (status
            ``max_iter``) before an iteration that would exceed it.
        batch_cost: oracle calls of one ``grad_f`` call (default: the leading size of the batch, or of its
            first element when it is a tuple/list; 1 for anything else, e.g. ``None`` for exact gradients).
        objective: ``y -> Phi(y)`` for the history and ``Result.value`` (optional).
        metrics: ``y -> {name: number}``, extra metrics recorded at each history row (evaluation, untimed).
        tol: converged once the ``criterion`` metric is ``<= tol`` at a recorded row (``None``: never).
        criterion: ``"stationarity"`` (:math:`\|z - y\|/\gamma`) or ``"kkt_residual"`` (that plus
            :math:`\|c(y)\|`).
        record_every: history row every this many iterations.
        time_limit_s: solver time budget (status ``timeout``).
        seed: seeds the generator given to ``sampler``.
        callback: called after every iteration ``k`` with ``{"x", "y", "z", "d", "m", "penalty", "lr",
            "momentum", "oracle_calls"}`` (the state after the iteration; ``d`` and ``m`` are the estimates
            used in it).

    Returns:
        A :class:`~optarium._core.Result`: ``x`` = :math:`y` (the output point); ``value`` = ``objective(y)``
        when given, else the final ``kkt_residual``; ``extras``: ``x`` and ``z`` (the outer and concave-prox
        points), ``multiplier`` (:math:`\beta c(y)`), ``penalty``, ``lr``, ``oracle_calls``. History:
        ``oracle_calls``, ``stationarity``, ``constraint_violation``, ``kkt_residual``, and ``objective``
        and ``metrics`` when given.
    """
    _check_callable("grad_f", grad_f)
    _check_callable("constraint", constraint, optional=True)
    _check_callable("prox_h", prox_h)
    _check_callable("prox_g", prox_g)
    _check_callable("sampler", sampler)
    x = _check_x0(x0)
    check_choice("variant", variant, ("polyak", "storm"))
    beta0 = check_nonnegative("penalty", penalty)
    beta_of = _schedule("penalty_schedule", penalty_schedule, beta0, {"polyak": 0.25, "storm": 1.0 / 3.0})
    gamma = check_positive("gamma", gamma)
    _check_callable("curvature_bound", curvature_bound, optional=True)
    if isinstance(lr, str):
        check_choice("lr", lr, ("auto",))
        if curvature_bound is None:
            raise ValueError("lr: 'auto' needs curvature_bound (beta -> curvature of the penalty function)")
        fixed_lr = None
    else:
        fixed_lr = check_positive("lr", lr)
        if fixed_lr >= gamma:
            raise ValueError(f"lr: must be < gamma = {gamma!r}, got {fixed_lr!r}")
    theta = check_in_range("relax", relax, 0.0, 1.0, low_inclusive=False)
    a_of = _momentum(momentum)
    vjp = _constraint_vjp(constraint, _check_callable("constraint_vjp", constraint_vjp, optional=True))
    max_iter = check_int("max_iter", max_iter, minimum=0)
    if max_oracle_calls is not None:
        max_oracle_calls = check_int("max_oracle_calls", max_oracle_calls, minimum=1)
    if batch_cost is not None:
        batch_cost = check_int("batch_cost", batch_cost, minimum=1)
    _check_callable("objective", objective, optional=True)
    _check_callable("metrics", metrics, optional=True)
    if tol is not None:
        tol = check_nonnegative("tol", tol)
    check_choice("criterion", criterion, ("stationarity", "kkt_residual"))
    record_every = check_int("record_every", record_every, minimum=1)
    seed = check_int("seed", seed, minimum=0)
    _check_callable("callback", callback, optional=True)
    storm = variant == "storm"

    gen = make_generator(seed)
    y = x.clone()
    y_prev = y
    m = torch.zeros_like(x)
    c_y, pen_y = vjp(y)
    z = _checked("prox_g", prox_g(x, gamma), x)
    state: dict[str, Any] = {"calls": 0, "beta": beta_of(0), "warned": False, "lr": 0.0, "cost": None}

    def step_size(beta: float) -> float:
        if fixed_lr is None:
            assert curvature_bound is not None
            return 1.0 / (float(curvature_bound(beta)) + 1.0 / gamma)
        if curvature_bound is not None and not state["warned"]:
            bound = 1.0 / (float(curvature_bound(beta)) + 1.0 / gamma)
            if fixed_lr > bound * (1 + 1e-12):
                warnings.warn(
                    f"lr: {fixed_lr:.3g} exceeds 1/L_y = {bound:.3g} at penalty {beta:.3g} "
                    "(curvature_bound + 1/gamma); the inner step may be unstable",
                    UserWarning,
                    stacklevel=3,
                )
                state["warned"] = True
        return fixed_lr

    def evaluate(k: int) -> dict[str, float]:
        # at the start y_0 = x_0 is no approximate prox point yet: no stationarity measure (inf)
        stat = float(torch.linalg.vector_norm(z - y)) / gamma if k > 0 else math.inf
        row = _metrics_row(y, c_y, state["calls"], objective, metrics)
        row["stationarity"] = stat
        row["kkt_residual"] = stat + row["constraint_violation"]
        return row

    loop = SolverLoop(
        max_iter,
        tol=tol,
        criterion=criterion,
        record_every=record_every,
        time_limit_s=time_limit_s,
        objective="objective" if objective is not None else None,
        watch=_WATCH + (("objective",) if objective is not None else ()),
    )
    for k in loop.iterate(evaluate):
        t = k - 1
        beta = float(beta_of(t))
        alpha = step_size(beta)
        a = float(a_of(t))
        if t == 0 and not 0.0 < a <= 1.0:
            raise ValueError(f"momentum: must be in (0, 1], got {a!r}")
        batch = sampler(gen)
        gy = _checked("grad_f", grad_f(y, batch), y)
        cost = _cost(batch, batch_cost)
        state["calls"] += cost
        if t == 0:
            m = gy
        elif storm:
            gp = _checked("grad_f", grad_f(y_prev, batch), y)
            state["calls"] += cost
            m = gy + (1.0 - a) * (m - gp)
        else:
            m = torch.lerp(m, gy, a)
        d = m + beta * pen_y
        y_prev = y
        y = _checked("prox_h", prox_h(y - alpha * (d + (y - x) / gamma), alpha), x)
        z = _checked("prox_g", prox_g(x, gamma), x)
        x = x - theta * (z - y)
        c_y, pen_y = vjp(y)
        state["beta"], state["lr"] = beta, alpha
        if callback is not None:
            with loop.evaluating():
                callback(
                    k,
                    {
                        "x": x,
                        "y": y,
                        "z": z,
                        "d": d,
                        "m": m,
                        "penalty": beta,
                        "lr": alpha,
                        "momentum": a,
                        "oracle_calls": state["calls"],
                    },
                )
        # non-finite iterates are caught at the recorded rows (every metric is watched): NaN persists
        if max_oracle_calls is not None:
            next_cost = cost * (2 if storm else 1)
            if state["calls"] + next_cost > max_oracle_calls:
                loop.stop("max_iter")

    def value() -> float:
        if not bool(torch.isfinite(y).all() & torch.isfinite(x).all()):
            return math.inf
        if objective is not None:
            return float(objective(y))
        return float(torch.linalg.vector_norm(z - y)) / gamma + float(torch.linalg.vector_norm(c_y))

    extras = {
        "x": x,
        "z": z,
        "multiplier": state["beta"] * c_y,
        "penalty": float(state["beta"]),
        "lr": float(state["lr"]),
        "oracle_calls": int(state["calls"]),
    }
    return loop.result(y, value=value, extras=extras)


# ------------------------------------------------------------------------------------------------ baselines
def penalty_prox_sgd(
    grad_f: Callable[[Tensor, Any], Tensor],
    constraint: Callable[[Tensor], Tensor] | None,
    prox_h: Callable[[Tensor, float], Tensor],
    subgrad_g: Callable[[Tensor], Tensor],
    x0: Tensor,
    sampler: Callable[[torch.Generator], Any],
    *,
    estimator: str = "sgd",
    penalty: float = 600.0,
    penalty_schedule: str | Callable[[int], float] | None = None,
    lr: float = 1e-3,
    momentum: float | Callable[[int], float] = 0.1,
    project: Callable[[Tensor], Tensor] | None = None,
    constraint_vjp: ConstraintVJP | None = None,
    max_iter: int = 1000,
    max_oracle_calls: int | None = None,
    batch_cost: int | None = None,
    objective: Callable[[Tensor], Any] | None = None,
    metrics: Callable[[Tensor], Mapping[str, Any]] | None = None,
    record_every: int = 100,
    time_limit_s: float | None = None,
    seed: int = 0,
) -> Result:
    r"""Single-loop stochastic penalty proximal (sub)gradient method: the baselines of MoSSP.

    :math:`x_{k+1} = \Pi(\mathrm{prox}_{\alpha h}(x_k - \alpha d_k))` with
    :math:`G(x;\xi) = \nabla f(x;\xi) + \beta_k\nabla c(x)^\top c(x) - s_g(x)` (:math:`s_g \in \partial g`)
    and

    - ``estimator="sgd"``: :math:`d_k = G(x_k;\xi_k)` (plain single-loop stochastic penalty prox-SGD);
    - ``estimator="storm"``: :math:`d_k = G(x_k;\xi_k) + (1-a)(d_{k-1} - G(x_{k-1};\xi_k))`, recursive
      momentum
      on the whole penalised gradient (the single-loop quadratic penalty of Alacaoglu & Wright 2024, with
      :math:`-g` handled by subgradients; two stochastic gradients per iteration);

    :math:`\Pi` is ``project`` (e.g. normalisation onto the sphere: the projected heuristic, run with
    ``penalty=0``) or the identity. Arguments and ``Result`` as in :func:`mossp` (``x`` the last iterate;
    history ``oracle_calls``, ``constraint_violation`` and ``objective``/``metrics`` when given;
    ``extras``: ``multiplier`` :math:`\beta c(x)`, ``oracle_calls``).
    """
    _check_callable("grad_f", grad_f)
    _check_callable("constraint", constraint, optional=True)
    _check_callable("prox_h", prox_h)
    _check_callable("subgrad_g", subgrad_g)
    _check_callable("sampler", sampler)
    x = _check_x0(x0)
    check_choice("estimator", estimator, ("sgd", "storm"))
    beta0 = check_nonnegative("penalty", penalty)
    beta_of = _schedule("penalty_schedule", penalty_schedule, beta0, {"polyak": 0.25, "storm": 1.0 / 3.0})
    alpha = check_positive("lr", lr)
    a_of = _momentum(momentum)
    _check_callable("project", project, optional=True)
    vjp = _constraint_vjp(constraint, _check_callable("constraint_vjp", constraint_vjp, optional=True))
    max_iter = check_int("max_iter", max_iter, minimum=0)
    if max_oracle_calls is not None:
        max_oracle_calls = check_int("max_oracle_calls", max_oracle_calls, minimum=1)
    if batch_cost is not None:
        batch_cost = check_int("batch_cost", batch_cost, minimum=1)
    _check_callable("objective", objective, optional=True)
    _check_callable("metrics", metrics, optional=True)
    record_every = check_int("record_every", record_every, minimum=1)
    seed = check_int("seed", seed, minimum=0)
    storm = estimator == "storm"
    gen = make_generator(seed)
    c_x, pen_x = vjp(x)
    state: dict[str, Any] = {"calls": 0, "beta": beta_of(0)}
    x_prev, pen_prev = x, pen_x
    d = torch.zeros_like(x)

    def evaluate(k: int) -> dict[str, float]:
        return _metrics_row(x, c_x, state["calls"], objective, metrics)

    loop = SolverLoop(
        max_iter,
        record_every=record_every,
        time_limit_s=time_limit_s,
        objective="objective" if objective is not None else None,
    )
    for k in loop.iterate(evaluate):
        t = k - 1
        beta = float(beta_of(t))
        batch = sampler(gen)
        cost = _cost(batch, batch_cost)
        G = _checked("grad_f", grad_f(x, batch), x) + beta * pen_x - _checked("subgrad_g", subgrad_g(x), x)
        state["calls"] += cost
        if storm and t > 0:
            a = float(a_of(t))
            Gp = grad_f(x_prev, batch) + beta * pen_prev - subgrad_g(x_prev)
            state["calls"] += cost
            d = G + (1.0 - a) * (d - Gp)
        else:
            d = G
        x_prev, pen_prev = x, pen_x
        x = _checked("prox_h", prox_h(x - alpha * d, alpha), x)
        if project is not None:
            x = _checked("project", project(x), x)
        c_x, pen_x = vjp(x)
        state["beta"] = beta
        if max_oracle_calls is not None:  # non-finite iterates are caught at the recorded rows
            if state["calls"] + cost * (2 if storm else 1) > max_oracle_calls:
                loop.stop("max_iter")

    def value() -> float:
        if not bool(torch.isfinite(x).all()):
            return math.inf
        return float(objective(x)) if objective is not None else float(torch.linalg.vector_norm(c_x))

    extras = {"multiplier": state["beta"] * c_x, "oracle_calls": int(state["calls"])}
    return loop.result(x, value=value, extras=extras)


def penalty_dca(
    grad_f: Callable[[Tensor], Tensor],
    constraint: Callable[[Tensor], Tensor] | None,
    prox_h: Callable[[Tensor, float], Tensor],
    subgrad_g: Callable[[Tensor], Tensor],
    x0: Tensor,
    *,
    penalty: float,
    lr: float,
    inner_iter: int = 50,
    inner_tol: float = 1e-10,
    max_iter: int = 200,
    tol: float | None = 1e-9,
    constraint_vjp: ConstraintVJP | None = None,
    objective: Callable[[Tensor], Any] | None = None,
    metrics: Callable[[Tensor], Mapping[str, Any]] | None = None,
    record_every: int = 1,
    time_limit_s: float | None = None,
) -> Result:
    r"""Deterministic penalty DCA with full gradients (the reference solutions of the MoSSP experiment).

    Outer step :math:`k`: :math:`s_k \in \partial g(x_k)`, then :math:`x_{k+1} \approx \arg\min_x
    P_\beta(x) + h(x) - \langle s_k, x\rangle` by at most ``inner_iter`` proximal-gradient steps of size
    ``lr``
    (warm-started; stopped once a step moves less than ``inner_tol``). ``grad_f(x)`` is the exact gradient of
    :math:`f`. Converged once the outer move :math:`\|x_{k+1} - x_k\|` (metric ``step_norm``) is at most
    ``tol``. ``Result.x`` the last iterate; ``extras``: ``multiplier`` :math:`\beta c(x)`, ``inner_steps``.
    """
    _check_callable("grad_f", grad_f)
    _check_callable("constraint", constraint, optional=True)
    _check_callable("prox_h", prox_h)
    _check_callable("subgrad_g", subgrad_g)
    x = _check_x0(x0)
    beta = check_nonnegative("penalty", penalty)
    alpha = check_positive("lr", lr)
    inner_iter = check_int("inner_iter", inner_iter, minimum=1)
    inner_tol = check_nonnegative("inner_tol", inner_tol)
    max_iter = check_int("max_iter", max_iter, minimum=0)
    if tol is not None:
        tol = check_nonnegative("tol", tol)
    vjp = _constraint_vjp(constraint, _check_callable("constraint_vjp", constraint_vjp, optional=True))
    record_every = check_int("record_every", record_every, minimum=1)
    c_x, pen_x = vjp(x)
    state: dict[str, Any] = {"move": math.inf, "inner": 0}

    def evaluate(k: int) -> dict[str, float]:
        row = _metrics_row(x, c_x, 0, objective, metrics)
        del row["oracle_calls"]
        row["step_norm"] = state["move"]
        return row

    loop = SolverLoop(
        max_iter,
        tol=tol,
        criterion="step_norm",
        record_every=record_every,
        time_limit_s=time_limit_s,
        objective="objective" if objective is not None else None,
        watch=("constraint_violation",),
    )
    for _ in loop.iterate(evaluate):
        s = _checked("subgrad_g", subgrad_g(x), x)
        x_old = x
        for _j in range(inner_iter):
            x_new = _checked("prox_h", prox_h(x - alpha * (grad_f(x) + beta * pen_x - s), alpha), x)
            move = float(torch.linalg.vector_norm(x_new - x))
            x = x_new
            c_x, pen_x = vjp(x)
            state["inner"] += 1
            if move <= inner_tol:
                break
        state["move"] = float(torch.linalg.vector_norm(x - x_old))
        if not bool(torch.isfinite(x).all()):
            loop.stop("diverged")

    def value() -> float:
        return float(objective(x)) if objective is not None else float(torch.linalg.vector_norm(c_x))

    return loop.result(x, value=value, extras={"multiplier": beta * c_x, "inner_steps": int(state["inner"])})


# ------------------------------------------------------------------------------------------------ KKT
def kkt_residual(
    u: Tensor,
    grad: Tensor,
    constraint_value: Tensor | float,
    constraint_grad: Tensor,
    prox_h: Callable[[Tensor, float], Tensor],
    subgrad_g: Tensor,
    *,
    multiplier: float | None = None,
    grid: int = 201,
    rounds: int = 6,
) -> tuple[float, float, float]:
    r"""One KKT residual for every method, for a single scalar equality constraint.

    :math:`r(u) = \min_\mu \|u - \mathrm{prox}_h(u - \nabla f(u) - \mu\nabla c(u) + s_g(u))\| + |c(u)|` (unit
    prox step). ``grad`` = :math:`\nabla f(u)` (exact), ``subgrad_g`` = :math:`s_g(u)`. The multiplier is
    ``multiplier`` if given, else found by a 1-D grid search (``grid`` points, ``rounds`` refinements,
    batched)
    centred at the least-squares multiplier of the smooth part. Returns ``(residual, stationarity part,
    mu)``.
    """
    c = float(constraint_value)
    n = constraint_grad
    base = u - grad + subgrad_g
    if multiplier is not None:
        stat = float(torch.linalg.vector_norm(u - prox_h(base - multiplier * n, 1.0)))
        return stat + abs(c), stat, float(multiplier)
    nn = float((n * n).sum())
    if nn == 0.0:
        stat = float(torch.linalg.vector_norm(u - prox_h(base, 1.0)))
        return stat + abs(c), stat, 0.0
    center = float(((subgrad_g - grad) * n).sum()) / nn
    half = 2.0 * (abs(center) + 1.0)
    best_mu, best = center, math.inf
    for _ in range(check_int("rounds", rounds, minimum=1)):
        mus = torch.linspace(
            center - half, center + half, check_int("grid", grid, minimum=3), dtype=u.dtype, device=u.device
        )
        cand = base.unsqueeze(0) - mus.unsqueeze(-1) * n.reshape(1, -1)
        vals = torch.linalg.vector_norm(u.reshape(1, -1) - prox_h(cand, 1.0).reshape(len(mus), -1), dim=-1)
        i = int(torch.argmin(vals))
        if float(vals[i]) < best:
            best, best_mu = float(vals[i]), float(mus[i])
        center, half = best_mu, 4.0 * half / (grid - 1)
    return best + abs(c), best, best_mu


# ------------------------------------------------------------------------------------- conformance cases
def _case_data(dtype: torch.dtype, device: Any) -> tuple[Tensor, Tensor]:
    g = torch.Generator().manual_seed(5)
    A = torch.randn(40, 6, generator=g, dtype=torch.float64)
    b = A @ torch.tensor([1.0, -0.5, 0.0, 0.0, 0.3, 0.0], dtype=torch.float64)
    b = b + 0.1 * torch.randn(40, generator=g, dtype=torch.float64)
    return A.to(dtype=dtype, device=device), b.to(dtype=dtype, device=device)


_CASE_ALPHA = 0.05


def _case_solve(*, dtype: torch.dtype, device: Any, seed: int, batch: int | None = None, **kw: Any) -> Result:
    A, b = _case_data(dtype, device)
    n = A.shape[0]

    def grad_f(x: Tensor, idx: Tensor | None) -> Tensor:
        if idx is None:
            return A.T @ (A @ x - b) / n
        Ab, bb = A[idx], b[idx]
        return Ab.T @ (Ab @ x - bb) / len(idx)

    def sampler(gen: torch.Generator) -> Tensor | None:
        return None if batch is None else torch.randint(0, n, (batch,), generator=gen).to(device)

    args: dict[str, Any] = {
        "variant": "polyak",
        "penalty": 0.0,
        "gamma": 1.0,
        "lr": 0.3,
        "relax": 1.0,
        "momentum": 1.0,
        "max_iter": 5000,
        "tol": 1e-9,
        "record_every": 10,
        "seed": seed,
    }
    args.update(kw)
    x0 = torch.zeros(6, dtype=dtype, device=device)
    return mossp(grad_f, None, prox_l1(_CASE_ALPHA), prox_zero(), x0, sampler, **args)


def _case_residual(res: Result) -> float:
    """The lasso prox-gradient residual ||x - prox_{alpha||.||_1}(x - grad f(x))|| at res.x (float64)."""
    A, b = _case_data(torch.float64, "cpu")
    x = res.x.detach().to(torch.float64).cpu()
    g = A.T @ (A @ x - b) / A.shape[0]
    return float(torch.linalg.vector_norm(x - prox_l1(_CASE_ALPHA)(x - g, 1.0)))


def solver_cases() -> list[SolverCase]:
    """The case of :func:`mossp`: a 6-d lasso (g = 0, no constraint) with exact gradients."""
    return [
        SolverCase(
            name="stochastic-mossp-lasso",
            solve=_case_solve,
            statuses={
                "converged": {},
                "max_iter": {"max_iter": 3, "tol": None},
                # inner step 9 with curvature ~ 4: the y-step expands by |1 - 9 (L + 1/gamma)| > 1
                "diverged": {"gamma": 10.0, "lr": 9.0, "tol": None},
                "timeout": {"time_limit_s": 0.0, "tol": None},
            },
            max_iter=3,
            tolerance_holds=lambda r: _case_residual(r) <= 1e-6,
            optimality=_case_residual,
            optimality_tol=1e-6,
            invalid=[
                ({"gamma": 0.0}, "gamma"),
                ({"lr": 2.0}, "lr"),
                ({"momentum": 0.0}, "momentum"),
                ({"relax": 1.5}, "relax"),
                ({"variant": "adam"}, "variant"),
                ({"lr": "auto"}, "lr"),
            ],
            determinism={"batch": 8, "max_iter": 30, "tol": None, "momentum": 0.3},
            stochastic=True,
        )
    ]
