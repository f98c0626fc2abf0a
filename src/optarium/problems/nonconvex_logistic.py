r"""Nonconvex regularised logistic regression on synthetic data, with batched analytic gradients.

.. math::
    f(x) = \frac1N\sum_{i=1}^N \log\big(1 + e^{-y_i a_i^\top x}\big)
           + \alpha\sum_{j=1}^d \frac{x_j^2}{1 + x_j^2},

with :math:`a_i \sim N(0, I_d)`, labels :math:`y_i = \operatorname{sign}(a_i^\top w^\star)` from a random
teacher :math:`w^\star` and a fraction ``flip`` of them flipped. The regulariser is nonconvex, so the problem
is a standard testbed for stationarity (gradient-norm) guarantees of stochastic methods (Wang et al. 2017,
SpiderBoost, STORM, sign-based methods). The gradient is written out, not taken by autograd, and is batched
over many iterates at once (``x`` of shape ``(K, d)``), which makes hyperparameter grids cheap.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from optarium._core.validation import check_in_range, check_int, check_nonnegative

__all__ = ["NonconvexLogistic", "make_nonconvex_logistic"]


@dataclass(frozen=True)
class NonconvexLogistic:
    """The data ``a`` (N x d), labels ``y`` (N, values +-1) and regularisation weight ``alpha``."""

    a: torch.Tensor
    y: torch.Tensor
    alpha: float

    @property
    def n(self) -> int:
        """Number of samples N."""
        return self.a.shape[0]

    @property
    def dim(self) -> int:
        """Dimension d."""
        return self.a.shape[1]

    def _reg_grad(self, x: torch.Tensor) -> torch.Tensor:
        return (2.0 * self.alpha) * x / (1.0 + x * x).square()

    def loss(self, x: torch.Tensor) -> torch.Tensor:
        """Full-batch objective at ``x`` of shape ``(d,)`` or ``(K, d)`` (then shape ``(K,)``)."""
        margins = (x @ self.a.T) * self.y
        data = torch.nn.functional.softplus(-margins).mean(-1)
        return data + self.alpha * (x * x / (1.0 + x * x)).sum(-1)

    def grad(self, x: torch.Tensor, idx: torch.Tensor | None = None) -> torch.Tensor:
        """Gradient at ``x`` (``(d,)`` or ``(K, d)``): full batch, or on the sample indices ``idx``.

        ``idx`` has shape ``(B,)`` (one batch shared by every row of ``x``) or ``(K, B)`` (a batch per row).
        """
        squeeze = x.ndim == 1
        xs = x.unsqueeze(0) if squeeze else x
        if idx is None:
            margins = (xs @ self.a.T) * self.y
            weights = torch.sigmoid(-margins) * self.y
            out = -(weights @ self.a) / self.n
        elif idx.ndim == 1:  # one batch for every row: two small matrix products
            ab, yb = self.a[idx], self.y[idx]  # (B, d), (B,)
            weights = torch.sigmoid(-(xs @ ab.T) * yb) * yb
            out = -(weights @ ab) / idx.shape[0]
        else:
            ab, yb = self.a[idx], self.y[idx]  # (K, B, d), (K, B)
            margins = torch.einsum("kbd,kd->kb", ab, xs) * yb
            weights = torch.sigmoid(-margins) * yb
            out = -torch.einsum("kb,kbd->kd", weights, ab) / idx.shape[1]
        out = out + self._reg_grad(xs)
        return out.squeeze(0) if squeeze else out


def make_nonconvex_logistic(
    n: int = 5000,
    dim: int = 200,
    alpha: float = 0.1,
    flip: float = 0.1,
    seed: int = 0,
    dtype: torch.dtype = torch.float64,
) -> NonconvexLogistic:
    """Draw the problem: ``a ~ N(0, I)``, teacher labels with a fraction ``flip`` flipped (seeded)."""
    n = check_int("n", n, minimum=1)
    dim = check_int("dim", dim, minimum=1)
    alpha = check_nonnegative("alpha", alpha)
    flip = check_in_range("flip", flip, 0.0, 1.0)
    gen = torch.Generator().manual_seed(check_int("seed", seed, minimum=0))
    a = torch.randn(n, dim, generator=gen, dtype=torch.float64)
    teacher = torch.randn(dim, generator=gen, dtype=torch.float64)
    y = torch.sign(a @ teacher)
    y[y == 0] = 1.0
    flips = torch.rand(n, generator=gen, dtype=torch.float64) < flip
    y[flips] = -y[flips]
    return NonconvexLogistic(a=a.to(dtype), y=y.to(dtype), alpha=alpha)
