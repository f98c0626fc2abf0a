r"""Sparse linear regression with a known sparse truth: Gaussian design, unit coefficients on a support.

.. math:: y = X w^\star + \sigma\,\varepsilon,\qquad X_{ij}, \varepsilon_i \sim \mathcal N(0, 1)\ \text{iid},
    \qquad w^\star = (\underbrace{1, \dots, 1}_{k}, 0, \dots, 0).

Because the features are standard normal, the population (test) mean squared error of any coefficient
vector is exact: :math:`\mathbb E\,(y - x^\top w)^2 = \lVert w - w^\star\rVert^2 + \sigma^2`
(:func:`population_mse`), so a method can be scored without a test sample. The rewa experiment's linear
problems (``k = 1`` and ``k = 5``, ``d = 2000``, ``n = 400``) are draws of it; Lasso reference solutions are
in :mod:`optarium.sparse`.
"""

from __future__ import annotations

import torch

from optarium._core.validation import check_int, check_nonnegative

__all__ = ["population_mse", "sparse_linear_regression"]


def sparse_linear_regression(
    n: int, d: int, n_nonzero: int, seed: int, *, noise_sd: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One draw ``(X, y, w_star)`` in float64: ``X`` ``(n, d)``, ``y`` ``(n,)``, ``w_star`` ``(d,)`` with ones
    on its first ``n_nonzero`` coordinates (the design first, then the noise, from one generator seeded
    with ``seed``)."""
    n = check_int("n", n, minimum=1)
    d = check_int("d", d, minimum=1)
    n_nonzero = check_int("n_nonzero", n_nonzero, minimum=0, maximum=d)
    seed = check_int("seed", seed, minimum=0)
    noise_sd = check_nonnegative("noise_sd", noise_sd)
    gen = torch.Generator().manual_seed(seed)
    w_star = torch.zeros(d, dtype=torch.float64)
    w_star[:n_nonzero] = 1.0
    X = torch.randn(n, d, generator=gen, dtype=torch.float64)
    y = X @ w_star + noise_sd * torch.randn(n, generator=gen, dtype=torch.float64)
    return X, y, w_star


def population_mse(W: torch.Tensor, w_star: torch.Tensor, noise_sd: float = 1.0) -> torch.Tensor:
    r""":math:`\lVert w - w^\star\rVert^2 + \sigma^2` for every row ``w`` of ``W`` (``(..., d)`` ->
    ``(...)``): the exact test MSE under the standard normal design."""
    return ((W - w_star) ** 2).sum(-1) + noise_sd**2
