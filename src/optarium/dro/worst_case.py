r"""Exact worst cases over the reweighting ambiguity sets of an empirical distribution.

For losses :math:`\ell_1..\ell_n` at support points with weights :math:`p` (uniform by default),
:func:`worst_case` solves

.. math:: \sup_{q \in \mathcal{Q}(p)}\ \sum_i q_i \ell_i

exactly for the sets of :mod:`optarium.dro.ambiguity` (KL, chi^2, TV, CVaR), batched over leading
dimensions, in pure torch, without an iterative solver's tolerance except for KL's one-dimensional dual:

- **KL** (dual :math:`\inf_{\lambda>0} \lambda\rho + \lambda\log\sum_i p_i e^{\ell_i/\lambda}`, Hu & Hong
  2013): :math:`q \propto p\,e^{\ell/\lambda^*}`, with :math:`\lambda^*` the root of
  :math:`\mathrm{KL}(q_\lambda\|p) = \rho` found by Newton's method on :math:`\log\lambda`, safeguarded by
  bisection (the divergence decreases in :math:`\lambda`, with slope
  :math:`-\mathrm{Var}_q(\ell)/\lambda^3`), to float64 resolution; once
  :math:`\rho \ge -\log P(\arg\max\ell)` the worst case is :math:`P` conditioned on the largest loss
  (:math:`\lambda^* = 0`).
- **chi^2** (dual :math:`\inf_\eta\ \eta + \sqrt{1+2\rho}\,\|(\ell-\eta)_+\|_{L^2(p)}`, Duchi & Namkoong
  2021): the dual is convex and piecewise smooth in :math:`\eta`; with the top-:math:`m` losses active its
  stationary point is :math:`\eta_m = \mu_m - \sqrt{v_m/(c^2P_m - 1)}` (:math:`P_m, \mu_m, v_m` the mass,
  weighted mean and variance of the active set, :math:`c^2 = 1+2\rho`). Every candidate is evaluated with
  suffix sums and a sorted search (:math:`O(n\log n)`, no :math:`n\times n` table) and the smallest dual
  value wins; :math:`q_i = c\,p_i(\ell_i-\eta^*)_+/\|(\ell-\eta^*)_+\|_{L^2(p)}`.
- **TV**: mass :math:`\min(\rho, 1 - P(\arg\max\ell))` moves from the smallest losses to the largest.
- **CVaR**: :math:`q_i \le p_i/\alpha` filled from the largest loss down (the fractional weight on the
  boundary sample makes it exact for any :math:`\alpha`).

Ties in the largest loss share the moved mass in proportion to :math:`p`. The returned ``value`` is
:math:`\sum_i q_i\ell_i` with :math:`q` detached, so autograd gives :math:`\partial\,\text{value}/\partial
\ell = q^*` (Danskin's theorem: the worst case's gradient in the losses is its maximiser); gradients in
``weights`` are not propagated. The worst-case arithmetic runs in float64 and the outputs follow the
losses' dtype and device.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from optarium.dro.ambiguity import KL, AmbiguitySet, ChiSquare, CVaR, TotalVariation, Wasserstein

__all__ = ["WorstCase", "check_weights", "worst_case"]

_KL_ITERATIONS = 200  # safeguarded Newton steps on log(lambda / loss range) in [-60, 60]; ~10 usually suffice


@dataclass(frozen=True)
class WorstCase:
    """The solution of :func:`worst_case`.

    Attributes:
        value: the worst-case expected loss, shape ``losses.shape[:-1]``; differentiable in the losses.
        q: the worst-case weights (same shape as ``losses``), on the simplex and inside the set.
        divergence: the divergence (or ``1/alpha``-bound use, for CVaR the largest ``q/p``) reached by ``q``.
        dual: the optimal dual variables (``"lambda"`` for KL, ``"eta"`` for chi^2 and CVaR), detached.
    """

    value: Tensor
    q: Tensor
    divergence: Tensor
    dual: dict[str, Tensor] = field(default_factory=dict)


def check_weights(weights: Any, losses: Tensor, name: str = "weights") -> Tensor:
    """``weights`` as a float64 tensor broadcast to ``losses``' shape: non-negative, summing to 1 per row.

    ``None`` gives uniform weights. Raises ``TypeError``/``ValueError`` naming ``name``.
    """
    n = losses.shape[-1]
    if weights is None:
        return torch.full(losses.shape, 1.0 / n, dtype=torch.float64, device=losses.device)
    if not isinstance(weights, Tensor):
        raise TypeError(f"{name}: must be a Tensor or None, got {type(weights).__name__}")
    if not weights.is_floating_point():
        raise TypeError(f"{name}: must be a floating tensor, got {weights.dtype}")
    if weights.shape[-1:] != losses.shape[-1:]:
        raise ValueError(
            f"{name}: last dimension must be {n} (the number of losses), got {tuple(weights.shape)}"
        )
    try:
        w = torch.broadcast_to(weights.detach().to(torch.float64), losses.shape)
    except RuntimeError as exc:
        raise ValueError(
            f"{name}: shape {tuple(weights.shape)} does not broadcast to {tuple(losses.shape)}"
        ) from exc
    if not bool(torch.isfinite(w).all()) or bool((w < 0).any()):
        raise ValueError(f"{name}: must be finite and >= 0")
    if not bool(torch.allclose(w.sum(-1), torch.ones((), dtype=torch.float64, device=w.device), atol=1e-8)):
        raise ValueError(f"{name}: must sum to 1 along the last dimension")
    return w


def _check_losses(losses: Any) -> Tensor:
    if not isinstance(losses, Tensor):
        raise TypeError(f"losses: must be a Tensor, got {type(losses).__name__}")
    if not losses.is_floating_point():
        raise TypeError(f"losses: must be a floating tensor, got {losses.dtype}")
    if losses.dim() == 0 or losses.shape[-1] == 0:
        raise ValueError(f"losses: must have a non-empty last dimension, got shape {tuple(losses.shape)}")
    if not bool(torch.isfinite(losses.detach()).all()):
        raise ValueError("losses: must be finite")
    return losses


def worst_case(losses: Tensor, ambiguity: AmbiguitySet, weights: Tensor | None = None) -> WorstCase:
    r"""The exact worst-case expected loss over a reweighting ambiguity set (see the module docstring).

    Args:
        losses: per-sample losses, shape ``(..., n)``; leading dimensions are independent problems.
        ambiguity: a :class:`~optarium.dro.KL`, :class:`~optarium.dro.ChiSquare`,
            :class:`~optarium.dro.TotalVariation` or :class:`~optarium.dro.CVaR` set
            (:class:`~optarium.dro.Wasserstein` moves support points: use
            :func:`optarium.dro.wasserstein_worst_case`).
        weights: the empirical weights ``p`` (broadcastable to ``losses``), uniform if ``None``.

    Returns:
        A :class:`WorstCase`; ``value.backward()`` puts ``q`` into ``losses.grad``.

    Example:
        >>> import torch
        >>> from optarium.dro import CVaR, worst_case
        >>> float(worst_case(torch.tensor([1.0, 2.0, 3.0, 4.0]), CVaR(0.5)).value)
        3.5
    """
    losses = _check_losses(losses)
    if not isinstance(ambiguity, AmbiguitySet):
        raise TypeError(
            f"ambiguity: must be an AmbiguitySet (KL, ChiSquare, ...), got {type(ambiguity).__name__}"
        )
    if isinstance(ambiguity, Wasserstein):
        raise TypeError("ambiguity: a Wasserstein ball moves support points; use wasserstein_worst_case")
    p = check_weights(weights, losses)
    x = losses.detach().to(torch.float64)
    if isinstance(ambiguity, KL):
        q, div, dual = _kl(x, p, ambiguity.radius)
    elif isinstance(ambiguity, ChiSquare):
        q, div, dual = _chi2(x, p, ambiguity.radius)
    elif isinstance(ambiguity, TotalVariation):
        q, div, dual = _tv(x, p, ambiguity.radius)
    elif isinstance(ambiguity, CVaR):
        q, div, dual = _cvar(x, p, ambiguity.alpha)
    else:
        raise TypeError(f"ambiguity: unsupported set {type(ambiguity).__name__}")
    q_out = q.to(losses.dtype)
    value = (q_out * losses).sum(-1)
    cast = {k: v.to(losses.dtype) for k, v in dual.items()}
    return WorstCase(value=value, q=q_out, divergence=div.to(losses.dtype), dual=cast)


def _top_mass(x: Tensor, p: Tensor) -> tuple[Tensor, Tensor]:
    """The indicator of the largest loss (ties included, among positive weights) and its mass."""
    pos = p > 0
    top = x.masked_fill(~pos, -math.inf).amax(-1, keepdim=True)
    on_top = (x == top) & pos
    return on_top, (p * on_top).sum(-1, keepdim=True)


def _kl(x: Tensor, p: Tensor, rho: float) -> tuple[Tensor, Tensor, dict[str, Tensor]]:
    if rho == 0.0:  # the ball is P itself (the multiplier is infinite)
        return p.clone(), torch.zeros_like(p[..., 0]), {"lambda": torch.full_like(p[..., 0], math.inf)}
    on_top, p_top = _top_mass(x, p)
    logp = torch.log(p)  # -inf where p = 0: those samples keep weight 0
    span = (x.amax(-1, keepdim=True) - x.amin(-1, keepdim=True)).clamp_min(1e-300)
    xs = (x - x.amax(-1, keepdim=True)) / span  # in [-1, 0]; lambda = span * exp(t)

    def at(t: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        logq = torch.log_softmax(xs * torch.exp(-t) + logp, -1)
        q = torch.exp(logq)
        kl = torch.where(q > 0, q * (logq - logp.clamp_min(-1e300)), torch.zeros_like(q)).sum(
            -1, keepdim=True
        )
        mean = (q * xs).sum(-1, keepdim=True)
        var = (q * (xs - mean) ** 2).sum(-1, keepdim=True)
        return q, kl, var * torch.exp(-2.0 * t)  # d KL / dt = -Var_q(l) / lambda^2 (scaled units)

    lo = torch.full_like(span, -60.0)  # tiny lambda: divergence near -log p_top
    hi = torch.full_like(span, 60.0)  # huge lambda: divergence near 0
    t = torch.zeros_like(span)
    # rows solved without a root: the point mass on the largest loss is inside the ball, or all losses tie
    settled = (-torch.log(p_top) <= rho) | (span <= 1e-300)
    for _ in range(
        0 if bool(settled.all()) else _KL_ITERATIONS
    ):  # Newton on t = log(lambda / span), safeguarded by bisection
        _, kl, slope = at(t)
        gap = kl - rho
        lo = torch.where(gap > 0, t, lo)  # divergence too large: lambda must grow
        hi = torch.where(gap > 0, hi, t)
        newton = t + gap / slope.clamp_min(1e-300)
        inside = (newton > lo) & (newton < hi) & torch.isfinite(newton)
        t_next = torch.where(inside, newton, 0.5 * (lo + hi))
        if bool(((torch.abs(t_next - t) <= 1e-15 * (1.0 + torch.abs(t))) | settled).all()):
            t = t_next
            break
        t = t_next
    q, _, _ = at(t)
    lam = span * torch.exp(t)
    saturated = (-torch.log(p_top) <= rho).expand_as(q)
    conditioned = torch.where(on_top, p / p_top, torch.zeros_like(p))
    flat = (span <= 1e-300).expand_as(q)  # all losses equal: q = p
    q = torch.where(saturated, conditioned, q)
    q = torch.where(flat, p, q)
    lam = torch.where(saturated[..., :1], torch.zeros_like(lam), lam)
    lam = torch.where(flat[..., :1], torch.full_like(lam, math.inf), lam)
    ratio = torch.where(q > 0, q * torch.log(q / p.clamp_min(1e-300)), torch.zeros_like(q))
    return q, ratio.sum(-1), {"lambda": lam.squeeze(-1)}


def _chi2(x: Tensor, p: Tensor, rho: float) -> tuple[Tensor, Tensor, dict[str, Tensor]]:
    if rho == 0.0:  # the ball is P itself (eta -> -inf)
        return p.clone(), torch.zeros_like(p[..., 0]), {"eta": torch.full_like(p[..., 0], -math.inf)}
    c2 = 1.0 + 2.0 * rho
    c = math.sqrt(c2)
    x0 = x - x.amax(-1, keepdim=True)  # centred at the max for the cancellations below
    s, order = torch.sort(x0, -1)
    ps = torch.gather(p, -1, order)
    zero = torch.zeros_like(s[..., :1])

    def suffix(v: Tensor) -> Tensor:  # suffix[j] = sum_{i >= j} v_i, with suffix[n] = 0
        return torch.cat([torch.flip(torch.cumsum(torch.flip(v, [-1]), -1), [-1]), zero], -1)

    pm, m1, m2 = suffix(ps), suffix(ps * s), suffix(ps * s * s)
    mass, mean_num, sq_num = pm[..., :-1], m1[..., :-1], m2[..., :-1]
    safe_mass = mass.clamp_min(1e-300)
    mu = mean_num / safe_mass
    var = (sq_num / safe_mass - mu * mu).clamp_min(0.0)
    a = c2 * mass - 1.0
    ok = a > 0
    eta = torch.where(
        ok, mu - torch.sqrt(var / torch.where(ok, a, torch.ones_like(a))), s[..., -1:].expand_as(mu)
    )
    top = s[..., -1:]
    cand = torch.cat([eta, top], -1)  # the largest loss is the boundary candidate (point mass)

    def dual(e: Tensor) -> Tensor:
        k = torch.searchsorted(s.contiguous(), e.contiguous(), right=True)  # first index with s > e
        pk, q1, q2 = (torch.gather(v, -1, k) for v in (pm, m1, m2))
        tail = (q2 - 2.0 * e * q1 + e * e * pk).clamp_min(0.0)
        return e + c * torch.sqrt(tail)

    g = dual(cand)
    eta_star = torch.gather(cand, -1, torch.argmin(g, -1, keepdim=True))
    r = (x0 - eta_star).clamp_min(0.0)
    norm = torch.sqrt((p * r * r).sum(-1, keepdim=True))
    on_top, p_top = _top_mass(x, p)
    point = torch.where(on_top, p / p_top, torch.zeros_like(p))
    q = torch.where(norm > 0, c * p * r / norm.clamp_min(1e-300), point)
    q = q / q.sum(-1, keepdim=True)  # remove the last ulp of drift
    ratio = torch.where(p > 0, q / p.clamp_min(1e-300), torch.zeros_like(q))
    div = 0.5 * (p * (ratio - 1.0) ** 2).sum(-1)
    return q, div, {"eta": (eta_star + x.amax(-1, keepdim=True)).squeeze(-1)}


def _tv(x: Tensor, p: Tensor, rho: float) -> tuple[Tensor, Tensor, dict[str, Tensor]]:
    on_top, p_top = _top_mass(x, p)
    moved = torch.minimum(torch.full_like(p_top, rho), 1.0 - p_top)
    # remove `moved` mass from the smallest losses up (stable sort keeps the top set last)
    key = torch.where(on_top, torch.full_like(x, math.inf), x)
    s_idx = torch.sort(key, dim=-1, stable=True).indices
    ps = torch.gather(p, -1, s_idx)
    before = torch.cumsum(ps, -1) - ps
    taken_sorted = (moved - before).clamp_min(0.0).minimum(ps)
    taken = torch.zeros_like(p).scatter(-1, s_idx, taken_sorted)
    q = p - taken + torch.where(on_top, moved * p / p_top, torch.zeros_like(p))
    return q, 0.5 * (q - p).abs().sum(-1), {}


def _cvar(x: Tensor, p: Tensor, alpha: float) -> tuple[Tensor, Tensor, dict[str, Tensor]]:
    cap = p / alpha
    s_idx = torch.sort(x, dim=-1, descending=True, stable=True).indices
    cs = torch.gather(cap, -1, s_idx)
    before = torch.cumsum(cs, -1) - cs
    q_sorted = (1.0 - before).clamp_min(0.0).minimum(cs)
    q = torch.zeros_like(p).scatter(-1, s_idx, q_sorted)
    # eta: the value at risk, the smallest loss that still carries weight
    carried = torch.where(q > 0, x, torch.full_like(x, math.inf)).amin(-1)
    ratio = torch.where(p > 0, q / p.clamp_min(1e-300), torch.zeros_like(q))
    return q, ratio.amax(-1), {"eta": carried}
