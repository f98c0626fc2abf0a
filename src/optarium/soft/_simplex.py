"""Regularised projections onto the unit simplex, one per smoothness mode.

Reference: A. Paulus, A. R. Geist, V. Musil, S. Hoffmann, O. Beker, G. Martius, "SoftJAX & SoftTorch:
Empowering Automatic Differentiation Libraries with Informative Gradients", ICML 2026, arXiv:2603.08824
(the "softsort" / "neuralsort" axis-wise methods reduce to this projection). Euclidean case: L. Condat,
"Fast projection onto the simplex and the l1 ball", Math. Program. 2016 (arXiv:1309.1541), and Duchi et al.,
ICML 2008; p-norm cases: Blondel, Martins & Niculae, "Learning with Fenchel-Young losses", JMLR 2020.

Along one axis of ``z`` (scaled by the softness s) we solve

    y* = argmax_{y in simplex} <z, y> / s - R(y),

* ``smooth``: R(y) = sum y log y, so y* = softmax(z / s);
* ``c0``: R(y) = ||y||^2 / 2 (sparsemax): y_i = [v_i - theta]_+ with v = z / s;
* ``c1``: R(y) = (2/3) sum y^(3/2) (p = 3/2, q = 3): y_i = [v_i - theta]_+^2;
* ``c2``: R(y) = (3/4) sum y^(4/3) (p = 4/3, q = 4): y_i = [v_i - theta]_+^3;

where theta makes sum(y) = 1. With the entries sorted in decreasing order and a support of size k, theta is
the root of sum_{i <= k} (u_i - theta)^(q-1) = 1: linear for q = 2, the smaller root of a quadratic for q = 3,
the real root of a depressed cubic (hyperbolic form of Cardano's formula) for q = 4. The support size is the
number of k with u_k > theta_k. The sparse modes use a custom autograd Function whose backward is the exact
Jacobian-vector product: with t = [v - theta]_+ and w = t^(q-2) on the support,
dL/dv = (q-1) w (g - <w, g> / <w, 1>).

All computations are batched over leading dimensions, pure torch, dtype/device following the input.
Entries more than 2 below the row maximum of v can never be in the support (theta > max(v) - 2 for all
three p-norm modes), so they are clipped there before the cumulative sums: this keeps the closed forms
finite for huge inputs without changing the result.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from optarium.soft._common import canonical_dim, check_mode, check_softness

__all__ = ["SIMPLEX_MODES", "safe_log", "simplex_projection"]

#: Modes the simplex projection supports.
SIMPLEX_MODES: tuple[str, ...] = ("smooth", "c0", "c1", "c2")
_Q = {"c0": 2, "c1": 3, "c2": 4}


def safe_log(p: torch.Tensor) -> torch.Tensor:
    """``log(p)`` with exact zeros mapped to ``-inf`` and a zero (not NaN) gradient there."""
    pos = p > 0
    return torch.where(pos, torch.log(torch.where(pos, p, torch.ones_like(p))), float("-inf"))


def _shifted_theta(v: torch.Tensor, q: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Row maxima ``u0`` and thresholds ``theta - u0`` (both (..., 1)) of the p-norm projection of ``v``."""
    n = v.shape[-1]
    u = torch.sort(v, dim=-1, descending=True).values
    u0 = u[..., :1]
    us = (u - u0).clamp(min=-2.0)  # entries below max - 2 are never in the support
    k = torch.arange(1, n + 1, device=v.device, dtype=v.dtype)
    s1 = torch.cumsum(us, dim=-1)
    if q == 2:
        th = (s1 - 1.0) / k
    elif q == 3:
        s2 = torch.cumsum(us * us, dim=-1)
        disc = (s1 * s1 - k * (s2 - 1.0)).clamp(min=0.0)
        th = (s1 - torch.sqrt(disc)) / k
    else:  # q == 4: k w^3 + 3 m2 w + (1 - m3) = 0 with w = theta - mean, m_r central moments
        s2 = torch.cumsum(us * us, dim=-1)
        s3 = torch.cumsum(us * us * us, dim=-1)
        c = s1 / k
        m2 = (s2 - 2.0 * c * s1 + k * c * c).clamp(min=0.0)
        m3 = s3 - 3.0 * c * s2 + 3.0 * c * c * s1 - k * c * c * c
        pc = 3.0 * m2 / k
        qc = (1.0 - m3) / k
        finfo = torch.finfo(v.dtype)
        use_hyp = pc > finfo.eps * qc.abs().clamp(min=1.0)
        p_safe = torch.where(use_hyp, pc, torch.ones_like(pc))
        r = torch.sqrt(p_safe / 3.0)
        arg = 1.5 * qc.abs() / (p_safe * r)
        w_hyp = -torch.sign(qc) * 2.0 * r * torch.sinh(torch.asinh(arg) / 3.0)
        w_cbrt = -torch.sign(qc) * qc.abs().pow(1.0 / 3.0)
        th = torch.where(use_hyp, w_hyp, w_cbrt) + c
    kstar = (us > th).sum(dim=-1, keepdim=True).clamp(min=1)
    return u0, torch.gather(th, -1, kstar - 1)


class _PNormSimplex(torch.autograd.Function):
    """Sparse p-norm simplex projection of the last axis (q = 2, 3, 4) with an exact backward."""

    @staticmethod
    def forward(ctx: Any, v: torch.Tensor, q: int) -> torch.Tensor:
        u0, th = _shifted_theta(v, q)
        t = ((v - u0).clamp(min=-2.0) - th).clamp(min=0.0)  # shifted first: exact for huge |v|
        y = t if q == 2 else t.pow(q - 1)
        y = y / y.sum(dim=-1, keepdim=True).clamp(min=torch.finfo(v.dtype).tiny)
        ctx.q = q
        ctx.save_for_backward(t)
        return y

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[torch.Tensor, None]:
        (t,) = ctx.saved_tensors
        q = ctx.q
        supp = (t > 0).to(t.dtype)
        w = supp if q == 2 else t.pow(q - 2) * supp
        wsum = w.sum(dim=-1, keepdim=True)
        wsum = torch.where(wsum > 0, wsum, torch.ones_like(wsum))
        gbar = (w * g).sum(dim=-1, keepdim=True) / wsum
        return (q - 1) * w * (g - gbar), None


def simplex_projection(
    z: torch.Tensor,
    dim: int = -1,
    softness: float | torch.Tensor = 0.1,
    mode: str = "smooth",
    *,
    return_log: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Project ``z / softness`` onto the unit simplex along ``dim`` with the regulariser of ``mode``.

    Returns a non-negative tensor of ``z``'s shape summing to one along ``dim``. With ``return_log`` it
    returns ``(y, log_y)``: for ``"smooth"`` the exact ``log_softmax`` (finite even where ``y`` underflows),
    for the sparse modes ``log(y)`` with ``-inf`` at exact zeros (zero gradient there).
    """
    softness = check_softness("softness", softness)
    mode = check_mode(mode, SIMPLEX_MODES)
    if not z.is_floating_point():
        raise TypeError(f"z: must be a floating tensor, got {z.dtype}")
    d = canonical_dim("dim", dim, z.ndim)
    if z.ndim == 0:
        z = z.reshape(1)
    v = z / softness
    if mode == "smooth":
        y = F.softmax(v, dim=d)
        return (y, F.log_softmax(v, dim=d)) if return_log else y
    vl = v.movedim(d, -1)
    y = _PNormSimplex.apply(vl, _Q[mode]).movedim(-1, d)
    return (y, safe_log(y)) if return_log else y
