r"""Nested DRO: an optimistic phi-divergence "cleaning" step over a pessimistic OT "robustification" step.

Paper: Jinyi Huang, Jinlong Lei, Guodong Shi, "Robust Learning via Nested Distributionally Robust
Optimization", ICML 2026 poster 64376 (no preprint, algorithm or code was found). The problem is the
abstract's; everything below it is **reconstructed** from the abstract and standard DRO duality (spec
``shared/papers/nested-dro.md``):

.. math::
    \min_\theta\ \inf_{Q:\,D_\phi(Q\|\hat P_n)\le\rho}\ \sup_{Q':W_p(Q',Q)\le\delta} E_{Q'}\ell(\theta; Z).

Since :math:`Q \ll \hat P_n`, :math:`Q = \sum_i q_i\delta_{z_i}`; the transport moves features only (labels
fixed), at cost :math:`\|x'-x\|_2^p`, so the budget is :math:`\delta^p` (``radius`` is :math:`\delta`, the
convention of :class:`~optarium.dro.Wasserstein`).

**Inner step** (OT duality, Blanchet & Murthy 2019; Gao & Kleywegt 2023): for a fixed multiplier
:math:`\gamma`,
:math:`\sup_{W_2(Q',Q)\le\delta} E_{Q'}\ell \le \gamma\delta^2 + \sum_i q_i\varphi_\gamma(z_i)`
with :math:`\varphi_\gamma(z_i) = \sup_{x'} \ell(x', y_i) - \gamma\|x'-x_i\|^2`, equality at the optimal
:math:`\gamma`. Because the two infima (over :math:`q` and over :math:`\gamma`) commute, the nested value is
:math:`\inf_{\gamma}\ \gamma\delta^2 + \inf_q \sum_i q_i\varphi_\gamma(z_i)`: the outer player reweights the
*robust per-sample losses* :math:`\varphi_\gamma(z_i)`. Exact closed forms for linear models (derived):

- :math:`p = 1` (or 2) and a loss that is :math:`L`-Lipschitz in the residual/score with that growth
  (absolute, Huber for ``p = 1``): the inner worst case is :math:`E_Q\ell + \delta L\|\theta\|_2`
  (:func:`~optarium.dro.linear_wasserstein_penalty`), a shift common to all points, so the weights do not
  depend on the geometry (the decoupling claim);
- :math:`p = 2` and the squared loss: the inner worst case is
  :math:`(\sqrt{E_Q r^2} + \delta\|\theta\|_2)^2`, increasing in :math:`E_Q r^2`, so the optimistic weights
  are those of the squared residuals alone, and the nested value is
  :math:`(\sqrt{\inf_q \sum_i q_i r_i^2} + \delta\|\theta\|_2)^2`.

**Outer step** (optimistic = loss-based reweighting):
:math:`\inf_{q} \sum_i q_i r_i = -\sup_q \sum_i q_i(-r_i)`, the exact worst case of the negated losses
(:func:`optarium.dro.worst_case`) over :class:`~optarium.dro.ChiSquare` (``outer="chi2"``; when no weight is
clipped at 0 the value is :math:`\bar r - \sqrt{2\rho\,\mathrm{Var}_n(r)}` with the population variance, a
variance-*rewarded* risk because the outer player is optimistic, our reading of the abstract's
"variance-regularized risk"; the paper's sign convention is not verified), :class:`~optarium.dro.KL`
(``"kl"``: :math:`q \propto e^{-r/\tau}`) or :class:`~optarium.dro.CVaR` with :math:`\alpha = 1-\rho`
(``"cvar"``: the trimmed mean that drops the :math:`\rho`-fraction of largest losses). High-loss points lose
weight; high-leverage points that are fitted well keep it.

The pieces:

- :func:`optimistic_weights`: the outer step on given losses (the weights and the value, differentiable in the
  losses with gradient :math:`q`).
- :func:`nested_linear_value`: the exact nested value of a linear model at given parameters (the closed
  forms above).
- :class:`NestedDRORegressor`: a linear regressor fitted by alternating exact q-steps and convex
  :math:`\theta`-steps (each step decreases the nested value; the problem is non-convex, so it is a
  coordinate-descent local solution, warm-started at least squares).
- :class:`NestedDRO` and :func:`nested_dro_fit`: the criterion for any torch model (inner step: WRM's fixed
  point :func:`~optarium.dro.wasserstein_fixed_point` at a penalty :math:`\gamma`, fixed or adapted by
  the dual step :math:`\gamma \leftarrow \max(\gamma_{\min}, \gamma - \eta_\gamma(\delta^2 -
  \sum_i q_i\|x'_i-x_i\|^2))`) and full-batch training that returns a :class:`~optarium._core.Result`.

Limits (tested): ``rho = 0`` gives plain WDRO (uniform weights); ``radius = 0`` gives the optimistic phi-DRO,
equal to ``-worst_case(-losses, set).value``; on small instances the value equals an exact cvxpy program.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from optarium._core.result import Result
from optarium._core.solver import SolverCase, SolverLoop
from optarium._core.validation import (
    check_choice,
    check_in_range,
    check_int,
    check_nonnegative,
    check_positive,
)
from optarium.dro.ambiguity import KL, AmbiguitySet, ChiSquare, CVaR
from optarium.dro.wasserstein import linear_wasserstein_penalty, wasserstein_fixed_point
from optarium.dro.worst_case import worst_case

__all__ = [
    "OUTERS",
    "NestedDRO",
    "NestedDRORegressor",
    "Reweighting",
    "nested_dro_fit",
    "nested_linear_value",
    "optimistic_weights",
    "outer_ambiguity",
    "solver_cases",
]

#: The outer (optimistic) divergences.
OUTERS: tuple[str, ...] = ("chi2", "kl", "cvar")
#: The losses of :class:`NestedDRORegressor` / :func:`nested_linear_value`.
LINEAR_LOSSES: tuple[str, ...] = ("squared", "absolute", "huber")


@dataclass(frozen=True)
class Reweighting:
    """The outer step's solution.

    Attributes:
        value: :math:`\\sum_i q_i r_i` (or the nested value), differentiable in the losses (gradient
            ``q``).
        q: the optimistic weights, on the simplex and inside the divergence ball (detached).
        divergence: the divergence reached by ``q`` (for ``"cvar"`` the largest ``q_i / p_i``).
    """

    value: Tensor
    q: Tensor
    divergence: Tensor


def outer_ambiguity(outer: str, rho: float) -> AmbiguitySet:
    """The divergence ball of the outer step: ``ChiSquare(rho)``, ``KL(rho)`` or ``CVaR(1 - rho)``.

    For ``"cvar"``, ``rho`` in [0, 1) is the fraction of the mass that may be dropped.
    """
    check_choice("outer", outer, OUTERS)
    if outer == "cvar":
        rho = check_in_range("rho", rho, 0.0, 1.0, high_inclusive=False)
        return CVaR(1.0 - rho)
    rho = check_nonnegative("rho", rho)
    return ChiSquare(rho) if outer == "chi2" else KL(rho)


def optimistic_weights(
    losses: Tensor, outer: str = "chi2", rho: float = 0.1, weights: Tensor | None = None
) -> Reweighting:
    r"""The optimistic reweighting :math:`\inf_{q:\,D_\phi(q\|p)\le\rho} \sum_i q_i\,\text{losses}_i`.

    Solved exactly as :math:`-\sup_q \sum_i q_i(-\text{losses}_i)` by :func:`optarium.dro.worst_case`
    (batched over leading dimensions). ``weights`` are the empirical weights ``p`` (uniform if ``None``).

    Example:
        >>> import torch
        >>> r = optimistic_weights(torch.tensor([1.0, 2.0, 3.0, 10.0]), "cvar", 0.25)
        >>> float(r.value), r.q.tolist()
        (2.0, [0.3333333432674408, 0.3333333432674408, 0.3333333432674408, 0.0])
    """
    if not isinstance(losses, Tensor):
        raise TypeError(f"losses: must be a Tensor, got {type(losses).__name__}")
    amb = outer_ambiguity(outer, rho)
    wc = worst_case(-losses.detach(), amb, weights)
    q = wc.q.detach()
    return Reweighting(value=(q * losses).sum(-1), q=q, divergence=wc.divergence.detach())


def _check_xy(X: Any, y: Any) -> tuple[Tensor, Tensor]:
    if not isinstance(X, Tensor) or not X.is_floating_point():
        raise TypeError(f"X: must be a floating Tensor, got {type(X).__name__}")
    if X.dim() != 2 or X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"X: must have shape (n, d) with n, d >= 1, got {tuple(X.shape)}")
    if not bool(torch.isfinite(X).all()):
        raise ValueError("X: must be finite")
    if not isinstance(y, Tensor) or not y.is_floating_point():
        raise TypeError(f"y: must be a floating Tensor, got {type(y).__name__}")
    if y.shape != X.shape[:1]:
        raise ValueError(f"y: must have shape ({X.shape[0]},), got {tuple(y.shape)}")
    if not bool(torch.isfinite(y).all()):
        raise ValueError("y: must be finite")
    return X, y


def _default_p(loss: str, p: int | None) -> int:
    if p is None:
        return 2 if loss == "squared" else 1
    check_choice("p", p, (1, 2))
    if loss == "squared" and p != 2:
        raise ValueError("p: the squared loss has an infinite type-1 worst case; use p=2")
    if loss == "huber" and p != 1:
        raise ValueError("p: the Huber loss has a closed-form worst case for p=1 only")
    return p


def _per_sample(loss: str, r: Tensor, huber_delta: float) -> tuple[Tensor, float]:
    """Per-sample losses of residuals ``r`` and the loss's Lipschitz constant (``inf`` for squared)."""
    if loss == "squared":
        return r * r, math.inf
    if loss == "absolute":
        return r.abs(), 1.0
    a = r.abs()
    return torch.where(a <= huber_delta, 0.5 * r * r, huber_delta * (a - 0.5 * huber_delta)), huber_delta


def _value_from(loss: str, rw_value: Tensor, theta: Tensor, radius: float, lip: float) -> Tensor:
    if loss == "squared":
        return (torch.sqrt(rw_value.clamp_min(0.0)) + radius * torch.linalg.vector_norm(theta)) ** 2
    return rw_value + linear_wasserstein_penalty(theta, radius, lipschitz=lip)


def nested_linear_value(
    theta: Tensor,
    X: Tensor,
    y: Tensor,
    *,
    intercept: float | Tensor = 0.0,
    outer: str = "chi2",
    rho: float = 0.1,
    radius: float = 0.1,
    p: int | None = None,
    loss: str = "squared",
    huber_delta: float = 1.35,
    weights: Tensor | None = None,
) -> Reweighting:
    r"""The exact nested DRO value of the linear model :math:`x^\top\theta + b` (module docstring).

    Args:
        theta: the coefficients, shape ``(d,)``; ``intercept``: :math:`b` (not transported, not penalised).
        X, y: the data, shapes ``(n, d)`` and ``(n,)``.
        outer, rho: the outer divergence (``"chi2"``, ``"kl"``, ``"cvar"``) and its radius.
        radius: the transport radius :math:`\delta` (budget :math:`\delta^p`).
        p: 1 or 2 (default: 2 for the squared loss, 1 otherwise).
        loss: ``"squared"`` (p = 2), ``"absolute"`` (p = 1 or 2), ``"huber"`` (p = 1, slope ``huber_delta``).
        weights: the empirical weights (uniform if ``None``).

    Returns:
        A :class:`Reweighting` whose ``value`` is differentiable in ``theta`` and ``intercept`` and whose
        ``q`` are the optimistic weights.
    """
    X, y = _check_xy(X, y)
    if not isinstance(theta, Tensor) or not theta.is_floating_point() or theta.shape != X.shape[1:]:
        raise TypeError(f"theta: must be a floating Tensor of shape ({X.shape[1]},)")
    check_choice("loss", loss, LINEAR_LOSSES)
    p = _default_p(loss, p)
    radius = check_nonnegative("radius", radius)
    huber_delta = check_positive("huber_delta", huber_delta)
    per, lip = _per_sample(loss, y - X @ theta - intercept, huber_delta)
    rw = optimistic_weights(per, outer, rho, weights)
    return Reweighting(_value_from(loss, rw.value, theta, radius, lip), rw.q, rw.divergence)


class NestedDRORegressor:
    r"""Nested-DRO linear regression, fitted by alternating exact weight steps and convex parameter steps.

    Minimises :func:`nested_linear_value` over :math:`(\theta, b)`: from the least-squares fit, repeat
    (1) :math:`q \leftarrow` the optimistic weights of the current per-sample losses (exact), (2)
    :math:`(\theta, b) \leftarrow \arg\min F(\theta, b; q)` with :math:`q` fixed, a convex problem
    (squared: :math:`\|\sqrt q\odot r\|_2 + \delta\|\theta\|_2`; absolute and Huber:
    :math:`\sum_i q_i\ell(r_i) + \delta L\|\theta\|_2`), by iteratively reweighted least squares, a
    majorise-minimise scheme that decreases the objective at every step. Both steps decrease the nested
    value; the alternation stops once its relative decrease is at most ``tol``.

    Args:
        loss, outer, rho, radius, p, huber_delta: as in :func:`nested_linear_value`.
        fit_intercept: fit :math:`b` (default) or keep it at 0.
        max_alternations: the iteration budget of the alternation.
        tol: the relative decrease that counts as converged.
        inner_iter: the most reweighted-least-squares iterations of each parameter step.

    Attributes (after :meth:`fit`): ``coef_``, ``intercept_``, ``weights_`` (the optimistic ``q``),
    ``result_`` (the :class:`~optarium._core.Result`; history ``objective`` and ``decrease``).

    Example:
        >>> import torch
        >>> X = torch.randn(100, 3, dtype=torch.float64)
        >>> y = X @ torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
        >>> y[:5] += 50.0  # five gross outliers
        >>> reg = NestedDRORegressor(rho=0.1, radius=0.01).fit(X, y)
        >>> bool(reg.weights_[:5].max() < 1e-3)
        True
    """

    def __init__(
        self,
        loss: str = "squared",
        outer: str = "chi2",
        rho: float = 0.1,
        radius: float = 0.1,
        *,
        p: int | None = None,
        huber_delta: float = 1.35,
        fit_intercept: bool = True,
        max_alternations: int = 50,
        tol: float = 1e-10,
        inner_iter: int = 500,
    ) -> None:
        self.loss = check_choice("loss", loss, LINEAR_LOSSES)
        self.p = _default_p(loss, p)
        outer_ambiguity(outer, rho)  # validates outer and rho
        self.outer, self.rho = outer, float(rho)
        self.radius = check_nonnegative("radius", radius)
        self.huber_delta = check_positive("huber_delta", huber_delta)
        if not isinstance(fit_intercept, bool):
            raise TypeError(f"fit_intercept: must be a bool, got {type(fit_intercept).__name__}")
        self.fit_intercept = fit_intercept
        self.max_alternations = check_int("max_alternations", max_alternations, minimum=0)
        self.tol = check_positive("tol", tol)
        self.inner_iter = check_int("inner_iter", inner_iter, minimum=1)

    def _value(self, theta: Tensor, b: Tensor, X: Tensor, y: Tensor, w: Tensor | None) -> Reweighting:
        return nested_linear_value(
            theta,
            X,
            y,
            intercept=b,
            outer=self.outer,
            rho=self.rho,
            radius=self.radius,
            p=self.p,
            loss=self.loss,
            huber_delta=self.huber_delta,
            weights=w,
        )

    def _theta_step(self, theta: Tensor, b: Tensor, X: Tensor, y: Tensor, q: Tensor) -> tuple[Tensor, Tensor]:
        r"""Minimise the convex :math:`F(\theta, b; q)` by majorise-minimise (weighted ridge steps).

        Each term is majorised at the current point by a quadratic that touches it there:
        :math:`\sqrt{u} \le u/(2\sqrt{u_k}) + \sqrt{u_k}/2` (for the squared loss's
        :math:`\|\sqrt q\odot r\|` and the penalty :math:`\|\theta\|`),
        :math:`|r| \le r^2/(2|r_k|) + |r_k|/2` and Huber's
        :math:`h(r) \le \min(1, \delta_h/|r_k|)\,r^2/2 + c`;
        the minimiser of the sum is one linear solve, and the objective never increases (iteratively
        reweighted least squares).
        """
        n, d = X.shape
        A = torch.cat([X, torch.ones(n, 1, dtype=X.dtype, device=X.device)], 1) if self.fit_intercept else X
        w = torch.cat([theta, b.reshape(1)]) if self.fit_intercept else theta.clone()
        pen = torch.zeros(A.shape[1], dtype=X.dtype, device=X.device)
        pen[:d] = 1.0
        lip = self.huber_delta if self.loss == "huber" else 1.0
        eps = 1e-12 * (1.0 + float(y.abs().max()))
        for _ in range(self.inner_iter):
            r = y - A @ w
            if self.loss == "squared":
                a = q / torch.sqrt((q * r * r).sum()).clamp_min(eps)
            elif self.loss == "absolute":
                a = q / r.abs().clamp_min(eps)
            else:
                a = q * (self.huber_delta / r.abs().clamp_min(eps)).clamp_max(1.0)
            c = self.radius * lip / torch.linalg.vector_norm(w[:d]).clamp_min(eps)
            H = A.T @ (a[:, None] * A) + torch.diag(c * pen)
            w_new = torch.linalg.solve(H, A.T @ (a * y))
            done = float((w_new - w).abs().max()) <= 1e-12 * (1.0 + float(w.abs().max()))
            w = w_new
            if done:
                break
        if self.fit_intercept:
            return w[:d], w[d]
        return w, b

    def fit(self, X: Any, y: Any, sample_weight: Tensor | None = None) -> NestedDRORegressor:
        """Fit on ``X`` (n, d) and ``y`` (n,) (tensors, or arrays converted to float64 tensors).

        ``sample_weight`` (non-negative, summing to 1) replaces the uniform empirical weights.
        """
        X = torch.as_tensor(X, dtype=torch.float64) if not isinstance(X, Tensor) else X
        y = torch.as_tensor(y, dtype=X.dtype) if not isinstance(y, Tensor) else y
        X, y = _check_xy(X, y)
        n, d = X.shape
        ones = torch.ones(n, 1, dtype=X.dtype, device=X.device)
        A = torch.cat([X, ones], 1) if self.fit_intercept else X
        sol = torch.linalg.lstsq(A, y[:, None]).solution[:, 0]
        theta = sol[:d].clone()
        b = sol[d].clone() if self.fit_intercept else torch.zeros((), dtype=X.dtype, device=X.device)
        state: dict[str, Any] = {"rw": self._value(theta, b, X, y, sample_weight), "dec": math.inf}
        state["f"] = float(state["rw"].value)
        loop = SolverLoop(
            self.max_alternations, tol=self.tol, criterion="decrease", blowup=None, watch=("objective",)
        )

        def evaluate(k: int) -> dict[str, float]:
            return {"objective": state["f"], "decrease": state["dec"]}

        for _ in loop.iterate(evaluate):
            new_theta, new_b = self._theta_step(theta, b, X, y, state["rw"].q)
            rw = self._value(new_theta, new_b, X, y, sample_weight)
            f = float(rw.value)
            if f <= state["f"]:  # a step that does not decrease (rounding) is not taken
                theta, b = new_theta, new_b
                state["dec"] = (state["f"] - f) / (1.0 + abs(state["f"]))
                state.update(rw=rw, f=f)
            else:
                state["dec"] = 0.0
        self.coef_ = theta
        self.intercept_ = b
        self.weights_ = state["rw"].q
        self.result_ = loop.result(
            {"coef": theta, "intercept": b}, value=state["f"], extras={"weights": state["rw"].q}
        )
        return self

    def predict(self, X: Tensor) -> Tensor:
        """Predictions :math:`X\\theta + b` of the fitted model."""
        if not hasattr(self, "coef_"):
            raise RuntimeError("NestedDRORegressor: call fit before predict")
        if not isinstance(X, Tensor):
            X = torch.as_tensor(X, dtype=self.coef_.dtype)
        return X @ self.coef_ + self.intercept_


# ---------------------------------------------------------------------------------------- torch models


class NestedDRO:
    r"""The nested DRO criterion for a torch model: ``loss, weights = crit(loss_fn, model, X, y)``.

    Inner step (``p = 2``, features transported): the worst-case points
    :math:`x'_i = \arg\max_{x'} \ell(f_\theta(x'), y_i) - \gamma\|x'-x_i\|^2` by WRM's fixed point
    (:func:`~optarium.dro.wasserstein_fixed_point`, at most ``inner_steps`` steps; exact when
    :math:`\gamma` exceeds half the loss's smoothness in :math:`x`). The robust per-sample losses
    :math:`\varphi_i = \ell(x'_i) - \gamma\|x'_i - x_i\|^2` get the optimistic weights :math:`q`
    (:func:`optimistic_weights`), and the returned loss is :math:`\gamma\delta^2 + \sum_i q_i\varphi_i`
    with :math:`q` and :math:`x'` detached, whose gradient in the parameters is
    :math:`\sum_i q_i\nabla_\theta\ell(x'_i)` (Danskin). With ``gamma=None`` the penalty adapts after every
    call by the dual step :math:`\gamma \leftarrow \max(\gamma_{\min}, \gamma - \eta_\gamma(\delta^2 -
    \sum_i q_i\|x'_i - x_i\|^2))` (the spec's step 4), starting at ``gamma0``; it is doubled whenever the
    fixed point does not contract. ``p = 1`` is the exact type-1 form for a ``torch.nn.Linear`` model and a
    ``lipschitz``-Lipschitz loss: :math:`\sum_i q_i\ell_i + \delta L\|W\|_2`. ``radius = 0`` skips the inner
    step (optimistic phi-DRO); ``rho = 0`` gives uniform weights (WRM / WDRO).

    Args:
        outer, rho: the outer divergence and radius (:func:`outer_ambiguity`).
        radius: the transport radius :math:`\delta`.
        p: 1 or 2.
        gamma: a fixed penalty (``> 0``), or ``None`` to adapt it.
        gamma0, gamma_lr, gamma_min: the adaptive penalty's start, step and floor.
        inner_steps: fixed-point steps per call.
        lipschitz: the loss's Lipschitz constant in the score (``p = 1`` only).

    Attributes: ``gamma`` (the current penalty), ``last`` (a dict with ``value``, ``transport_cost`` and
    ``contracted`` of the last call).
    """

    def __init__(
        self,
        outer: str = "chi2",
        rho: float = 0.1,
        *,
        inner: str = "wasserstein",
        radius: float = 0.1,
        p: int = 2,
        transport: str = "features",
        gamma: float | None = None,
        gamma0: float = 1.0,
        gamma_lr: float = 1.0,
        gamma_min: float = 1e-3,
        inner_steps: int = 10,
        lipschitz: float = 1.0,
    ) -> None:
        outer_ambiguity(outer, rho)
        self.outer, self.rho = outer, float(rho)
        check_choice("inner", inner, ("wasserstein",))
        check_choice("transport", transport, ("features",))
        self.radius = check_nonnegative("radius", radius)
        self.p = check_choice("p", p, (1, 2))
        self.fixed_gamma = gamma is not None
        self.gamma = check_positive("gamma", gamma) if gamma is not None else check_positive("gamma0", gamma0)
        self.gamma_lr = check_positive("gamma_lr", gamma_lr)
        self.gamma_min = check_positive("gamma_min", gamma_min)
        self.inner_steps = check_int("inner_steps", inner_steps, minimum=1)
        self.lipschitz = check_nonnegative("lipschitz", lipschitz)
        self.last: dict[str, Any] = {}

    def __call__(
        self, loss_fn: Callable[[Tensor, Tensor], Tensor], model: torch.nn.Module, X: Tensor, y: Tensor
    ) -> tuple[Tensor, Tensor]:
        """The differentiable nested loss and the detached optimistic weights at the model's parameters.

        ``loss_fn(output, y) -> Tensor[n]`` is the per-sample loss; ``X`` is ``(n, d)``; ``y`` any labels
        with first dimension ``n``.
        """
        if not callable(loss_fn):
            raise TypeError(f"loss_fn: must be callable, got {type(loss_fn).__name__}")
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"model: must be a torch.nn.Module, got {type(model).__name__}")
        if not isinstance(X, Tensor) or not X.is_floating_point() or X.dim() != 2 or X.shape[0] == 0:
            raise TypeError("X: must be a floating Tensor of shape (n, d) with n >= 1")
        if not isinstance(y, Tensor) or y.shape[:1] != X.shape[:1]:
            raise ValueError(f"y: must be a Tensor with first dimension {X.shape[0]}")
        n = X.shape[0]

        def per(z: Tensor) -> Tensor:
            out = loss_fn(model(z), y)
            if not isinstance(out, Tensor) or out.shape != (n,):
                raise ValueError(f"loss_fn: must return one loss per sample, shape ({n},)")
            return out

        sq: Tensor | None = None  # squared transport distances of the inner step (p = 2 only)
        cost = 0.0
        if self.radius == 0.0:
            phi = per(X)
            cost, contracted, extra = 0.0, True, phi.new_zeros(())
        elif self.p == 1:
            if not isinstance(model, torch.nn.Linear):
                raise TypeError("model: p=1 has an exact form for torch.nn.Linear models only")
            phi = per(X)
            extra = linear_wasserstein_penalty(model.weight, self.radius, lipschitz=self.lipschitz)
            cost, contracted = 0.0, True
        else:
            for _ in range(60):  # raise gamma while the fixed point does not contract (non-concave inner)
                z, contracted, steps = wasserstein_fixed_point(per, X, self.gamma, max_steps=self.inner_steps)
                finite = bool(torch.isfinite(z).all())
                # non-finite at the first step: the loss or its gradient at the data is; gamma cannot help
                if contracted or (steps == self.inner_steps and finite) or (steps == 1 and not finite):
                    break
                # stopped early without converging: the moves grew or became non-finite
                self.gamma *= 2.0
            z = z.detach()
            sq = ((z - X) ** 2).sum(1)
            phi = per(z) - self.gamma * sq
            extra = phi.new_tensor(self.gamma * self.radius**2)
        if not bool(torch.isfinite(phi.detach()).all()):
            nan = phi.sum() * math.nan
            self.last = {"value": math.nan, "transport_cost": math.nan, "contracted": False}
            return nan, torch.full((n,), math.nan, dtype=X.dtype, device=X.device)
        rw = optimistic_weights(phi, self.outer, self.rho)
        loss = rw.value + extra
        if sq is not None:
            cost = float((rw.q * sq).sum())
            if not self.fixed_gamma:
                self.gamma = max(self.gamma_min, self.gamma - self.gamma_lr * (self.radius**2 - cost))
        self.last = {"value": float(loss.detach()), "transport_cost": cost, "contracted": bool(contracted)}
        return loss, rw.q


def _squared(out: Tensor, y: Tensor) -> Tensor:
    return (out.reshape(y.shape) - y) ** 2


def nested_dro_fit(
    model: torch.nn.Module,
    X: Tensor,
    y: Tensor,
    crit: NestedDRO,
    *,
    loss_fn: Callable[[Tensor, Tensor], Tensor] | None = None,
    optimizer: torch.optim.Optimizer | None = None,
    lr: float = 0.1,
    epochs: int = 200,
    tol: float = 1e-6,
    record_every: int = 1,
    time_limit_s: float | None = None,
) -> Result:
    r"""Full-batch training of ``model`` on the nested DRO criterion ``crit``.

    Args:
        model: any torch module mapping ``X`` to outputs; trained in place.
        X, y: the data (``X`` floating, ``(n, d)``).
        crit: a :class:`NestedDRO`.
        loss_fn: ``loss_fn(output, y) -> Tensor[n]``; default the squared error.
        optimizer: an optimizer over ``model``'s parameters; default full-batch gradient descent
            (``torch.optim.SGD``) with step ``lr``.
        epochs: the iteration budget (one full-batch step each).
        tol: converged once the parameters' gradient norm is at most ``tol``.
        record_every, time_limit_s: as in :class:`~optarium._core.solver.SolverLoop`.

    Returns:
        A :class:`~optarium._core.Result`: ``x`` the parameters (name -> detached tensor), ``value`` the
        nested loss there, ``extras``: ``weights`` (the optimistic ``q``), ``gamma``, ``transport_cost``.
        History: ``objective``, ``grad_norm``, ``gamma``.
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model: must be a torch.nn.Module, got {type(model).__name__}")
    if not isinstance(crit, NestedDRO):
        raise TypeError(f"crit: must be a NestedDRO, got {type(crit).__name__}")
    if not isinstance(X, Tensor) or not X.is_floating_point():
        raise TypeError(f"X: must be a floating Tensor, got {type(X).__name__}")
    if not bool(torch.isfinite(X).all()):
        raise ValueError("X: must be finite")
    epochs = check_int("epochs", epochs, minimum=0)
    tol = check_positive("tol", tol)
    lr = check_positive("lr", lr)
    fn = _squared if loss_fn is None else loss_fn
    params = [p for p in model.parameters() if p.requires_grad]
    opt = optimizer if optimizer is not None else torch.optim.SGD(params, lr=lr)
    state: dict[str, Any] = {}

    def refresh() -> None:
        opt.zero_grad()
        with torch.enable_grad():
            loss, q = crit(fn, model, X, y)
            if bool(torch.isfinite(loss.detach())):
                loss.backward()
        grads = [p.grad for p in params if p.grad is not None]
        gn = float(torch.sqrt(sum((g * g).sum() for g in grads))) if grads else 0.0
        state.update(f=float(loss.detach()), q=q, g=gn if math.isfinite(float(loss.detach())) else math.nan)

    refresh()
    loop = SolverLoop(
        epochs, tol=tol, criterion="grad_norm", record_every=record_every, time_limit_s=time_limit_s
    )

    def evaluate(k: int) -> dict[str, float]:
        return {"objective": state["f"], "grad_norm": state["g"], "gamma": crit.gamma}

    for _ in loop.iterate(evaluate):
        if not math.isfinite(state["f"]):
            loop.stop("diverged")
            continue
        opt.step()
        refresh()

    x = {name: p.detach().clone() for name, p in model.named_parameters()}
    extras: Mapping[str, Any] = {
        "weights": state["q"].detach(),
        "gamma": float(crit.gamma),
        "transport_cost": float(crit.last.get("transport_cost", math.nan)),
    }
    return loop.result(x, value=state["f"], extras=extras)


# ------------------------------------------------------------------------------ conformance cases


def _case_data(dtype: torch.dtype, device: Any) -> tuple[Tensor, Tensor]:
    g = torch.Generator().manual_seed(11)
    X = torch.randn(30, 3, generator=g, dtype=torch.float64)
    y = X @ torch.tensor([0.5, -0.3, 0.2], dtype=torch.float64) + 0.3 * torch.randn(
        30, generator=g, dtype=torch.float64
    )
    y[:3] += 4.0
    return X.to(dtype=dtype, device=device), y.to(dtype=dtype, device=device)


_CASE_GAMMA, _CASE_RADIUS, _CASE_RHO = 5.0, 0.2, 0.1


def _case_model(dtype: torch.dtype, device: Any) -> torch.nn.Linear:
    model = torch.nn.Linear(3, 1, bias=False).to(dtype=dtype, device=device)
    with torch.no_grad():
        model.weight.fill_(0.1)
    return model


def _case_solve(*, dtype: torch.dtype, device: Any, seed: int, poison: bool = False, **kw: Any) -> Result:
    X, y = _case_data(dtype, device)
    crit = NestedDRO("kl", _CASE_RHO, radius=_CASE_RADIUS, gamma=_CASE_GAMMA, inner_steps=200)

    def loss_fn(out: Tensor, yy: Tensor) -> Tensor:
        val = (out[:, 0] - yy) ** 2
        return val * math.nan if poison else val

    args: dict[str, Any] = {"lr": 0.3, "epochs": 400, "tol": 1e-7}
    args.update(kw)
    return nested_dro_fit(_case_model(dtype, device), X, y, crit, loss_fn=loss_fn, **args)


def _case_grad_norm(r: Result) -> float:
    """The gradient norm of the closed form: KL-optimistic weights of gamma r^2/(gamma - |theta|^2)."""
    X, y = _case_data(torch.float64, "cpu")
    th = r.x["weight"].detach().to(torch.float64).cpu().reshape(-1).requires_grad_(True)
    s = (th * th).sum()
    phi = _CASE_GAMMA * (y - X @ th) ** 2 / (_CASE_GAMMA - s)
    f = optimistic_weights(phi, "kl", _CASE_RHO).value + _CASE_GAMMA * _CASE_RADIUS**2
    return float(torch.autograd.grad(f, th)[0].norm())


def solver_cases() -> list[SolverCase]:
    """The case of :func:`nested_dro_fit`: KL-nested WRM on a linear model, checked by its closed form."""
    return [
        SolverCase(
            name="dro-nested-dro-fit",
            solve=_case_solve,
            statuses={
                "converged": {},
                "max_iter": {"epochs": 3},
                "diverged": {"poison": True},
                "timeout": {"time_limit_s": 0.0},
            },
            max_iter=3,
            tolerance_holds=lambda r: _case_grad_norm(r) <= 1e-6,
            optimality=_case_grad_norm,
            optimality_tol=1e-5,
            invalid=[({"epochs": -1}, "epochs"), ({"tol": 0.0}, "tol"), ({"lr": 0.0}, "lr")],
        )
    ]
