r"""Stochastic mirror descent (SMD) under heavy-tailed noise, and the Lévy mirror flow (LMF).

Reference: Pierre-Louis Cauvin, Panayotis Mertikopoulos, "Bregman meets Lévy: Stochastic mirror descent with
heavy-tailed noise in continuous and discrete time", ICML 2026, arXiv:2606.03769. Only the abstract and a
paper-notes summary were reachable (no code): what is the paper's and what is reconstructed is listed below.

**Stochastic mirror descent** (Nemirovski & Yudin; Nesterov 2009 for the lazy form). Feasible set
:math:`X`, regulariser :math:`h` strongly convex on :math:`X`, mirror map
:math:`Q(y) = \arg\max_{x\in X}\{\langle y, x\rangle - h(x)\}`, noisy gradients
:math:`\hat g_t = \nabla f(x_t) + U_t` with :math:`E U_t = 0` and :math:`E\lVert U_t\rVert^p < \infty` for
some :math:`p \in (1, 2]` (the variance may be infinite):

- lazy (dual averaging): :math:`y_{t+1} = y_t - \gamma_t \hat g_t,\ x_{t+1} = Q(y_{t+1})`, with
  :math:`y_1 = \nabla h(x_1)`;
- greedy (Bregman proximal): :math:`x_{t+1} = \arg\min_{x\in X}\{\gamma_t\langle\hat g_t, x\rangle +
  D_h(x, x_t)\}`.

Mirror maps (:class:`Euclidean`, :class:`Entropic`), acting along the **last dimension** of a tensor:

- :class:`Euclidean`: :math:`h = \tfrac12\lVert x\rVert^2`, :math:`Q` the Euclidean projection onto
  :math:`\mathbb{R}^d` (identity), a ball :math:`\lVert x\rVert \le r` or a box; greedy is projected SGD, lazy
  is "lazy projection" (the two differ only when the projection is active); unconstrained, both are SGD.
- :class:`Entropic`: :math:`h = \sum_i x_i\log x_i` on the simplex, :math:`Q(y) = \operatorname{softmax}(y)`
  (exponentiated gradient, :math:`x_{t+1} \propto x_t\odot e^{-\gamma_t \hat g_t}`). It runs in log space
  (:math:`\log x` is kept and renormalised by ``logsumexp``), so a noise draw with
  :math:`\gamma_t\lvert U\rvert > 745` does not underflow a coordinate to an exact 0 (which a multiplicative
  update would never revive) and ``softmax`` is exact for :math:`\lvert y\rvert` up to :math:`10^8` and
  beyond.
  On the simplex lazy and greedy coincide in exact arithmetic (:math:`\log x_t = y_t - \log\sum e^{y_t}`);
  they differ by rounding only.

**Lévy mirror flow** (the paper's continuous-time model): :math:`dY_t = -\nabla f(X_t)\,dt + dL_t`,
:math:`X_t = Q(Y_t)`, driven by a centred Lévy process :math:`L` with finite :math:`p`-th moments; for
:math:`p < 2` the paths jump. Simulation (reconstructed: the paper's scheme was not reachable):
:func:`levy_mirror_flow` is the Euler scheme
:math:`Y_{k+1} = Y_k - h\nabla f(X_k) + s\,h^{1/\alpha} S_\alpha^{(k)}` with i.i.d. symmetric
:math:`\alpha`-stable :math:`S_\alpha` in the S1 parametrisation
(:class:`~optarium.problems.heavy_tail.AlphaStableNoise`: characteristic function
:math:`e^{-\lvert u\rvert^\alpha}`, so :math:`\alpha = 2` gives :math:`N(0, 2)`
increments per unit time and scale, i.e. :math:`L = \sqrt 2\,s\,B` for a Brownian motion :math:`B`).

**Guarantees** (the paper's, from the abstract): LMF reaches :math:`\varepsilon`-optimality in
:math:`O(\varepsilon^{-p/(p-1)})` time for convex :math:`f` and :math:`\tilde O(\varepsilon^{-1/(p-1)})` for
relatively strongly convex :math:`f`, with matching discrete-time guarantees for "several variants of SMD".
Which variants and step sizes were not found; the schedules the experiment uses (suggested by the spec, as
consistent with those rates) are :math:`\gamma_t = \gamma_0 t^{-1/p}` with the :math:`\gamma`-weighted
ergodic average :math:`\bar x_T = \sum_{t\le T}\gamma_t x_t / \sum_{t\le T}\gamma_t` (convex,
:math:`O(T^{-(p-1)/p})`) and :math:`\gamma_t = 1/(\mu(t + t_0))` with the last iterate (relatively strongly
convex, :math:`\tilde O(T^{-(p-1)})`).

What is here:

- :func:`mirror_descent`: the batched SMD simulator (seeds x settings as rows of one tensor program, float64,
  common random numbers, snapshots of the ergodic average); returns an :class:`optarium._core.Result` and
  joins the solver conformance suite (:func:`solver_cases`).
- :func:`levy_mirror_flow`: the Euler scheme of LMF, with hitting times of target levels.
- :class:`MirrorDescent`: the ``torch.optim.Optimizer`` (Euclidean: bit for bit ``torch.optim.SGD``
  unconstrained; entropic: every parameter is a stack of points of the simplex along its last dimension).
- The schedules :func:`power_step` (:math:`\gamma_0 t^{-1/p}`, p in (1, 2]) and :func:`strongly_convex_step`
  (:math:`1/(\mu(t + t_0))`); the Euclidean projection :func:`project_simplex`; the spec's test problem
  :func:`simplex_least_squares`.
- Robust statistics for infinite-variance experiments, where sample means are unstable: :func:`median`,
  :func:`trimmed_mean`, :func:`log_log_slope`, :func:`bootstrap_slopes`, and the tail-index estimator
  :func:`hill_estimator`.

The α-stable noise is :class:`optarium.problems.heavy_tail.AlphaStableNoise` (Chambers–Mallows–Stuck in torch,
checked against ``scipy.stats.levy_stable``, S1 parametrisation).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from optarium._core.result import Result
from optarium._core.solver import SolverCase, SolverLoop
from optarium._core.validation import (
    check_choice,
    check_in_range,
    check_int,
    check_nonnegative,
    check_positive,
    check_type,
)
from optarium.optim._dropin import DropInOptimizer, check_lr
from optarium.optim._nonfinite import check_nonfinite_policy, should_step

__all__ = [
    "INFEASIBLE_POLICIES",
    "MIRRORS",
    "VARIANTS",
    "Entropic",
    "Euclidean",
    "MirrorDescent",
    "MirrorMap",
    "bootstrap_slopes",
    "hill_estimator",
    "levy_mirror_flow",
    "log_log_slope",
    "make_mirror",
    "median",
    "mirror_descent",
    "power_step",
    "project_simplex",
    "simplex_least_squares",
    "solver_cases",
    "strongly_convex_step",
    "trimmed_mean",
]

#: Mirror maps by name (:func:`make_mirror`).
MIRRORS: tuple[str, ...] = ("euclidean", "entropic")
#: The two forms of mirror descent.
VARIANTS: tuple[str, ...] = ("greedy", "lazy")
#: What :class:`MirrorDescent` does with a parameter outside the mirror map's domain at its first step.
INFEASIBLE_POLICIES: tuple[str, ...] = ("raise", "project")


# ================================================================================================ mirror maps
def project_simplex(x: torch.Tensor) -> torch.Tensor:
    r"""The Euclidean projection of each last-dimension row of ``x`` onto the probability simplex.

    The sort-based rule (Held, Wolfe & Crowder 1974; Duchi et al. 2008): with :math:`u` sorted decreasingly
    and :math:`\rho = \max\{j : u_j - (\sum_{i\le j} u_i - 1)/j > 0\}`, the projection is
    :math:`\max(x - \theta, 0)` with :math:`\theta = (\sum_{i\le\rho} u_i - 1)/\rho`.
    """
    u = torch.sort(x, dim=-1, descending=True).values
    css = u.cumsum(-1) - 1
    j = torch.arange(1, x.shape[-1] + 1, dtype=x.dtype, device=x.device)
    rho = ((u - css / j) > 0).sum(-1, keepdim=True).clamp(min=1)
    theta = css.gather(-1, rho - 1) / rho.to(x.dtype)
    return torch.clamp(x - theta, min=0)


class MirrorMap:
    r"""A mirror map acting along the last dimension: the regulariser :math:`h`, :math:`\nabla h`, :math:`Q`.

    Iterates are kept in a *state* form (:meth:`to_state` / :meth:`from_state`): :math:`x` itself for
    :class:`Euclidean`, :math:`\log x` for :class:`Entropic`. Subclasses implement every method.
    """

    name: str = "mirror"

    def to_state(self, x: torch.Tensor) -> torch.Tensor:
        """The state form of a feasible ``x``."""
        raise NotImplementedError

    def from_state(self, s: torch.Tensor) -> torch.Tensor:
        """The primal point of a state."""
        raise NotImplementedError

    def dual(self, x: torch.Tensor) -> torch.Tensor:
        r""":math:`\nabla h(x)` (up to a constant that :math:`Q` ignores)."""
        raise NotImplementedError

    def state_from_dual(self, y: torch.Tensor) -> torch.Tensor:
        """The state of :math:`Q(y)`."""
        raise NotImplementedError

    def greedy(self, s: torch.Tensor, g: torch.Tensor, step: float | torch.Tensor) -> torch.Tensor:
        r"""The state of :math:`\arg\min_x \{\gamma\langle g, x\rangle + D_h(x, x_s)\}`."""
        raise NotImplementedError

    def project(self, y: torch.Tensor) -> torch.Tensor:
        r""":math:`Q(y) = \arg\max_{x\in X}\{\langle y, x\rangle - h(x)\}`."""
        return self.from_state(self.state_from_dual(y))

    def feasible(self, x: torch.Tensor, tol: float = 1e-9) -> torch.Tensor:
        """Per row (last dimension reduced): whether ``x`` lies in the domain, within ``tol``."""
        raise NotImplementedError

    def h(self, x: torch.Tensor) -> torch.Tensor:
        """The regulariser, per row."""
        raise NotImplementedError

    def bregman(self, x: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        r""":math:`D_h(x, z) = h(x) - h(z) - \langle\nabla h(z), x - z\rangle`, per row."""
        raise NotImplementedError

    @property
    def constrained(self) -> bool:
        """Whether :math:`Q` is not the identity."""
        return True


@dataclass(frozen=True)
class Euclidean(MirrorMap):
    r""":math:`h = \tfrac12\lVert x\rVert^2`; :math:`Q` projects onto :math:`\mathbb{R}^d` (default), the ball
    :math:`\lVert x\rVert_2 \le` ``radius`` or the box [``box[0]``, ``box[1]``]^d (give at most one).
    """

    radius: float | None = None
    box: tuple[float, float] | None = None
    name = "euclidean"

    def __post_init__(self) -> None:
        if self.radius is not None and self.box is not None:
            raise ValueError("radius: give a ball radius or a box, not both")
        if self.radius is not None:
            check_positive("radius", self.radius)
        if self.box is not None:
            if not isinstance(self.box, (tuple, list)) or len(self.box) != 2:
                raise ValueError(f"box: must be a pair (low, high), got {self.box!r}")
            lo = check_in_range("box", self.box[0], -math.inf, math.inf, low_inclusive=False,
                                high_inclusive=False)  # fmt: skip
            hi = check_in_range("box", self.box[1], -math.inf, math.inf, low_inclusive=False,
                                high_inclusive=False)  # fmt: skip
            if not lo < hi:
                raise ValueError(f"box: low must be < high, got {self.box!r}")
            object.__setattr__(self, "box", (lo, hi))

    @property
    def constrained(self) -> bool:
        """Whether a ball or a box is set."""
        return self.radius is not None or self.box is not None

    def _proj(self, y: torch.Tensor) -> torch.Tensor:
        if self.radius is not None:
            norm = torch.linalg.vector_norm(y, dim=-1, keepdim=True)
            return y * torch.clamp(self.radius / norm, max=1.0)
        if self.box is not None:
            return torch.clamp(y, self.box[0], self.box[1])
        return y

    def to_state(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` itself."""
        return x

    def from_state(self, s: torch.Tensor) -> torch.Tensor:
        """``s`` itself."""
        return s

    def dual(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` itself (:math:`\\nabla h(x) = x`)."""
        return x

    def state_from_dual(self, y: torch.Tensor) -> torch.Tensor:
        """The projection of ``y``."""
        return self._proj(y)

    def greedy(self, s: torch.Tensor, g: torch.Tensor, step: float | torch.Tensor) -> torch.Tensor:
        """Projected gradient step :math:`\\Pi(x - \\gamma g)`."""
        return self._proj(s - step * g)

    def feasible(self, x: torch.Tensor, tol: float = 1e-9) -> torch.Tensor:
        """Inside the ball / box (relative ``tol`` on the radius, absolute on the box), per row."""
        if self.radius is not None:
            return torch.linalg.vector_norm(x, dim=-1) <= self.radius * (1 + tol)
        if self.box is not None:
            return ((x >= self.box[0] - tol) & (x <= self.box[1] + tol)).all(-1)
        return torch.isfinite(x).all(-1)

    def h(self, x: torch.Tensor) -> torch.Tensor:
        """:math:`\\tfrac12\\lVert x\\rVert^2` per row."""
        return 0.5 * x.square().sum(-1)

    def bregman(self, x: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """:math:`\\tfrac12\\lVert x - z\\rVert^2` per row."""
        return 0.5 * (x - z).square().sum(-1)


@dataclass(frozen=True)
class Entropic(MirrorMap):
    r"""The negative entropy :math:`h = \sum_i x_i \log x_i` on the probability simplex (last dimension):
    :math:`Q(y) = \operatorname{softmax}(y)`, :math:`D_h = \operatorname{KL}`. States are :math:`\log x`."""

    name = "entropic"

    def to_state(self, x: torch.Tensor) -> torch.Tensor:
        """:math:`\\log x` (:math:`-\\infty` for a zero coordinate)."""
        return torch.log(x)

    def from_state(self, s: torch.Tensor) -> torch.Tensor:
        """:math:`e^s`."""
        return torch.exp(s)

    def dual(self, x: torch.Tensor) -> torch.Tensor:
        """:math:`\\log x` (:math:`\\nabla h = 1 + \\log x`; softmax ignores the constant)."""
        return torch.log(x)

    def state_from_dual(self, y: torch.Tensor) -> torch.Tensor:
        """:math:`\\log\\operatorname{softmax}(y)`, by ``logsumexp`` (stable for any finite ``y``)."""
        return torch.log_softmax(y, dim=-1)

    def greedy(self, s: torch.Tensor, g: torch.Tensor, step: float | torch.Tensor) -> torch.Tensor:
        """:math:`\\log x_+ = \\log\\operatorname{softmax}(\\log x - \\gamma g)`."""
        return torch.log_softmax(s - step * g, dim=-1)

    def feasible(self, x: torch.Tensor, tol: float = 1e-9) -> torch.Tensor:
        """Nonnegative with a sum within ``tol`` of 1, per row."""
        return (x >= 0).all(-1) & ((x.sum(-1) - 1).abs() <= tol)

    def h(self, x: torch.Tensor) -> torch.Tensor:
        """:math:`\\sum_i x_i\\log x_i` per row (:math:`0\\log 0 = 0`)."""
        return torch.xlogy(x, x).sum(-1)

    def bregman(self, x: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """:math:`\\operatorname{KL}(x\\,\\Vert\\,z) = \\sum_i x_i\\log(x_i/z_i)` per row (simplex points)."""
        return (torch.xlogy(x, x) - torch.xlogy(x, z)).sum(-1)


def make_mirror(mirror: str | MirrorMap | None) -> MirrorMap:
    """A mirror map from a name in :data:`MIRRORS`, an instance (returned as is) or ``None`` (Euclidean)."""
    if mirror is None:
        return Euclidean()
    if isinstance(mirror, MirrorMap):
        return mirror
    if isinstance(mirror, str):
        check_choice("mirror", mirror, MIRRORS)
        return Euclidean() if mirror == "euclidean" else Entropic()
    raise TypeError(f"mirror: must be a name in {MIRRORS} or a MirrorMap, got {type(mirror).__name__}")


# ======================================================================================= robust statistics
def median(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """The median along ``dim`` (the mean of the two middle values for an even count, as ``torch.quantile``).

    ``+inf`` entries are allowed (a diverged run counts as the largest value).
    """
    x = check_type("x", x, torch.Tensor)
    return torch.quantile(x, 0.5, dim=dim)


def trimmed_mean(x: torch.Tensor, trim: float = 0.05, dim: int = -1) -> torch.Tensor:
    """The mean after dropping ``floor(trim * n)`` smallest and as many largest values along ``dim``.

    ``trim`` in [0, 0.5); 0.05 is the "mean of the central 90 %".
    """
    x = check_type("x", x, torch.Tensor)
    trim = check_in_range("trim", trim, 0.0, 0.5, high_inclusive=False)
    n = x.shape[dim]
    k = math.floor(trim * n)
    s = torch.sort(x, dim=dim).values
    return s.narrow(dim, k, n - 2 * k).mean(dim)


def log_log_slope(ts: Sequence[float] | torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """Least-squares slope of ``log(values)`` on ``log(ts)`` along the last dimension (batched).

    ``ts``: the horizons (positive), one per entry of the last dimension of ``values`` (positive).
    """
    values = check_type("values", values, torch.Tensor)
    t = torch.as_tensor(ts, dtype=values.dtype, device=values.device)
    if t.ndim != 1 or t.numel() != values.shape[-1] or t.numel() < 2:
        raise ValueError(f"ts: one horizon per value ({values.shape[-1]}, at least 2), got {tuple(t.shape)}")
    if bool((t <= 0).any()):
        raise ValueError("ts: must be > 0")
    lx = t.log()
    lx = lx - lx.mean()
    ly = values.log()
    return (ly - ly.mean(-1, keepdim=True)).mul(lx).sum(-1) / lx.square().sum()


def bootstrap_slopes(
    errors: torch.Tensor,
    ts: Sequence[float] | torch.Tensor,
    *,
    n_boot: int = 200,
    generator: torch.Generator | None = None,
    statistic: str = "median",
    trim: float = 0.05,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The log-log slope of a robust statistic of the errors over seeds, and its bootstrap replicates.

    Args:
        errors: ``[..., n_snapshots, n_seeds]`` (e.g. f(x̄_T) - f* per horizon and seed). Seeds are resampled
            with replacement, the same resampled indices for every leading entry and every horizon (paired:
            with common random numbers across settings, differences of slopes keep their pairing).
        ts: the ``n_snapshots`` horizons.
        n_boot: number of resamples. generator: their stream.
        statistic: ``"median"`` or ``"trimmed_mean"`` (with ``trim``).

    Returns ``(slope [...], replicates [n_boot, ...])``; the bootstrap SE is ``replicates.std(0)``.
    """
    errors = check_type("errors", errors, torch.Tensor)
    if errors.ndim < 2:
        raise ValueError(f"errors: must be [..., n_snapshots, n_seeds], got shape {tuple(errors.shape)}")
    n_boot = check_int("n_boot", n_boot, minimum=1)
    check_choice("statistic", statistic, ("median", "trimmed_mean"))

    def stat(e: torch.Tensor) -> torch.Tensor:
        return median(e, -1) if statistic == "median" else trimmed_mean(e, trim, -1)

    slope = log_log_slope(ts, stat(errors))
    n = errors.shape[-1]
    idx = torch.randint(0, n, (n_boot, n), generator=generator, device=errors.device)
    reps = torch.stack([log_log_slope(ts, stat(errors[..., i])) for i in idx])
    return slope, reps


def hill_estimator(x: torch.Tensor, k: int) -> float:
    r"""Hill's estimate of the tail index :math:`\alpha` of :math:`P(\lvert X\rvert > u) \sim C u^{-\alpha}`
    from the ``k`` largest of :math:`\lvert x\rvert`: :math:`\hat\alpha = \big(\tfrac1k\sum_{i=1}^{k}
    \log(X_{(i)}/X_{(k+1)})\big)^{-1}` with :math:`X_{(1)} \ge X_{(2)} \ge \dots` (B. M. Hill, 1975)."""
    x = check_type("x", x, torch.Tensor)
    k = check_int("k", k, minimum=1, maximum=max(x.numel() - 1, 1))
    top = torch.topk(x.abs().flatten().double(), k + 1).values
    return float(1.0 / (top[:k] / top[k]).log().mean())


# ====================================================================================== the batched simulator
StepSize = float | Callable[[int], Any]


def power_step(gamma0: float | torch.Tensor, p: float | torch.Tensor) -> Callable[[int], Any]:
    r"""The convex schedule :math:`\gamma_t = \gamma_0 t^{-1/p}` (t = 1, 2, ...), for :func:`mirror_descent`.

    ``gamma0`` > 0 and ``p`` in (1, 2] (the noise's moment order): numbers, or tensors (one entry per setting,
    broadcast together; the result is then a tensor per step).
    """
    g0 = torch.as_tensor(gamma0, dtype=torch.float64) if isinstance(gamma0, torch.Tensor) else None
    pp = torch.as_tensor(p, dtype=torch.float64) if isinstance(p, torch.Tensor) else None
    if g0 is None:
        check_positive("gamma0", gamma0)
    elif not bool(torch.isfinite(g0).all()) or not bool((g0 > 0).all()):
        raise ValueError("gamma0: every entry must be finite and > 0")
    if pp is None:
        check_in_range("p", p, 1.0, 2.0, low_inclusive=False)
    elif not bool(((pp > 1) & (pp <= 2)).all()):
        raise ValueError(f"p: every entry must be in (1, 2], got {pp.tolist()}")
    if g0 is None and pp is None:
        g, q = float(gamma0), float(p)
        return lambda t: g * t ** (-1.0 / q)
    gt = gamma0 if isinstance(gamma0, torch.Tensor) else torch.tensor(float(gamma0), dtype=torch.float64)
    inv = -1.0 / (p if isinstance(p, torch.Tensor) else torch.tensor(float(p), dtype=torch.float64))
    return lambda t: gt * torch.pow(torch.tensor(float(t), dtype=inv.dtype, device=inv.device), inv)


def strongly_convex_step(mu: float, t0: float = 10.0) -> Callable[[int], float]:
    r"""The relatively strongly convex schedule :math:`\gamma_t = 1 / (\mu (t + t_0))` (``mu`` > 0,
    ``t0`` >= 0)."""
    mu = check_positive("mu", mu)
    t0 = check_nonnegative("t0", t0)
    return lambda t: 1.0 / (mu * (t + t0))


def _as_step(step: StepSize) -> Callable[[int], Any]:
    if callable(step):
        return step
    value = check_positive("step", step)
    return lambda t: value


def _check_step_value(value: Any) -> None:
    if isinstance(value, torch.Tensor):
        if not bool(torch.isfinite(value).all()) or not bool((value > 0).all()):
            raise ValueError("step: every step size must be finite and > 0")
    else:
        check_positive("step", value)


def _grad_fn(f: Callable[..., torch.Tensor], grad: Callable[..., Any] | None) -> Callable[..., Any]:
    if grad is not None:
        if not callable(grad):
            raise TypeError(f"grad: must be callable or None, got {type(grad).__name__}")
        return grad

    def autograd(x: torch.Tensor) -> torch.Tensor:
        with torch.enable_grad():
            z = x.detach().requires_grad_(True)
            (g,) = torch.autograd.grad(f(z).sum(), z)
        return g

    return autograd


def _check_x0(x0: Any, mirror: MirrorMap, tol: float, name: str = "x0") -> torch.Tensor:
    x0 = check_type(name, x0, torch.Tensor)
    if not x0.is_floating_point() or x0.ndim < 1 or x0.shape[-1] < 1:
        raise ValueError(f"{name}: must be a floating tensor [..., d], got {x0.dtype} {tuple(x0.shape)}")
    if not bool(torch.isfinite(x0).all()):
        raise ValueError(f"{name}: must be finite")
    if not bool(mirror.feasible(x0, tol).all()):
        raise ValueError(f"{name}: must lie in the domain of the {mirror.name} mirror map (within {tol:g})")
    return x0


def _median_all(v: torch.Tensor) -> float:
    v = v.flatten()
    v = torch.where(torch.isnan(v), torch.full_like(v, math.inf), v)
    return float(torch.quantile(v.double(), 0.5)) if v.numel() else math.nan


@torch.no_grad()
def mirror_descent(
    f: Callable[[torch.Tensor], torch.Tensor],
    x0: torch.Tensor,
    steps: int,
    *,
    grad: Callable[[torch.Tensor], torch.Tensor] | None = None,
    grad_at: str = "primal",
    mirror: str | MirrorMap | None = None,
    variant: str = "greedy",
    step: StepSize = 1e-2,
    noise: Any = None,
    n_seeds: int = 1,
    snapshots: Iterable[int] = (),
    seed: int = 0,
    generator: torch.Generator | None = None,
    tol: float | None = None,
    record_every: int | None = None,
    time_limit_s: float | None = None,
    chunk: int = 100,
    feasibility_tol: float = 1e-9,
    check: Callable[[], None] | None = None,
) -> Result:
    r"""Stochastic mirror descent, ``n_seeds`` noise seeds x the settings of ``x0``'s batch as one program.

    For :math:`t = 1, \dots, T` (``steps``): :math:`\hat g_t = \nabla f(x_t) + U_t`, then the lazy
    (:math:`y_{t+1} = y_t - \gamma_t\hat g_t,\ x_{t+1} = Q(y_{t+1})`, :math:`y_1 = \nabla h(x_1)`) or greedy
    (:math:`x_{t+1} = \arg\min\{\gamma_t\langle\hat g_t, x\rangle + D_h(x, x_t)\}`) update; the ergodic
    average :math:`\bar x_T = \sum_{t\le T}\gamma_t x_t / \sum_{t\le T}\gamma_t` is kept for every horizon in
    ``snapshots``. :math:`x_1` = ``x0``.

    Args:
        f: the objective, batched over leading dimensions (``[..., d] -> [...]``); used for the history, the
            result's value and (when ``grad`` is None) its gradient by autograd.
        x0: the start ``[d]`` or a batch of settings ``[..., d]`` (each row feasible for the mirror map).
        steps: :math:`T`, the number of updates (>= 0).
        grad: the exact gradient, batched like ``f`` (default: autograd of ``f(x).sum()``).
        grad_at: ``"primal"`` (default: ``grad(x)``) or ``"state"``: ``grad`` receives the mirror map's state
            form of :math:`x` (:math:`\log x` for the entropic map), for gradients with a
            :math:`\log x` term (a KL objective), which the primal point loses once a coordinate
            underflows to 0.
        mirror: ``"euclidean"`` (default), ``"entropic"`` or a :class:`MirrorMap` (``Euclidean(radius=r)``).
        variant: ``"greedy"`` (default) or ``"lazy"``.
        step: :math:`\gamma_t`: a number > 0, or ``step(t) -> float | Tensor`` (t = 1, 2, ...; a tensor is
            broadcast against the iterates ``[n_seeds, *x0.shape]``, e.g. of shape ``[*x0.shape[:-1], 1]``
            for one step size per setting).
        noise: additive gradient noise with ``sample(shape, generator, dtype=, device=)`` (e.g.
            :class:`~optarium.problems.heavy_tail.AlphaStableNoise`), or None (exact gradients). It is drawn
            ``chunk`` steps at a time with shape ``(n, n_seeds, *x0.shape)``.
        n_seeds: independent noise rows per setting.
        snapshots: horizons T (1 <= T <= steps) at which the ergodic average and the iterate are stored.
        seed: seeds the noise stream unless ``generator`` is given.
        tol: ``converged`` once the median over rows of ``f`` at the current iterate is <= ``tol`` (pass ``f``
            shifted by :math:`f^*` for a gap); None (default) runs all ``steps``.
        record_every: history interval (default ``max(1, steps // 100)``); the history records the medians
            over rows of :math:`f(x_t)` (``objective``) and :math:`f(\bar x_t)` (``ergodic_objective``; at
            step 0 the start).
        time_limit_s: solver-time budget (status ``timeout``).
        chunk: noise steps drawn per call of ``noise.sample`` (it fixes the stream's layout).
        feasibility_tol: tolerance of the domain check of ``x0``.
        check: called after every ``chunk`` steps (a deadline check, for instance).

    Returns a :class:`~optarium._core.Result`: ``x`` the iterates after ``steps`` updates
    ``[n_seeds, *x0.shape]``; ``value`` the median of ``f`` over them; ``extras``: ``snapshots`` (the
    horizons), ``ergodic`` and ``iterates`` (``[len(snapshots), n_seeds, *x0.shape]``: :math:`\bar x_T` and
    :math:`x_{T+1}`), ``weight_sum`` (:math:`\sum_t\gamma_t`), ``nonfinite_rows`` and, for the lazy variant,
    ``dual`` (:math:`y`). Status ``diverged`` when the median objective becomes non-finite or blows up.
    """
    mirror = make_mirror(mirror)
    variant = check_choice("variant", variant, VARIANTS)
    grad_at = check_choice("grad_at", grad_at, ("primal", "state"))
    if grad_at == "state" and grad is None:
        raise ValueError("grad_at: 'state' needs an explicit grad (autograd differentiates f at x)")
    steps = check_int("steps", steps, minimum=0)
    n_seeds = check_int("n_seeds", n_seeds, minimum=1)
    chunk = check_int("chunk", chunk, minimum=1)
    feasibility_tol = check_nonnegative("feasibility_tol", feasibility_tol)
    if not callable(f):
        raise TypeError(f"f: must be callable, got {type(f).__name__}")
    x0 = _check_x0(x0, mirror, feasibility_tol)
    gfun = _grad_fn(f, grad)
    step_fn = _as_step(step)
    if noise is not None and not callable(getattr(noise, "sample", None)):
        raise TypeError(f"noise: must have a sample(shape, generator) method, got {type(noise).__name__}")
    snaps = sorted({check_int("snapshots", int(s), minimum=1, maximum=max(steps, 1)) for s in snapshots})
    if snaps and snaps[-1] > steps:
        raise ValueError(f"snapshots: must be <= steps = {steps}, got {snaps[-1]}")
    if record_every is None:
        record_every = max(1, steps // 100)
    if generator is None:
        generator = torch.Generator(device=x0.device).manual_seed(check_int("seed", seed, minimum=0))
    elif not isinstance(generator, torch.Generator):
        raise TypeError(f"generator: must be a torch.Generator, got {type(generator).__name__}")

    dtype, device = x0.dtype, x0.device
    shape = (n_seeds, *x0.shape)
    # lazy: the dual y is the state and x = Q(y) (softmax for the entropic map: exact for any finite y, and
    # an underflowed coordinate of x is harmless since y keeps it); greedy: the mirror map's state form
    y = mirror.dual(x0).expand(shape).clone() if variant == "lazy" else None
    cur = [mirror.project(y) if y is not None else mirror.to_state(x0).expand(shape).clone()]

    def current() -> torch.Tensor:
        return cur[0] if y is not None else mirror.from_state(cur[0])

    acc = torch.zeros(shape, dtype=dtype, device=device)
    wsum: torch.Tensor = torch.zeros((), dtype=dtype, device=device)
    erg: list[torch.Tensor] = []
    its: list[torch.Tensor] = []
    snapset = set(snaps)
    u: torch.Tensor | None = None
    first = True

    record_every = check_int("record_every", record_every, minimum=1)
    loop = SolverLoop(
        steps, tol=tol, criterion="objective", record_every=record_every, time_limit_s=time_limit_s,
        watch=("objective",),
    )  # fmt: skip

    def evaluate(k: int) -> dict[str, float]:
        obj = _median_all(f(current()))
        ergo = obj if k == 0 else _median_all(f(acc / wsum))
        return {"objective": obj, "ergodic_objective": ergo}

    for t in loop.iterate(evaluate):
        i = (t - 1) % chunk
        if noise is not None and i == 0:
            n = min(chunk, steps - t + 1)
            u = noise.sample((n, *shape), generator, dtype=dtype, device=device)
        x = current()
        if grad_at == "primal":
            g = gfun(x)
        else:
            g = gfun(mirror.state_from_dual(y) if y is not None else cur[0])
        if u is not None:
            g = g + u[i]
        gam = step_fn(t)
        if first:
            _check_step_value(gam)
            first = False
        if isinstance(gam, torch.Tensor):
            gam = gam.to(dtype=dtype, device=device)
            acc.addcmul_(x, gam)
        else:
            acc.add_(x, alpha=gam)
        wsum = wsum + gam
        if y is not None:
            if isinstance(gam, torch.Tensor):
                y.addcmul_(g, gam, value=-1.0)
            else:
                y.add_(g, alpha=-gam)
            cur[0] = mirror.project(y)
        else:
            cur[0] = mirror.greedy(cur[0], g, gam)
        if t in snapset:
            erg.append(acc / wsum)
            its.append(current().clone())
        if check is not None and i == chunk - 1:
            check()
    x_final = current().clone()
    bad = ~torch.isfinite(x_final).all(-1)
    empty = torch.zeros((0, *shape), dtype=dtype, device=device)
    extras: dict[str, Any] = {
        "snapshots": tuple(snaps[: len(erg)]),
        "ergodic": torch.stack(erg) if erg else empty,
        "iterates": torch.stack(its) if its else empty.clone(),
        "weight_sum": torch.as_tensor(wsum, dtype=dtype, device=device).clone(),
        "nonfinite_rows": int(bad.sum()),
        "mirror": mirror.name,
        "variant": variant,
    }
    if y is not None:
        extras["dual"] = y.clone()
    return loop.result(x_final, value=lambda: _median_all(f(x_final)), extras=extras)


# ======================================================================================== Lévy mirror flow
@torch.no_grad()
def levy_mirror_flow(
    f: Callable[[torch.Tensor], torch.Tensor],
    x0: torch.Tensor,
    horizon: float,
    *,
    h: float = 1e-2,
    alpha: float = 2.0,
    scale: float = 1.0,
    mirror: str | MirrorMap | None = None,
    n_paths: int = 1,
    grad: Callable[[torch.Tensor], torch.Tensor] | None = None,
    targets: Sequence[float] = (),
    record_every: int | None = None,
    record_paths: int = 0,
    seed: int = 0,
    generator: torch.Generator | None = None,
    time_limit_s: float | None = None,
    chunk: int = 100,
    feasibility_tol: float = 1e-9,
    check: Callable[[], None] | None = None,
) -> Result:
    r"""Euler scheme of the Lévy mirror flow :math:`dY = -\nabla f(X)\,dt + dL,\ X = Q(Y)`, for ``n_paths``.

    :math:`Y_0 = \nabla h(x_0)`, :math:`Y_{k+1} = Y_k - h\nabla f(X_k) + s\,h^{1/\alpha} S^{(k)}` with i.i.d.
    symmetric :math:`\alpha`-stable coordinates :math:`S^{(k)}` (S1: characteristic function
    :math:`e^{-\lvert u\rvert^\alpha}`; :math:`\alpha = 2` is :math:`N(0, 2)`, so the driver is
    :math:`\sqrt2\,s` times a Brownian motion), :math:`X_k = Q(Y_k)`, for
    :math:`k < K =` ``round(horizon / h)``.

    Args:
        f: objective, batched over leading dimensions; grad: its gradient (default: autograd).
        x0: the start ``[d]`` or ``[..., d]`` (feasible). horizon: final time (> 0). h: Euler step (> 0).
        alpha: stability index in (0, 2]. scale: :math:`s` > 0.
        mirror: as in :func:`mirror_descent`.
        n_paths: independent paths per start.
        targets: levels :math:`\ell`; the hitting time :math:`\inf\{t_k : f(X_{t_k}) \le \ell\}` is recorded
            per path (``inf`` if never within the horizon).
        record_every: history and path interval in Euler steps (default ``max(1, K // 100)``).
        record_paths: how many paths' :math:`X` trajectories to store at the recorded times.
        seed, generator, time_limit_s, chunk, feasibility_tol, check: as in :func:`mirror_descent`.

    Returns a :class:`~optarium._core.Result` with ``x`` = :math:`X_K` ``[n_paths, *x0.shape]``, ``value`` the
    median of :math:`f(X_K)`, history ``objective`` (median of :math:`f(X)` over paths) and ``extras``: ``y``
    (:math:`Y_K`), ``times`` and ``paths`` (recorded :math:`X` of the first ``record_paths`` paths),
    ``targets`` and ``hit_times`` ``[len(targets), n_paths, *x0.shape[:-1]]``, ``h``, ``n_steps``.
    """
    from optarium.problems.heavy_tail import AlphaStableNoise

    mirror = make_mirror(mirror)
    horizon = check_positive("horizon", horizon)
    h = check_positive("h", h)
    alpha = check_in_range("alpha", alpha, 0.0, 2.0, low_inclusive=False)
    scale = check_positive("scale", scale)
    n_paths = check_int("n_paths", n_paths, minimum=1)
    record_paths = check_int("record_paths", record_paths, minimum=0, maximum=n_paths)
    chunk = check_int("chunk", chunk, minimum=1)
    feasibility_tol = check_nonnegative("feasibility_tol", feasibility_tol)
    if not callable(f):
        raise TypeError(f"f: must be callable, got {type(f).__name__}")
    levels = [float(v) for v in targets]
    if any(math.isnan(v) for v in levels):
        raise ValueError("targets: must not be NaN")
    x0 = _check_x0(x0, mirror, feasibility_tol)
    gfun = _grad_fn(f, grad)
    n_steps = max(1, round(horizon / h))
    if record_every is None:
        record_every = max(1, n_steps // 100)
    record_every = check_int("record_every", record_every, minimum=1)
    if generator is None:
        generator = torch.Generator(device=x0.device).manual_seed(check_int("seed", seed, minimum=0))
    noise = AlphaStableNoise(alpha=alpha, scale=scale * h ** (1.0 / alpha))
    dtype, device = x0.dtype, x0.device
    shape = (n_paths, *x0.shape)
    y = mirror.dual(x0).expand(shape).clone()
    x = mirror.project(y)
    hits = torch.full((len(levels), *shape[:-1]), math.inf, dtype=dtype, device=device)
    level_t = torch.tensor(levels, dtype=dtype, device=device).view(-1, *([1] * (len(shape) - 1)))
    times: list[float] = [0.0]
    paths: list[torch.Tensor] = [x[:record_paths].clone()]

    def mark(k: int, xk: torch.Tensor) -> None:
        if levels:
            fx = f(xk)
            reached = (fx.unsqueeze(0) <= level_t) & torch.isinf(hits)
            hits.masked_fill_(reached, k * h)

    mark(0, x)
    loop = SolverLoop(n_steps, record_every=record_every, time_limit_s=time_limit_s, watch=("objective",))
    u: torch.Tensor | None = None
    current = [x]
    for k in loop.iterate(lambda k: {"objective": _median_all(f(current[0]))}):
        i = (k - 1) % chunk
        if i == 0:
            u = noise.sample((min(chunk, n_steps - k + 1), *shape), generator, dtype=dtype, device=device)
        assert u is not None
        y.add_(gfun(x), alpha=-h).add_(u[i])
        x = mirror.project(y)
        current[0] = x
        mark(k, x)
        if record_paths and (k % record_every == 0 or k == n_steps):
            times.append(k * h)
            paths.append(x[:record_paths].clone())
        if check is not None and i == chunk - 1:
            check()
    extras = {
        "y": y.clone(),
        "times": torch.tensor(times, dtype=dtype, device=device),
        "paths": torch.stack(paths),
        "targets": tuple(levels),
        "hit_times": hits,
        "h": h,
        "n_steps": n_steps,
        "alpha": alpha,
        "scale": scale,
    }
    x_final = x.clone()
    return loop.result(x_final, value=lambda: _median_all(f(x_final)), extras=extras)


# ============================================================================================ test problem
def simplex_least_squares(seed: int = 0) -> dict[str, torch.Tensor]:
    r"""The levy-mirror spec's test problem: :math:`\tfrac12\lVert Ax - b\rVert^2` over the simplex
    :math:`\Delta_{20}`, A (30 x 20) Gaussian, b = A x_true + N(0, 0.01²), x_true ~ Dirichlet(1), all drawn
    from ``seed``. Returns A, b, x_true, Q = AᵀA, c = Aᵀb, x_star and f_star (float64).

    x* by projected gradient (step 1/L, 4000 steps; the condition number is about 100), polished by the
    KKT solve on its support.
    """
    g = torch.Generator().manual_seed(check_int("seed", seed, minimum=0))
    a = torch.randn(30, 20, generator=g, dtype=torch.float64)
    e = torch.empty(20, dtype=torch.float64).exponential_(generator=g)
    x_true = e / e.sum()  # Dirichlet(1)
    b = a @ x_true + 0.01 * torch.randn(30, generator=g, dtype=torch.float64)
    q, c = a.T @ a, a.T @ b
    lip = float(torch.linalg.eigvalsh(q)[-1])
    x = torch.full((20,), 1 / 20, dtype=torch.float64)
    for _ in range(4000):
        x = project_simplex(x - (x @ q - c) / lip)
    support = x > 1e-12
    s = int(support.sum())
    kkt = torch.zeros(s + 1, s + 1, dtype=torch.float64)
    kkt[:s, :s] = q[support][:, support]
    kkt[:s, s] = 1.0
    kkt[s, :s] = 1.0
    rhs = torch.cat([c[support], torch.ones(1, dtype=torch.float64)])
    sol = torch.linalg.solve(kkt, rhs)
    polished = torch.zeros(20, dtype=torch.float64)
    polished[support] = sol[:s]
    if bool((polished >= 0).all()):
        x = polished
    f = lambda z: 0.5 * ((z @ a.T - b) ** 2).sum(-1)  # noqa: E731
    return {"A": a, "b": b, "x_true": x_true, "Q": q, "c": c, "x_star": x, "f_star": f(x)}


# ========================================================================================= torch optimizer
class MirrorDescent(DropInOptimizer):
    r"""Mirror descent as a ``torch.optim.Optimizer``, per parameter along its last dimension:
    :math:`x_{t+1} = \arg\min_x\{\gamma\langle g_t, x\rangle + D_h(x, x_t)\}` (greedy) or dual averaging
    (lazy).

    Args:
        params: parameters or param groups (a group may carry its own ``lr`` and ``maximize``).
        lr: :math:`\gamma`, finite and >= 0 (default 1e-2; schedulable as usual).
        mirror: ``"euclidean"`` (default; with no constraint this is ``torch.optim.SGD`` without momentum, bit
            for bit), ``"entropic"`` (every parameter is a stack of points of the probability simplex along
            its last dimension: exponentiated gradient, computed in log space) or a :class:`MirrorMap`
            (``Euclidean(radius=r)``: each last-dimension row projected onto the ball; or a box).
        variant: ``"greedy"`` (default; no state for the Euclidean map) or ``"lazy"`` (keeps the dual
            variable ``y`` per parameter in ``state["dual"]``, initialised to :math:`\nabla h(x)` at the first
            step; for the unconstrained Euclidean map it is SGD as well and keeps no state).
        infeasible: what the first step does with a parameter outside the mirror map's domain (entropic: not
            nonnegative with last-dimension sums of 1 within ``feasibility_tol``): ``"raise"`` (default;
            ``ValueError`` naming ``params``, before any parameter moves) or ``"project"`` (Euclidean
            projection onto the simplex first). A constrained Euclidean map needs no check (steps project).
        feasibility_tol: the tolerance of that check (default 1e-6).
        maximize: ascend instead of descend.
        foreach: ``torch._foreach_*`` for the Euclidean update (default None: yes); False: per tensor.
        nonfinite: ``"raise"`` (default), ``"skip"`` or ``"off"``: the family's NaN/inf gradient policy.

    The entropic map refuses complex parameters (``ValueError`` naming ``params``), and every map refuses
    sparse gradients (``ValueError`` naming ``grad``). Later steps do not re-check feasibility: the entropic
    update keeps each row on the simplex (nonnegative, sum 1 to rounding) by construction.

    Example:
        >>> import torch
        >>> w = torch.full((3, 4), 0.25, requires_grad=True)      # three points of the simplex
        >>> opt = MirrorDescent([w], lr=0.5, mirror="entropic")
        >>> (w * torch.arange(4.0)).sum().backward()
        >>> opt.step()
        >>> bool(torch.allclose(w.sum(-1), torch.ones(3)))
        True
    """

    config_attrs = ("mirror", "variant", "infeasible", "feasibility_tol", "foreach", "nonfinite",
                    "skipped_steps")  # fmt: skip

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-2,
        *,
        mirror: str | MirrorMap = "euclidean",
        variant: str = "greedy",
        infeasible: str = "raise",
        feasibility_tol: float = 1e-6,
        maximize: bool = False,
        foreach: bool | None = None,
        nonfinite: str = "raise",
    ) -> None:
        lr = check_lr(lr)
        self.mirror = make_mirror(mirror)
        self.variant = check_choice("variant", variant, VARIANTS)
        self.infeasible = check_choice("infeasible", infeasible, INFEASIBLE_POLICIES)
        self.feasibility_tol = check_nonnegative("feasibility_tol", feasibility_tol)
        check_type("maximize", maximize, bool)
        if foreach is not None:
            check_type("foreach", foreach, bool)
        self.foreach = foreach
        self.nonfinite = check_nonfinite_policy(nonfinite)
        self.skipped_steps = 0
        super().__init__(params, {"lr": lr, "maximize": maximize})
        if isinstance(self.mirror, Entropic) or self.mirror.constrained:
            for group in self.param_groups:
                for p in group["params"]:
                    if p.is_complex():
                        raise ValueError(f"params: the {self.mirror.name} mirror map needs real parameters")

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group; its own ``lr`` and ``maximize`` are validated like the constructor's."""
        if "lr" in param_group:
            check_lr(param_group["lr"], "param_group['lr']")
        if "maximize" in param_group:
            check_type("param_group['maximize']", param_group["maximize"], bool)
        super().add_param_group(param_group)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load groups and state; every loaded group's ``lr`` is validated."""
        for i, group in enumerate(state_dict["param_groups"]):
            check_lr(group.get("lr", self.defaults["lr"]), f"param_groups[{i}]['lr']")
        super().load_state_dict(state_dict)

    def _first_visit(self, p: torch.Tensor) -> None:
        """Feasibility check (entropic) and dual initialisation (lazy) on a parameter's first step."""
        state = self.state[p]
        if isinstance(self.mirror, Entropic):
            x = p.detach()
            if p.ndim == 0 or not bool(self.mirror.feasible(x, self.feasibility_tol).all()):
                if self.infeasible == "raise" or p.ndim == 0:
                    raise ValueError(
                        "params: the entropic mirror map needs each parameter's last-dimension rows on the "
                        f"probability simplex (>= 0, sum 1 within {self.feasibility_tol:g}); pass "
                        "infeasible='project' to project them first"
                    )
                p.copy_(project_simplex(x))
        state["step"] = 0
        if self.variant == "lazy":
            state["dual"] = self.mirror.dual(p.detach()).clone()

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:  # type: ignore[override]
        """One mirror step. Evaluates ``closure`` (if given) first; returns its loss or None."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        groups = [(group, params, [p.grad for p in params]) for group, params in self._groups_with_grads()]
        grads = [g for _, _, gs in groups for g in gs]
        if not grads:
            return loss
        if not should_step(type(self).__name__, grads, self.nonfinite):
            self.skipped_steps += 1
            return loss
        plain = isinstance(self.mirror, Euclidean) and not self.mirror.constrained
        if not plain:
            for _, params, _ in groups:
                for p in params:
                    if len(self.state[p]) == 0:
                        self._first_visit(p)
        for group, params, gs in groups:
            lr = group["lr"]
            alpha = lr if group["maximize"] else -lr
            if not plain and float(lr) == 0.0:  # a frozen group (torch's rule): not even a rounding change
                continue
            if plain:  # torch.optim.SGD without momentum, the same kernels
                if self.foreach is False:
                    for p, g in zip(params, gs, strict=True):
                        p.add_(g if not group["maximize"] else -g, alpha=-lr)
                else:
                    if group["maximize"]:
                        gs = torch._foreach_neg(gs)
                    torch._foreach_add_(params, gs, alpha=-lr)
                continue
            for p, g in zip(params, gs, strict=True):
                state = self.state[p]
                state["step"] += 1
                if self.variant == "lazy":
                    y = state["dual"]
                    y.add_(g, alpha=alpha)
                    p.copy_(self.mirror.project(y))
                elif isinstance(self.mirror, Entropic):
                    p.copy_(torch.softmax(torch.log(p) + alpha * g, dim=-1))
                else:
                    p.copy_(self.mirror.greedy(p, g, -alpha))
        return loss


# ============================================================================================ solver cases
def _case_problem(dtype: torch.dtype, device: Any) -> tuple[torch.Tensor, torch.Tensor]:
    c = torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=dtype, device=device)  # interior: f* = 0 at x = c
    x0 = torch.full((4,), 0.25, dtype=dtype, device=device)
    return c, x0


def _case_solve(*, dtype: torch.dtype, device: Any, seed: int, **overrides: Any) -> Result:
    from optarium.problems.heavy_tail import AlphaStableNoise

    c, x0 = _case_problem(dtype, device)
    kwargs: dict[str, Any] = {
        "mirror": "entropic", "variant": "lazy", "step": 0.5, "n_seeds": 1, "snapshots": (5,),
        "tol": 1e-12 if dtype == torch.float64 else 1e-9, "seed": seed,
    }  # fmt: skip
    kwargs.update(overrides)
    steps = kwargs.pop("steps", 400)
    noisy = kwargs.pop("noisy", False)
    if noisy:
        kwargs["noise"] = AlphaStableNoise(alpha=1.5, scale=1e-3)
        kwargs["tol"] = None
    return mirror_descent(lambda x: 0.5 * (x - c).square().sum(-1), x0, steps, grad=lambda x: x - c, **kwargs)


def _case_gap(res: Result) -> float:
    c, _ = _case_problem(res.x.dtype, res.x.device)
    return float(0.5 * (res.x - c).square().sum(-1).max())


def solver_cases() -> list[SolverCase]:
    """The case of :func:`mirror_descent` for :mod:`optarium.testing.solvers`: entropic SMD (lazy) on
    :math:`\\tfrac12\\lVert x - c\\rVert^2` over the simplex with an interior minimiser :math:`c`."""
    return [
        SolverCase(
            name="levy-mirror-smd",
            solve=_case_solve,
            statuses={
                "converged": {},
                "max_iter": {"steps": 5, "tol": None},
                # Euclidean SGD with step 10 on a 1-smooth quadratic: |x - c| grows 9x per step
                "diverged": {"mirror": "euclidean", "step": 10.0, "tol": None, "steps": 400},
                "timeout": {"time_limit_s": 0.0, "tol": None},
            },
            max_iter=5,
            tolerance_holds=lambda r: _case_gap(r) <= (1e-12 if r.x.dtype == torch.float64 else 1e-9),
            optimality=_case_gap,
            optimality_tol=1e-9,
            invalid=[
                ({"step": 0.0}, "step"),
                ({"step": -1.0}, "step"),
                ({"variant": "eager"}, "variant"),
                ({"mirror": "spherical"}, "mirror"),
                ({"n_seeds": 0}, "n_seeds"),
                ({"snapshots": (10_000,)}, "snapshots"),
                ({"steps": -1}, "steps"),
            ],
            determinism={"noisy": True, "n_seeds": 3, "steps": 50},
            stochastic=True,
        )
    ]
