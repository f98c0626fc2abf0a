r"""Threshold-weighted CRPS, lower-tail calibration metrics and the calibrated predictive family of tcGP.

Reference: A. Pion, E. Vazquez, "Goal-Oriented Lower-Tail Calibration of Gaussian Processes for Bayesian
Optimization", arXiv:2605.20145 (2026). The paper scores predictive distributions below a threshold
:math:`t` with the threshold-weighted CRPS (weight :math:`1\{u \le t\}`) and assesses two notions of
calibration: occurrence calibration of :math:`p_t(x) = F_x(t)` over the design space and thresholded
:math:`\mu`-calibration on the sublevel set :math:`S_t = \{x : f(x) \le t\}`. The formulas below are ours
(the paper's method section was not reachable); see :mod:`optarium.bo.tcgp` for the estimator.

- twCRPS: :math:`\mathrm{twCRPS}_t(F, y) = \int_{-\infty}^{t} (F(u) - 1\{y \le u\})^2\,du`. For
  :math:`F = N(\mu, \sigma^2)`, with :math:`T = (t-\mu)/\sigma`, :math:`Y = (y-\mu)/\sigma`,
  :math:`\Psi(z) = z\Phi(z) + \varphi(z)` and :math:`A(T) = \int_{-\infty}^T \Phi^2 = T\Phi(T)^2 +
  2\Phi(T)\varphi(T) - \Phi(\sqrt2 T)/\sqrt\pi`:
  :math:`\mathrm{twCRPS}_t = \sigma[A(T) - 2\cdot 1\{Y<T\}(\Psi(T) - \Psi(Y)) + (T-Y)_+]`, evaluated in a
  cancellation-free rearrangement; :math:`t = +\infty` gives the usual CRPS.
- Any other family: 64-node Gauss-Legendre on :math:`[F^{-1}(10^{-10}), \min(F^{-1}(1-10^{-10}), t)]`
  split at :math:`y` and at the mode, plus the two flat parts added exactly (below the lower cut the
  integrand is 1 on :math:`[y, \cdot]`, above the upper cut it is :math:`1\{u < y\}`), so nothing below
  the predictive mass is lost (a cut at :math:`\mu - 8\sigma` would drop exactly the over-confident case).
- Calibrated family: :math:`\tilde F_x(y) = G_{s,\beta}((y - \mu_n(x))/\sigma_n(x))` with
  :math:`G_{s,\beta}` the zero-mean generalised normal of shape :math:`\beta` and scale :math:`a = s\sqrt2`
  (so :math:`\beta = 2` is :math:`N(0, s^2)` and :math:`s = 1, \beta = 2` is the plain GP).
- Leave-one-out (Dubrule): with :math:`C = K^{-1}`, :math:`\sigma_{-i}^2 = 1/C_{ii}` and
  :math:`y_i - \mu_{-i} = (C(y - m))_i / C_{ii}` for a known mean :math:`m`; with an estimated constant mean
  :math:`C` is replaced by :math:`Q = C - C\mathbf 1\mathbf 1^\top C / (\mathbf 1^\top C \mathbf 1)`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from optarium._core.validation import check_type

__all__ = [
    "CalibratedPredictive",
    "brier_score",
    "conditional_pit",
    "crps_gaussian",
    "gennorm_cdf",
    "gennorm_expected_improvement",
    "gennorm_tail_quantile",
    "ks_uniform",
    "log_h",
    "loo_predictions",
    "reliability_curve",
    "twcrps",
    "twcrps_gaussian",
    "twcrps_gennorm",
    "twcrps_quadrature",
]

_SQRT2 = math.sqrt(2.0)
_SQRTPI = math.sqrt(math.pi)
_TAIL = 1e-10


def _phi(z: torch.Tensor) -> torch.Tensor:
    return torch.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)


def _Phi(z: torch.Tensor) -> torch.Tensor:
    return torch.special.ndtr(z)


def _as_tensor(x: torch.Tensor | float, like: torch.Tensor | None = None) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        return x
    if like is not None:
        return torch.as_tensor(x, dtype=like.dtype, device=like.device)
    return torch.as_tensor(x, dtype=torch.float64)


def crps_gaussian(mean: torch.Tensor, sd: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    r"""CRPS of :math:`N(\mu, \sigma^2)` at ``y``:
    :math:`\sigma[Y(2\Phi(Y) - 1) + 2\varphi(Y) - 1/\sqrt\pi]`. ``sd`` must be > 0 everywhere."""
    if not bool((torch.as_tensor(sd) > 0).all()):
        raise ValueError(f"sd: must be > 0 everywhere, got min {float(torch.as_tensor(sd).min())!r}")
    z = (y - mean) / sd
    return sd * (z * (2 * _Phi(z) - 1) + 2 * _phi(z) - 1 / _SQRTPI)


def twcrps_gaussian(
    mean: torch.Tensor, sd: torch.Tensor, y: torch.Tensor, threshold: torch.Tensor | float
) -> torch.Tensor:
    r"""Threshold-weighted CRPS of :math:`N(\mu, \sigma^2)` at ``y`` (weight :math:`1\{u \le t\}`).

    Broadcasts over its arguments; ``threshold = inf`` gives the CRPS. Lower is better.
    """
    y = _as_tensor(y)
    mean, sd = _as_tensor(mean, y), _as_tensor(sd, y)
    t = _as_tensor(threshold, y)
    mean, sd, y, t = torch.broadcast_tensors(mean, sd, y, t)
    T = (t - mean) / sd
    Y = (y - mean) / sd
    inf = torch.isinf(T) & (T > 0)
    Tf = torch.where(inf, torch.zeros_like(T), T)
    # y < t: A(T) - 2 Psi(T) + T written without cancellation, plus 2 Psi(Y) - Y
    upper = Tf * _Phi(-Tf) ** 2 - 2 * _phi(Tf) * _Phi(-Tf)
    upper = torch.where(inf, torch.zeros_like(upper), upper) - _Phi(_SQRT2 * T) / _SQRTPI
    below = upper + Y * (2 * _Phi(Y) - 1) + 2 * _phi(Y)
    # y >= t: A(T)
    above = Tf * _Phi(Tf) ** 2 + 2 * _Phi(Tf) * _phi(Tf) - _Phi(_SQRT2 * Tf) / _SQRTPI
    out = torch.where(Y < T, below, above)
    return sd * out.clamp_min(0.0)


@functools.lru_cache(maxsize=8)
def _leggauss(n: int) -> tuple[tuple[float, ...], tuple[float, ...]]:
    import numpy as np

    x, w = np.polynomial.legendre.leggauss(n)
    return tuple(float(v) for v in x), tuple(float(v) for v in w)


def twcrps_quadrature(
    cdf: Callable[[torch.Tensor], torch.Tensor],
    y: torch.Tensor,
    threshold: torch.Tensor | float,
    lower: torch.Tensor,
    upper: torch.Tensor,
    mode: torch.Tensor,
    *,
    nodes: int = 64,
) -> torch.Tensor:
    r"""twCRPS of any continuous predictive CDF by Gauss-Legendre quadrature that keeps all of (-inf, t].

    Args:
        cdf: ``cdf(u)`` for ``u`` of shape ``batch + (K,)`` (``batch`` the broadcast shape of the other
            arguments); the parameters of the distribution must broadcast against it (add a trailing
            dimension).
        y: observations; threshold: ``t`` (may be ``inf``).
        lower, upper: the quantiles :math:`F^{-1}(10^{-10})` and :math:`F^{-1}(1 - 10^{-10})`; outside them
            the CDF is treated as 0 and 1 and the flat parts are added exactly.
        mode: where the density may have a cusp (the quadrature is split there and at ``y``).
        nodes: Gauss-Legendre nodes per segment (64).
    """
    y = _as_tensor(y)
    t = _as_tensor(threshold, y)
    y, t, lower, upper, mode = torch.broadcast_tensors(y, t, lower, upper, mode)
    ymt = torch.minimum(y, t)
    flat_lo = (torch.minimum(lower, t) - ymt).clamp_min(0.0)
    flat_hi = (ymt - upper).clamp_min(0.0)
    a = lower
    b = torch.maximum(torch.minimum(upper, t), a)
    inner = torch.stack([y.clamp(min=a, max=b), mode.clamp(min=a, max=b)], -1).sort(-1).values
    pts = torch.cat([a.unsqueeze(-1), inner, b.unsqueeze(-1)], -1)  # (..., 4)
    lo, hi = pts[..., :-1], pts[..., 1:]  # (..., 3)
    xs, ws = _leggauss(nodes)
    x = torch.tensor(xs, dtype=y.dtype, device=y.device)
    w = torch.tensor(ws, dtype=y.dtype, device=y.device)
    half = (0.5 * (hi - lo)).unsqueeze(-1)
    u = 0.5 * (hi + lo).unsqueeze(-1) + half * x  # (..., 3, nodes)
    F = cdf(u.reshape(*u.shape[:-2], -1)).reshape(u.shape)
    ind = (u >= y[..., None, None]).to(F.dtype)
    integral = ((F - ind) ** 2 * w * half).sum((-1, -2))
    return flat_lo + flat_hi + integral


def gennorm_cdf(z: torch.Tensor, s: torch.Tensor | float, beta: torch.Tensor | float) -> torch.Tensor:
    r"""CDF :math:`G_{s,\beta}(z)` of the zero-mean generalised normal with shape :math:`\beta` and scale
    :math:`a = s\sqrt2` (:math:`\beta = 2`: :math:`N(0, s^2)`), from the regularised upper incomplete gamma
    function: :math:`G = \tfrac12 Q(1/\beta, |z/a|^\beta)` for :math:`z < 0`, :math:`1 - G(-z)` above.
    """
    s = _as_tensor(s, z)
    beta = _as_tensor(beta, z)
    w = z / (s * _SQRT2)
    tail = 0.5 * torch.special.gammaincc(1.0 / beta, w.abs() ** beta)
    return torch.where(w < 0, tail, 1.0 - tail)


@functools.lru_cache(maxsize=64)
def gennorm_tail_quantile(beta: float, p: float = _TAIL) -> float:
    r"""The :math:`p`-quantile (:math:`p < 1/2`) of the standard generalised normal of shape :math:`\beta`
    (scale 1, density :math:`\propto e^{-|w|^\beta}`): :math:`-Q^{-1}(1/\beta, 2p)^{1/\beta}`."""
    from scipy.special import gammainccinv

    return -(float(gammainccinv(1.0 / beta, 2.0 * p)) ** (1.0 / beta))


def twcrps_gennorm(
    Y: torch.Tensor, T: torch.Tensor | float, s: float, beta: float, *, nodes: int = 64
) -> torch.Tensor:
    r"""twCRPS of :math:`G_{s,\beta}` (standardised residual units) at ``Y`` with threshold ``T``.

    :math:`\beta = 2` uses the Gaussian closed form; other shapes use :func:`twcrps_quadrature`.
    """
    T = _as_tensor(T, Y)
    s = float(s)
    beta = float(beta)
    if beta == 2.0:
        zero = torch.zeros((), dtype=Y.dtype, device=Y.device)
        return twcrps_gaussian(zero, zero + s, Y, T)
    q = gennorm_tail_quantile(beta) * s * _SQRT2
    Y, T = torch.broadcast_tensors(Y, T)
    lo = torch.full_like(Y, q)
    return twcrps_quadrature(
        lambda u: gennorm_cdf(u, s, beta), Y, T, lo, -lo, torch.zeros_like(Y), nodes=nodes
    )


def gennorm_expected_improvement(c: torch.Tensor, s: float, beta: float) -> torch.Tensor:
    r""":math:`E[(c - Z)_+]` for :math:`Z \sim G_{s,\beta}`, closed form (differentiable in ``c``).

    With :math:`a = s\sqrt2`, :math:`W = Z/a` and :math:`k = c/a`:
    :math:`E[(c - Z)_+] = a[k\,F_W(k) + \tfrac{\Gamma(2/\beta)}{2\Gamma(1/\beta)} Q(2/\beta, |k|^\beta)]`;
    :math:`\beta = 2` gives :math:`s\,h(c/s)`, :math:`h(z) = z\Phi(z) + \varphi(z)`.
    """
    s = float(s)
    beta = float(beta)
    if beta == 2.0:
        return s * torch.exp(log_h(c / s))  # no cancellation (and no negative values) far in the tail
    a = s * _SQRT2
    k = c / a
    kb = k.abs() ** beta
    b = torch.as_tensor(beta, dtype=c.dtype, device=c.device)
    tail = 0.5 * torch.special.gammaincc(1.0 / b, kb)
    Fk = torch.where(k < 0, tail, 1.0 - tail)
    K = math.exp(math.lgamma(2.0 / beta) - math.lgamma(1.0 / beta)) / 2.0
    return a * (k * Fk + K * torch.special.gammaincc(2.0 / b, kb)).clamp_min(0.0)


def log_h(z: torch.Tensor) -> torch.Tensor:
    r""":math:`\log h(z)`, :math:`h(z) = z\Phi(z) + \varphi(z)`, accurate for very negative ``z`` (log-EI).

    For :math:`z < -1`: :math:`h(z) = \varphi(z)(1 - |z| m(|z|))` with the Mills ratio
    :math:`m(u) = \sqrt{\pi/2}\,\mathrm{erfcx}(u/\sqrt2)`.
    """
    zc = z.clamp_min(-1.0)
    direct = torch.log(zc * _Phi(zc) + _phi(zc))
    u = (-z).clamp_min(1.0)
    mills = math.sqrt(math.pi / 2) * torch.special.erfcx(u / _SQRT2)
    tail = -0.5 * u * u - 0.5 * math.log(2 * math.pi) + torch.log1p(-u * mills).clamp_min(-1e300)
    # log1p(-u m) loses precision once u m rounds to 1; then 1 - u m ~ 1/u^2 - 3/u^4
    asym = -0.5 * u * u - 0.5 * math.log(2 * math.pi) + torch.log(u.pow(-2) - 3 * u.pow(-4))
    tail = torch.where(u > 1e3, asym, tail)
    return torch.where(z > -1.0, direct, tail)


@dataclass(frozen=True)
class CalibratedPredictive:
    r"""Predictive distributions :math:`\tilde F_x(y) = G_{s,\beta}((y - \mu(x))/\sigma(x))` at many points.

    Attributes:
        mean: :math:`\mu(x)`, shape ``(...)``.
        sd: the GP standard deviation :math:`\sigma(x)` (before calibration), same shape.
        s: spread factor (1 for the plain GP).
        beta: generalised-normal shape (2: Gaussian).
    """

    mean: torch.Tensor
    sd: torch.Tensor
    s: float = 1.0
    beta: float = 2.0

    @property
    def scale(self) -> torch.Tensor:
        r"""The calibrated spread :math:`s\,\sigma(x)` (the sd when :math:`\beta = 2`)."""
        return self.s * self.sd

    @property
    def shape(self) -> float:
        r"""The shape :math:`\beta`."""
        return self.beta

    @property
    def variance(self) -> torch.Tensor:
        r"""Predictive variance :math:`2 s^2 \sigma^2 \Gamma(3/\beta)/\Gamma(1/\beta)`."""
        ratio = math.exp(math.lgamma(3.0 / self.beta) - math.lgamma(1.0 / self.beta))
        return 2.0 * (self.s * self.sd) ** 2 * ratio

    def cdf(self, y: torch.Tensor | float) -> torch.Tensor:
        r""":math:`\tilde F_x(y)`."""
        y = _as_tensor(y, self.mean)
        z = (y - self.mean) / self.sd
        if self.beta == 2.0:
            return _Phi(z / self.s)
        return gennorm_cdf(z, self.s, self.beta)

    def expected_improvement(self, best_f: torch.Tensor | float) -> torch.Tensor:
        r"""EI for minimisation: :math:`\int_{-\infty}^{m} \tilde F_x(y)\,dy = E[(m - \xi(x))_+]`."""
        best_f = _as_tensor(best_f, self.mean)
        return self.sd * gennorm_expected_improvement((best_f - self.mean) / self.sd, self.s, self.beta)

    def log_expected_improvement(self, best_f: torch.Tensor | float) -> torch.Tensor:
        r""":math:`\log` EI; for :math:`\beta = 2` via :func:`log_h` (no underflow), otherwise
        :math:`\log\max(\mathrm{EI}, 10^{-300})`."""
        best_f = _as_tensor(best_f, self.mean)
        if self.beta == 2.0:
            sc = self.s * self.sd
            return torch.log(sc) + log_h((best_f - self.mean) / sc)
        return torch.log(self.expected_improvement(best_f).clamp_min(1e-300))

    def twcrps(self, y: torch.Tensor, threshold: torch.Tensor | float) -> torch.Tensor:
        r"""Per-point :math:`\mathrm{twCRPS}_t(\tilde F_x, y)`."""
        Y = (y - self.mean) / self.sd
        T = (_as_tensor(threshold, y) - self.mean) / self.sd
        return self.sd * twcrps_gennorm(Y, T, self.s, self.beta)


def twcrps(pred: CalibratedPredictive, y: torch.Tensor, threshold: torch.Tensor | float) -> torch.Tensor:
    r"""Per-point threshold-weighted CRPS :math:`\int_{-\infty}^t (\tilde F_x(u) - 1\{y \le u\})^2 du` of
    ``pred`` at the observations ``y`` (closed form for Gaussians, quadrature otherwise). Lower is better."""
    check_type("pred", pred, CalibratedPredictive)
    check_type("y", y, torch.Tensor)
    if isinstance(threshold, float) and math.isnan(threshold):
        raise ValueError("threshold: must not be NaN")
    return pred.twcrps(y, threshold)


def loo_predictions(
    K: torch.Tensor, y: torch.Tensor, mean: torch.Tensor | float | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Closed-form leave-one-out predictions :math:`(\mu_{-i}, \sigma_{-i})` of a GP (Dubrule 1983).

    Args:
        K: ``(n, n)`` covariance of the observations (kernel plus any jitter or noise).
        y: ``(n,)`` observations.
        mean: a known constant prior mean (simple kriging); ``None`` estimates a constant mean by generalised
            least squares (universal kriging: it is re-estimated without point ``i``).
    """
    check_type("K", K, torch.Tensor)
    check_type("y", y, torch.Tensor)
    n = y.shape[-1]
    if K.shape != (n, n):
        raise ValueError(f"K: must have shape ({n}, {n}), got {tuple(K.shape)}")
    if not torch.isfinite(y).all():
        raise ValueError("y: contains NaN or inf")
    L = torch.linalg.cholesky(K)
    C = torch.cholesky_inverse(L)
    if mean is None:
        c1 = C.sum(-1)
        C = C - torch.outer(c1, c1) / c1.sum()
        r = C @ y
    else:
        r = C @ (y - _as_tensor(mean, y))
    d = torch.diagonal(C)
    return y - r / d, d.rsqrt()


def brier_score(p: torch.Tensor, event: torch.Tensor) -> torch.Tensor:
    r"""Mean Brier score :math:`\frac1N\sum (p_i - 1\{\text{event}_i\})^2` (occurrence calibration of
    :math:`p_t(x) = \tilde F_x(t)` against :math:`1\{f(x) \le t\}`)."""
    return ((p - event.to(p.dtype)) ** 2).mean()


def reliability_curve(
    p: torch.Tensor, event: torch.Tensor, bins: int = 10
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Reliability diagram data: per equal-width bin of ``p``, (mean predicted p, observed frequency, count).

    Empty bins hold NaN.
    """
    idx = (p * bins).long().clamp(0, bins - 1)
    count = torch.zeros(bins, dtype=p.dtype, device=p.device).index_add_(0, idx, torch.ones_like(p))
    sp = torch.zeros_like(count).index_add_(0, idx, p)
    se = torch.zeros_like(count).index_add_(0, idx, event.to(p.dtype))
    nan = torch.full_like(count, math.nan)
    ok = count > 0
    return torch.where(ok, sp / count, nan), torch.where(ok, se / count, nan), count


def conditional_pit(pred: CalibratedPredictive, y: torch.Tensor, threshold: float) -> torch.Tensor:
    r"""Conditional PIT values :math:`U = \tilde F_x(y)/\tilde F_x(t)` at the points with :math:`y \le t`.

    Under thresholded :math:`\mu`-calibration on :math:`S_t` they are Uniform(0, 1).
    """
    inside = y <= threshold
    Fy = pred.cdf(y)[inside]
    Ft = pred.cdf(torch.full_like(y, float(threshold)))[inside]
    return (Fy / Ft.clamp_min(1e-300)).clamp(0.0, 1.0)


def ks_uniform(u: torch.Tensor) -> torch.Tensor:
    r"""Kolmogorov-Smirnov distance :math:`\sup_v |\hat F_n(v) - v|` of ``u`` from Uniform(0, 1)."""
    n = u.shape[-1]
    if n == 0:
        raise ValueError("u: needs at least one value")
    v = u.sort(-1).values
    i = torch.arange(1, n + 1, dtype=u.dtype, device=u.device)
    return torch.maximum(i / n - v, v - (i - 1) / n).amax(-1)
