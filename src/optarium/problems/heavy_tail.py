r"""Heavy-tailed gradient-noise models: p-BCM (Student-t) and sub-Weibull, with vectorised samplers.

The two noise assumptions of Zhu, Xu & Ji, "Stochastic Weakly Convex Optimization Under Heavy-Tailed Noises"
(arXiv:2507.13283):

- **p-BCM** (bounded p-th central moment): :math:`E\lVert U\rVert^p \le \sigma^p` for some
  :math:`p \in (1, 2]`; the variance may be infinite when :math:`p < 2`. :class:`StudentTNoise` draws
  :math:`U = s\,(t_\nu^{(1)}, \dots, t_\nu^{(d)})` with i.i.d. Student-t coordinates, which is p-BCM for every
  :math:`p < \nu` and has infinite variance when :math:`\nu \le 2`.
- **sub-Weibull** with tail parameter :math:`\theta \ge 1/2`:
  :math:`P(\lvert U\rvert \ge t) \le 2\exp(-(t/\sigma)^{1/\theta})`. :class:`SubWeibullNoise` draws
  :math:`U = s\,\operatorname{sign}(z)\lvert z\rvert^{2\theta}` per coordinate with :math:`z \sim N(0, 1)`,
  which satisfies the bound with :math:`\sigma = s\,2^{\theta}` (:math:`\theta = 1`: sub-exponential,
  :math:`\theta = 1/2`: Gaussian).

Samplers take a ``torch.Generator`` (reproducible streams) and return tensors of any shape; dtype and device
follow the arguments. Student-t variates use Bailey's polar method (R. W. Bailey, "Polar generation of random
variates with the t-distribution", Math. Comp. 62, 1994): draw :math:`(u, v)` uniform in the unit disc,
:math:`w = u^2 + v^2`, and return :math:`u\sqrt{\nu(w^{-2/\nu} - 1)/w}`; rejection is vectorised (a few
batched rounds), so no Python loop runs over samples.

**α-stable noise** (the driver of the Lévy mirror flow, :mod:`optarium.optim.levy_mirror`).
:class:`AlphaStableNoise` draws i.i.d. stable coordinates :math:`S_\alpha(\sigma, \beta, 0)` in the **S1**
parametrisation (Samorodnitsky & Taqqu; Nolan's S1; ``scipy.stats.levy_stable``'s default
``parameterization = "S1"``): characteristic function
:math:`E e^{iuX} = \exp(-\lvert\sigma u\rvert^\alpha (1 - i\beta\operatorname{sign}(u)\tan(\pi\alpha/2)))`
for :math:`\alpha \ne 1` and
:math:`\exp(-\sigma\lvert u\rvert(1 + i\beta\tfrac{2}{\pi}\operatorname{sign}(u)\log\lvert u\rvert))`
for :math:`\alpha = 1`. So :math:`\alpha = 2` is :math:`N(0, 2\sigma^2)` (not :math:`N(0, \sigma^2)`),
:math:`\alpha = 1, \beta = 0` is Cauchy with scale :math:`\sigma`, and for :math:`\beta = 0` S1 and S0
coincide.
:math:`E\lvert X\rvert^p < \infty` iff :math:`p < \alpha` (for :math:`\alpha < 2`); the tail is
:math:`P(\lvert X\rvert > u) \sim C_\alpha \sigma^\alpha u^{-\alpha}`. Sampling is the Chambers–Mallows–Stuck
transform (J. M. Chambers, C. L. Mallows, B. W. Stuck, "A method for simulating stable random variables",
JASA 71, 1976; in the form of R. Weron, "On the Chambers-Mallows-Stuck method...", Stat. Prob. Letters 28,
1996) of :math:`V \sim U(-\pi/2, \pi/2)` and :math:`W \sim \operatorname{Exp}(1)`:

.. math::
    X = S_{\alpha,\beta}\,\frac{\sin(\alpha(V + B))}{\cos(V)^{1/\alpha}}
        \Big(\frac{\cos(V - \alpha(V + B))}{W}\Big)^{(1-\alpha)/\alpha},\quad
    B = \frac{\arctan(\beta\tan(\pi\alpha/2))}{\alpha},\quad
    S_{\alpha,\beta} = (1 + \beta^2\tan^2(\pi\alpha/2))^{1/(2\alpha)}

(:math:`\alpha \ne 1`), and :math:`X = \tfrac{2}{\pi}\big((\tfrac{\pi}{2} + \beta V)\tan V -
\beta\log\frac{(\pi/2) W\cos V}{\pi/2 + \beta V}\big)` (:math:`\alpha = 1`); then :math:`\sigma X` (plus
:math:`\tfrac{2}{\pi}\beta\sigma\log\sigma` at :math:`\alpha = 1`). :func:`chambers_mallows_stuck` exposes the
transform of given :math:`(V, W)` with ``alpha`` a number or a tensor broadcast against them, so several α
can share one set of uniform/exponential draws (common random numbers). ``scipy.stats.levy_stable`` is the
reference the tests compare against (KS test, quantiles); it is not used here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from optarium._core.validation import check_in_range, check_positive

__all__ = [
    "AlphaStableNoise",
    "StudentTNoise",
    "SubWeibullNoise",
    "alpha_stable",
    "chambers_mallows_stuck",
    "student_t",
    "student_t_abs_moment",
    "student_t_pbcm_sigma",
    "sub_weibull",
    "sub_weibull_abs_moment",
    "sub_weibull_sigma",
]

_ACCEPT = math.pi / 4  # acceptance rate of the unit-disc rejection step


def _shape(shape: int | tuple[int, ...] | torch.Size) -> tuple[int, ...]:
    if isinstance(shape, int):
        shape = (shape,)
    shape = tuple(int(s) for s in shape)
    if any(s < 0 for s in shape):
        raise ValueError(f"shape: must have non-negative sizes, got {shape}")
    return shape


def student_t(
    shape: int | tuple[int, ...] | torch.Size,
    nu: float,
    *,
    scale: float = 1.0,
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float64,
    device: str | torch.device | None = None,
) -> torch.Tensor:
    r"""I.i.d. :math:`s \cdot t_\nu` variates of the given shape (Bailey's polar method).

    Args:
        shape: output shape.
        nu: degrees of freedom, finite and > 0 (``nu <= 2``: infinite variance; ``nu <= 1``: no mean).
        scale: ``s``, finite and > 0.
        generator: the random stream (default: torch's global generator). Its device sets the sampling
            device when ``device`` is not given.
        dtype, device: of the result. Sampling runs in float64 and is cast at the end.
    """
    nu = check_positive("nu", nu)
    scale = check_positive("scale", scale)
    shape = _shape(shape)
    if device is None:
        device = generator.device if generator is not None else torch.device("cpu")
    n = math.prod(shape)
    out = torch.empty(n, dtype=torch.float64, device=device)
    filled = 0
    while filled < n:
        need = n - filled
        m = int(need / _ACCEPT * 1.02) + 32
        uv = torch.rand(2, m, generator=generator, dtype=torch.float64, device=device).mul_(2).sub_(1)
        u, v = uv[0], uv[1]
        w = u * u + v * v
        ok = (w <= 1) & (w > 0)
        u, w = u[ok][:need], w[ok][:need]
        k = u.numel()
        out[filled : filled + k] = u * torch.sqrt(nu * (w.pow(-2.0 / nu) - 1) / w)
        filled += k
    return out.mul_(scale).reshape(shape).to(dtype)


def sub_weibull(
    shape: int | tuple[int, ...] | torch.Size,
    theta: float,
    *,
    scale: float = 1.0,
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float64,
    device: str | torch.device | None = None,
) -> torch.Tensor:
    r"""I.i.d. :math:`s\,\operatorname{sign}(z)\lvert z\rvert^{2\theta}`, z ~ N(0, 1): sub-Weibull(θ).

    ``theta`` >= 1/2 (1/2 is Gaussian, 1 sub-exponential); ``scale`` finite and > 0. The tail satisfies
    :math:`P(\lvert U\rvert \ge t) \le 2\exp(-(t/\sigma)^{1/\theta})` with :math:`\sigma` =
    :func:`sub_weibull_sigma`.
    """
    theta = check_in_range("theta", theta, 0.5, math.inf, high_inclusive=False)
    scale = check_positive("scale", scale)
    shape = _shape(shape)
    if device is None:
        device = generator.device if generator is not None else torch.device("cpu")
    z = torch.randn(shape, generator=generator, dtype=torch.float64, device=device)
    return (torch.sign(z) * z.abs().pow(2 * theta)).mul_(scale).to(dtype)


def student_t_abs_moment(nu: float, a: float) -> float:
    r""":math:`c_{\nu,a} = E\lvert t_\nu\rvert^a = \nu^{a/2}\Gamma(\tfrac{a+1}{2})\Gamma(\tfrac{\nu-a}{2})
    / (\sqrt\pi\,\Gamma(\tfrac{\nu}{2}))`, finite for :math:`-1 < a < \nu` (``ValueError`` otherwise)."""
    nu = check_positive("nu", nu)
    a = check_in_range("a", a, -1.0, nu, low_inclusive=False, high_inclusive=False)
    log_c = (
        0.5 * a * math.log(nu)
        + math.lgamma((a + 1) / 2)
        + math.lgamma((nu - a) / 2)
        - 0.5 * math.log(math.pi)
        - math.lgamma(nu / 2)
    )
    return math.exp(log_c)


def student_t_pbcm_sigma(nu: float, p: float, d: int, scale: float = 1.0) -> float:
    r"""A p-BCM constant of :math:`U = s\,(t_\nu^{(i)})_{i \le d}`: :math:`\sigma = s(d\,c_{\nu,p})^{1/p}`.

    Valid for :math:`p \le 2` and :math:`p < \nu`: :math:`\lVert U\rVert_2 \le \lVert U\rVert_p` gives
    :math:`E\lVert U\rVert_2^p \le d\,s^p c_{\nu,p}`.
    """
    p = check_in_range("p", p, 1.0, 2.0, low_inclusive=False)
    if not p < nu:
        raise ValueError(f"p: must be < nu = {nu} for a finite p-th moment, got {p}")
    if int(d) < 1:
        raise ValueError(f"d: must be >= 1, got {d}")
    return check_positive("scale", scale) * (int(d) * student_t_abs_moment(nu, p)) ** (1 / p)


def sub_weibull_abs_moment(theta: float, a: float, scale: float = 1.0) -> float:
    r""":math:`E\lvert s\,\operatorname{sign}(z)\lvert z\rvert^{2\theta}\rvert^a
    = s^a 2^{\theta a}\Gamma(\theta a + \tfrac12)/\sqrt\pi` (finite for every :math:`a > -1/(2\theta)`)."""
    theta = check_in_range("theta", theta, 0.5, math.inf, high_inclusive=False)
    a = check_in_range("a", a, -1 / (2 * theta), math.inf, low_inclusive=False, high_inclusive=False)
    return check_positive("scale", scale) ** a * math.exp(
        theta * a * math.log(2) + math.lgamma(theta * a + 0.5) - 0.5 * math.log(math.pi)
    )


def sub_weibull_sigma(theta: float, scale: float = 1.0) -> float:
    r""":math:`\sigma = s\,2^\theta`: :math:`P(\lvert U\rvert \ge t) \le 2\exp(-(t/\sigma)^{1/\theta})`.

    Per coordinate; from the Gaussian tail :math:`P(\lvert z\rvert \ge r) \le 2e^{-r^2/2}` with
    :math:`r = (t/s)^{1/(2\theta)}`.
    """
    theta = check_in_range("theta", theta, 0.5, math.inf, high_inclusive=False)
    return check_positive("scale", scale) * 2.0**theta


@dataclass(frozen=True)
class StudentTNoise:
    """p-BCM noise: ``scale`` times i.i.d. Student-t(``nu``) coordinates (infinite variance for nu <= 2)."""

    nu: float
    scale: float = 1.0

    def __post_init__(self) -> None:
        check_positive("nu", self.nu)
        check_positive("scale", self.scale)

    def sample(
        self,
        shape: int | tuple[int, ...] | torch.Size,
        generator: torch.Generator | None = None,
        *,
        dtype: torch.dtype = torch.float64,
        device: str | torch.device | None = None,
    ) -> torch.Tensor:
        """Noise of the given shape (coordinates i.i.d.)."""
        return student_t(shape, self.nu, scale=self.scale, generator=generator, dtype=dtype, device=device)

    def pbcm_sigma(self, p: float, d: int) -> float:
        """The p-BCM constant of a ``d``-dimensional draw (:func:`student_t_pbcm_sigma`)."""
        return student_t_pbcm_sigma(self.nu, p, d, self.scale)


@dataclass(frozen=True)
class SubWeibullNoise:
    """Sub-Weibull(``theta``) noise: ``scale * sign(z) |z|**(2 theta)`` per coordinate, z ~ N(0, 1)."""

    theta: float
    scale: float = 1.0

    def __post_init__(self) -> None:
        check_in_range("theta", self.theta, 0.5, math.inf, high_inclusive=False)
        check_positive("scale", self.scale)

    def sample(
        self,
        shape: int | tuple[int, ...] | torch.Size,
        generator: torch.Generator | None = None,
        *,
        dtype: torch.dtype = torch.float64,
        device: str | torch.device | None = None,
    ) -> torch.Tensor:
        """Noise of the given shape (coordinates i.i.d.)."""
        return sub_weibull(
            shape, self.theta, scale=self.scale, generator=generator, dtype=dtype, device=device
        )

    @property
    def sigma(self) -> float:
        """The per-coordinate sub-Weibull constant (:func:`sub_weibull_sigma`)."""
        return sub_weibull_sigma(self.theta, self.scale)


def _check_alpha(value: float) -> float:
    return check_in_range("alpha", value, 0.0, 2.0, low_inclusive=False)


def chambers_mallows_stuck(
    v: torch.Tensor,
    w: torch.Tensor,
    alpha: float | torch.Tensor,
    *,
    beta: float = 0.0,
    scale: float = 1.0,
) -> torch.Tensor:
    r"""The Chambers–Mallows–Stuck transform: S1 stable variates from :math:`V \sim U(-\pi/2, \pi/2)` and
    :math:`W \sim \operatorname{Exp}(1)` (see the module docstring for the formula and the parametrisation).

    Args:
        v, w: tensors of broadcastable shapes (``v`` in :math:`(-\pi/2, \pi/2)`, ``w`` > 0).
        alpha: stability index in (0, 2]: a number, or a tensor (every entry in (0, 2]) broadcast against
            ``v`` and ``w`` (one α per row, the same draws for every α: common random numbers).
        beta: skewness in [-1, 1] (0: symmetric). scale: :math:`\sigma`, finite and > 0.

    Returns a tensor of the broadcast shape in ``v``'s dtype.
    """
    beta = check_in_range("beta", beta, -1.0, 1.0)
    scale = check_positive("scale", scale)
    if not isinstance(v, torch.Tensor) or not v.is_floating_point():
        raise TypeError(f"v: must be a floating tensor, got {type(v).__name__}")
    if not isinstance(w, torch.Tensor) or not w.is_floating_point():
        raise TypeError(f"w: must be a floating tensor, got {type(w).__name__}")
    if isinstance(alpha, torch.Tensor):
        a = alpha.to(dtype=v.dtype, device=v.device)
        if not bool(((a > 0) & (a <= 2)).all()):
            raise ValueError(f"alpha: every entry must be in (0, 2], got {alpha.tolist()}")
    else:
        a = torch.tensor(_check_alpha(alpha), dtype=v.dtype, device=v.device)
    half_pi = math.pi / 2
    one = a == 1
    a_safe = torch.where(one, torch.full_like(a, 0.5), a)  # the alpha = 1 rows use their own formula
    cos_v = torch.cos(v)
    if beta == 0.0:
        # sin(aV) / cos(V)^(1/a) * (cos((1 - a) V) / W)^((1 - a) / a), in log form so that log cos V and log W
        # are shared by every alpha (cos((1 - a) V) > 0 since |1 - a| <= 1 and |V| < pi/2)
        inv = 1.0 / a_safe
        expo = (1 - a_safe) * inv
        log_part = expo * (torch.log(torch.cos((1 - a_safe) * v)) - torch.log(w)) - inv * torch.log(cos_v)
        x = torch.sin(a_safe * v) * torch.exp(log_part)
        x1 = torch.tan(v) if bool(one.any()) else None
    else:
        zeta = beta * torch.tan(half_pi * a_safe)
        b = torch.atan(zeta) / a_safe
        s = (1 + zeta * zeta).pow(0.5 / a_safe)
        x = s * torch.sin(a_safe * (v + b)) * cos_v.pow(-1.0 / a_safe)
        x = x * (torch.cos(v - a_safe * (v + b)) / w).pow((1 - a_safe) / a_safe)
        x1 = None
        if bool(one.any()):
            hb = half_pi + beta * v
            x1 = (hb * torch.tan(v) - beta * torch.log(half_pi * w * cos_v / hb)) / half_pi
            x1 = x1 + (beta * math.log(scale) / half_pi)  # the S1 shift at alpha = 1: (2/pi) beta log(sigma)
    if x1 is not None:
        x = torch.where(one, x1, x)
    return x * scale


def alpha_stable(
    shape: int | tuple[int, ...] | torch.Size,
    alpha: float,
    *,
    beta: float = 0.0,
    scale: float = 1.0,
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float64,
    device: str | torch.device | None = None,
) -> torch.Tensor:
    r"""I.i.d. stable variates :math:`S_\alpha(\sigma, \beta, 0)` (S1, ``scipy.stats.levy_stable``'s default)
    of the given shape, by :func:`chambers_mallows_stuck`.

    ``alpha`` in (0, 2] (2: :math:`N(0, 2\sigma^2)`; 1 with ``beta = 0``: Cauchy), ``beta`` in [-1, 1],
    ``scale`` :math:`\sigma` finite and > 0. The stream: one ``torch.rand`` for :math:`V` then one
    ``exponential_`` for :math:`W`, both of ``shape``, from ``generator``. Sampling runs in float64 and is
    cast to ``dtype`` at the end.
    """
    alpha = _check_alpha(alpha)
    beta = check_in_range("beta", beta, -1.0, 1.0)
    scale = check_positive("scale", scale)
    shape = _shape(shape)
    if device is None:
        device = generator.device if generator is not None else torch.device("cpu")
    v = torch.rand(shape, generator=generator, dtype=torch.float64, device=device)
    v = v.sub_(0.5).mul_(math.pi)
    w = torch.empty(shape, dtype=torch.float64, device=device).exponential_(generator=generator)
    return chambers_mallows_stuck(v, w, alpha, beta=beta, scale=scale).to(dtype)


@dataclass(frozen=True)
class AlphaStableNoise:
    r"""α-stable noise: i.i.d. :math:`S_\alpha(\text{scale}, \beta, 0)` coordinates in the S1 parametrisation.

    ``alpha`` in (0, 2] (finite p-th moment iff p < α for α < 2; α = 2 is Gaussian with variance
    ``2 * scale**2``), ``beta`` in [-1, 1] (default 0, symmetric), ``scale`` > 0. Same ``sample`` contract as
    :class:`StudentTNoise`.
    """

    alpha: float
    scale: float = 1.0
    beta: float = 0.0

    def __post_init__(self) -> None:
        _check_alpha(self.alpha)
        check_positive("scale", self.scale)
        check_in_range("beta", self.beta, -1.0, 1.0)

    def sample(
        self,
        shape: int | tuple[int, ...] | torch.Size,
        generator: torch.Generator | None = None,
        *,
        dtype: torch.dtype = torch.float64,
        device: str | torch.device | None = None,
    ) -> torch.Tensor:
        """Noise of the given shape (coordinates i.i.d.)."""
        return alpha_stable(
            shape, self.alpha, beta=self.beta, scale=self.scale, generator=generator, dtype=dtype,
            device=device,
        )  # fmt: skip

    @property
    def variance(self) -> float:
        """Per-coordinate variance: ``2 * scale**2`` at α = 2, ``inf`` below."""
        return 2 * self.scale**2 if self.alpha == 2 else math.inf
