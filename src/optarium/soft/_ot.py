"""Batched regularised optimal transport onto anchors: the ``ot`` method of the axis-wise soft operators.

Reference: A. Paulus, A. R. Geist, V. Musil, S. Hoffmann, O. Beker, G. Martius, "SoftJAX & SoftTorch:
Empowering
Automatic Differentiation Libraries with Informative Gradients", ICML 2026, arXiv:2603.08824 (the ``ot``
method,
after Cuturi et al. 2019, arXiv:1905.11885, and Xie et al. 2020); the p-norm regularised OT dual of Blondel,
Seguy & Rolet, "Smooth and Sparse Optimal Transport", AISTATS 2018, arXiv:1710.06276.

Problem. For standardized values x (..., n), anchors a (m,) and masses mu (n,), nu (m,) with cost
C_ij = (x_i - a_j)^2 and softness s:

    Gamma = argmin_{Gamma >= 0, Gamma 1 = mu, Gamma^T 1 = nu} <C, Gamma> + s R(Gamma).

* ``mode="smooth"``: R(Gamma) = sum Gamma_ij log Gamma_ij. Log-domain Sinkhorn on the potentials (f, g),
  Gamma_ij = exp((f_i + g_j - C_ij) / s). Every run ends with the g half-step, so the anchor marginal
  (Gamma^T 1 = nu; each column Gamma[:, j] / nu_j is the SoftIndex over the n inputs) holds to rounding and
  only
  the input marginal Gamma 1 = mu carries the solver error; the loop stops when
  max_i |(Gamma 1)_i - mu_i| / max(mu) <= sinkhorn_tol (this is n max|Gamma 1 - mu| for uniform mu). The wheel
  (softtorch 0.1.1, via POT ``sinkhorn_log``) ends on the other half-step; that is our deliberate deviation
  (i).
* ``mode in {"c0", "c1", "c2"}``: R(Gamma) = sum Gamma_ij^p / p with p = 2, 3/2, 4/3 (q = p / (p - 1) = 2,
3, 4),
  solved through the unconstrained concave dual

      max_{f, g} <f, mu> + <g, nu> - (s / q) sum_ij max(0, (f_i + g_j - C_ij) / s)^q,

  whose gradient is the marginal residual, with primal map Gamma_ij = s^(1-q) max(0, f_i + g_j - C_ij)^(q-1).
  The wheel uses L-BFGS; we use a batched damped (semi-smooth) Newton method with Armijo backtracking, which
  the spec allows ("L-BFGS/Newton") and which reaches 1e-10 marginal errors in tens of iterations; it stops on
  the relative marginal error n max(||Gamma 1 - mu||_inf, ||Gamma^T 1 - nu||_inf) <= lbfgs_tol (deviation
  (iii) of the spec) and warns after lbfgs_max_iter iterations.

Gradients (``implicit=True``): implicit differentiation of the marginal conditions. With
dGamma_ij = K_ij (df_i + dg_j - dC_ij), K = Gamma / s (smooth) or K = (q - 1) s^(1-q) max(0, f_i + g_j -
C_ij)^(q-2) (p-norm), and upstream gradient G, the cotangent of C is K * (lambda_i + kappa_j - G_ij) where
[[diag(K 1), K], [K^T, diag(K^T 1)]] [lambda; kappa] = [(G * K) 1; (G * K)^T 1]. The system is singular only
along the gauge (lambda + c, kappa - c); we solve its Schur complement on the smaller side, densely for small
sizes or by conjugate gradients to a relative residual of 1e-10 (float64; 1e2 machine epsilon otherwise)
otherwise, never with a fixed small iteration count (the wheel's 5 CG steps leave 10-30 % Jacobian errors:
deviation (ii)). ``implicit=False`` differentiates through the unrolled Sinkhorn iterations instead (smooth
only).

Everything is batched over leading dimensions (no Python loop over the batch) and runs in the input's dtype
and
device; the wheel converts to float64 and loops over the batch. Gradients flow to ``x`` and ``anchors``
through
C; ``mu`` and ``nu`` are treated as constants.
"""

from __future__ import annotations

import math
import warnings

import torch

__all__ = ["transport_plan"]

_OT_MODES = ("smooth", "c0", "c1", "c2")
_Q = {"c0": 2.0, "c1": 3.0, "c2": 4.0}
# Above this size of the smaller side, linear systems are solved by CG instead of a dense Schur complement.
_DENSE_LIMIT = 128


def _rtol_for(dtype: torch.dtype, rtol: float) -> float:
    """A relative tolerance no tighter than what ``dtype`` can reach."""
    return max(float(rtol), 100.0 * torch.finfo(dtype).eps)


# ----------------------------------------------------------------------------------------------------
# Linear algebra shared by the implicit backward passes and the Newton solver
# ----------------------------------------------------------------------------------------------------


def _coupled_solve(
    K: torch.Tensor, a: torch.Tensor, b: torch.Tensor, rtol: float = 1e-10, max_iter: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Solve [[diag(K 1), K], [K^T, diag(K^T 1)]] [x; y] = [a; b] for batched K (B, n, m) >= 0.

    The matrix is PSD and singular along the gauge (x + c, -c) of every connected component of the support of
    K; the right-hand side must be consistent (sum a = sum b per component), which holds for every system
    built
    in this module. Returns one solution (gauge arbitrary). Dense Schur complement on the smaller side when it
    has at most ``_DENSE_LIMIT`` entries, CG on the (gauge-fixed, Jacobi-preconditioned) Schur complement
    otherwise.
    """
    n, m = K.shape[-2], K.shape[-1]
    if m > n:
        y, x = _coupled_solve(K.transpose(-1, -2), b, a, rtol, max_iter)
        return x, y
    dtype = K.dtype
    tiny = torch.finfo(dtype).tiny ** 0.5
    r = K.sum(-1)  # (B, n)
    c = K.sum(-2)  # (B, m)
    scale = c.abs().amax(-1, keepdim=True).clamp_min(tiny)  # (B, 1)
    jitter = (1e-13 if dtype == torch.float64 else 1e-6) * scale
    r_safe = r + jitter
    a_r = a / r_safe
    rhs = b - torch.bmm(a_r.unsqueeze(1), K).squeeze(1)  # b - K^T (a / r)
    alpha = scale / m  # gauge fix: add alpha * 1 1^T
    if m <= _DENSE_LIMIT:
        Kr = K / r_safe.unsqueeze(-1)
        S = torch.diag_embed(c + jitter) - torch.bmm(K.transpose(-1, -2), Kr)
        S = S + alpha.unsqueeze(-1)
        y = torch.linalg.solve(S, rhs.unsqueeze(-1)).squeeze(-1)
    else:
        diag = (c + jitter - torch.einsum("bij,bi->bj", K * K, 1.0 / r_safe) + alpha).clamp_min(tiny)

        def matvec(v: torch.Tensor) -> torch.Tensor:
            Kv = torch.bmm(K, v.unsqueeze(-1)).squeeze(-1) / r_safe
            return (
                (c + jitter) * v - torch.bmm(Kv.unsqueeze(1), K).squeeze(1) + alpha * v.sum(-1, keepdim=True)
            )

        y = _batched_pcg(matvec, rhs, diag, _rtol_for(dtype, rtol), max_iter or 20 * m + 100)
    x = a_r - torch.bmm(K, y.unsqueeze(-1)).squeeze(-1) / r_safe
    return x, y


def _batched_pcg(matvec, rhs: torch.Tensor, diag: torch.Tensor, rtol: float, max_iter: int) -> torch.Tensor:
    """Jacobi-preconditioned conjugate gradients for a batch of SPD systems, stopping on relative residual."""
    x = torch.zeros_like(rhs)
    r = rhs.clone()
    z = r / diag
    p = z.clone()
    rz = (r * z).sum(-1, keepdim=True)
    bnorm = rhs.norm(dim=-1, keepdim=True).clamp_min(torch.finfo(rhs.dtype).tiny)
    for _ in range(max_iter):
        res = (r.norm(dim=-1, keepdim=True) / bnorm).amax()
        if float(res) <= rtol:
            break
        Ap = matvec(p)
        pAp = (p * Ap).sum(-1, keepdim=True)
        step = torch.where(pAp > 0, rz / torch.where(pAp > 0, pAp, 1.0), torch.zeros_like(pAp))
        x = x + step * p
        r = r - step * Ap
        z = r / diag
        rz_new = (r * z).sum(-1, keepdim=True)
        beta = torch.where(rz > 0, rz_new / torch.where(rz > 0, rz, 1.0), torch.zeros_like(rz))
        p = z + beta * p
        rz = rz_new
    else:
        warnings.warn(
            f"optarium.soft OT: CG stopped after {max_iter} iterations (residual {res:.2e})", stacklevel=3
        )
    return x


def _implicit_cost_grad(K: torch.Tensor, G: torch.Tensor) -> torch.Tensor:
    """Cotangent of C from that of Gamma, given the sensitivity weights K (see module docstring)."""
    GK = G * K
    lam, kap = _coupled_solve(K, GK.sum(-1), GK.sum(-2))
    return K * (lam.unsqueeze(-1) + kap.unsqueeze(-2) - G)


# ----------------------------------------------------------------------------------------------------
# Entropic OT: log-domain Sinkhorn
# ----------------------------------------------------------------------------------------------------


def _sinkhorn(
    C: torch.Tensor, log_mu: torch.Tensor, log_nu: torch.Tensor, eps: float, tol: float, max_iter: int
) -> tuple[torch.Tensor, torch.Tensor, int, float]:
    """Log-domain Sinkhorn on (B, n, m) costs; returns potentials (f, g) with the column marginal exact.

    Differentiable through the iterations if the inputs require grad (used by ``implicit=False``).
    """
    mu_max = log_mu.exp().amax(-1, keepdim=True)
    mu = log_mu.exp()
    f = eps * log_mu - eps * torch.logsumexp(-C / eps, dim=-1)
    err = float("inf")
    it = 0
    g = None
    for it in range(1, max_iter + 1):  # noqa: B007 (it is returned)
        g = eps * log_nu - eps * torch.logsumexp((f.unsqueeze(-1) - C) / eps, dim=-2)
        f_new = eps * log_mu - eps * torch.logsumexp((g.unsqueeze(-2) - C) / eps, dim=-1)
        # Row sums of the plan (f, g) are mu * exp((f - f_new) / eps): the check costs no extra pass.
        row_err = (mu * torch.expm1((f - f_new) / eps)).abs() / mu_max
        err = float(row_err.detach().amax()) if row_err.numel() else 0.0
        if not math.isfinite(err):
            raise FloatingPointError("optarium.soft OT: Sinkhorn produced non-finite potentials")
        if err <= tol:
            break
        f = f_new
    else:
        warnings.warn(
            f"optarium.soft OT: Sinkhorn stopped after {max_iter} iterations (marginal error {err:.2e} > "
            f"sinkhorn_tol {tol:.1e})",
            stacklevel=3,
        )
    return f, g, it, err


class _SinkhornPlan(torch.autograd.Function):
    @staticmethod
    def forward(ctx, C, log_mu, log_nu, eps, tol, max_iter):
        f, g, _, _ = _sinkhorn(C, log_mu, log_nu, eps, tol, max_iter)
        # The final g half-step written as a column softmax: columns sum to nu to rounding at any softness.
        plan = torch.softmax((f.unsqueeze(-1) - C) / eps, dim=-2) * log_nu.exp().unsqueeze(-2)
        ctx.save_for_backward(plan)
        ctx.eps = eps
        return plan, f, g

    @staticmethod
    def backward(ctx, grad_plan, _gf, _gg):
        (plan,) = ctx.saved_tensors
        if grad_plan is None:
            return (None,) * 6
        grad_C = _implicit_cost_grad(plan / ctx.eps, grad_plan)
        return grad_C, None, None, None, None, None


# ----------------------------------------------------------------------------------------------------
# p-norm regularised OT: batched damped Newton on the dual (scaled potentials F = f / s)
# ----------------------------------------------------------------------------------------------------


def _pnorm_objective(F, G, Ch, mu, nu, q):
    """Negative scaled dual phi = -<F,mu> - <G,nu> + (1/q) sum [F + G - Ch]_+^q, its plan and sensitivity."""
    S = (F.unsqueeze(-1) + G.unsqueeze(-2) - Ch).clamp_min(0.0)
    if q == 2.0:
        Sq1 = S
    elif q == 3.0:
        Sq1 = S * S
    else:
        Sq1 = S * S * S
    phi = (Sq1 * S).sum((-1, -2)) / q - (F * mu).sum(-1) - (G * nu).sum(-1)
    return phi, S, Sq1


def _pnorm_newton(
    C: torch.Tensor, mu: torch.Tensor, nu: torch.Tensor, s: float, q: float, tol: float, max_iter: int
) -> tuple[torch.Tensor, torch.Tensor, int, float]:
    """Damped Newton on the scaled dual; returns unscaled potentials (f, g) and the final relative error."""
    n = C.shape[-2]
    Ch = C / s
    # Start: rows can reach their nearest anchor with mass >= mu_i, anchors at zero.
    G = torch.zeros_like(nu)
    F = Ch.amin(-1) + mu.clamp_min(0).pow(1.0 / (q - 1.0))
    phi, S, Sq1 = _pnorm_objective(F, G, Ch, mu, nu, q)
    err = float("inf")
    it = 0
    for it in range(1, max_iter + 1):  # noqa: B007 (it is returned)
        gF = Sq1.sum(-1) - mu
        gG = Sq1.sum(-2) - nu
        err_b = n * torch.maximum(gF.abs().amax(-1), gG.abs().amax(-1))
        err = float(err_b.amax())
        if not math.isfinite(err):
            raise FloatingPointError("optarium.soft OT: the p-norm dual solver produced non-finite values")
        if err <= tol:
            break
        if q == 2.0:
            Kw = (S > 0).to(C.dtype)
        else:
            Kw = (q - 1.0) * (S if q == 3.0 else S * S)
        # Levenberg damping keeps the step defined where rows/columns have no support.
        damp = (1e-3 * err_b / n).clamp_min(1e-12).unsqueeze(-1)
        dF, dG = _coupled_solve_damped(Kw, -gF, -gG, damp)
        slope = (gF * dF).sum(-1) + (gG * dG).sum(-1)
        t = torch.ones_like(phi)
        active = err_b > tol
        for _ in range(40):
            Fn = F + t.unsqueeze(-1) * dF
            Gn = G + t.unsqueeze(-1) * dG
            phin, Sn, Sq1n = _pnorm_objective(Fn, Gn, Ch, mu, nu, q)
            # Armijo on the dual, or (once dual differences drop below rounding) a decrease of the residual.
            errn = n * torch.maximum((Sq1n.sum(-1) - mu).abs().amax(-1), (Sq1n.sum(-2) - nu).abs().amax(-1))
            ok = (phin <= phi + 1e-4 * t * slope) | (errn <= 0.5 * err_b) | ~active
            if bool(ok.all()):
                break
            t = torch.where(ok, t, 0.5 * t)
        keep = active.unsqueeze(-1)
        F = torch.where(keep, Fn, F)
        G = torch.where(keep, Gn, G)
        keep3 = keep.unsqueeze(-1)
        S = torch.where(keep3, Sn, S)
        Sq1 = torch.where(keep3, Sq1n, Sq1)
        phi = torch.where(active, phin, phi)
    else:
        warnings.warn(
            f"optarium.soft OT: the p-norm dual solver stopped after {max_iter} iterations (relative "
            "marginal "
            f"error {err:.2e} > lbfgs_tol {tol:.1e})",
            stacklevel=3,
        )
    return F * s, G * s, it, err


def _coupled_solve_damped(K, a, b, damp):
    """Solve ([[diag(K1), K], [K^T, diag(K^T 1)]] + damp I) [x; y] = [a; b] (the damped Newton system)."""
    n, m = K.shape[-2], K.shape[-1]
    if m > n:
        y, x = _coupled_solve_damped(K.transpose(-1, -2), b, a, damp)
        return x, y
    r = K.sum(-1) + damp
    c = K.sum(-2) + damp
    a_r = a / r
    rhs = b - torch.bmm(a_r.unsqueeze(1), K).squeeze(1)
    if m <= _DENSE_LIMIT:
        S = torch.diag_embed(c) - torch.bmm(K.transpose(-1, -2), K / r.unsqueeze(-1))
        y = torch.linalg.solve(S, rhs.unsqueeze(-1)).squeeze(-1)
    else:
        diag = (c - torch.einsum("bij,bi->bj", K * K, 1.0 / r)).clamp_min(torch.finfo(K.dtype).tiny)

        def matvec(v):
            Kv = torch.bmm(K, v.unsqueeze(-1)).squeeze(-1) / r
            return c * v - torch.bmm(Kv.unsqueeze(1), K).squeeze(1)

        y = _batched_pcg(matvec, rhs, diag, max(1e-8, 100 * torch.finfo(K.dtype).eps), 10 * m + 100)
    x = a_r - torch.bmm(K, y.unsqueeze(-1)).squeeze(-1) / r
    return x, y


class _PnormPlan(torch.autograd.Function):
    @staticmethod
    def forward(ctx, C, mu, nu, s, q, tol, max_iter):
        f, g, _, _ = _pnorm_newton(C, mu, nu, s, q, tol, max_iter)
        S = (f.unsqueeze(-1) + g.unsqueeze(-2) - C).clamp_min(0.0) / s
        plan = S.pow(q - 1.0)
        ctx.save_for_backward(S)
        ctx.s, ctx.q = s, q
        return plan, f, g

    @staticmethod
    def backward(ctx, grad_plan, _gf, _gg):
        (S,) = ctx.saved_tensors
        if grad_plan is None:
            return (None,) * 7
        q, s = ctx.q, ctx.s
        K = ((S > 0).to(S.dtype) if q == 2.0 else (q - 1.0) * S.pow(q - 2.0)) / s
        return _implicit_cost_grad(K, grad_plan), None, None, None, None, None, None


# ----------------------------------------------------------------------------------------------------
# Public entry point
# ----------------------------------------------------------------------------------------------------


def _solve(
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
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`transport_plan` that also returns the dual potentials f (..., n) and g (..., m)."""
    if mode not in _OT_MODES:
        raise ValueError(f"mode: must be one of {', '.join(map(repr, _OT_MODES))}, got {mode!r}")
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
        # Rounding floor of the row-error estimate: potentials of size ~max C carry eps * max C / s noise.
        cmax = float(C.detach().abs().amax()) if C.numel() else 0.0
        floor = 4.0 * torch.finfo(dtype).eps * (1.0 + cmax / softness)
        tol = max(float(sinkhorn_tol), floor)
        if implicit:
            plan, f, g = _SinkhornPlan.apply(C, mu_b.log(), nu_b.log(), softness, tol, int(sinkhorn_max_iter))
        else:
            f, g, _, _ = _sinkhorn(C, mu_b.log(), nu_b.log(), softness, tol, int(sinkhorn_max_iter))
            plan = torch.softmax((f.unsqueeze(-1) - C) / softness, dim=-2) * nu_b.unsqueeze(-2)
    else:
        # The damped Newton system is singular along the dual's gauge direction up to the damping; in float32
        # the damping drowns in rounding and the solve fails, so lower precisions solve in float64 (as
        # SoftTorch's OT always does) and cast the plan and potentials back, gradients included.
        work = torch.float64 if dtype in (torch.float32, torch.float16, torch.bfloat16) else dtype
        tol = max(float(lbfgs_tol), 100 * torch.finfo(work).eps)
        plan, f, g = _PnormPlan.apply(
            C.to(work), mu_b.to(work), nu_b.to(work), softness, _Q[mode], tol, int(lbfgs_max_iter)
        )
        plan, f, g = plan.to(dtype), f.to(dtype), g.to(dtype)
    return plan.reshape(*batch, n, m), f.reshape(*batch, n), g.reshape(*batch, m)


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
) -> torch.Tensor:
    """Regularised OT plan between values ``x`` (..., n) and ``anchors`` (m,) with cost (x_i - a_j)^2.

    Returns Gamma (..., n, m) with rows summing to ``mu`` (default uniform 1/n) and columns to ``nu``; the
    column
    marginal holds to rounding in ``"smooth"`` mode (each column Gamma[..., :, j] / nu_j is a SoftIndex
    over the
    n inputs; SoftTorch's ``n * Gamma`` is the same thing for uniform mu), the row marginal to
    ``sinkhorn_tol``
    (relative). ``mode`` is ``"smooth"`` (entropic, log-domain Sinkhorn) or ``"c0"``/``"c1"``/``"c2"``
    (p = 2, 3/2, 4/3 regularisers, Newton on the dual, both marginals to ``lbfgs_tol`` relative). ``anchors``,
    ``nu`` and ``mu`` may carry batch dimensions broadcastable with ``x``'s. Gradients: implicit
    differentiation solved to convergence (``implicit=True``) or unrolled Sinkhorn (``implicit=False``, smooth
    only; the p-norm modes always use implicit gradients). See the module docstring for the maths.
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x: must be a torch.Tensor, got {type(x).__name__}")
    return _solve(
        x,
        anchors,
        nu,
        softness,
        mode,
        mu=mu,
        sinkhorn_tol=sinkhorn_tol,
        sinkhorn_max_iter=sinkhorn_max_iter,
        lbfgs_tol=lbfgs_tol,
        lbfgs_max_iter=lbfgs_max_iter,
        implicit=implicit,
    )[0]
