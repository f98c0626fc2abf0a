r"""Weakly convex test problems and the Moreau-envelope measure of near-stationarity.

A function :math:`\varphi` is :math:`\rho`-weakly convex if
:math:`\varphi + \tfrac{\rho}{2}\lVert\cdot\rVert^2` is convex. For :math:`\lambda < 1/\rho` its Moreau
envelope :math:`\varphi_\lambda(x) = \min_y \varphi(y) + \lVert y - x\rVert^2/(2\lambda)` is smooth with

.. math::  \nabla\varphi_\lambda(x) = \big(x - \operatorname{prox}_{\lambda\varphi}(x)\big)/\lambda,

and a small :math:`\lVert\nabla\varphi_\lambda(x)\rVert` certifies that :math:`x` is close to a point that is
nearly stationary (Davis & Drusvyatskiy, "Stochastic model-based minimization of weakly convex functions",
SIAM J. Optim. 2019). This is the measure used for weakly convex SGD, e.g. by Zhu, Xu & Ji,
"Stochastic Weakly Convex Optimization Under Heavy-Tailed Noises" (arXiv:2507.13283).

Everything is batched over leading dimensions (``x`` of shape ``[..., d]``), pure torch, dtype and device
following the data. Problems (from the clip-sgd-heavy-tail spec):

- :class:`NonconvexLeastSquares`: smooth, :math:`\varphi(x) = \frac{1}{2m}\lVert Ax - b\rVert^2 +
  \alpha\sum_j x_j^2/(1 + x_j^2)`, :math:`\rho = \alpha/2` (the penalty's curvature is smallest, -1/2, at
  :math:`\lvert x_j\rvert = 1`); its prox is solved to machine precision by gradient steps.
- :class:`RobustPhaseRetrieval`: nonsmooth,
  :math:`\varphi(x) = \frac1m\sum_i \lvert\langle a_i, x\rangle^2 - b_i\rvert` with a fraction of outliers
  among the :math:`b_i`; :math:`\rho = 2\lambda_{\max}(A^\top A)/m`. Its prox has no closed form, so the
  metric there is the relative distance to :math:`\{\pm x^*\}`.

:class:`WeaklyConvexOracle` packs either problem (its default data draw) as what a batched SGD simulation
needs: a (sub)gradient oracle, the metric, the start and a projection radius.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from optarium._core.validation import check_in_range, check_int, check_positive

__all__ = [
    "ORACLE_PROBLEMS",
    "NonconvexLeastSquares",
    "RobustPhaseRetrieval",
    "WeaklyConvexOracle",
    "moreau_grad",
    "moreau_grad_norm",
    "prox_by_gradient_descent",
    "soft_threshold",
]


def moreau_grad(x: torch.Tensor, prox_x: torch.Tensor, lam: float) -> torch.Tensor:
    r"""The Moreau gradient from a computed prox.

    :math:`\nabla\varphi_\lambda(x) = (x - \operatorname{prox}_{\lambda\varphi}(x))/\lambda`.
    """
    lam = check_positive("lam", lam)
    return (x - prox_x) / lam


def moreau_grad_norm(
    x: torch.Tensor,
    lam: float,
    prox: Callable[[torch.Tensor], torch.Tensor],
    *,
    rho: float | None = None,
) -> torch.Tensor:
    r""":math:`\lVert\nabla\varphi_\lambda(x)\rVert_2` over the last dimension of a batch ``x`` [..., d].

    Args:
        x: points.
        lam: :math:`\lambda > 0`; must be < 1/``rho`` when ``rho`` is given (the envelope is then smooth).
        prox: ``prox(x) -> prox_{lam phi}(x)`` (closed form, or :func:`prox_by_gradient_descent`).
        rho: the weak-convexity constant, for validating ``lam`` (optional).
    """
    lam = check_positive("lam", lam)
    if rho is not None and rho > 0 and not lam < 1 / check_positive("rho", rho):
        raise ValueError(f"lam: must be < 1/rho = {1 / rho:.6g} for a smooth envelope, got {lam}")
    return torch.linalg.vector_norm(moreau_grad(x, prox(x), lam), dim=-1)


def prox_by_gradient_descent(
    grad: Callable[[torch.Tensor], torch.Tensor],
    x: torch.Tensor,
    lam: float,
    *,
    smoothness: float,
    steps: int = 100,
) -> torch.Tensor:
    r""":math:`\operatorname{prox}_{\lambda\varphi}(x)` of a smooth :math:`\varphi` by gradient steps.

    Minimises :math:`\varphi(y) + \lVert y - x\rVert^2/(2\lambda)` from :math:`y = x` with step
    :math:`1/(L + 1/\lambda)` (batched), where ``smoothness`` :math:`= L` bounds :math:`\nabla^2\varphi`
    from above. For a :math:`\rho`-weakly convex :math:`\varphi` and :math:`\lambda < 1/\rho` the objective
    is :math:`(1/\lambda - \rho)`-strongly convex, so the error contracts by
    :math:`1 - (1/\lambda - \rho)/(L + 1/\lambda)` per step.
    """
    lam = check_positive("lam", lam)
    smoothness = check_positive("smoothness", smoothness)
    steps = check_int("steps", steps, minimum=1)
    eta = 1.0 / (smoothness + 1.0 / lam)
    y = x.clone()
    for _ in range(steps):
        y = y - eta * (grad(y) + (y - x) / lam)
    return y


def soft_threshold(x: torch.Tensor, t: float) -> torch.Tensor:
    r"""The prox of :math:`t\lvert\cdot\rvert`, elementwise.

    :math:`\operatorname{sign}(x)\max(\lvert x\rvert - t, 0)`.
    """
    t = check_positive("t", t)
    return torch.sign(x) * torch.clamp(x.abs() - t, min=0.0)


def _lambda_max_gram(a: torch.Tensor) -> float:
    return float(torch.linalg.eigvalsh(a.T @ a / a.shape[0])[-1])


@dataclass(frozen=True)
class NonconvexLeastSquares:
    r"""Smooth weakly convex problem :math:`\frac{1}{2m}\lVert Ax-b\rVert^2 + \alpha\sum_j x_j^2/(1+x_j^2)`.

    Build with :meth:`make`. ``a``: [m, d], ``b``: [m], ``x_signal``: the planted :math:`x^*` (not the
    minimiser, because of the penalty and the noise in ``b``).
    """

    a: torch.Tensor
    b: torch.Tensor
    alpha: float
    x_signal: torch.Tensor

    @classmethod
    def make(
        cls,
        *,
        m: int = 200,
        d: int = 20,
        alpha: float = 0.5,
        noise: float = 0.1,
        seed: int = 0,
        dtype: torch.dtype = torch.float64,
        device: str | torch.device = "cpu",
    ) -> NonconvexLeastSquares:
        """A with i.i.d. N(0, 1) entries, x* ~ N(0, I), b = A x* + noise N(0, I) (drawn from ``seed``)."""
        m, d = check_int("m", m, minimum=1), check_int("d", d, minimum=1)
        alpha = check_positive("alpha", alpha)
        noise = check_in_range("noise", noise, 0.0, math.inf, high_inclusive=False)
        gen = torch.Generator().manual_seed(check_int("seed", seed, minimum=0))
        a = torch.randn(m, d, generator=gen, dtype=torch.float64)
        x_signal = torch.randn(d, generator=gen, dtype=torch.float64)
        b = a @ x_signal + noise * torch.randn(m, generator=gen, dtype=torch.float64)
        return cls(a.to(dtype=dtype, device=device), b.to(dtype=dtype, device=device), alpha, x_signal.to(a))

    @property
    def dim(self) -> int:
        """The dimension d."""
        return int(self.a.shape[1])

    @property
    def rho(self) -> float:
        """The weak-convexity constant alpha / 2 (the least-squares part is convex)."""
        return self.alpha / 2

    @property
    def smoothness(self) -> float:
        """An upper bound on the Hessian: lambda_max(A^T A)/m + 2 alpha."""
        return _lambda_max_gram(self.a) + 2 * self.alpha

    def value(self, x: torch.Tensor) -> torch.Tensor:
        """phi(x) for x of shape [..., d]."""
        r = x @ self.a.T - self.b
        sq = x * x
        return 0.5 * (r * r).mean(-1) + self.alpha * (sq / (1 + sq)).sum(-1)

    def grad(self, x: torch.Tensor) -> torch.Tensor:
        """The gradient of phi at x of shape [..., d]."""
        m = self.a.shape[0]
        r = x @ self.a.T - self.b
        return r @ self.a / m + self.alpha * 2 * x / (1 + x * x) ** 2

    def fast_grad(self) -> Callable[[torch.Tensor], torch.Tensor]:
        """The gradient as a closure over the precomputed A^T A / m and A^T b / m (d x d work per point)."""
        m = self.a.shape[0]
        gram, atb, alpha = self.a.T @ self.a / m, self.a.T @ self.b / m, self.alpha

        def grad(x: torch.Tensor) -> torch.Tensor:
            return x @ gram - atb + alpha * 2 * x / (1 + x * x) ** 2

        return grad

    def prox(self, x: torch.Tensor, lam: float = 0.5, steps: int = 100) -> torch.Tensor:
        """prox_{lam phi}(x) by :func:`prox_by_gradient_descent` (machine precision at the defaults)."""
        return prox_by_gradient_descent(self.fast_grad(), x, lam, smoothness=self.smoothness, steps=steps)

    def moreau_grad_norm(self, x: torch.Tensor, lam: float = 0.5, steps: int = 100) -> torch.Tensor:
        """||grad phi_lam(x)|| for x of shape [..., d] (lam must be < 1/rho)."""
        return moreau_grad_norm(x, lam, lambda z: self.prox(z, lam, steps), rho=self.rho)


@dataclass(frozen=True)
class RobustPhaseRetrieval:
    r"""Nonsmooth weakly convex :math:`\frac1m\sum_i\lvert\langle a_i,x\rangle^2 - b_i\rvert` with outliers.

    Build with :meth:`make`. ``a``: [m, d], ``b``: [m] (clean :math:`\langle a_i, x^*\rangle^2` except at
    ``outliers``), ``x_signal``: :math:`x^*`.
    """

    a: torch.Tensor
    b: torch.Tensor
    x_signal: torch.Tensor
    outliers: torch.Tensor

    @classmethod
    def make(
        cls,
        *,
        m: int = 400,
        d: int = 20,
        outlier_fraction: float = 0.1,
        outlier_scale: float = 10.0,
        seed: int = 0,
        dtype: torch.dtype = torch.float64,
        device: str | torch.device = "cpu",
    ) -> RobustPhaseRetrieval:
        """a_i ~ N(0, I), b_i = <a_i, x*>^2; a random ``outlier_fraction`` of the b_i replaced by
        ``outlier_scale * median(b) * |N(0, 1)|`` (drawn from ``seed``)."""
        m, d = check_int("m", m, minimum=1), check_int("d", d, minimum=1)
        frac = check_in_range("outlier_fraction", outlier_fraction, 0.0, 0.5, high_inclusive=False)
        scale = check_positive("outlier_scale", outlier_scale)
        gen = torch.Generator().manual_seed(check_int("seed", seed, minimum=0))
        a = torch.randn(m, d, generator=gen, dtype=torch.float64)
        x_signal = torch.randn(d, generator=gen, dtype=torch.float64)
        b = (a @ x_signal) ** 2
        k = round(frac * m)
        idx = torch.randperm(m, generator=gen)[:k]
        mask = torch.zeros(m, dtype=torch.bool)
        mask[idx] = True
        b = b.clone()
        b[idx] = scale * b.median() * torch.randn(k, generator=gen, dtype=torch.float64).abs()
        to = {"dtype": dtype, "device": device}
        return cls(a.to(**to), b.to(**to), x_signal.to(**to), mask.to(device))

    @property
    def dim(self) -> int:
        """The dimension d."""
        return int(self.a.shape[1])

    @property
    def rho(self) -> float:
        """The weak-convexity constant 2 lambda_max(A^T A)/m."""
        return 2 * _lambda_max_gram(self.a)

    def value(self, x: torch.Tensor) -> torch.Tensor:
        """phi(x) for x of shape [..., d]."""
        return ((x @ self.a.T) ** 2 - self.b).abs().mean(-1)

    def subgrad(self, x: torch.Tensor) -> torch.Tensor:
        """A subgradient (2/m) sum_i sign(<a_i,x>^2 - b_i) <a_i,x> a_i at x of shape [..., d]."""
        s = x @ self.a.T
        return (torch.sign(s * s - self.b) * s) @ self.a * (2.0 / self.a.shape[0])

    def distance(self, x: torch.Tensor) -> torch.Tensor:
        """min(||x - x*||, ||x + x*||) / ||x*|| for x of shape [..., d] (the sign is not identifiable)."""
        xs = self.x_signal
        plus = torch.linalg.vector_norm(x - xs, dim=-1)
        minus = torch.linalg.vector_norm(x + xs, dim=-1)
        return torch.minimum(plus, minus) / torch.linalg.vector_norm(xs)

    def start(self, radius: float = 0.3, seed: int = 0) -> torch.Tensor:
        """x* + radius ||x*|| v with v a random unit vector (drawn from ``seed``)."""
        gen = torch.Generator().manual_seed(check_int("seed", seed, minimum=0))
        v = torch.randn(self.dim, generator=gen, dtype=torch.float64).to(self.x_signal)
        v = v / torch.linalg.vector_norm(v)
        return self.x_signal + check_positive("radius", radius) * torch.linalg.vector_norm(self.x_signal) * v

    def polyak_run(self, x0: torch.Tensor, steps: int = 3000) -> torch.Tensor:
        """Noise-free subgradient method with the Polyak step (phi* = phi(x*)); returns the last iterate.

        Reaching distance ~0 confirms that ±x* minimise phi for the drawn outliers.
        """
        steps = check_int("steps", steps, minimum=1)
        f_star = self.value(self.x_signal)
        x = x0.clone()
        for _ in range(steps):
            g = self.subgrad(x)
            gap = (self.value(x) - f_star).clamp(min=0.0)
            gg = (g * g).sum(-1)
            step = torch.where(
                gg > 0, gap / torch.where(gg > 0, gg, torch.ones_like(gg)), torch.zeros_like(gg)
            )
            x = x - step.unsqueeze(-1) * g
        return x


#: ``name`` choices of :class:`WeaklyConvexOracle`: nonconvex least squares, robust phase retrieval.
ORACLE_PROBLEMS = ("ls", "pr")


class WeaklyConvexOracle:
    r"""Gradient oracle, metric and start of one of the clip-sgd-heavy-tail spec's problems (data drawn once,
    seed 0), batched over leading dimensions of ``x``.

    Args:
        name: ``"ls"``: :class:`NonconvexLeastSquares` (``grad`` its exact gradient, ``metric`` the
            Moreau-envelope gradient norm :math:`\lVert\nabla\varphi_\lambda(x)\rVert` with ``lam``, start 0);
            ``"pr"``: :class:`RobustPhaseRetrieval` (``grad`` a subgradient, ``metric`` the relative
            distance to :math:`\{\pm x^*\}`, start at relative distance 0.3, seed 0).
        lam: the Moreau parameter :math:`\lambda` of the ``"ls"`` metric (unused for ``"pr"``).

    Attributes: ``name``, ``grad``, ``metric``, ``x0`` (float64), ``radius`` (twice the signal's norm: the
    projection ball of projected SGD), ``dim``.
    """

    def __init__(self, name: str, lam: float) -> None:
        if name not in ORACLE_PROBLEMS:
            raise ValueError(f"name: must be one of {ORACLE_PROBLEMS}, got {name!r}")
        self.name = name
        if name == "ls":
            p = NonconvexLeastSquares.make()
            self.grad = p.fast_grad()
            self.metric: Callable[[torch.Tensor], torch.Tensor] = lambda x: p.moreau_grad_norm(x, lam)
            self.x0 = torch.zeros(p.dim, dtype=torch.float64)
            self.radius = 2 * float(torch.linalg.vector_norm(p.x_signal))
        else:
            q = RobustPhaseRetrieval.make()
            self.grad = q.subgrad
            self.metric = q.distance
            self.x0 = q.start(0.3, seed=0)
            self.radius = 2 * float(torch.linalg.vector_norm(q.x_signal))
        self.dim = int(self.x0.numel())
