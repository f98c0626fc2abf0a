r"""Interpolated least squares with a prescribed spectrum: a strongly convex problem with known optimum.

:func:`conditioned_least_squares` draws :math:`A = U\,\mathrm{diag}(s)\,V^\top` with random orthogonal
:math:`U, V` and singular values :math:`s` geometric between two given values, rescales :math:`A` so that the
full-batch smoothness :math:`L = \lambda_{\max}(A^\top A)/n` equals a chosen value, draws
:math:`x^* \sim N(0, I)` and sets :math:`b = A x^*`. With :math:`n \ge d` and full column rank, :math:`x^*` is
the unique minimiser of :math:`f(x) = \|Ax - b\|^2/(2n)` and :math:`f^* = 0` exactly (interpolation: every
mini-batch loss :math:`f_S(x) = \|A_S x - b_S\|^2/(2|S|)` is also minimised at :math:`x^*` with value 0).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from optarium._core.validation import check_int, check_positive

__all__ = ["LeastSquaresProblem", "conditioned_least_squares"]


@dataclass(frozen=True)
class LeastSquaresProblem:
    r"""``A`` (n x d), ``b`` (n), ``x_star`` (d) and the constants of :math:`f(x) = \|Ax - b\|^2/(2n)`.

    Attributes:
        A, b, x_star: the data and the minimiser (``b = A @ x_star``).
        L: full-batch smoothness :math:`\lambda_{\max}(A^\top A)/n`.
        mu: strong convexity :math:`\lambda_{\min}(A^\top A)/n` (0 when ``n < d``).
        L_max: the per-sample bound :math:`\max_i \|a_i\|^2` on every mini-batch loss's smoothness.
    """

    A: torch.Tensor
    b: torch.Tensor
    x_star: torch.Tensor
    L: float
    mu: float
    L_max: float

    def loss(self, x: torch.Tensor, idx: torch.Tensor | None = None) -> torch.Tensor:
        r"""The mean loss :math:`\|A_S x - b_S\|^2 / (2|S|)` over rows ``idx`` (all rows if ``None``)."""
        a, b = (self.A, self.b) if idx is None else (self.A[idx], self.b[idx])
        r = a @ x - b
        return 0.5 * (r @ r) / r.shape[0]

    def gap(self, x: torch.Tensor) -> torch.Tensor:
        r""":math:`f(x) - f^* = \tfrac12 \delta^\top (A^\top A/n)\, \delta` with :math:`\delta = x - x^*`."""
        r = self.A @ (x - self.x_star)
        return 0.5 * (r @ r) / self.A.shape[0]


def conditioned_least_squares(
    n: int,
    d: int,
    s_max: float = 10.0,
    s_min: float = 1.0,
    *,
    L: float = 1.0,
    seed: int = 0,
    dtype: torch.dtype = torch.float64,
) -> LeastSquaresProblem:
    """An interpolated least-squares problem with singular values geometric from ``s_max`` to ``s_min``.

    Args:
        n, d: rows and columns (``n >= d`` for a unique minimiser).
        s_max, s_min: the extreme singular values before rescaling (their ratio is the condition number of A).
        L: the full-batch smoothness after rescaling.
        seed: seeds a private ``torch.Generator`` (the global RNG is untouched).
        dtype: floating dtype of the tensors.
    """
    n = check_int("n", n, minimum=1)
    d = check_int("d", d, minimum=1)
    s_max = check_positive("s_max", s_max)
    s_min = check_positive("s_min", s_min)
    if s_min > s_max:
        raise ValueError(f"s_min: must be <= s_max, got {s_min!r} > {s_max!r}")
    L = check_positive("L", L)
    gen = torch.Generator().manual_seed(seed)
    k = min(n, d)
    u, _ = torch.linalg.qr(torch.randn(n, n, generator=gen, dtype=torch.float64))
    v, _ = torch.linalg.qr(torch.randn(d, d, generator=gen, dtype=torch.float64))
    s = torch.logspace(math.log10(s_max), math.log10(s_min), k, dtype=torch.float64)
    a = (u[:, :k] * s) @ v[:, :k].T
    a = a * (L * n / float(s[0]) ** 2) ** 0.5
    x_star = torch.randn(d, generator=gen, dtype=torch.float64)
    eig = (s**2) * (L / float(s[0]) ** 2)
    mu = float(eig[-1]) if n >= d else 0.0
    l_max = float((a * a).sum(1).max())
    a, x_star = a.to(dtype), x_star.to(dtype)
    return LeastSquaresProblem(A=a, b=a @ x_star, x_star=x_star, L=L, mu=mu, L_max=l_max)
