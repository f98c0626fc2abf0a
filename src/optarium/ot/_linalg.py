"""Linear algebra of the OT solvers: the coupled marginal system, batched CG and the implicit cost cotangent.

Both regularised OT problems of :mod:`optarium.ot` (entropic and p-norm) have optimality conditions on the two
marginals. Differentiating them, or taking a Newton step on the dual, needs the block system

    [[diag(K 1), K], [K^T, diag(K^T 1)]] [x; y] = [a; b]

for a non-negative (B, n, m) weight matrix K. It is PSD and singular along the gauge (x + c, y - c); we solve
its Schur complement on the smaller side, densely up to :data:`_DENSE_LIMIT` entries and by
Jacobi-preconditioned conjugate gradients above, to a relative residual of 1e-10 (float64; 1e2 machine
epsilon otherwise), never with a fixed small iteration count.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import torch

__all__ = ["batched_pcg", "coupled_solve", "coupled_solve_damped", "implicit_cost_grad", "rtol_for"]

# Above this size of the smaller side, linear systems are solved by CG instead of a dense Schur complement.
_DENSE_LIMIT = 128


def rtol_for(dtype: torch.dtype, rtol: float) -> float:
    """A relative tolerance no tighter than what ``dtype`` can reach (100 machine epsilons)."""
    return max(float(rtol), 100.0 * torch.finfo(dtype).eps)


def coupled_solve(
    K: torch.Tensor, a: torch.Tensor, b: torch.Tensor, rtol: float = 1e-10, max_iter: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Solve [[diag(K 1), K], [K^T, diag(K^T 1)]] [x; y] = [a; b] for batched K (B, n, m) >= 0.

    The matrix is PSD and singular along the gauge (x + c, -c) of every connected component of the support of
    K; the right-hand side must be consistent (sum a = sum b per component), which holds for every system
    built in :mod:`optarium.ot`. Returns one solution (gauge arbitrary). Dense Schur complement on the smaller
    side when it has at most ``_DENSE_LIMIT`` entries, CG on the (gauge-fixed, Jacobi-preconditioned) Schur
    complement otherwise.
    """
    n, m = K.shape[-2], K.shape[-1]
    if m > n:
        y, x = coupled_solve(K.transpose(-1, -2), b, a, rtol, max_iter)
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

        y = batched_pcg(matvec, rhs, diag, rtol_for(dtype, rtol), max_iter or 20 * m + 100)
    x = a_r - torch.bmm(K, y.unsqueeze(-1)).squeeze(-1) / r_safe
    return x, y


def batched_pcg(
    matvec: Callable[[torch.Tensor], torch.Tensor],
    rhs: torch.Tensor,
    diag: torch.Tensor,
    rtol: float,
    max_iter: int,
) -> torch.Tensor:
    """Jacobi-preconditioned conjugate gradients for a batch of SPD systems, stopping on relative residual.

    ``matvec`` maps (B, m) to (B, m); ``diag`` (B, m) is the preconditioner. Stops when the largest relative
    residual of the batch is at most ``rtol``; warns after ``max_iter`` iterations.
    """
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
            f"optarium.ot: CG stopped after {max_iter} iterations (residual {res:.2e})", stacklevel=3
        )
    return x


def implicit_cost_grad(K: torch.Tensor, G: torch.Tensor) -> torch.Tensor:
    """Cotangent of the cost C from that of the plan, given the sensitivity weights K.

    With dGamma_ij = K_ij (df_i + dg_j - dC_ij) and upstream gradient G, the cotangent of C is
    K * (lambda_i + kappa_j - G_ij) where [[diag(K 1), K], [K^T, diag(K^T 1)]] [lambda; kappa] =
    [(G * K) 1; (G * K)^T 1].
    """
    GK = G * K
    lam, kap = coupled_solve(K, GK.sum(-1), GK.sum(-2))
    return K * (lam.unsqueeze(-1) + kap.unsqueeze(-2) - G)


def coupled_solve_damped(
    K: torch.Tensor, a: torch.Tensor, b: torch.Tensor, damp: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Solve ([[diag(K1), K], [K^T, diag(K^T 1)]] + damp I) [x; y] = [a; b] (the damped Newton system)."""
    n, m = K.shape[-2], K.shape[-1]
    if m > n:
        y, x = coupled_solve_damped(K.transpose(-1, -2), b, a, damp)
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

        def matvec(v: torch.Tensor) -> torch.Tensor:
            Kv = torch.bmm(K, v.unsqueeze(-1)).squeeze(-1) / r
            return c * v - torch.bmm(Kv.unsqueeze(1), K).squeeze(1)

        y = batched_pcg(matvec, rhs, diag, max(1e-8, 100 * torch.finfo(K.dtype).eps), 10 * m + 100)
    x = a_r - torch.bmm(K, y.unsqueeze(-1)).squeeze(-1) / r
    return x, y
