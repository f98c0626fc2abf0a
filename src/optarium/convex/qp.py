r"""A batched convex QP layer with exact gradients: capped-simplex-type quadratic programs in pure torch.

Problem (per batch element; x in R^n):

.. math:: \min_x\ \tfrac12 x^\top Q x \quad\text{s.t.}\quad a^\top x = b,\quad x \ge 0,\quad
   x_i \le c_i\,1^\top x + u_i\ (i = 1..n),

with Q symmetric and positive definite on the feasible set (add a ridge otherwise). It covers QPs over the
probability simplex (a = 1, b = 1, c = 0, u = 1: the min-norm point of a convex hull, simplex-weighted
multi-objective steps), the capped simplex (0 <= x <= u, min-variance portfolios), and the homogenised
max-Sharpe portfolio with proportional caps (c = mask, u = 0, a = mu). The inequalities are the 2n rows
G x <= h with G = [-I; I - c 1^T] and h = [0; u]; G is never formed in the solver.

Solver (:func:`capped_qp`):

1. a batched Mehrotra predictor-corrector interior-point method without gradients; with
   G^T W G = diag(w1 + w2) - v 1^T - 1 v^T + (c^T v) 1 1^T (v = w2 * c) one iteration costs O(n^2) plus an
   (n + 1)-dimensional LU; it stops when the KKT residual (stationarity, primal feasibility,
   complementarity gap) is at most ``tol`` for the whole batch, or after ``max_iter`` iterations;
2. an active-set polish: per variable at most one row is active (the one with the larger multiplier), and
   the equality-constrained KKT system of that active set (size 2n + 1) is solved by ``torch.linalg.solve``.
   It is accepted when it is regular, primal feasible to 1e-11 (relative) and its active multipliers are
   non-negative; its solution is exact to rounding and differentiated by autograd, which *is* the implicit
   function theorem for the KKT conditions at a fixed active set;
3. where the polish is rejected (a degenerate active set), the interior-point point x0 is kept and
   differentiated implicitly by one Newton step on the full KKT map F(x, nu, lambda) with a detached
   pseudo-inverse Jacobian: x = x0 - [J^+ F]_x, whose value is x0 up to the residual and whose gradient is
   -[J^+ dF/dtheta]_x, the implicit-function derivative. A rejected polish system (possibly singular) is
   kept out of the backward pass (``isolate_rejected=True``, the default), so it cannot leave NaN there.

Variables marked ``fixed`` are pinned to zero (both of their rows dropped in the interior point, x_i = 0 kept
as an equality in the polish), which avoids the degenerate pair 0 <= x_i <= c_i 1^T x + u_i with a zero cap.
Gradients flow to Q, a, b, c and u. Everything is batched over leading dimensions (broadcast against each
other) and runs in the inputs' dtype and device; float64 is recommended (the default tolerances assume it).

References: S. Mehrotra, "On the implementation of a primal-dual interior point method", SIAM J. Optim.
1992; B. Amos & J. Z. Kolter, "OptNet: differentiable optimization as a layer in neural networks", ICML 2017
(implicit differentiation of QP layers); J. Nocedal & S. Wright, "Numerical Optimization", ch. 16.

>>> import torch
>>> from optarium.convex import simplex_qp
>>> Q = torch.tensor([[2.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
>>> simplex_qp(Q).x  # min x'Qx/2 on the simplex: x proportional to Q^-1 1
tensor([0.3333, 0.6667], dtype=torch.float64)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from optarium._core.validation import check_int, check_positive

__all__ = ["QPSolution", "capped_qp", "simplex_qp"]


@dataclass(frozen=True)
class QPSolution:
    """The solution of a batch of QPs from :func:`capped_qp`.

    Attributes:
        x: the minimiser (..., n), differentiable with respect to the problem data.
        polished: bool (...,): the active-set polish was accepted (x exact to rounding); False where the
            implicitly differentiated interior-point point was kept.
        kkt_residual: (...,) the interior point's final KKT residual (max of stationarity, feasibility and
            complementarity gap).
        n_iter: interior-point iterations (the batch is solved in lock step).
    """

    x: torch.Tensor
    polished: torch.Tensor
    kkt_residual: torch.Tensor
    n_iter: int


def _g_mv(x: torch.Tensor, c: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """G x for G = [-I; I - c 1^T] diag(keep) (batched): the layer's 2n inequality rows."""
    xk = x * keep
    return torch.cat([-xk, xk - c * xk.sum(-1, keepdim=True)], -1)


def _g_tmv(v: torch.Tensor, c: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """G^T v for the same G."""
    n = c.shape[-1]
    v1, v2 = v[..., :n], v[..., n:]
    return keep * (-v1 + v2 - (c * v2).sum(-1, keepdim=True))


def _g_dense(c: torch.Tensor) -> torch.Tensor:
    """Dense G = [-I; I - c 1^T] (B, 2n, n)."""
    n = c.shape[-1]
    eye = torch.eye(n, dtype=c.dtype, device=c.device).expand(*c.shape[:-1], n, n)
    return torch.cat([-eye, eye - c.unsqueeze(-1) * torch.ones_like(c).unsqueeze(-2)], -2)


def _ipm(
    q: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    c: torch.Tensor,
    keep: torch.Tensor,
    h: torch.Tensor,
    tol: float,
    max_iter: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """Batched Mehrotra predictor-corrector for min 1/2 x'Qx s.t. a'x = b, Gx <= h (no grad).

    G = [-I; I - c 1^T] diag(keep) is never formed: G^T W G = K (diag(w1 + w2) - u 1^T - 1 u^T + (c^T u)
    1 1^T) K with u = w2 * c, K = diag(keep), so one iteration costs O(n^2) plus an (n+1)-dimensional LU.
    Shapes: q (B, n, n), a, c, keep (B, n), b (B,), h (B, 2n). Returns (x, nu, lam, s, residual, iters).
    """
    bsz, n = a.shape
    p = 2 * n
    dt = q.dtype
    kkt = torch.zeros(bsz, n + 1, n + 1, dtype=dt, device=q.device)
    kkt[:, n, :n] = a
    kkt[:, :n, n] = a
    kk = keep.unsqueeze(-1) * keep.unsqueeze(-2)

    def gtwg(w: torch.Tensor) -> torch.Tensor:
        w1, w2 = w[:, :n], w[:, n:]
        u = w2 * c
        m = torch.diag_embed(w1 + w2) - u.unsqueeze(-1) - u.unsqueeze(-2) + (c * u).sum(-1)[:, None, None]
        return m * kk

    kkt[:, :n, :n] = q + gtwg(torch.ones(bsz, p, dtype=dt, device=q.device))
    rhs = torch.cat([_g_tmv(h, c, keep), b.unsqueeze(-1)], -1)
    x = torch.linalg.solve(kkt, rhs)[:, :n]
    s = h - _g_mv(x, c, keep)
    s = torch.where(s > 1.0, s, torch.ones_like(s))
    lam = torch.ones(bsz, p, dtype=dt, device=q.device)
    nu = torch.zeros(bsz, dtype=dt, device=q.device)
    res = torch.full((bsz,), math.inf, dtype=dt, device=q.device)
    # An element whose KKT matrix turns exactly singular (e.g. weights w = lam/s of 1e300 on a pinned
    # coordinate) stops where it is: its residual stays above tol, so the polish and fallback that follow
    # treat it as unconverged, and the other elements of the batch are not affected.
    stuck = torch.zeros(bsz, dtype=torch.bool, device=q.device)
    it = 0
    for it in range(1, max_iter + 1):  # noqa: B007
        rd = (q @ x.unsqueeze(-1)).squeeze(-1) + a * nu.unsqueeze(-1) + _g_tmv(lam, c, keep)
        rp = (a * x).sum(-1) - b
        rg = _g_mv(x, c, keep) + s - h
        mu_gap = (s * lam).sum(-1) / p
        res = torch.maximum(
            torch.maximum(rd.abs().amax(-1), rp.abs()), torch.maximum(rg.abs().amax(-1), mu_gap)
        )
        done = res <= tol
        if bool((done | stuck).all()):
            break
        w = lam / s
        kkt[:, :n, :n] = q + gtwg(w)
        lu_mat, pivots, info = torch.linalg.lu_factor_ex(kkt)
        stuck = stuck | ((info != 0) & ~done)
        lu = (lu_mat, pivots)
        args = (lu, c, keep, w, s, rd, rp, rg, n)
        dx, dnu, dlam, ds = _ipm_direction(s * lam, *args)
        alpha = _ipm_step(s, lam, ds, dlam)
        mu_aff = ((s + alpha[:, None] * ds) * (lam + alpha[:, None] * dlam)).sum(-1) / p
        sigma = (mu_aff / mu_gap.clamp(min=1e-300)).clamp(max=1.0) ** 3
        dx, dnu, dlam, ds = _ipm_direction(s * lam + ds * dlam - (sigma * mu_gap)[:, None], *args)
        alpha = 0.99 * _ipm_step(s, lam, ds, dlam)
        frozen = done | stuck
        alpha = torch.where(frozen, torch.zeros_like(alpha), alpha)
        # a singular element's direction may hold inf/NaN: select, never multiply, so 0 * NaN stays out
        keep_x = frozen[:, None]
        x = torch.where(keep_x, x, x + alpha[:, None] * dx)
        nu = torch.where(frozen, nu, nu + alpha * dnu)
        lam = torch.where(keep_x, lam, (lam + alpha[:, None] * dlam).clamp(min=1e-300))
        s = torch.where(keep_x, s, (s + alpha[:, None] * ds).clamp(min=1e-300))
    return x, nu, lam, s, res, it


def _ipm_direction(
    rc: torch.Tensor,
    lu: Any,
    c: torch.Tensor,
    keep: torch.Tensor,
    w: torch.Tensor,
    s: torch.Tensor,
    rd: torch.Tensor,
    rp: torch.Tensor,
    rg: torch.Tensor,
    n: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Newton direction of the interior point for complementarity right-hand side ``rc``."""
    r1 = -rd - _g_tmv(w * rg - rc / s, c, keep)
    sol = torch.linalg.lu_solve(*lu, torch.cat([r1, -rp.unsqueeze(-1)], -1).unsqueeze(-1)).squeeze(-1)
    dx, dnu = sol[:, :n], sol[:, n]
    gdx = _g_mv(dx, c, keep)
    return dx, dnu, w * (gdx + rg) - rc / s, -rg - gdx


def _ipm_step(s: torch.Tensor, lam: torch.Tensor, ds: torch.Tensor, dlam: torch.Tensor) -> torch.Tensor:
    """Largest step in [0, 1] keeping s and lambda non-negative."""
    ratio_s = torch.where(ds < 0, -s / ds, torch.full_like(s, math.inf)).amin(-1)
    ratio_l = torch.where(dlam < 0, -lam / dlam, torch.full_like(lam, math.inf)).amin(-1)
    return torch.clamp(torch.minimum(ratio_s, ratio_l), max=1.0)


def _polish(
    q: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    c: torch.Tensor,
    h: torch.Tensor,
    lo: torch.Tensor,
    cap: torch.Tensor,
    forced: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Equality-constrained KKT system of the identified active set (differentiable by autograd).

    Per variable at most one row is active: ``lo`` (x_i = 0) or ``cap`` (x_i - c_i 1^T x = h_{n+i}); rows of
    neither kind get multiplier 0. Size 2n + 1. Returns (x, ok): ok checks that the system was regular,
    primal feasibility of all 2n rows and non-negative active multipliers (``forced`` rows, the pinned
    variables, are equalities and exempt).
    """
    bsz, n = a.shape
    dt = q.dtype
    eye = torch.eye(n, dtype=dt, device=q.device).expand(bsz, n, n)
    g_lo = -eye
    g_cap = eye - c.unsqueeze(-1) * torch.ones_like(c).unsqueeze(-2)
    act = (lo | cap).to(dt)
    gsel = torch.where(lo.unsqueeze(-1), g_lo, torch.where(cap.unsqueeze(-1), g_cap, torch.zeros_like(g_cap)))
    hsel = torch.where(cap, h[:, n:], torch.zeros_like(c))
    top = torch.cat([q, a.unsqueeze(-1), gsel.transpose(1, 2)], -1)
    mid = torch.cat([a.unsqueeze(1), torch.zeros(bsz, 1, 1 + n, dtype=dt, device=q.device)], -1)
    low = torch.cat([gsel, torch.zeros(bsz, n, 1, dtype=dt, device=q.device), torch.diag_embed(act - 1)], -1)
    kkt = torch.cat([top, mid, low], 1)
    rhs = torch.cat([torch.zeros(bsz, n, dtype=dt, device=q.device), b.unsqueeze(-1), hsel], -1)
    sol, info = torch.linalg.solve_ex(kkt, rhs)
    x, lam = sol[:, :n], sol[:, n + 1 :]
    with torch.no_grad():
        scale = 1 + x.abs().amax(-1)
        viol = (_g_mv(x, c, torch.ones_like(c)) - h).amax(-1)
        lam_scale = 1 + lam.abs().amax(-1)
        bad_sign = torch.where((lo | cap) & ~forced, lam, torch.zeros_like(lam)).amin(-1) < -1e-9 * lam_scale
        ok = (info == 0) & torch.isfinite(sol).all(-1) & (viol <= 1e-11 * scale) & ~bad_sign
    return x, ok


def _implicit(
    q: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    c: torch.Tensor,
    h: torch.Tensor,
    x0: torch.Tensor,
    nu0: torch.Tensor,
    lam0: torch.Tensor,
) -> torch.Tensor:
    """x0 plus one Newton step on the KKT map with a detached Jacobian: value ~ x0, gradient = implicit."""
    bsz, n = a.shape
    p = 2 * n
    g = _g_dense(c)
    ones = torch.ones_like(c)
    rd = (q @ x0.unsqueeze(-1)).squeeze(-1) + a * nu0.unsqueeze(-1) + _g_tmv(lam0, c, ones)
    rp = (a * x0).sum(-1) - b
    gx = _g_mv(x0, c, ones) - h
    f = torch.cat([rd, rp.unsqueeze(-1), lam0 * gx], -1)
    with torch.no_grad():
        top = torch.cat([q, a.unsqueeze(-1), g.transpose(1, 2)], -1)
        mid = torch.cat([a.unsqueeze(1), torch.zeros(bsz, 1, 1 + p, dtype=q.dtype, device=q.device)], -1)
        low = torch.cat(
            [
                lam0.unsqueeze(-1) * g,
                torch.zeros(bsz, p, 1, dtype=q.dtype, device=q.device),
                torch.diag_embed(gx),
            ],
            -1,
        )
        jac_pinv = torch.linalg.pinv(torch.cat([top, mid, low], 1))
    delta = (jac_pinv @ f.unsqueeze(-1)).squeeze(-1)
    return x0 - delta[:, :n]


def _solve_qp(
    q: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    c: torch.Tensor,
    h: torch.Tensor,
    fixed: torch.Tensor,
    tol: float,
    max_iter: int,
    isolate_rejected: bool = True,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """IPM (no grad) + active-set polish (grad) + implicit fallback for the layer's QPs.

    Constraints G x <= h with G = [-I; I - c 1^T]: row i is -x_i <= 0, row n + i the cap of variable i.
    Variables with ``fixed`` are pinned to 0: the IPM sees them decoupled, the polish keeps x_i = 0 as an
    equality (the pair would be degenerate). With ``isolate_rejected``, the polish is redone on the accepted
    problems only when some are rejected, so a singular rejected system leaves no NaN in the backward pass.
    Returns (x, polished, residual, iterations).
    """
    n = a.shape[-1]
    with torch.no_grad():
        keep = (~fixed).to(q.dtype)
        qi = q.detach() * keep.unsqueeze(-1) * keep.unsqueeze(-2) + torch.diag_embed(fixed.to(q.dtype))
        both = torch.cat([fixed, fixed], -1)
        hi = torch.where(both, torch.ones_like(h), h.detach())
        x0, nu0, lam0, s0, res, iters = _ipm(
            qi, a.detach() * keep, b.detach(), c.detach(), keep, hi, tol, max_iter
        )
        x0 = x0 * keep
        lam0 = torch.where(both, torch.zeros_like(lam0), lam0)
        # at most one of the pair (x_i >= 0, cap_i) is active: the one with the larger multiplier
        lam_lo, lam_cap, s_lo, s_cap = lam0[:, :n], lam0[:, n:], s0[:, :n], s0[:, n:]
        lo = ((lam_lo > s_lo) & (lam_lo >= lam_cap)) | fixed
        cap = (lam_cap > s_cap) & (lam_cap > lam_lo) & ~fixed
    x, ok = _polish(q, a, b, c, h, lo, cap, fixed)
    if not bool(ok.all()):
        xi = _implicit(q, a, b, c, torch.where(both, torch.full_like(h, 1e30), h), x0, nu0, lam0)
        if isolate_rejected:
            idx = ok.nonzero().squeeze(-1)
            if idx.numel():
                sub = (t[idx] for t in (q, a, b, c, h, lo, cap, fixed))
                x = xi.index_put((idx,), _polish(*sub)[0])
            else:
                x = xi
        else:
            x = torch.where(ok.unsqueeze(-1), x, xi)
    return x * (~fixed).to(x.dtype), ok, res, iters


def _float_tensor(name: str, t: Any, ndim: int) -> torch.Tensor:
    if not isinstance(t, torch.Tensor) or not t.is_floating_point():
        raise TypeError(f"{name}: must be a floating-point tensor")
    if t.ndim < ndim:
        raise ValueError(f"{name}: needs at least {ndim} dimension(s), got shape {tuple(t.shape)}")
    if not bool(torch.isfinite(t).all()):
        raise ValueError(f"{name}: must be finite")
    return t


def capped_qp(
    Q: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    c: torch.Tensor,
    u: torch.Tensor,
    *,
    fixed: torch.Tensor | None = None,
    tol: float = 1e-10,
    max_iter: int = 60,
    isolate_rejected: bool = True,
) -> QPSolution:
    r"""Solve :math:`\min \tfrac12 x^\top Qx` s.t. :math:`a^\top x = b`, :math:`x\ge0`,
    :math:`x_i\le c_i 1^\top x + u_i` for a batch, differentiably (see the module docstring).

    Args:
        Q: (..., n, n) symmetric, positive definite on the feasible set.
        a: (..., n) the equality row; b: (...,) its right-hand side.
        c: (..., n) proportional caps (0 for plain upper bounds); u: (..., n) absolute caps (>= 0 keeps
            x = 0 feasible for the caps).
        fixed: optional bool (..., n): variables pinned to 0.
        tol: interior-point KKT tolerance; max_iter: interior-point iteration cap.
        isolate_rejected: keep a rejected (possibly singular) polish system out of the backward pass, so
            those problems get the implicit fallback's gradient (default). ``False`` mixes the two solutions
            with ``torch.where`` as the sparse tangent portfolio layer always has: there a singular rejected
            system turns the gradient of its inputs into NaN (and that layer's trainer skips the step); kept
            only so that method's iterates stay what they were.

    All tensors share one floating dtype and device and broadcast over the leading dimensions. Returns a
    :class:`QPSolution`; the problem must be feasible (an infeasible batch element gives ``polished=False``
    and a large ``kkt_residual``).
    """
    Q = _float_tensor("Q", Q, 2)
    n = Q.shape[-1]
    if Q.shape[-2] != n:
        raise ValueError(f"Q: must be square (..., n, n), got {tuple(Q.shape)}")
    vecs = {}
    for name, t in (("a", a), ("c", c), ("u", u)):
        t = _float_tensor(name, t, 1)
        if t.shape[-1] != n:
            raise ValueError(f"{name}: last axis must have {n} entries, got shape {tuple(t.shape)}")
        vecs[name] = t
    b = _float_tensor("b", b, 0)
    for name, t in (("a", vecs["a"]), ("b", b), ("c", vecs["c"]), ("u", vecs["u"])):
        if t.dtype != Q.dtype or t.device != Q.device:
            raise TypeError(
                f"{name}: must have Q's dtype {Q.dtype} and device {Q.device}, got {t.dtype} {t.device}"
            )
    Qd = Q.detach()
    sym = (Qd - Qd.transpose(-1, -2)).abs().amax() if Q.numel() else Qd.new_zeros(())
    if float(sym) > 1e-8 * (1.0 + float(Qd.abs().amax())):
        raise ValueError("Q: must be symmetric")
    if fixed is None:
        fixed = torch.zeros(n, dtype=torch.bool, device=Q.device)
    elif not isinstance(fixed, torch.Tensor) or fixed.dtype != torch.bool or fixed.shape[-1:] != (n,):
        raise TypeError(f"fixed: must be a bool tensor (..., {n})")
    tol = check_positive("tol", tol)
    max_iter = check_int("max_iter", max_iter, minimum=1)
    shape = torch.broadcast_shapes(
        Q.shape[:-2],
        vecs["a"].shape[:-1],
        b.shape,
        vecs["c"].shape[:-1],
        vecs["u"].shape[:-1],
        fixed.shape[:-1],
    )
    q2 = Q.expand(*shape, n, n).reshape(-1, n, n)
    bsz = q2.shape[0]
    a2, c2, u2 = (vecs[k].expand(*shape, n).reshape(bsz, n) for k in ("a", "c", "u"))
    b2 = b.expand(shape).reshape(bsz)
    f2 = fixed.expand(*shape, n).reshape(bsz, n)
    h = torch.cat([torch.zeros(bsz, n, dtype=Q.dtype, device=Q.device), u2], -1)
    if not isinstance(isolate_rejected, bool):
        raise TypeError(f"isolate_rejected: must be a bool, got {type(isolate_rejected).__name__}")
    x, ok, res, iters = _solve_qp(q2, a2, b2, c2, h, f2, tol, max_iter, isolate_rejected)
    return QPSolution(x.reshape(*shape, n), ok.reshape(shape), res.reshape(shape), iters)


def simplex_qp(
    Q: torch.Tensor,
    upper: torch.Tensor | None = None,
    *,
    fixed: torch.Tensor | None = None,
    tol: float = 1e-10,
    max_iter: int = 60,
) -> QPSolution:
    r""":math:`\min \tfrac12 x^\top Qx` over the (capped) probability simplex :math:`1^\top x = 1`,
    :math:`0\le x\le` ``upper`` (default 1, i.e. the plain simplex), batched and differentiable.

    With Q = J J^T for the rows J of K gradients this is the min-norm point of their convex hull (MGDA-type
    steps); with ``upper`` a mask it is the minimum-variance portfolio under position caps. A thin front of
    :func:`capped_qp` (a = 1, b = 1, c = 0, u = ``upper``); ``sum(upper) >= 1`` is needed for feasibility.
    """
    Q = _float_tensor("Q", Q, 2)
    n = Q.shape[-1]
    ones = torch.ones(n, dtype=Q.dtype, device=Q.device)
    if upper is None:
        upper = ones
    else:
        upper = _float_tensor("upper", upper, 1)
        if bool((upper < 0).any()) or bool((upper.sum(-1) < 1 - 1e-9).any()):
            raise ValueError("upper: must be >= 0 with each row summing to at least 1 (else infeasible)")
    b = torch.ones(Q.shape[:-2], dtype=Q.dtype, device=Q.device)
    return capped_qp(Q, ones, b, torch.zeros_like(ones), upper, fixed=fixed, tol=tol, max_iter=max_iter)
