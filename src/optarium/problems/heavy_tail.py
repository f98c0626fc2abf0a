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
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from optarium._core.validation import check_in_range, check_positive

__all__ = [
    "StudentTNoise",
    "SubWeibullNoise",
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
