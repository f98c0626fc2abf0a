r"""SO(3) for the landing samplers: the constraint set, exact data, exact scores and sample-quality metrics.

Part of the constrained-diffusion-landing method (:mod:`optarium.generative.landing`; paper: Jeon,
Muehlebach, Tao, ICML 2026, arXiv 2604.17838). The spec lists SO(3) in R^9 (:math:`X^\top X = I`) as an
optional manifold; the paper's own benchmark is SO(10), whose data are not available offline. Everything here
is reconstructed for this library (the spec gives no SO(3) details), and only reuses the generic
:class:`~optarium.generative.landing.Constraints` / :class:`~optarium.generative.landing.LandingDiffusion`
interfaces (no SO(3)-specific sampler code).

**Constraint set** (:func:`so3_constraints`). A rotation is a point ``x = vec(R)`` of R^9 (row-major) with the
6 independent equations :math:`h(R) = \mathrm{triu}(R^\top R - I) = 0` (upper triangle, diagonal included).
Their zero set is O(3), which has two components; the orientation ``det R = +1`` is kept by continuity: the
samplers start on SO(3) and move by small steps, and every step's output is checked (the
``component`` hook of :class:`Constraints`): a trajectory with ``det R <= 0`` is dropped and counted in
``extras["wrong_component"]`` (it never happened in the tests and experiment; the nearest singular matrix is
at Frobenius distance 1 from any rotation, so a step would have to be of that size). Facts used by the tests:

- the row space of ``J(Y)`` is :math:`\{Y S: S = S^\top\}`, so the tangent projection at a rotation is
  :math:`P_R V = R\,\mathrm{skew}(R^\top V)` (closed form, :func:`so3_tangent`);
- a Gauss-Newton step from :math:`Y = U P` (polar form, ``P`` symmetric positive definite) gives
  :math:`U (P^2 + I)(2P)^{-1}` (the minimum-norm solution of the linearised equations is independent of
  which 6 independent equations are used): the polar factor is kept and each singular value goes
  :math:`p \mapsto (p^2 + 1)/(2p)` (Newton's iteration for 1, quadratic). So the implicit landing step is
  quadratic, the Gauss-Newton projection converges to the polar factor :math:`U = Y (Y^\top Y)^{-1/2}` (the
  nearest rotation, :func:`so3_project_svd`, the closed-form reference), and explicit landing with rate
  ``c`` contracts :math:`\|R^\top R - I\|` by :math:`1 - c` per step near the set.

**Data** (:func:`matrix_fisher_sample`): an equal-weight mixture of isotropic matrix-Fisher laws,
density :math:`\propto \sum_k \exp(\kappa\,\mathrm{tr}(M_k^\top R))` w.r.t. the Haar measure. Exact sampler: a
component ``k``, a relative rotation :math:`Q = M_k^\top R` with a uniform axis and an angle ``w`` of
density :math:`\propto (1 - \cos w) e^{2\kappa\cos w}` on :math:`[0, \pi]` (the Haar angle law
:math:`(1 - \cos w)/\pi` times :math:`e^{\kappa\,\mathrm{tr} Q}`, :math:`\mathrm{tr} Q = 1 + 2\cos w`), drawn
by rejection from the Maxwell proposal :math:`w^2 e^{-a\kappa w^2}` with :math:`a = 4/\pi^2` (valid since
:math:`1 - \cos w \le w^2/2` and :math:`\sin(w/2) \ge w/\pi` on :math:`[0, \pi]`; acceptance about
:math:`a^{3/2} \approx 0.26` for large :math:`\kappa`). :func:`matrix_fisher_angle_cdf` is the angle's CDF
(quadrature on a fine grid, error < 1e-9), :func:`haar_angle_cdf` the Haar one, :math:`(w - \sin w)/\pi`.

**Exact score** (:class:`MatrixFisherScore`): the ambient (R^9) gradient of the log density,
:math:`\kappa \sum_k \pi_k(R) M_k` with softmax responsibilities :math:`\pi_k`; the samplers' tangent
projections turn it into the Riemannian gradient. With a constant noise level the reverse OLLA chain with
this drift is a (landing- or projection-discretised) overdamped Langevin chain whose stationary law is the
data law. For the underdamped samplers the spec's signed-dt convention moves the position by
:math:`-\sigma^2|\Delta t|\,P v'` in reverse time, so the drift that makes the reverse ULLA chain a kinetic
Langevin chain for the data law is the *negative* gradient: ``sign=-1`` (checked by the tests). This is a
Langevin sampler with an exact score, not a trained reverse diffusion (the reverse diffusion needs the score
of the noised law, which has no closed form here).

**Metric** (:func:`rotation_mmd`): the unbiased squared MMD with the Gaussian kernel
:math:`\exp(-\|R - S\|_F^2 / (2\ell^2))` (a function of the relative rotation angle,
:math:`\|R - S\|_F^2 = 4(1 - \cos w_{rel})`), so data vs fresh data from the same law is 0 in expectation.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from optarium._core.validation import check_int, check_positive
from optarium.generative.landing import Constraints

__all__ = [
    "MatrixFisherScore",
    "haar_angle_cdf",
    "haar_rotations",
    "matrix_fisher_angle_cdf",
    "matrix_fisher_sample",
    "rotation_angle",
    "rotation_mmd",
    "so3_constraints",
    "so3_exp",
    "so3_project_svd",
    "so3_tangent",
    "triad_centres",
]

_IU = torch.triu_indices(3, 3)


def _mat(x: torch.Tensor) -> torch.Tensor:
    return x.reshape(*x.shape[:-1], 3, 3)


def _so3_h(x: torch.Tensor) -> torch.Tensor:
    R = _mat(x)
    G = R.transpose(-1, -2) @ R - torch.eye(3, dtype=x.dtype, device=x.device)
    return G[..., _IU[0], _IU[1]]


def _so3_positive(x: torch.Tensor) -> torch.Tensor:
    return torch.linalg.det(_mat(x)) > 0


def so3_constraints(**kw: Any) -> Constraints:
    """SO(3) in R^9 (row-major ``vec R``): ``h = triu(R^T R - I)`` (6 equations), ``det R > 0`` kept as the
    ``component`` (trajectories that leave it are dropped and counted). ``kw`` go to :class:`Constraints`."""
    return Constraints(9, h=_so3_h, component=_so3_positive, **kw)


def _check_x(name: str, x: Any) -> torch.Tensor:
    if not isinstance(x, torch.Tensor) or x.ndim != 2 or x.shape[1] != 9:
        raise ValueError(
            f"{name}: expected a tensor (n, 9) of row-major 3 x 3 matrices, got {getattr(x, 'shape', x)}"
        )
    if not torch.isfinite(x).all():
        raise ValueError(f"{name}: non-finite entries")
    return x


def so3_tangent(x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Closed-form tangent projection at rotations: :math:`R\\,\\mathrm{skew}(R^\\top V)` (``(n, 9)``)."""
    R, V = _mat(_check_x("x", x)), _mat(_check_x("v", v))
    A = R.transpose(-1, -2) @ V
    return (R @ (A - A.transpose(-1, -2)) / 2).reshape(-1, 9)


def so3_project_svd(x: torch.Tensor) -> torch.Tensor:
    """Closed-form nearest rotation (Frobenius): :math:`U\\,\\mathrm{diag}(1, 1, \\det UV^\\top) V^\\top`
    from the SVD :math:`Y = U\\Sigma V^\\top`; for ``det Y > 0`` this is the polar factor
    :math:`Y(Y^\\top Y)^{-1/2}`."""
    Y = _mat(_check_x("x", x))
    U, _, Vh = torch.linalg.svd(Y)
    d = torch.linalg.det(U @ Vh)
    D = torch.ones(Y.shape[0], 3, dtype=Y.dtype, device=Y.device)
    D[:, 2] = d
    return (U @ torch.diag_embed(D) @ Vh).reshape(-1, 9)


def so3_exp(omega: torch.Tensor) -> torch.Tensor:
    """Rodrigues: rotation matrices ``(n, 9)`` of rotation vectors ``omega`` ``(n, 3)`` (angle = norm)."""
    if not isinstance(omega, torch.Tensor) or omega.ndim != 2 or omega.shape[1] != 3:
        raise ValueError(f"omega: expected a tensor (n, 3), got {getattr(omega, 'shape', omega)}")
    th = omega.norm(dim=-1, keepdim=True)
    k = omega / th.clamp_min(1e-300)
    K = torch.zeros(omega.shape[0], 3, 3, dtype=omega.dtype, device=omega.device)
    K[:, 0, 1], K[:, 0, 2], K[:, 1, 2] = -k[:, 2], k[:, 1], -k[:, 0]
    K = K - K.transpose(-1, -2)
    s, c = torch.sin(th).unsqueeze(-1), torch.cos(th).unsqueeze(-1)
    eye = torch.eye(3, dtype=omega.dtype, device=omega.device)
    return (eye + s * K + (1 - c) * (K @ K)).reshape(-1, 9)


def rotation_angle(x: torch.Tensor, centre: torch.Tensor | None = None) -> torch.Tensor:
    """Rotation angle in ``[0, pi]`` of ``R`` (or of :math:`M^\\top R` for a ``centre`` ``M``, shape (9,) or
    (3, 3)): :math:`\\arccos((\\mathrm{tr} - 1)/2)`."""
    R = _mat(_check_x("x", x))
    if centre is not None:
        M = centre.reshape(3, 3).to(R.dtype)
        R = M.transpose(0, 1) @ R
    tr = R.diagonal(dim1=-2, dim2=-1).sum(-1)
    return torch.arccos(((tr - 1) / 2).clamp(-1.0, 1.0))


def haar_rotations(
    n: int, *, generator: torch.Generator | None = None, dtype: torch.dtype = torch.float64
) -> torch.Tensor:
    """``n`` Haar-uniform rotations ``(n, 9)`` (normalised Gaussian quaternions)."""
    n = check_int("n", n, minimum=1)
    q = torch.randn(n, 4, dtype=dtype, generator=generator)
    w, a, b, c = (q / q.norm(dim=-1, keepdim=True)).unbind(-1)
    R = torch.stack(
        [
            1 - 2 * (b * b + c * c), 2 * (a * b - c * w), 2 * (a * c + b * w),
            2 * (a * b + c * w), 1 - 2 * (a * a + c * c), 2 * (b * c - a * w),
            2 * (a * c - b * w), 2 * (b * c + a * w), 1 - 2 * (a * a + b * b),
        ],
        dim=-1,
    )  # fmt: skip
    return R


def haar_angle_cdf(w: torch.Tensor) -> torch.Tensor:
    """CDF of the Haar rotation angle, density :math:`(1 - \\cos w)/\\pi` on ``[0, pi]``."""
    w = w.clamp(0.0, math.pi)
    return (w - torch.sin(w)) / math.pi


def matrix_fisher_angle_cdf(w: torch.Tensor, kappa: float, *, grid: int = 200_001) -> torch.Tensor:
    """CDF of the angle of an isotropic matrix-Fisher law (density
    :math:`\\propto (1-\\cos w)e^{2\\kappa\\cos w}` on ``[0, pi]``), by the trapezoid rule on ``grid``
    points (float64) and linear interpolation."""
    kappa = check_positive("kappa", kappa)
    grid = check_int("grid", grid, minimum=101)
    u = torch.linspace(0.0, math.pi, grid, dtype=torch.float64)
    f = (1 - torch.cos(u)) * torch.exp(2 * kappa * (torch.cos(u) - 1))
    F = torch.cat([torch.zeros(1, dtype=torch.float64), torch.cumsum((f[1:] + f[:-1]) / 2, 0)])
    F = F / F[-1]
    wd = w.detach().to(torch.float64).clamp(0.0, math.pi)
    pos = wd / math.pi * (grid - 1)
    i = pos.floor().long().clamp(max=grid - 2)
    frac = pos - i
    return (F[i] * (1 - frac) + F[i + 1] * frac).to(w.dtype)


def _check_centres(centres: Any) -> torch.Tensor:
    if (
        not isinstance(centres, torch.Tensor)
        or centres.ndim != 2
        or centres.shape[1] != 9
        or not len(centres)
    ):
        raise ValueError(
            f"centres: expected a tensor (k >= 1, 9) of rotations, got {getattr(centres, 'shape', centres)}"
        )
    M = _mat(centres.to(torch.float64))
    err = (M.transpose(-1, -2) @ M - torch.eye(3, dtype=torch.float64)).abs().amax()
    if not bool(torch.isfinite(err)) or float(err) > 1e-8 or bool((torch.linalg.det(M) <= 0).any()):
        raise ValueError("centres: rows must be rotations (R^T R = I to 1e-8, det R = +1)")
    return centres


def triad_centres(angle: float = 2 * math.pi / 3, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Three rotations ``{I, Q, Q^2}`` with ``Q`` the rotation by ``angle`` about ``(1, 1, 1)/sqrt 3`` (the
    default ``2 pi / 3`` makes them the cyclic group C3, so a mixture around them is invariant under left
    multiplication by ``Q``: Langevin chains started from the Haar law fall into the three basins with equal
    probability)."""
    axis = torch.tensor([[1.0, 1.0, 1.0]], dtype=dtype) / math.sqrt(3.0)
    Q = so3_exp(axis * angle).reshape(3, 3)
    eye = torch.eye(3, dtype=dtype)
    return torch.stack([eye, Q, Q @ Q]).reshape(3, 9)


def matrix_fisher_sample(
    centres: torch.Tensor, kappa: float, n: int, *, generator: torch.Generator | None = None
) -> torch.Tensor:
    """``n`` exact draws ``(n, 9)`` (float64) from the equal-weight mixture of isotropic matrix-Fisher laws
    :math:`\\propto \\exp(\\kappa\\,\\mathrm{tr}(M_k^\\top R))` around the rows of ``centres`` ``(k, 9)``."""
    centres = _check_centres(centres).to(torch.float64)
    kappa = check_positive("kappa", kappa)
    n = check_int("n", n, minimum=1)
    comp = torch.randint(0, centres.shape[0], (n,), generator=generator)
    a = 4.0 / math.pi**2
    s = 1.0 / math.sqrt(2 * a * kappa)  # Maxwell proposal: w = |N(0, s^2 I_3)|
    w = torch.empty(n, dtype=torch.float64)
    todo = torch.arange(n)
    while todo.numel():  # vectorised rejection rounds (about 4 rounds halve the remainder)
        m = todo.numel()
        prop = (s * torch.randn(m, 3, dtype=torch.float64, generator=generator)).norm(dim=-1)
        u = torch.rand(m, dtype=torch.float64, generator=generator)
        ratio = (
            (1 - torch.cos(prop))
            / (prop**2 / 2).clamp_min(1e-300)
            * torch.exp(2 * kappa * (torch.cos(prop) - 1) + a * kappa * prop**2)
        )
        acc = (prop <= math.pi) & (u < ratio)
        w[todo[acc]] = prop[acc]
        todo = todo[~acc]
    axis = torch.randn(n, 3, dtype=torch.float64, generator=generator)
    axis = axis / axis.norm(dim=-1, keepdim=True)
    Q = _mat(so3_exp(axis * w.unsqueeze(-1)))
    return (_mat(centres)[comp] @ Q).reshape(n, 9)


class MatrixFisherScore(nn.Module):
    """Exact drift for the samplers: ``sign`` x the ambient gradient of the log density of the mixture
    :math:`\\sum_k \\exp(\\kappa\\,\\mathrm{tr}(M_k^\\top R))`, i.e. :math:`\\kappa\\sum_k \\pi_k(R) M_k`.

    Called like the samplers' networks, on ``cat([x, t])`` or ``cat([x, v, t])``: only the first 9 columns
    (``x``) are used. ``sign = +1`` for the overdamped samplers, ``-1`` for the underdamped ones (see the
    module docstring: the spec's signed-dt reverse step). Has no parameters (the samplers then run it in
    ``x``'s dtype).
    """

    def __init__(self, centres: torch.Tensor, kappa: float, *, sign: float = 1.0) -> None:
        super().__init__()
        centres = _check_centres(centres)
        self.kappa = check_positive("kappa", kappa)
        if sign not in (1.0, -1.0):
            raise ValueError(f"sign: must be +1 or -1, got {sign}")
        self.sign = float(sign)
        self.register_buffer("centres", centres.detach().clone().to(torch.float64))

    def forward(self, inp: torch.Tensor) -> torch.Tensor:
        x = inp[:, :9]
        M = self.centres.to(x.dtype)
        logits = self.kappa * (x @ M.T)  # tr(M_k^T R) = <vec M_k, vec R>
        pi = torch.softmax(logits, dim=-1)
        return self.sign * self.kappa * (pi @ M)


def rotation_mmd(x: torch.Tensor, y: torch.Tensor, *, bandwidth: float = 0.5) -> float:
    """Unbiased squared MMD between two samples of 3 x 3 matrices ``(n, 9)``, ``(m, 9)`` (``n, m >= 2``)
    with the Gaussian kernel :math:`\\exp(-\\|R - S\\|_F^2/(2\\ell^2))`,
    ``bandwidth`` = :math:`\\ell` (float64)."""
    bandwidth = check_positive("bandwidth", bandwidth)
    a, b = _check_x("x", x).to(torch.float64), _check_x("y", y).to(torch.float64)
    if a.shape[0] < 2 or b.shape[0] < 2:
        raise ValueError(f"x, y: need at least 2 points each, got {a.shape[0]} and {b.shape[0]}")

    def k(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        d2 = ((p * p).sum(-1, keepdim=True) + (q * q).sum(-1) - 2 * p @ q.T).clamp_min(0.0)
        return torch.exp(-d2 / (2 * bandwidth**2))

    n, m = a.shape[0], b.shape[0]
    kxx, kyy = k(a, a), k(b, b)
    sxx = (kxx.sum() - kxx.diagonal().sum()) / (n * (n - 1))
    syy = (kyy.sum() - kyy.diagonal().sum()) / (m * (m - 1))
    return float(sxx + syy - 2 * k(a, b).mean())
