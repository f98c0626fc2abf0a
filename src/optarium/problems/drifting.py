r"""Drifting quadratics: a strongly convex objective whose minimiser moves, with four drift generators.

At time :math:`t` the objective is :math:`f_t(x) = \tfrac12 (x - \theta_t)^\top A (x - \theta_t)` with
:math:`A = \operatorname{diag}(\lambda_1, \dots, \lambda_d)`, the eigenvalues log-spaced in :math:`[\mu, L]`,
and the algorithm sees :math:`g_t = A(x_t - \theta_t) + \sigma\,\xi_t` with :math:`\xi_t \sim N(0, I)`.
The minimiser :math:`\theta_t` follows one of four drift generators (each returns the *unit* path
:math:`W_t` with :math:`W_0 = 0`; the optimum is :math:`\theta_t = \theta_0 + \delta\,W_t`):

- ``random_walk``: :math:`W_{t+1} = W_t + z_t/\sqrt d`, :math:`z_t \sim N(0, I)`
  (:math:`E\lVert\theta_{t+1} - \theta_t\rVert^2 = \delta^2`);
- ``linear`` (constant velocity): :math:`W_{t+1} = W_t + u`, :math:`u` a uniform random unit vector;
- ``switch`` (regime switches): every ``switch_every`` = K steps the optimum jumps by :math:`\delta\,u_k`,
  :math:`u_k` a fresh uniform random unit vector (:math:`W_t` changes at :math:`t = K, 2K, \dots`);
- ``rotation``: :math:`\theta_t` on a circle in a random 2-plane :math:`(u, v)` at angular speed
  :math:`\omega`, :math:`W_t = r\,[(\cos\omega t - 1)\,u + \sin\omega t\,v]` with
  :math:`r = 1/(2\sin(\omega/2))`, so that every step moves the optimum by a chord of length :math:`\delta`.

:class:`DriftingQuadratic` bundles the problem (its interface is the momentum-tracking spec's, reference:
Sahu, Hogan & Wells, "On the Provable Suboptimality of Momentum SGD in Nonstationary Stochastic
Optimization", arXiv:2601.12238). Its :meth:`~DriftingQuadratic.realise` draws, for each requested seed index,
independent streams (one ``torch.Generator`` per seed and per stream, from
:func:`optarium._core.seeding.derive_seed`) for the start :math:`\theta_0 \sim N(0, I)`, the unit drift
path, the unit gradient noise and the unit initial offset :math:`x_0 - \theta_0`. The streams do not depend on
:math:`\delta`, :math:`\sigma` or the initial scale, so two problems that differ only in those scales see the
same draws (common random numbers: the error of a noise-free run scales exactly with :math:`\delta^2`), and
runs with only noise, only drift or only an initial error use the same realisations as the joint run.
:func:`drift_statistics` gives the realised drift :math:`\Delta_t = \lVert\theta_{t+1} - \theta_t\rVert` and
the gradient variation :math:`V_T = \sum_t \sup_x \lVert\nabla f_{t+1}(x) - \nabla f_t(x)\rVert
= \sum_t \lVert A(\theta_{t+1} - \theta_t)\rVert` (exact for a fixed :math:`A`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import torch

from optarium._core.seeding import derive_seed
from optarium._core.validation import (
    check_choice,
    check_int,
    check_nonnegative,
    check_positive,
)

__all__ = [
    "DRIFTS",
    "DriftRealisation",
    "DriftingQuadratic",
    "drift_path",
    "drift_statistics",
    "linear_path",
    "log_spaced_eigenvalues",
    "random_walk_path",
    "rotation_path",
    "switch_path",
]

#: The drift generators of :func:`drift_path`.
DRIFTS: tuple[str, ...] = ("random_walk", "linear", "switch", "rotation")

_F64 = torch.float64


def _unit_vectors(n: int, dim: int, generator: torch.Generator) -> torch.Tensor:
    z = torch.randn(n, dim, generator=generator, dtype=_F64)
    return z / torch.linalg.vector_norm(z, dim=-1, keepdim=True)


def random_walk_path(steps: int, dim: int, generator: torch.Generator) -> torch.Tensor:
    r"""Unit random-walk path ``[steps + 1, dim]``: :math:`W_0 = 0`, :math:`W_{t+1} = W_t + z_t/\sqrt d`."""
    steps, dim = check_int("steps", steps, minimum=0), check_int("dim", dim, minimum=1)
    z = torch.randn(steps, dim, generator=generator, dtype=_F64) / math.sqrt(dim)
    return torch.cat([torch.zeros(1, dim, dtype=_F64), torch.cumsum(z, 0)])


def linear_path(steps: int, dim: int, generator: torch.Generator) -> torch.Tensor:
    """Unit constant-velocity path ``[steps + 1, dim]``: :math:`W_t = t\\,u`, ``u`` a random unit vector."""
    steps, dim = check_int("steps", steps, minimum=0), check_int("dim", dim, minimum=1)
    u = _unit_vectors(1, dim, generator)[0]
    return torch.arange(steps + 1, dtype=_F64).unsqueeze(1) * u


def switch_path(steps: int, dim: int, generator: torch.Generator, switch_every: int = 200) -> torch.Tensor:
    """Unit regime-switch path ``[steps + 1, dim]``: a jump by a fresh random unit vector at every multiple of
    ``switch_every`` (t = K, 2K, ...; :math:`W_t` is constant in between)."""
    steps, dim = check_int("steps", steps, minimum=0), check_int("dim", dim, minimum=1)
    k = check_int("switch_every", switch_every, minimum=1)
    n_jumps = steps // k
    u = _unit_vectors(n_jumps, dim, generator) if n_jumps else torch.zeros(0, dim, dtype=_F64)
    levels = torch.cat([torch.zeros(1, dim, dtype=_F64), torch.cumsum(u, 0)])  # level after j jumps
    idx = torch.arange(steps + 1) // k
    return levels[idx]


def rotation_path(
    steps: int, dim: int, generator: torch.Generator, omega: float = 2 * math.pi / 1000
) -> torch.Tensor:
    r"""Unit rotation path ``[steps + 1, dim]`` on a circle in a random 2-plane, chord 1 per step:
    :math:`W_t = r[(\cos\omega t - 1)u + \sin\omega t\,v]`, :math:`r = 1/(2\sin(\omega/2))`."""
    steps, dim = check_int("steps", steps, minimum=0), check_int("dim", dim, minimum=2)
    omega = check_positive("omega", omega)
    if omega >= math.pi:
        raise ValueError(f"omega: must be < pi, got {omega}")
    a = torch.randn(2, dim, generator=generator, dtype=_F64)
    q, _ = torch.linalg.qr(a.T)  # orthonormal columns spanning a uniform random 2-plane
    u, v = q[:, 0], q[:, 1]
    r = 1.0 / (2.0 * math.sin(omega / 2))
    t = torch.arange(steps + 1, dtype=_F64).unsqueeze(1) * omega
    return r * ((torch.cos(t) - 1.0) * u + torch.sin(t) * v)


def drift_path(
    kind: str,
    steps: int,
    dim: int,
    generator: torch.Generator,
    *,
    switch_every: int = 200,
    omega: float = 2 * math.pi / 1000,
) -> torch.Tensor:
    """The unit drift path ``[steps + 1, dim]`` of generator ``kind`` (one of :data:`DRIFTS`)."""
    check_choice("kind", kind, DRIFTS)
    if kind == "random_walk":
        return random_walk_path(steps, dim, generator)
    if kind == "linear":
        return linear_path(steps, dim, generator)
    if kind == "switch":
        return switch_path(steps, dim, generator, switch_every)
    return rotation_path(steps, dim, generator, omega)


def log_spaced_eigenvalues(dim: int, mu: float, L: float) -> torch.Tensor:
    """``dim`` eigenvalues log-spaced in [mu, L] (float64); ``dim = 1`` needs ``mu == L``."""
    dim = check_int("dim", dim, minimum=1)
    mu, L = check_positive("mu", mu), check_positive("L", L)
    if mu > L:
        raise ValueError(f"mu: must be <= L ({L}), got {mu}")
    if dim == 1:
        if mu != L:
            raise ValueError(f"mu: must equal L when dim = 1, got mu={mu}, L={L}")
        return torch.tensor([L], dtype=_F64)
    return torch.logspace(math.log10(mu), math.log10(L), dim, dtype=_F64)


def drift_statistics(theta: torch.Tensor, eigenvalues: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Realised drift and gradient variation of optimum paths ``theta`` ``[..., T + 1, d]``.

    Returns :math:`\Delta_t = \lVert\theta_{t+1} - \theta_t\rVert` ``[..., T]`` and
    :math:`V_T = \sum_t \lVert A(\theta_{t+1} - \theta_t)\rVert` ``[...]`` for ``A = diag(eigenvalues)``.
    """
    if theta.dim() < 2 or theta.shape[-1] != eigenvalues.numel():
        raise ValueError(f"theta: must be [..., T + 1, {eigenvalues.numel()}], got {tuple(theta.shape)}")
    step = theta[..., 1:, :] - theta[..., :-1, :]
    delta_t = torch.linalg.vector_norm(step, dim=-1)
    v_t = torch.linalg.vector_norm(step * eigenvalues, dim=-1).sum(-1)
    return delta_t, v_t


@dataclass(frozen=True)
class DriftRealisation:
    """Unit-scale draws of a :class:`DriftingQuadratic` for a list of seed indices (see :meth:`theta`).

    Attributes:
        seeds: the seed indices, one row each.
        theta0: starts ``[S, d]`` (:math:`N(0, I)`); path: unit drift paths ``[S, T + 1, d]`` (``W_0 = 0``);
        noise: unit gradient noise ``[S, T, d]``; offset: unit initial offsets ``[S, d]``; delta, noise_std,
        init_std: the problem's scales (optimum :math:`\\theta_0 + \\delta W_t`, noise
        :math:`\\sigma\\xi_t`, start :math:`x_0 = \\theta_0 + s\\,\\text{offset}`).
    """

    seeds: tuple[int, ...]
    theta0: torch.Tensor
    path: torch.Tensor
    noise: torch.Tensor
    offset: torch.Tensor
    delta: float
    noise_std: float
    init_std: float

    @property
    def steps(self) -> int:
        """The horizon T."""
        return int(self.noise.shape[1])

    def theta(self) -> torch.Tensor:
        """The optimum paths :math:`\\theta_t = \\theta_0 + \\delta W_t`, ``[S, T + 1, d]``."""
        return self.theta0.unsqueeze(1) + self.delta * self.path

    def x0(self) -> torch.Tensor:
        """The starts :math:`x_0 = \\theta_0 + s\\,\\text{offset}`, ``[S, d]``."""
        return self.theta0 + self.init_std * self.offset


@dataclass(frozen=True)
class DriftingQuadratic:
    """A drifting quadratic: curvature log-spaced in [mu, L], optimum moved by ``drift``, Gaussian noise.

    Args:
        dim: dimension d. mu, L: smallest and largest eigenvalue of A (``0 < mu <= L``).
        drift: one of :data:`DRIFTS`. delta: drift scale δ >= 0 (random-walk step size, velocity, jump size,
            chord per step). noise_std: gradient-noise σ >= 0. switch_every: K for ``switch``.
        omega: angular speed for ``rotation`` (in (0, π)). init_std: scale of the initial offset
            :math:`x_0 - \\theta_0` (0: start on the optimum). seed: the problem's base seed.

    >>> from optarium.problems.drifting import DriftingQuadratic, drift_statistics
    >>> p = DriftingQuadratic(dim=4, drift="linear", delta=0.1, seed=0)
    >>> r = p.realise([0, 1], steps=5)
    >>> tuple(r.theta().shape), round(float(drift_statistics(r.theta(), p.eigenvalues)[0][0, 0]), 12)
    ((2, 6, 4), 0.1)
    """

    dim: int = 20
    mu: float = 0.1
    L: float = 1.0
    drift: str = "random_walk"
    delta: float = 1e-2
    noise_std: float = 0.0
    switch_every: int = 200
    omega: float = 2 * math.pi / 1000
    init_std: float = 0.0
    seed: int = 0
    eigenvalues: torch.Tensor = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_int("dim", self.dim, minimum=1)
        check_choice("drift", self.drift, DRIFTS)
        check_nonnegative("delta", self.delta)
        check_nonnegative("noise_std", self.noise_std)
        check_int("switch_every", self.switch_every, minimum=1)
        check_positive("omega", self.omega)
        if self.omega >= math.pi:
            raise ValueError(f"omega: must be < pi, got {self.omega}")
        if self.drift == "rotation" and self.dim < 2:
            raise ValueError(f"dim: rotation needs dim >= 2, got {self.dim}")
        check_nonnegative("init_std", self.init_std)
        check_int("seed", self.seed, minimum=0)
        object.__setattr__(self, "eigenvalues", log_spaced_eigenvalues(self.dim, self.mu, self.L))

    def with_scales(self, **scales: float) -> DriftingQuadratic:
        """A copy with other ``delta``, ``noise_std`` or ``init_std`` (same draws: common random numbers)."""
        for k in scales:
            check_choice("scales", k, ("delta", "noise_std", "init_std"))
        return replace(self, **scales)

    def realise(self, seeds: Sequence[int], steps: int) -> DriftRealisation:
        """Draw the unit streams of seed indices ``seeds`` over ``steps`` steps (one generator per seed and
        stream, from :func:`~optarium._core.seeding.derive_seed`)."""
        steps = check_int("steps", steps, minimum=1)
        seeds = tuple(check_int("seeds", s, minimum=0) for s in seeds)
        if not seeds:
            raise ValueError("seeds: need at least one seed index")
        t0, paths, noise, offs = [], [], [], []
        kind_key = (
            (self.drift, self.switch_every, self.omega) if self.drift != "random_walk" else (self.drift,)
        )
        for s in seeds:
            g = torch.Generator().manual_seed(derive_seed(self.seed, "theta0", self.dim, s))
            t0.append(torch.randn(self.dim, generator=g, dtype=_F64))
            g = torch.Generator().manual_seed(derive_seed(self.seed, "drift", self.dim, *kind_key, s))
            paths.append(
                drift_path(self.drift, steps, self.dim, g, switch_every=self.switch_every, omega=self.omega)
            )
            g = torch.Generator().manual_seed(derive_seed(self.seed, "noise", self.dim, s))
            noise.append(torch.randn(steps, self.dim, generator=g, dtype=_F64))
            g = torch.Generator().manual_seed(derive_seed(self.seed, "offset", self.dim, s))
            offs.append(torch.randn(self.dim, generator=g, dtype=_F64))
        return DriftRealisation(
            seeds=seeds,
            theta0=torch.stack(t0),
            path=torch.stack(paths),
            noise=torch.stack(noise),
            offset=torch.stack(offs),
            delta=float(self.delta),
            noise_std=float(self.noise_std),
            init_std=float(self.init_std),
        )

    def value(self, x: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
        """:math:`f_t(x) - f_t(\\theta_t) = \\tfrac12 (x - \\theta)^\\top A (x - \\theta)` (last axis)."""
        e = x - theta
        return 0.5 * (e * e * self.eigenvalues).sum(-1)

    def grad(self, x: torch.Tensor, theta: torch.Tensor, noise: torch.Tensor | None = None) -> torch.Tensor:
        """The stochastic gradient :math:`A(x - \\theta) + \\sigma\\xi` (``noise`` is the unit draw ξ)."""
        g = self.eigenvalues * (x - theta)
        return g if noise is None else g + self.noise_std * noise
