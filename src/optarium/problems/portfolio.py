r"""Portfolio data: synthetic factor universes with a known model, and the S&P-20 daily returns.

:func:`synthetic_universe` draws one universe of the spec's model (shared-loading version)

.. math:: r_t = B f_t + \alpha_t + \varepsilon_t, \qquad
    \alpha_{t+1, i} = 2\cdot 10^{-4} \tanh(a^\top z_{t, i}), \qquad
    z_{t, i} = 0.95\, z_{t-1, i} + \sqrt{1 - 0.95^2}\,\xi_{t, i},

with ``n_factors`` Gaussian factors (loadings :math:`B` with a market factor, daily factor vol
:math:`0.4\% \cdot c`, idiosyncratic vol :math:`0.8\% \cdot c`, :math:`c` = ``noise_scale``), three AR(1)
signals per asset :math:`z_{t,i}\in\mathbb{R}^3` (unit stationary variance) and **one loading vector**
:math:`a` shared by all assets (drawn per universe, unit norm, so :math:`a^\top z\sim N(0, 1)` in every
draw). The drift is therefore the same function of every asset's own observable signals, which a shared
per-asset predictor that sees the signals as features can learn (the earlier version drew a loading
:math:`a_i` per asset that no feature revealed). It returns the true drift, covariance and loading too, so a
decision can be scored by its model-implied (population) Sharpe ratio. :func:`oracle_sharpe_bounds` brackets
the exact-k population oracle. The default :data:`NOISE_SCALE` is the calibration of the
sparse-tangent-portfolio experiment (:mod:`optarium.experiments.sparse_tangent_portfolio`, where the
measurement is written down).

:func:`sp500_returns` loads the S&P-20 prices that scikit-learn's sister package skfolio ships (no download).

Reference: H. Jeon et al., "Decision-focused Sparse Tangent Portfolio Optimization", ICML 2026,
arXiv:2607.00581 (the synthetic setting of its spec, /work/shared/papers/sparse-tangent-portfolio.md).
"""

from __future__ import annotations

import functools
import math

import torch

from optarium._core.seeding import derive_seed
from optarium._core.validation import check_int, check_positive

__all__ = ["DRIFT", "NOISE_SCALE", "oracle_sharpe_bounds", "sp500_returns", "synthetic_universe"]

#: Common factor on the synthetic noise levels (factor 0.4 %, idiosyncratic 0.8 % daily at 1.0), calibrated
#: once (before any method ran) so that the exact-k (k = 10) population oracle Sharpe is about 1-1.5 for
#: n = 20, 50, 100: 0.929 / 1.286-1.293 / 1.59-1.66 (the experiment's docstring has the rule and numbers).
NOISE_SCALE = 0.46

#: Amplitude of the drift: alpha = DRIFT * tanh(a'z), i.e. at most 0.02 % a day (the spec's).
DRIFT = 2e-4


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
    seed: int,
    n: int,
    days: int,
    n_factors: int = 5,
    *,
    n_signals: int = 3,
    persistence: float = 0.95,
    noise_scale: float = NOISE_SCALE,
) -> dict[str, torch.Tensor]:
    """One draw of the synthetic factor universe: r_t = B f_t + alpha(z_t) + eps_t (float64).

    Args:
        seed: the draw's seed (with ``n``, through :func:`~optarium._core.seeding.derive_seed`).
        n: number of assets. days: number of days. n_factors: number of factors (the first is a market
            factor with loadings around 1).
        n_signals: signals per asset (the spec's 3). persistence: their AR(1) coefficient (the spec's 0.95).
        noise_scale: the common factor ``c`` on both noise levels (module docstring).

    Returns ``returns`` (days, n), ``signals`` z (days, n, n_signals) (z_t is known at the end of day t and
    drives alpha_{t+1}), ``alpha`` (days, n) the true drift of each day, ``sigma`` (n, n) the true covariance
    and ``loading`` (n_signals,) the unit loading vector a that every asset shares.
    """
    n = check_int("n", n, minimum=1)
    days = check_int("days", days, minimum=2)
    n_factors = check_int("n_factors", n_factors, minimum=1)
    n_signals = check_int("n_signals", n_signals, minimum=1)
    if not isinstance(persistence, (int, float)) or not 0.0 <= float(persistence) < 1.0:
        raise ValueError(f"persistence: must be a number in [0, 1), got {persistence!r}")
    phi = float(persistence)
    noise_scale = check_positive("noise_scale", noise_scale)
    g = torch.Generator().manual_seed(derive_seed(seed, "stp-synthetic-shared", n))
    dt = torch.float64
    b = 0.5 * torch.randn(n, n_factors, generator=g, dtype=dt)
    b[:, 0] += 1.0  # a market factor
    sf, se = 0.004 * noise_scale, 0.008 * noise_scale
    a = torch.randn(n_signals, generator=g, dtype=dt)
    a = a / a.norm()  # one shared loading, unit norm: a'z ~ N(0, 1) in every draw, only its direction varies
    innov = torch.randn(days, n, n_signals, generator=g, dtype=dt) * math.sqrt(1 - phi**2)
    z = torch.empty(days, n, n_signals, dtype=dt)
    z[0] = torch.randn(n, n_signals, generator=g, dtype=dt)
    for t in range(1, days):  # AR(1) recursion over time (not over samples)
        z[t] = phi * z[t - 1] + innov[t]
    alpha = torch.zeros(days, n, dtype=dt)
    alpha[1:] = DRIFT * torch.tanh(z[:-1] @ a)
    f = sf * torch.randn(days, n_factors, generator=g, dtype=dt)
    eps = se * torch.randn(days, n, generator=g, dtype=dt)
    returns = f @ b.T + alpha + eps
    sigma = sf**2 * b @ b.T + se**2 * torch.eye(n, dtype=dt)
    return {"returns": returns, "signals": z, "alpha": alpha, "sigma": sigma, "loading": a}


def oracle_sharpe_bounds(
    alpha_bar: torch.Tensor, sigma: torch.Tensor, k: int
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Bounds (lower, upper) on the exact-k long-only population oracle Sharpe at each decision (per day).

    ``alpha_bar`` (B, n): the true mean drift over each holding period; ``sigma`` (n, n): the true daily
    covariance. The oracle is :math:`\max\{\bar\alpha^\top w/\sqrt{w^\top\Sigma w}: w\ge 0, 1^\top w = 1,
    \|w\|_0\le k\}`. Upper: the long-only tangency on all n assets (no cardinality). Lower: the better of the
    long-only tangency re-solved on the top k of the unconstrained-cardinality long-only weights and on the
    top k of :math:`\bar\alpha_i/\Sigma_{ii}^{1/2}` (both feasible k-sparse portfolios). When the long-only
    tangency holds at most k assets the two bounds coincide and equal the oracle. Multiply by
    :math:`\sqrt{252}` to annualise. Needs some :math:`\bar\alpha_i > 0` in every row.
    """
    from optarium.soft.sparse_tangent_portfolio import hard_topk_mask, sharpe_ratio, sparse_tangent_weights

    if alpha_bar.ndim != 2 or sigma.shape != (alpha_bar.shape[-1],) * 2:
        raise ValueError(f"alpha_bar: expected (B, n) with sigma (n, n), got {tuple(alpha_bar.shape)}")
    n = alpha_bar.shape[-1]
    k = check_int("k", k, minimum=1, maximum=n)
    chol = torch.linalg.cholesky(sigma).expand(len(alpha_bar), n, n)
    ones = torch.ones_like(alpha_bar)
    w_all = sparse_tangent_weights(alpha_bar, chol, ones, ridge_rel=0.0)
    upper = sharpe_ratio(w_all, alpha_bar, sigma)
    lowers = []
    for score in (w_all, alpha_bar / sigma.diagonal().sqrt()):
        w = sparse_tangent_weights(alpha_bar, chol, hard_topk_mask(score, k), ridge_rel=0.0)
        lowers.append(sharpe_ratio(w, alpha_bar, sigma))
    return torch.maximum(*lowers), upper
