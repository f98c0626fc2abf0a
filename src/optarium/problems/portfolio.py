r"""Portfolio data: synthetic factor universes with a known model, and the S&P-20 daily returns.

:func:`synthetic_universe` draws one universe of the model

.. math:: r_t = B f_t + \alpha_t + \varepsilon_t, \qquad
    \alpha_{t+1, i} = 2\cdot 10^{-4} \tanh(a_i^\top z_{t, i}), \qquad
    z_{t, i} = 0.98\, z_{t-1, i} + \sqrt{1 - 0.98^2}\,\xi_t,

with ``n_factors`` Gaussian factors (loadings :math:`B` with a market factor, daily factor vol
:math:`0.4\% \cdot c`, idiosyncratic vol :math:`0.8\% \cdot c`, :math:`c` = ``noise_scale``) and two AR(1)
signals per asset that a predictor can see as features. It returns the true drift and covariance too, so a
decision can be scored by its model-implied (population) Sharpe ratio. The default :data:`NOISE_SCALE` is the
calibration of the sparse-tangent-portfolio experiment (:mod:`optarium.experiments.sparse_tangent_portfolio`:
an exact-k oracle Sharpe of about 1-1.5 at n = 20, 50, 100).

:func:`sp500_returns` loads the S&P-20 prices that scikit-learn's sister package skfolio ships (no download).

Reference: H. Jeon et al., "Decision-focused Sparse Tangent Portfolio Optimization", ICML 2026,
arXiv:2607.00581 (the synthetic setting of its spec).
"""

from __future__ import annotations

import functools
import math

import torch

from optarium._core.seeding import derive_seed
from optarium._core.validation import check_int, check_positive

__all__ = ["NOISE_SCALE", "sp500_returns", "synthetic_universe"]

#: Common factor on the synthetic noise levels (factor 0.4 %, idiosyncratic 0.8 % daily at 1.0), calibrated so
#: that the exact-k population oracle Sharpe is about 1-1.5 for n = 20, 50, 100 (the experiment's docstring).
NOISE_SCALE = 0.52


@functools.lru_cache(maxsize=1)
def sp500_returns() -> tuple[torch.Tensor, tuple[int, ...]]:
    """Daily simple returns (T, 20) of skfolio's bundled S&P-20 prices (forward-filled, float64) and the
    year of each return day. Cached in-process (the same tensor is returned on every call)."""
    from skfolio.datasets import load_sp500_dataset

    prices = load_sp500_dataset().ffill()
    values = torch.tensor(prices.to_numpy(), dtype=torch.float64)
    rets = values[1:] / values[:-1] - 1
    years = tuple(int(y) for y in prices.index.year[1:])
    return rets, years


def synthetic_universe(
    seed: int, n: int, days: int, n_factors: int = 5, *, noise_scale: float = NOISE_SCALE
) -> dict[str, torch.Tensor]:
    """One draw of the synthetic factor universe: r_t = B f_t + alpha(z_t) + eps_t (float64).

    Args:
        seed: the draw's seed (with ``n``, through :func:`~optarium._core.seeding.derive_seed`).
        n: number of assets. days: number of days. n_factors: number of factors (the first is a market
            factor with loadings around 1).
        noise_scale: the common factor ``c`` on both noise levels (module docstring).

    Returns ``returns`` (days, n), ``signals`` z (days, n, 2) (z_t is known at the end of day t and drives
    alpha_{t+1}), ``alpha`` (days, n) the true drift of each day and ``sigma`` (n, n) the true covariance.
    """
    n = check_int("n", n, minimum=1)
    days = check_int("days", days, minimum=2)
    n_factors = check_int("n_factors", n_factors, minimum=1)
    noise_scale = check_positive("noise_scale", noise_scale)
    g = torch.Generator().manual_seed(derive_seed(seed, "stp-synthetic", n))
    dt = torch.float64
    b = 0.5 * torch.randn(n, n_factors, generator=g, dtype=dt)
    b[:, 0] += 1.0  # a market factor
    sf, se = 0.004 * noise_scale, 0.008 * noise_scale
    a = torch.randn(n, 2, generator=g, dtype=dt)
    phi = 0.98
    innov = torch.randn(days, n, 2, generator=g, dtype=dt) * math.sqrt(1 - phi**2)
    z = torch.empty(days, n, 2, dtype=dt)
    z[0] = torch.randn(n, 2, generator=g, dtype=dt)
    for t in range(1, days):  # AR(1) recursion over time (not over samples)
        z[t] = phi * z[t - 1] + innov[t]
    alpha = torch.zeros(days, n, dtype=dt)
    alpha[1:] = 2e-4 * torch.tanh((z[:-1] * a).sum(-1))
    f = sf * torch.randn(days, n_factors, generator=g, dtype=dt)
    eps = se * torch.randn(days, n, generator=g, dtype=dt)
    returns = f @ b.T + alpha + eps
    sigma = sf**2 * b @ b.T + se**2 * torch.eye(n, dtype=dt)
    return {"returns": returns, "signals": z, "alpha": alpha, "sigma": sigma}
