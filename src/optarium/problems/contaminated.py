r"""Contaminated linear regression with clean high-leverage points and a test-time feature shift.

The instance of the nested-DRO reproduction (spec ``shared/papers/nested-dro.md``, "Quick"; a design, not
the paper's data): :math:`\theta^* \sim N(0, I_d)`; ``n - n_leverage`` ordinary points
:math:`x \sim N(0, I_d)` and ``n_leverage`` clean high-leverage points
:math:`x = \pm\,\text{leverage}\cdot e_1 + N(0, 0.1^2 I_d)` (alternating signs, correct labels), so the
leverage direction is :math:`e_1`; :math:`y = x^\top\theta^* + \varepsilon`, :math:`\varepsilon\sim N(0,
\sigma^2)`; ``n_outliers`` of the ordinary points get ``outlier_scale`` times a Student-t (``df``) draw
added to their label. Validation: ``n_val`` clean ordinary points, no shift. Test: ``n_test`` clean ordinary
points whose labels come from :math:`x` and whose observed features are
:math:`x + N(0, \text{test\_shift}^2 I_d)`.
The Student-t draws come from NumPy's seeded generator (torch has no seeded Student-t sampler); the rest
is torch, in float64.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from optarium._core.validation import check_int, check_nonnegative, check_positive

__all__ = ["ContaminatedRegression", "contaminated_regression"]


@dataclass(frozen=True)
class ContaminatedRegression:
    """One draw of :func:`contaminated_regression`.

    Attributes:
        X, y: the training data, shapes ``(n, d)`` and ``(n,)``.
        theta: the true coefficients :math:`\\theta^*` (no intercept).
        leverage: indices of the clean high-leverage points.
        outliers: indices of the contaminated points.
        added: the label noise added to each contaminated point (aligned with ``outliers``).
        X_val, y_val: the clean validation split.
        X_test, y_test: the shifted clean test split.
    """

    X: Tensor
    y: Tensor
    theta: Tensor
    leverage: Tensor
    outliers: Tensor
    added: Tensor
    X_val: Tensor
    y_val: Tensor
    X_test: Tensor
    y_test: Tensor


def contaminated_regression(
    seed: int,
    *,
    n: int = 200,
    d: int = 5,
    n_leverage: int = 10,
    leverage: float = 6.0,
    n_outliers: int = 20,
    outlier_scale: float = 10.0,
    df: float = 1.5,
    sigma: float = 1.0,
    n_val: int = 200,
    n_test: int = 5000,
    test_shift: float = 0.3,
) -> ContaminatedRegression:
    """Draw the contaminated instance of the module docstring from ``seed`` (float64)."""
    seed = check_int("seed", seed, minimum=0)
    d = check_int("d", d, minimum=1)
    n_leverage = check_int("n_leverage", n_leverage, minimum=0)
    n_outliers = check_int("n_outliers", n_outliers, minimum=0)
    n = check_int("n", n, minimum=n_leverage + n_outliers + 1)
    n_val = check_int("n_val", n_val, minimum=1)
    n_test = check_int("n_test", n_test, minimum=1)
    leverage = check_nonnegative("leverage", leverage)
    outlier_scale = check_nonnegative("outlier_scale", outlier_scale)
    df = check_positive("df", df)
    sigma = check_nonnegative("sigma", sigma)
    test_shift = check_nonnegative("test_shift", test_shift)
    import numpy as np

    g = torch.Generator().manual_seed(seed)
    f64 = torch.float64
    theta = torch.randn(d, generator=g, dtype=f64)
    X = torch.randn(n, d, generator=g, dtype=f64)
    lev = torch.arange(n_leverage)
    signs = torch.where(lev % 2 == 0, 1.0, -1.0).to(f64)
    X[lev] = 0.1 * torch.randn(n_leverage, d, generator=g, dtype=f64)
    X[lev, 0] += leverage * signs
    y = X @ theta + sigma * torch.randn(n, generator=g, dtype=f64)
    ordinary = torch.arange(n_leverage, n)
    out = ordinary[torch.randperm(len(ordinary), generator=g)[:n_outliers]].sort().values
    t = np.random.default_rng(seed).standard_t(df, size=n_outliers)
    added = outlier_scale * torch.as_tensor(t, dtype=f64)
    y[out] += added
    X_val = torch.randn(n_val, d, generator=g, dtype=f64)
    y_val = X_val @ theta + sigma * torch.randn(n_val, generator=g, dtype=f64)
    X_clean = torch.randn(n_test, d, generator=g, dtype=f64)
    y_test = X_clean @ theta + sigma * torch.randn(n_test, generator=g, dtype=f64)
    X_test = X_clean + test_shift * torch.randn(n_test, d, generator=g, dtype=f64)
    return ContaminatedRegression(X, y, theta, lev, out, added, X_val, y_val, X_test, y_test)
