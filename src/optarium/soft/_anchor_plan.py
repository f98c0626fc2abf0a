"""Transport of standardized values onto fixed anchors: the plan behind the axis-wise ops' ``ot`` method.

Reference: A. Paulus, A. R. Geist, V. Musil, S. Hoffmann, O. Beker, G. Martius, "SoftJAX & SoftTorch:
Empowering Automatic Differentiation Libraries with Informative Gradients", ICML 2026, arXiv:2603.08824 (the
``ot`` method, after Cuturi et al. 2019, arXiv:1905.11885, and Xie et al. 2020).

For standardized values x (..., n), anchors a (m,) and masses mu (n,), nu (m,), the cost is
C_ij = (x_i - a_j)^2 and ``mode`` picks the regulariser at strength ``softness``: ``"smooth"`` is entropic OT
(:func:`optarium.ot.sinkhorn`, log-domain Sinkhorn ending on the column half-step, so each column
Gamma[:, j] / nu_j, the SoftIndex over the n inputs, sums to one to rounding), ``"c0"``/``"c1"``/``"c2"`` the
p = 2, 3/2, 4/3 regularisers (:func:`optarium.ot.smooth_ot`, damped Newton on the dual). This module only
builds the cost, clamps and renormalises the masses (as SoftTorch does), and maps the solvers' statuses to
SoftTorch's behaviour (a warning after the iteration cap, ``FloatingPointError`` on non-finite potentials).

Deliberate deviations from the SoftTorch 0.1.1 wheel (which goes through POT's ``sinkhorn_log`` and L-BFGS):
(i) Sinkhorn ends on the other half-step (the anchor marginal is the exact one); (ii) implicit gradients are
solved to convergence, not with 5 CG steps (which leave 10-30 % Jacobian errors); (iii) the p-norm modes use
Newton instead of L-BFGS and stop on the relative marginal error n max(|Gamma 1 - mu|_inf, |Gamma^T 1 -
nu|_inf) <= lbfgs_tol. Everything is batched over leading dimensions and runs in the input's dtype and device;
gradients flow to ``x`` and ``anchors`` through C, ``mu`` and ``nu`` are constants.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import torch

from optarium.ot import OTResult, sinkhorn, smooth_ot

__all__ = ["OT_MODES", "transport_plan"]

#: The relaxed modes of the ``ot`` method.
OT_MODES: tuple[str, ...] = ("smooth", "c0", "c1", "c2")
#: Exponent p of the p-norm regulariser (s / p) sum Gamma^p of each non-smooth mode.
_P = {"c0": 2.0, "c1": 1.5, "c2": 4.0 / 3.0}
#: Conjugate exponents q = p / (p - 1) of each non-smooth mode.
_Q = {"c0": 2.0, "c1": 3.0, "c2": 4.0}


def _check_status(res: OTResult, what: str, tol_name: str, tol: float, max_iter: int) -> None:
    if res.status == "diverged":
        raise FloatingPointError(f"optarium.soft OT: {what} produced non-finite values")
    if res.status == "max_iter":
        warnings.warn(
            f"optarium.soft OT: {what} stopped after {max_iter} iterations (marginal error "
            f"{res.marginal_error:.2e} > {tol_name} {tol:.1e})",
            stacklevel=4,
        )


def transport_plan(
    x: torch.Tensor,
    anchors: torch.Tensor,
    nu: torch.Tensor,
    softness: float,
    mode: str,
    *,
    mu: torch.Tensor | None = None,
    sinkhorn_tol: float = 1e-5,
    sinkhorn_max_iter: int = 10_000,
    lbfgs_tol: float = 1e-5,
    lbfgs_max_iter: int = 2_000,
    implicit: bool = True,
    return_potentials: bool = False,
) -> Any:
    """Regularised OT plan between values ``x`` (..., n) and ``anchors`` (m,) with cost (x_i - a_j)^2.

    Returns Gamma (..., n, m) with rows summing to ``mu`` (default uniform 1/n) and columns to ``nu``; the
    column marginal holds to rounding in ``"smooth"`` mode (each column Gamma[..., :, j] / nu_j is a SoftIndex
    over the n inputs; SoftTorch's ``n * Gamma`` is the same thing for uniform mu), the row marginal to
    ``sinkhorn_tol`` (relative). ``mode`` is ``"smooth"`` (entropic, :func:`optarium.ot.sinkhorn`) or
    ``"c0"``/``"c1"``/``"c2"`` (p = 2, 3/2, 4/3 regularisers, :func:`optarium.ot.smooth_ot`, both marginals to
    ``lbfgs_tol`` relative). ``anchors``, ``nu`` and ``mu`` may carry batch dimensions broadcastable with
    ``x``'s. Gradients: implicit differentiation solved to convergence (``implicit=True``) or unrolled
    Sinkhorn (``implicit=False``, smooth only; the p-norm modes always use implicit gradients).
    ``return_potentials=True`` returns ``(plan, f (..., n), g (..., m))`` with the dual potentials.
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x: must be a torch.Tensor, got {type(x).__name__}")
    if mode not in OT_MODES:
        raise ValueError(f"mode: must be one of {', '.join(map(repr, OT_MODES))}, got {mode!r}")
    if isinstance(softness, torch.Tensor):
        softness = float(softness)
    if not (isinstance(softness, (int, float)) and math.isfinite(softness) and softness > 0):
        raise ValueError(f"softness: must be finite and > 0, got {softness!r}")
    softness = float(softness)
    if not x.is_floating_point():
        x = x.to(torch.get_default_dtype())
    dtype, device = x.dtype, x.device
    anchors = torch.as_tensor(anchors, dtype=dtype, device=device)
    nu = torch.as_tensor(nu, dtype=dtype, device=device)
    n = x.shape[-1]
    m = anchors.shape[-1]
    if n < 1 or m < 1:
        raise ValueError(f"x: need at least one value and one anchor, got n={n}, m={m}")
    if nu.shape[-1] != m:
        raise ValueError(f"nu: must have {m} entries (one per anchor), got shape {tuple(nu.shape)}")
    if mu is None:
        mu = torch.full((n,), 1.0 / n, dtype=dtype, device=device)
    else:
        mu = torch.as_tensor(mu, dtype=dtype, device=device)
        if mu.shape[-1] != n:
            raise ValueError(f"mu: must have {n} entries, got shape {tuple(mu.shape)}")
    batch = torch.broadcast_shapes(x.shape[:-1], anchors.shape[:-1], nu.shape[:-1], mu.shape[:-1])
    C = (x.unsqueeze(-1) - anchors.unsqueeze(-2)).square()
    C = C.expand(*batch, n, m).reshape(-1, n, m)
    B = C.shape[0]
    # Masses: clamp away exact zeros (as the wheel does) and renormalise to a common total.
    tiny = 1e-12 if dtype == torch.float64 else 1e-30
    mu_b = mu.detach().expand(*batch, n).reshape(B, n).clamp_min(tiny)
    nu_b = nu.detach().expand(*batch, m).reshape(B, m).clamp_min(tiny)
    mu_b = mu_b / mu_b.sum(-1, keepdim=True)
    nu_b = nu_b / nu_b.sum(-1, keepdim=True)
    if mode == "smooth":
        max_iter = int(sinkhorn_max_iter)
        res = sinkhorn(
            C, mu_b, nu_b, reg=softness, tol=sinkhorn_tol, max_iter=max_iter,
            grad="implicit" if implicit else "unrolled",
        )  # fmt: skip
        _check_status(res, "Sinkhorn", "sinkhorn_tol", float(sinkhorn_tol), max_iter)
    else:
        max_iter = int(lbfgs_max_iter)
        res = smooth_ot(C, mu_b, nu_b, reg=softness, p=_P[mode], tol=lbfgs_tol, max_iter=max_iter)
        _check_status(res, "the p-norm dual solver", "lbfgs_tol", float(lbfgs_tol), max_iter)
    f, g = res.potentials
    plan = res.plan.reshape(*batch, n, m)
    return (plan, f.reshape(*batch, n), g.reshape(*batch, m)) if return_potentials else plan


def _solve(*args: Any, **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`transport_plan` that also returns the dual potentials f (..., n) and g (..., m)."""
    return transport_plan(*args, return_potentials=True, **kwargs)
